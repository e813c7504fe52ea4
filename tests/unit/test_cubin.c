/*
 * test_cubin.c - img_cubin_parse on cubins built by nvcc for sm_86, sm_90,
 * sm_90a and sm_120 (tests/fixtures/params.cu states the facts), on an ABI V1
 * header, and on malformed variants: truncated (every prefix says so), a
 * section that runs past the end, wrong machine, unknown ABI, a .nv.info
 * record that runs past its section, a parameter that lies about where it
 * ends.
 */
#include <elf.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../core/image/image.h"
#include "fixture.h"

static const struct img_kernel *must_find(const struct img_cubin *c, const char *name)
{
	const struct img_kernel *k = img_cubin_find(c, name);

	assert_non_null(k);
	return k;
}

/* check_params_facts - what tests/fixtures/params.cu promises, on any arch. */
static void check_params_facts(const struct img_cubin *c)
{
	const struct img_kernel *k;

	assert_int_equal(c->n_kernels, 5);

	k = must_find(c, "k_params");
	assert_int_equal(k->static_smem, 4096);
	assert_int_equal(k->static_smem_section, 4096 + c->reserved_smem);
	assert_int_equal(k->dynamic_smem, -1);
	assert_int_equal(k->max_threads[0], 256);
	assert_int_equal(k->param_bytes, 40);
	assert_int_equal(k->n_params, 4);
	assert_int_equal(k->params_v2, 0);
	assert_int_equal(k->params[0].ordinal, 0);
	assert_int_equal(k->params[0].offset, 0);
	assert_int_equal(k->params[0].size, 8);
	assert_int_equal(k->params[1].offset, 8);
	assert_int_equal(k->params[1].size, 4);
	assert_int_equal(k->params[2].offset, 12);
	assert_int_equal(k->params[2].size, 1);
	assert_int_equal(k->params[3].offset, 16);
	assert_int_equal(k->params[3].size, 24);
	assert_true(k->regs > 0 && k->regs <= 255);

	k = must_find(c, "k_big");
	assert_int_equal(k->params_v2, 1);
	assert_int_equal(k->n_params, 2);
	assert_int_equal(k->params[0].size, 8);
	assert_int_equal(k->params[1].offset, 8);
	assert_int_equal(k->params[1].size, 5000);
	assert_int_equal(k->param_bytes, 5008);
	assert_int_equal(k->static_smem, 0);

	k = must_find(c, "k_dyn");
	assert_int_equal(k->dynamic_smem, 65536);
	assert_int_equal(k->static_smem, 0);
	assert_int_equal(must_find(c, "k_huge")->dynamic_smem, 106496);
	assert_int_equal(must_find(c, "k_static48k")->static_smem, 48000);
	assert_null(img_cubin_find(c, "no_such_kernel"));
}

static void parse_fixture(const char *name, struct img_cubin *c)
{
	struct sm_err err;
	size_t len;
	unsigned char *buf = fixture_read(name, &len);
	int rc = img_cubin_parse(buf, len, name, c, &err);

	if (rc)
		fail_msg("%s: %s", name, err.msg);
	free(buf);
}

/*
 * The same source built by nvcc 13.0 for four targets: all ABI V2, all CUDA
 * 13.0; sm_90+ reserve 1 KiB per block (in .nv.shared.<k>), sm_86 does not.
 */
static void test_nvcc_targets(void **state)
{
	static const struct {
		const char *fixture;
		int sm;
		char variant;
		uint32_t reserved;
	} t[] = {
		{ "params.sm_86.cubin", 86, 0, 0 },
		{ "params.sm_90.cubin", 90, 0, 1024 },
		{ "params.sm_90a.cubin", 90, 'a', 1024 },
		{ "params.sm_120.cubin", 120, 0, 1024 },
	};
	struct img_cubin c;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		parse_fixture(t[i].fixture, &c);
		assert_int_equal(c.abi, 2);
		assert_int_equal(c.sm, t[i].sm);
		assert_int_equal(c.variant, t[i].variant);
		assert_int_equal(c.reserved_smem, t[i].reserved);
		assert_int_equal(c.relocatable, 0);
		assert_int_equal(c.cuda_api, 130);
		check_params_facts(&c);
		img_cubin_free(&c);
		assert_int_equal(c.n_kernels, 0);
	}
}

/* An ABI V1 header (OSABI 0x33, ABI version 7, SM in e_flags bits 0-7). */
static void test_abi_v1_header(void **state)
{
	struct img_cubin c;
	struct sm_err err;
	size_t len;
	unsigned char *buf = fixture_read("params.sm_90.cubin", &len);
	uint32_t flags = 0x005a0d5a; /* sm_90a as written by ptxas 12.8: 0x800 = 'a' */

	(void)state;
	buf[7] = 0x33;
	buf[8] = 7;
	memcpy(buf + 48, &flags, 4);
	assert_int_equal(img_cubin_parse(buf, len, "v1", &c, &err), 0);
	assert_int_equal(c.abi, 1);
	assert_int_equal(c.sm, 90);
	assert_int_equal(c.variant, 'a');
	check_params_facts(&c);
	img_cubin_free(&c);
	free(buf);
}

static void test_unknown_abi(void **state)
{
	struct img_cubin c;
	struct sm_err err;
	size_t len;
	unsigned char *buf = fixture_read("params.sm_120.cubin", &len);

	(void)state;
	buf[7] = 0x42;
	buf[8] = 9;
	assert_int_equal(img_cubin_parse(buf, len, "future.cubin", &c, &err), -ENOTSUP);
	assert_non_null(strstr(err.msg, "future.cubin"));
	assert_non_null(strstr(err.msg, "unknown cubin ABI (OSABI 0x42, ABI version 9)"));
	assert_int_equal(c.n_kernels, 0);
	free(buf);
}

static void test_wrong_machine(void **state)
{
	struct img_cubin c;
	struct sm_err err;
	size_t len;
	unsigned char *buf = fixture_read("params.sm_120.cubin", &len);

	(void)state;
	buf[18] = 62; /* EM_X86_64 */
	buf[19] = 0;
	assert_int_equal(img_cubin_parse(buf, len, "x.cubin", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not EM_CUDA"));
	free(buf);
}

/*
 * Every prefix of a real cubin is rejected as truncated, naming the cubin;
 * never parsed as a cubin with fewer kernels, never "no symbol table".
 */
static void test_truncated(void **state)
{
	struct img_cubin c;
	struct sm_err err;
	size_t len, cut;
	unsigned char *buf = fixture_read("params.sm_120.cubin", &len);

	(void)state;
	for (cut = 0; cut < len; cut += (cut < 128 ? 1 : 97)) {
		unsigned char *part = malloc(cut ? cut : 1);

		memcpy(part, buf, cut);
		assert_int_equal(img_cubin_parse(part, cut, "cut.cubin", &c, &err), -EINVAL);
		assert_int_equal(c.n_kernels, 0);
		if (!strstr(err.msg, "cut.cubin: truncated ELF"))
			fail_msg("cut at %zu: %s", cut, err.msg);
		free(part);
	}
	/* One byte short: nvcc writes the program header table last. */
	assert_int_equal(img_cubin_parse(buf, len - 1, "short.cubin", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "short.cubin: truncated ELF: the program header table"));
	/* Cut in half: the section header table is gone. */
	assert_int_equal(img_cubin_parse(buf, len / 2, "half.cubin", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "half.cubin: truncated ELF"));
	assert_null(strstr(err.msg, "symbol table"));
	free(buf);
}

/* A section header whose bytes would lie past the end: named, by index and name. */
static void test_section_past_end(void **state)
{
	struct img_cubin c;
	struct sm_err err;
	size_t len;
	unsigned char *buf = fixture_read("params.sm_120.cubin", &len);
	Elf64_Ehdr eh;
	Elf64_Shdr sh;
	uint16_t i;

	(void)state;
	memcpy(&eh, buf, sizeof(eh));
	for (i = 1; i < eh.e_shnum; i++) {
		memcpy(&sh, buf + eh.e_shoff + i * sizeof(sh), sizeof(sh));
		if (sh.sh_type == SHT_SYMTAB)
			break;
	}
	assert_true(i < eh.e_shnum);
	sh.sh_offset = len - 8; /* 8 bytes left for a table of several symbols */
	memcpy(buf + eh.e_shoff + i * sizeof(sh), &sh, sizeof(sh));
	assert_int_equal(img_cubin_parse(buf, len, "lying.cubin", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "lying.cubin: truncated ELF: section "));
	assert_non_null(strstr(err.msg, "(.symtab, "));
	assert_non_null(strstr(err.msg, "runs past the end"));
	free(buf);
}

/* The KPARAM_INFO record of k_params: SVAL (4), id 0x17, 12 bytes, ordinal 3. */
static const unsigned char kparam_ord3[] = { 0x04, 0x17, 0x0c, 0x00, 0, 0, 0, 0, 0x03, 0x00, 0x10, 0x00 };

static void test_nvinfo_overrun(void **state)
{
	struct img_cubin c;
	struct sm_err err;
	size_t len;
	unsigned char *buf = fixture_read("params.sm_120.cubin", &len);
	unsigned char *rec = memfind(buf, len, kparam_ord3, sizeof(kparam_ord3));

	(void)state;
	assert_non_null(rec);
	rec[2] = 0xff; /* the record now claims 0x00ff payload bytes */
	rec[3] = 0x00;
	assert_int_equal(img_cubin_parse(buf, len, "lying.cubin", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "lying.cubin: .nv.info.k_params is truncated"));
	free(buf);
}

static void test_param_past_block(void **state)
{
	struct img_cubin c;
	struct sm_err err;
	size_t len;
	unsigned char *buf = fixture_read("params.sm_120.cubin", &len);
	unsigned char *rec = memfind(buf, len, kparam_ord3, sizeof(kparam_ord3));

	(void)state;
	assert_non_null(rec);
	rec[10] = 0xf0; /* parameter 3 now claims offset 0xf0 in a 40-byte block */
	assert_int_equal(img_cubin_parse(buf, len, "lying.cubin", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "parameter 3 (offset 240, 24 bytes) ends past the 40-byte"));
	free(buf);
}

/*
 * A real Triton 3.6 cubin (tests/fixtures/triton36, compiled on an H200 by
 * Triton's bundled ptxas 12.8): ABI V1, sm_90a, params a, b, c, M, N, K and
 * the two scratch pointers Triton appends, REQNTID 256 (8 warps).
 */
static void test_triton36_v1(void **state)
{
	struct img_cubin c;
	struct sm_err err;
	const struct img_kernel *k;
	static const uint32_t off[8] = { 0, 8, 16, 24, 28, 32, 40, 48 };
	static const uint32_t size[8] = { 8, 8, 8, 4, 4, 4, 8, 8 };
	FILE *f = fopen("tests/fixtures/triton36/mm_big.cubin", "rb");
	unsigned char buf[65536];
	size_t len;
	uint32_t i;

	(void)state;
	assert_non_null(f);
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (img_cubin_parse(buf, len, "mm_big.cubin", &c, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(c.abi, 1);
	assert_int_equal(c.sm, 90);
	assert_int_equal(c.variant, 'a');
	assert_int_equal(c.n_kernels, 1);
	k = must_find(&c, "mm_big");
	assert_int_equal(k->n_params, 8);
	for (i = 0; i < 8; i++) {
		assert_int_equal(k->params[i].ordinal, i);
		assert_int_equal(k->params[i].offset, off[i]);
		assert_int_equal(k->params[i].size, size[i]);
	}
	assert_int_equal(k->param_bytes, 56);
	assert_int_equal(k->reqntid[0], 256);
	assert_int_equal(k->static_smem, 0);
	assert_int_equal(k->regs, 110);
	assert_int_equal(k->dynamic_smem, -1); /* the cubin alone does not say */
	img_cubin_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nvcc_targets),
		cmocka_unit_test(test_abi_v1_header),
		cmocka_unit_test(test_unknown_abi),
		cmocka_unit_test(test_wrong_machine),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_section_past_end),
		cmocka_unit_test(test_nvinfo_overrun),
		cmocka_unit_test(test_param_past_block),
		cmocka_unit_test(test_triton36_v1),
	};

	return cmocka_run_group_tests_name("cubin", tests, NULL, NULL);
}

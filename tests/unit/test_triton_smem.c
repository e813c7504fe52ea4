/*
 * test_triton_smem.c - the fused-MoE shared-memory formula (core/limits/
 * triton_smem.c) against Triton: every row of the committed table of real
 * Triton 3.6 compiles of SGLang's and vLLM's kernels
 * (tests/fixtures/configs/triton_smem_measured.tsv, written by
 * tests/oracle/moe_smem.py; $SM120_SMEM_TABLE overrides the path; flag nov3:
 * compiled with DISABLE_MMA_V3=1, k=K: the INT4 kernel's compiled-in K), the
 * shim's rule tiles, the dtype table and the swap_ab choice.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../core/limits/triton_smem.h"

static const char *table_path(void)
{
	const char *p = getenv("SM120_SMEM_TABLE");

	return p ? p : "tests/fixtures/configs/triton_smem_measured.tsv";
}

/* tile_of - the tile one dtype gives, block scales @gn x @gk (0 0: none). */
static struct triton_moe_tile tile_of(int sm, const char *dtype, uint32_t bm, uint32_t bn,
				      uint32_t bk, uint32_t warps, uint32_t stages)
{
	const struct triton_moe_dtype *d = triton_moe_dtype_find(dtype);
	struct triton_moe_tile t = { 0 };

	assert_non_null(d);
	t.sm = sm;
	t.kernel = d->kernel;
	t.a_bytes = d->a_bytes;
	t.b_bits = d->b_bits;
	t.block_m = bm;
	t.block_n = bn;
	t.block_k = bk;
	t.num_warps = warps;
	t.num_stages = stages;
	t.swap_ab = triton_moe_swap_ab(sm, d, bm, bn);
	return t;
}

/* The tiles the shipped rules reroute, at the sizes rules/fused_moe.json gives. */
static void test_rule_tiles(void **state)
{
	struct triton_moe_tile t;

	(void)state;
	t = tile_of(120, "fp8_w8a8", 128, 256, 128, 8, 4);
	assert_int_equal(triton_moe_smem(&t), 147456);
	t.sm = 90;
	assert_int_equal(triton_moe_smem(&t), 196608);
	t.group_n = t.group_k = 128;
	t.b_scale_vector = 1;
	assert_int_equal(triton_moe_smem(&t), 197632);
	t.sm = 120;
	assert_int_equal(triton_moe_smem(&t), 148480);
	t = tile_of(120, "", 128, 256, 64, 8, 4);
	assert_int_equal(triton_moe_smem(&t), 147456);
	t = tile_of(120, "int4_w4a16", 128, 256, 128, 8, 4);
	assert_int_equal(t.kernel, TRITON_MOE_GPTQ_AWQ);
	assert_int_equal(triton_moe_smem(&t), 163840);
	t.sm = 90;
	assert_int_equal(triton_moe_smem(&t), 196608);
	/* DISABLE_MMA_V3: sm_90 allocates as mma.sync does, SM120's sizes */
	t.no_mma_v3 = 1;
	assert_int_equal(triton_moe_smem(&t), 163840);
	t = tile_of(90, "fp8_w8a8", 128, 256, 128, 8, 4);
	t.no_mma_v3 = 1;
	assert_int_equal(triton_moe_smem(&t), 147456);
	t.group_n = t.group_k = 128;
	t.b_scale_vector = 1;
	assert_int_equal(triton_moe_smem(&t), 148480);
}

static void test_dtypes_and_swap(void **state)
{
	const struct triton_moe_dtype *d;
	struct triton_moe_tile t;

	(void)state;
	assert_non_null(triton_moe_dtype_find(NULL));
	assert_int_equal(triton_moe_dtype_find("")->a_bytes, 2);
	assert_int_equal(triton_moe_dtype_find("int8_w8a16")->b_bits, 8);
	assert_null(triton_moe_dtype_find("float8"));
	assert_null(triton_moe_dtype_find("bf16"));
	assert_string_equal(triton_moe_kernel_name(TRITON_MOE_GPTQ_AWQ),
			    "fused_moe_kernel_gptq_awq");
	d = triton_moe_dtype_find("fp8_w8a8");
	assert_true(triton_moe_swap_ab(90, d, 16, 128));
	assert_false(triton_moe_swap_ab(120, d, 16, 128));
	assert_false(triton_moe_swap_ab(90, d, 64, 128));
	assert_false(triton_moe_swap_ab(90, d, 16, 32));
	assert_false(triton_moe_swap_ab(90, triton_moe_dtype_find(""), 16, 128));
	/* Unmodelled architectures and empty tiles give 0, never a guess. */
	t = tile_of(100, "fp8_w8a8", 128, 256, 128, 8, 4);
	assert_int_equal(triton_moe_smem(&t), 0);
	t = tile_of(120, "fp8_w8a8", 0, 256, 128, 8, 4);
	assert_int_equal(triton_moe_smem(&t), 0);
	/* One stage: no ring, one buffer of each operand. */
	t = tile_of(120, "", 16, 64, 64, 4, 1);
	assert_int_equal(triton_moe_smem(&t), 10240);
	/* 2 bytes of A a thread: no cp.async, A keeps one buffer. */
	t = tile_of(120, "fp8_w8a8", 16, 128, 32, 8, 4);
	assert_int_equal(triton_moe_smem(&t), 12800);
}

/* row_tile - a table row's tile; 0, or -1 (with @why) when the row does not parse. */
static int row_tile(char *line, struct triton_moe_tile *t, uint64_t *want, char *why, size_t n)
{
	char *f[11], *save = NULL, *flag, *fsave = NULL;
	const struct triton_moe_dtype *d;
	unsigned k;
	int i;

	for (i = 0; i < 11; i++) {
		f[i] = strtok_r(i ? NULL : line, "\t\n", &save);
		if (!f[i]) {
			snprintf(why, n, "has %d fields, not 11", i);
			return -1;
		}
	}
	/* src arch kernel dtype flags BM BN BK warps stages shared */
	d = triton_moe_dtype_find(strcmp(f[3], "bf16") == 0 ? "" : f[3]);
	if (!d) {
		snprintf(why, n, "dtype %s is not in the formula's table", f[3]);
		return -1;
	}
	memset(t, 0, sizeof(*t));
	t->sm = atoi(f[1]);
	t->kernel = d->kernel;
	t->a_bytes = d->a_bytes;
	t->b_bits = d->b_bits;
	t->block_m = (uint32_t)atoi(f[5]);
	t->block_n = (uint32_t)atoi(f[6]);
	t->block_k = (uint32_t)atoi(f[7]);
	t->num_warps = (uint32_t)atoi(f[8]);
	t->num_stages = (uint32_t)atoi(f[9]);
	*want = strtoull(f[10], NULL, 10);
	if (strcmp(f[2], triton_moe_kernel_name(d->kernel)) != 0) {
		snprintf(why, n, "kernel %s, the dtype table says %s", f[2],
			 triton_moe_kernel_name(d->kernel));
		return -1;
	}
	for (flag = strtok_r(f[4], ",", &fsave); flag; flag = strtok_r(NULL, ",", &fsave)) {
		if (sscanf(flag, "block=%ux%u", &t->group_n, &t->group_k) == 2)
			t->b_scale_vector = strncmp(f[0], "vllm", 4) == 0 || t->block_n > t->group_n;
		else if (strcmp(flag, "tma") == 0)
			t->tma_a = t->tma_b = 1;
		else if (strcmp(flag, "tmab") == 0)
			t->tma_b = 1;
		else if (strcmp(flag, "swap") == 0)
			t->swap_ab = 1;
		else if (strcmp(flag, "nov3") == 0)
			t->no_mma_v3 = 1;
		else if (sscanf(flag, "k=%u", &k) == 1 && t->block_k)
			t->k_steps = (k + t->block_k - 1) / t->block_k;
		else if (strcmp(flag, "pc") != 0 && strcmp(flag, "-") != 0) {
			snprintf(why, n, "unknown flag %s", flag);
			return -1;
		}
	}
	if (t->swap_ab != triton_moe_swap_ab(t->sm, d, t->block_m, t->block_n)) {
		snprintf(why, n, "swap_ab %d where the frameworks choose %d", t->swap_ab,
			 !t->swap_ab);
		return -1;
	}
	return 0;
}

static void test_measured_table(void **state)
{
	char line[512], copy[512], why[128];
	unsigned long rows = 0, wrong = 0, lineno = 0;
	FILE *f = fopen(table_path(), "r");

	(void)state;
	if (!f)
		fail_msg("%s: %s (run make test from the repository root, or set "
			 "SM120_SMEM_TABLE)", table_path(), strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		struct triton_moe_tile t;
		uint64_t want, got;

		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		snprintf(copy, sizeof(copy), "%s", line);
		if (row_tile(line, &t, &want, why, sizeof(why)) != 0) {
			print_error("%s:%lu: %s\n", table_path(), lineno, why);
			wrong++;
			continue;
		}
		rows++;
		got = triton_moe_smem(&t);
		if (got != want) {
			print_error("%s:%lu: formula %llu B, Triton %llu B: %s", table_path(),
				    lineno, (unsigned long long)got, (unsigned long long)want, copy);
			wrong++;
		}
	}
	fclose(f);
	print_message("%lu measured configurations, %lu differ from the formula\n", rows, wrong);
	assert_true(rows > 100);
	assert_int_equal(wrong, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rule_tiles),
		cmocka_unit_test(test_dtypes_and_swap),
		cmocka_unit_test(test_measured_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

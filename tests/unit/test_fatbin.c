/*
 * test_fatbin.c - the fatbin walker on containers nvcc wrote uncompressed,
 * zstd-compressed and LZ4-compressed, and on malformed ones: wrong magic,
 * sizes that run past the buffer, a lying uncompressed size, corrupt streams.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../core/image/image.h"
#include "fixture.h"

struct walked {
	int n;
	uint16_t kind[8];
	uint32_t arch[8];
	enum img_compression comp[8];
	uint32_t kernels[8];   /* kernels parsed from the inflated ELF entries */
	int rc;                /* last iterator result */
};

static void walk(const unsigned char *buf, size_t len, struct walked *w, struct sm_err *err)
{
	struct img_fatbin_iter it;
	struct img_fatbin_entry e;

	memset(w, 0, sizeof(*w));
	img_fatbin_iter_init(&it, buf, len);
	while ((w->rc = img_fatbin_iter_next(&it, &e, "t.fatbin", err)) == 1 && w->n < 8) {
		w->kind[w->n] = e.kind;
		w->arch[w->n] = e.arch;
		w->comp[w->n] = e.compression;
		if (e.kind == IMG_ENTRY_ELF) {
			void *img;
			size_t img_len;
			struct img_cubin c;

			assert_int_equal(img_fatbin_entry_inflate(&e, &img, &img_len, "t", err), 0);
			assert_int_equal(img_len, e.uncompressed_len ? e.uncompressed_len : e.payload_len);
			assert_int_equal(img_cubin_parse(img, img_len, "t", &c, err), 0);
			assert_int_equal(c.sm, e.arch);
			w->kernels[w->n] = c.n_kernels;
			assert_int_equal(img_cubin_find(&c, "k_params")->static_smem, 4096);
			img_cubin_free(&c);
			free(img);
		} else {
			void *ptx;
			size_t ptx_len;

			assert_int_equal(img_fatbin_entry_inflate(&e, &ptx, &ptx_len, "t", err), 0);
			assert_non_null(memfind(ptx, ptx_len, ".entry k_params", 15));
			free(ptx);
		}
		w->n++;
	}
}

static void check_layout(const char *name, enum img_compression elf_comp,
			 enum img_compression ptx_comp)
{
	struct walked w;
	struct sm_err err;
	size_t len;
	unsigned char *buf = fixture_read(name, &len);

	walk(buf, len, &w, &err);
	if (w.rc < 0)
		fail_msg("%s: %s", name, err.msg);
	assert_int_equal(w.n, 3);
	assert_int_equal(w.kind[0], IMG_ENTRY_ELF);
	assert_int_equal(w.arch[0], 90);
	assert_int_equal(w.comp[0], elf_comp);
	assert_int_equal(w.kernels[0], 5);
	assert_int_equal(w.kind[1], IMG_ENTRY_ELF);
	assert_int_equal(w.arch[1], 120);
	assert_int_equal(w.comp[1], elf_comp);
	assert_int_equal(w.kernels[1], 5);
	assert_int_equal(w.kind[2], IMG_ENTRY_PTX);
	assert_int_equal(w.arch[2], 120);
	assert_int_equal(w.comp[2], ptx_comp);
	assert_int_equal(img_fatbin_size(buf), len);
	free(buf);
}

/* nvcc's default: ELF stored plain, PTX zstd. */
static void test_default(void **state)
{
	(void)state;
	check_layout("params.fatbin", IMG_COMP_NONE, IMG_COMP_ZSTD);
}

static void test_zstd(void **state)
{
	(void)state;
	check_layout("params.zstd.fatbin", IMG_COMP_ZSTD, IMG_COMP_ZSTD);
}

static void test_lz4(void **state)
{
	(void)state;
	check_layout("params.lz4.fatbin", IMG_COMP_LZ4, IMG_COMP_LZ4);
}

/* Two containers back to back with zero padding between, as in .nv_fatbin. */
static void test_concatenated(void **state)
{
	struct walked w;
	struct sm_err err;
	size_t len;
	unsigned char *one = fixture_read("params.zstd.fatbin", &len);
	unsigned char *two = calloc(1, 2 * len + 16);

	(void)state;
	memcpy(two, one, len);
	memcpy(two + len + 16, one, len);
	walk(two, 2 * len + 16, &w, &err);
	assert_int_equal(w.rc, 0);
	assert_int_equal(w.n, 6);
	free(one);
	free(two);
}

static void test_bad_magic(void **state)
{
	struct walked w;
	struct sm_err err;
	size_t len;
	unsigned char *buf = fixture_read("params.fatbin", &len);

	(void)state;
	buf[0] ^= 0xff;
	walk(buf, len, &w, &err);
	assert_int_equal(w.rc, -EINVAL);
	assert_int_equal(w.n, 0);
	assert_non_null(strstr(err.msg, "t.fatbin: bytes at offset 0 are not a fatbin container"));
	assert_int_equal(img_fatbin_size(buf), 0);
	free(buf);
}

static void test_container_size_lies(void **state)
{
	struct walked w;
	struct sm_err err;
	size_t len;
	unsigned char *buf = fixture_read("params.fatbin", &len);
	uint64_t fat = len; /* header + len > len */
	char want[160];

	(void)state;
	memcpy(buf + 8, &fat, 8);
	walk(buf, len, &w, &err);
	assert_int_equal(w.rc, -EINVAL);
	snprintf(want, sizeof(want), "it spans %zu bytes (16 of header, %zu of entries) but only "
		 "%zu remain", len + 16, len, len);
	assert_non_null(strstr(err.msg, want));
	free(buf);
}

/*
 * A container cut by one byte: the message compares like with like (what
 * the container spans from its first byte, what remains from there), so
 * the claim is the larger number.
 */
static void test_container_cut(void **state)
{
	struct walked w;
	struct sm_err err;
	size_t len;
	unsigned char *buf = fixture_read("params.lz4.fatbin", &len);
	char want[200];

	(void)state;
	walk(buf, len - 1, &w, &err);
	assert_int_equal(w.rc, -EINVAL);
	assert_int_equal(w.n, 0);
	snprintf(want, sizeof(want), "t.fatbin: fatbin container 0 at byte 0 is cut short: it "
		 "spans %zu bytes (16 of header, %zu of entries) but only %zu remain",
		 len, len - 16, len - 1);
	assert_string_equal(err.msg, want);
	walk(buf, 10, &w, &err);
	assert_non_null(strstr(err.msg, "only 10 bytes of its 16-byte header remain"));
	free(buf);
}

static void test_entry_size_lies(void **state)
{
	struct walked w;
	struct sm_err err;
	size_t len;
	unsigned char *buf = fixture_read("params.fatbin", &len);
	uint64_t huge = 1ull << 40;

	(void)state;
	memcpy(buf + 16 + 8, &huge, 8); /* first entry's payload_size */
	walk(buf, len, &w, &err);
	assert_int_equal(w.rc, -EINVAL);
	assert_int_equal(w.n, 0);
	assert_non_null(strstr(err.msg, "entry 0"));
	assert_non_null(strstr(err.msg, "runs past its container"));
	free(buf);
}

/* A compressed size larger than the payload it sits in. */
static void test_compressed_size_lies(void **state)
{
	struct walked w;
	struct sm_err err;
	size_t len;
	unsigned char *buf = fixture_read("params.zstd.fatbin", &len);
	uint64_t psize;
	uint32_t csize;

	(void)state;
	memcpy(&psize, buf + 16 + 8, 8);
	csize = (uint32_t)psize + 1;
	memcpy(buf + 16 + 16, &csize, 4);
	walk(buf, len, &w, &err);
	assert_int_equal(w.rc, -EINVAL);
	assert_non_null(strstr(err.msg, "compressed bytes in a"));
	free(buf);
}

/* A compressed entry whose uncompressed size is off by one, and one whose
 * stream is garbage: both refused, neither read nor written out of bounds. */
static void test_inflate_lies(void **state)
{
	struct img_fatbin_iter it;
	struct img_fatbin_entry e;
	struct sm_err err;
	void *out;
	size_t out_len, len;
	const char *names[] = { "params.zstd.fatbin", "params.lz4.fatbin" };
	int i;

	(void)state;
	for (i = 0; i < 2; i++) {
		unsigned char *buf = fixture_read(names[i], &len);

		img_fatbin_iter_init(&it, buf, len);
		assert_int_equal(img_fatbin_iter_next(&it, &e, names[i], &err), 1);
		assert_int_not_equal(e.compression, IMG_COMP_NONE);
		e.uncompressed_len += 1;
		assert_int_equal(img_fatbin_entry_inflate(&e, &out, &out_len, names[i], &err), -EINVAL);
		assert_null(out);
		e.uncompressed_len -= 2;
		assert_int_equal(img_fatbin_entry_inflate(&e, &out, &out_len, names[i], &err), -EINVAL);
		e.uncompressed_len += 1;
		memset((unsigned char *)e.payload + 4, 0xa5, 64);
		assert_int_equal(img_fatbin_entry_inflate(&e, &out, &out_len, names[i], &err), -EINVAL);
		assert_non_null(strstr(err.msg, "corrupt"));
		e.uncompressed_len = 0;
		assert_int_equal(img_fatbin_entry_inflate(&e, &out, &out_len, names[i], &err), -EINVAL);
		free(buf);
	}
}

/* Every prefix of a compressed container: clean errors, never a crash. */
static void test_truncated(void **state)
{
	struct sm_err err;
	size_t len, cut;
	unsigned char *buf = fixture_read("params.lz4.fatbin", &len);

	(void)state;
	for (cut = 0; cut < len; cut += (cut < 200 ? 1 : 61)) {
		struct img_fatbin_iter it;
		struct img_fatbin_entry e;
		unsigned char *part = malloc(cut ? cut : 1);
		int rc;

		memcpy(part, buf, cut);
		img_fatbin_iter_init(&it, part, cut);
		while ((rc = img_fatbin_iter_next(&it, &e, "cut", &err)) == 1) {
			void *out;
			size_t out_len;

			if (img_fatbin_entry_inflate(&e, &out, &out_len, "cut", &err) == 0)
				free(out);
		}
		assert_true(rc == 0 || rc == -EINVAL);
		free(part);
	}
	free(buf);
}

/* In-process images: sized from their headers, as the driver sizes them. */
static void test_in_process_sizes(void **state)
{
	const char *names[] = { "params.sm_90.cubin", "params.sm_120.cubin", "params.fatbin",
				"params.lz4.fatbin" };
	const char *ptx = "//\n.version 8.7\n.target sm_90\n.visible .entry k() { ret; }\n";
	struct {
		uint32_t magic, version;
		const void *data;
		void *filename;
	} wrapper = { IMG_WRAPPER_MAGIC, 1, NULL, NULL };
	size_t len, got;
	const void *fat;
	int i;

	(void)state;
	for (i = 0; i < 4; i++) {
		unsigned char *buf = fixture_read(names[i], &len);

		assert_int_equal(img_image_size(buf), len);
		if (buf[0] != 0x7f) {
			wrapper.data = buf;
			fat = img_wrapper_fatbin(&wrapper, &got);
			assert_ptr_equal(fat, buf);
			assert_int_equal(got, len);
			assert_int_equal(img_image_size(&wrapper), 0);
		}
		free(buf);
	}
	assert_int_equal(img_image_size(ptx), strlen(ptx) + 1);
	wrapper.data = "not a container";
	assert_null(img_wrapper_fatbin(&wrapper, &got));
	assert_int_equal(got, 0);
	assert_null(img_wrapper_fatbin("\x00\x00\x00\x00\x00\x00\x00\x00", &got));
	assert_int_equal(img_image_size("\x01\x02\x03\x04\x05\x06\x07\x08"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default),
		cmocka_unit_test(test_zstd),
		cmocka_unit_test(test_lz4),
		cmocka_unit_test(test_concatenated),
		cmocka_unit_test(test_bad_magic),
		cmocka_unit_test(test_container_size_lies),
		cmocka_unit_test(test_container_cut),
		cmocka_unit_test(test_entry_size_lies),
		cmocka_unit_test(test_compressed_size_lies),
		cmocka_unit_test(test_inflate_lies),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_in_process_sizes),
	};

	return cmocka_run_group_tests_name("fatbin", tests, NULL, NULL);
}

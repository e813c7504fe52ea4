/*
 * test_loaded.c - the loaded-image registry: which cubin of a fatbin the
 * device runs, facts copied out of images the caller frees, deferred parsing
 * of preserved images, files, PTX-only images, malformed images and unloads.
 * Fixtures: params.cu built by nvcc (see tests/fixtures/params.cu).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../shim/state/loaded.h"
#include "fixture.h"

static char owners[16]; /* distinct fake handles */

static void test_runs_on(void **state)
{
	(void)state;
	assert_true(loaded_runs_on(90, 0, 90));
	assert_true(loaded_runs_on(90, 'a', 90));
	assert_true(loaded_runs_on(120, 0, 121));
	assert_false(loaded_runs_on(120, 'a', 121)); /* 'a' only on the exact SM */
	assert_false(loaded_runs_on(121, 0, 120));   /* newer minor */
	assert_false(loaded_runs_on(90, 0, 120));    /* other major */
	assert_false(loaded_runs_on(86, 0, 90));
	assert_true(loaded_runs_on(100, 'f', 103));
	assert_false(loaded_runs_on(0, 0, 90));
}

/* find - facts of @name under @owner, asserting it is found. */
static struct loaded_facts find(void *owner, const char *name)
{
	struct loaded_facts f;
	struct sm_err err;
	char origin[64];

	assert_int_equal(loaded_find(owner, name, &f, origin, sizeof(origin), &err), 0);
	return f;
}

static void test_cubin_copied_at_load(void **state)
{
	size_t len;
	unsigned char *img = fixture_read("params.sm_90.cubin", &len);
	struct loaded_summary sum;
	struct loaded_facts f;
	struct sm_err err;
	char origin[64];

	(void)state;
	assert_int_equal(loaded_add(&owners[0], img, len, 90, 0, "triton cubin", &sum, &err), 0);
	assert_int_equal(sum.kind, IMG_KIND_CUBIN);
	assert_false(sum.deferred);
	assert_int_equal(sum.sm, 90);
	assert_int_equal(sum.n_kernels, 5);
	memset(img, 0, len); /* the caller frees its bytes: the facts must survive */
	free(img);
	assert_int_equal(loaded_find(&owners[0], "k_params", &f, origin, sizeof(origin), &err), 0);
	assert_string_equal(origin, "triton cubin");
	assert_int_equal(f.static_smem, 4096);
	assert_int_equal(f.n_params, 4);
	assert_int_equal(f.param_bytes, 40);
	assert_int_equal(f.params[3].offset, 16);
	assert_int_equal(f.params[3].size, 24);
	assert_int_equal(f.sm, 90);
	free(f.params);
	f = find(&owners[0], "k_huge");
	assert_int_equal(f.dynamic_smem, 106496);
	free(f.params);
	assert_int_equal(loaded_find(&owners[0], "no_such_kernel", &f, NULL, 0, &err), -ENOENT);
	assert_int_equal(loaded_find(&owners[1], "k_params", &f, NULL, 0, &err), -ENOENT);
	loaded_drop(&owners[0]);
	assert_int_equal(loaded_find(&owners[0], "k_params", &f, NULL, 0, &err), -ENOENT);
}

/* Which fatbin entry: sm_120 ELF on 12.0 and 12.1, sm_90 on 9.0, none (PTX) on 8.6. */
static void test_fatbin_entry_for_device(void **state)
{
	static const struct {
		const char *fixture;
		int device_sm, expect_sm;
	} cases[] = {
		{ "params.fatbin", 120, 120 },      { "params.fatbin", 121, 120 },
		{ "params.fatbin", 90, 90 },        { "params.zstd.fatbin", 120, 120 },
		{ "params.lz4.fatbin", 90, 90 },    { "params.fatbin", 86, 0 },
		{ "params.fatbin", 100, 0 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len;
		unsigned char *img = fixture_read(cases[i].fixture, &len);
		struct loaded_summary sum;
		struct loaded_facts f;
		struct sm_err err;

		assert_int_equal(loaded_add(&owners[2], img, len, cases[i].device_sm, 0, cases[i].fixture,
					    &sum, &err), 0);
		assert_int_equal(sum.kind, IMG_KIND_FATBIN);
		assert_int_equal(sum.sm, cases[i].expect_sm);
		free(img);
		if (cases[i].expect_sm) {
			f = find(&owners[2], "k_params");
			assert_int_equal(f.sm, cases[i].expect_sm);
			assert_int_equal(f.n_params, 4);
			free(f.params);
		} else {
			assert_int_equal(sum.n_kernels, -1);
			assert_int_equal(loaded_find(&owners[2], "k_params", &f, NULL, 0, &err),
					 -ENOENT);
		}
	}
	loaded_drop(&owners[2]);
}

/* A preserved image is parsed on the first lookup, from the caller's bytes. */
static void test_preserved_deferred(void **state)
{
	size_t len;
	unsigned char *img = fixture_read("params.zstd.fatbin", &len);
	struct loaded_summary sum;
	struct loaded_facts f;
	struct sm_err err;

	(void)state;
	assert_int_equal(loaded_add(&owners[3], img, len, 120, 1, "lib.so+0x10", &sum, &err), 0);
	assert_true(sum.deferred);
	assert_int_equal(sum.n_kernels, -1);
	f = find(&owners[3], "k_dyn");
	assert_int_equal(f.sm, 120);
	assert_int_equal(f.dynamic_smem, 65536);
	free(f.params);
	f = find(&owners[3], "k_static48k");
	assert_int_equal(f.static_smem, 48000);
	free(f.params);
	loaded_drop(&owners[3]);
	free(img);
}

/* A preserved image that turns out malformed: reported once, then no facts. */
static void test_deferred_malformed(void **state)
{
	size_t len;
	unsigned char *img = fixture_read("params.fatbin", &len);
	unsigned char *copy = malloc(len);
	struct loaded_facts f;
	struct sm_err err;
	size_t i;

	(void)state;
	memcpy(copy, img, len);
	/* Corrupt every ELF magic inside the container: the entries stay, their cubins do not. */
	for (i = 0; i + 4 <= len; i++)
		if (memcmp(copy + i, "\x7f" "ELF", 4) == 0)
			copy[i + 1] = 'X';
	assert_int_equal(loaded_add(&owners[4], copy, len, 90, 1, "bad.so+0x0", NULL, &err), 0);
	assert_int_not_equal(loaded_find(&owners[4], "k_params", &f, NULL, 0, &err), 0);
	assert_non_null(strstr(err.msg, "sm_90"));
	assert_int_equal(loaded_find(&owners[4], "k_params", &f, NULL, 0, &err), -ENOENT);
	loaded_drop(&owners[4]);
	free(copy);
	free(img);
}

static void test_file_and_ptx(void **state)
{
	static const char ptx[] = "//\n.version 8.7\n.target sm_120\n.address_size 64\n";
	struct loaded_summary sum;
	struct loaded_facts f;
	struct sm_err err;

	(void)state;
	assert_int_equal(loaded_add_file(&owners[5], fixture_path("params.sm_120.cubin"), 120, &sum,
					 &err), 0);
	assert_int_equal(sum.sm, 120);
	f = find(&owners[5], "k_big");
	assert_int_equal(f.n_params, 2);
	assert_true(f.param_bytes > 4096);
	free(f.params);
	assert_true(loaded_add_file(&owners[6], "/nonexistent/x.cubin", 120, &sum, &err) < 0);
	assert_non_null(strstr(err.msg, "/nonexistent/x.cubin"));
	assert_int_equal(loaded_add(&owners[7], ptx, sizeof(ptx), 120, 0, "ptx", &sum, &err), 0);
	assert_int_equal(sum.kind, IMG_KIND_PTX);
	assert_int_equal(loaded_find(&owners[7], "k_params", &f, NULL, 0, &err), -ENOENT);
	assert_int_equal(loaded_add(&owners[8], "garbage!", 9, 120, 0, "junk", &sum, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "junk"));
	loaded_drop(&owners[5]);
	loaded_drop(&owners[6]);
	loaded_drop(&owners[7]);
	loaded_drop(&owners[8]);
}

/* The same owner loaded again (handle reused by the driver): the new image wins. */
static void test_owner_reused(void **state)
{
	size_t l90, l120;
	unsigned char *a = fixture_read("params.sm_90.cubin", &l90);
	unsigned char *b = fixture_read("params.sm_120.cubin", &l120);
	struct loaded_facts f;

	(void)state;
	assert_int_equal(loaded_add(&owners[9], a, l90, 90, 0, "first", NULL, NULL), 0);
	assert_int_equal(loaded_add(&owners[9], b, l120, 120, 0, "second", NULL, NULL), 0);
	f = find(&owners[9], "k_params");
	assert_int_equal(f.sm, 120);
	free(f.params);
	loaded_drop(&owners[9]);
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runs_on),
		cmocka_unit_test(test_cubin_copied_at_load),
		cmocka_unit_test(test_fatbin_entry_for_device),
		cmocka_unit_test(test_preserved_deferred),
		cmocka_unit_test(test_deferred_malformed),
		cmocka_unit_test(test_file_and_ptx),
		cmocka_unit_test(test_owner_reused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_target.c - the profile table, byte-count targets, limits read from a
 * device (through a fake attribute getter), and the fit decision.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../core/limits/target.h"

static void test_profiles(void **state)
{
	struct target_limits t;
	struct sm_err err;

	(void)state;
	assert_int_equal(target_parse("sm120", &t, &err), 0);
	assert_int_equal(t.optin_per_block, 101376);
	assert_int_equal(t.per_sm, 102400);
	assert_int_equal(t.reserved_per_block, 1024);
	assert_int_equal(t.sm, 120);
	assert_int_equal(target_parse("sm86", &t, &err), 0);
	assert_int_equal(t.optin_per_block, 101376);
	assert_int_equal(target_parse("sm89", &t, &err), 0);
	assert_int_equal(t.per_sm, t.optin_per_block + t.reserved_per_block);
	assert_int_equal(target_parse("sm90", &t, &err), 0);
	assert_int_equal(t.optin_per_block, 232448);
}

static void test_bytes(void **state)
{
	struct target_limits t;
	struct sm_err err;

	(void)state;
	assert_int_equal(target_parse("232448", &t, &err), 0);
	assert_int_equal(t.optin_per_block, 232448);
	assert_int_equal(t.per_sm, 233472);
	assert_string_equal(t.name, "232448 B");
	assert_int_equal(target_parse("sm999", &t, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "unknown target 'sm999'"));
	assert_non_null(strstr(err.msg, "sm120"));
	assert_int_equal(target_parse("-5", &t, &err), -EINVAL);
	assert_int_equal(target_parse("12abc", &t, &err), -EINVAL);
	assert_int_equal(target_parse("", &t, &err), -EINVAL);
	assert_int_equal(target_parse("99999999999999999999", &t, &err), -EINVAL);
}

/* A fake device: the H200 values, attribute 111 optionally failing. */
static int h200_attr(void *ctx, int attr, int *value)
{
	int fail111 = *(int *)ctx;

	switch (attr) {
	case 97: *value = 232448; return 0;
	case 81: *value = 233472; return 0;
	case 111: *value = 1024; return fail111;
	case 8: *value = 49152; return 0;
	case 75: *value = 9; return 0;
	case 76: *value = 0; return 0;
	default: return 1;
	}
}

static void test_from_device(void **state)
{
	struct target_limits t;
	struct sm_err err;
	int fail = 0;

	(void)state;
	assert_int_equal(target_from_device(h200_attr, &fail, &t, &err), 0);
	assert_int_equal(t.optin_per_block, 232448);
	assert_int_equal(t.sm, 90);
	assert_string_equal(t.name, "auto (sm_90)");
	fail = 1;
	assert_int_equal(target_from_device(h200_attr, &fail, &t, &err), -ENODEV);
	assert_non_null(strstr(err.msg, "RESERVED_SHARED_MEMORY_PER_BLOCK (111)"));
}

static void test_fit(void **state)
{
	struct target_limits t;

	(void)state;
	assert_int_equal(target_parse("sm120", &t, NULL), 0);
	assert_int_equal(target_fit(&t, 0, 101376), TARGET_FITS);
	assert_int_equal(target_fit(&t, 0, 101377), TARGET_TOO_LARGE);
	assert_int_equal(target_fit(&t, 0, 106496), TARGET_TOO_LARGE);
	assert_int_equal(target_fit(&t, 48000, 53376), TARGET_FITS);
	assert_int_equal(target_fit(&t, 48000, 53377), TARGET_TOO_LARGE);
	assert_int_equal(target_fit(&t, 48000, -1), TARGET_FITS_STATIC);
	assert_int_equal(target_parse("232448", &t, NULL), 0);
	assert_int_equal(target_fit(&t, 0, 106496), TARGET_FITS);
	assert_int_equal(target_fit(&t, 0, 147456), TARGET_FITS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_profiles),
		cmocka_unit_test(test_bytes),
		cmocka_unit_test(test_from_device),
		cmocka_unit_test(test_fit),
	};

	return cmocka_run_group_tests_name("target", tests, NULL, NULL);
}

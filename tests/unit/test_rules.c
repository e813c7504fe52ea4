/*
 * test_rules.c - matching launches against reroute rules: which parameters
 * Triton dropped, ambiguity, unsupported parameters, tiles; and the rules
 * compiled from rules/ against the parameter lists SGLang's releases produce.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../core/rules/rules.h"

static const struct rule_param toy_params[] = {
	{ "a", RULE_PTR, RULE_KEPT, 0 },   { "opt", RULE_PTR, RULE_DROP_NONE, 0 },
	{ "s", RULE_FP32, RULE_KEPT, 0 },  { "g", RULE_I32, RULE_DROP_ONE, 0 },
	{ "h", RULE_I32, RULE_DROP_ONE, 0 }, { "x", RULE_I32, RULE_KEPT, 0 },
};
static const struct rule_value toy_tile_values[] = { { "BLOCK_M", 32 } };
static const struct rule_tile toy_tiles[] = { { 106496, toy_tile_values, 1 } };
static const struct rule toy = { "toy", "k", "sglang_extend", "test", toy_params, 6,
				 toy_tiles, 1, NULL, 0, NULL, 0 };

static void test_match_toy(void **state)
{
	uint64_t kept[8];
	const uint32_t all[] = { 8, 8, 4, 4, 4, 4 }, none_dropped_opt[] = { 8, 4, 4, 4, 4 };
	const uint32_t one_int[] = { 8, 8, 4, 4, 4 }, bad[] = { 8, 8, 8, 4, 4, 4 };
	double x;

	(void)state;
	assert_int_equal(rule_match(&toy, all, 6, kept, 8), 1);
	assert_int_equal(kept[0], 0x3f);
	assert_int_equal(rule_match(&toy, none_dropped_opt, 5, kept, 8), 1);
	assert_int_equal(kept[0], 0x3d); /* opt dropped */
	/* one of g, h dropped: two ways, the adapter must tell them apart */
	assert_int_equal(rule_match(&toy, one_int, 5, kept, 8), 2);
	assert_true((kept[0] == 0x37 && kept[1] == 0x2f) || (kept[0] == 0x2f && kept[1] == 0x37));
	assert_int_equal(rule_match(&toy, bad, 6, kept, 8), 0);
	assert_int_equal(rule_match(&toy, all, 0, kept, 8), 0);
	/* more ways than room: counted, only @max stored */
	assert_int_equal(rule_match(&toy, one_int, 5, kept, 1), 2);
	assert_non_null(rule_tile_for(&toy, 106496));
	assert_null(rule_tile_for(&toy, 106497));
	assert_int_equal(rule_value_of(toy_tiles[0].values, 1, "BLOCK_M", &x), 0);
	assert_true(x == 32);
	assert_int_equal(rule_value_of(toy_tiles[0].values, 1, "BLOCK_N", &x), -1);
	assert_int_equal(rule_type_parse("fp32"), RULE_FP32);
	assert_int_equal(rule_type_parse("f32"), -1);
	assert_int_equal(rule_type_size(RULE_U1), 1);
}

/* sizes_of - the parameter sizes Triton passes for @r when the params named in @dropped are dropped. */
static uint32_t sizes_of(const struct rule *r, const char *const *dropped, uint32_t *sizes)
{
	uint32_t i, n = 0;

	for (i = 0; i < r->n_params; i++) {
		int drop = 0;
		const char *const *d;

		for (d = dropped; *d; d++)
			drop |= strcmp(*d, r->params[i].name) == 0;
		if (!drop)
			sizes[n++] = rule_type_size((enum rule_type)r->params[i].type);
	}
	return n;
}

static const struct rule *builtin(const char *id)
{
	uint32_t i;

	for (i = 0; i < rules_builtin_count; i++)
		if (strcmp(rules_builtin[i].id, id) == 0)
			return &rules_builtin[i];
	fail_msg("no rule %s in rules/", id);
	return NULL;
}

/* rules_matching - how many builtin rules of @kernel match @sizes (with any way). */
static int rules_matching(const char *kernel, const uint32_t *sizes, uint32_t n, const char **which)
{
	uint64_t kept[16];
	uint32_t i;
	int count = 0;

	for (i = 0; i < rules_builtin_count; i++)
		if (strcmp(rules_builtin[i].kernel, kernel) == 0 &&
		    rule_match(&rules_builtin[i], sizes, n, kept, 16) > 0) {
			*which = rules_builtin[i].id;
			count++;
		}
	return count;
}

/*
 * The measured cubin parameter counts of SGLang's extend kernel (reference
 * §3.2): 27 for the 2026-03 list with no mask, sinks or SWA and
 * kv_group_num > 1, 26 with kv_group_num == 1, 37 for upstream main.
 */
static void test_sglang_extend_releases(void **state)
{
	static const char *const normal[] = { "mask_ptr", "mask_indptr", "sink_ptr",
					      "window_kv_offset_ptr", "LSE_Extend", "Aux0", NULL };
	static const char *const group1[] = { "mask_ptr", "mask_indptr", "sink_ptr",
					      "window_kv_offset_ptr", "LSE_Extend", "Aux0",
					      "kv_group_num", NULL };
	uint32_t sizes[RULE_MAX_PARAMS];
	const char *which = NULL;
	uint64_t kept[4];
	uint32_t n;

	(void)state;
	n = sizes_of(builtin("sglang-extend-2026-03"), normal, sizes);
	assert_int_equal(n, 27);
	assert_int_equal(rules_matching("_fwd_kernel", sizes, n, &which), 1);
	assert_string_equal(which, "sglang-extend-2026-03");
	n = sizes_of(builtin("sglang-extend-2026-03"), group1, sizes);
	assert_int_equal(n, 26);
	assert_int_equal(rules_matching("_fwd_kernel", sizes, n, &which), 1);
	assert_int_equal(rule_match(builtin("sglang-extend-2026-03"), sizes, n, kept, 4), 1);
	n = sizes_of(builtin("sglang-extend-2025-08"), normal, sizes);
	assert_int_equal(n, 25);
	assert_int_equal(rules_matching("_fwd_kernel", sizes, n, &which), 1);
	assert_string_equal(which, "sglang-extend-2025-08");
	n = sizes_of(builtin("sglang-extend-main"), normal, sizes);
	assert_int_equal(n, 37);
	assert_int_equal(rules_matching("_fwd_kernel", sizes, n, &which), 1);
	assert_string_equal(which, "sglang-extend-main");
	/* main with exactly one of kv_group_num, compact_batch_size equal to 1: two ways */
	n = sizes_of(builtin("sglang-extend-main"), group1, sizes);
	assert_int_equal(rule_match(builtin("sglang-extend-main"), sizes, n, kept, 4), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_match_toy),
		cmocka_unit_test(test_sglang_extend_releases),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

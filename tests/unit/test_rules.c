/*
 * test_rules.c - matching launches against reroute rules: which parameters
 * Triton dropped, ambiguity, unsupported parameters, tiles; tile-generic
 * entries (core/rules/generic.h: bounds, the block, the shared-memory
 * models); and the rules compiled from rules/ against the parameter lists
 * SGLang's releases produce.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../core/rules/generic.h"
#include "../../core/rules/rules.h"

static const struct rule_param toy_params[] = {
	{ "a", RULE_PTR, RULE_KEPT, 0 },   { "opt", RULE_PTR, RULE_DROP_NONE, 0 },
	{ "s", RULE_FP32, RULE_KEPT, 0 },  { "g", RULE_I32, RULE_DROP_ONE, 0 },
	{ "h", RULE_I32, RULE_DROP_ONE, 0 }, { "x", RULE_I32, RULE_KEPT, 0 },
};
static const struct rule_value toy_tile_values[] = { { "BLOCK_M", 32 } };
static const struct rule_tile toy_tiles[] = { { 106496, toy_tile_values, 1 } };
static const struct rule toy = { "toy", "k", "sglang_extend", "test", toy_params, 6,
				 toy_tiles, 1, NULL, 0, NULL, 0, NULL, 0 };

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

/* A toy generic entry: every kind of bound, and SGLang's shared-memory model. */
static const int64_t toy_groups[] = { 0, 128 };
static const struct rule_bound toy_bounds[] = {
	{ "BLOCK_SIZE_M", 16, 256, 16, NULL, 0, NULL, "row blocks" },
	{ "BLOCK_SIZE_K", 16, 1024, 1, NULL, 0, "group_k", "one scale group a step" },
	{ "group_k", 0, 0, 1, toy_groups, 2, NULL, NULL },
};
static const struct rule_generic toy_generic = { "triton_fused_moe_sglang", toy_bounds, 3 };
static const struct rule toy_gen = { "toy-gen", "fused_moe_kernel", "sglang_fused_moe", "test",
				     toy_params, 6, toy_tiles, 1, NULL, 0, NULL, 0, &toy_generic, 0 };

/* A generic entry over the limit of a tile's values. */
static const struct rule_bound many_bounds[RULE_MAX_BOUNDS + 1] = {
	{ "BLOCK_SIZE_M", 16, 256, 16, NULL, 0, NULL, NULL },
};
static const struct rule_generic many_generic = { "triton_fused_moe_sglang", many_bounds,
						  RULE_MAX_BOUNDS + 1 };
static const struct rule toy_many = { "toy-many", "fused_moe_kernel", "sglang_fused_moe", "test",
				      toy_params, 6, toy_tiles, 1, NULL, 0, NULL, 0, &many_generic, 0 };

/* FP8 fused_moe_kernel facts: @bm x 256 x @bk, 4 warps, 4 stages, group_k @gk; @extra appended. */
static const char *fp8_facts(char *out, size_t n, int bm, int bk, int gk, const char *extra)
{
	snprintf(out, n, "num_warps=4;num_stages=4;BLOCK_SIZE_M=%d;BLOCK_SIZE_N=256;BLOCK_SIZE_K=%d;"
		 "compute_type=bf16;use_fp8_w8a8=1;group_n=%d;group_k=%d%s", bm, bk, gk, gk, extra);
	return out;
}

/* generic - rule_generic_tile of @r on @compiled, sm_@sm, @threads, @shared; why into @why. */
static int generic(const struct rule *r, const char *compiled, int sm, uint32_t threads,
		   uint64_t shared, struct rule_generic_tile *g, struct sm_err *why)
{
	const struct rule_kernel k = { compiled, sm, threads, shared };

	sm_err_clear(why);
	return rule_generic_tile(r, &k, g, why);
}

static void test_generic_tile(void **state)
{
	struct rule_generic_tile g;
	struct sm_err why;
	char f[512];
	double x;

	(void)state;
	/* no generic entry, or no facts: the exact tiles decide, nothing to say */
	assert_int_equal(generic(&toy, "BLOCK_SIZE_M=64", 90, 128, 163840, &g, &why), -ENOENT);
	assert_int_equal(generic(&toy_gen, NULL, 90, 128, 163840, &g, &why), -ENOENT);
	assert_string_equal(why.msg, "");
	/* the facts' configuration, its bounds and its shared memory on sm_90 */
	fp8_facts(f, sizeof(f), 64, 128, 0, "");
	assert_int_equal(generic(&toy_gen, f, 90, 128, 163840, &g, &why), 0);
	assert_int_equal(g.tile.dynamic_smem, 163840);
	assert_int_equal(g.tile.n_values, 3);
	assert_int_equal(rule_value_of(g.tile.values, g.tile.n_values, "BLOCK_SIZE_M", &x), 0);
	assert_true(x == 64);
	assert_int_equal(rule_value_of(g.tile.values, g.tile.n_values, "group_k", &x), 0);
	assert_true(x == 0);
	/* ... on an architecture not told: any the formula models (122880 B is sm_120's) */
	assert_int_equal(generic(&toy_gen, f, 0, 128, 122880, &g, &why), 0);
	assert_int_equal(generic(&toy_gen, f, 0, 128, 122881, &g, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "fused_moe_kernel has 122881 B of dynamic shared memory, "
					"but Triton compiles 122880 B on sm_120, 122880 B on sm_121, "
					"163840 B on sm_90 for BLOCK_SIZE_M 64, BLOCK_SIZE_K 128, "
					"group_k 0 (triton_fused_moe_sglang)"));
	/* ... told: that one only */
	assert_int_equal(generic(&toy_gen, f, 120, 128, 163840, &g, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "but Triton compiles 122880 B on sm_120 for"));
	/* ... one the formula does not model: not checked, so refused */
	assert_int_equal(generic(&toy_gen, f, 86, 128, 163840, &g, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "cannot be checked against its compiled facts "
					"(triton_fused_moe_sglang: the formula models Triton's "
					"compiles for sm_90, sm_120 and sm_121, not sm_86)"));
	/* the block is num_warps * 32 threads */
	assert_int_equal(generic(&toy_gen, f, 90, 256, 163840, &g, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "runs 256 threads a block, but its compiled num_warps 4 "
					"makes 128"));
	/* a bound's value not stated, not whole, out of range, off its step, not listed */
	assert_int_equal(generic(&toy_gen, "num_warps=4;BLOCK_SIZE_M=64", 90, 128, 1, &g, &why),
			 -EINVAL);
	assert_non_null(strstr(why.msg, "the compiled facts of fused_moe_kernel do not state "
					"BLOCK_SIZE_K, which rule toy-gen needs to reroute it at any "
					"configuration (one scale group a step)"));
	assert_int_equal(generic(&toy_gen, "BLOCK_SIZE_M=48.5", 90, 128, 1, &g, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "compiled with BLOCK_SIZE_M 48.5, not a whole number; rule "
					"toy-gen reroutes BLOCK_SIZE_M from 16 to 256 in multiples of 16"));
	assert_int_equal(generic(&toy_gen, "BLOCK_SIZE_M=None", 90, 128, 1, &g, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "compiled with BLOCK_SIZE_M None, not a whole number"));
	assert_int_equal(generic(&toy_gen, fp8_facts(f, sizeof(f), 512, 128, 0, ""), 90, 128, 1,
				 &g, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "compiled with BLOCK_SIZE_M 512; rule toy-gen reroutes "
					"BLOCK_SIZE_M from 16 to 256 in multiples of 16 (row blocks)"));
	assert_int_equal(generic(&toy_gen, fp8_facts(f, sizeof(f), 8, 128, 0, ""), 90, 128, 1, &g,
				 &why), -EINVAL);
	assert_non_null(strstr(why.msg, "compiled with BLOCK_SIZE_M 8;"));
	assert_int_equal(generic(&toy_gen, fp8_facts(f, sizeof(f), 64, 128, 64, ""), 90, 128, 1,
				 &g, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "compiled with group_k 64; rule toy-gen reroutes group_k "
					"only at 0 or 128 (its bounds)"));
	/* a divisor: checked once every value is in its bounds */
	assert_int_equal(generic(&toy_gen, fp8_facts(f, sizeof(f), 64, 256, 128, ""), 90, 128, 1,
				 &g, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "compiled with BLOCK_SIZE_K 256 and group_k 128; rule "
					"toy-gen reroutes it only when BLOCK_SIZE_K divides group_k "
					"(one scale group a step)"));
	assert_int_equal(generic(&toy_gen, fp8_facts(f, sizeof(f), 64, 256, 0, ""), 90, 128,
				 327680, &g, &why), 0);
	/* a range without a step, a value too long to quote */
	assert_int_equal(generic(&toy_gen, fp8_facts(f, sizeof(f), 64, 2048, 0, ""), 90, 128, 1,
				 &g, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "compiled with BLOCK_SIZE_K 2048; rule toy-gen reroutes "
					"BLOCK_SIZE_K from 16 to 1024 (one scale group a step)"));
	assert_int_equal(generic(&toy_gen, "BLOCK_SIZE_M=<function at 0x7f3a000000000000000000000000"
				 "00000000000000000000000000000000000000>", 90, 128, 1, &g, &why),
			 -EINVAL);
	assert_non_null(strstr(why.msg, "compiled with BLOCK_SIZE_M (a long value), not a whole "
					"number"));
	/* more bounds than a tile holds (the rules compiler allows 16) */
	assert_int_equal(generic(&toy_many, f, 90, 128, 1, &g, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "rule toy-many has more than 16 generic bounds"));
}

/* smem - rule_smem_model of @model on @compiled for sm_@sm, its reason into @why. */
static uint64_t smem(const char *model, const char *compiled, int sm, struct sm_err *why)
{
	sm_err_clear(why);
	return rule_smem_model(model, compiled, sm, why);
}

static void test_smem_models(void **state)
{
	static const char *const block = "num_warps=4;num_stages=4;BLOCK_SIZE_M=64;BLOCK_SIZE_N=128;"
					 "BLOCK_SIZE_K=128;compute_type=bf16;use_fp8_w8a8=1;"
					 "group_n=128;group_k=128";
	static const char *const gptq = "num_warps=8;num_stages=4;BLOCK_SIZE_M=128;"
					"BLOCK_SIZE_N=256;BLOCK_SIZE_K=128;compute_type=bf16;"
					"use_int4_w4a16=1;use_int8_w8a16=0";
	static const char *const gptq32 = "num_warps=8;num_stages=4;BLOCK_SIZE_M=32;"
					  "BLOCK_SIZE_N=256;BLOCK_SIZE_K=256;compute_type=bf16;"
					  "use_int4_w4a16=1;use_int8_w8a16=0";
	static const struct {
		const char *k;
		int sm;
		uint64_t want;
	} k_steps[] = { { "256", 90, 147456 }, { "192", 120, 147456 }, { "257", 120, 180224 },
			{ "7168", 90, 180224 }, { "x", 120, 0 } };
	struct sm_err why;
	char f[512];
	size_t i;

	(void)state;
	assert_int_equal(RULE_NSMEM_MODELS, 3);
	assert_string_equal(rule_smem_model_names[2], "triton_fused_moe_gptq_awq");
	/* block scales with BLOCK_SIZE_N 128 = group_n: SGLang loads B's scale as a scalar,
	   vLLM as a [BN] vector, whose layout change takes 512 B with 128 threads */
	assert_int_equal(smem("triton_fused_moe_sglang", block, 120, &why), 73728);
	assert_int_equal(smem("triton_fused_moe_vllm", block, 120, &why), 74240);
	/* the swap flag, by each framework's name (sm_90, BLOCK_SIZE_M 16) */
	snprintf(f, sizeof(f), "num_warps=4;num_stages=3;BLOCK_SIZE_M=16;BLOCK_SIZE_N=128;"
		 "BLOCK_SIZE_K=256;compute_type=bf16;use_fp8_w8a8=1;swap_ab=1");
	assert_int_equal(smem("triton_fused_moe_sglang", f, 90, &why), 110592);
	assert_int_equal(smem("triton_fused_moe_vllm", f, 90, &why), 8192 + 65536); /* unswapped */
	/* SGLang's tensor descriptors: an 8-byte barrier per buffer of the ring */
	assert_int_equal(smem("triton_fused_moe_sglang", fp8_facts(f, sizeof(f), 64, 128, 0,
								   ";b_desc:tensordesc"), 120, &why),
			 122880 + 24);
	assert_int_equal(smem("triton_fused_moe_vllm", f, 120, &why), 122880);
	/* int8 w8a8 reads as FP8 does; fp16 as bf16; SGLang's A descriptor too (down) */
	snprintf(f, sizeof(f), "num_warps=8;num_stages=4;BLOCK_SIZE_M=128;BLOCK_SIZE_N=256;"
		 "BLOCK_SIZE_K=128;compute_type=bf16;use_int8_w8a8=1");
	assert_int_equal(smem("triton_fused_moe_vllm", f, 120, &why), 147456);
	assert_int_equal(smem("triton_fused_moe_sglang", "num_warps=8;num_stages=4;BLOCK_SIZE_M=128;"
			      "BLOCK_SIZE_N=256;BLOCK_SIZE_K=64;compute_type=fp16", 120, &why), 147456);
	assert_int_equal(smem("triton_fused_moe_sglang", fp8_facts(f, sizeof(f), 64, 128, 0,
								   ";a_desc:tensordesc;b_desc:tensordesc"),
			      90, &why), 163840 + 32);
	/* bf16 and fp32 activations, from compute_type; int8 w8a16 weights */
	assert_int_equal(smem("triton_fused_moe_sglang", "num_warps=8;num_stages=4;BLOCK_SIZE_M=128;"
			      "BLOCK_SIZE_N=256;BLOCK_SIZE_K=64;compute_type=bf16", 120, &why), 147456);
	assert_int_equal(smem("triton_fused_moe_vllm", "num_warps=8;num_stages=4;BLOCK_SIZE_M=128;"
			      "BLOCK_SIZE_N=256;BLOCK_SIZE_K=32;compute_type=fp32", 120, &why), 147456);
	assert_int_equal(smem("triton_fused_moe_sglang", "num_warps=8;num_stages=4;BLOCK_SIZE_M=128;"
			      "BLOCK_SIZE_N=256;BLOCK_SIZE_K=64;compute_type=bf16;use_int8_w8a16=1",
			      120, &why), 49152 + 49152);
	/* the INT4 kernel: A ring and one converted B tile; int8 weights alike */
	assert_int_equal(smem("triton_fused_moe_gptq_awq", gptq, 120, &why), 163840);
	/* its compiled-in K: one k step (Kimi K2's down GEMM at TP8, K 256, at
	   BLOCK_SIZE_K 256; GLM-4.7's K 192) leaves one A buffer, two keep the ring
	   (Triton 3.6: 147456 and 180224 B on sm_90 and sm_120) */
	for (i = 0; i < sizeof(k_steps) / sizeof(k_steps[0]); i++) {
		snprintf(f, sizeof(f), "%s;K=%s", gptq32, k_steps[i].k);
		assert_int_equal(smem("triton_fused_moe_gptq_awq", f, k_steps[i].sm, &why),
				 k_steps[i].want);
	}
	assert_non_null(strstr(why.msg, "state K as no whole number"));
	assert_int_equal(smem("triton_fused_moe_gptq_awq", "num_warps=8;num_stages=4;"
			      "BLOCK_SIZE_M=128;BLOCK_SIZE_N=256;BLOCK_SIZE_K=128;compute_type=bf16;"
			      "use_int8_w8a16=1", 90, &why), 196608);
	/* what the models do not cover, each said */
	assert_int_equal(smem("triton_fused_moe_gptq_awq", "num_warps=8;num_stages=4;"
			      "BLOCK_SIZE_M=128;BLOCK_SIZE_N=256;BLOCK_SIZE_K=128;compute_type=bf16",
			      120, &why), 0);
	assert_non_null(strstr(why.msg, "use_int4_w4a16 0 and use_int8_w8a16 0: exactly one"));
	assert_int_equal(smem("triton_fused_moe_gptq_awq", "num_warps=8;num_stages=4;"
			      "BLOCK_SIZE_M=128;BLOCK_SIZE_N=256;BLOCK_SIZE_K=128;compute_type=bf16;"
			      "use_int4_w4a16=1;use_int8_w8a16=1", 120, &why), 0);
	assert_non_null(strstr(why.msg, "use_int4_w4a16 1 and use_int8_w8a16 1: exactly one"));
	assert_int_equal(smem("triton_fused_moe_gptq_awq", "num_warps=8;num_stages=4;"
			      "BLOCK_SIZE_M=128;BLOCK_SIZE_N=256;BLOCK_SIZE_K=128;compute_type=fp32;"
			      "use_int4_w4a16=1", 120, &why), 0);
	assert_non_null(strstr(why.msg, "compute_type fp32 is not modelled"));
	assert_int_equal(smem("triton_fused_moe_vllm", "num_warps=8;num_stages=4;BLOCK_SIZE_M=128;"
			      "BLOCK_SIZE_N=256;BLOCK_SIZE_K=64;compute_type=bf16;USE_TD=1", 120,
			      &why), 0);
	assert_non_null(strstr(why.msg, "USE_TD 1, VLLM_TRITON_USE_TD) is not modelled"));
	assert_int_equal(smem("triton_fused_moe_sglang", "num_warps=8;num_stages=4;BLOCK_SIZE_M=128;"
			      "BLOCK_SIZE_N=256;BLOCK_SIZE_K=64;compute_type=bf16;USE_TD=1", 120,
			      &why), 147456);
	assert_int_equal(smem("triton_fused_moe_sglang", "num_warps=8;num_stages=4;BLOCK_SIZE_M=128;"
			      "BLOCK_SIZE_N=256;BLOCK_SIZE_K=64", 120, &why), 0);
	assert_non_null(strstr(why.msg, "do not state compute_type"));
	assert_int_equal(smem("triton_fused_moe_sglang", "num_warps=8;num_stages=4;BLOCK_SIZE_M=128;"
			      "BLOCK_SIZE_N=256;BLOCK_SIZE_K=64;compute_type=fp8e5", 120, &why), 0);
	assert_non_null(strstr(why.msg, "compute_type fp8e5 is not modelled"));
	assert_int_equal(smem("triton_fused_moe_sglang", "num_warps=8;num_stages=4;BLOCK_SIZE_M=128;"
			      "BLOCK_SIZE_K=64;compute_type=bf16", 120, &why), 0);
	assert_non_null(strstr(why.msg, "do not state BLOCK_SIZE_N as a whole number"));
	assert_int_equal(smem("triton_fused_moe_sglang", gptq, 100, &why), 0);
	assert_non_null(strstr(why.msg, "not sm_100"));
	assert_int_equal(smem("triton_fused_moe_sglang", "num_warps=8;num_stages=4;BLOCK_SIZE_M=128;"
			      "BLOCK_SIZE_N=256;BLOCK_SIZE_K=64;compute_type=bf16;group_n=x", 120, &why),
			 0);
	assert_non_null(strstr(why.msg, "is not a number"));
	assert_int_equal(smem("triton_moe", gptq, 120, &why), 0);
	assert_non_null(strstr(why.msg, "no shared-memory model is named triton_moe"));
	assert_int_equal(smem(NULL, gptq, 120, &why), 0);
}

/* mma_v3, the hook's fact of DISABLE_MMA_V3: 0 puts sm_90 on mma.sync's allocation. */
static void test_smem_mma_v3(void **state)
{
	static const char *const moe = "num_warps=8;num_stages=4;BLOCK_SIZE_M=128;BLOCK_SIZE_N=256;"
				       "BLOCK_SIZE_K=128;compute_type=bf16;use_fp8_w8a8=1";
	struct rule_generic_tile g;
	struct sm_err why;
	char f[512];

	(void)state;
	/* absent or 1: wgmma, num_stages buffers; 0: mma.sync, num_stages - 1 */
	assert_int_equal(smem("triton_fused_moe_sglang", moe, 90, &why), 196608);
	snprintf(f, sizeof(f), "%s;mma_v3=1", moe);
	assert_int_equal(smem("triton_fused_moe_sglang", f, 90, &why), 196608);
	snprintf(f, sizeof(f), "mma_v3=0;%s", moe);
	assert_int_equal(smem("triton_fused_moe_sglang", f, 90, &why), 147456);
	assert_int_equal(smem("triton_fused_moe_vllm", f, 90, &why), 147456);
	/* sm_120 has no wgmma either way */
	assert_int_equal(smem("triton_fused_moe_sglang", f, 120, &why), 147456);
	/* the INT4 kernel: no converted-B ring under mma.sync */
	assert_int_equal(smem("triton_fused_moe_gptq_awq", "mma_v3=0;num_warps=8;num_stages=4;"
			      "BLOCK_SIZE_M=128;BLOCK_SIZE_N=256;BLOCK_SIZE_K=128;compute_type=bf16;"
			      "use_int4_w4a16=1", 90, &why), 163840);
	/* neither 0 nor 1: refused, not guessed */
	snprintf(f, sizeof(f), "%s;mma_v3=2", moe);
	assert_int_equal(smem("triton_fused_moe_sglang", f, 90, &why), 0);
	assert_non_null(strstr(why.msg, "mma_v3 as neither 0 nor 1"));
	snprintf(f, sizeof(f), "%s;mma_v3=true", moe);
	assert_int_equal(smem("triton_fused_moe_sglang", f, 90, &why), 0);
	/* the tile check: the mma.sync size on sm_90 is taken only with mma_v3=0 */
	fp8_facts(f, sizeof(f), 64, 128, 0, "");
	assert_int_equal(generic(&toy_gen, f, 90, 128, 122880, &g, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "but Triton compiles 163840 B on sm_90 for"));
	fp8_facts(f, sizeof(f), 64, 128, 0, ";mma_v3=0");
	assert_int_equal(generic(&toy_gen, f, 90, 128, 122880, &g, &why), 0);
	assert_int_equal(g.tile.dynamic_smem, 122880);
	assert_int_equal(generic(&toy_gen, f, 90, 128, 163840, &g, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "but Triton compiles 122880 B on sm_90 for"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_match_toy),
		cmocka_unit_test(test_sglang_extend_releases),
		cmocka_unit_test(test_generic_tile),
		cmocka_unit_test(test_smem_models),
		cmocka_unit_test(test_smem_mma_v3),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

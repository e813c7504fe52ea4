/*
 * test_inkling.c - rule sglang-inkling-moe and adapter sglang_inkling
 * (core/adapters/sglang_inkling.c) on launches shaped exactly like SGLang
 * 0.5.23's inkling grouped GEMM `_grouped_gemm_kernel` (inkling_moe.py
 * grouped_gemm_triton), with the compiled text the Python hook records for
 * it (the real kernel's, as tests/oracle/inkling_launches.py writes it): the
 * plans the adapter builds for the decode branch (16 x 128 x 128, 4 warps, 4
 * stages, 110592 B) and the prefill branch on sm_90 (128 x 256 x 64, 8
 * warps, 3 stages, 147456 B), grid_m dropped when it is 1, INT64_INDEX on,
 * every value it must refuse with a reason, the refusal without the facts,
 * and the load-time decision (route_admit).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../kernels/moe/moe_gemm.h"
#include "../../core/route/admit.h"
#include "fake_launch.h"

#define RULE "sglang-inkling-moe"

/*
 * The real kernel's facts for the gate/up GEMM of 4 tokens of the Inkling
 * config's defaults (256 experts, top-6, hidden 1536, intermediate 768 at
 * TP 1: N 1536, K 1536), decode branch, less the types.
 */
#define CONSTEXPRS "num_warps=4;num_stages=4;mma_v3=1;a_stride_0=1536;b_stride_0=2359296;" \
		   "b_stride_1=1536;c_stride_0=1536;E=256;N=1536;K=1536;BLOCK_SIZE_M=16;"    \
		   "BLOCK_SIZE_N=128;BLOCK_SIZE_K=128;GROUP_SIZE_M=8;KN_MASK=0;INT64_INDEX=0;" \
		   "compiled_args="
#define SIGNATURE ";A:*bf16;B:*bf16;C:*bf16;NumTokensPerExpert:*i32;ExpertTokenOffs:*i32;" \
		  "ExpertBlockOffs:*i32;ExpertBlockSchedule:*i32;grid_m:i32"
/* 24 routed rows: cdiv(24, 16) + 256 - 1 schedule entries */
#define GRID_M 257

/* inkling - the decode gate/up launch above, compiled for sm_120 (110592 B). */
static void inkling(struct fake_launch *f)
{
	static const struct fake_value ints[] = {
		{ "A", 0x100000 }, { "B", 0x200000 }, { "C", 0x300000 }, { "NumTokensPerExpert", 0x400000 },
		{ "ExpertTokenOffs", 0x500000 }, { "ExpertBlockOffs", 0x600000 },
		{ "ExpertBlockSchedule", 0x700000 }, { "grid_m", GRID_M },
	};

	fake_init(f, RULE, ints, sizeof(ints) / sizeof(ints[0]), CONSTEXPRS SIGNATURE);
	f->l = (struct select_launch){ .kernel = "_grouped_gemm_kernel", .grid = { GRID_M * 12, 1, 1 },
				       .block = { 128, 1, 1 }, .dynamic_smem = 110592,
				       .compiled = f->compiled };
}

/* The decode branch: every field of the plan. */
static void test_plan_decode(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct moe_gemm_args a;

	(void)state;
	inkling(&f);
	fake_expect_plan(&f, RULE, &plan, &a, sizeof(a));
	assert_string_equal(plan.kernel, "moe_gemm_bf16_m16");
	assert_ptr_equal(a.a, (void *)0x100000);
	assert_ptr_equal(a.b, (void *)0x200000);
	assert_ptr_equal(a.c, (void *)0x300000);
	assert_ptr_equal(a.tokens_per_expert, (void *)0x400000);
	assert_ptr_equal(a.token_offs, (void *)0x500000);
	assert_ptr_equal(a.num_blocks, (void *)(0x600000 + 256 * 4)); /* ExpertBlockOffs[E] */
	assert_ptr_equal(a.schedule, (void *)0x700000);
	assert_null(a.sorted_ids);
	assert_null(a.expert_ids);
	assert_null(a.num_tokens_post_padded);
	assert_null(a.topk_weights);
	assert_null(a.bias);
	assert_null(a.a_scale);
	assert_null(a.b_scale);
	assert_int_equal(a.a_stride_m, 1536);
	assert_int_equal(a.b_stride_e, 1536 * 1536);
	assert_int_equal(a.b_stride_n, 1536);
	assert_int_equal(a.c_stride_m, 1536);
	assert_int_equal(a.N, 1536);
	assert_int_equal(a.K, 1536);
	assert_int_equal(a.EM, GRID_M * 16);
	assert_int_equal(a.top_k, 1);
	assert_int_equal(a.block_m, 16);
	assert_int_equal(a.mul_routed_weight, 0);
	assert_int_equal(plan.grid[0], 1536 / MOE_GEMM_TN(MOE_BF16, 16));
	assert_int_equal(plan.grid[1], GRID_M);
	assert_int_equal(plan.grid[2], 1);
	assert_int_equal(plan.block[0], moe_gemm_threads(MOE_BF16, 16));
	assert_int_equal(plan.dynamic_smem, moe_gemm_smem(MOE_BF16, 16));
}

/* The prefill branch as sm_90 compiles it (147456 B): down at TP 8, K 96 masked, the 128-row tile. */
static void test_plan_prefill_sm90(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct moe_gemm_args a;

	(void)state;
	inkling(&f);
	fake_replace(&f, "num_warps=", "8");
	fake_replace(&f, "num_stages=", "3");
	fake_replace(&f, "a_stride_0=", "96");
	fake_replace(&f, "b_stride_0=", "147456");
	fake_replace(&f, "b_stride_1=", "96");
	fake_replace(&f, "c_stride_0=", "1536");
	fake_replace(&f, "K=", "96");
	fake_replace(&f, "BLOCK_SIZE_M=", "128");
	fake_replace(&f, "BLOCK_SIZE_N=", "256");
	fake_replace(&f, "BLOCK_SIZE_K=", "64");
	fake_replace(&f, "KN_MASK=", "1");
	fake_set(&f, "grid_m", 351);            /* 12288 routed rows: 96 + 255 entries */
	f.l.grid[0] = 351 * 6;
	f.l.block[0] = 256;
	f.l.dynamic_smem = 147456;
	fake_expect_plan(&f, RULE, &plan, &a, sizeof(a));
	assert_string_equal(plan.kernel, "moe_gemm_bf16_m128");
	assert_int_equal(a.K, 96);
	assert_int_equal(a.a_stride_m, 96);
	assert_int_equal(a.b_stride_e, 147456);
	assert_int_equal(a.b_stride_n, 96);
	assert_int_equal(a.EM, 351 * 128);
	assert_int_equal(a.block_m, 128);
	assert_int_equal(plan.grid[0], 1536 / MOE_GEMM_TN(MOE_BF16, 128));
	assert_int_equal(plan.grid[1], 351);
	assert_int_equal(plan.dynamic_smem, moe_gemm_smem(MOE_BF16, 128));
}

/* One expert, one row: grid_m 1 is compiled in and dropped; INT64_INDEX on computes the same. */
static void test_plan_grid_m_dropped_int64(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct moe_gemm_args a;

	(void)state;
	inkling(&f);
	fake_replace(&f, "E=", "1");
	fake_replace(&f, "INT64_INDEX=", "1");
	fake_replace(&f, "compiled_args=", "grid_m;grid_m=1");
	*strstr(f.compiled, ";grid_m:i32") = '\0';
	fake_drop(&f, "grid_m");
	f.l.grid[0] = 12;
	fake_expect_plan(&f, RULE, &plan, &a, sizeof(a));
	assert_string_equal(plan.kernel, "moe_gemm_bf16_m16");
	assert_ptr_equal(a.num_blocks, (void *)(0x600000 + 4));
	assert_int_equal(a.EM, 16);
	assert_int_equal(plan.grid[1], 1);
}

/* Without the facts, E, N, K and the strides are unknown: refused, saying so. */
static void test_refused_without_facts(void **state)
{
	struct fake_launch f;

	(void)state;
	inkling(&f);
	f.l.compiled = NULL;
	fake_expect_refusal(&f, "E, N, K and the strides (a_stride_0, b_stride_0, b_stride_1, "
				"c_stride_0) are compiled into _grouped_gemm_kernel");
	f.l.dynamic_smem = 147456;
	f.l.block[0] = 256;
	fake_expect_refusal(&f, "compiled facts of the shim's Python hook");
	f.l.dynamic_smem = 221184; /* fp32: no tile */
	fake_expect_refusal(&f, "not 221184 B");
}

/* Dtypes, index widths and constexprs the bundled kernel does not compute. */
static void test_refused_compiled(void **state)
{
	static const struct fake_edit cases[] = {
		{ "A:", "*fp16", "A is *fp16 in the compiled kernel; moe_gemm reads it as *bf16" },
		{ "B:", "*fp32", "B is *fp32" },
		{ "C:", "*fp16", "C is *fp16" },
		{ "NumTokensPerExpert:", "*i64", "NumTokensPerExpert is *i64" },
		{ "ExpertTokenOffs:", "*i64", "ExpertTokenOffs is *i64" },
		{ "ExpertBlockOffs:", "*i16", "ExpertBlockOffs is *i16" },
		{ "ExpertBlockSchedule:", "*i64", "ExpertBlockSchedule is *i64" },
		{ "E=", "None", "do not state E as a whole number" },
		{ "c_stride_0=", "None", "do not state c_stride_0" },
		{ "E=", "70000", "E 70000" },
		{ "K=", "1000", "K 1000 is not a multiple of 16" },
		{ "N=", "1500", "compiled without KN_MASK for N 1500" },
		{ "INT64_INDEX=", "2", "INT64_INDEX 2" },
		{ "KN_MASK=", "None", "do not state KN_MASK" },
		{ "a_stride_0=", "1000", "strides (a 1000" },
		{ "a_stride_0=", "1540", "A or B rows are not 16-byte aligned (a_stride_0 1540" },
		{ "b_stride_0=", "1536", "strides (a 1536, b 1536, 1536" },
		{ "BLOCK_SIZE_N=", "64", "compiled with BLOCK_SIZE_N 64" },
		{ "num_stages=", "3", "compiled with num_stages 3" },
	};

	(void)state;
	fake_expect_refusals(inkling, cases, sizeof(cases) / sizeof(cases[0]));
}

/* The launch's own values that do not add up. */
static void test_refused_launch(void **state)
{
	struct fake_launch f;

	(void)state;
	inkling(&f);
	f.l.grid[0]++;
	fake_expect_refusal(&f, "is not grid_m 257 * cdiv(N 1536, 128)");
	inkling(&f);
	f.l.block[0] = 256;
	fake_expect_refusal(&f, "block (256, 1, 1) is not the tile's 4 warps");
	inkling(&f);
	fake_set(&f, "A", 0x100008);
	fake_expect_refusal(&f, "A or B rows are not 16-byte aligned");
	inkling(&f);
	fake_set(&f, "ExpertBlockOffs", 0);
	fake_expect_refusal(&f, "ExpertBlockOffs at (nil) is not a 4-byte aligned int32 array");
	inkling(&f);
	fake_set(&f, "ExpertBlockSchedule", 0x700002);
	fake_expect_refusal(&f, "ExpertBlockSchedule at 0x700002 is not a 4-byte aligned int32 "
				"array");
	inkling(&f);
	fake_set(&f, "C", 0);
	fake_expect_refusal(&f, "C is NULL");
	inkling(&f);
	fake_set(&f, "grid_m", 70000);
	f.l.grid[0] = 70000 * 12;
	fake_expect_refusal(&f, "grid_m 70000 needs 70000 row blocks of moe_gemm, over the 65535");
}

/* The load-time decision: both over-limit configurations load; others meet Triton's OutOfResources. */
static void test_admit(void **state)
{
	static const struct {
		uint64_t shared;
		uint32_t threads;
		const char *from, *to, *reason; /* reason NULL: admitted */
	} cases[] = {
		{ 110592, 128, NULL, NULL, NULL },
		{ 147456, 256, "num_warps=4;num_stages=4",
		  "num_warps=8;num_stages=3", "compiled with BLOCK_SIZE_M 16" },
		{ 147456, 256, "num_warps=4;num_stages=4;mma_v3=1;a_stride_0=1536;b_stride_0=2359296;"
		  "b_stride_1=1536;c_stride_0=1536;E=256;N=1536;K=1536;BLOCK_SIZE_M=16;BLOCK_SIZE_N=128;"
		  "BLOCK_SIZE_K=128",
		  "num_warps=8;num_stages=3;mma_v3=1;a_stride_0=1536;b_stride_0=2359296;"
		  "b_stride_1=1536;c_stride_0=1536;E=256;N=1536;K=1536;BLOCK_SIZE_M=128;BLOCK_SIZE_N=256;"
		  "BLOCK_SIZE_K=64", NULL },
		/* fp32 at the decode branch: 221184 B, no tile */
		{ 221184, 128, NULL, NULL, "221184" },
		/* the dtype is a type, not a value: loaded, then refused at launch */
		{ 110592, 128, "A:*bf16", "A:*fp16", NULL },
	};
	struct target_limits sm120;
	size_t i;

	(void)state;
	assert_int_equal(target_parse("sm120", &sm120, NULL), 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct route_kernel k = { "_grouped_gemm_kernel", cases[i].shared, cases[i].threads,
					  CONSTEXPRS SIGNATURE, 0 };

		fake_expect_admit(&k, &sm120, RULE, cases[i].from, cases[i].to, cases[i].reason, i);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_decode),
		cmocka_unit_test(test_plan_prefill_sm90),
		cmocka_unit_test(test_plan_grid_m_dropped_int64),
		cmocka_unit_test(test_refused_without_facts),
		cmocka_unit_test(test_refused_compiled),
		cmocka_unit_test(test_refused_launch),
		cmocka_unit_test(test_admit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_lightning.c - rule lightning-kv-parallel and adapter
 * lightning_kv_parallel (core/adapters/lightning_kv.c) on launches shaped
 * exactly like vLLM's and SGLang's lightning attention `_fwd_kv_parallel`
 * at d = e = 128, BLOCK 256, CBLOCK 64, 4 warps, 3 stages (131584 B
 * compiled for sm_120, 164352 B for sm_90), with the compiled text the
 * Python hook records for it (the real kernel's, as tests/oracle/
 * lightning_launches.py gives it): the plan the adapter builds, the
 * one-token launch whose n and NUM_BLOCK Triton drops, every value it must
 * refuse with a reason, the refusal without the facts, and the load-time
 * decision (route_admit).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../kernels/linear/lightning_kv.h"
#include "../../core/route/admit.h"
#include "fake_launch.h"

#define RULE "lightning-kv-parallel"

/* The real kernel's facts for MiniMax at TP 8 (b 1, h 8), 1000 tokens, compiled for sm_120. */
#define CONSTEXPRS "num_warps=4;num_stages=3;mma_v3=1;b=1;h=8;d=128;e=128;BLOCK=256;" \
		   "D_FBLOCK=128;E_FBLOCK=128;NUM_FBLOCK=1;CBLOCK=64;NUM_CBLOCK=4;compiled_args="
#define SIGNATURE ";K:*fp32;V:*fp32;K_decay:*fp32;KV:*fp32;n:i32;NUM_BLOCK:i32"
/* One token: Triton compiles n = 1 and NUM_BLOCK = 1 in (b 1, h 4). */
#define ONE_TOKEN "num_warps=4;num_stages=3;mma_v3=1;b=1;h=4;n=1;d=128;e=128;BLOCK=256;" \
		  "NUM_BLOCK=1;D_FBLOCK=128;E_FBLOCK=128;NUM_FBLOCK=1;CBLOCK=64;NUM_CBLOCK=4;" \
		  "compiled_args=n,NUM_BLOCK;K:*fp32;V:*fp32;K_decay:*fp32;KV:*fp32"

/*
 * minimax - b 1, h 8, n 1000 tokens (NUM_BLOCK 4, the last block 232
 * tokens): grid (8, 4), block 128, compiled for sm_120 (131584 B).
 */
static void minimax(struct fake_launch *f)
{
	static const struct fake_value ints[] = {
		{ "K", 0x100000 }, { "V", 0x200000 }, { "K_decay", 0x300000 }, { "KV", 0x400000 },
		{ "n", 1000 }, { "NUM_BLOCK", 4 },
	};

	fake_init(f, RULE, ints, sizeof(ints) / sizeof(ints[0]), CONSTEXPRS SIGNATURE);
	f->l = (struct select_launch){ .kernel = "_fwd_kv_parallel", .grid = { 8, 4, 1 },
				       .block = { 128, 1, 1 }, .dynamic_smem = 131584,
				       .compiled = f->compiled };
}

/* MiniMax at TP 8: every field of the plan. */
static void test_plan_minimax(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct lightning_kv_args a;

	(void)state;
	minimax(&f);
	fake_expect_plan(&f, RULE, &plan, &a, sizeof(a));
	assert_string_equal(plan.kernel, LIGHTNING_KV_D128_E128_FP32);
	assert_ptr_equal(a.k, (void *)0x100000);
	assert_ptr_equal(a.v, (void *)0x200000);
	assert_ptr_equal(a.k_decay, (void *)0x300000);
	assert_ptr_equal(a.kv, (void *)0x400000);
	assert_int_equal(a.n, 1000);
	assert_int_equal(a.heads, 8);
	assert_int_equal(a.num_block, 4);
	assert_int_equal(a.block, 256);
	assert_int_equal(a.cblock, 64);
	assert_int_equal(a.d, 128);
	assert_int_equal(a.e, 128);
	assert_int_equal(plan.grid[0], 8);
	assert_int_equal(plan.grid[1], 4);
	assert_int_equal(plan.grid[2], 1);
	assert_int_equal(plan.block[0], LIGHTNING_KV_THREADS);
	assert_int_equal(plan.block[1], 1);
	assert_int_equal(plan.dynamic_smem, LIGHTNING_KV_SMEM_D128_E128);
}

/* Compiled for sm_90 (164352 B), b 2 x h 3: the decay row is bh % h, so h is passed. */
static void test_plan_sm90_batch(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct lightning_kv_args a;

	(void)state;
	minimax(&f);
	fake_replace(&f, "b=", "2");
	fake_replace(&f, "h=", "3");
	fake_set(&f, "n", 513);
	fake_set(&f, "NUM_BLOCK", 3);
	f.l.grid[0] = 6;
	f.l.grid[1] = 3;
	f.l.dynamic_smem = 164352;
	fake_expect_plan(&f, RULE, &plan, &a, sizeof(a));
	assert_int_equal(a.heads, 3);
	assert_int_equal(a.n, 513);
	assert_int_equal(a.num_block, 3);
	assert_int_equal(plan.grid[0], 6);
	assert_int_equal(plan.grid[1], 3);
}

/* One token: n and NUM_BLOCK compiled in as 1 and dropped from the launch. */
static void test_plan_one_token(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct lightning_kv_args a;

	(void)state;
	minimax(&f);
	strcpy(f.compiled, ONE_TOKEN);
	fake_drop(&f, "n");
	fake_drop(&f, "NUM_BLOCK");
	f.l.grid[0] = 4;
	f.l.grid[1] = 1;
	fake_expect_plan(&f, RULE, &plan, &a, sizeof(a));
	assert_int_equal(a.n, 1);
	assert_int_equal(a.num_block, 1);
	assert_int_equal(a.heads, 4);
	assert_int_equal(plan.grid[0], 4);
	assert_int_equal(plan.grid[1], 1);
}

/* Without the facts nothing about the kernel is known: refused, saying so. */
static void test_refused_without_facts(void **state)
{
	struct fake_launch f;

	(void)state;
	minimax(&f);
	f.l.compiled = NULL;
	fake_expect_refusal(&f, "b, h, d, e, BLOCK, CBLOCK, NUM_CBLOCK and the feature "
				"blocks are compiled into _fwd_kv_parallel");
	f.l.dynamic_smem = 164352;
	fake_expect_refusal(&f, "compiled facts of the shim's Python hook");
	f.l.dynamic_smem = 66048; /* d = e = 64: fits, no rule tile */
	fake_expect_refusal(&f, "not 66048 B");
}

/* Head sizes, blockings and dtypes the bundled kernel does not compute. */
static void test_refused_compiled(void **state)
{
	static const struct fake_edit cases[] = {
		{ "e=", "256", "compiled with e 256; rule lightning-kv-parallel reroutes it only "
			       "with e 128" },
		{ "d=", "64", "compiled with d 64" },
		{ "BLOCK=", "128", "compiled with BLOCK 128" },
		{ "CBLOCK=", "32", "compiled with CBLOCK 32" },
		{ "NUM_CBLOCK=", "8", "compiled with NUM_CBLOCK 8" },
		{ "NUM_FBLOCK=", "2", "compiled with NUM_FBLOCK 2" },
		{ "E_FBLOCK=", "64", "compiled with E_FBLOCK 64" },
		{ "num_warps=", "8", "compiled with num_warps 8" },
		{ "K:", "*bf16", "K is *bf16 in the compiled kernel; lightning_kv reads it as *fp32" },
		{ "V:", "*fp16", "V is *fp16" },
		{ "K_decay:", "*bf16", "K_decay is *bf16" },
		{ "KV:", "*bf16", "KV is *bf16" },
		{ "h=", "0", "compiled with b 1, h 0" },
		{ "b=", "None", "do not state b as a whole number" },
	};

	(void)state;
	fake_expect_refusals(minimax, cases, sizeof(cases) / sizeof(cases[0]));
}

/* The launch's own values that do not add up. */
static void test_refused_launch(void **state)
{
	struct fake_launch f;

	(void)state;
	minimax(&f);
	fake_set(&f, "NUM_BLOCK", 5); /* cdiv(1000, 256) is 4 */
	f.l.grid[1] = 5;
	fake_expect_refusal(&f, "NUM_BLOCK 5 is not cdiv(n 1000, BLOCK 256)");
	minimax(&f);
	fake_set(&f, "n", 0);
	fake_expect_refusal(&f, "NUM_BLOCK 4 is not cdiv(n 0, BLOCK 256)");
	minimax(&f);
	f.l.grid[1] = 3;
	fake_expect_refusal(&f, "grid (8, 3, 1) is not (b * h = 8, NUM_BLOCK = 4, 1)");
	minimax(&f);
	f.l.grid[0] = 16; /* b * h is 8 */
	fake_expect_refusal(&f, "grid (16, 4, 1) is not (b * h = 8");
	minimax(&f);
	f.l.grid[2] = 2;
	fake_expect_refusal(&f, "grid (8, 4, 2)");
	minimax(&f);
	f.l.block[0] = 256;
	fake_expect_refusal(&f, "block (256, 1, 1) is not the kernel's 4 warps");
	minimax(&f);
	fake_set(&f, "V", 0x200008);
	fake_expect_refusal(&f, "V at 0x200008 is not a 16-byte aligned fp32 array");
	minimax(&f);
	fake_set(&f, "KV", 0);
	fake_expect_refusal(&f, "KV at (nil) is not a 16-byte aligned");
	/* 64 heads of 300000 tokens: off_bh * n * d passes 2^31 in the Triton kernel */
	minimax(&f);
	fake_replace(&f, "h=", "64");
	fake_set(&f, "n", 300000);
	fake_set(&f, "NUM_BLOCK", 1172);
	f.l.grid[0] = 64;
	f.l.grid[1] = 1172;
	fake_expect_refusal(&f, "64 heads of 300000 tokens (1172 blocks of 128 x 128) "
				"pass the framework's int32 offsets");
}

/* 16 heads of 1048575 tokens stay under 2^31 everywhere: rerouted, the int32 check is exact. */
static void test_plan_long(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct lightning_kv_args a;

	(void)state;
	minimax(&f);
	fake_replace(&f, "h=", "16");
	fake_set(&f, "n", 1048575);       /* 15 * 1048575 * 128 < 2^31 - 1 */
	fake_set(&f, "NUM_BLOCK", 4096);  /* 15 * 4096 * 16384 < 2^31 - 1 */
	f.l.grid[0] = 16;
	f.l.grid[1] = 4096;
	fake_expect_plan(&f, RULE, &plan, &a, sizeof(a));
	assert_int_equal(a.n, 1048575);
	fake_set(&f, "n", 1118482);       /* 15 * 1118482 * 128 > 2^31 - 1 */
	fake_set(&f, "NUM_BLOCK", 4370);
	f.l.grid[1] = 4370;
	fake_expect_refusal(&f, "int32 offsets");
}

/* The load-time decision: d = e = 128 fp32 loads; others meet Triton's OutOfResources. */
static void test_admit(void **state)
{
	static const struct {
		uint64_t shared;
		uint32_t threads;
		const char *from, *to, *reason; /* reason NULL: admitted */
	} cases[] = {
		{ 131584, 128, NULL, NULL, NULL },
		{ 164352, 128, NULL, NULL, NULL },
		{ 131584, 128, "d=128;e=128", "d=128;e=256", "compiled with e 256" },
		{ 131584, 128, "CBLOCK=64;NUM_CBLOCK=4", "CBLOCK=32;NUM_CBLOCK=8", "CBLOCK 32" },
		{ 197120, 128, NULL, NULL, "has no tile of 197120 B" },
		/* 8 warps: the same bytes, another block (tests/gpu/oracle_lightning.py's refusal) */
		{ 164352, 256, "num_warps=4", "num_warps=8",
		  "tile runs 4 warps, the kernel 256 threads" },
		/* the dtype is a type, not a value: loaded, then refused at launch */
		{ 131584, 128, "K:*fp32", "K:*bf16", NULL },
	};
	struct target_limits sm120;
	size_t i;

	(void)state;
	assert_int_equal(target_parse("sm120", &sm120, NULL), 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct route_kernel k = { "_fwd_kv_parallel", cases[i].shared, cases[i].threads,
					  CONSTEXPRS SIGNATURE, 0 };

		fake_expect_admit(&k, &sm120, RULE, cases[i].from, cases[i].to, cases[i].reason, i);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_minimax),
		cmocka_unit_test(test_plan_sm90_batch),
		cmocka_unit_test(test_plan_one_token),
		cmocka_unit_test(test_plan_long),
		cmocka_unit_test(test_refused_without_facts),
		cmocka_unit_test(test_refused_compiled),
		cmocka_unit_test(test_refused_launch),
		cmocka_unit_test(test_admit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

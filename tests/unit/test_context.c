/*
 * test_context.c - rule sglang-context-attention and adapter sglang_context
 * (core/adapters/sglang_context.c) on launches shaped exactly like SGLang's
 * context_attention_fwd `_fwd_kernel` at head size 256, BLOCK 128, 8 warps
 * (163840 B compiled for sm_120, 131072 B for sm_90), with the compiled text
 * the Python hook records for it (the real kernel's, as tests/oracle/
 * context_launches.py prints it): the plan the adapter builds, every value
 * it must refuse with a reason, the refusal without the facts, and the
 * load-time decision (route_admit) for the head sizes and dtypes SGLang
 * compiles.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../kernels/attention/extend.h"
#include "../../core/route/admit.h"
#include "fake_launch.h"

#define RULE "sglang-context-attention"
#define SM_SCALE 0.0371f

/* The real kernel's facts at head size 256 (12 q heads over 3 kv heads, causal), less the types. */
#define CONSTEXPRS "num_warps=8;num_stages=1;kv_group_num=4;BLOCK_M=128;BLOCK_DMODEL=256;" \
		   "BLOCK_N=128;IS_CAUSAL=1;Lk=256"
#define SIGNATURE ";Q:*bf16;K:*bf16;V:*bf16;sm_scale:fp32;B_Start_Loc:*i32;B_Seqlen:*i32;" \
		  "Out:*bf16;stride_qbs:i32;stride_qh:i32;stride_kbs:i32;stride_kh:i32;" \
		  "stride_vbs:i32;stride_vh:i32;stride_obs:i32;stride_oh:i32"

/*
 * context - 3 sequences, the longest 1025 tokens: grid (3, 12, cdiv(1025,
 * 128)), q and o [T, 12, 256], k and v [T, 3, 256] contiguous, compiled for
 * sm_120 (163840 B).
 */
static void context(struct fake_launch *f)
{
	static const struct fake_value ints[] = {
		{ "Q", 0x100000 }, { "K", 0x200000 }, { "V", 0x300000 }, { "B_Start_Loc", 0x400000 },
		{ "B_Seqlen", 0x500000 }, { "Out", 0x600000 },
		{ "stride_qbs", 12 * 256 }, { "stride_qh", 256 }, { "stride_kbs", 3 * 256 },
		{ "stride_kh", 256 }, { "stride_vbs", 3 * 256 }, { "stride_vh", 256 },
		{ "stride_obs", 12 * 256 }, { "stride_oh", 256 },
	};

	fake_init(f, RULE, ints, sizeof(ints) / sizeof(ints[0]), CONSTEXPRS SIGNATURE);
	fake_set_fp32(f, "sm_scale", SM_SCALE);
	f->l = (struct select_launch){ .kernel = "_fwd_kernel", .grid = { 3, 12, 9 },
				       .block = { 256, 1, 1 }, .dynamic_smem = 163840,
				       .compiled = f->compiled };
}

/* Causal, 4 q heads per kv head: every field of the plan. */
static void test_plan_causal_gqa(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct attn_extend_args a;

	(void)state;
	context(&f);
	fake_expect_plan(&f, RULE, &plan, &a, sizeof(a));
	assert_string_equal(plan.kernel, ATTN_EXTEND_256_BF16);
	assert_ptr_equal(a.q, (void *)0x100000);
	assert_ptr_equal(a.k_ext, (void *)0x200000);
	assert_ptr_equal(a.v_ext, (void *)0x300000);
	assert_ptr_equal(a.o, (void *)0x600000);
	assert_ptr_equal(a.qo_indptr, (void *)0x400000);
	assert_ptr_equal(a.qo_len, (void *)0x500000);
	assert_null(a.kv_indptr);
	assert_null(a.kv_indices);
	assert_null(a.k_buf);
	assert_null(a.v_buf);
	assert_null(a.lse);
	assert_int_equal(a.q_tok, 12 * 256);
	assert_int_equal(a.q_head, 256);
	assert_int_equal(a.kx_tok, 3 * 256);
	assert_int_equal(a.kx_head, 256);
	assert_int_equal(a.vx_tok, 3 * 256);
	assert_int_equal(a.vx_head, 256);
	assert_int_equal(a.o_tok, 12 * 256);
	assert_int_equal(a.o_head, 256);
	assert_true(a.sm_scale == SM_SCALE);
	assert_true(a.k_scale == 1.0f && a.v_scale == 1.0f && a.logit_cap == 0.0f);
	assert_int_equal(a.batch, 3);
	assert_int_equal(a.kv_group_num, 4);
	assert_int_equal(a.lq, 256);
	assert_int_equal(a.lv, 256);
	assert_int_equal(a.flags, ATTN_EXTEND_START_LEN | ATTN_EXTEND_SKIP_PREFIX | ATTN_EXTEND_CAUSAL);
	/* Triton's 9 x 128 tokens per sequence, 4 packed rows each, 64 rows a block */
	assert_int_equal(plan.grid[0], 9 * 128 * 4 / ATTN_EXTEND_ROWS_256);
	assert_int_equal(plan.grid[1], 3);
	assert_int_equal(plan.grid[2], 3);
	assert_int_equal(plan.block[0], ATTN_EXTEND_THREADS);
	assert_int_equal(plan.dynamic_smem, ATTN_EXTEND_SMEM_256);
}

/* A vision tower: non-causal, one kv head per q head, odd sequence count; sm_90's 131072 B. */
static void test_plan_vit_sm90(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct attn_extend_args a;

	(void)state;
	context(&f);
	fake_replace(&f, "IS_CAUSAL=", "0");
	fake_replace(&f, "kv_group_num=", "1");
	fake_set(&f, "stride_kbs", 12 * 256);
	fake_set(&f, "stride_vbs", 12 * 256);
	f.l.grid[0] = 5;
	f.l.grid[2] = 1;
	f.l.dynamic_smem = 131072;
	fake_expect_plan(&f, RULE, &plan, &a, sizeof(a));
	assert_string_equal(plan.kernel, ATTN_EXTEND_256_BF16);
	assert_int_equal(a.flags, ATTN_EXTEND_START_LEN | ATTN_EXTEND_SKIP_PREFIX);
	assert_int_equal(a.kv_group_num, 1);
	assert_int_equal(a.batch, 5);
	assert_int_equal(plan.grid[0], 128 / ATTN_EXTEND_ROWS_256);
	assert_int_equal(plan.grid[1], 12);
	assert_int_equal(plan.grid[2], 5);
}

/* Without the facts, IS_CAUSAL, kv_group_num and Lk are unknown: refused, saying so. */
static void test_refused_without_facts(void **state)
{
	struct fake_launch f;

	(void)state;
	context(&f);
	f.l.compiled = NULL;
	fake_expect_refusal(&f, "IS_CAUSAL, kv_group_num and Lk (the head size) are "
				"compiled into _fwd_kernel");
	f.l.dynamic_smem = 131072;
	fake_expect_refusal(&f, "compiled facts of the shim's Python hook");
	f.l.dynamic_smem = 65536; /* a tile no rule has */
	fake_expect_refusal(&f, "not 65536 B");
}

/* Head sizes, dtypes and index widths the bundled kernel does not compute. */
static void test_refused_compiled(void **state)
{
	static const struct fake_edit cases[] = {
		{ "Lk=", "192", "compiled with Lk 192; rule sglang-context-attention reroutes it only "
				"with Lk 256" },
		{ "Lk=", "255", "compiled with Lk 255" },
		{ "BLOCK_DMODEL=", "128", "compiled with BLOCK_DMODEL 128" },
		{ "num_warps=", "4", "compiled with num_warps 4" },
		{ "Q:", "*fp16", "Q is *fp16 in the compiled kernel; attn_extend reads it as *bf16" },
		{ "K:", "*fp32", "K is *fp32" },
		{ "V:", "*fp16", "V is *fp16" },
		{ "Out:", "*fp16", "Out is *fp16" },
		{ "B_Start_Loc:", "*i64", "B_Start_Loc is *i64" },
		{ "B_Seqlen:", "*i64", "B_Seqlen is *i64" },
		{ "kv_group_num=", "0", "kv_group_num 0" },
		{ "IS_CAUSAL=", "None", "do not state IS_CAUSAL" },
	};

	(void)state;
	fake_expect_refusals(context, cases, sizeof(cases) / sizeof(cases[0]));
}

/* The launch's own values that do not add up. */
static void test_refused_launch(void **state)
{
	struct fake_launch f;

	(void)state;
	context(&f);
	f.l.grid[1] = 10; /* 10 q heads over kv_group_num 4 */
	fake_expect_refusal(&f, "kv_group_num 4 does not divide the 10 q heads");
	context(&f);
	f.l.block[0] = 128;
	fake_expect_refusal(&f, "block (128, 1, 1) is not the tile's 8 warps");
	context(&f);
	f.l.grid[2] = 0;
	fake_expect_refusal(&f, "empty grid");
	context(&f);
	fake_set(&f, "stride_qh", 200); /* heads of 256 overlap */
	fake_expect_refusal(&f, "q strides (3072, 200)");
	context(&f);
	fake_set(&f, "stride_kbs", 2 * 256); /* 3 kv heads of 256 do not fit 512 */
	fake_expect_refusal(&f, "k/v strides (512, 256, 768, 256) do not fit 3 kv heads");
	context(&f);
	fake_set(&f, "stride_obs", 12 * 256 + 4);
	fake_expect_refusal(&f, "stride_obs = 3076 is not a multiple of 8");
	context(&f);
	fake_set(&f, "V", 0x300008);
	fake_expect_refusal(&f, "V at 0x300008 is not 16-byte aligned");
	context(&f);
	fake_set(&f, "B_Seqlen", 0x500002);
	fake_expect_refusal(&f, "not a 4-byte aligned int32 array");
	context(&f);
	fake_set_fp32(&f, "sm_scale", NAN);
	fake_expect_refusal(&f, "sm_scale nan is not finite");
}

/* The load-time decision: head size 256 bf16 loads; others meet Triton's OutOfResources. */
static void test_admit(void **state)
{
	static const struct {
		uint64_t shared;
		const char *from, *to, *reason; /* reason NULL: admitted */
	} cases[] = {
		{ 163840, NULL, NULL, NULL },
		{ 131072, NULL, NULL, NULL },
		{ 163840, "Lk=256", "Lk=192", "compiled with Lk 192" },
		/* fp32 at head size 128: 131072 B on sm_120 and sm_90 */
		{ 131072, "BLOCK_DMODEL=256;BLOCK_N=128;IS_CAUSAL=1;Lk=256",
		  "BLOCK_DMODEL=128;BLOCK_N=128;IS_CAUSAL=1;Lk=128", "Lk 128" },
		/* the dtype is a type, not a value: loaded, then refused at launch */
		{ 163840, "Q:*bf16", "Q:*fp16", NULL },
	};
	struct target_limits sm120;
	size_t i;

	(void)state;
	assert_int_equal(target_parse("sm120", &sm120, NULL), 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct route_kernel k = { "_fwd_kernel", cases[i].shared, 256,
					  CONSTEXPRS SIGNATURE, 0 };

		fake_expect_admit(&k, &sm120, RULE, cases[i].from, cases[i].to, cases[i].reason, i);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_causal_gqa),
		cmocka_unit_test(test_plan_vit_sm90),
		cmocka_unit_test(test_refused_without_facts),
		cmocka_unit_test(test_refused_compiled),
		cmocka_unit_test(test_refused_launch),
		cmocka_unit_test(test_admit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_reroute.c - the reroute decision on launches shaped exactly like
 * SGLang's extend attention and vLLM's TRITON_MLA decode at their Hopper
 * configurations, and the fused-MoE GEMMs of SGLang and vLLM at the FP8
 * default (rules/ as built into the shim): which rule and reading is
 * chosen, the plan the adapter builds, and each inconsistency it must refuse
 * with a reason.  Then the same launches with the compiled facts the Python
 * hook records (core/rules/compiled.h, core/adapters/facts.h), synthetic
 * text in Triton's format: every check the facts enable, each both ways
 * (rules/AUDIT.md F1-F6).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../kernels/attention/decode.h"
#include "../../kernels/attention/extend.h"
#include "../../kernels/moe/moe_gemm.h"
#include "../../core/adapters/facts.h"
#include "../../core/adapters/fused_moe.h"
#include "../../core/adapters/select.h"
#include "../../core/limits/triton_smem.h"
#include "../../core/rules/compiled.h"
#include "../../core/route/admit.h"
#include "../../core/route/route.h"
#include "fake_launch.h"

static const char *dtype_setting, *page_setting, *top_k_setting, *hidden_setting;

static const char *setting(const char *name)
{
	return strcmp(name, "kv_cache_dtype") == 0 ? dtype_setting :
	       strcmp(name, "page_size") == 0	   ? page_setting :
	       strcmp(name, "top_k") == 0	   ? top_k_setting :
	       strcmp(name, "hidden_size") == 0	   ? hidden_setting :
						     NULL;
}

/*
 * index_of, set, drop - by parameter name, like fake_set and fake_drop, but
 * a name the rule lacks is skipped, not a failure: one launch below feeds
 * the rules of several signatures, which differ in the parameters they have.
 */
static int index_of(const struct fake_launch *f, const char *name)
{
	uint32_t i;

	for (i = 0; i < f->rule->n_params; i++)
		if (strcmp(f->rule->params[i].name, name) == 0)
			return (int)i;
	return -1;
}

static void set(struct fake_launch *f, const char *name, int64_t v)
{
	int i = index_of(f, name);

	if (i >= 0)
		f->value[i] = v;
}

static void drop(struct fake_launch *f, const char *name)
{
	int i = index_of(f, name);

	if (i >= 0)
		f->dropped[i] = 1;
}

/*
 * kimi_extend - Kimi K2 at TP8 (8 local q heads, MLA absorbed: one 576-wide
 * KV head), 3 sequences, longest extend 1000: grid (3, 8, cdiv(1000, 32)).
 */
static void kimi_extend(struct fake_launch *f, const char *rule_id)
{
	static const struct {
		const char *name;
		int64_t v;
	} ints[] = {
		{ "Q_Extend", 0x10000 }, { "K_Extend", 0x20000 }, { "V_Extend", 0x20000 },
		{ "O_Extend", 0x30000 }, { "K_Buffer", 0x40000 }, { "V_Buffer", 0x40000 },
		{ "qo_indptr", 0x50000 }, { "kv_indptr", 0x60000 }, { "kv_indices", 0x70000 },
		{ "kv_group_num", 8 }, { "stride_qbs", 8 * 576 }, { "stride_qh", 576 },
		{ "stride_kbs", 576 }, { "stride_kh", 576 }, { "stride_vbs", 576 },
		{ "stride_vh", 576 }, { "stride_obs", 8 * 512 }, { "stride_oh", 512 },
		{ "stride_buf_kbs", 576 }, { "stride_buf_kh", 576 }, { "stride_buf_vbs", 576 },
		{ "stride_buf_vh", 576 }, { "stride_buf_kpage", 576 }, { "stride_buf_ktok", 576 },
		{ "stride_buf_vpage", 576 }, { "stride_buf_vtok", 576 }, { "compact_batch_size", 3 },
	};
	static const char *const none[] = { "mask_ptr", "mask_indptr", "sink_ptr",
					    "window_kv_offset_ptr", "LSE_Extend", "Aux0" };
	size_t i;

	memset(f, 0, sizeof(*f));
	f->rule = fake_rule(rule_id);
	for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		set(f, ints[i].name, ints[i].v);
	for (i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		drop(f, none[i]);
	for (i = 0; i < f->rule->n_params; i++)
		f->fvalue[i] = 1.0f;
	f->fvalue[index_of(f, "sm_scale")] = 0.0416666f;
	f->l = (struct select_launch){ .kernel = "_fwd_kernel", .grid = { 3, 8, 32 },
				       .block = { 256, 1, 1 }, .dynamic_smem = 106496,
				       .setting = setting };
	dtype_setting = "bf16";
}

/* expect_plan - rerouted, by rule @rule_id (or @or_id, a rule that reads it the same way). */
static void expect_plan(struct fake_launch *f, const char *rule_id, const char *or_id,
			struct reroute_plan *plan)
{
	const struct rule *r = NULL;
	struct sm_err why = { "" };

	fake_pack(f);
	if (reroute_select(rules_builtin, rules_builtin_count, &f->l, plan, &r, &why) != 0)
		fail_msg("not rerouted: %s", why.msg);
	if (strcmp(r->id, rule_id) != 0 && (!or_id || strcmp(r->id, or_id) != 0))
		fail_msg("rerouted by %s, expected %s", r->id, rule_id);
}

/* extend_facts - kimi_extend's launch with the facts SGLang's kernel compiles in (below). */
static void extend_facts(struct fake_launch *f);
/* extend_facts_fp8 - the same with an FP8 E4M3 KV cache. */
static void extend_facts_fp8(struct fake_launch *f);

static void test_every_release_reroutes(void **state)
{
	static const char *const ids[] = { "sglang-extend-2025-08", "sglang-extend-2026-03",
					   "sglang-extend-2026-06-29", "sglang-extend-2026-07-10",
					   "sglang-extend-main" };
	struct fake_launch f;
	struct reroute_plan plan;
	struct attn_extend_args a;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		kimi_extend(&f, ids[i]);
		/* 0.5.23 and later (F2): with the facts only */
		if (f.rule->needs_compiled_facts) {
			fake_expect_refusal(&f, "reroutes only with the kernel's compiled facts");
			extend_facts(&f);
		}
		expect_plan(&f, ids[i], NULL, &plan);
		assert_string_equal(plan.kernel, ATTN_EXTEND_MLA576_BF16);
		assert_int_equal(plan.args_size, sizeof(a));
		memcpy(&a, plan.args, sizeof(a));
		assert_ptr_equal(a.q, (void *)0x10000);
		assert_ptr_equal(a.o, (void *)0x30000);
		assert_ptr_equal(a.kv_indices, (void *)0x70000);
		assert_int_equal(a.kv_group_num, 8);
		assert_int_equal(a.lq, 576);
		assert_int_equal(a.lv, 512);
		assert_int_equal(a.batch, 3);
		assert_int_equal(a.q_tok, 8 * 576);
		assert_int_equal(a.o_head, 512);
		assert_int_equal(a.kb_slot, 576);
		assert_true(a.sm_scale == 0.0416666f);
		assert_int_equal(a.flags, ATTN_EXTEND_CAUSAL);
		assert_null(a.lse);
		/* Triton covered 32 M-blocks of 32 rows x 8 heads: 8192 packed rows / 64 per block */
		assert_int_equal(plan.grid[0], 32 * 32 * 8 / ATTN_EXTEND_ROWS_MLA576);
		assert_int_equal(plan.grid[1], 1);
		assert_int_equal(plan.grid[2], 3);
		assert_int_equal(plan.block[0], ATTN_EXTEND_THREADS);
		assert_int_equal(plan.dynamic_smem, ATTN_EXTEND_SMEM_MLA576);
	}
}

static void test_fp8_and_scales(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct attn_extend_args a;

	(void)state;
	kimi_extend(&f, "sglang-extend-2026-03");
	dtype_setting = "fp8_e4m3";
	f.fvalue[index_of(&f, "k_scale")] = 0.5f;
	f.fvalue[index_of(&f, "v_scale")] = 0.25f;
	extend_facts_fp8(&f);
	expect_plan(&f, "sglang-extend-2026-03", NULL, &plan);
	memcpy(&a, plan.args, sizeof(a));
	assert_string_equal(plan.kernel, ATTN_EXTEND_MLA576_FP8);
	assert_true(a.k_scale == 0.5f && a.v_scale == 0.25f);
	/* the release without k_scale/v_scale: FP8 is not verified there */
	kimi_extend(&f, "sglang-extend-2025-08");
	dtype_setting = "fp8_e4m3";
	fake_expect_refusal(&f, "with an FP8 KV cache: how that release scales FP8 keys is not verified");
	/* without the facts the cache dtype is the setting's */
	kimi_extend(&f, "sglang-extend-2025-08");
	dtype_setting = NULL;
	fake_expect_refusal(&f, "set SM120SHIM_KV_CACHE_DTYPE=bf16 or fp8_e4m3");
	dtype_setting = "fp16";
	fake_expect_refusal(&f, "SM120SHIM_KV_CACHE_DTYPE=fp16: use bf16 or fp8_e4m3");
}

/* SGLang main with one of kv_group_num / compact_batch_size == 1: the layout decides. */
static void test_main_dropped_int_is_told_apart(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct attn_extend_args a;

	(void)state;
	/* batch of 1: compact_batch_size (= batch) dropped, kv_group_num 8 present; the
	   2026-07-10 rule, which has no compact_batch_size, reads it the same way.  Both
	   reroute only with the facts (F2), which then state the one reading. */
	kimi_extend(&f, "sglang-extend-main");
	drop(&f, "compact_batch_size");
	f.l.grid[0] = 1;
	extend_facts(&f);
	expect_plan(&f, "sglang-extend-main", "sglang-extend-2026-07-10", &plan);
	memcpy(&a, plan.args, sizeof(a));
	assert_int_equal(a.kv_group_num, 8);
	assert_int_equal(a.batch, 1);
	/* the same sizes at a batch of 3: kv_group_num dropped (8 KV heads, as the
	   K layout shows), compact_batch_size 3 */
	kimi_extend(&f, "sglang-extend-main");
	drop(&f, "kv_group_num");
	set(&f, "stride_kbs", 8 * 576);
	set(&f, "stride_vbs", 8 * 576);
	set(&f, "stride_buf_kbs", 8 * 576);
	set(&f, "stride_buf_vbs", 8 * 576);
	set(&f, "stride_buf_kpage", 8 * 576);
	set(&f, "stride_buf_ktok", 8 * 576);
	set(&f, "stride_buf_vpage", 8 * 576);
	set(&f, "stride_buf_vtok", 8 * 576);
	extend_facts(&f);
	expect_plan(&f, "sglang-extend-main", NULL, &plan);
	memcpy(&a, plan.args, sizeof(a));
	assert_int_equal(a.kv_group_num, 1);
	assert_int_equal(plan.grid[1], 8);
	/* ... and with the MLA layout (one 576-wide KV head) neither reading fits */
	kimi_extend(&f, "sglang-extend-main");
	drop(&f, "kv_group_num");
	extend_facts(&f);
	fake_expect_refusal(&f, "");
}

static void test_inconsistent_launches_are_refused(void **state)
{
	struct fake_launch f;

	(void)state;
	kimi_extend(&f, "sglang-extend-2026-03");
	f.l.dynamic_smem = 106497;
	fake_expect_refusal(&f, "only at the shared-memory sizes of its tiles, not 106497 B");
	kimi_extend(&f, "sglang-extend-2026-03");
	f.l.block[0] = 128;
	fake_expect_refusal(&f, "is not the tile's 8 warps");
	kimi_extend(&f, "sglang-extend-2026-03");
	f.dropped[index_of(&f, "mask_ptr")] = 0;
	f.dropped[index_of(&f, "mask_indptr")] = 0;
	set(&f, "mask_ptr", 0x80000);
	set(&f, "mask_indptr", 0x90000);
	fake_expect_refusal(&f, "");
	kimi_extend(&f, "sglang-extend-2026-03");
	set(&f, "kv_group_num", 3);
	fake_expect_refusal(&f, "kv_group_num 3 does not divide the 8 q heads");
	kimi_extend(&f, "sglang-extend-2026-03");
	set(&f, "stride_qh", 512);
	fake_expect_refusal(&f, "q strides");
	kimi_extend(&f, "sglang-extend-2026-03");
	set(&f, "stride_buf_kbs", 580);
	fake_expect_refusal(&f, "stride_buf_kbs = 580 is not a multiple of 8 elements");
	kimi_extend(&f, "sglang-extend-2026-06-29");
	set(&f, "stride_buf_kpage", 576 * 16);
	fake_expect_refusal(&f, "describe a page size above 1");
	kimi_extend(&f, "sglang-extend-main");
	set(&f, "compact_batch_size", 5);
	fake_expect_refusal(&f, "compact_batch_size 5 differs from the batch of the grid (3)");
	kimi_extend(&f, "sglang-extend-2026-07-10");
	set(&f, "aux0_len", 4);
	fake_expect_refusal(&f, "a score_mod is compiled in");
	kimi_extend(&f, "sglang-extend-2026-03");
	f.l.params = NULL;
	fake_pack(&f);
	f.l.params = NULL;
	{
		struct reroute_plan plan;
		const struct rule *r;
		struct sm_err why;

		assert_int_not_equal(reroute_select(rules_builtin, rules_builtin_count, &f.l, &plan,
						    &r, &why), 0);
		assert_non_null(strstr(why.msg, "through 'extra'"));
	}
	/* SGLang's prefill_attention.py _fwd_kernel (Q, K, V, sm_scale, B_Start_Loc,
	   B_Seqlen, Out, 8 strides + Triton's 2 scratch pointers): same name, another list */
	{
		static const uint32_t prefill[17] = { 8, 8, 8, 4, 8, 8, 8, 4, 4, 4, 4, 4, 4, 4, 4, 8, 8 };
		struct reroute_plan plan;
		const struct rule *r;
		struct sm_err why;

		kimi_extend(&f, "sglang-extend-2026-03");
		fake_pack(&f);
		f.l.param_sizes = prefill;
		f.l.n_params = 17;
		assert_int_not_equal(reroute_select(rules_builtin, rules_builtin_count, &f.l, &plan,
						    &r, &why), 0);
		assert_non_null(strstr(why.msg, "fit no reading of rule"));
	}
	/* a truncated list of the extend kernel itself */
	kimi_extend(&f, "sglang-extend-2026-03");
	fake_pack(&f);
	f.l.n_params = 14;
	{
		struct reroute_plan plan;
		const struct rule *r;
		struct sm_err why;

		assert_int_not_equal(reroute_select(rules_builtin, rules_builtin_count, &f.l, &plan,
						    &r, &why), 0);
		assert_non_null(strstr(why.msg, "fit no reading of rule"));
		f.l.kernel = "_fwd_kernel_stage1";
		assert_int_equal(reroute_select(rules_builtin, rules_builtin_count, &f.l, &plan, &r,
						&why), -ENOENT);
	}
}

/*
 * vllm_decode - vLLM TRITON_MLA decode with an FP8 cache: 5 sequences, 8 heads
 * (Kimi K2 TP8), 16 splits, pages of 64 tokens of one 576-wide head.
 */
static void vllm_decode(struct fake_launch *f, const char *rule_id)
{
	static const struct {
		const char *name;
		int64_t v;
	} ints[] = {
		{ "Q", 0x10000 }, { "K_Buffer", 0x20000 }, { "V_Buffer", 0x20000 },
		{ "Req_to_tokens", 0x30000 }, { "B_Seqlen", 0x40000 }, { "Att_Out", 0x50000 },
		{ "k_scale", 0x60000 }, { "v_scale", 0x70000 }, { "stride_req_to_tokens_b", 512 },
		{ "stride_qbs", 8 * 576 }, { "stride_qh", 576 }, { "stride_buf_kpbs", 64 * 576 },
		{ "stride_buf_kbs", 576 }, { "stride_buf_kh", 576 }, { "stride_buf_vpbs", 64 * 576 },
		{ "stride_buf_vbs", 576 }, { "stride_buf_vh", 576 }, { "stride_mid_ob", 8 * 16 * 513 },
		{ "stride_mid_oh", 16 * 513 }, { "stride_mid_os", 513 },
	};
	size_t i;

	memset(f, 0, sizeof(*f));
	f->rule = fake_rule(rule_id);
	for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		set(f, ints[i].name, ints[i].v);
	f->fvalue[index_of(f, "sm_scale")] = 0.0416666f;
	f->l = (struct select_launch){ .kernel = "_fwd_grouped_kernel_stage1", .grid = { 5, 1, 16 },
				       .block = { 128, 1, 1 }, .dynamic_smem = 102400,
				       .setting = setting };
	page_setting = "64";
}

static void test_vllm_mla_decode(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct attn_decode_args a;

	(void)state;
	vllm_decode(&f, "vllm-mla-decode-2026-06");
	expect_plan(&f, "vllm-mla-decode-2026-06", NULL, &plan);
	memcpy(&a, plan.args, sizeof(a));
	assert_string_equal(plan.kernel, ATTN_DECODE_MLA_FP8);
	assert_int_equal(a.scheme, ATTN_DECODE_VLLM);
	assert_int_equal(a.q_heads, 8);
	assert_int_equal(a.kv_group, 8);
	assert_int_equal(a.page_size, 64);
	assert_int_equal(a.k_stride_page, 64 * 576);
	assert_int_equal(a.out_stride_s, 513);
	assert_ptr_equal(a.block_table, (void *)0x30000);
	/* IS_MLA: V is the k_scale-dequantised K tile; vLLM never applies v_scale */
	assert_ptr_equal(a.k_scale, (void *)0x60000);
	assert_ptr_equal(a.v_scale, (void *)0x60000);
	assert_null(a.lse);
	assert_int_equal(plan.grid[0], 1);
	assert_int_equal(plan.grid[1], 16);
	assert_int_equal(plan.grid[2], 5);
	assert_int_equal(plan.dynamic_smem, ATTN_DECODE_MLA_FP8_SMEM);
	/* the 2026-03 list has no page strides: pages are contiguous */
	vllm_decode(&f, "vllm-mla-decode-2026-03");
	expect_plan(&f, "vllm-mla-decode-2026-03", NULL, &plan);
	memcpy(&a, plan.args, sizeof(a));
	assert_int_equal(a.k_stride_page, 64 * 576);
	/* 20 heads: two blocks of 16 in vLLM's grid, two in ours */
	vllm_decode(&f, "vllm-mla-decode-2026-06");
	set(&f, "stride_mid_ob", 20 * 16 * 513);
	set(&f, "stride_qbs", 20 * 576);
	f.l.grid[1] = 2;
	expect_plan(&f, "vllm-mla-decode-2026-06", NULL, &plan);
	assert_int_equal(plan.grid[0], 2);
	/* refusals */
	vllm_decode(&f, "vllm-mla-decode-2026-06");
	page_setting = NULL;
	fake_expect_refusal(&f, "set SM120SHIM_PAGE_SIZE to vLLM's --block-size");
	vllm_decode(&f, "vllm-mla-decode-2026-06");
	page_setting = "128";
	fake_expect_refusal(&f, "page strides 36864 / 36864 cannot hold 128 tokens");
	vllm_decode(&f, "vllm-mla-decode-2026-06");
	f.l.grid[2] = 8;
	fake_expect_refusal(&f, "does not match 8 heads and 16 splits read from Att_Out");
	vllm_decode(&f, "vllm-mla-decode-2026-06");
	set(&f, "stride_mid_os", 512);
	fake_expect_refusal(&f, "are not a contiguous [batch, heads, splits, Lv + 1] buffer");
	vllm_decode(&f, "vllm-mla-decode-2026-06");
	set(&f, "V_Buffer", 0x28000);
	fake_expect_refusal(&f, "V_Buffer is not K_Buffer's first 512 channels");
	vllm_decode(&f, "vllm-mla-decode-2026-06");
	set(&f, "k_scale", 0);
	fake_expect_refusal(&f, "an FP8 cache without a k_scale pointer");
	vllm_decode(&f, "vllm-mla-decode-2026-06");
	f.l.dynamic_smem = 63488; /* the bf16 cache: fits, and no tile claims it */
	fake_expect_refusal(&f, "not 63488 B");
}

/*
 * test_decision_table - route_decide on a launch a rule covers (vLLM's decode
 * at 102400 B), the same launch with a stride no reading accepts, and the
 * bf16 decode that fits: every mode, with the action, rule and reason.
 */
static void test_decision_table(void **state)
{
	static const struct {
		const char *what;
		int stride_os;     /* stride_mid_os: 513 is vLLM's, 512 breaks the adapter */
		uint64_t smem;
		enum route_action by_mode[4]; /* off, diagnose, enforce, reroute */
		const char *reason;            /* in reroute mode */
	} rows[] = {
		{ "covered", 513, 102400, { ROUTE_PASS, ROUTE_LOG, ROUTE_REFUSE, ROUTE_REROUTE }, "" },
		{ "inconsistent", 512, 102400, { ROUTE_PASS, ROUTE_LOG, ROUTE_REFUSE, ROUTE_REFUSE },
		  "are not a contiguous [batch, heads, splits, Lv + 1] buffer" },
		{ "fits", 513, 63488, { ROUTE_PASS, ROUTE_PASS, ROUTE_PASS, ROUTE_PASS }, "" },
	};
	struct target_limits sm120;
	struct route_decision d;
	struct route_launch l;
	struct fake_launch f;
	size_t i;
	int m;

	(void)state;
	assert_int_equal(target_parse("sm120", &sm120, NULL), 0);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		for (m = SHIM_MODE_OFF; m <= SHIM_MODE_REROUTE; m++) {
			vllm_decode(&f, "vllm-mla-decode-2026-06");
			set(&f, "stride_mid_os", rows[i].stride_os);
			f.l.dynamic_smem = rows[i].smem;
			fake_pack(&f);
			l = (struct route_launch){ .event = ROUTE_EVENT_LAUNCH, .sel = f.l };
			memset(&d, 0x5a, sizeof(d));
			route_decide(&l, &sm120, m, rules_builtin, rules_builtin_count, 197632, &d);
			if (d.action != rows[i].by_mode[m])
				fail_msg("%s, mode %s: %s, expected %s (%s)", rows[i].what,
					 route_mode_name(m), route_action_name(d.action),
					 route_action_name(rows[i].by_mode[m]), d.why.msg);
			if (d.action == ROUTE_REROUTE) {
				assert_string_equal(d.rule->id, "vllm-mla-decode-2026-06");
				assert_string_equal(d.plan.kernel, ATTN_DECODE_MLA_FP8);
				assert_string_equal(d.why.msg, "");
			} else {
				assert_null(d.rule);
			}
			if (m == SHIM_MODE_REROUTE && rows[i].reason[0] &&
			    !strstr(d.why.msg, rows[i].reason))
				fail_msg("%s: reason '%s' lacks '%s'", rows[i].what, d.why.msg,
					 rows[i].reason);
			if (m != SHIM_MODE_REROUTE)
				assert_string_equal(d.why.msg, "");
		}
}

/*
 * kimi_moe - Kimi K2 at TP8 (hidden 7168, 384 experts, top_k 8, I 256): the
 * FP8 gate/up launch (N 512, K 7168) of 300 tokens at SGLang's default FP8
 * tile (128 x 256 x 128, 8 warps), per-tensor scales, as rule @rule_id lays
 * its parameters out.  EM = 2400 + 385 * 127.
 */
static void kimi_moe(struct fake_launch *f, const char *rule_id)
{
	static const struct {
		const char *name;
		int64_t v;
	} ints[] = {
		{ "a_ptr", 0x100000 }, { "b_ptr", 0x200000 }, { "c_ptr", 0x300000 },
		{ "a_scale_ptr", 0x400000 }, { "b_scale_ptr", 0x500000 }, { "topk_weights_ptr", 0x600000 },
		{ "sorted_token_ids_ptr", 0x700000 }, { "expert_ids_ptr", 0x800000 },
		{ "num_tokens_post_padded_ptr", 0x900000 }, { "N", 512 }, { "K", 7168 },
		{ "EM", 2400 + 385 * 127 }, { "num_valid_tokens", 2400 }, { "stride_am", 7168 },
		{ "stride_be", 512 * 7168 }, { "stride_bn", 7168 }, { "stride_cm", 512 },
	};
	static const char *const none[] = { "a_desc", "b_desc", "bias_ptr", "add_mask_ptr",
					    "b_bias_ptr", "stride_ak", "stride_bk", "stride_cn" };
	size_t i;

	memset(f, 0, sizeof(*f));
	f->rule = fake_rule(rule_id);
	for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		set(f, ints[i].name, ints[i].v);
	for (i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		drop(f, none[i]);
	f->l = (struct select_launch){ .kernel = "fused_moe_kernel",
				       .grid = { (unsigned)(((2400 + 385 * 127 + 127) / 128) * 2), 1, 1 },
				       .block = { 256, 1, 1 }, .dynamic_smem = 147456,
				       .setting = setting };
	top_k_setting = "8";
	hidden_setting = "7168";
}

/* moe_plan_args - the moe_gemm_args of a launch rerouted by @rule_id (or
 * @or_id: SGLang main without add_mask_ptr reads as the 2026-03 list). */
static struct moe_gemm_args moe_plan_args(struct fake_launch *f, const char *rule_id, const char *or_id)
{
	struct reroute_plan plan;
	struct moe_gemm_args a;

	int i, threads = MOE_GEMM_THREADS;   /* the decode kernels' */

	expect_plan(f, rule_id, or_id, &plan);
	assert_int_equal(plan.args_size, sizeof(a));
	memcpy(&a, plan.args, sizeof(a));
	for (i = 0; i < MOE_GEMM_NKERNELS; i++)
		if (!strcmp(plan.kernel, moe_gemm_kernels[i].name))
			threads = moe_gemm_threads(moe_gemm_kernels[i].quant, moe_gemm_kernels[i].tm);
	assert_int_equal(plan.block[0], threads);
	assert_int_equal(plan.grid[2], 1);
	return a;
}

static void test_fused_moe(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct moe_gemm_args a;
	static const char *const sglang[] = { "sglang-moe-2026-03", "sglang-moe-main" };
	size_t i;

	(void)state;
	for (i = 0; i < 2; i++) {
		/* gate/up, per tensor: the model's top_k, no routed weight */
		kimi_moe(&f, sglang[i]);
		a = moe_plan_args(&f, sglang[i], sglang[1 - i]);
		assert_int_equal(a.scale, MOE_SCALE_TENSOR);
		assert_int_equal(a.top_k, 8);
		assert_int_equal(a.mul_routed_weight, 0);
		assert_int_equal(a.N, 512);
		assert_int_equal(a.K, 7168);
		assert_int_equal(a.block_m, 128);
		assert_ptr_equal(a.c, (void *)0x300000);
		assert_ptr_equal(a.sorted_ids, (void *)0x700000);
		/* down, per channel: stride_asm/ask/bsk/bsn are 1 and dropped */
		kimi_moe(&f, sglang[i]);
		set(&f, "N", 7168), set(&f, "K", 256), set(&f, "stride_am", 256);
		set(&f, "stride_be", 7168 * 256), set(&f, "stride_bn", 256), set(&f, "stride_cm", 7168);
		set(&f, "stride_bse", 7168);
		drop(&f, "stride_asm"), drop(&f, "stride_ask"), drop(&f, "stride_bsk"), drop(&f, "stride_bsn");
		f.l.grid[0] = ((2400 + 385 * 127 + 127) / 128) * 28;
		a = moe_plan_args(&f, sglang[i], sglang[1 - i]);
		assert_int_equal(a.scale, MOE_SCALE_CHANNEL);
		assert_int_equal(a.top_k, 1);
		assert_int_equal(a.mul_routed_weight, 1);
		assert_int_equal(a.bs_stride_e, 7168);
		assert_int_equal(a.as_stride_m, 1);
	}
	/* 128x128 blocks: stride_ask and stride_bsk are 1 and dropped */
	kimi_moe(&f, "sglang-moe-main");
	set(&f, "stride_asm", 56), set(&f, "stride_bse", 4 * 56), set(&f, "stride_bsn", 56);
	drop(&f, "stride_ask"), drop(&f, "stride_bsk");
	a = moe_plan_args(&f, "sglang-moe-main", "sglang-moe-2026-03");
	assert_int_equal(a.scale, MOE_SCALE_BLOCK);
	assert_int_equal(a.group_k, 128);
	assert_int_equal(a.as_stride_m, 56);
	assert_int_equal(a.bs_stride_n, 56);
	/* ... at 4096 tokens (85 rows an expert) the 32-row tile; per tensor the 128-row one */
	for (i = 0; i < 2; i++) {
		const int tm = i == 0 ? 32 : 128;

		kimi_moe(&f, "sglang-moe-main");
		if (i == 0) {
			set(&f, "stride_asm", 56), set(&f, "stride_bse", 4 * 56), set(&f, "stride_bsn", 56);
			drop(&f, "stride_ask"), drop(&f, "stride_bsk");
		}
		set(&f, "num_valid_tokens", 4096 * 8), set(&f, "EM", 4096 * 8 + 385 * 127);
		f.l.grid[0] = ((4096 * 8 + 385 * 127 + 127) / 128) * 2;
		expect_plan(&f, "sglang-moe-main", "sglang-moe-2026-03", &plan);
		assert_string_equal(plan.kernel, moe_gemm_kernel_name(MOE_FP8, tm));
		assert_int_equal(plan.grid[1], (4096 * 8 + 385 * 127 + tm - 1) / tm);
	}
	/* vLLM: its own list, same plan; 4 tokens: the decode kernel, 16 columns a block
	   (K 7168), one block row per routed row at most */
	kimi_moe(&f, "vllm-moe-main");
	set(&f, "num_valid_tokens", 32), set(&f, "EM", 32 + 385 * 127);
	f.l.grid[0] = ((32 + 385 * 127 + 127) / 128) * 2;
	expect_plan(&f, "vllm-moe-main", NULL, &plan);
	assert_string_equal(plan.kernel, moe_gemm_decode_name(MOE_FP8, 16, 8));
	assert_int_equal(moe_gemm_decode_tn(MOE_FP8, 7168), 16);
	assert_int_equal(plan.grid[0], moe_gemm_decode_cols(MOE_FP8, 512, 7168, 16, 32 + 385 * 127, 128, 32));
	assert_int_equal(plan.grid[0], 32);   /* 32 tiles x 32 block rows: a tile a block */
	assert_int_equal(plan.grid[1], 32);
	assert_int_equal(plan.dynamic_smem, 0);
	/* the same launch on a GPU whose multiprocessors the launch names (the shim's device):
	   on 132 SMs (2 decode blocks each) 1024 blocks of 16 columns fill 4 waves 0.97 full, and
	   256 of 64 columns one as full: the 64-column tile; on 188 (an RTX PRO 6000) the wider
	   tiles' waves are emptier (0.68 against 0.91): the 16-column tile */
	kimi_moe(&f, "vllm-moe-main");
	set(&f, "num_valid_tokens", 32), set(&f, "EM", 32 + 385 * 127);
	f.l.grid[0] = ((32 + 385 * 127 + 127) / 128) * 2;
	f.l.sms = 132;
	expect_plan(&f, "vllm-moe-main", NULL, &plan);
	assert_string_equal(plan.kernel, moe_gemm_decode_name(MOE_FP8, 64, 8));
	assert_int_equal(plan.grid[0], 8);
	assert_int_equal(plan.grid[1], 32);
	f.l.sms = 188;
	expect_plan(&f, "vllm-moe-main", NULL, &plan);
	assert_string_equal(plan.kernel, moe_gemm_decode_name(MOE_FP8, 16, 8));
	f.l.sms = 0;
	/* ... 8 tokens (64 routed rows): FP8's 16-row tile (on a long K the decode kernels take
	   fewer than MOE_DECODE_FP8_LONG_VALID routed rows), bf16's decode kernel of twice the
	   columns (MOE_DECODE_WIDE_ROWS) */
	kimi_moe(&f, "vllm-moe-main");
	set(&f, "num_valid_tokens", 64), set(&f, "EM", 64 + 385 * 127);
	f.l.grid[0] = ((64 + 385 * 127 + 127) / 128) * 2;
	expect_plan(&f, "vllm-moe-main", NULL, &plan);
	assert_string_equal(plan.kernel, moe_gemm_kernel_name(MOE_FP8, 16));
	kimi_moe(&f, "sglang-moe-2026-03");
	drop(&f, "a_scale_ptr"), drop(&f, "b_scale_ptr");
	set(&f, "num_valid_tokens", 64), set(&f, "EM", 64 + 385 * 127);
	f.l.grid[0] = ((64 + 385 * 127 + 127) / 128) * 2;
	expect_plan(&f, "sglang-moe-2026-03", "sglang-moe-main", &plan);
	assert_int_equal(moe_gemm_decode_tile(MOE_BF16, 512, 7168, 64 + 385 * 127, 128, 64, 0),
			 2 * moe_gemm_decode_tn(MOE_BF16, 7168));
	assert_string_equal(plan.kernel, moe_gemm_decode_name(MOE_BF16, 2 * moe_gemm_decode_tn(MOE_BF16, 7168), 8));
	assert_int_equal(plan.grid[0], moe_gemm_decode_cols(MOE_BF16, 512, 7168, 2 * moe_gemm_decode_tn(MOE_BF16, 7168),
							    64 + 385 * 127, 128, 64));
	/* bf16 (128 x 256 x 64 has the FP8 tile's size): no scale pointers; 6.25 rows an expert on
	   the gate/up's long K: the 32-row tile, its four stages */
	kimi_moe(&f, "sglang-moe-2026-03");
	drop(&f, "a_scale_ptr"), drop(&f, "b_scale_ptr");
	expect_plan(&f, "sglang-moe-2026-03", "sglang-moe-main", &plan);
	assert_string_equal(plan.kernel, moe_gemm_kernel_name(MOE_BF16, 32));
	assert_int_equal(plan.dynamic_smem, moe_gemm_smem(MOE_BF16, 32));
	assert_int_equal(plan.dynamic_smem, 49152);
	assert_int_equal(plan.block[0], 128);
	/* ... its down GEMM (K 256) at 4096 tokens: the 64-row tile on its shallow pipeline */
	kimi_moe(&f, "sglang-moe-2026-03");
	drop(&f, "a_scale_ptr"), drop(&f, "b_scale_ptr");
	set(&f, "N", 7168), set(&f, "K", 256), set(&f, "stride_am", 256);
	set(&f, "stride_be", 7168 * 256), set(&f, "stride_bn", 256), set(&f, "stride_cm", 7168);
	set(&f, "num_valid_tokens", 4096 * 8), set(&f, "EM", 4096 * 8 + 385 * 127);
	f.l.grid[0] = ((4096 * 8 + 385 * 127 + 127) / 128) * 28;
	expect_plan(&f, "sglang-moe-2026-03", "sglang-moe-main", &plan);
	assert_string_equal(plan.kernel, moe_gemm_kernel_name(MOE_BF16, 64));
	assert_int_equal(plan.dynamic_smem, 49152);
	assert_int_equal(plan.grid[1], (4096 * 8 + 385 * 127 + 63) / 64);
	a = moe_plan_args(&f, "sglang-moe-2026-03", "sglang-moe-main");
	assert_int_equal(a.stages, MOE_GEMM_SHALLOW_STAGES);
	assert_int_equal(a.top_k, 1);
	/* the Hopper sizes of the same tiles (sm_90 allocates one more stage) */
	kimi_moe(&f, "sglang-moe-2026-03");
	f.l.dynamic_smem = 196608;
	a = moe_plan_args(&f, "sglang-moe-2026-03", "sglang-moe-main");
	assert_int_equal(a.scale, MOE_SCALE_TENSOR);
	assert_int_equal(a.bs_stride_e, 1);
	/* only one of the scales: not an FP8 launch */
	kimi_moe(&f, "sglang-moe-2026-03");
	drop(&f, "a_scale_ptr");
	fake_expect_refusal(&f, "FP8 w8a8 with only one of a_scale and b_scale");
}

static void test_fused_moe_refusals(void **state)
{
	(void)state;
	struct fake_launch f;

	kimi_moe(&f, "sglang-moe-2026-03");
	top_k_setting = NULL;
	fake_expect_refusal(&f, "set SM120SHIM_TOP_K (or sm120 run --model DIR");
	kimi_moe(&f, "sglang-moe-2026-03");
	hidden_setting = NULL;
	fake_expect_refusal(&f, "set SM120SHIM_HIDDEN_SIZE");
	kimi_moe(&f, "sglang-moe-2026-03");
	hidden_setting = "5120";
	fake_expect_refusal(&f, "neither is the hidden size 5120");
	kimi_moe(&f, "sglang-moe-2026-03");
	top_k_setting = "7";
	fake_expect_refusal(&f, "2400 routed rows, not a multiple of top_k 7");
	kimi_moe(&f, "sglang-moe-2026-03");
	top_k_setting = "eight";
	fake_expect_refusal(&f, "SM120SHIM_TOP_K=eight is not top_k");
	kimi_moe(&f, "sglang-moe-2026-03");
	f.l.grid[0] += 2;
	fake_expect_refusal(&f, "is not cdiv(EM");
	kimi_moe(&f, "sglang-moe-2026-03");
	f.l.block[0] = 128;
	fake_expect_refusal(&f, "is not the tile's 8 warps");
	kimi_moe(&f, "sglang-moe-2026-03");
	set(&f, "stride_asm", 3);
	fake_expect_refusal(&f, "neither per tensor, per channel nor 128x128 blocks");
	kimi_moe(&f, "sglang-moe-2026-03");
	f.dropped[index_of(&f, "bias_ptr")] = 0;
	set(&f, "bias_ptr", 0xa00000);
	fake_expect_refusal(&f, "bias_ptr");
	kimi_moe(&f, "vllm-moe-main");
	drop(&f, "sorted_token_ids_ptr");
	fake_expect_refusal(&f, "naive block assignment");
	kimi_moe(&f, "sglang-moe-2026-03");
	f.l.dynamic_smem = 73728; /* the M <= E default fits: no tile */
	fake_expect_refusal(&f, "not 73728 B");
}

static void test_moe_decisions(void **state)
{
	/* Kimi K2 TP8 (384 experts, top_k 8): gate/up (K 7168) at one token, 8 rows over 384
	   experts -> 16 rows (the decode kernels take it, below); 512 tokens (10.7 rows an
	   expert) -> 32 for bf16 on the gate/up's long K (as GLM-4.7's at 512, 26), 64 at 2048
	   (42.7) and GLM-4.7's 1024 (51); 4096 (85) -> 128; its bf16 down GEMM (K 256) -> 16 up
	   to 13 rows (the four-warp tile: Kimi's 512 tokens, GLM-4.7's 256, 12.8), 32 up to 16
	   (Kimi's 700 and 768, GLM-4.7's 290 and 320: the four-warp 32-row tile, four stages), 64
	   past (the shallow pipeline: Kimi's 960 and 1024, GLM-4.7's 400 and 512), its FP8 one
	   -> 128 at 4096 tokens; NVFP4 keeps 16 up to 24 rows; BLOCK_SIZE_M 32 or 96 is covered
	   by 32-row blocks (bf16, FP8), or 16-row ones for the 4-bit weights, which have no
	   32-row kernel.
	   FP8 takes 16 rows up to 16 an expert on either K (Kimi's gate/up and down at 512 tokens,
	   GLM-4.7's gate/up at 256), 32 up to 32 (Kimi at 1024 tokens, GLM-4.7's gate/up at 512,
	   26, despite its N 384, and under BLOCK_SIZE_M 32 and 96), 64 from 33 (GLM-4.7's gate/up
	   at 1024, 51), 16 under BLOCK_SIZE_M 16.
	   bf16 on the gate/up's long K where N fills the 256-column tiles leaves 64 rows past 52
	   (Kimi's 2560 tokens, 53; GLM-4.7 unsplit, N 3072, at 1280, 64, but 64 at 1024, 51).
	   GLM-4.7 TP8 (160 experts): its gate/up's N 384 wastes the 256-column tiles, so 64 rows
	   at 4096 tokens (205 an expert) for FP8, but 128 for bf16 (its fitted 192 columns,
	   MOE_GEMM_FIT: 128 from 2048 tokens, 102 rows, 64 at 1024) and the packed 4-bit weights; W4A16
	   64 up to 64 rows an expert on the down GEMM's short K (Kimi's at 2048 tokens, 43), 128
	   past (4096, 85) and on a long K (Kimi's gate/up at 2048), 64 at any count past 16's
	   under BLOCK_SIZE_M 64 */
	static const struct {
		int quant;
		int32_t experts, block_m, tokens, n, k;
		int tm;
	} tiles[] = {
		{ MOE_BF16, 384, 128, 1, 512, 7168, 16 },      { MOE_BF16, 384, 128, 512, 512, 7168, 32 },
		{ MOE_BF16, 160, 128, 512, 384, 5120, 32 },    { MOE_BF16, 160, 128, 1024, 384, 5120, 64 },
		{ MOE_BF16, 384, 128, 512, 7168, 256, 16 },    { MOE_BF16, 160, 128, 256, 5120, 192, 16 },
		{ MOE_BF16, 384, 128, 1024, 7168, 256, 64 },
		{ MOE_FP8, 384, 128, 512, 512, 7168, 16 },     { MOE_BF16, 384, 128, 2048, 512, 7168, 64 },
		{ MOE_FP8, 384, 128, 256, 512, 7168, 16 },     { MOE_FP8, 160, 128, 256, 384, 5120, 16 },
		{ MOE_FP8, 384, 128, 512, 7168, 256, 16 },     { MOE_FP8, 384, 32, 512, 512, 7168, 16 },
		{ MOE_BF16, 384, 128, 4096, 512, 7168, 128 },  { MOE_BF16, 384, 128, 4096, 7168, 256, 64 },
		{ MOE_FP8, 384, 128, 4096, 7168, 256, 32 },    { MOE_NVFP4, 384, 128, 512, 512, 7168, 16 },
		{ MOE_NVFP4, 384, 128, 2048, 512, 7168, 64 },  { MOE_BF16, 384, 32, 4096, 512, 7168, 32 },
		{ MOE_BF16, 384, 96, 4096, 512, 7168, 32 },    { MOE_BF16, 384, 8, 4096, 512, 7168, 0 },
		{ MOE_BF16, 384, 64, 4096, 512, 7168, 64 },    { MOE_BF16, 384, 32, 1, 512, 7168, 16 },
		{ MOE_BF16, 160, 128, 4096, 384, 5120, 128 },  { MOE_FP8, 160, 128, 4096, 384, 5120, 64 },
		{ MOE_BF16, 160, 128, 2048, 384, 5120, 128 },  { MOE_BF16, 160, 64, 4096, 384, 5120, 64 },
		{ MOE_BF16, 384, 128, 2560, 512, 7168, 128 },  { MOE_BF16, 160, 128, 1024, 3072, 5120, 64 },
		{ MOE_BF16, 160, 128, 1280, 3072, 5120, 128 }, { MOE_BF16, 160, 128, 1280, 384, 5120, 64 },
		{ MOE_W4A16, 160, 128, 4096, 384, 5120, 128 }, { MOE_FP8, 160, 128, 4096, 5120, 192, 32 },
		{ MOE_W4A16, 384, 128, 2048, 7168, 256, 64 },  { MOE_W4A16, 384, 128, 4096, 7168, 256, 128 },
		{ MOE_W4A16, 384, 128, 2048, 512, 7168, 128 }, { MOE_W4A16, 384, 64, 8192, 512, 7168, 64 },
		{ MOE_FP8, 384, 128, 1024, 512, 7168, 32 },    { MOE_FP8, 160, 128, 512, 384, 5120, 32 },
		{ MOE_FP8, 160, 128, 1024, 384, 5120, 64 },    { MOE_FP8, 160, 128, 512, 5120, 192, 32 },
		{ MOE_FP8, 384, 32, 1024, 512, 7168, 32 },     { MOE_FP8, 384, 96, 1024, 512, 7168, 32 },
		{ MOE_FP8, 384, 16, 1024, 512, 7168, 16 },     { MOE_W4A16, 384, 32, 4096, 512, 7168, 16 },
		{ MOE_NVFP4, 384, 96, 4096, 512, 7168, 16 },   { MOE_FP8, 384, 64, 2048, 7168, 256, 32 },
		{ MOE_FP8, 160, 64, 1024, 5120, 192, 32 },     { MOE_FP8, 384, 128, 4096, 512, 7168, 128 },
		{ MOE_FP8, 384, 64, 4096, 7168, 1152, 64 },   { MOE_BF16, 384, 128, 700, 7168, 256, 32 },
		{ MOE_BF16, 384, 64, 768, 7168, 256, 32 },     { MOE_BF16, 384, 128, 960, 7168, 256, 64 },
		{ MOE_BF16, 160, 128, 290, 5120, 192, 32 },    { MOE_BF16, 160, 64, 320, 5120, 192, 32 },
		{ MOE_BF16, 160, 64, 400, 5120, 192, 64 },     { MOE_BF16, 160, 128, 270, 5120, 192, 16 },
		{ MOE_BF16, 160, 128, 512, 5120, 192, 64 },    { MOE_BF16, 160, 32, 4096, 5120, 192, 32 },
	};
	static const struct {
		int quant, tm, threads, tn, multi;
	} warps[] = {
		{ MOE_BF16, 16, 128, 64, 1 },  { MOE_FP8, 16, 128, 64, 1 },    { MOE_BF16, 32, 128, 64, 1 },
		{ MOE_FP8, 32, 256, 128, 1 },  { MOE_BF16, 64, 256, 128, 1 },  { MOE_FP8, 128, 256, 256, 1 },
		{ MOE_W4A16, 16, 256, 32, 0 }, { MOE_NVFP4, 16, 256, 32, 0 },
	};
	size_t i;
	int32_t top_k = 0, mul = 0;
	struct sm_err why = { "" };

	(void)state;
	assert_int_equal(moe_half(512, 7168, 7168, 8, 64, &top_k, &mul, &why), 0);
	assert_int_equal(top_k, 8);
	assert_int_equal(mul, 0);
	assert_int_equal(moe_half(7168, 256, 7168, 8, 64, &top_k, &mul, &why), 0);
	assert_int_equal(top_k, 1);
	assert_int_equal(mul, 1);
	assert_int_not_equal(moe_half(7168, 7168, 7168, 8, 64, &top_k, &mul, &why), 0);
	assert_int_not_equal(moe_half(512, 7168, 7168, 1, 64, &top_k, &mul, &why), 0);
	for (i = 0; i < sizeof(tiles) / sizeof(tiles[0]); i++) {
		const int32_t rows = tiles[i].tokens * 8, em = rows + (tiles[i].experts + 1) * (tiles[i].block_m - 1);

		const int scale = tiles[i].quant == MOE_FP8 ? MOE_SCALE_TENSOR : MOE_SCALE_NONE;

		assert_int_equal(moe_gemm_rows_tile(tiles[i].quant, scale, tiles[i].block_m, rows, em, tiles[i].n,
						    tiles[i].k),
				 tiles[i].tm);
	}
	assert_int_equal(moe_gemm_rows_tile(MOE_BF16, MOE_SCALE_NONE, 8, 8, 8, 512, 7168), 0);
	/* FP8 with 128x128 block scales: 32 rows at any count on the gate/up too (Kimi K2 at 2048
	   and 4096 tokens, GLM-4.7's N 384 at 4096), where the other layouts take 64 and 128;
	   BLOCK_SIZE_M 16 keeps 16 */
	for (i = 0; i < 4; i++) {
		static const int32_t kimi[4][3] = { { 128, 2048, 64 }, { 128, 4096, 128 }, { 64, 4096, 64 }, { 16, 4096, 16 } };
		const int32_t bm = kimi[i][0], rows = kimi[i][1] * 8, em = rows + 385 * (bm - 1);

		assert_int_equal(moe_gemm_rows_tile(MOE_FP8, MOE_SCALE_BLOCK, bm, rows, em, 512, 7168), bm < 32 ? 16 : 32);
		assert_int_equal(moe_gemm_rows_tile(MOE_FP8, MOE_SCALE_TENSOR, bm, rows, em, 512, 7168), kimi[i][2]);
		assert_int_equal(moe_gemm_rows_tile(MOE_FP8, MOE_SCALE_CHANNEL, bm, rows, em, 512, 7168), kimi[i][2]);
	}
	assert_int_equal(moe_gemm_rows_tile(MOE_FP8, MOE_SCALE_BLOCK, 128, 4096 * 8, 4096 * 8 + 161 * 127, 384, 5120), 32);
	assert_int_equal(moe_gemm_rows_tile(MOE_FP8, MOE_SCALE_TENSOR, 128, 4096 * 8, 4096 * 8 + 161 * 127, 384, 5120), 64);
	/* the kernel table: every row found at its own index, named as the X-macro names it, each
	   format's tiles ascending (moe_gemm_rows_tile walks them down); pairs without a kernel */
	for (i = 0; i < MOE_GEMM_NKERNELS; i++) {
		char name[64];

		assert_int_equal(moe_gemm_kernel_index(moe_gemm_kernels[i].quant, moe_gemm_kernels[i].tm), (int)i);
		snprintf(name, sizeof(name), "moe_gemm_%s_m%d",
			 (const char *[]){ "bf16", "fp8", "w4a16", "nvfp4" }[moe_gemm_kernels[i].quant],
			 moe_gemm_kernels[i].tm);
		assert_string_equal(moe_gemm_kernels[i].name, name);
		if (i > 0 && moe_gemm_kernels[i - 1].quant == moe_gemm_kernels[i].quant)
			assert_true(moe_gemm_kernels[i - 1].tm < moe_gemm_kernels[i].tm);
	}
	assert_int_equal(moe_gemm_kernel_index(MOE_W4A16, 32), -1);
	assert_null(moe_gemm_kernel_name(MOE_NVFP4, 32));
	assert_int_equal(moe_gemm_kernel_index(MOE_BF16, 48), -1);
	assert_true(moe_gemm_wide_waste(384));
	assert_true(moe_gemm_wide_waste(100));
	assert_false(moe_gemm_wide_waste(512));
	assert_false(moe_gemm_wide_waste(7168));
	assert_false(moe_gemm_wide_waste(456));
	/* the shallow pipeline: bf16 at TM 64 on any K (the down GEMM's 256 and 192, the gate/up's
	   7168 and 5120) at any count, and its launch's 48 KiB; not the other tiles and formats;
	   at TM 32 on a short K past 32 rows an expert only, where an expert's rows span several
	   of its row tiles (its four warps' 64 columns: 48 KiB on four stages, 24 on two): four
	   stages up to 32 (GLM-4.7's and Kimi K2's down GEMM, K 192 and 256), on the gate/up's long
	   K at any count */
	{
		static const struct {
			int quant, tm;
			int32_t k;
			int64_t per;
			int32_t stages;
		} depth[] = {
			{ MOE_BF16, 64, 256, 16, MOE_GEMM_SHALLOW_STAGES },  { MOE_BF16, 64, 192, 205, MOE_GEMM_SHALLOW_STAGES },
			{ MOE_BF16, 64, 7168, 43, MOE_GEMM_SHALLOW_STAGES }, { MOE_BF16, 64, 5120, 25, MOE_GEMM_SHALLOW_STAGES },
			{ MOE_BF16, 128, 256, 205, 0 },                      { MOE_FP8, 64, 256, 85, 0 },
			{ MOE_FP8, 64, 5120, 43, 0 },                        { MOE_BF16, 32, 256, 85, MOE_GEMM_SHALLOW_STAGES },
			{ MOE_BF16, 32, 192, 33, MOE_GEMM_SHALLOW_STAGES },  { MOE_BF16, 32, 192, 32, 0 },
			{ MOE_BF16, 32, 256, 16, 0 },                        { MOE_BF16, 32, 7168, 154, 0 },
		};

		for (i = 0; i < sizeof(depth) / sizeof(depth[0]); i++)
			assert_int_equal(moe_gemm_rows_stages(depth[i].quant, depth[i].tm, depth[i].k, depth[i].per),
					 depth[i].stages);
	}
	assert_int_equal(moe_gemm_launch_smem(MOE_BF16, 64, MOE_GEMM_SHALLOW_STAGES), 49152);
	assert_int_equal(moe_gemm_launch_smem(MOE_BF16, 32, MOE_GEMM_SHALLOW_STAGES), 24576);
	assert_int_equal(moe_gemm_launch_smem(MOE_BF16, 32, 0), 49152);
	assert_int_equal(moe_gemm_launch_smem(MOE_FP8, 32, MOE_GEMM_SHALLOW_STAGES), moe_gemm_smem(MOE_FP8, 32));
	assert_int_equal(moe_gemm_launch_smem(MOE_BF16, 64, 0), moe_gemm_smem(MOE_BF16, 64));
	assert_int_equal(moe_gemm_launch_smem(MOE_FP8, 64, MOE_GEMM_SHALLOW_STAGES), moe_gemm_smem(MOE_FP8, 64));
	/* the FP8 tiles' group scales past their stages (each stage: KS slices of TM activation
	   scales and a weight scale per 128 columns, rounded to 16 bytes), within SM120's 101376
	   bytes; none for the other variants */
	assert_int_equal(moe_gemm_smem(MOE_FP8, 16), 3 * (10240 + 80));
	assert_int_equal(moe_gemm_smem(MOE_BF16, 16), 3 * 10240);
	/* the four-warp tiles (MOE_GEMM_WARPS): bf16 and FP8 at TM 16, bf16 at TM 32, 64 columns,
	   several column tiles a block; the others eight warps (the packed formats' TM 16 splitting
	   K, one tile a block) */
	for (i = 0; i < sizeof(warps) / sizeof(warps[0]); i++) {
		assert_int_equal(moe_gemm_threads(warps[i].quant, warps[i].tm), warps[i].threads);
		assert_int_equal(MOE_GEMM_TN(warps[i].quant, warps[i].tm), warps[i].tn);
		assert_int_equal(MOE_GEMM_MULTI(warps[i].quant, warps[i].tm), warps[i].multi);
	}
	assert_int_equal(moe_gemm_smem(MOE_FP8, 64), 4 * (24576 + 272));
	assert_int_equal(moe_gemm_smem(MOE_FP8, 128), 2 * (49152 + 528));
	assert_int_equal(moe_gemm_smem(MOE_BF16, 64), 4 * 24576);
	assert_int_equal(MOE_GEMM_GSCALE_BYTES(MOE_W4A16, 128), 0);
	/* W4A16's 64-row tile (MOE_GEMM_PAIRED): three stages of 14336 bytes, two blocks in SM120's
	   100 KiB a SM with their 1 KiB each reserved */
	assert_int_equal(moe_gemm_smem(MOE_W4A16, 64), 3 * 14336);
	assert_true(2 * (moe_gemm_smem(MOE_W4A16, 64) + 1024) <= 102400);
#define MOE_SMEM_FITS(q, t, name) assert_true(moe_gemm_smem(q, t) <= 101376);
	MOE_GEMM_KERNELS(MOE_SMEM_FITS)
#undef MOE_SMEM_FITS
	/* the row tiles' grid x: a block per column tile for gate/up's long K (Kimi TP8 at 4096
	   tokens), several for the down GEMM's short K (Kimi: 4 of 28 tiles of 256 columns, 4 k
	   tiles each; GLM FP8 at 512 tokens: 5 of 40, kept to 512 blocks over the 64 row blocks
	   its rows fill; the 4-bit weights' down GEMM alike: Kimi INT4 4 of 28, NVFP4 at TM 64 4 of
	   56), one again when that would leave too few blocks, and always one for the kernels
	   that take a single tile (the packed formats' TM 16) */
	assert_int_equal(moe_gemm_rows_cols(MOE_BF16, 128, 512, 7168, 4096 * 8), 2);
	assert_int_equal(moe_gemm_rows_cols(MOE_BF16, 128, 7168, 256, 4096 * 8), 7);
	assert_int_equal(moe_gemm_rows_cols(MOE_FP8, 64, 5120, 192, 512 * 8), 8);
	assert_int_equal(moe_gemm_rows_cols(MOE_BF16, 64, 456, 208, 33 * 8), 4);
	assert_int_equal(moe_gemm_rows_cols(MOE_W4A16, 128, 7168, 256, 4096 * 8), 7);
	assert_int_equal(moe_gemm_rows_cols(MOE_NVFP4, 64, 7168, 256, 4096 * 8), 14);
	assert_int_equal(moe_gemm_rows_cols(MOE_W4A16, 16, 7168, 256, 4096 * 8), 224);
	assert_int_equal(moe_gemm_rows_cols(MOE_BF16, 16, 7168, 256, 4096 * 8), 28);   /* 4 of 112 tiles of 64 */
	/* FP8's 16-row tile on a short K, its 64-byte form (MOE_GEMM_K64): 128 columns, 4 k tiles
	   at K 256 (Kimi's down GEMM at 512 tokens: 4 of 56 tiles a block), 3 at GLM's K 192 (6 of
	   40, kept to 512 blocks); on the gate/up's long K its own 64 columns, a block each (Kimi
	   at 512 tokens: 56 k tiles of 128 bytes) */
	assert_int_equal(moe_gemm_tn(MOE_FP8, 16, 7168, 256), MOE_GEMM_K64_TN);
	assert_int_equal(moe_gemm_tn(MOE_FP8, 16, 7168, 1024), MOE_GEMM_K64_TN);
	assert_int_equal(moe_gemm_tn(MOE_FP8, 16, 7168, 1152), 64);
	assert_int_equal(moe_gemm_tn(MOE_FP8, 32, 7168, 256), 128);
	/* FP8's 32-row tile takes the form where K ends mid-way through a 128-byte k tile (GLM's
	   192: 3 k tiles, 6 of 40 column tiles a block, kept to 512 blocks: 7), its four stages
	   within the kernel's shared memory; not Kimi's 256 (2 k tiles of 128 bytes, 8 of 56) */
	assert_true(MOE_GEMM_ROWS_K64(MOE_FP8, 32, 192) && !MOE_GEMM_ROWS_K64(MOE_FP8, 32, 256));
	assert_true(!MOE_GEMM_ROWS_K64(MOE_FP8, 32, 7168) && !MOE_GEMM_ROWS_K64(MOE_BF16, 16, 192));
	assert_int_equal(moe_gemm_rows_cols(MOE_FP8, 32, 5120, 192, 512 * 8), 7);
	assert_int_equal(moe_gemm_rows_cols(MOE_FP8, 32, 7168, 256, 1024 * 8), 7);
	assert_int_equal(moe_gemm_smem(MOE_FP8, 32), MOE_GEMM_K64_PIPE_BYTES(MOE_FP8, 32));
	assert_int_equal(MOE_GEMM_K64_PIPE_BYTES(MOE_FP8, 32), 4 * (32 * 64 + 128 * 64 + 144));
	assert_true(MOE_GEMM_K64_PIPE_BYTES(MOE_FP8, 16) < moe_gemm_smem(MOE_FP8, 16));
	assert_int_equal(moe_gemm_tn(MOE_BF16, 16, 7168, 256), 64);
	/* bf16's 128-row tile takes its fitted 192 columns (MOE_GEMM_FIT) where they compute fewer
	   columns than its 256: GLM-4.7's gate/up at TP8 (N 384: 384 against 512; 2 tiles, one
	   each on gate/up's long K), N 72 and 1100 (192 against 256, 1152 against 1280); not on
	   N 512, 456 (576 against 512) or 5120, nor on another format or tile; two stages within
	   the kernel's shared memory */
	assert_int_equal(moe_gemm_tn(MOE_BF16, 128, 384, 5120), MOE_GEMM_FIT_TN);
	assert_int_equal(moe_gemm_tn(MOE_BF16, 128, 72, 192), MOE_GEMM_FIT_TN);
	assert_int_equal(moe_gemm_tn(MOE_BF16, 128, 1100, 1024), MOE_GEMM_FIT_TN);
	assert_int_equal(moe_gemm_tn(MOE_BF16, 128, 512, 7168), 256);
	assert_int_equal(moe_gemm_tn(MOE_BF16, 128, 456, 208), 256);
	assert_int_equal(moe_gemm_tn(MOE_BF16, 128, 5120, 192), 256);
	assert_int_equal(moe_gemm_tn(MOE_FP8, 128, 384, 5120), 256);
	assert_int_equal(moe_gemm_tn(MOE_BF16, 64, 384, 5120), 128);
	assert_int_equal(moe_gemm_rows_cols(MOE_BF16, 128, 384, 5120, 4096 * 8), 2);
	assert_true(MOE_GEMM_FIT_STAGES * (128 * MOE_GEMM_KROW + MOE_GEMM_FIT_TN * 128) <= moe_gemm_smem(MOE_BF16, 128));
	assert_int_equal(moe_gemm_rows_cols(MOE_FP8, 16, 7168, 256, 512 * 8), 14);
	assert_int_equal(moe_gemm_rows_cols(MOE_FP8, 16, 5120, 192, 512 * 8), 7);
	assert_int_equal(moe_gemm_rows_cols(MOE_FP8, 16, 512, 7168, 512 * 8), 8);
	/* the decode kernels: Kimi K2 TP8's gate/up (K 7168) on 16-column tiles, its down
	   (K 256) on 128; gate/up up to 4 rows an expert (Kimi's 128 tokens: 2.7) on any
	   BLOCK_SIZE_M, not at 256 tokens (5.3) nor 512; down up to 3 rows an expert as
	   estimated (Kimi's 192 tokens: 4, not 256: 5.3) */
	assert_int_equal(moe_gemm_decode_tn(MOE_BF16, 7168), 16);
	assert_int_equal(moe_gemm_decode_tn(MOE_FP8, 5120), 16);
	assert_int_equal(moe_gemm_decode_tn(MOE_BF16, 256), 128);
	assert_int_equal(moe_gemm_decode_tn(MOE_FP8, 192), 128);
	assert_int_equal(moe_gemm_decode_tn(MOE_FP8, 2048), 32);
	assert_int_equal(moe_gemm_decode_tn(MOE_W4A16, 7168), 16);
	assert_int_equal(moe_gemm_decode_tn(MOE_W4A16, 256), 128);
	assert_int_equal(moe_gemm_decode_tn(MOE_W4A16, 2048), 64);   /* 32-column warps: 8 along K on 32 columns */
	assert_int_equal(moe_gemm_decode_tn(MOE_NVFP4, 7168), 0);
	/* twice as wide from 64 routed rows (8 tokens of top_k 8), at most 128, on any GPU;
	   below them the narrowest tile where the GPU is unknown (sms 0) */
	{
		const int em = 385 * 127;   /* plus the rows: Kimi K2's list at BLOCK_SIZE_M 128 */

		assert_int_equal(moe_gemm_decode_tile(MOE_BF16, 512, 7168, em + 8, 128, 8, 0), 16);
		assert_int_equal(moe_gemm_decode_tile(MOE_BF16, 512, 7168, em + 63, 128, 63, 0), 16);
		assert_int_equal(moe_gemm_decode_tile(MOE_BF16, 512, 7168, em + 64, 128, 64, 0), 32);
		assert_int_equal(moe_gemm_decode_tile(MOE_BF16, 512, 7168, em + 64, 128, 64, 132), 32);
		assert_int_equal(moe_gemm_decode_tile(MOE_FP8, 512, 2048, em + 128, 128, 128, 0), 64);
		/* W4A16 past 5 rows an expert on the gate/up's long K (16 rows a pass): the staged
		   kernels' 128 columns, on any K and GPU (Kimi K2's gate/up at 512 tokens: 10.6 rows;
		   at 320, 2560 rows: 6) */
		assert_int_equal(moe_gemm_decode_tile(MOE_W4A16, 512, 7168, em + 4096, 128, 4096, 0), 128);
		assert_int_equal(moe_gemm_decode_tile(MOE_W4A16, 512, 7168, em + 4096, 128, 4096, 132), 128);
		assert_int_equal(moe_gemm_decode_tile(MOE_W4A16, 512, 7168, em + 2560, 128, 2560, 132), 128);
		assert_int_equal(moe_gemm_decode_tile(MOE_W4A16, 512, 7168, em + 2304, 128, 2304, 132), 32);   /* 5 rows: 8 a pass */
		/* ... and past 1 on the down GEMM's (Kimi K2's at 128 tokens, 1024 rows: 2; at 64 tokens, 1) */
		assert_int_equal(moe_gemm_decode_tile(MOE_W4A16, 7168, 256, em + 1024, 128, 1024, 132), 128);
		assert_int_equal(moe_gemm_decode_rows(MOE_W4A16, 128, 1024, em + 1024, 256), 16);
		assert_int_equal(moe_gemm_decode_rows(MOE_W4A16, 128, 512, em + 512, 256), 8);
		assert_int_equal(moe_gemm_decode_rows(MOE_W4A16, 128, 512, em + 512, 512), 8);
		assert_int_equal(moe_gemm_decode_rows(MOE_W4A16, 128, 1024, em + 1024, 544), 8);
		assert_int_equal(moe_gemm_decode_tile(MOE_FP8, 7168, 256, em + 4096, 128, 4096, 0), 128);
		assert_int_equal(moe_gemm_decode_tile(MOE_FP8, 7168, 256, em + 16, 128, 16, 132), 128);
		assert_int_equal(moe_gemm_decode_tile(MOE_NVFP4, 512, 7168, em + 4096, 128, 4096, 132), 0);
		/* below 64 rows, the widest of 16, 32 and 64 columns whose waves are as full as 16's
		   (within 5%) on 2 blocks an SM: Kimi K2's gate/up (N 512) at 1 token on 132 SMs, 256
		   blocks of 16 (0.97 of a wave) against 128 of 32: 16; at 2 (16 rows) 512 blocks
		   in two waves 0.97 full, 256 in one as full: 32; at 3 (24) 768 in three 0.97 full,
		   384 in two 0.73 full: 16; at 4 (32): 64 (above) */
		assert_int_equal(moe_gemm_decode_tile(MOE_FP8, 512, 7168, em + 8, 128, 8, 132), 16);
		assert_int_equal(moe_gemm_decode_tile(MOE_FP8, 512, 7168, em + 16, 128, 16, 132), 32);
		assert_int_equal(moe_gemm_decode_tile(MOE_BF16, 512, 7168, em + 16, 128, 16, 132), 32);
		assert_int_equal(moe_gemm_decode_tile(MOE_FP8, 512, 7168, em + 24, 128, 24, 132), 16);
		assert_int_equal(moe_gemm_decode_tile(MOE_W4A16, 512, 7168, em + 32, 128, 32, 132), 64);
		/* a launch far below one wave keeps its tile: 32 blocks of 16 columns on 2000
		   slots (fill 0.016) against 16 of 32 (0.008) */
		assert_int_equal(moe_gemm_decode_tile(MOE_BF16, 512, 7168, em + 1, 128, 1, 1000), 16);
		/* the waves' fill: per mille, full waves count whole */
		assert_int_equal(moe_gemm_decode_fill(264, 264), 1000);
		assert_int_equal(moe_gemm_decode_fill(265, 264), 501);
		assert_int_equal(moe_gemm_decode_fill(0, 264), 0);
		assert_int_equal(moe_gemm_decode_fill(10, 0), 0);
		/* one expert's rows in one block row (the engine's dense linears: EM one tile):
		   N 7168's 448 blocks of 16 columns (two waves 0.85 full on 132 SMs) against
		   224 of 32 (one wave 0.85 full): 32 */
		assert_int_equal(moe_gemm_decode_blocks(16, 16, 4), 1);
		assert_int_equal(moe_gemm_decode_tile(MOE_BF16, 7168, 7168, 16, 16, 4, 132), 32);
	}
	/* the whole choice: Kimi K2's INT4 gate/up at 512 tokens (10.7 rows an expert) on the
	   decode kernel of 128 columns and 16 rows a pass (the streamed one), its row tile 128
	   (W4A16's on a long K); GLM-4.7's bf16 gate/up at 4096 tokens on the 128-row tile (its
	   fitted form), under BLOCK_SIZE_M 64 on the shallow 64-row tile, no decode kernel; row mode on the 16-row tile or the narrow decode tile, 8 rows a pass */
	{
		struct moe_gemm_choice c =
			moe_gemm_choose(MOE_W4A16, MOE_SCALE_NONE, 128, 4096, 4096 + 385 * 127, 512, 7168, 0, 132);

		assert_int_equal(c.tm, 128);
		assert_int_equal(c.stages, 0);
		assert_int_equal(c.tn, 128);
		assert_int_equal(c.rows, 16);
		assert_string_equal(moe_gemm_decode_kernel(MOE_W4A16, c.tn, c.rows, 7168), "moe_gemm_w4a16_d128_r16_sl");
		c = moe_gemm_choose(MOE_BF16, MOE_SCALE_NONE, 128, 32768, 32768 + 161 * 127, 384, 5120, 0, 132);
		assert_int_equal(c.tm, 128);
		assert_int_equal(c.stages, 0);
		assert_int_equal(c.tn, 0);
		c = moe_gemm_choose(MOE_BF16, MOE_SCALE_NONE, 64, 32768, 32768 + 161 * 63, 384, 5120, 0, 132);
		assert_int_equal(c.tm, 64);
		assert_int_equal(c.stages, MOE_GEMM_SHALLOW_STAGES);
		assert_int_equal(c.tn, 0);
		/* bf16's down GEMM under BLOCK_SIZE_M 32: the 32-row tile four stages deep at GLM-4.7's
		   512 tokens (25 rows an expert), on its shallow pipeline at Kimi K2's 4096 (85) */
		c = moe_gemm_choose(MOE_BF16, MOE_SCALE_NONE, 32, 4096, 4096 + 161 * 31, 5120, 192, 0, 132);
		assert_int_equal(c.tm, 32);
		assert_int_equal(c.stages, 0);
		c = moe_gemm_choose(MOE_BF16, MOE_SCALE_NONE, 32, 32768, 32768 + 385 * 31, 7168, 256, 0, 132);
		assert_int_equal(c.tm, 32);
		assert_int_equal(c.stages, MOE_GEMM_SHALLOW_STAGES);
		c = moe_gemm_choose(MOE_FP8, MOE_SCALE_TENSOR, 16, 96, 96 * 16, 512, 7168, 1, 132);
		assert_int_equal(c.tm, 16);
		assert_int_equal(c.tn, moe_gemm_decode_tn(MOE_FP8, 7168));
		assert_int_equal(c.rows, 8);
	}
	/* args.row_parts: the parts the rows an expert fill and one more, on the four-warp tiles
	   only (Kimi K2's FP8 and bf16 gate/up at 512 tokens, 10 rows an expert, on BLOCK_SIZE_M
	   128: 2 of 8 and 2 of 4 parts; GLM-4.7's bf16 at 1024, 51 rows: 64-row tile, none); none
	   where that is every part, past two ids a thread, or on an eight-warp tile */
	{
		const int em = 4096 + 385 * 127;

		assert_int_equal(moe_gemm_choose(MOE_FP8, MOE_SCALE_TENSOR, 128, 4096, em, 4096, 7168, 0, 132).tm, 16);
		assert_int_equal(moe_gemm_choose(MOE_FP8, MOE_SCALE_TENSOR, 128, 4096, em, 4096, 7168, 0, 132).parts, 2);
		assert_int_equal(moe_gemm_choose(MOE_BF16, MOE_SCALE_NONE, 128, 4096, em, 4096, 7168, 0, 132).tm, 32);
		assert_int_equal(moe_gemm_choose(MOE_BF16, MOE_SCALE_NONE, 128, 4096, em, 4096, 7168, 0, 132).parts, 2);
		assert_int_equal(moe_gemm_choose(MOE_BF16, MOE_SCALE_NONE, 128, 8192, 8192 + 161 * 127, 384, 5120, 0, 132).parts, 0);
		assert_int_equal(moe_gemm_choose(MOE_FP8, MOE_SCALE_TENSOR, 16, 96, 96 * 16, 512, 7168, 1, 132).parts, 0);
		assert_int_equal(moe_gemm_row_parts(MOE_BF16, 16, 128, 512, 512 + 385 * 127), 2);
		assert_int_equal(moe_gemm_row_parts(MOE_BF16, 16, 128, 8192, 8192 + 385 * 127), 3);
		assert_int_equal(moe_gemm_row_parts(MOE_BF16, 16, 128, 32768, 32768 + 385 * 127), 7);
		assert_int_equal(moe_gemm_row_parts(MOE_BF16, 16, 128, 65536, 65536 + 385 * 127), 0);
		assert_int_equal(moe_gemm_row_parts(MOE_BF16, 32, 64, 4096, 4096 + 385 * 63), 0);
		assert_int_equal(moe_gemm_row_parts(MOE_BF16, 16, 16, 4096, 4096 + 385 * 15), 0);
		assert_int_equal(moe_gemm_row_parts(MOE_BF16, 16, 256, 4096, 4096 + 385 * 255), 2);
		assert_int_equal(moe_gemm_row_parts(MOE_BF16, 16, 512, 4096, 4096 + 385 * 511), 0);
		assert_int_equal(moe_gemm_row_parts(MOE_FP8, 32, 128, 4096, em), 0);
		assert_int_equal(moe_gemm_row_parts(MOE_W4A16, 16, 128, 4096, em), 0);
		assert_int_equal(moe_gemm_row_parts(MOE_BF16, 64, 128, 4096, em), 0);
		/* the kernel's contract: a row_parts only for a MOE_GEMM_PARTS tile, fewer than its
		   parts, each a bit of a word, the block's ids two a thread (moe_gemm.cuh next_part) */
		for (int i = 0; i < MOE_GEMM_NKERNELS; i++)
			for (int32_t bm = 16; bm <= 1024; bm += 16)
				for (int32_t nv = 1; nv <= 65536; nv *= 4) {
					const int q = moe_gemm_kernels[i].quant, tm = moe_gemm_kernels[i].tm;
					const int p = moe_gemm_row_parts(q, tm, bm, nv, nv + 385 * (bm - 1));

					assert_true(p >= 0);
					if (p)
						assert_true(MOE_GEMM_PARTS(q, tm) && bm % tm == 0 && p < bm / tm &&
							    bm / tm <= 32 && bm <= 2 * moe_gemm_threads(q, tm));
				}
		assert_int_equal(moe_gemm_rows_grid(16, 128, em, 2, 0), (em + 127) / 128 * 2);
		assert_int_equal(moe_gemm_rows_grid(16, 128, em, 0, 0), (em + 15) / 16);
		assert_int_equal(moe_gemm_rows_grid(16, 64, 96 * 64, 0, 1), 96);
	}
	assert_int_equal(moe_gemm_rows_tile(MOE_W4A16, MOE_SCALE_NONE, 128, 1024 * 8, 1024 * 8 + 161 * 127, 384, 5120), 64);
	assert_int_equal(moe_gemm_rows_tile(MOE_W4A16, MOE_SCALE_NONE, 128, 2048 * 8, 2048 * 8 + 385 * 127, 7168, 256), 64);
	assert_int_equal(moe_gemm_rows_tile(MOE_W4A16, MOE_SCALE_NONE, 128, 2048 * 8, 2048 * 8 + 385 * 127, 512, 7168), 128);
	assert_int_equal(moe_gemm_rows_tile(MOE_W4A16, MOE_SCALE_NONE, 64, 2048 * 8, 2048 * 8 + 385 * 63, 512, 7168), 64);
	assert_int_equal(moe_gemm_decode_rows(MOE_W4A16, 128, 256 * 8, 256 * 8 + 385 * 127, 7168), 8);
	assert_int_equal(moe_gemm_decode_rows(MOE_W4A16, 128, 384 * 8, 384 * 8 + 385 * 127, 7168), 16);
	assert_int_equal(moe_gemm_decode_rows(MOE_W4A16, 128, 256 * 8, 256 * 8 + 385 * 127, 256), 16);
	assert_int_equal(moe_gemm_decode_rows(MOE_W4A16, 128, 128 * 8, 128 * 8 + 161 * 127, 192), 16);
	assert_int_equal(moe_gemm_decode_rows(MOE_W4A16, 128, 512 * 8, 512 * 8 + 385 * 127, 7168), 16);
	assert_int_equal(moe_gemm_decode_rows(MOE_BF16, 128, 512 * 8, 512 * 8 + 385 * 127, 256), 8);
	assert_int_equal(moe_gemm_decode_rows(MOE_FP8, 128, 512 * 8, 512 * 8 + 385 * 127, 256), 8);
	assert_string_equal(moe_gemm_decode_name(MOE_W4A16, 128, 8), "moe_gemm_w4a16_d128");
	assert_null(moe_gemm_decode_name(MOE_W4A16, 128, 16));   /* 16 rows a pass: staged kernels only */
	assert_null(moe_gemm_decode_name(MOE_BF16, 16, 16));
	assert_true(moe_gemm_decode_staged(MOE_W4A16));
	assert_false(moe_gemm_decode_staged(MOE_BF16) || moe_gemm_decode_staged(MOE_FP8) ||
		     moe_gemm_decode_staged(MOE_NVFP4));
	/* the staged kernels: W4A16, 128 columns, 16 rows a pass; K up to MOE_DECODE_W4_STAGE_K (the
	   down GEMM) in slots, a longer one streamed */
	assert_string_equal(moe_gemm_decode_kernel(MOE_W4A16, 128, 16, 192), "moe_gemm_w4a16_d128_r16_sh");
	assert_string_equal(moe_gemm_decode_kernel(MOE_W4A16, 128, 16, 64), "moe_gemm_w4a16_d128_r16_s");
	assert_string_equal(moe_gemm_decode_kernel(MOE_W4A16, 128, 16, 320), "moe_gemm_w4a16_d128_r16_s");
	assert_string_equal(moe_gemm_decode_kernel(MOE_W4A16, 128, 16, 256), "moe_gemm_w4a16_d128_r16_s");
	assert_string_equal(moe_gemm_decode_kernel(MOE_W4A16, 128, 16, 512), "moe_gemm_w4a16_d128_r16_s");
	assert_string_equal(moe_gemm_decode_kernel(MOE_W4A16, 128, 16, 544), "moe_gemm_w4a16_d128_r16_sl");
	assert_string_equal(moe_gemm_decode_kernel(MOE_W4A16, 128, 16, 7168), "moe_gemm_w4a16_d128_r16_sl");
	assert_string_equal(moe_gemm_decode_kernel(MOE_W4A16, 128, 8, 192), "moe_gemm_w4a16_d128");   /* 8 rows */
	assert_string_equal(moe_gemm_decode_kernel(MOE_W4A16, 128, 8, 512), "moe_gemm_w4a16_d128");
	assert_string_equal(moe_gemm_decode_kernel(MOE_W4A16, 128, 8, 544), "moe_gemm_w4a16_d128");
	assert_null(moe_gemm_decode_kernel(MOE_W4A16, 32, 16, 256));   /* no staged kernel of 32 columns */
	assert_string_equal(moe_gemm_decode_kernel(MOE_BF16, 128, 8, 256), "moe_gemm_bf16_d128");
	assert_int_equal(moe_gemm_decode_cols(MOE_W4A16, 512, 7168, 16, 8 + 385 * 127, 128, 8), 32);
	/* the down GEMM's short K: at least MOE_DECODE_SHORT_MIN_BLOCKS blocks, not MOE_DECODE_MIN_BLOCKS:
	   Kimi K2 at 16 tokens 8 tiles a block (56 tiles x 128 block rows), at 1 token 2 (56 x 8 = 448
	   blocks would be 1 each); GLM-4.7 at 1 token 1 (40 x 8 = 320: two a block would leave 160) */
	assert_int_equal(moe_gemm_decode_cols(MOE_W4A16, 7168, 256, 128, 128 + 385 * 127, 128, 128), 7);
	assert_int_equal(moe_gemm_decode_cols(MOE_W4A16, 7168, 256, 128, 8 + 385 * 127, 128, 8), 28);
	assert_int_equal(moe_gemm_decode_cols(MOE_W4A16, 5120, 192, 128, 8 + 161 * 127, 128, 8), 40);
	assert_int_equal(moe_gemm_decode_cols(MOE_BF16, 7168, 256, 128, 16 + 385 * 127, 128, 16), 14);
	/* moe_gemm_decode_wanted: quant, BLOCK_SIZE_M, tokens (top_k 8), experts, N, K -> wanted.
	   bf16, FP8 and NVFP4 as said above (decode_tn); W4A16 below */
	static const struct {
		int quant;
		int32_t block_m, tokens, experts, n, k;
		int want;
	} wanted[] = {
		{ MOE_FP8, 128, 1, 385, 512, 7168, 1 },
		/* FP8 on a long K: fewer than 40 routed rows (MOE_DECODE_FP8_LONG_VALID), then its
		   16-row tile; bf16 keeps the decode kernels to its rows-an-expert bound */
		{ MOE_FP8, 128, 4, 385, 512, 7168, 1 },
		{ MOE_FP8, 128, 5, 385, 512, 7168, 0 },
		{ MOE_FP8, 16, 16, 385, 512, 7168, 0 },
		{ MOE_FP8, 128, 4, 161, 384, 5120, 1 },
		{ MOE_FP8, 128, 5, 161, 384, 5120, 0 },
		{ MOE_BF16, 128, 8, 385, 512, 7168, 1 },
		{ MOE_BF16, 128, 16, 385, 512, 7168, 1 },
		{ MOE_BF16, 128, 128, 385, 512, 7168, 1 },
		{ MOE_BF16, 128, 256, 385, 512, 7168, 0 },
		{ MOE_BF16, 16, 1, 385, 512, 7168, 1 },
		{ MOE_BF16, 16, 128, 385, 512, 7168, 1 },
		{ MOE_BF16, 16, 256, 385, 512, 7168, 0 },
		{ MOE_FP8, 128, 512, 385, 512, 7168, 0 },
		{ MOE_FP8, 128, 512, 385, 7168, 256, 0 },   /* 10.7 rows: FP8's 16-row tile */
		{ MOE_FP8, 128, 4096, 385, 7168, 256, 0 },
		{ MOE_BF16, 128, 256, 385, 7168, 256, 0 },
		{ MOE_BF16, 128, 512, 385, 7168, 256, 0 },
		{ MOE_NVFP4, 128, 1, 385, 7168, 256, 0 },
		{ MOE_FP8, 128, 256, 385, 7168, 256, 0 },   /* 5.3 rows: FP8's 16-row tile, in its 64-byte form */
		{ MOE_FP8, 128, 192, 385, 7168, 256, 1 },   /* 4 rows, estimated 3 (E + 1 lists), the decode kernel */
		{ MOE_FP8, 128, 240, 385, 7168, 256, 0 },   /* 5, estimated 4 */
		{ MOE_FP8, 128, 64, 161, 5120, 192, 1 },    /* GLM-4.7's 64 tokens: 3.2 */
		{ MOE_FP8, 128, 96, 161, 5120, 192, 0 },    /* 4.8 */
		{ MOE_BF16, 128, 192, 385, 7168, 256, 1 },  /* bf16's down GEMM alike */
		/* W4A16 on a long K: up to 64 rows an expert (MOE_DECODE_W4_ROWS: Kimi K2's gate/up at
		   2048 and 3072 tokens, 42 and 63 estimated; GLM-4.7's at 768, 1024 and 1280, 38, 50
		   and 63; not Kimi K2's at 3584 and 4096, 74 and 85), and at any count where N leaves
		   half the 128-row tile's last 256 columns idle or more (moe_gemm_wide_waste: GLM-4.7's
		   gate/up at TP8, N 384, at 1536, 2048, 2304 and 8192 tokens, 76 to 410; not GLM-4.7
		   unsplit, N 3072 and 5120, at 1536), 16 rows a pass past 5 rows an expert
		   (Kimi K2's 384 tokens: 7); beyond, the 128-row tile where it fits (BLOCK_SIZE_M 128) */
		{ MOE_W4A16, 128, 1, 161, 384, 5120, 1 },
		{ MOE_W4A16, 128, 512, 161, 384, 5120, 1 },
		{ MOE_W4A16, 16, 512, 161, 5120, 192, 1 },
		{ MOE_W4A16, 128, 768, 161, 384, 5120, 1 },
		{ MOE_W4A16, 128, 1024, 161, 384, 5120, 1 },
		{ MOE_W4A16, 128, 1280, 161, 384, 5120, 1 },
		{ MOE_W4A16, 128, 1536, 161, 384, 5120, 1 },
		{ MOE_W4A16, 128, 2048, 161, 384, 5120, 1 },
		{ MOE_W4A16, 128, 2304, 161, 384, 5120, 1 },
		{ MOE_W4A16, 128, 8192, 161, 384, 5120, 1 },
		{ MOE_W4A16, 128, 1280, 161, 3072, 5120, 1 },
		{ MOE_W4A16, 128, 1536, 161, 3072, 5120, 0 },
		{ MOE_W4A16, 128, 1024, 161, 5120, 1536, 1 },
		{ MOE_W4A16, 128, 1536, 161, 5120, 1536, 0 },
		{ MOE_W4A16, 128, 2048, 385, 512, 7168, 1 },
		{ MOE_W4A16, 128, 3072, 385, 512, 7168, 1 },
		{ MOE_W4A16, 128, 3584, 385, 512, 7168, 0 },
		{ MOE_W4A16, 128, 4096, 385, 512, 7168, 0 },
		/* ... at any count where no 128-row tile fits (BLOCK_SIZE_M 32: Kimi's down GEMM at
		   8192 tokens, 170 rows an expert, and its gate/up at 4096, 85; BLOCK_SIZE_M 64, where the
		   streamed kernel ran ahead of the 64-row tile at every count measured, up to GLM-4.7's
		   205 rows) */
		{ MOE_W4A16, 32, 8192, 385, 7168, 256, 1 },
		{ MOE_W4A16, 32, 4096, 385, 512, 7168, 1 },
		{ MOE_W4A16, 64, 1024, 385, 512, 7168, 1 },
		{ MOE_W4A16, 64, 2048, 385, 512, 7168, 1 },
		{ MOE_W4A16, 64, 4096, 385, 512, 7168, 1 },
		{ MOE_W4A16, 64, 8192, 385, 512, 7168, 1 },
		{ MOE_W4A16, 64, 1024, 161, 384, 5120, 1 },
		{ MOE_W4A16, 256, 4096, 385, 512, 7168, 0 },
		/* ... and on the down GEMM's short K (the staged kernels) at any count and
		   BLOCK_SIZE_M: Kimi K2's at 2048, 4096 and 8192 tokens (42, 85 and 170 estimated),
		   GLM-4.7's at 1536, 2048 and 8192 (76, 101 and 406), K 512 (the most the staged
		   kernel holds) at 8192; not K 544, beyond it (the long K's bound) */
		{ MOE_W4A16, 64, 2048, 385, 7168, 256, 1 },
		{ MOE_W4A16, 128, 2048, 385, 7168, 256, 1 },
		{ MOE_W4A16, 128, 4096, 385, 7168, 256, 1 },
		{ MOE_W4A16, 128, 8192, 385, 7168, 256, 1 },
		{ MOE_W4A16, 128, 1536, 161, 5120, 192, 1 },
		{ MOE_W4A16, 128, 2048, 161, 5120, 192, 1 },
		{ MOE_W4A16, 256, 8192, 161, 5120, 192, 1 },
		{ MOE_W4A16, 128, 1536, 161, 5120, 512, 1 },
		{ MOE_W4A16, 128, 8192, 385, 7168, 512, 1 },
		{ MOE_W4A16, 128, 1536, 161, 5120, 544, 0 },
	};

	for (i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {   /* a failure prints 0x<row><wanted> */
		const int32_t rows = wanted[i].tokens * 8, em = rows + wanted[i].experts * (wanted[i].block_m - 1);
		const int got = moe_gemm_decode_wanted(wanted[i].quant, wanted[i].block_m, rows, em,
						       wanted[i].n, wanted[i].k) != 0;

		assert_int_equal((int)i * 16 + got, (int)i * 16 + wanted[i].want);
	}
	assert_int_equal(moe_gemm_decode_blocks(8 + 385 * 127, 128, 8), 8);
	assert_int_equal(moe_gemm_decode_blocks(100, 16, 64), 7);
	assert_int_equal(moe_gemm_decode_cols(MOE_BF16, 512, 7168, 16, 8 + 385 * 127, 128, 8), 32);
	assert_int_equal(moe_gemm_decode_cols(MOE_FP8, 7168, 256, 128, 128 + 385 * 127, 128, 128), 7);
}

/* ------------------------------------------------------------------ compiled facts */

/* A runtime pointer's element type in synthetic facts. */
struct ptype {
	const char *name, *type;
};

static const struct ptype moe_fp8_types[] = {
	{ "a_ptr", "*fp8e4nv" }, { "b_ptr", "*fp8e4nv" }, { "c_ptr", "*bf16" },
	{ "a_scale_ptr", "*fp32" }, { "b_scale_ptr", "*fp32" }, { "topk_weights_ptr", "*fp32" },
	{ "sorted_token_ids_ptr", "*i32" }, { "expert_ids_ptr", "*i32" },
	{ "num_tokens_post_padded_ptr", "*i32" }, { NULL, NULL },
};
static const struct ptype extend_types[] = {
	{ "Q_Extend", "*bf16" }, { "K_Extend", "*bf16" }, { "V_Extend", "*bf16" },
	{ "O_Extend", "*bf16" }, { "K_Buffer", "*bf16" }, { "V_Buffer", "*bf16" },
	{ "qo_indptr", "*i32" }, { "kv_indptr", "*i32" }, { "kv_indices", "*i64" }, { NULL, NULL },
};
static const struct ptype fp8_cache[] = {
	{ "K_Buffer", "*fp8e4nv" }, { "V_Buffer", "*fp8e4nv" }, { NULL, NULL },
};
static const struct ptype decode_types[] = {
	{ "Q", "*bf16" }, { "K_Buffer", "*fp8e4nv" }, { "V_Buffer", "*fp8e4nv" },
	{ "Req_to_tokens", "*i32" }, { "B_Seqlen", "*i32" }, { "Att_Out", "*fp32" },
	{ "k_scale", "*fp32" }, { "v_scale", "*fp32" }, { NULL, NULL },
};

/* What SGLang 0.5.9 compiles into the extend kernel of kimi_extend (Triton 3.6). */
#define EXTEND_CONSTEXPRS \
	"num_warps=8;num_stages=1;SLIDING_WINDOW_SIZE=-1;logit_cap=0.0;xai_temperature_len=-1;" \
	"Lq=576;Lv=512;BLOCK_DMODEL=512;BLOCK_DPE=64;BLOCK_DV=512;BLOCK_M=32;BLOCK_N=64;"      \
	"USE_CUSTOM_MASK=0;IS_CAUSAL=1;SKIP_PREFIX_CUSTOM_MASK=1;STORE_TRANSPOSE=0;HAS_SINK=0"
/* ... and vLLM 0.33 into the decode kernel of vllm_decode (8 heads, 16 splits, pages of 64). */
#define DECODE_CONSTEXPRS \
	"num_warps=4;num_stages=2;kv_group_num=8;q_head_num=8;BLOCK_DMODEL=512;BLOCK_DPE=64;" \
	"BLOCK_DV=512;BLOCK_N=32;BLOCK_H=16;NUM_KV_SPLITS=16;PAGE_SIZE=64;logit_cap=0.0;"     \
	"Lk=576;Lv=512;IS_MLA=1"

static const char *type_in(const struct ptype *t, const char *name)
{
	for (; t && t->name; t++)
		if (strcmp(t->name, name) == 0)
			return t->type;
	return NULL;
}

/*
 * with_facts - give @f's launch the compiled facts the Python hook would
 * record: @constexprs (options and constexprs), then every parameter of the
 * rule in order, "name:type" when passed (a pointer typed by @retype, else
 * by @types) and "name=None" / "name=1" when dropped; Triton's two scratch
 * pointers are not in the facts.
 */
static void with_facts(struct fake_launch *f, const char *constexprs, const struct ptype *types,
		       const struct ptype *retype)
{
	static const char *const scalar[] = { [RULE_I64] = "i64", [RULE_I32] = "i32",
					      [RULE_FP32] = "fp32", [RULE_U1] = "i1" };
	size_t o = (size_t)snprintf(f->compiled, sizeof(f->compiled), "%s", constexprs);
	uint32_t i;

	for (i = 0; i < f->rule->n_params; i++) {
		const struct rule_param *p = &f->rule->params[i];
		const char *type = p->type == RULE_PTR ? type_in(retype, p->name) : scalar[p->type];

		if (strcmp(p->name, "global_scratch") == 0 || strcmp(p->name, "profile_scratch") == 0)
			continue;
		if (f->dropped[i]) {
			o += (size_t)snprintf(f->compiled + o, sizeof(f->compiled) - o, ";%s=%s",
					      p->name, p->type == RULE_PTR ? "None" : "1");
			continue;
		}
		if (!type)
			type = type_in(types, p->name);
		if (!type)
			fail_msg("no type for %s", p->name);
		o += (size_t)snprintf(f->compiled + o, sizeof(f->compiled) - o, ";%s:%s", p->name, type);
	}
	assert_true(o < sizeof(f->compiled));
	f->l.compiled = f->compiled;
}

static void extend_facts(struct fake_launch *f)
{
	with_facts(f, EXTEND_CONSTEXPRS, extend_types, NULL);
}

static void extend_facts_fp8(struct fake_launch *f)
{
	with_facts(f, EXTEND_CONSTEXPRS, extend_types, fp8_cache);
}

/* refact - @f's compiled facts with the first @from replaced by @to. */
static void refact(struct fake_launch *f, const char *from, const char *to)
{
	char rest[COMPILED_MAX], *at = strstr(f->compiled, from);

	if (!at)
		fail_msg("no '%s' in the facts", from);
	snprintf(rest, sizeof(rest), "%s", at + strlen(from));
	snprintf(at, sizeof(f->compiled) - (size_t)(at - f->compiled), "%s%s", to, rest);
	f->l.compiled = f->compiled;
}

/* moe_facts - the fused_moe_kernel constexprs of a launch (FP8 per tensor unless @quant). */
static void moe_facts(struct fake_launch *f, int top_k, int mul, const char *quant, const struct ptype *retype)
{
	char text[1024];

	int vllm = strncmp(f->rule->id, "vllm", 4) == 0;

	/* each framework's own constexprs: SGLang 0.5.9's, vLLM 0.33.0's */
	snprintf(text, sizeof(text), "num_warps=8;num_stages=4;BLOCK_SIZE_M=128;BLOCK_SIZE_N=256;"
		 "BLOCK_SIZE_K=128;GROUP_SIZE_M=16;MUL_ROUTED_WEIGHT=%d;top_k=%d;compute_type=bf16;"
		 "use_fp8_w8a8=1;use_int8_w8a8=0;use_int8_w8a16=0;%s;%s", mul, top_k,
		 vllm ? "SPLIT_K=1;HAS_BIAS=0;SWAP_AB=0;USE_TD=0;naive_block_assignment=0" :
			"even_Ks=1;c_sorted=0;filter_expert=0;swap_ab=0",
		 quant ? quant : "per_channel_quant=0;group_n=0;group_k=0");
	with_facts(f, text, moe_fp8_types, retype);
}

/*
 * glm_moe - GLM-4.7 at TP8 with SGLang's fused shared expert (161 experts,
 * top_k 9 compiled in, num_experts_per_tok 8): the FP8 per-tensor gate/up
 * launch (N 384, K 5120) of 2048 tokens, EM = 18432 + 162 * 127.
 */
static void glm_moe(struct fake_launch *f, const char *rule_id)
{
	kimi_moe(f, rule_id);
	set(f, "N", 384), set(f, "K", 5120), set(f, "stride_am", 5120);
	set(f, "stride_be", 384 * 5120), set(f, "stride_bn", 5120), set(f, "stride_cm", 384);
	set(f, "num_valid_tokens", 2048 * 9), set(f, "EM", 2048 * 9 + 162 * 127);
	f->l.grid[0] = (unsigned)(((2048 * 9 + 162 * 127 + 127) / 128) * 2);
	top_k_setting = NULL;
	hidden_setting = NULL;
}

/* glm_down - the down launch of glm_moe: N 5120 (hidden), K 192, top_k 1 compiled in. */
static void glm_down(struct fake_launch *f, const char *rule_id)
{
	glm_moe(f, rule_id);
	set(f, "N", 5120), set(f, "K", 192), set(f, "stride_am", 192);
	set(f, "stride_be", 5120 * 192), set(f, "stride_bn", 192), set(f, "stride_cm", 5120);
	f->l.grid[0] = (unsigned)(((2048 * 9 + 162 * 127 + 127) / 128) * 20);
}

/* F1: the compiled top_k is the one used; a setting that disagrees is refused. */
static void test_facts_moe_top_k(void **state)
{
	struct fake_launch f;
	struct moe_gemm_args a;

	(void)state;
	/* no setting at all: the facts say top_k 9, gate/up (no routed weight) */
	glm_moe(&f, "sglang-moe-2026-03");
	moe_facts(&f, 9, 0, NULL, NULL);
	a = moe_plan_args(&f, "sglang-moe-2026-03", NULL);
	assert_int_equal(a.top_k, 9);
	assert_int_equal(a.mul_routed_weight, 0);
	assert_int_equal(a.scale, MOE_SCALE_TENSOR);
	/* SM120SHIM_TOP_K agreeing (sm120 run --model counts the fused expert) */
	top_k_setting = "9";
	a = moe_plan_args(&f, "sglang-moe-2026-03", NULL);
	assert_int_equal(a.top_k, 9);
	/* the model's num_experts_per_tok set by hand: refused, naming both */
	top_k_setting = "8";
	fake_expect_refusal(&f, "compiled with top_k 9 but SM120SHIM_TOP_K=8");
	top_k_setting = "nine";
	fake_expect_refusal(&f, "SM120SHIM_TOP_K=nine is not top_k");
	/* without the facts the setting is trusted: 18432 rows are whole tokens of 8
	   too, so top_k 8 is used (rules/AUDIT.md F1, the residue) */
	top_k_setting = "8";
	hidden_setting = "5120";
	f.l.compiled = NULL;
	a = moe_plan_args(&f, "sglang-moe-2026-03", NULL);
	assert_int_equal(a.top_k, 8);
	/* routed rows that are not whole tokens of the compiled top_k */
	glm_moe(&f, "sglang-moe-2026-03");
	set(&f, "num_valid_tokens", 2048 * 9 + 4);
	moe_facts(&f, 9, 0, NULL, NULL);
	fake_expect_refusal(&f, "18436 routed rows are not a multiple of the compiled top_k 9");
	/* the down launch: top_k 1 and the routed weight, whatever SM120SHIM_TOP_K says */
	glm_down(&f, "sglang-moe-main");
	moe_facts(&f, 1, 1, NULL, NULL);
	top_k_setting = "9";
	a = moe_plan_args(&f, "sglang-moe-main", NULL);
	assert_int_equal(a.top_k, 1);
	assert_int_equal(a.mul_routed_weight, 1);
	assert_int_equal(a.N, 5120);
}

/* F5 and F6(a): MUL_ROUTED_WEIGHT as compiled, and a None topk_weights without it. */
static void test_facts_moe_routed_weight(void **state)
{
	struct fake_launch f;
	struct moe_gemm_args a;

	(void)state;
	/* F5: vLLM's down launch under a post-GEMM2 hook does not apply the weight */
	glm_down(&f, "vllm-moe-main");
	moe_facts(&f, 1, 0, NULL, NULL);
	a = moe_plan_args(&f, "vllm-moe-main", NULL);
	assert_int_equal(a.top_k, 1);
	assert_int_equal(a.mul_routed_weight, 0);
	/* ... which the settings alone would read as 1 (the residue) */
	f.l.compiled = NULL;
	top_k_setting = "9";
	hidden_setting = "5120";
	a = moe_plan_args(&f, "vllm-moe-main", NULL);
	assert_int_equal(a.mul_routed_weight, 1);
	/* F6(a): vLLM's modular gate/up passes topk_weights None (MUL_ROUTED_WEIGHT 0) */
	glm_moe(&f, "vllm-moe-main");
	drop(&f, "topk_weights_ptr");
	moe_facts(&f, 9, 0, NULL, NULL);
	a = moe_plan_args(&f, "vllm-moe-main", NULL);
	assert_int_equal(a.top_k, 9);
	assert_null(a.topk_weights);
	assert_ptr_equal(a.sorted_ids, (void *)0x700000);
	/* ... a routed weight without weights is no launch a framework makes */
	moe_facts(&f, 9, 1, NULL, NULL);
	fake_expect_refusal(&f, "compiled with MUL_ROUTED_WEIGHT but topk_weights_ptr is None");
	/* ... and without the facts it cannot be told from naive block assignment */
	f.l.compiled = NULL;
	top_k_setting = "9";
	hidden_setting = "5120";
	fake_expect_refusal(&f, "the launch cannot show which");
}

/* F3, F4, F6(b): compute type, operand types, flags and the scale layout. */
static void test_facts_moe_formats(void **state)
{
	static const struct ptype fp16_out[] = { { "c_ptr", "*fp16" }, { NULL, NULL } };
	static const struct ptype bf16_a[] = { { "a_ptr", "*bf16" }, { NULL, NULL } };
	static const struct ptype int8_w[] = { { "b_ptr", "*i8" }, { NULL, NULL } };
	static const char *const all_reduce =
		"per_channel_quant=0;group_n=0;group_k=0;FUSE_SUM_ALL_REDUCE=1;ROUTER_TOPK=9;"
		"FUSE_ADD_TO_OUTPUT=0;MASK_OUTPUT=0";
	struct fake_launch f;
	struct moe_gemm_args a;

	(void)state;
	/* F3: an fp16 model compiles compute_type fp16 */
	glm_moe(&f, "sglang-moe-2026-03");
	moe_facts(&f, 9, 0, NULL, NULL);
	refact(&f, "compute_type=bf16", "compute_type=fp16");
	fake_expect_refusal(&f, "compiled with compute_type fp16; moe_gemm computes and writes bf16");
	/* ... an fp16 output buffer, bf16 activations with FP8 weights, int8 weights */
	moe_facts(&f, 9, 0, NULL, fp16_out);
	fake_expect_refusal(&f, "c_ptr is *fp16 in the compiled kernel; moe_gemm reads it as *bf16");
	moe_facts(&f, 9, 0, NULL, bf16_a);
	fake_expect_refusal(&f, "a_ptr is *bf16 in the compiled kernel; moe_gemm reads it as *fp8e4nv");
	moe_facts(&f, 9, 0, NULL, int8_w);
	fake_expect_refusal(&f, "b_ptr is *i8 in the compiled kernel");
	/* int8 w8a8 passes scale pointers like FP8: the rule's value refuses it */
	moe_facts(&f, 9, 0, NULL, NULL);
	refact(&f, "use_int8_w8a8=0", "use_int8_w8a8=1");
	fake_expect_refusal(&f, "compiled with use_int8_w8a8 1");
	/* use_fp8_w8a8 off with both scale pointers: a bf16 kernel of 128 x 256 x 128 has
	   twice the FP8 one's shared memory, so the facts and the launch disagree ... */
	moe_facts(&f, 9, 0, NULL, NULL);
	refact(&f, "use_fp8_w8a8=1", "use_fp8_w8a8=0");
	fake_expect_refusal(&f, "fused_moe_kernel has 147456 B of dynamic shared memory, but Triton "
			   "compiles 294912 B on sm_120");
	/* ... and at BLOCK_SIZE_K 64, where bf16 has the FP8 size, the adapter says it */
	refact(&f, "BLOCK_SIZE_K=128", "BLOCK_SIZE_K=64");
	fake_expect_refusal(&f, "compiled with use_fp8_w8a8 0, the launch passes scale pointers");
	/* F4: SGLang main's fused all-reduce down launch is refused; off, rerouted */
	glm_down(&f, "sglang-moe-main");
	moe_facts(&f, 1, 1, all_reduce, NULL);
	fake_expect_refusal(&f, "compiled with FUSE_SUM_ALL_REDUCE 1; rule sglang-moe-");
	fake_expect_refusal(&f, "reroutes it only with FUSE_SUM_ALL_REDUCE 0");
	refact(&f, "FUSE_SUM_ALL_REDUCE=1", "FUSE_SUM_ALL_REDUCE=0");
	a = moe_plan_args(&f, "sglang-moe-main", "sglang-moe-2026-03");
	assert_int_equal(a.mul_routed_weight, 1);
	/* another configuration (BLOCK_SIZE_N 128) at the tile's bytes: not the formula's */
	refact(&f, "BLOCK_SIZE_N=256", "BLOCK_SIZE_N=128");
	fake_expect_refusal(&f, "has 147456 B of dynamic shared memory, but Triton compiles 98304 B on "
			   "sm_120, 98304 B on sm_121, 131072 B on sm_90 for BLOCK_SIZE_M 128, "
			   "BLOCK_SIZE_N 128");
	/* F6(b): vLLM per tensor passes stride_bse = 1 (dropped), the other scale strides 0 */
	glm_moe(&f, "vllm-moe-main");
	drop(&f, "stride_bse");
	moe_facts(&f, 9, 0, NULL, NULL);
	a = moe_plan_args(&f, "vllm-moe-main", NULL);
	assert_int_equal(a.scale, MOE_SCALE_TENSOR);
	assert_int_equal(a.bs_stride_e, 1);
	f.l.compiled = NULL;
	top_k_setting = "9";
	hidden_setting = "5120";
	fake_expect_refusal(&f, "neither per tensor, per channel nor 128x128 blocks");
	/* the facts' layout decides, and the strides must be that layout */
	glm_moe(&f, "sglang-moe-2026-03");
	moe_facts(&f, 9, 0, "per_channel_quant=1;group_n=0;group_k=0", NULL);
	fake_expect_refusal(&f, "are not the per-channel layout the kernel was compiled for");
	moe_facts(&f, 9, 0, "per_channel_quant=0;group_n=64;group_k=64", NULL);
	fake_expect_refusal(&f, "compiled with group_n 64; rule sglang-moe-2026-03 reroutes group_n "
			   "only at 0 or 128 (no block scales, or moe_gemm's 128 x 128 ones)");
	set(&f, "stride_asm", 40), set(&f, "stride_bse", 3 * 40), set(&f, "stride_bsn", 40);
	drop(&f, "stride_ask"), drop(&f, "stride_bsk");
	moe_facts(&f, 9, 0, "per_channel_quant=0;group_n=128;group_k=128", NULL);
	fake_expect_refusal(&f, "has 147456 B of dynamic shared memory, but Triton compiles 148480 B on "
			   "sm_120");
	f.l.dynamic_smem = 148480; /* the B scales' layout scratch */
	a = moe_plan_args(&f, "sglang-moe-2026-03", NULL);
	assert_int_equal(a.scale, MOE_SCALE_BLOCK);
	assert_int_equal(a.as_stride_m, 40);
}

/*
 * kimi_gptq - Kimi K2's INT4 w4a16 gate/up at TP8 (N 512, K 7168, group 32)
 * at SGLang's 128 x 256 x 128 tile: B [E, N, K/2] bytes, scales [E, N, K/32].
 */
static void kimi_gptq(struct fake_launch *f)
{
	static const struct ptype types[] = {
		{ "a_ptr", "*bf16" }, { "b_ptr", "*u8" }, { "c_ptr", "*bf16" }, { "b_scale_ptr", "*bf16" },
		{ "topk_weights_ptr", "*fp32" }, { "sorted_token_ids_ptr", "*i32" },
		{ "expert_ids_ptr", "*i32" }, { "num_tokens_post_padded_ptr", "*i32" }, { NULL, NULL },
	};

	kimi_moe(f, "sglang-moe-gptq-awq");
	drop(f, "b_zp_ptr"), drop(f, "stride_bsk");
	set(f, "stride_be", 512 * 3584), set(f, "stride_bn", 3584);
	set(f, "stride_bse", 512 * 224), set(f, "stride_bsn", 224);
	f->l.kernel = "fused_moe_kernel_gptq_awq";
	f->l.dynamic_smem = 163840;
	top_k_setting = NULL;
	hidden_setting = NULL;
	with_facts(f, "num_warps=8;num_stages=4;N=512;K=7168;group_size=32;BLOCK_SIZE_M=128;"
		   "BLOCK_SIZE_N=256;BLOCK_SIZE_K=128;GROUP_SIZE_M=1;MUL_ROUTED_WEIGHT=0;top_k=8;"
		   "compute_type=bf16;has_zp=0;use_int4_w4a16=1;use_int8_w8a16=0;even_Ks=1;"
		   "filter_expert=0", types, NULL);
}

static void test_facts_gptq(void **state)
{
	struct fake_launch f;
	struct moe_gemm_args a;

	(void)state;
	kimi_gptq(&f);
	a = moe_plan_args(&f, "sglang-moe-gptq-awq", NULL);
	assert_int_equal(a.top_k, 8);
	assert_int_equal(a.N, 512);
	assert_int_equal(a.K, 7168);
	assert_int_equal(a.group_size, 32);
	/* compiled N and K that the strides do not give */
	refact(&f, "N=512", "N=1024");
	fake_expect_refusal(&f, "compiled N and K are not the N 512 and K 7168");
	/* fp16 scales (an fp16 GPTQ checkpoint through moe_wna16) */
	kimi_gptq(&f);
	refact(&f, "b_scale_ptr:*bf16", "b_scale_ptr:*fp16");
	fake_expect_refusal(&f, "b_scale_ptr is *fp16 in the compiled kernel; moe_gemm reads it as *bf16");
	/* int8 w8a16 and zero points are the rule's values */
	kimi_gptq(&f);
	refact(&f, "has_zp=0", "has_zp=1");
	fake_expect_refusal(&f, "compiled with has_zp 1");
}

/* ------------------------------------------------------------------ tile-generic rules */

/* One tuned configuration of fused_moe_kernel, as a config file bucket gives it. */
struct moe_cfg {
	int bm, bn, bk, warps, stages;
	int quant;          /* 0 bf16, 1 FP8 per tensor, 2 FP8 128x128 blocks, 3 FP8 64x64 blocks */
	int sm;             /* the architecture Triton compiles for */
};

/* cfg_smem - the shared memory Triton compiles for @c under @vllm's or SGLang's kernel. */
static uint64_t cfg_smem(const struct moe_cfg *c, int vllm)
{
	struct triton_moe_tile t = { .sm = c->sm, .kernel = TRITON_MOE_FUSED,
				     .a_bytes = c->quant ? 1 : 2, .b_bits = c->quant ? 8 : 16,
				     .block_m = (uint32_t)c->bm, .block_n = (uint32_t)c->bn,
				     .block_k = (uint32_t)c->bk, .num_warps = (uint32_t)c->warps,
				     .num_stages = (uint32_t)c->stages };

	if (c->quant >= 2) {
		t.group_n = t.group_k = c->quant == 2 ? 128 : 64;
		t.b_scale_vector = vllm || t.block_n > t.group_n;
	}
	t.swap_ab = triton_moe_swap_ab(c->sm, triton_moe_dtype_find(c->quant ? "fp8_w8a8" : ""),
				       t.block_m, t.block_n);
	return triton_moe_smem(&t);
}

/*
 * moe_cfg_launch - kimi_moe's gate/up launch (N 512, K 7168, 300 tokens) as
 * rule @rule_id's framework launches it at configuration @c: EM aligned to
 * BLOCK_SIZE_M, its grid and block, the shared memory Triton compiles (plus
 * @smem_off), and the compiled facts the Python hook records; @tell_sm: the
 * launch says which architecture (else 0, unknown).
 */
static void moe_cfg_launch(struct fake_launch *f, const char *rule_id, const struct moe_cfg *c,
			   int smem_off, int tell_sm)
{
	static const struct ptype bf16_types[] = {
		{ "a_ptr", "*bf16" }, { "b_ptr", "*bf16" }, { "c_ptr", "*bf16" },
		{ "topk_weights_ptr", "*fp32" }, { "sorted_token_ids_ptr", "*i32" },
		{ "expert_ids_ptr", "*i32" }, { "num_tokens_post_padded_ptr", "*i32" }, { NULL, NULL },
	};
	int vllm = strncmp(rule_id, "vllm", 4) == 0, group = c->quant == 2 ? 128 : c->quant == 3 ? 64 : 0;
	int swap = triton_moe_swap_ab(c->sm, triton_moe_dtype_find(c->quant ? "fp8_w8a8" : ""),
				      (uint32_t)c->bm, (uint32_t)c->bn);
	int64_t em = 2400 + 385 * (int64_t)(c->bm - 1);
	char text[1024];

	kimi_moe(f, rule_id);
	set(f, "EM", em);
	f->l.grid[0] = (unsigned)(((em + c->bm - 1) / c->bm) * ((512 + c->bn - 1) / c->bn));
	f->l.block[0] = (unsigned)c->warps * 32;
	f->l.dynamic_smem = cfg_smem(c, vllm) + (uint64_t)smem_off;
	f->l.sm = tell_sm ? c->sm : 0;
	if (c->quant == 0) {
		drop(f, "a_scale_ptr"), drop(f, "b_scale_ptr");
	} else if (c->quant >= 2) {
		int kg = 7168 / group, ng = 512 / group;

		set(f, "stride_asm", kg), set(f, "stride_bse", ng * kg), set(f, "stride_bsn", kg);
		drop(f, "stride_ask"), drop(f, "stride_bsk");
	}
	snprintf(text, sizeof(text), "num_warps=%d;num_stages=%d;BLOCK_SIZE_M=%d;BLOCK_SIZE_N=%d;"
		 "BLOCK_SIZE_K=%d;GROUP_SIZE_M=8;MUL_ROUTED_WEIGHT=0;top_k=8;compute_type=bf16;"
		 "use_fp8_w8a8=%d;use_int8_w8a8=0;use_int8_w8a16=0;per_channel_quant=0;group_n=%d;"
		 "group_k=%d;%s=%d%s", c->warps, c->stages, c->bm, c->bn, c->bk, c->quant != 0, group,
		 group, vllm ? "SWAP_AB" : "even_Ks=1;c_sorted=0;filter_expert=0;swap_ab", swap,
		 vllm ? ";SPLIT_K=1;HAS_BIAS=0;naive_block_assignment=0;USE_TD=0" : "");
	with_facts(f, text, c->quant ? moe_fp8_types : bf16_types, NULL);
}

/*
 * Tuned buckets of real config files, rerouted at their own configuration
 * with the compiled facts (the generic entries of rules/fused_moe.json), and
 * what the facts, the launch and the formula must agree on.
 */
static void test_generic_moe(void **state)
{
	/* SGLang 0.5.9 E=161,N=384 H200 per-channel FP8, bucket 4096 (the issue's) */
	static const struct moe_cfg issue = { 64, 256, 128, 4, 4, 1, 90 };
	/* DeepSeek-V3 block FP8 on B200 (E=256,N=256), bucket 4: BLOCK_SIZE_M 16 */
	static const struct moe_cfg ds16 = { 16, 256, 128, 8, 4, 2, 120 };
	/* E=129,N=352 B200 FP8, bucket 3072: BLOCK_SIZE_M 256 */
	static const struct moe_cfg m256 = { 256, 256, 64, 8, 5, 1, 120 };
	/* vLLM E=128,N=768 GB200 block FP8, bucket 4096: 64 x 256 x 128, 3 stages */
	static const struct moe_cfg gb200 = { 64, 256, 128, 8, 3, 2, 90 };
	/* vLLM E=128,N=768 B200 bf16, bucket 3072: 256 x 256 x 64, 3 stages */
	static const struct moe_cfg bf16 = { 256, 256, 64, 8, 3, 0, 120 };
	struct reroute_plan plan;
	struct moe_gemm_args a;
	struct fake_launch f;

	(void)state;
	moe_cfg_launch(&f, "sglang-moe-2026-03", &issue, 0, 1);
	assert_int_equal(f.l.dynamic_smem, 163840);
	a = moe_plan_args(&f, "sglang-moe-2026-03", NULL);
	assert_int_equal(a.block_m, 64);
	assert_int_equal(a.EM, 2400 + 385 * 63);
	assert_int_equal(a.scale, MOE_SCALE_TENSOR);
	assert_int_equal(a.top_k, 8);
	/* ... the architecture not told: 163840 B is the formula's on sm_90 */
	moe_cfg_launch(&f, "sglang-moe-2026-03", &issue, 0, 0);
	expect_plan(&f, "sglang-moe-2026-03", NULL, &plan);
	assert_string_equal(plan.kernel, moe_gemm_kernel_name(MOE_FP8, 16));   /* 6 rows an expert */
	/* ... without the facts (no hook): only the exact tiles */
	f.l.compiled = NULL;
	fake_expect_refusal(&f, "rule sglang-moe-2026-03 reroutes fused_moe_kernel only at the "
			   "shared-memory sizes of its tiles, not 163840 B (at any other "
			   "configuration only with the compiled facts of the Python hook)");
	/* ... a grid of BLOCK_SIZE_M 128 with facts of 64: the two readings disagree */
	moe_cfg_launch(&f, "sglang-moe-2026-03", &issue, 0, 1);
	f.l.grid[0] = (unsigned)(((2400 + 385 * 63 + 127) / 128) * 2);
	fake_expect_refusal(&f, "grid (418, 1, 1) is not cdiv(EM 26655, 64) * cdiv(N 512, 256)");
	/* ... a block of 8 warps with facts of 4 */
	moe_cfg_launch(&f, "sglang-moe-2026-03", &issue, 0, 1);
	f.l.block[0] = 256;
	fake_expect_refusal(&f, "runs 256 threads a block, but its compiled num_warps 4 makes 128");
	/* ... shared memory the facts' configuration does not have */
	moe_cfg_launch(&f, "sglang-moe-2026-03", &issue, 32, 1);
	fake_expect_refusal(&f, "has 163872 B of dynamic shared memory, but Triton compiles 163840 B on "
			   "sm_90");
	/* ... the architecture told wrong */
	moe_cfg_launch(&f, "sglang-moe-2026-03", &issue, 0, 1);
	f.l.sm = 120;
	fake_expect_refusal(&f, "Triton compiles 122880 B on sm_120");
	f.l.sm = 89;
	fake_expect_refusal(&f, "the formula models Triton's compiles for sm_90, sm_120 and sm_121, not "
			   "sm_89");
	/* BLOCK_SIZE_M 16: the 16-row kernel, one moe_gemm block per framework block */
	moe_cfg_launch(&f, "sglang-moe-main", &ds16, 0, 1);
	assert_int_equal(f.l.dynamic_smem, 105472);
	a = moe_plan_args(&f, "sglang-moe-main", "sglang-moe-2026-03");
	assert_int_equal(a.block_m, 16);
	assert_int_equal(a.scale, MOE_SCALE_BLOCK);
	expect_plan(&f, "sglang-moe-main", "sglang-moe-2026-03", &plan);
	assert_string_equal(plan.kernel, moe_gemm_kernel_name(MOE_FP8, 16));
	/* BLOCK_SIZE_M 256: moe_gemm's blocks tile it (16 rows here: 6 rows per expert), two row
	   blocks a framework block taking its 16 parts in turn (args.row_parts) */
	moe_cfg_launch(&f, "sglang-moe-2026-03", &m256, 0, 1);
	assert_int_equal(f.l.dynamic_smem, 131072);
	a = moe_plan_args(&f, "sglang-moe-2026-03", NULL);
	assert_int_equal(a.block_m, 256);
	assert_int_equal(a.row_parts, 2);
	expect_plan(&f, "sglang-moe-2026-03", NULL, &plan);
	assert_string_equal(plan.kernel, moe_gemm_kernel_name(MOE_FP8, 16));
	assert_int_equal(plan.grid[1], (2400 + 385 * 255 + 255) / 256 * 2);
	/* ... 4096 tokens: 128-row blocks, two to a framework block */
	moe_cfg_launch(&f, "sglang-moe-2026-03", &m256, 0, 1);
	set(&f, "num_valid_tokens", 4096 * 8), set(&f, "EM", 4096 * 8 + 385 * 255);
	f.l.grid[0] = (unsigned)(((4096 * 8 + 385 * 255 + 255) / 256) * 2);
	expect_plan(&f, "sglang-moe-2026-03", NULL, &plan);
	assert_string_equal(plan.kernel, moe_gemm_kernel_name(MOE_FP8, 128));
	/* vLLM: block FP8 on sm_90 (its B scales always a vector), and bf16 */
	moe_cfg_launch(&f, "vllm-moe-main", &gb200, 0, 1);
	assert_int_equal(f.l.dynamic_smem, 123904);
	a = moe_plan_args(&f, "vllm-moe-main", NULL);
	assert_int_equal(a.block_m, 64);
	assert_int_equal(a.scale, MOE_SCALE_BLOCK);
	moe_cfg_launch(&f, "vllm-moe-main", &bf16, 0, 1);
	expect_plan(&f, "vllm-moe-main", NULL, &plan);
	assert_string_equal(plan.kernel, moe_gemm_kernel_name(MOE_BF16, 32));
	/* ... its tensor-descriptor path: the formula does not model it */
	refact(&f, "USE_TD=0", "USE_TD=1");
	fake_expect_refusal(&f, "USE_TD 1, VLLM_TRITON_USE_TD) is not modelled");
	/* bounds: BLOCK_SIZE_M 8, 64x64 block scales, BLOCK_SIZE_K over the scale group */
	moe_cfg_launch(&f, "sglang-moe-2026-03", &(struct moe_cfg){ 8, 256, 128, 8, 4, 1, 90 }, 0, 1);
	fake_expect_refusal(&f, "compiled with BLOCK_SIZE_M 8; rule sglang-moe-2026-03 reroutes "
			   "BLOCK_SIZE_M from 16 to 256 in multiples of 16");
	moe_cfg_launch(&f, "sglang-moe-2026-03", &(struct moe_cfg){ 64, 256, 256, 4, 4, 2, 90 }, 0, 1);
	fake_expect_refusal(&f, "compiled with BLOCK_SIZE_K 256 and group_k 128");
	moe_cfg_launch(&f, "sglang-moe-2026-03", &(struct moe_cfg){ 64, 256, 64, 4, 4, 3, 120 }, 0, 1);
	fake_expect_refusal(&f, "compiled with group_n 64");
}

/* cfg_admitted - route_admit's answer for the kernel of @f's launch: the rule, or NULL. */
static const struct rule *cfg_admitted(const struct fake_launch *f, const struct moe_cfg *c,
				       struct sm_err *why)
{
	struct route_kernel k = { "fused_moe_kernel", f->l.dynamic_smem, (uint32_t)c->warps * 32,
				  f->l.compiled, f->l.sm };
	struct target_limits t;
	struct route_admission a;

	assert_int_equal(target_parse("sm120", &t, NULL), 0);
	route_admit(&k, &t, SHIM_MODE_REROUTE, rules_builtin, rules_builtin_count, &a);
	*why = a.why;
	return a.rule;
}

/*
 * naive_launch - vLLM's naive block assignment (rules/AUDIT.md) as
 * invoke_fused_moe_triton_kernel launches kimi_moe's gate/up (N 512, K 7168,
 * top_k 8) for @tokens tokens at configuration @c: sorted_token_ids None,
 * expert_ids the flat topk_ids, EM = tokens x 8 x BLOCK_SIZE_M, one
 * framework block per routed row, naive_block_assignment 1 compiled in.
 */
static void naive_launch(struct fake_launch *f, const struct moe_cfg *c, int tokens)
{
	const int64_t nv = (int64_t)tokens * 8;

	moe_cfg_launch(f, "vllm-moe-main", c, 0, 1);
	set(f, "num_valid_tokens", nv), set(f, "EM", nv * c->bm);
	f->l.grid[0] = (unsigned)(nv * ((512 + c->bn - 1) / c->bn));
	drop(f, "sorted_token_ids_ptr");
	refact(f, "sorted_token_ids_ptr:*i32", "sorted_token_ids_ptr=None");
	refact(f, "naive_block_assignment=0", "naive_block_assignment=1");
}

/* naive_down - the down launch of naive_launch: N 7168 (hidden), K 256, top_k 1, routed weight. */
static void naive_down(struct fake_launch *f, const struct moe_cfg *c, int tokens)
{
	naive_launch(f, c, tokens);
	set(f, "N", 7168), set(f, "K", 256), set(f, "stride_am", 256);
	set(f, "stride_be", 7168 * 256), set(f, "stride_bn", 256), set(f, "stride_cm", 7168);
	if (c->quant >= 2)
		set(f, "stride_asm", 2), set(f, "stride_bse", 56 * 2), set(f, "stride_bsn", 2);
	f->l.grid[0] = (unsigned)(tokens * 8 * ((7168 + c->bn - 1) / c->bn));
	refact(f, "MUL_ROUTED_WEIGHT=0;top_k=8", "MUL_ROUTED_WEIGHT=1;top_k=1");
}

/*
 * vLLM's naive block assignment with the compiled facts: moe_gemm's row mode
 * (one routed row per framework block, the 16-row kernel, block_m the
 * framework's so that num_tokens_post_padded means what it means to vLLM),
 * for every weight format and both launches; without the facts, or where the
 * facts and the launch disagree, refused.
 */
static void test_facts_moe_naive(void **state)
{
	/* vLLM E=256,N=256 B200 block FP8, bucket 4: 16 x 256 x 128, 8 warps, 4 stages */
	static const struct moe_cfg ds16 = { 16, 256, 128, 8, 4, 2, 120 };
	/* vLLM E=64,N=2560 H200 FP8, bucket 2: 64 x 256 x 128, 4 warps, 5 stages (sm_90) */
	static const struct moe_cfg t64 = { 64, 256, 128, 4, 5, 1, 90 };
	/* vLLM E=512,N=1344 B200 bf16, bucket 4: 16 x 128 x 128, 4 warps, 4 stages */
	static const struct moe_cfg bf16 = { 16, 128, 128, 4, 4, 0, 120 };
	struct reroute_plan plan;
	struct moe_gemm_args a;
	struct fake_launch f;
	struct sm_err why = { "" };

	(void)state;
	/* DeepSeek-V3 at TP8, 4 tokens (4 x 8 x 4 <= 256 experts): 32 routed rows, on the
	   decode kernel (row mode), 16 columns a block (K 7168), a block row per routed row */
	naive_launch(&f, &ds16, 4);
	assert_int_equal(f.l.dynamic_smem, 105472);
	expect_plan(&f, "vllm-moe-main", NULL, &plan);
	assert_string_equal(plan.kernel, moe_gemm_decode_name(MOE_FP8, 16, 8));
	assert_int_equal(plan.grid[0], moe_gemm_decode_cols(MOE_FP8, 512, 7168, 16, 32 * 16, 16, 32));
	assert_int_equal(plan.grid[1], 32);
	assert_int_equal(plan.dynamic_smem, 0);
	memcpy(&a, plan.args, sizeof(a));
	assert_null(a.sorted_ids);
	assert_ptr_equal(a.expert_ids, (void *)0x800000);
	assert_ptr_equal(a.num_tokens_post_padded, (void *)0x900000);
	assert_int_equal(a.block_m, 16);
	assert_int_equal(a.EM, 32 * 16);
	assert_int_equal(a.num_valid, 32);
	assert_int_equal(a.top_k, 8);
	assert_int_equal(a.mul_routed_weight, 0);
	assert_int_equal(a.scale, MOE_SCALE_BLOCK);
	assert_int_equal(a.as_stride_m, 56);
	/* ... loaded as it is launched (route_admit: the same rule) */
	assert_non_null(cfg_admitted(&f, &ds16, &why));
	/* ... its down launch: top_k 1, the routed weight, 7168 columns (K 256: 128 a block) */
	naive_down(&f, &ds16, 4);
	expect_plan(&f, "vllm-moe-main", NULL, &plan);
	memcpy(&a, plan.args, sizeof(a));
	assert_string_equal(plan.kernel, moe_gemm_decode_name(MOE_FP8, 128, 8));
	assert_int_equal(plan.grid[0], moe_gemm_decode_cols(MOE_FP8, 7168, 256, 128, 32 * 16, 16, 32));
	assert_int_equal(plan.grid[1], 32);
	assert_int_equal(a.top_k, 1);
	assert_int_equal(a.mul_routed_weight, 1);
	assert_ptr_equal(a.topk_weights, (void *)0x600000);
	assert_null(a.sorted_ids);
	/* ... the modular TritonExperts gate/up: topk_weights None too */
	naive_launch(&f, &ds16, 4);
	drop(&f, "topk_weights_ptr");
	refact(&f, "topk_weights_ptr:*fp32", "topk_weights_ptr=None");
	expect_plan(&f, "vllm-moe-main", NULL, &plan);
	memcpy(&a, plan.args, sizeof(a));
	assert_null(a.topk_weights);
	assert_null(a.sorted_ids);
	/* BLOCK_SIZE_M 64 on sm_90 (per tensor): block_m stays 64, one row block per routed row */
	naive_launch(&f, &t64, 2);
	assert_int_equal(f.l.dynamic_smem, 204800);
	expect_plan(&f, "vllm-moe-main", NULL, &plan);
	memcpy(&a, plan.args, sizeof(a));
	assert_string_equal(plan.kernel, moe_gemm_decode_name(MOE_FP8, 16, 8));
	assert_int_equal(plan.grid[1], 16);
	assert_int_equal(a.block_m, 64);
	assert_int_equal(a.EM, 16 * 64);
	assert_int_equal(a.scale, MOE_SCALE_TENSOR);
	/* ... per channel */
	naive_launch(&f, &t64, 2);
	set(&f, "stride_bse", 512);
	drop(&f, "stride_asm"), drop(&f, "stride_ask"), drop(&f, "stride_bsk"), drop(&f, "stride_bsn");
	refact(&f, "per_channel_quant=0", "per_channel_quant=1");
	refact(&f, "stride_asm:i32", "stride_asm=1"), refact(&f, "stride_ask:i32", "stride_ask=1");
	refact(&f, "stride_bsk:i32", "stride_bsk=1"), refact(&f, "stride_bsn:i32", "stride_bsn=1");
	expect_plan(&f, "vllm-moe-main", NULL, &plan);
	memcpy(&a, plan.args, sizeof(a));
	assert_int_equal(a.scale, MOE_SCALE_CHANNEL);
	assert_int_equal(a.bs_stride_e, 512);
	/* bf16 */
	naive_launch(&f, &bf16, 12);
	assert_int_equal(f.l.dynamic_smem, 110592);
	expect_plan(&f, "vllm-moe-main", NULL, &plan);
	assert_string_equal(plan.kernel, moe_gemm_decode_name(MOE_BF16, 16, 8));
	assert_int_equal(plan.grid[1], 96);
	/* refusals: EM other than vLLM's, the pointer and the flag disagreeing, a flag
	   that is not one, int64 expert ids (EP paths' topk_ids), and no facts */
	naive_launch(&f, &ds16, 4);
	set(&f, "EM", 31 * 16);
	f.l.grid[0] = 31 * 2;
	fake_expect_refusal(&f, "naive block assignment with EM 496, not the 32 routed rows x "
			   "BLOCK_SIZE_M 16 vLLM launches it with");
	naive_launch(&f, &ds16, 4);
	refact(&f, "naive_block_assignment=1", "naive_block_assignment=0");
	fake_expect_refusal(&f, "compiled with naive_block_assignment 0 but sorted_token_ids_ptr is None");
	moe_cfg_launch(&f, "vllm-moe-main", &ds16, 0, 1);
	refact(&f, "naive_block_assignment=0", "naive_block_assignment=1");
	fake_expect_refusal(&f, "compiled with naive_block_assignment 1 but sorted_token_ids_ptr is passed");
	naive_launch(&f, &ds16, 4);
	refact(&f, "naive_block_assignment=1", "naive_block_assignment=2");
	fake_expect_refusal(&f, "state naive_block_assignment, but not as 0 or 1");
	naive_launch(&f, &ds16, 4);
	refact(&f, "expert_ids_ptr:*i32", "expert_ids_ptr:*i64");
	fake_expect_refusal(&f, "expert_ids_ptr is *i64 in the compiled kernel; moe_gemm reads it as *i32");
	/* ... without the facts, at the exact tile a rule takes without them (128 x 256 x 128) */
	naive_launch(&f, &(struct moe_cfg){ 128, 256, 128, 8, 4, 1, 120 }, 4);
	assert_int_equal(f.l.dynamic_smem, 147456);
	expect_plan(&f, "vllm-moe-main", NULL, &plan);
	f.l.compiled = NULL;
	fake_expect_refusal(&f, "the launch cannot show which");
	/* SGLang's kernel has no naive path: the flag is not read there */
	moe_cfg_launch(&f, "sglang-moe-2026-03", &ds16, 0, 1);
	expect_plan(&f, "sglang-moe-2026-03", "sglang-moe-main", &plan);
	memcpy(&a, plan.args, sizeof(a));
	assert_ptr_equal(a.sorted_ids, (void *)0x700000);
}


/*
 * A kernel admitted at load is rerouted at launch, and one refused at load
 * is refused at launch: a walk over configurations (both frameworks, bf16 and
 * FP8 per tensor and in 128x128 and 64x64 blocks, BLOCK_SIZE_M 8 to 512,
 * every N and K block, warps, stages, sm_90 and sm_120, the architecture told
 * or not), each as the framework launches it and with shared memory the
 * facts do not give.  Configurations that fit SM120 are not over the limit
 * and are passed over.
 */
static void test_generic_admit_agrees(void **state)
{
	static const int bms[] = { 8, 16, 32, 64, 128, 256, 512 }, sizes[] = { 64, 128, 256 };
	static const int warps[] = { 4, 8 }, stages[] = { 2, 3, 4, 5 }, sms[] = { 90, 120 };
	static const char *const rules[] = { "sglang-moe-2026-03", "vllm-moe-main" };
	int r, q, m, n, k, w, st, sm, off, counts[2] = { 0, 0 };
	struct fake_launch f;

	(void)state;
	for (r = 0; r < 2; r++)
	for (q = 0; q < 4; q++)
	for (m = 0; m < 7; m++)
	for (n = 0; n < 3; n++)
	for (k = 0; k < 3; k++)
	for (w = 0; w < 2; w++)
	for (st = 0; st < 4; st++)
	for (sm = 0; sm < 2; sm++)
	for (off = 0; off < 2; off++) {
		const struct moe_cfg c = { bms[m], sizes[n], sizes[k], warps[w], stages[st], q, sms[sm] };
		struct reroute_plan plan;
		const struct rule *chosen = NULL, *admitted;
		struct sm_err why = { "" }, load = { "" };
		int rc;

		moe_cfg_launch(&f, rules[r], &c, off * 16, (m + n + k) % 2);
		if (f.l.dynamic_smem <= 101376)
			continue;
		fake_pack(&f);
		admitted = cfg_admitted(&f, &c, &load);
		rc = reroute_select(rules_builtin, rules_builtin_count, &f.l, &plan, &chosen, &why);
		if ((rc == 0) != (admitted != NULL))
			fail_msg("%s %dx%dx%d %dw %ds quant %d sm_%d +%d B: admitted %s (%s), launch %s "
				 "(%s)", rules[r], c.bm, c.bn, c.bk, c.warps, c.stages, c.quant, c.sm,
				 off * 16, admitted ? admitted->id : "no", load.msg,
				 rc ? "refused" : chosen->id, why.msg);
		if (rc == 0 && strcmp(admitted->adapter, chosen->adapter) != 0)
			fail_msg("admitted by %s, rerouted by %s", admitted->id, chosen->id);
		counts[rc == 0]++;
	}
	/* both outcomes, many times each */
	print_message("load and launch agree on %d over-limit kernels: %d rerouted, %d refused\n",
		      counts[0] + counts[1], counts[1], counts[0]);
	assert_true(counts[0] > 1000 && counts[1] > 1000);
}

/* F2, F3 and the cache dtype: the extend kernel's pointers and flags. */
static void test_facts_extend(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct attn_extend_args a;
	struct sm_err why = { "" };
	uint64_t way;

	(void)state;
	kimi_extend(&f, "sglang-extend-2026-03");
	dtype_setting = NULL;
	with_facts(&f, EXTEND_CONSTEXPRS, extend_types, NULL);
	expect_plan(&f, "sglang-extend-2026-03", NULL, &plan);
	assert_string_equal(plan.kernel, ATTN_EXTEND_MLA576_BF16);
	/* the attention rules have no generic entry: with the facts too, only their tiles */
	f.l.dynamic_smem = 110592;
	fake_expect_refusal(&f, "reroutes _fwd_kernel only at the shared-memory sizes of its tiles, not "
			   "110592 B");
	f.l.dynamic_smem = 106496;
	/* F2: an int64 qo_indptr (SGLang's Triton backend from 0.5.10 on) is read as
	   such; another width, or a wider kv_indptr, is refused */
	refact(&f, "qo_indptr:*i32", "qo_indptr:*i64");
	expect_plan(&f, "sglang-extend-2026-03", NULL, &plan);
	memcpy(&a, plan.args, sizeof(a));
	assert_int_equal(a.flags, ATTN_EXTEND_CAUSAL | ATTN_EXTEND_QO_I64);
	refact(&f, "qo_indptr:*i64", "qo_indptr:*i16");
	fake_expect_refusal(&f, "qo_indptr is *i16 in the compiled kernel; attn_extend reads int32 (*i32) "
			   "or int64 (*i64) offsets");
	with_facts(&f, EXTEND_CONSTEXPRS, extend_types, NULL);
	refact(&f, "kv_indptr:*i32", "kv_indptr:*i64");
	fake_expect_refusal(&f, "kv_indptr is *i64");
	/* F3: fp16 q */
	with_facts(&f, EXTEND_CONSTEXPRS, extend_types, NULL);
	refact(&f, "Q_Extend:*bf16", "Q_Extend:*fp16");
	fake_expect_refusal(&f, "Q_Extend is *fp16 in the compiled kernel; attn_extend reads it as *bf16");
	/* the cache dtype is K_Buffer's type: FP8 without the setting */
	with_facts(&f, EXTEND_CONSTEXPRS, extend_types, fp8_cache);
	f.fvalue[index_of(&f, "k_scale")] = 0.625f;
	expect_plan(&f, "sglang-extend-2026-03", NULL, &plan);
	assert_string_equal(plan.kernel, ATTN_EXTEND_MLA576_FP8);
	memcpy(&a, plan.args, sizeof(a));
	assert_true(a.k_scale == 0.625f);
	/* ... with an agreeing setting; a disagreeing one is refused, naming both */
	dtype_setting = "fp8_e4m3";
	expect_plan(&f, "sglang-extend-2026-03", NULL, &plan);
	dtype_setting = "bf16";
	fake_expect_refusal(&f, "compiled for a fp8_e4m3 KV cache (K_Buffer *fp8e4nv) but "
			   "SM120SHIM_KV_CACHE_DTYPE=bf16");
	/* ... an e5m2 cache, or K and V of two types */
	dtype_setting = NULL;
	refact(&f, "K_Buffer:*fp8e4nv", "K_Buffer:*fp8e5");
	fake_expect_refusal(&f, "K_Buffer is *fp8e5 and V_Buffer *fp8e4nv in the compiled kernel");
	/* a compiled-in flag the rule states: non-causal, transposed output */
	with_facts(&f, EXTEND_CONSTEXPRS, extend_types, NULL);
	refact(&f, "IS_CAUSAL=1", "IS_CAUSAL=0");
	fake_expect_refusal(&f, "compiled with IS_CAUSAL 0; rule sglang-extend-2026-03 reroutes it only "
			   "with IS_CAUSAL 1");
	with_facts(&f, EXTEND_CONSTEXPRS, extend_types, NULL);
	refact(&f, "STORE_TRANSPOSE=0", "STORE_TRANSPOSE=1");
	fake_expect_refusal(&f, "compiled with STORE_TRANSPOSE 1");
	/* a constexpr no rule or adapter answers for (a newer release's), and an
	   argument compiled in that the rule does not list: refused, naming it */
	with_facts(&f, EXTEND_CONSTEXPRS ";USE_NEW_MATH=1", extend_types, NULL);
	fake_expect_refusal(&f, "compiled with USE_NEW_MATH=1, a value rule sglang-extend-2026-03 and "
			   "adapter sglang_extend do not know");
	with_facts(&f, EXTEND_CONSTEXPRS ";new_ptr=None;compiled_args=new_ptr", extend_types, NULL);
	fake_expect_refusal(&f, "");
	fake_pack(&f);
	assert_int_equal(facts_reading(f.rule, f.compiled, f.l.param_sizes, f.l.n_params, &way, &why),
			 -EINVAL);
	assert_non_null(strstr(why.msg, "has the argument new_ptr (compiled in as None), which rule "
				       "sglang-extend-2026-03 does not list"));
	/* a score_mod with no aux tensor: invisible to the launch, refused by its facts */
	kimi_extend(&f, "sglang-extend-2026-07-10");
	with_facts(&f, EXTEND_CONSTEXPRS ";SCORE_MOD=None", extend_types, NULL);
	expect_plan(&f, "sglang-extend-2026-07-10", NULL, &plan);
	refact(&f, "SCORE_MOD=None", "SCORE_MOD=<function soft_cap at 0x7f3a>");
	fake_expect_refusal(&f, "compiled with SCORE_MOD <function soft_cap at 0x7f3a>");
}

/*
 * F2: SGLang 0.5.23's extend launch at a batch of 1 (compact_batch_size
 * dropped, read alike by sglang-extend-main and -2026-07-10) may pass an
 * int64 qo_indptr, which only the facts show: refused without them, naming
 * the rule and the hook; rerouted with them (int32), refused with int64.
 */
static void test_needs_compiled_facts(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;

	(void)state;
	kimi_extend(&f, "sglang-extend-main");
	drop(&f, "compact_batch_size");
	f.l.grid[0] = 1;
	fake_expect_refusal(&f, "reroutes only with the kernel's compiled facts (the Python hook beside "
			   "the shim)");
	fake_expect_refusal(&f, "rule sglang-extend-");
	extend_facts(&f);
	expect_plan(&f, "sglang-extend-main", "sglang-extend-2026-07-10", &plan);
	assert_string_equal(plan.kernel, ATTN_EXTEND_MLA576_BF16);
	refact(&f, "qo_indptr:*i32", "qo_indptr:*i64");
	expect_plan(&f, "sglang-extend-main", NULL, &plan);
	/* every release from 0.5.10 builds qo_indptr int64: 2026-03 needs the facts
	   too; SGLang 0.5.8/0.5.9 (int32) reroute as before without them */
	kimi_extend(&f, "sglang-extend-2026-03");
	fake_expect_refusal(&f, "rule sglang-extend-2026-03 reroutes only with the kernel's compiled facts");
	kimi_extend(&f, "sglang-extend-2025-08");
	expect_plan(&f, "sglang-extend-2025-08", NULL, &plan);
}

/* The reading the facts state, exactly: which dropped int is which, and other lists. */
static void test_facts_reading(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct attn_extend_args a;
	uint64_t way;
	struct sm_err why = { "" };

	(void)state;
	/* SGLang main at a batch of 1: compact_batch_size dropped, kv_group_num 8 ... */
	kimi_extend(&f, "sglang-extend-main");
	drop(&f, "compact_batch_size");
	f.l.grid[0] = 1;
	with_facts(&f, EXTEND_CONSTEXPRS, extend_types, NULL);
	expect_plan(&f, "sglang-extend-main", "sglang-extend-2026-07-10", &plan);
	memcpy(&a, plan.args, sizeof(a));
	assert_int_equal(a.kv_group_num, 8);
	/* ... the same sizes with kv_group_num the one compiled in (1): the facts
	   leave one reading, which the MLA layout (one KV head) refuses */
	kimi_extend(&f, "sglang-extend-main");
	drop(&f, "kv_group_num");
	set(&f, "compact_batch_size", 1);
	f.l.grid[0] = 1;
	with_facts(&f, EXTEND_CONSTEXPRS, extend_types, NULL);
	fake_expect_refusal(&f, "do not fit 8 KV heads (kv_group_num 1)");
	/* a list the rule does not have: SGLang 0.5.9's MoE kernel (no add_mask_ptr) */
	glm_moe(&f, "sglang-moe-2026-03");
	moe_facts(&f, 9, 0, NULL, NULL);
	fake_pack(&f);
	assert_int_equal(facts_reading(fake_rule("sglang-moe-main"), f.compiled, f.l.param_sizes,
				       f.l.n_params, &way, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "rule sglang-moe-main lists add_mask_ptr, which the "
				       "compiled kernel does not have"));
	assert_int_equal(facts_reading(f.rule, f.compiled, f.l.param_sizes, f.l.n_params, &way,
				       &why), 0);
	assert_int_equal(way & (1ull << index_of(&f, "a_desc")), 0);
	assert_int_not_equal(way & (1ull << index_of(&f, "a_scale_ptr")), 0);
	/* a runtime argument no rule lists, two in another order, another kind, a
	   dropped int compiled as another value */
	moe_facts(&f, 9, 0, NULL, NULL);
	refact(&f, "stride_bsn:i32", "stride_bsn:i32;bias_scale:fp32");
	fake_expect_refusal(&f, "the compiled kernel takes bias_scale at run time, which rule "
			   "sglang-moe-2026-03 does not list");
	moe_facts(&f, 9, 0, NULL, NULL);
	refact(&f, "N:i32;K:i32", "K:i32;N:i32");
	fake_expect_refusal(&f, "lists N where the compiled kernel's runtime arguments have K");
	moe_facts(&f, 9, 0, NULL, NULL);
	refact(&f, "stride_am:i32", "stride_am:i64");
	fake_expect_refusal(&f, "stride_am is i64 in the compiled kernel, not the i32");
	glm_moe(&f, "sglang-moe-2026-03");
	drop(&f, "stride_asm");
	moe_facts(&f, 9, 0, NULL, NULL);
	refact(&f, "stride_asm=1", "stride_asm=3");
	fake_expect_refusal(&f, "compiled with stride_asm=3; rule sglang-moe-2026-03 drops it only as 1");
	/* the facts' reading with the launch's sizes of another */
	glm_moe(&f, "sglang-moe-2026-03");
	moe_facts(&f, 9, 0, NULL, NULL);
	fake_pack(&f);
	f.l.n_params--;
	{
		const struct rule *r;

		assert_int_not_equal(reroute_select(rules_builtin, rules_builtin_count, &f.l, &plan,
						    &r, &why), 0);
		assert_non_null(strstr(why.msg, "parameter sizes are not those of the arguments"));
	}
}

/* vLLM decode: PAGE_SIZE and the derived constexprs from the facts. */
static void test_facts_decode(void **state)
{
	struct fake_launch f;
	struct reroute_plan plan;
	struct attn_decode_args a;

	(void)state;
	vllm_decode(&f, "vllm-mla-decode-2026-06");
	page_setting = NULL;
	with_facts(&f, DECODE_CONSTEXPRS, decode_types, NULL);
	expect_plan(&f, "vllm-mla-decode-2026-06", NULL, &plan);
	memcpy(&a, plan.args, sizeof(a));
	assert_int_equal(a.page_size, 64);
	page_setting = "64";
	expect_plan(&f, "vllm-mla-decode-2026-06", NULL, &plan);
	page_setting = "32";
	fake_expect_refusal(&f, "compiled with PAGE_SIZE 64 but SM120SHIM_PAGE_SIZE=32");
	page_setting = NULL;
	/* the derived ones: splits, heads */
	refact(&f, "NUM_KV_SPLITS=16", "NUM_KV_SPLITS=8");
	fake_expect_refusal(&f, "compiled with NUM_KV_SPLITS 8; the launch's Att_Out and grid give 16");
	with_facts(&f, DECODE_CONSTEXPRS, decode_types, NULL);
	refact(&f, "q_head_num=8", "q_head_num=16");
	fake_expect_refusal(&f, "compiled with q_head_num 16");
	/* IS_MLA off (V_Buffer read on its own, v_scale applied): the rule's value */
	with_facts(&f, DECODE_CONSTEXPRS, decode_types, NULL);
	refact(&f, "IS_MLA=1", "IS_MLA=0");
	fake_expect_refusal(&f, "compiled with IS_MLA 0");
	/* types: a bf16 cache at the FP8 tile's bytes, fp16 q, an int64 block table */
	with_facts(&f, DECODE_CONSTEXPRS, decode_types, NULL);
	refact(&f, "K_Buffer:*fp8e4nv", "K_Buffer:*bf16");
	fake_expect_refusal(&f, "K_Buffer is *bf16 in the compiled kernel; attn_decode reads it as *fp8e4nv");
	with_facts(&f, DECODE_CONSTEXPRS, decode_types, NULL);
	refact(&f, "Q:*bf16", "Q:*fp16");
	fake_expect_refusal(&f, "Q is *fp16");
	with_facts(&f, DECODE_CONSTEXPRS, decode_types, NULL);
	refact(&f, "Req_to_tokens:*i32", "Req_to_tokens:*i64");
	fake_expect_refusal(&f, "Req_to_tokens is *i64");
}

/* moe_compiled_half, the pure decision of F1/F5. */
static void test_moe_compiled_half(void **state)
{
	int32_t top_k = 0, mul = -1;
	struct sm_err why = { "" };

	(void)state;
	assert_int_equal(moe_compiled_half(9, 0, NULL, 9 * 2048, 1, &top_k, &mul, &why), 0);
	assert_int_equal(top_k, 9);
	assert_int_equal(mul, 0);
	assert_int_equal(moe_compiled_half(9, 0, "9", 9 * 2048, 0, &top_k, &mul, &why), 0);
	assert_int_equal(moe_compiled_half(1, 1, "9", 9 * 2048, 1, &top_k, &mul, &why), 0);
	assert_int_equal(top_k, 1);
	assert_int_equal(mul, 1);
	assert_int_equal(moe_compiled_half(6, 1, NULL, 6 * 5, 1, &top_k, &mul, &why), 0);
	assert_int_equal(top_k, 6);
	assert_int_equal(moe_compiled_half(9, 0, "8", 9 * 2048, 1, &top_k, &mul, &why), -EINVAL);
	assert_non_null(strstr(why.msg, "compiled with top_k 9 but SM120SHIM_TOP_K=8"));
	assert_int_equal(moe_compiled_half(9, 0, "0", 9 * 2048, 1, &top_k, &mul, &why), -EINVAL);
	assert_int_equal(moe_compiled_half(9, 0, NULL, 9 * 2048 + 3, 1, &top_k, &mul, &why), -EINVAL);
	assert_int_equal(moe_compiled_half(9, 1, NULL, 9 * 2048, 0, &top_k, &mul, &why), -EINVAL);
	assert_int_equal(moe_compiled_half(0, 0, NULL, 9, 1, &top_k, &mul, &why), -EINVAL);
	assert_int_equal(moe_compiled_half(9, 2, NULL, 9, 1, &top_k, &mul, &why), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_release_reroutes),
		cmocka_unit_test(test_fp8_and_scales),
		cmocka_unit_test(test_main_dropped_int_is_told_apart),
		cmocka_unit_test(test_inconsistent_launches_are_refused),
		cmocka_unit_test(test_vllm_mla_decode),
		cmocka_unit_test(test_decision_table),
		cmocka_unit_test(test_fused_moe),
		cmocka_unit_test(test_fused_moe_refusals),
		cmocka_unit_test(test_moe_decisions),
		cmocka_unit_test(test_moe_compiled_half),
		cmocka_unit_test(test_facts_reading),
		cmocka_unit_test(test_facts_moe_top_k),
		cmocka_unit_test(test_facts_moe_routed_weight),
		cmocka_unit_test(test_facts_moe_formats),
		cmocka_unit_test(test_facts_gptq),
		cmocka_unit_test(test_facts_extend),
		cmocka_unit_test(test_needs_compiled_facts),
		cmocka_unit_test(test_facts_decode),
		cmocka_unit_test(test_generic_moe),
		cmocka_unit_test(test_generic_admit_agrees),
		cmocka_unit_test(test_facts_moe_naive),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

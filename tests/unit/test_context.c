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
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../kernels/attention/extend.h"
#include "../../core/adapters/select.h"
#include "../../core/rules/compiled.h"
#include "../../core/route/admit.h"

#define SM_SCALE 0.0371f

/* The real kernel's facts at head size 256 (12 q heads over 3 kv heads, causal), less the types. */
#define CONSTEXPRS "num_warps=8;num_stages=1;kv_group_num=4;BLOCK_M=128;BLOCK_DMODEL=256;" \
		   "BLOCK_N=128;IS_CAUSAL=1;Lk=256"
#define SIGNATURE ";Q:*bf16;K:*bf16;V:*bf16;sm_scale:fp32;B_Start_Loc:*i32;B_Seqlen:*i32;" \
		  "Out:*bf16;stride_qbs:i32;stride_qh:i32;stride_kbs:i32;stride_kh:i32;" \
		  "stride_vbs:i32;stride_vh:i32;stride_obs:i32;stride_oh:i32"

/* One launch of the kernel: parameter values in the rule's order, and the facts. */
struct fake {
	const struct rule *rule;
	int64_t value[RULE_MAX_PARAMS];
	float sm_scale;
	unsigned char storage[RULE_MAX_PARAMS][8];
	void *params[RULE_MAX_PARAMS];
	uint32_t sizes[RULE_MAX_PARAMS];
	struct select_launch l;
	char compiled[COMPILED_MAX];
};

static const struct rule *context_rule(void)
{
	uint32_t i;

	for (i = 0; i < rules_builtin_count; i++)
		if (strcmp(rules_builtin[i].id, "sglang-context-attention") == 0)
			return &rules_builtin[i];
	fail_msg("no rule sglang-context-attention");
	return NULL;
}

static int index_of(const struct fake *f, const char *name)
{
	uint32_t i;

	for (i = 0; i < f->rule->n_params; i++)
		if (strcmp(f->rule->params[i].name, name) == 0)
			return (int)i;
	fail_msg("rule has no parameter %s", name);
	return -1;
}

static void set(struct fake *f, const char *name, int64_t v)
{
	f->value[index_of(f, name)] = v;
}

/*
 * replace - @f's compiled text with entry @name (with its separator, "Lk="
 * or "Q:") given @value instead.
 */
static void replace(struct fake *f, const char *name, const char *value)
{
	char out[COMPILED_MAX];
	char *at = strstr(f->compiled, name), *end;

	assert_non_null(at);
	end = strchr(at, ';');
	snprintf(out, sizeof(out), "%.*s%s%s%s", (int)(at - f->compiled), f->compiled, name, value,
		 end ? end : "");
	strcpy(f->compiled, out);
}

/*
 * context - 3 sequences, the longest 1025 tokens: grid (3, 12, cdiv(1025,
 * 128)), q and o [T, 12, 256], k and v [T, 3, 256] contiguous, compiled for
 * sm_120 (163840 B).
 */
static void context(struct fake *f)
{
	static const struct {
		const char *name;
		int64_t v;
	} ints[] = {
		{ "Q", 0x100000 }, { "K", 0x200000 }, { "V", 0x300000 }, { "B_Start_Loc", 0x400000 },
		{ "B_Seqlen", 0x500000 }, { "Out", 0x600000 },
		{ "stride_qbs", 12 * 256 }, { "stride_qh", 256 }, { "stride_kbs", 3 * 256 },
		{ "stride_kh", 256 }, { "stride_vbs", 3 * 256 }, { "stride_vh", 256 },
		{ "stride_obs", 12 * 256 }, { "stride_oh", 256 },
	};
	size_t i;

	memset(f, 0, sizeof(*f));
	f->rule = context_rule();
	for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		set(f, ints[i].name, ints[i].v);
	f->sm_scale = SM_SCALE;
	strcpy(f->compiled, CONSTEXPRS SIGNATURE);
	f->l = (struct select_launch){ .kernel = "_fwd_kernel", .grid = { 3, 12, 9 },
				       .block = { 256, 1, 1 }, .dynamic_smem = 163840,
				       .compiled = f->compiled };
}

/* pack - kernelParams and sizes as Triton passes them (nothing dropped). */
static void pack(struct fake *f)
{
	uint32_t i;

	for (i = 0; i < f->rule->n_params; i++) {
		const struct rule_param *p = &f->rule->params[i];

		if (p->type == RULE_FP32)
			memcpy(f->storage[i], &f->sm_scale, 4);
		else if (p->type == RULE_I32)
			memcpy(f->storage[i], &(int32_t){ (int32_t)f->value[i] }, 4);
		else
			memcpy(f->storage[i], &f->value[i], 8);
		f->params[i] = f->storage[i];
		f->sizes[i] = rule_type_size((enum rule_type)p->type);
	}
	f->l.params = f->params;
	f->l.param_sizes = f->sizes;
	f->l.n_params = f->rule->n_params;
}

static void expect_refusal(struct fake *f, const char *text)
{
	struct reroute_plan plan;
	const struct rule *r = NULL;
	struct sm_err why = { "" };

	pack(f);
	assert_int_equal(reroute_select(rules_builtin, rules_builtin_count, &f->l, &plan, &r, &why),
			 -EINVAL);
	if (!strstr(why.msg, text))
		fail_msg("reason '%s' lacks '%s'", why.msg, text);
}

static void expect_plan(struct fake *f, struct reroute_plan *plan, struct attn_extend_args *a)
{
	const struct rule *r = NULL;
	struct sm_err why = { "" };

	pack(f);
	if (reroute_select(rules_builtin, rules_builtin_count, &f->l, plan, &r, &why) != 0)
		fail_msg("not rerouted: %s", why.msg);
	assert_string_equal(r->id, "sglang-context-attention");
	assert_int_equal(plan->args_size, sizeof(*a));
	memcpy(a, plan->args, sizeof(*a));
}

/* Causal, 4 q heads per kv head: every field of the plan. */
static void test_plan_causal_gqa(void **state)
{
	struct fake f;
	struct reroute_plan plan;
	struct attn_extend_args a;

	(void)state;
	context(&f);
	expect_plan(&f, &plan, &a);
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
	struct fake f;
	struct reroute_plan plan;
	struct attn_extend_args a;

	(void)state;
	context(&f);
	replace(&f, "IS_CAUSAL=", "0");
	replace(&f, "kv_group_num=", "1");
	set(&f, "stride_kbs", 12 * 256);
	set(&f, "stride_vbs", 12 * 256);
	f.l.grid[0] = 5;
	f.l.grid[2] = 1;
	f.l.dynamic_smem = 131072;
	expect_plan(&f, &plan, &a);
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
	struct fake f;

	(void)state;
	context(&f);
	f.l.compiled = NULL;
	expect_refusal(&f, "IS_CAUSAL, kv_group_num and Lk (the head size) are compiled into "
			   "_fwd_kernel");
	f.l.dynamic_smem = 131072;
	expect_refusal(&f, "compiled facts of the shim's Python hook");
	f.l.dynamic_smem = 65536; /* a tile no rule has */
	expect_refusal(&f, "not 65536 B");
}

/* Head sizes, dtypes and index widths the bundled kernel does not compute. */
static void test_refused_compiled(void **state)
{
	static const struct {
		const char *entry, *value, *reason;
	} cases[] = {
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
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fake f;

		context(&f);
		replace(&f, cases[i].entry, cases[i].value);
		expect_refusal(&f, cases[i].reason);
	}
}

/* The launch's own values that do not add up. */
static void test_refused_launch(void **state)
{
	struct fake f;

	(void)state;
	context(&f);
	f.l.grid[1] = 10; /* 10 q heads over kv_group_num 4 */
	expect_refusal(&f, "kv_group_num 4 does not divide the 10 q heads");
	context(&f);
	f.l.block[0] = 128;
	expect_refusal(&f, "block (128, 1, 1) is not the tile's 8 warps");
	context(&f);
	f.l.grid[2] = 0;
	expect_refusal(&f, "empty grid");
	context(&f);
	set(&f, "stride_qh", 200); /* heads of 256 overlap */
	expect_refusal(&f, "q strides (3072, 200)");
	context(&f);
	set(&f, "stride_kbs", 2 * 256); /* 3 kv heads of 256 do not fit 512 */
	expect_refusal(&f, "k/v strides (512, 256, 768, 256) do not fit 3 kv heads");
	context(&f);
	set(&f, "stride_obs", 12 * 256 + 4);
	expect_refusal(&f, "stride_obs = 3076 is not a multiple of 8");
	context(&f);
	set(&f, "V", 0x300008);
	expect_refusal(&f, "V at 0x300008 is not 16-byte aligned");
	context(&f);
	set(&f, "B_Seqlen", 0x500002);
	expect_refusal(&f, "not a 4-byte aligned int32 array");
	context(&f);
	f.sm_scale = NAN;
	expect_refusal(&f, "sm_scale nan is not finite");
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
		char text[COMPILED_MAX], *at;
		struct route_kernel k = { "_fwd_kernel", cases[i].shared, 256, text, 0 };
		struct route_admission a;

		strcpy(text, CONSTEXPRS SIGNATURE);
		if (cases[i].from) {
			at = strstr(text, cases[i].from);
			assert_non_null(at);
			memmove(at + strlen(cases[i].to), at + strlen(cases[i].from),
				strlen(at + strlen(cases[i].from)) + 1);
			memcpy(at, cases[i].to, strlen(cases[i].to));
		}
		route_admit(&k, &sm120, SHIM_MODE_REROUTE, rules_builtin, rules_builtin_count, &a);
		if (!cases[i].reason) {
			assert_int_equal(a.advertise, cases[i].shared);
			assert_string_equal(a.rule->id, "sglang-context-attention");
		} else {
			assert_int_equal(a.advertise, 0);
			if (!strstr(a.why.msg, cases[i].reason))
				fail_msg("case %zu: reason '%s' lacks '%s'", i, a.why.msg,
					 cases[i].reason);
		}
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

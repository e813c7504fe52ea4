/*
 * sglang_extend.c - SGLang's extend attention `_fwd_kernel` as
 * attn_extend_* (kernels/attention/extend.h).
 *
 * What the launch shows and what it means (SGLang extend_attention_fwd):
 *   grid (batch, q heads, cdiv(max_len_extend, BLOCK_M)), block 32*num_warps,
 *   dynamic smem = the tile (BLOCK_M, BLOCK_N, Lq, Lv compiled in);
 *   kv_group_num = q heads / kv heads (dropped when 1);
 *   strides in elements of q [T, Hq, Lq], k/v extend [T, Hkv, Lq|Lv],
 *   o [T, Hq, Lv], the KV buffers [slots, Hkv, Lq|Lv] (MLA: V is a view of K).
 * Head sizes come from the tile and are checked against every stride; the
 * number of KV heads comes from kv_group_num and is checked against the
 * extend K layout, which is what tells a dropped kv_group_num (== 1) from a
 * dropped compact_batch_size (== 1) in SGLang main.  The KV cache dtype is
 * compiled in and invisible: it comes from SM120SHIM_KV_CACHE_DTYPE.
 *
 * With the kernel's compiled facts (the Python hook, facts.h) the reading of
 * the dropped parameters and every value the rule states are checked by
 * select.c, and here: the element type of every pointer against what
 * attn_extend reads (extend_types: bf16 q/k/v/o, int32 kv_indptr, int64
 * kv_indices; qo_indptr int32 or int64, which attn_extend reads at either
 * width, ATTN_EXTEND_QO_I64), the KV cache dtype from K_Buffer's type
 * (SM120SHIM_KV_CACHE_DTYPE, if set, must agree), and no score_mod.
 * Without the facts qo_indptr is int32: only sglang-extend-2025-08 (SGLang
 * 0.5.8, 0.5.9, whose Triton backend builds it int32) reroutes without
 * them; from 0.5.10 on the backend builds it int64 and the later rules
 * carry needs_compiled_facts.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../kernels/attention/extend.h"
#include "../rules/compiled.h"
#include "adapter.h"
#include "facts.h"

/* The element type attn_extend reads or writes through each pointer, and what another would do. */
static const struct facts_ptype extend_types[] = {
	{ "Q_Extend", "*bf16", "so another q dtype (fp16) would be decoded wrongly" },
	{ "K_Extend", "*bf16", "so another key dtype would be decoded wrongly" },
	{ "V_Extend", "*bf16", "so another value dtype would be decoded wrongly" },
	{ "O_Extend", "*bf16", "so an output of another dtype would be written as bf16 bits" },
	{ "kv_indptr", "*i32", "so wider offsets would be read as pairs of int32 and every "
			       "sequence's prefix misplaced" },
	{ "kv_indices", "*i64", "so slots of another width would be misread" },
};

/* The KV cache dtypes attn_extend has kernels for: SM120SHIM_KV_CACHE_DTYPE and K_Buffer's type. */
static const struct {
	const char *setting, *type;
} cache_types[] = {
	{ "bf16", "*bf16" },          /* row 0: bf16 */
	{ "fp8_e4m3", "*fp8e4nv" },   /* row 1: FP8 E4M3 */
};

/* layout_ok - do @heads rows of @width elements at strides (@tok, @head) not overlap? */
static int layout_ok(int32_t tok, int32_t head, int64_t heads, int64_t width)
{
	return head >= width && (int64_t)tok >= (heads - 1) * head + width;
}

/* aligned - a stride the kernel can load 16 bytes at a time (contract in extend.h). */
static int aligned(int32_t stride, int elems)
{
	return stride > 0 && stride % elems == 0;
}

/* The 2026-06 and later page strides must describe page size 1. */
static int check_pages(const struct adapter_input *in, int32_t kb, int32_t vb, struct sm_err *why)
{
	int32_t kpage, ktok, vpage, vtok;

	if (!adapter_has(in, "stride_buf_kpage"))
		return 0;
	if (adapter_i32(in, "stride_buf_kpage", &kpage, why) ||
	    adapter_i32(in, "stride_buf_ktok", &ktok, why) ||
	    adapter_i32(in, "stride_buf_vpage", &vpage, why) ||
	    adapter_i32(in, "stride_buf_vtok", &vtok, why))
		return -EINVAL;
	if (kpage != ktok || vpage != vtok || ktok != kb || vtok != vb)
		return sm_err_set(why, -EINVAL, "page strides (%d, %d, %d, %d) describe a page size "
				  "above 1, which attn_extend does not support", kpage, ktok, vpage,
				  vtok);
	return 0;
}

/* check_extras - the later signatures' parameters that must be in their neutral state. */
static int check_extras(const struct adapter_input *in, int32_t batch, struct sm_err *why)
{
	int32_t v;
	double prefix, extend;

	if (adapter_has(in, "aux0_len")) {
		if (adapter_i32(in, "aux0_len", &v, why))
			return -EINVAL;
		if (v != 0)
			return sm_err_set(why, -EINVAL, "aux0_len %d: a score_mod is compiled in, "
					  "which attn_extend does not support", v);
	}
	if (adapter_has(in, "compact_batch_size")) {
		if (adapter_i32(in, "compact_batch_size", &v, why))
			return -EINVAL;
		if (v != batch)
			return sm_err_set(why, -EINVAL, "compact_batch_size %d differs from the "
					  "batch of the grid (%d)", v, batch);
	}
	if (adapter_has(in, "LSE_Extend")) {
		if (adapter_value(in, "SKIP_PREFIX", &prefix, why) ||
		    adapter_value(in, "SKIP_EXTEND", &extend, why))
			return -EINVAL;
		if (prefix != 0 || extend != 0)
			return sm_err_set(why, -EINVAL, "rule %s sets SKIP_PREFIX or SKIP_EXTEND, "
					  "which attn_extend is not rerouted with", in->rule->id);
	}
	return 0;
}

/* The bundled extend kernels, one row per head sizes and cache dtype (extend.h's table). */
static const struct variant {
	const char *name;
	int lq, lv, fp8;
	int rows;                 /* packed rows per block */
	unsigned int smem;        /* dynamic shared memory */
} variants[] = {
#define EXTEND_VARIANT(name, lq, lv, fp8, rows, smem) { #name, lq, lv, fp8, rows, smem },
	ATTN_EXTEND_KERNELS(EXTEND_VARIANT)
#undef EXTEND_VARIANT
};

/* cache_row - the cache_types row of @text in column @type (0: setting, 1: type), or -1. */
static int cache_row(const char *text, int type)
{
	int i;

	for (i = 0; i < (int)(sizeof(cache_types) / sizeof(cache_types[0])); i++)
		if (strcmp(type ? cache_types[i].type : cache_types[i].setting, text) == 0)
			return i;
	return -1;
}

/*
 * cache_dtype - is the KV cache FP8 E4M3 (1) or bf16 (0)?  With the compiled
 * facts, K_Buffer's element type (V_Buffer's must be the same) decides, and
 * SM120SHIM_KV_CACHE_DTYPE, when set, must agree; without them the setting.
 */
static int cache_dtype(const struct adapter_input *in, int *fp8, struct sm_err *why)
{
	const char *dtype = in->setting ? in->setting("kv_cache_dtype") : NULL;
	int set = dtype ? cache_row(dtype, 0) : -1, got;
	char k[32] = "", v[32] = "";

	if (!dtype && !in->compiled)
		return sm_err_set(why, -EINVAL, "the KV cache dtype is compiled into %s and cannot be "
				  "read from the launch: set SM120SHIM_KV_CACHE_DTYPE=bf16 or fp8_e4m3 "
				  "(as SGLang's --kv-cache-dtype)", in->rule->kernel);
	if (dtype && set < 0)
		return sm_err_set(why, -EINVAL, "SM120SHIM_KV_CACHE_DTYPE=%s: use bf16 or fp8_e4m3",
				  dtype);
	if (!in->compiled) {
		*fp8 = set;
		return 0;
	}
	if (compiled_get(in->compiled, "K_Buffer", ':', k, sizeof(k)) ||
	    compiled_get(in->compiled, "V_Buffer", ':', v, sizeof(v)) ||
	    (got = cache_row(k, 1)) < 0 || strcmp(k, v) != 0)
		return sm_err_set(why, -EINVAL, "K_Buffer is %s and V_Buffer %s in the compiled "
				  "kernel; attn_extend reads a bf16 (*bf16) or FP8 E4M3 (*fp8e4nv) "
				  "cache, both of one type", k[0] ? k : "untyped", v[0] ? v : "untyped");
	if (dtype && set != got)
		return sm_err_set(why, -EINVAL, "the kernel was compiled for a %s KV cache (K_Buffer "
				  "%s) but SM120SHIM_KV_CACHE_DTYPE=%s: the two must agree; unset it "
				  "to use the compiled type", cache_types[got].setting, k, dtype);
	*fp8 = got;
	return 0;
}

/* compiled_extend - with the compiled facts: every pointer's element type, and no score_mod. */
static int compiled_extend(const struct adapter_input *in, struct sm_err *why)
{
	char mod[64];
	int rc;

	if (facts_types(in->compiled, extend_types, sizeof(extend_types) / sizeof(extend_types[0]),
			"attn_extend", why))
		return -EINVAL;
	rc = compiled_get(in->compiled, "SCORE_MOD", '=', mod, sizeof(mod));
	if (rc != -ENOENT && (rc || strcmp(mod, "None") != 0))
		return sm_err_set(why, -EINVAL, "the kernel was compiled with SCORE_MOD %s; attn_extend "
				  "applies none (SCORE_MOD None)", rc ? "(a function)" : mod);
	return 0;
}

/*
 * qo_flags - ATTN_EXTEND_QO_I64 when the compiled facts type qo_indptr
 * *i64, 0 for *i32 or without the facts (into *@flags); -EINVAL with @why
 * for any other type.
 */
static int qo_flags(const struct adapter_input *in, uint32_t *flags, struct sm_err *why)
{
	char ty[64];

	*flags = 0;
	if (!in->compiled || compiled_get(in->compiled, "qo_indptr", ':', ty, sizeof(ty)) == -ENOENT ||
	    strcmp(ty, "*i32") == 0)
		return 0;
	if (strcmp(ty, "*i64") == 0) {
		*flags = ATTN_EXTEND_QO_I64;
		return 0;
	}
	return sm_err_set(why, -EINVAL, "qo_indptr is %s in the compiled kernel; attn_extend reads "
			  "int32 (*i32) or int64 (*i64) offsets: not rerouted", ty);
}

/* variant_for - the kernel row of head sizes @lq/@lv and the cache dtype (cache_dtype). */
static const struct variant *variant_for(const struct adapter_input *in, int lq, int lv, int *fp8,
					 struct sm_err *why)
{
	size_t i;

	if (cache_dtype(in, fp8, why))
		return NULL;
	if (*fp8 && !adapter_has(in, "k_scale")) {
		sm_err_set(why, -EINVAL, "rule %s (no k_scale/v_scale) with an FP8 KV cache: how "
			   "that release scales FP8 keys is not verified", in->rule->id);
		return NULL;
	}
	for (i = 0; i < sizeof(variants) / sizeof(variants[0]); i++)
		if (variants[i].lq == lq && variants[i].lv == lv && variants[i].fp8 == *fp8)
			return &variants[i];
	sm_err_set(why, -EINVAL, "head sizes Lq %d, Lv %d have no bundled extend kernel", lq, lv);
	return NULL;
}

int adapt_sglang_extend(const struct adapter_input *in, struct reroute_plan *plan,
			struct sm_err *why)
{
	struct attn_extend_args a = { 0 };
	double lq_d, lv_d, bm_d, warps_d, causal, cap, window, xai;
	int32_t group, s[12];
	static const char *const stride_names[12] = {
		"stride_qbs", "stride_qh", "stride_kbs", "stride_kh", "stride_vbs", "stride_vh",
		"stride_obs", "stride_oh", "stride_buf_kbs", "stride_buf_kh", "stride_buf_vbs",
		"stride_buf_vh",
	};
	const void *p[10];
	static const char *const ptr_names[10] = {
		"Q_Extend", "K_Extend", "V_Extend", "O_Extend", "K_Buffer", "V_Buffer",
		"qo_indptr", "kv_indptr", "kv_indices", "LSE_Extend",
	};
	int64_t hq = in->grid[1], hkv, lq, lv;
	unsigned int i, n_ptrs = adapter_has(in, "LSE_Extend") ? 10 : 9;
	int fp8 = 0, per16;
	uint32_t qo64;
	const struct variant *k;

	if (adapter_value(in, "Lq", &lq_d, why) || adapter_value(in, "Lv", &lv_d, why) ||
	    adapter_value(in, "BLOCK_M", &bm_d, why) || adapter_value(in, "num_warps", &warps_d, why) ||
	    adapter_value(in, "IS_CAUSAL", &causal, why) ||
	    adapter_value(in, "logit_cap", &cap, why) ||
	    adapter_value(in, "SLIDING_WINDOW_SIZE", &window, why) ||
	    adapter_value(in, "xai_temperature_len", &xai, why))
		return -EINVAL;
	if (window > 0 || xai > 0)
		return sm_err_set(why, -EINVAL, "rule %s compiles in a sliding window or xai "
				  "temperature, which attn_extend does not support", in->rule->id);
	lq = (int64_t)lq_d;
	lv = (int64_t)lv_d;
	for (i = 0; i < n_ptrs; i++)
		if (adapter_ptr(in, ptr_names[i], &p[i], why))
			return -EINVAL;
	for (i = 0; i < 12; i++)
		if (adapter_i32(in, stride_names[i], &s[i], why))
			return -EINVAL;
	if (adapter_i32(in, "kv_group_num", &group, why) || adapter_f32(in, "sm_scale", &a.sm_scale, why))
		return -EINVAL;
	a.k_scale = a.v_scale = 1.0f;
	if (adapter_has(in, "k_scale") && (adapter_f32(in, "k_scale", &a.k_scale, why) ||
					   adapter_f32(in, "v_scale", &a.v_scale, why)))
		return -EINVAL;

	/* the geometry Triton was launched with */
	if (in->block[0] != (unsigned int)(32 * warps_d) || in->block[1] != 1 || in->block[2] != 1)
		return sm_err_set(why, -EINVAL, "block (%u, %u, %u) is not the tile's %d warps",
				  in->block[0], in->block[1], in->block[2], (int)warps_d);
	if (in->grid[0] < 1 || hq < 1 || in->grid[2] < 1)
		return sm_err_set(why, -EINVAL, "empty grid (%u, %u, %u)", in->grid[0], in->grid[1],
				  in->grid[2]);
	if (group < 1 || hq % group != 0)
		return sm_err_set(why, -EINVAL, "kv_group_num %d does not divide the %lld q heads of "
				  "the grid", group, (long long)hq);
	hkv = hq / group;
	if (!layout_ok(s[0], s[1], hq, lq) || !layout_ok(s[6], s[7], hq, lv))
		return sm_err_set(why, -EINVAL, "q strides (%d, %d) or o strides (%d, %d) do not fit "
				  "%lld heads of Lq %lld / Lv %lld", s[0], s[1], s[6], s[7],
				  (long long)hq, (long long)lq, (long long)lv);
	if (!layout_ok(s[2], s[3], hkv, lq) || !layout_ok(s[4], s[5], hkv, lv))
		return sm_err_set(why, -EINVAL, "extend K/V strides (%d, %d, %d, %d) do not fit %lld "
				  "KV heads (kv_group_num %d): the dropped parameters were not what "
				  "this rule assumes", s[2], s[3], s[4], s[5], (long long)hkv, group);
	if (!layout_ok(s[8], s[9], hkv, lq) || !layout_ok(s[10], s[11], hkv, lv))
		return sm_err_set(why, -EINVAL, "KV buffer strides (%d, %d, %d, %d) do not fit %lld "
				  "KV heads of Lq %lld / Lv %lld", s[8], s[9], s[10], s[11],
				  (long long)hkv, (long long)lq, (long long)lv);
	if (check_pages(in, s[8], s[10], why) || check_extras(in, (int32_t)in->grid[0], why) ||
	    (in->compiled && compiled_extend(in, why)) || qo_flags(in, &qo64, why))
		return -EINVAL;
	k = variant_for(in, (int)lq, (int)lv, &fp8, why);
	if (!k)
		return -EINVAL;
	per16 = fp8 ? 16 : 8;
	for (i = 0; i < 12; i++)
		if (!aligned(s[i], i >= 8 ? per16 : 8))
			return sm_err_set(why, -EINVAL, "%s = %d is not a multiple of %d elements "
					  "(attn_extend loads 16 bytes at a time)", stride_names[i],
					  s[i], i >= 8 ? per16 : 8);
	if (!isfinite(a.sm_scale) || !isfinite(a.k_scale) || !isfinite(a.v_scale) || cap < 0)
		return sm_err_set(why, -EINVAL, "sm_scale %g, k_scale %g, v_scale %g or logit_cap %g "
				  "is not usable", a.sm_scale, a.k_scale, a.v_scale, cap);

	a.q = p[0], a.k_ext = p[1], a.v_ext = p[2], a.o = (void *)(uintptr_t)p[3];
	a.k_buf = p[4], a.v_buf = p[5];
	a.qo_indptr = p[6], a.kv_indptr = p[7], a.kv_indices = p[8];
	a.lse = NULL;
	a.q_tok = s[0], a.q_head = s[1], a.kx_tok = s[2], a.kx_head = s[3];
	a.vx_tok = s[4], a.vx_head = s[5], a.o_tok = s[6], a.o_head = s[7];
	a.kb_slot = s[8], a.kb_head = s[9], a.vb_slot = s[10], a.vb_head = s[11];
	a.logit_cap = (float)cap;
	a.batch = (int32_t)in->grid[0];
	a.kv_group_num = group;
	a.lq = (int32_t)lq;
	a.lv = (int32_t)lv;
	a.flags = (causal != 0 ? ATTN_EXTEND_CAUSAL : 0) | qo64;

	/* Triton covered max_len_extend <= grid z * BLOCK_M rows per sequence. */
	plan->kernel = k->name;
	memcpy(plan->args, &a, sizeof(a));
	plan->args_size = sizeof(a);
	plan->grid[0] = (unsigned int)((in->grid[2] * (int64_t)bm_d * group + k->rows - 1) / k->rows);
	plan->grid[1] = (unsigned int)hkv;
	plan->grid[2] = in->grid[0];
	plan->block[0] = ATTN_EXTEND_THREADS;
	plan->block[1] = plan->block[2] = 1;
	plan->dynamic_smem = k->smem;
	return 0;
}

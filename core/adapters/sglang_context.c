/*
 * sglang_context.c - SGLang's context_attention_fwd `_fwd_kernel`
 * (prefill_attention.py: vision towers' attention, and an extend without a
 * prefix) as attn_extend_* with ATTN_EXTEND_START_LEN | ATTN_EXTEND_SKIP_PREFIX
 * (kernels/attention/extend.h).
 *
 * What the launch shows (SGLang 0.5.8, 0.5.9, 0.5.23 context_attention_fwd):
 *   grid (batch, q heads, cdiv(max_input_len, BLOCK)), block 32 * num_warps,
 *   BLOCK 128 on capability > 8; sequence b is rows B_Start_Loc[b] ..
 *   B_Start_Loc[b] + B_Seqlen[b] - 1 of q, k, v and o (one start and one
 *   length per sequence, not an indptr); strides in elements of q [T, Hq, Lk],
 *   k and v [T, Hkv, Lk], o [T, Hq, Lk], the last dimension contiguous.
 * What it does not show: IS_CAUSAL (vision towers pass False, the test
 * helper redundant_attention True), kv_group_num (q heads / kv heads) and Lk
 * (the head size; BLOCK_DMODEL is its next power of two, channels past Lk
 * masked) are constexprs, and q's dtype is invisible.  So this adapter
 * reroutes only with the Python hook's compiled facts, which state them all;
 * without them every launch is refused, naming what is missing.  The rule
 * pins the tile (BLOCK_M, BLOCK_N, BLOCK_DMODEL, num_warps) and Lk to a
 * bundled kernel's head size, so a kernel of another head size is refused
 * already when Triton loads it.
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
static const struct facts_ptype context_types[] = {
	{ "Q", "*bf16", "so another q dtype (fp16, fp32) would be decoded wrongly" },
	{ "K", "*bf16", "so another key dtype would be decoded wrongly" },
	{ "V", "*bf16", "so another value dtype would be decoded wrongly" },
	{ "Out", "*bf16", "so an output of another dtype would be written as bf16 bits" },
	{ "B_Start_Loc", "*i32", "so wider starts would be read as pairs of int32 and every "
				 "sequence's rows misplaced" },
	{ "B_Seqlen", "*i32", "so wider lengths would be read as pairs of int32" },
	{ "sm_scale", "fp32", "so the scale would be misread" },
};

/* The bundled kernels that compute q, k, v and o of one head size without a prefix. */
static const struct variant {
	const char *name;
	int lq, lv, fp8, rows;
	unsigned int smem;
} variants[] = {
#define CONTEXT_VARIANT(name, lq, lv, fp8, rows, smem) { #name, lq, lv, fp8, rows, smem },
	ATTN_EXTEND_KERNELS(CONTEXT_VARIANT)
#undef CONTEXT_VARIANT
};

/* variant_for - the bf16 kernel with lq == lv == @lk, or NULL. */
static const struct variant *variant_for(int64_t lk)
{
	size_t i;

	for (i = 0; i < sizeof(variants) / sizeof(variants[0]); i++)
		if (variants[i].lq == lk && variants[i].lv == lk && !variants[i].fp8)
			return &variants[i];
	return NULL;
}

/* layout_ok - do @heads rows of @width elements at strides (@tok, @head) not overlap? */
static int layout_ok(int32_t tok, int32_t head, int64_t heads, int64_t width)
{
	return head >= width && (int64_t)tok >= (heads - 1) * head + width;
}

/*
 * compiled_context - the constexprs the launch cannot show, from the facts:
 * IS_CAUSAL, kv_group_num, Lk; and every pointer's element type.
 */
static int compiled_context(const struct adapter_input *in, int64_t *causal, int64_t *group,
			    int64_t *lk, struct sm_err *why)
{
	if (!in->compiled)
		return sm_err_set(why, -EINVAL, "IS_CAUSAL, kv_group_num and Lk (the head size) are "
				  "compiled into %s (SGLang context_attention_fwd) and no launch shows "
				  "them: rule %s reroutes it only with the compiled facts of the shim's "
				  "Python hook (python/ beside libsm120shim.so, SM120SHIM_ADVERTISE "
				  "kernel)", in->rule->kernel, in->rule->id);
	if (compiled_int(in->compiled, "IS_CAUSAL", causal) ||
	    compiled_int(in->compiled, "kv_group_num", group) ||
	    compiled_int(in->compiled, "Lk", lk))
		return sm_err_set(why, -EINVAL, "the compiled facts do not state IS_CAUSAL, "
				  "kv_group_num and Lk as whole numbers: not SGLang's "
				  "context_attention_fwd as rule %s knows it", in->rule->id);
	if ((*causal != 0 && *causal != 1) || *group < 1)
		return sm_err_set(why, -EINVAL, "the kernel was compiled with IS_CAUSAL %lld and "
				  "kv_group_num %lld", (long long)*causal, (long long)*group);
	return facts_types(in->compiled, context_types,
			   sizeof(context_types) / sizeof(context_types[0]), "attn_extend", why);
}

int adapt_sglang_context(const struct adapter_input *in, struct reroute_plan *plan,
			 struct sm_err *why)
{
	static const char *const ptr_names[6] = { "Q", "K", "V", "Out", "B_Start_Loc", "B_Seqlen" };
	static const char *const stride_names[8] = {
		"stride_qbs", "stride_qh", "stride_kbs", "stride_kh",
		"stride_vbs", "stride_vh", "stride_obs", "stride_oh",
	};
	struct attn_extend_args a = { 0 };
	const struct variant *k;
	const void *p[6];
	int32_t s[8];
	double bm, warps;
	int64_t causal, group, lk, hq = in->grid[1], hkv, rows;
	unsigned int i;

	if (adapter_value(in, "BLOCK_M", &bm, why) || adapter_value(in, "num_warps", &warps, why))
		return -EINVAL;
	for (i = 0; i < 6; i++)
		if (adapter_ptr(in, ptr_names[i], &p[i], why))
			return -EINVAL;
	for (i = 0; i < 8; i++)
		if (adapter_i32(in, stride_names[i], &s[i], why))
			return -EINVAL;
	if (adapter_f32(in, "sm_scale", &a.sm_scale, why))
		return -EINVAL;
	if (compiled_context(in, &causal, &group, &lk, why))
		return -EINVAL;
	k = variant_for(lk);
	if (!k)
		return sm_err_set(why, -EINVAL, "head size %lld (Lk) has no bundled kernel (attn_extend "
				  "with lq = lv = %lld, bf16)", (long long)lk, (long long)lk);

	/* the geometry Triton was launched with */
	if (in->block[0] != (unsigned int)(32 * warps) || in->block[1] != 1 || in->block[2] != 1)
		return sm_err_set(why, -EINVAL, "block (%u, %u, %u) is not the tile's %g warps",
				  in->block[0], in->block[1], in->block[2], warps);
	if (in->grid[0] < 1 || hq < 1 || in->grid[2] < 1)
		return sm_err_set(why, -EINVAL, "empty grid (%u, %u, %u)", in->grid[0], in->grid[1],
				  in->grid[2]);
	if (hq % group != 0)
		return sm_err_set(why, -EINVAL, "kv_group_num %lld does not divide the %lld q heads "
				  "of the grid", (long long)group, (long long)hq);
	hkv = hq / group;
	if (!layout_ok(s[0], s[1], hq, lk) || !layout_ok(s[6], s[7], hq, lk))
		return sm_err_set(why, -EINVAL, "q strides (%d, %d) or o strides (%d, %d) do not fit "
				  "%lld heads of %lld", s[0], s[1], s[6], s[7], (long long)hq,
				  (long long)lk);
	if (!layout_ok(s[2], s[3], hkv, lk) || !layout_ok(s[4], s[5], hkv, lk))
		return sm_err_set(why, -EINVAL, "k/v strides (%d, %d, %d, %d) do not fit %lld kv heads "
				  "of %lld (kv_group_num %lld)", s[2], s[3], s[4], s[5],
				  (long long)hkv, (long long)lk, (long long)group);
	for (i = 0; i < 8; i++)
		if (s[i] % 8 != 0)
			return sm_err_set(why, -EINVAL, "%s = %d is not a multiple of 8 elements "
					  "(attn_extend loads 16 bytes at a time)", stride_names[i],
					  s[i]);
	for (i = 0; i < 4; i++)
		if ((uintptr_t)p[i] % 16 != 0)
			return sm_err_set(why, -EINVAL, "%s at %p is not 16-byte aligned (attn_extend "
					  "loads 16 bytes at a time)", ptr_names[i], p[i]);
	if (!p[4] || !p[5] || (uintptr_t)p[4] % 4 != 0 || (uintptr_t)p[5] % 4 != 0)
		return sm_err_set(why, -EINVAL, "B_Start_Loc %p or B_Seqlen %p is not a 4-byte "
				  "aligned int32 array", p[4], p[5]);
	if (!isfinite(a.sm_scale))
		return sm_err_set(why, -EINVAL, "sm_scale %g is not finite", a.sm_scale);
	/* Triton covered grid z * BLOCK_M tokens per sequence: the same rows, packed */
	rows = (int64_t)in->grid[2] * (int64_t)bm * group;
	if (rows > 0x7fffffff)
		return sm_err_set(why, -EINVAL, "grid z %u x BLOCK_M %g x kv_group_num %lld rows do "
				  "not fit attn_extend's int32 row count", in->grid[2], bm,
				  (long long)group);

	a.q = p[0], a.k_ext = p[1], a.v_ext = p[2], a.o = (void *)(uintptr_t)p[3];
	a.qo_indptr = p[4];
	a.qo_len = p[5];
	a.k_buf = a.v_buf = NULL;
	a.kv_indptr = NULL;
	a.kv_indices = NULL;
	a.lse = NULL;
	a.q_tok = s[0], a.q_head = s[1], a.kx_tok = s[2], a.kx_head = s[3];
	a.vx_tok = s[4], a.vx_head = s[5], a.o_tok = s[6], a.o_head = s[7];
	a.k_scale = a.v_scale = 1.0f;
	a.logit_cap = 0.0f;
	a.batch = (int32_t)in->grid[0];
	a.kv_group_num = (int32_t)group;
	a.lq = a.lv = (int32_t)lk;
	a.flags = ATTN_EXTEND_START_LEN | ATTN_EXTEND_SKIP_PREFIX | (causal ? ATTN_EXTEND_CAUSAL : 0);

	plan->kernel = k->name;
	memcpy(plan->args, &a, sizeof(a));
	plan->args_size = sizeof(a);
	plan->grid[0] = (unsigned int)((rows + k->rows - 1) / k->rows);
	plan->grid[1] = (unsigned int)hkv;
	plan->grid[2] = in->grid[0];
	plan->block[0] = ATTN_EXTEND_THREADS;
	plan->block[1] = plan->block[2] = 1;
	plan->dynamic_smem = k->smem;
	return 0;
}

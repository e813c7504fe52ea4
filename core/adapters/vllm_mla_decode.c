/*
 * vllm_mla_decode.c - vLLM TRITON_MLA decode stage 1
 * (`_fwd_grouped_kernel_stage1`) as attn_decode_mla_* (decode.h), writing
 * vLLM's own partial output so that its stage 2 runs unchanged.
 *
 * vLLM compiles in kv_group_num, q_head_num, NUM_KV_SPLITS and PAGE_SIZE.
 * They are derived and cross-checked here:
 *   Att_Out is [B, H, splits, Lv + 1] contiguous: stride_mid_os = Lv + 1,
 *   splits = stride_mid_oh / stride_mid_os (= grid z),
 *   H = stride_mid_ob / stride_mid_oh (grid y = cdiv(H, min(16, H)));
 *   MLA has one KV head, so kv_group_num = H;
 *   PAGE_SIZE cannot be derived (the page stride of 2026-06 and later may
 *   cover several layers' pages): SM120SHIM_PAGE_SIZE must say it.
 * The cache dtype is the tile's: 102400 B is the FP8 configuration.
 *
 * Scales: 102400 B is also the IS_MLA=True build (Triton 3.6, sm_120 and
 * sm_90 alike: IS_MLA=False compiles BLOCK_DMODEL 1024 at one stage, 98304 B,
 * and the kernels before IS_MLA existed, vLLM 0.18-0.19, 87040 B: both fit).
 * With IS_MLA vLLM takes V from the dequantised K tile, (k * *k_scale)
 * rounded to bf16, and loads *v_scale without ever applying it
 * (triton_decode_attention.py, vLLM 0.33.0, _fwd_grouped_kernel_stage1:
 * `v = tl.trans(k)` in the IS_MLA branch).  So the bundled kernel scales V by
 * k_scale: its v_scale argument is the k_scale pointer, whatever v_scale the
 * caller passed.
 *
 * With the kernel's compiled facts (the Python hook, facts.h), select.c has
 * checked every value the rule states (IS_MLA, Lk, Lv, the block sizes,
 * logit_cap); here PAGE_SIZE comes from them (SM120SHIM_PAGE_SIZE, if set,
 * must agree), kv_group_num, q_head_num and NUM_KV_SPLITS must be the ones
 * derived, and every pointer must have the element type attn_decode reads
 * (decode_types).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/attention/decode.h"
#include "adapter.h"
#include "facts.h"

/* The element type attn_decode reads or writes through each pointer (NULL: the cache's). */
static const struct facts_ptype decode_types[] = {
	{ "Q", "*bf16", "so another q dtype (fp16) would be decoded wrongly" },
	{ "K_Buffer", NULL, "so another cache format would be decoded wrongly" },
	{ "V_Buffer", NULL, "so another cache format would be decoded wrongly" },
	{ "Req_to_tokens", "*i32", "so page numbers of another width would be misread" },
	{ "B_Seqlen", "*i32", "so lengths of another width would be misread" },
	{ "Att_Out", "*fp32", "so partials would be written in the wrong format" },
	{ "k_scale", "*fp32", "so the scale would be misread" },
	{ "v_scale", "*fp32", "so the scale would be misread" },
};

/*
 * page_size - PAGE_SIZE: vLLM compiles it in, and the page stride cannot tell
 * it, since pages of several layers may interleave.  From the compiled facts
 * when they state it (SM120SHIM_PAGE_SIZE, when set, must agree), else from
 * SM120SHIM_PAGE_SIZE.
 */
static int page_size(const struct adapter_input *in, long *page, struct sm_err *why)
{
	const char *s = in->setting ? in->setting("page_size") : NULL;
	int64_t compiled = 0;
	int known = in->compiled && compiled_int(in->compiled, "PAGE_SIZE", &compiled) == 0;
	char *end;
	long v = 0;

	if (!s && !known)
		return sm_err_set(why, -EINVAL, "vLLM compiles PAGE_SIZE into %s and the launch "
				  "cannot show it: set SM120SHIM_PAGE_SIZE to vLLM's --block-size",
				  in->rule->kernel);
	if (s) {
		v = strtol(s, &end, 10);
		if (*end || v < 1 || v > 65536)
			return sm_err_set(why, -EINVAL, "SM120SHIM_PAGE_SIZE=%s is not a page size", s);
	}
	if (known && (compiled < 1 || compiled > 65536 || (s && v != compiled)))
		return sm_err_set(why, -EINVAL, "the kernel was compiled with PAGE_SIZE %lld%s%s: "
				  "%s", (long long)compiled, s ? " but SM120SHIM_PAGE_SIZE=" : "",
				  s ? s : "", s ? "the two must agree; unset it to use the compiled value" :
				  "not a page size");
	*page = known ? (long)compiled : v;
	return 0;
}

/*
 * pages_of - PAGE_SIZE (page_size) and the page stride: stride_buf_kpbs
 * where vLLM passes it, else pages are contiguous.
 */
static int pages_of(const struct adapter_input *in, int32_t kbs, int64_t *page,
		    int64_t *page_stride, struct sm_err *why)
{
	int32_t kpbs, vpbs;
	long v = 0;

	if (page_size(in, &v, why))
		return -EINVAL;
	*page = v;
	*page_stride = (int64_t)kbs * v;
	if (!adapter_has(in, "stride_buf_kpbs"))
		return 0;
	if (adapter_i32(in, "stride_buf_kpbs", &kpbs, why) ||
	    adapter_i32(in, "stride_buf_vpbs", &vpbs, why))
		return -EINVAL;
	if (kpbs != vpbs || kpbs < *page_stride || kpbs % 16 != 0)
		return sm_err_set(why, -EINVAL, "page strides %d / %d cannot hold %ld tokens of "
				  "stride %d (PAGE_SIZE)", kpbs, vpbs, v, kbs);
	*page_stride = kpbs;
	return 0;
}

/*
 * compiled_decode - with the compiled facts: kv_group_num and q_head_num are
 * the @heads, NUM_KV_SPLITS the @splits derived from Att_Out, and every
 * pointer has the element type attn_decode reads (@fp8: an E4M3 cache).
 */
static int compiled_decode(const struct adapter_input *in, int64_t heads, int64_t splits, int fp8,
			   struct sm_err *why)
{
	static const char *const derived[] = { "kv_group_num", "q_head_num", "NUM_KV_SPLITS" };
	int64_t want[3] = { heads, heads, splits }, got = -1;
	size_t i;
	int rc;

	for (i = 0; i < 3; i++) {
		rc = compiled_int(in->compiled, derived[i], &got);
		if (rc != -ENOENT && (rc || got != want[i]))
			return sm_err_set(why, -EINVAL, "the kernel was compiled with %s %lld; the "
					  "launch's Att_Out and grid give %lld", derived[i],
					  (long long)got, (long long)want[i]);
	}
	for (i = 0; i < sizeof(decode_types) / sizeof(decode_types[0]); i++)
		if (facts_type(in->compiled, decode_types[i].param,
			       decode_types[i].type ? decode_types[i].type : fp8 ? "*fp8e4nv" : "*bf16",
			       "attn_decode", decode_types[i].consequence, why))
			return -EINVAL;
	return 0;
}

int adapt_vllm_mla_decode(const struct adapter_input *in, struct reroute_plan *plan,
			  struct sm_err *why)
{
	struct attn_decode_args a = { 0 };
	const void *q, *k, *v, *table, *lens, *out, *ks;
	int32_t qbs, qh, kbs, kh, vbs, vh, ob, oh, os, table_stride;
	double lk, lv, fp8, cap;
	int64_t heads, splits, page = 1, page_stride = 0;

	if (adapter_value(in, "Lk", &lk, why) || adapter_value(in, "Lv", &lv, why) ||
	    adapter_value(in, "kv_fp8", &fp8, why) || adapter_value(in, "logit_cap", &cap, why))
		return -EINVAL;
	if (adapter_ptr(in, "Q", &q, why) || adapter_ptr(in, "K_Buffer", &k, why) ||
	    adapter_ptr(in, "V_Buffer", &v, why) || adapter_ptr(in, "Req_to_tokens", &table, why) ||
	    adapter_ptr(in, "B_Seqlen", &lens, why) || adapter_ptr(in, "Att_Out", &out, why) ||
	    adapter_ptr(in, "k_scale", &ks, why) ||
	    adapter_f32(in, "sm_scale", &a.sm_scale, why) ||
	    adapter_i32(in, "stride_req_to_tokens_b", &table_stride, why) ||
	    adapter_i32(in, "stride_qbs", &qbs, why) || adapter_i32(in, "stride_qh", &qh, why) ||
	    adapter_i32(in, "stride_buf_kbs", &kbs, why) || adapter_i32(in, "stride_buf_kh", &kh, why) ||
	    adapter_i32(in, "stride_buf_vbs", &vbs, why) || adapter_i32(in, "stride_buf_vh", &vh, why) ||
	    adapter_i32(in, "stride_mid_ob", &ob, why) || adapter_i32(in, "stride_mid_oh", &oh, why) ||
	    adapter_i32(in, "stride_mid_os", &os, why))
		return -EINVAL;
	if (lk != 576 || lv != 512)
		return sm_err_set(why, -EINVAL, "rule %s: head sizes Lk %g / Lv %g have no bundled MLA "
				  "decode kernel", in->rule->id, lk, lv);
	if (in->block[0] != 128 || in->block[1] != 1 || in->block[2] != 1)
		return sm_err_set(why, -EINVAL, "block (%u, %u, %u) is not vLLM's 4 warps",
				  in->block[0], in->block[1], in->block[2]);
	if (os != (int32_t)lv + 1 || oh <= 0 || oh % os != 0 || ob <= 0 || ob % oh != 0)
		return sm_err_set(why, -EINVAL, "Att_Out strides (%d, %d, %d) are not a contiguous "
				  "[batch, heads, splits, Lv + 1] buffer", ob, oh, os);
	splits = oh / os;
	heads = ob / oh;
	if (splits != in->grid[2] || in->grid[0] < 1 ||
	    in->grid[1] != (heads + (heads < 16 ? heads : 16) - 1) / (heads < 16 ? heads : 16))
		return sm_err_set(why, -EINVAL, "grid (%u, %u, %u) does not match %lld heads and "
				  "%lld splits read from Att_Out", in->grid[0], in->grid[1], in->grid[2],
				  (long long)heads, (long long)splits);
	if (qh < lk || qbs < (heads - 1) * qh + lk || qh % 8 || qbs % 8)
		return sm_err_set(why, -EINVAL, "q strides (%d, %d) do not fit %lld heads of %g "
				  "(16-byte rows needed)", qbs, qh, (long long)heads, lk);
	if (v != k || vbs != kbs || vh != kh)
		return sm_err_set(why, -EINVAL, "V_Buffer is not K_Buffer's first %g channels "
				  "(pointer or strides differ), which the MLA kernel reads V from", lv);
	if (kbs < lk || kbs % 16 != 0)
		return sm_err_set(why, -EINVAL, "stride_buf_kbs %d: rows of %g elements 16-byte "
				  "aligned are needed", kbs, lk);
	if (pages_of(in, kbs, &page, &page_stride, why))
		return -EINVAL;
	if (fp8 && !ks)
		return sm_err_set(why, -EINVAL, "an FP8 cache without a k_scale pointer");
	if (in->compiled && compiled_decode(in, heads, splits, fp8 != 0, why))
		return -EINVAL;

	a.q = q, a.k = k, a.v = v;
	a.out = (float *)(uintptr_t)out;
	a.block_table = table, a.seq_lens = lens;
	a.k_scale = a.v_scale = ks;
	a.q_stride_b = qbs, a.q_stride_h = qh;
	a.k_stride_page = page_stride;
	a.k_stride_tok = kbs, a.k_stride_head = kh;
	a.v_stride_page = a.k_stride_page, a.v_stride_tok = vbs, a.v_stride_head = vh;
	a.out_stride_b = ob, a.out_stride_h = oh, a.out_stride_s = os;
	a.block_table_stride = table_stride;
	a.logit_cap = (float)cap;
	a.scheme = ATTN_DECODE_VLLM;
	a.batch = (int32_t)in->grid[0];
	a.q_heads = (int32_t)heads;
	a.kv_group = (int32_t)heads;
	a.page_size = (int32_t)page;

	plan->kernel = fp8 ? ATTN_DECODE_MLA_FP8 : ATTN_DECODE_MLA_BF16;
	memcpy(plan->args, &a, sizeof(a));
	plan->args_size = sizeof(a);
	plan->grid[0] = (unsigned int)((heads + ATTN_DECODE_HEADS_PER_BLOCK - 1) /
				       ATTN_DECODE_HEADS_PER_BLOCK);
	plan->grid[1] = (unsigned int)splits;
	plan->grid[2] = in->grid[0];
	plan->block[0] = ATTN_DECODE_THREADS;
	plan->block[1] = plan->block[2] = 1;
	plan->dynamic_smem = fp8 ? ATTN_DECODE_MLA_FP8_SMEM : ATTN_DECODE_MLA_BF16_SMEM;
	return 0;
}

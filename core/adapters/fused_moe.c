/*
 * fused_moe.c - the Triton fused-MoE launches as moe_gemm_* (kernels/moe/moe_gemm.h):
 * SGLang's and vLLM's `fused_moe_kernel` and SGLang's `fused_moe_kernel_gptq_awq`.
 *
 * What a launch shows (invoke_fused_moe_kernel in both frameworks):
 *   1-D grid cdiv(EM, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N), block 32*num_warps,
 *   dynamic smem = the tile (block sizes and weight dtype compiled in).  The
 *   tile is a rule's exact one, or with the kernel's compiled facts the one
 *   its generic entry builds from them (core/rules/generic.h: BLOCK_SIZE_M,
 *   BLOCK_SIZE_N, num_warps, group_size as compiled, their shared memory
 *   checked); either way the grid and block are checked against its values;
 *   A [rows, K], B [E, N, K] (gptq int4: [E, N, K/2] bytes), C rows of N,
 *   strides in elements; stride_ak, stride_bk and stride_cn are 1 and gone.
 * What it does not show, and where it comes from:
 *   - the weight dtype: FP8 E4M3 with scale pointers, bf16 without (the
 *     over-limit bf16 and FP8 tiles have the same shared memory; int8 w8a8
 *     configurations, which would look like FP8, never reach these sizes);
 *   - the quantisation of the scales (per tensor, per channel, 128x128
 *     blocks): told apart by the scale strides, each layout checked exactly;
 *   - gptq N and K (constexpr there): from B's strides, checked against the grid;
 *   - top_k and MUL_ROUTED_WEIGHT (constexpr): with the kernel's compiled
 *     facts (the Python hook, facts.h), exactly as compiled, checked against
 *     the launch and against SM120SHIM_TOP_K when that is set too
 *     (moe_compiled_half).  Without them: the frameworks launch gate/up
 *     with (False, the model's top_k) and down with (True, 1); which half a
 *     launch is follows from K or N being the model's hidden size
 *     (SM120SHIM_HIDDEN_SIZE), and top_k is the model's num_experts_per_tok
 *     plus the shared experts SGLang fuses (SM120SHIM_TOP_K); `sm120 run
 *     --model DIR` sets both from config.json.  Without either the launch is
 *     refused, never guessed;
 *   - compute_type and the element types of every pointer: with facts,
 *     checked against what moe_gemm reads and writes (operand_types: bf16
 *     activations and output, E4M3 or packed int4 weights, fp32 scales and
 *     routed weights, int32 routing); without them bf16 is assumed (fp16
 *     models are not covered, see rules/AUDIT.md F3);
 *   - the scale quantisation: with facts, per_channel_quant, group_n and
 *     group_k decide it and the strides must be that layout's;
 *   - vLLM's naive block assignment (sorted_token_ids None, expert_ids the
 *     flat topk_ids, one routed row per block): with facts,
 *     naive_block_assignment says it (compiled_naive) and moe_gemm's row mode
 *     computes it; without them it cannot be told from the modular gate/up
 *     (topk_weights None: the two pointers have one size) and is refused;
 *   - c_sorted, FUSE_SUM_ALL_REDUCE, the LoRA flags, int8 formats: off (the
 *     rules' values, which select.c checks against the facts; without facts
 *     see rules/fused_moe.json for why a launch with them on cannot reach a
 *     rule, and rules/AUDIT.md for where one can).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/moe/moe_gemm.h"
#include "../rules/compiled.h"
#include "adapter.h"
#include "facts.h"
#include "fused_moe.h"

/* What one launch multiplies, in the frameworks' terms. */
struct moe_launch {
	const void *a, *b, *c, *a_scale, *b_scale, *topk_weights, *sorted_ids, *expert_ids, *ntpp;
	int32_t n, k, em, num_valid;
	int32_t am, be, bn, cm;
	int32_t asm_, ask, bse, bsk, bsn;  /* scale strides (1 when dropped) */
	int bits;                          /* weight bits of the tile: 16, 8 or 4 */
	int32_t group_size;                /* gptq */
};

static int64_t cdiv(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

/* setting_int - SM120SHIM_<name> as a positive int; -EINVAL naming it when unset or bad. */
static int setting_int(const struct adapter_input *in, const char *name, const char *what,
		       int32_t *out, struct sm_err *why)
{
	const char *s = in->setting ? in->setting(name) : NULL;
	char var[48], *end;
	long v;
	size_t i;

	snprintf(var, sizeof(var), "SM120SHIM_");
	for (i = 0; name[i] && i + 11 < sizeof(var); i++)
		var[10 + i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 32 : name[i]);
	var[10 + i] = '\0';
	if (!s)
		return sm_err_set(why, -EINVAL, "%s compiles %s into the kernel and the launch cannot "
				  "show it: set %s (or sm120 run --model DIR, which reads config.json)",
				  in->rule->kernel, what, var);
	v = strtol(s, &end, 10);
	if (*end || v < 1 || v > (1 << 20))
		return sm_err_set(why, -EINVAL, "%s=%s is not %s", var, s, what);
	*out = (int32_t)v;
	return 0;
}

/* moe_half - see fused_moe.h.  A model with top_k 1 may apply the routed
 * weight on either GEMM (apply_router_weight_on_input), so it is refused. */
int moe_half(int32_t n, int32_t k, int32_t hidden, int32_t model_top_k, int32_t num_valid,
	     int32_t *top_k, int32_t *mul, struct sm_err *why)
{
	if (model_top_k == 1)
		return sm_err_set(why, -EINVAL, "with top_k 1 the routed weight may be applied on "
				  "either GEMM (apply_router_weight_on_input): not rerouted");
	if (k == hidden && n != hidden) {
		if (num_valid % model_top_k != 0)
			return sm_err_set(why, -EINVAL, "gate/up launch with %d routed rows, not a "
					  "multiple of top_k %d (SM120SHIM_TOP_K)", num_valid, model_top_k);
		*top_k = model_top_k, *mul = 0;
		return 0;
	}
	if (n == hidden && k != hidden) {
		*top_k = 1, *mul = 1;
		return 0;
	}
	return sm_err_set(why, -EINVAL, "N %d and K %d: %s the hidden size %d "
			  "(SM120SHIM_HIDDEN_SIZE), so gate/up cannot be told from down", n, k,
			  n == hidden ? "both are" : "neither is", hidden);
}

/* moe_compiled_half - see fused_moe.h. */
int moe_compiled_half(int64_t c_top_k, int64_t c_mul, const char *setting, int32_t num_valid,
		      int has_weights, int32_t *top_k, int32_t *mul, struct sm_err *why)
{
	char *end;
	long v = 0;

	if (c_top_k < 1 || c_top_k > (1 << 20) || (c_mul != 0 && c_mul != 1))
		return sm_err_set(why, -EINVAL, "the kernel was compiled with top_k %lld and "
				  "MUL_ROUTED_WEIGHT %lld, which no framework launch has",
				  (long long)c_top_k, (long long)c_mul);
	if (setting) {
		v = strtol(setting, &end, 10);
		if (*end || v < 1 || v > (1 << 20))
			return sm_err_set(why, -EINVAL, "SM120SHIM_TOP_K=%s is not top_k", setting);
	}
	/* a down launch compiles top_k 1 whatever the model's is */
	if (setting && c_top_k != 1 && c_top_k != v)
		return sm_err_set(why, -EINVAL, "the kernel was compiled with top_k %lld but "
				  "SM120SHIM_TOP_K=%s: the two must agree (SGLang adds the shared "
				  "experts it fuses to num_experts_per_tok); unset SM120SHIM_TOP_K to "
				  "use the compiled value", (long long)c_top_k, setting);
	if (num_valid % c_top_k != 0)
		return sm_err_set(why, -EINVAL, "%d routed rows are not a multiple of the compiled "
				  "top_k %lld", num_valid, (long long)c_top_k);
	if (c_mul && !has_weights)
		return sm_err_set(why, -EINVAL, "the kernel was compiled with MUL_ROUTED_WEIGHT but "
				  "topk_weights_ptr is None");
	*top_k = (int32_t)c_top_k;
	*mul = (int32_t)c_mul;
	return 0;
}

/*
 * The element type moe_gemm reads or writes through each pointer of the
 * framework kernels, by weight format (moe_gemm.h), and what another type
 * would do.  NULL: the format has no such pointer.
 */
static const struct {
	const char *param;
	const char *type[3];    /* MOE_BF16, MOE_FP8, MOE_W4A16 */
	const char *consequence;
} operand_types[] = {
	{ "a_ptr", { "*bf16", "*fp8e4nv", "*bf16" },
	  "so another activation dtype (fp16, int8) would be decoded wrongly" },
	{ "b_ptr", { "*bf16", "*fp8e4nv", "*u8" },
	  "so another weight format would be decoded wrongly" },
	{ "c_ptr", { "*bf16", "*bf16", "*bf16" },
	  "so an output of another dtype (fp16, fp32) would be written as bf16 bits" },
	{ "a_scale_ptr", { NULL, "*fp32", NULL }, "so other scales would be misread" },
	{ "b_scale_ptr", { NULL, "*fp32", "*bf16" }, "so other scales would be misread" },
	{ "topk_weights_ptr", { "*fp32", "*fp32", "*fp32" },
	  "so routed weights of another dtype would be misread" },
	{ "sorted_token_ids_ptr", { "*i32", "*i32", "*i32" },
	  "so indices of another width would be misread" },
	{ "expert_ids_ptr", { "*i32", "*i32", "*i32" },
	  "so indices of another width would be misread" },
	{ "num_tokens_post_padded_ptr", { "*i32", "*i32", "*i32" },
	  "so a count of another width would be misread" },
};

/* compiled_types - compute_type and every pointer's element type are moe_gemm's (@quant). */
static int compiled_types(const struct adapter_input *in, int quant, struct sm_err *why)
{
	char ct[32];
	size_t i;

	if (compiled_get(in->compiled, "compute_type", '=', ct, sizeof(ct)) != 0)
		return sm_err_set(why, -EINVAL, "the compiled facts of %s do not state compute_type, "
				  "which moe_gemm must match (bf16)", in->rule->kernel);
	if (strcmp(ct, "bf16") != 0)
		return sm_err_set(why, -EINVAL, "the kernel was compiled with compute_type %s; "
				  "moe_gemm computes and writes bf16 (an %s model is not covered)",
				  ct, ct);
	for (i = 0; i < sizeof(operand_types) / sizeof(operand_types[0]); i++) {
		const char *want = operand_types[i].type[quant];

		if (want && adapter_has(in, operand_types[i].param) &&
		    facts_type(in->compiled, operand_types[i].param, want, "moe_gemm",
			       operand_types[i].consequence, why))
			return -EINVAL;
	}
	return 0;
}

/*
 * compiled_flag - constexpr @name of the facts as 0/1 into @out; -EINVAL with
 * @why when the facts lack it or it is not a flag.
 */
static int compiled_flag(const struct adapter_input *in, const char *name, int64_t *out,
			 struct sm_err *why)
{
	if (compiled_int(in->compiled, name, out) != 0 || *out < 0)
		return sm_err_set(why, -EINVAL, "the compiled facts of %s do not state %s as a "
				  "number, which rule %s needs", in->rule->kernel, name, in->rule->id);
	return 0;
}

/*
 * compiled_scale - the FP8 scale layout the kernel was compiled for: 128x128
 * blocks (group_n, group_k), per channel (per_channel_quant), else per tensor.
 */
static int compiled_scale(const struct adapter_input *in, int *scale, struct sm_err *why)
{
	int64_t channel, gn, gk;

	if (compiled_flag(in, "per_channel_quant", &channel, why) ||
	    compiled_flag(in, "group_n", &gn, why) || compiled_flag(in, "group_k", &gk, why))
		return -EINVAL;
	if (gn > 0 && gk > 0) {
		if (gn != 128 || gk != 128)
			return sm_err_set(why, -EINVAL, "the kernel was compiled with %lld x %lld "
					  "block scales; moe_gemm's are 128 x 128", (long long)gn,
					  (long long)gk);
		*scale = MOE_SCALE_BLOCK;
	} else {
		*scale = channel ? MOE_SCALE_CHANNEL : MOE_SCALE_TENSOR;
	}
	return 0;
}

/*
 * compiled_moe - with the kernel's facts: the dtypes (compiled_types), the
 * weight format @l was read as against use_fp8_w8a8 (fused_moe_kernel), N
 * and K against the ones derived (gptq), and top_k and MUL_ROUTED_WEIGHT
 * (moe_compiled_half) into @a.
 */
static int compiled_moe(const struct adapter_input *in, const struct moe_launch *l, int quant,
			struct moe_gemm_args *a, struct sm_err *why)
{
	int64_t fp8, top_k, mul, n, k;

	if (compiled_types(in, quant, why))
		return -EINVAL;
	if (quant != MOE_W4A16) {
		if (compiled_flag(in, "use_fp8_w8a8", &fp8, why))
			return -EINVAL;
		if (fp8 != (quant == MOE_FP8))
			return sm_err_set(why, -EINVAL, "the kernel was compiled with use_fp8_w8a8 "
					  "%lld, the launch %s scale pointers", (long long)fp8,
					  quant == MOE_FP8 ? "passes" : "has no");
	} else if (compiled_int(in->compiled, "N", &n) || compiled_int(in->compiled, "K", &k) ||
		   n != l->n || k != l->k) {
		return sm_err_set(why, -EINVAL, "the kernel's compiled N and K are not the N %d and "
				  "K %d its weight strides give", l->n, l->k);
	}
	if (compiled_flag(in, "top_k", &top_k, why) ||
	    compiled_flag(in, "MUL_ROUTED_WEIGHT", &mul, why))
		return -EINVAL;
	return moe_compiled_half(top_k, mul, in->setting ? in->setting("top_k") : NULL,
				 l->num_valid, l->topk_weights != NULL, &a->top_k,
				 &a->mul_routed_weight, why);
}

/* moe_aligned16 - see fused_moe.h. */
int moe_aligned16(const void *p, int64_t stride, int esz)
{
	return ((uintptr_t)p & 15) == 0 && (stride * esz) % 16 == 0;
}

/*
 * scales - the FP8 scale layout into @a: the one the kernel was compiled for
 * when its facts are known (per tensor then reads a_scale[0] and b_scale[e]
 * whatever the strides), else the one the strides describe; -EINVAL if the
 * strides are not exactly that layout.
 */
static int scales(const struct adapter_input *in, const struct moe_launch *l, struct moe_gemm_args *a,
		  struct sm_err *why)
{
	const int64_t kg = cdiv(l->k, 128), ng = cdiv(l->n, 128);
	int want = MOE_SCALE_NONE;

	if (!l->a_scale || !l->b_scale)
		return sm_err_set(why, -ENOENT, "rule %s: FP8 w8a8 with only one of a_scale and b_scale",
				  in->rule->id);
	if (in->compiled && compiled_scale(in, &want, why))
		return -EINVAL;
	if (want == MOE_SCALE_TENSOR ||
	    (!want && !l->asm_ && !l->ask && !l->bse && !l->bsk && !l->bsn)) {
		a->scale = MOE_SCALE_TENSOR;
		a->bs_stride_e = 1;
		return 0;
	}
	if ((!want || want == MOE_SCALE_CHANNEL) && l->asm_ == 1 && l->ask == 1 && l->bsk == 1 &&
	    l->bsn == 1 && l->bse == l->n) {
		a->scale = MOE_SCALE_CHANNEL;
		a->as_stride_m = 1, a->bs_stride_e = l->bse, a->bs_stride_n = 1;
		return 0;
	}
	if ((!want || want == MOE_SCALE_BLOCK) && l->ask == 1 && l->asm_ == kg && l->bsk == 1 &&
	    l->bsn == kg && l->bse == ng * kg) {
		a->scale = MOE_SCALE_BLOCK;
		a->group_n = a->group_k = 128;
		a->as_stride_m = l->asm_, a->as_stride_k = 1;
		a->bs_stride_e = l->bse, a->bs_stride_n = l->bsn, a->bs_stride_k = 1;
		return 0;
	}
	if (want)
		return sm_err_set(why, -EINVAL, "scale strides (%d, %d; %d, %d, %d) are not the %s "
				  "layout the kernel was compiled for, for K %d, N %d", l->asm_, l->ask,
				  l->bse, l->bsk, l->bsn,
				  want == MOE_SCALE_CHANNEL ? "per-channel" : "128x128 block", l->k, l->n);
	return sm_err_set(why, -EINVAL, "scale strides (%d, %d; %d, %d, %d) are neither per tensor, "
			  "per channel nor 128x128 blocks of K %d, N %d", l->asm_, l->ask, l->bse,
			  l->bsk, l->bsn, l->k, l->n);
}

/*
 * compiled_naive - vLLM's naive block assignment as the kernel was compiled
 * (naive_block_assignment; a kernel without that constexpr, SGLang's and
 * gptq's, always reads sorted_token_ids) into *@naive, checked against the
 * launch: vLLM passes sorted_token_ids None exactly when it is on, and EM =
 * num_valid x BLOCK_SIZE_M with it (fused_moe.py, invoke_fused_moe_triton_kernel,
 * vLLM 0.33.0).  0, or -EINVAL with @why naming the values.
 */
static int compiled_naive(const struct adapter_input *in, const struct moe_launch *l, double bm,
			  int *naive, struct sm_err *why)
{
	int64_t v = 0;
	int rc = compiled_int(in->compiled, "naive_block_assignment", &v);

	if (rc == -ENOENT)
		v = 0;
	else if (rc != 0 || (v != 0 && v != 1))
		return sm_err_set(why, -EINVAL, "the compiled facts of %s state naive_block_assignment, "
				  "but not as 0 or 1", in->rule->kernel);
	if ((v != 0) == (l->sorted_ids != NULL))
		return sm_err_set(why, -EINVAL, "the kernel was compiled with naive_block_assignment "
				  "%lld but sorted_token_ids_ptr is %s: vLLM passes None exactly when it "
				  "is on", (long long)v, l->sorted_ids ? "passed" : "None");
	if (v && (int64_t)l->em != (int64_t)l->num_valid * (int64_t)bm)
		return sm_err_set(why, -EINVAL, "naive block assignment with EM %d, not the %d routed "
				  "rows x BLOCK_SIZE_M %g vLLM launches it with", l->em, l->num_valid, bm);
	*naive = (int)v;
	return 0;
}

/* plan - check @l against the tile and fill @plan; shared by the three adapters. */
static int plan(const struct adapter_input *in, const struct moe_launch *l, struct reroute_plan *plan,
		struct sm_err *why)
{
	struct moe_gemm_args a = { 0 };
	double bm, bn, warps;
	int32_t hidden, model_top_k;
	int quant = l->bits == 16 ? MOE_BF16 : l->bits == 8 ? MOE_FP8 : MOE_W4A16;
	int esz = l->bits == 8 ? 1 : 2, tm, tn, rc, naive = 0;
	int64_t rows;
	struct moe_gemm_choice choice;
	const char *name;

	if (adapter_value(in, "BLOCK_SIZE_M", &bm, why) || adapter_value(in, "BLOCK_SIZE_N", &bn, why) ||
	    adapter_value(in, "num_warps", &warps, why))
		return -EINVAL;
	if (in->block[0] != (unsigned)warps * 32 || in->block[1] != 1 || in->block[2] != 1)
		return sm_err_set(why, -EINVAL, "block (%u, %u, %u) is not the tile's %g warps",
				  in->block[0], in->block[1], in->block[2], warps);
	if (l->n < 1 || l->k < 16 || l->em < 1 || l->num_valid < 1 ||
	    in->grid[0] != cdiv(l->em, (int64_t)bm) * cdiv(l->n, (int64_t)bn) || in->grid[1] != 1 ||
	    in->grid[2] != 1)
		return sm_err_set(why, -EINVAL, "grid (%u, %u, %u) is not cdiv(EM %d, %g) * cdiv(N %d, %g)",
				  in->grid[0], in->grid[1], in->grid[2], l->em, bm, l->n, bn);
	if (l->k % (quant == MOE_W4A16 ? 64 : 16) != 0)
		return sm_err_set(why, -EINVAL, "K %d is not a multiple of %d, which moe_gemm needs", l->k,
				  quant == MOE_W4A16 ? 64 : 16);
	if (l->am < l->k || l->cm < l->n || l->bn < (quant == MOE_W4A16 ? l->k / 2 : l->k) ||
	    l->be < (int64_t)l->n * l->bn)
		return sm_err_set(why, -ENOENT, "strides (am %d, be %d, bn %d, cm %d) overlap for N %d, K %d",
				  l->am, l->be, l->bn, l->cm, l->n, l->k);
	if (!moe_aligned16(l->a, l->am, esz) ||
	    !moe_aligned16(l->b, l->bn, quant == MOE_W4A16 ? 1 : esz) ||
	    !moe_aligned16(l->b, l->be, quant == MOE_W4A16 ? 1 : esz))
		return sm_err_set(why, -EINVAL, "A or B rows are not 16-byte aligned (am %d, bn %d, be %d)",
				  l->am, l->bn, l->be);
	if (!in->compiled && (adapter_dropped(in, "sorted_token_ids_ptr") ||
			      adapter_dropped(in, "topk_weights_ptr")) &&
	    adapter_may_drop(in, "sorted_token_ids_ptr") && adapter_may_drop(in, "topk_weights_ptr"))
		return sm_err_set(why, -EINVAL, "sorted_token_ids_ptr or topk_weights_ptr is None "
				  "(vLLM's naive block assignment, one token per block, or its modular "
				  "gate/up): the launch cannot show which; with the Python hook's "
				  "compiled facts, which tell them apart, both are rerouted");
	if (in->compiled && compiled_naive(in, l, bm, &naive, why))
		return -EINVAL;
	if (!l->sorted_ids && !naive)
		return sm_err_set(why, -EINVAL, "sorted_token_ids_ptr is None (vLLM's naive block "
				  "assignment, one token per block): rerouted only with the compiled "
				  "facts of the Python hook, which state it");
	if (!l->expert_ids || !l->ntpp || !l->c || (!l->topk_weights && !in->compiled))
		return sm_err_set(why, -EINVAL, "a routing pointer is NULL");
	if (in->compiled) {
		if (compiled_moe(in, l, quant, &a, why))
			return -EINVAL;
	} else if (setting_int(in, "hidden_size", "the model's hidden size", &hidden, why) ||
		   setting_int(in, "top_k", "top_k (the model's num_experts_per_tok)", &model_top_k,
			       why) ||
		   moe_half(l->n, l->k, hidden, model_top_k, l->num_valid, &a.top_k,
			    &a.mul_routed_weight, why)) {
		return -EINVAL;
	}
	if (quant == MOE_FP8 && (rc = scales(in, l, &a, why)) != 0)
		return rc;
	/* decode batches (a few rows per expert; row mode: one per block) on the decode kernels,
	 * the rest on a row tile (FP8's by its scale layout); the launches admitted the same
	 * either way */
	choice = moe_gemm_choose(quant, a.scale, (int32_t)bm, l->num_valid, l->em, l->n, l->k, naive, in->sms);
	tm = choice.tm, tn = choice.tn;
	if (!tm)
		return sm_err_set(why, -EINVAL, "BLOCK_SIZE_M %g is not a multiple of 16", bm);
	a.row_parts = tn ? 0 : choice.parts;   /* the row tile's, where it runs */
	rows = moe_gemm_rows_grid(tm, (int32_t)bm, l->em, a.row_parts, naive);
	if (rows > 65535)
		return sm_err_set(why, -EINVAL, "EM %d needs %lld row blocks of moe_gemm, over the "
				  "65535 a grid's y dimension holds", l->em, (long long)rows);

	a.a = l->a, a.b = l->b, a.c = (void *)(uintptr_t)l->c;
	a.a_scale = l->a_scale, a.b_scale = l->b_scale;
	a.topk_weights = l->topk_weights;
	a.sorted_ids = l->sorted_ids, a.expert_ids = l->expert_ids, a.num_tokens_post_padded = l->ntpp;
	a.a_stride_m = l->am, a.b_stride_e = l->be, a.b_stride_n = l->bn, a.c_stride_m = l->cm;
	a.N = l->n, a.K = l->k, a.EM = l->em, a.num_valid = l->num_valid;
	a.block_m = (int32_t)bm;
	a.stages = tn ? 0 : choice.stages;
	if (quant == MOE_W4A16) {
		a.group_size = l->group_size;
		a.bs_stride_e = l->bse, a.bs_stride_n = l->bsn, a.bs_stride_k = 1;
	}
	name = tn ? moe_gemm_decode_kernel(quant, tn, choice.rows, l->k) : moe_gemm_kernel_name(quant, tm);
	plan->kernel = name;
	memcpy(plan->args, &a, sizeof(a));
	plan->args_size = sizeof(a);
	plan->grid[0] = tn ? (unsigned)moe_gemm_decode_cols(quant, l->n, l->k, tn, l->em, (int32_t)bm,
							    l->num_valid)
			   : (unsigned)moe_gemm_rows_cols(quant, tm, l->n, l->k, l->num_valid);
	plan->grid[1] = tn ? (unsigned)moe_gemm_decode_blocks(l->em, (int32_t)bm, l->num_valid) : (unsigned)rows;
	plan->grid[2] = 1;
	plan->block[0] = tn ? MOE_GEMM_THREADS : (unsigned)moe_gemm_threads(quant, tm), plan->block[1] = plan->block[2] = 1;
	plan->dynamic_smem = tn ? 0 : moe_gemm_launch_smem(quant, tm, a.stages);
	return 0;
}

/* read_common - the pointers and ints both fused_moe_kernel signatures share. */
static int read_common(const struct adapter_input *in, struct moe_launch *l, struct sm_err *why)
{
	if (adapter_ptr(in, "a_ptr", &l->a, why) || adapter_ptr(in, "b_ptr", &l->b, why) ||
	    adapter_ptr(in, "c_ptr", &l->c, why) || adapter_ptr(in, "a_scale_ptr", &l->a_scale, why) ||
	    adapter_ptr(in, "b_scale_ptr", &l->b_scale, why) ||
	    adapter_ptr(in, "topk_weights_ptr", &l->topk_weights, why) ||
	    adapter_ptr(in, "sorted_token_ids_ptr", &l->sorted_ids, why) ||
	    adapter_ptr(in, "expert_ids_ptr", &l->expert_ids, why) ||
	    adapter_ptr(in, "num_tokens_post_padded_ptr", &l->ntpp, why) ||
	    adapter_i32(in, "N", &l->n, why) || adapter_i32(in, "K", &l->k, why) ||
	    adapter_i32(in, "EM", &l->em, why) || adapter_i32(in, "num_valid_tokens", &l->num_valid, why) ||
	    adapter_i32(in, "stride_am", &l->am, why) || adapter_i32(in, "stride_be", &l->be, why) ||
	    adapter_i32(in, "stride_bn", &l->bn, why) || adapter_i32(in, "stride_cm", &l->cm, why) ||
	    adapter_i32(in, "stride_asm", &l->asm_, why) || adapter_i32(in, "stride_ask", &l->ask, why) ||
	    adapter_i32(in, "stride_bse", &l->bse, why) || adapter_i32(in, "stride_bsk", &l->bsk, why) ||
	    adapter_i32(in, "stride_bsn", &l->bsn, why))
		return -EINVAL;
	/* the same tile serves bf16 (BK 64) and FP8 (BK 128): the scales tell them apart */
	l->bits = l->a_scale || l->b_scale ? 8 : 16;
	return 0;
}

/* no_bias - without a bias pointer its strides are 0; anything else is another reading. */
static int no_bias(const struct adapter_input *in, const char *e, const char *n, struct sm_err *why)
{
	int32_t se, sn;

	if (adapter_i32(in, e, &se, why) || adapter_i32(in, n, &sn, why))
		return -EINVAL;
	/* a reading of the other framework's list puts stride_cm or a scale stride here */
	if (se != 0 || sn != 0)
		return sm_err_set(why, -ENOENT, "%s/%s are %d/%d without a bias: not this signature", e, n,
				  se, sn);
	return 0;
}

int adapt_sglang_fused_moe(const struct adapter_input *in, struct reroute_plan *p, struct sm_err *why)
{
	struct moe_launch l = { 0 };
	int rc = read_common(in, &l, why);

	if (rc == 0)
		rc = no_bias(in, "stride_bias_e", "stride_bias_n", why);
	return rc ? rc : plan(in, &l, p, why);
}

int adapt_vllm_fused_moe(const struct adapter_input *in, struct reroute_plan *p, struct sm_err *why)
{
	struct moe_launch l = { 0 };
	int rc = read_common(in, &l, why);

	if (rc == 0)
		rc = no_bias(in, "stride_bbe", "stride_bbn", why);
	return rc ? rc : plan(in, &l, p, why);
}

int adapt_sglang_moe_gptq_awq(const struct adapter_input *in, struct reroute_plan *p,
			      struct sm_err *why)
{
	struct moe_launch l = { .bits = 4 };
	double bits, group;
	int32_t bze, bzk, bzn;

	if (adapter_value(in, "weight_bits", &bits, why) || adapter_value(in, "group_size", &group, why))
		return -EINVAL;
	if (bits != 4)
		return sm_err_set(why, -EINVAL, "rule %s: only int4 (w4a16) gptq/awq tiles are bundled",
				  in->rule->id);
	if (adapter_ptr(in, "a_ptr", &l.a, why) || adapter_ptr(in, "b_ptr", &l.b, why) ||
	    adapter_ptr(in, "c_ptr", &l.c, why) || adapter_ptr(in, "b_scale_ptr", &l.b_scale, why) ||
	    adapter_ptr(in, "topk_weights_ptr", &l.topk_weights, why) ||
	    adapter_ptr(in, "sorted_token_ids_ptr", &l.sorted_ids, why) ||
	    adapter_ptr(in, "expert_ids_ptr", &l.expert_ids, why) ||
	    adapter_ptr(in, "num_tokens_post_padded_ptr", &l.ntpp, why) ||
	    adapter_i32(in, "EM", &l.em, why) || adapter_i32(in, "num_valid_tokens", &l.num_valid, why) ||
	    adapter_i32(in, "stride_am", &l.am, why) || adapter_i32(in, "stride_be", &l.be, why) ||
	    adapter_i32(in, "stride_bn", &l.bn, why) || adapter_i32(in, "stride_cm", &l.cm, why) ||
	    adapter_i32(in, "stride_bse", &l.bse, why) || adapter_i32(in, "stride_bsk", &l.bsk, why) ||
	    adapter_i32(in, "stride_bsn", &l.bsn, why) || adapter_i32(in, "stride_bze", &bze, why) ||
	    adapter_i32(in, "stride_bzk", &bzk, why) || adapter_i32(in, "stride_bzn", &bzn, why))
		return -EINVAL;
	if (bze || bzk || bzn)
		return sm_err_set(why, -EINVAL, "zero-point strides (%d, %d, %d) without b_zp_ptr", bze,
				  bzk, bzn);
	/* N and K are compiled in: B is [E, N, K/2] bytes, its scales [E, N, K/group] */
	l.k = 2 * l.bn;
	l.n = l.bn > 0 ? l.be / l.bn : 0;
	l.group_size = (int32_t)group;
	if (l.n < 1 || (int64_t)l.n * l.bn != l.be || l.am != l.k)
		return sm_err_set(why, -EINVAL, "B strides (%d, %d) and A's %d are not a contiguous [E, N, "
				  "K/2] int4 weight of K = stride_am, from which N and K are read",
				  l.be, l.bn, l.am);
	if (l.group_size < 16 || l.k % l.group_size || l.bsn != l.k / l.group_size ||
	    l.bse != (int64_t)l.n * l.bsn || l.bsk != 1)
		return sm_err_set(why, -EINVAL, "scale strides (%d, %d, %d) are not [E, N, K/%d] for N %d, "
				  "K %d", l.bse, l.bsk, l.bsn, l.group_size, l.n, l.k);
	return plan(in, &l, p, why);
}

/*
 * fused_moe.c - the Triton fused-MoE launches as moe_gemm_* (kernels/moe/moe_gemm.h):
 * SGLang's and vLLM's `fused_moe_kernel` and SGLang's `fused_moe_kernel_gptq_awq`.
 *
 * What a launch shows (invoke_fused_moe_kernel in both frameworks):
 *   1-D grid cdiv(EM, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N), block 32*num_warps,
 *   dynamic smem = the tile (block sizes and weight dtype compiled in);
 *   A [rows, K], B [E, N, K] (gptq int4: [E, N, K/2] bytes), C rows of N,
 *   strides in elements; stride_ak, stride_bk and stride_cn are 1 and gone.
 * What it does not show, and where it comes from:
 *   - the weight dtype: FP8 E4M3 with scale pointers, bf16 without (the
 *     over-limit bf16 and FP8 tiles have the same shared memory; int8 w8a8
 *     configurations, which would look like FP8, never reach these sizes);
 *   - the quantisation of the scales (per tensor, per channel, 128x128
 *     blocks): told apart by the scale strides, each layout checked exactly;
 *   - gptq N and K (constexpr there): from B's strides, checked against the grid;
 *   - top_k and MUL_ROUTED_WEIGHT (constexpr): the frameworks launch gate/up
 *     with (False, the model's top_k) and down with (True, 1); which half a
 *     launch is follows from K or N being the model's hidden size
 *     (SM120SHIM_HIDDEN_SIZE), and top_k is the model's num_experts_per_tok
 *     (SM120SHIM_TOP_K); `sm120 run --model DIR` sets both from config.json.
 *     Without them the launch is refused, never guessed;
 *   - compute_type: bf16 (the rules' value; fp16 models are not covered);
 *   - c_sorted, FUSE_SUM_ALL_REDUCE, the LoRA flags: off (rules' values; see
 *     rules/fused_moe.json for why a launch with them on cannot reach a rule).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/moe/moe_gemm.h"
#include "adapter.h"
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

/* aligned16 - can rows at @stride elements of @esz bytes from @p be copied 16 bytes at a time? */
static int aligned16(const void *p, int64_t stride, int esz)
{
	return ((uintptr_t)p & 15) == 0 && (stride * esz) % 16 == 0;
}

/* scales - the FP8 scale layout the strides describe, into @a; -EINVAL if none fits exactly. */
static int scales(const struct adapter_input *in, const struct moe_launch *l, struct moe_gemm_args *a,
		  struct sm_err *why)
{
	const int64_t kg = cdiv(l->k, 128), ng = cdiv(l->n, 128);

	if (!l->a_scale || !l->b_scale)
		return sm_err_set(why, -ENOENT, "rule %s: FP8 w8a8 with only one of a_scale and b_scale",
				  in->rule->id);
	if (!l->asm_ && !l->ask && !l->bse && !l->bsk && !l->bsn) {
		a->scale = MOE_SCALE_TENSOR;
		a->bs_stride_e = 1;
		return 0;
	}
	if (l->asm_ == 1 && l->ask == 1 && l->bsk == 1 && l->bsn == 1 && l->bse == l->n) {
		a->scale = MOE_SCALE_CHANNEL;
		a->as_stride_m = 1, a->bs_stride_e = l->bse, a->bs_stride_n = 1;
		return 0;
	}
	if (l->ask == 1 && l->asm_ == kg && l->bsk == 1 && l->bsn == kg && l->bse == ng * kg) {
		a->scale = MOE_SCALE_BLOCK;
		a->group_n = a->group_k = 128;
		a->as_stride_m = l->asm_, a->as_stride_k = 1;
		a->bs_stride_e = l->bse, a->bs_stride_n = l->bsn, a->bs_stride_k = 1;
		return 0;
	}
	return sm_err_set(why, -EINVAL, "scale strides (%d, %d; %d, %d, %d) are neither per tensor, "
			  "per channel nor 128x128 blocks of K %d, N %d", l->asm_, l->ask, l->bse,
			  l->bsk, l->bsn, l->k, l->n);
}

/* plan - check @l against the tile and fill @plan; shared by the three adapters. */
static int plan(const struct adapter_input *in, const struct moe_launch *l, struct reroute_plan *plan,
		struct sm_err *why)
{
	struct moe_gemm_args a = { 0 };
	double bm, bn, warps;
	int32_t hidden, model_top_k;
	int quant = l->bits == 16 ? MOE_BF16 : l->bits == 8 ? MOE_FP8 : MOE_W4A16;
	int esz = l->bits == 8 ? 1 : 2, tm, rc;
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
	if (!aligned16(l->a, l->am, esz) || !aligned16(l->b, l->bn, quant == MOE_W4A16 ? 1 : esz) ||
	    !aligned16(l->b, l->be, quant == MOE_W4A16 ? 1 : esz))
		return sm_err_set(why, -EINVAL, "A or B rows are not 16-byte aligned (am %d, bn %d, be %d)",
				  l->am, l->bn, l->be);
	if (!l->sorted_ids)
		return sm_err_set(why, -EINVAL, "sorted_token_ids_ptr is None (vLLM's naive block "
				  "assignment, one token per block): moe_gemm needs the aligned routing");
	if (!l->expert_ids || !l->ntpp || !l->c || !l->topk_weights)
		return sm_err_set(why, -EINVAL, "a routing pointer is NULL");
	if (setting_int(in, "hidden_size", "the model's hidden size", &hidden, why) ||
	    setting_int(in, "top_k", "top_k (the model's num_experts_per_tok)", &model_top_k, why) ||
	    moe_half(l->n, l->k, hidden, model_top_k, l->num_valid, &a.top_k, &a.mul_routed_weight, why))
		return -EINVAL;
	tm = moe_gemm_rows_tile((int32_t)bm, l->num_valid, l->em);
	if (!tm)
		return sm_err_set(why, -EINVAL, "BLOCK_SIZE_M %g is not a multiple of 16", bm);

	a.a = l->a, a.b = l->b, a.c = (void *)(uintptr_t)l->c;
	a.a_scale = l->a_scale, a.b_scale = l->b_scale;
	a.topk_weights = l->topk_weights;
	a.sorted_ids = l->sorted_ids, a.expert_ids = l->expert_ids, a.num_tokens_post_padded = l->ntpp;
	a.a_stride_m = l->am, a.b_stride_e = l->be, a.b_stride_n = l->bn, a.c_stride_m = l->cm;
	a.N = l->n, a.K = l->k, a.EM = l->em, a.num_valid = l->num_valid;
	a.block_m = (int32_t)bm;
	if (quant == MOE_FP8 && (rc = scales(in, l, &a, why)) != 0)
		return rc;
	if (quant == MOE_W4A16) {
		a.group_size = l->group_size;
		a.bs_stride_e = l->bse, a.bs_stride_n = l->bsn, a.bs_stride_k = 1;
	}
	name = moe_gemm_kernel_name(quant, tm);
	plan->kernel = name;
	memcpy(plan->args, &a, sizeof(a));
	plan->args_size = sizeof(a);
	plan->grid[0] = (unsigned)cdiv(l->n, MOE_GEMM_TN(tm));
	plan->grid[1] = (unsigned)cdiv(l->em, tm);
	plan->grid[2] = 1;
	plan->block[0] = MOE_GEMM_THREADS, plan->block[1] = plan->block[2] = 1;
	plan->dynamic_smem = moe_gemm_smem(quant, tm);
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

/*
 * moe_epilogue.cuh - the output step that moe_gemm.cuh's tiles and
 * moe_decode.cuh's decode kernels share: one fp32 sum of a routed row and
 * output column turned into moe_gemm.h's result (the FP8 scales, the bias,
 * the routed weight; values and each_value: several columns at once, col_scales and
 * act_scale: the FP8 per-channel factors, block_row: where a column's FP8 block
 * scales lie) and a pair of them stored as
 * bf16.  Device code only.
 */
#ifndef SM120_KERNELS_MOE_EPILOGUE_CUH
#define SM120_KERNELS_MOE_EPILOGUE_CUH

#include <stdint.h>

#include "../primitives.cuh"
#include "moe_gemm.h"

namespace moe_epilogue {

using namespace sm120k;

/*
 * value - sum @x of expert @e at output column @nn (< N) after the per-tensor
 * scale @ts (FP8 per tensor: a_scale * b_scale[e]), the row's activation
 * scale @as times the column's weight scale (FP8 per channel), the bias and
 * the routed weight @w (with mul_routed_weight); 128 x 128 block scales are
 * applied inside the k loop, not here.
 */
template <int QUANT>
__device__ __forceinline__ float value(const moe_gemm_args &a, float x, int64_t e, int nn, float ts,
				       float as, float w)
{
	if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_TENSOR)
		x *= ts;
	if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_CHANNEL)
		x *= as * __ldg((const float *)a.b_scale + e * a.bs_stride_e + (int64_t)nn * a.bs_stride_n);
	if (a.bias)
		x += __bfloat162float(((const __nv_bfloat16 *)a.bias)[e * a.bias_stride_e +
								 (int64_t)nn * a.bias_stride_n]);
	if (a.mul_routed_weight)
		x *= w;
	return x;
}

/*
 * act_scale - the FP8 per-channel activation scale of routed row @id: its
 * token's, id / top_k, read without the integer division where top_k is 1
 * (the down GEMM, one routed row a token).
 */
__device__ __forceinline__ float act_scale(const moe_gemm_args &a, int id)
{
	return __ldg(a.a_scale + (int64_t)(a.top_k == 1 ? id : id / a.top_k) * a.as_stride_m);
}

/*
 * block_row - the row of FP8 128 x 128 block scales (bs_stride_n apart) that
 * holds W column @n's, its group along N, n / group_n; -1 at or past N.  Only
 * for an FP8 block-scale launch (group_n > 0).  Its callers find it once a
 * column tile, not at every k step: the division is about 25 instructions.
 */
__device__ __forceinline__ int block_row(const moe_gemm_args &a, int n)
{
	return n < a.N ? n / a.group_n : -1;
}

/*
 * col_scales - the FP8 per-channel weight scales of expert @e at output
 * columns @n .. @n + NV - 1 into @cw, for values(): a row tile's lane keeps
 * the same columns through its whole epilogue, so it reads them once, not
 * once for each of its rows (0 for a column at or past N, which values()
 * does not read).  Only for an FP8 per-channel launch.  With it, and the
 * row's activation scale found without a division where top_k is 1
 * (act_scale), the per-channel down GEMM ran at SM120's
 * blocks per SM (H200, gpu_bench_moe_decode MOE_DECODE_ROWTILES=1 against
 * the kernels before, same process, the same output bytes): Kimi K2 at 512
 * tokens 0.57 -> 0.63 of the floor on the 32-row tile and 0.34 -> 0.40 on
 * the 64-row one, at 4096 0.19 -> 0.20; GLM-4.7 at 512 0.31 -> 0.34 (per
 * tensor: 0.68 and 0.37; the scales alone gave 0.60 and 0.32).
 */
template <int NV>
__device__ __forceinline__ void col_scales(const moe_gemm_args &a, int64_t e, int n, float cw[NV])
{
	const float *bs = (const float *)a.b_scale + e * a.bs_stride_e + (int64_t)n * a.bs_stride_n;

#pragma unroll
	for (int j = 0; j < NV; j++)
		cw[j] = n + j < a.N ? __ldg(bs + j * a.bs_stride_n) : 0.0f;
}

/*
 * each_value - value() of the @NV sums @x of expert @e at output columns @n ..
 * @n + NV - 1 into @v, one column at a time, 0 for a column at or past N:
 * values()'s general path.
 */
template <int QUANT, int NV>
__device__ __forceinline__ void each_value(const moe_gemm_args &a, const float x[NV], int64_t e, int n, float ts,
					   float as, float w, float v[NV])
{
#pragma unroll
	for (int j = 0; j < NV; j++)
		v[j] = n + j < a.N ? value<QUANT>(a, x[j], e, n + j, ts, as, w) : 0.0f;
}

/*
 * values - value() of the @NV sums @x of expert @e at output columns @n ..
 * @n + NV - 1 into @v, 0 for a column at or past N; @cw: those columns'
 * weight scales from col_scales (FP8 per channel; not read otherwise).
 * Where the launch has no bias and every column lies below N, the sums are
 * only scaled, x * f * w, f the per-tensor scale or the row's activation
 * scale times the column's weight scale, 1.0 standing for an absent factor:
 * the same products as value()'s, bit for bit, without its per-column tests
 * and addresses (on sm_90 those were half the instructions of Kimi K2's FP8
 * down GEMM at 4096 tokens on the 32-row tile: ncu).
 */
template <int QUANT, int NV>
__device__ __forceinline__ void values(const moe_gemm_args &a, const float x[NV], int64_t e, int n, float ts,
				       float as, float w, const float cw[NV], float v[NV])
{
	if (!a.bias && n + NV <= a.N) {
		const float g = a.mul_routed_weight ? w : 1.0f;

		if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_CHANNEL) {
#pragma unroll
			for (int j = 0; j < NV; j++)
				v[j] = x[j] * (as * cw[j]) * g;
		} else {
			const float f = QUANT == MOE_FP8 && a.scale == MOE_SCALE_TENSOR ? ts : 1.0f;

#pragma unroll
			for (int j = 0; j < NV; j++)
				v[j] = x[j] * f * g;
		}
		return;
	}
	each_value<QUANT, NV>(a, x, e, n, ts, as, w, v);
}

/*
 * store_pair - @v[0], @v[1] as bf16 into row @id of C at columns @n and @n + 1,
 * those below N: one 4-byte store when both are and the address allows.
 */
__device__ __forceinline__ void store_pair(const moe_gemm_args &a, int id, int n, const float v[2])
{
	__nv_bfloat16 *dst = (__nv_bfloat16 *)a.c + (int64_t)id * a.c_stride_m + n;

	if (n + 1 < a.N && ((uintptr_t)dst & 3) == 0)
		*(uint32_t *)dst = pack_bf16(v[0], v[1]);
	else
		for (int j = 0; j < 2; j++)
			if (n + j < a.N)
				dst[j] = __float2bfloat16_rn(v[j]);
}

} /* namespace moe_epilogue */

#endif

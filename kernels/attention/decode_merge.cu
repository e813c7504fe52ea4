/*
 * decode_merge.cu - attn_decode_merge_bf16, see decode_merge.h for the math.
 *
 * One block per (sequence, head); the split weights are computed once per
 * block into shared memory, then each thread accumulates a strided slice of
 * the dv outputs in fp32 and rounds to bf16 once.  A sequence with no
 * non-empty split writes zeros and lse = -inf (the attention of nothing).
 * A launch with more than ATTN_MERGE_MAX_SPLITS splits writes NaN: a wrong
 * launch must be loud, never a plausible number.
 */
#include <cuda_bf16.h>
#include <math_constants.h>

#include "../common.cuh"
#include "decode_merge.h"

SM120_DYNAMIC_SMEM(attn_decode_merge_bf16, 0);
extern "C" __global__ void __launch_bounds__(ATTN_MERGE_THREADS)
attn_decode_merge_bf16(const struct attn_merge_args a)
{
	__shared__ float weight[ATTN_MERGE_MAX_SPLITS];
	__shared__ float inv_sum;
	__shared__ float lse_out;
	const int b = blockIdx.x, h = blockIdx.y;
	const int n = min(a.num_splits[b], a.max_splits);
	const bool bad = a.max_splits > ATTN_MERGE_MAX_SPLITS || n < 0;
	const size_t row = (size_t)b * a.heads + h;
	const float *lse = a.partial_lse + row * a.max_splits;
	const float *po = a.partial_o + row * a.max_splits * a.dv;
	__nv_bfloat16 *out = (__nv_bfloat16 *)a.out + row * a.dv;

	if (threadIdx.x == 0 && !bad) {
		float m = -CUDART_INF_F, sum = 0.f;

		for (int s = 0; s < n; s++)
			m = fmaxf(m, lse[s]);
		for (int s = 0; s < n; s++) {
			float w = (m == -CUDART_INF_F) ? 0.f : expf(lse[s] - m);

			weight[s] = w;
			sum += w;
		}
		inv_sum = sum > 0.f ? 1.f / sum : 0.f;
		lse_out = sum > 0.f ? m + logf(sum) : -CUDART_INF_F;
	}
	if (threadIdx.x == 0 && bad) {
		inv_sum = CUDART_NAN_F;
		lse_out = CUDART_NAN_F;
	}
	__syncthreads();
	for (int d = threadIdx.x; d < a.dv; d += blockDim.x) {
		float acc = 0.f;

		for (int s = 0; !bad && s < n; s++)
			acc += weight[s] * po[(size_t)s * a.dv + d];
		out[d] = __float2bfloat16_rn(acc * inv_sum);
	}
	if (a.out_lse && threadIdx.x == 0)
		a.out_lse[row] = lse_out;
}

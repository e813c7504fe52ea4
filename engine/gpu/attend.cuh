/*
 * attend.cuh - one warp's attention for one query row, shared by the
 * engine's own attention kernel (ops.cu) and the stand-in of SGLang's
 * extend attention (standin.cu), so that both compute the same numbers.
 */
#ifndef SM120_ENGINE_GPU_ATTEND_CUH
#define SM120_ENGINE_GPU_ATTEND_CUH

#include <cuda_bf16.h>

#define ATTEND_MAXC 18 /* head sizes up to 576 = 18 x 32 lanes */

/* One key of the row's sequence: its K and V rows and the scales that apply after the dots. */
struct attend_key {
	const __nv_bfloat16 *k, *v;
	float ks, vs;
};

__device__ __forceinline__ float attend_warp_sum(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/*
 * attend - o = softmax_s(scale * ks_s * (q . k_s)) . (vs_s * v_s) over keys
 * 0 .. nkeys-1 (key(s) gives each), q of @lq and o of @lv bf16 elements
 * (both <= 576); fp32 scores, online softmax, fp32 sums; o rounded to bf16
 * once.  Called by all 32 lanes of a warp with the same arguments.
 */
template <class Key>
__device__ void attend(__nv_bfloat16 *o, const __nv_bfloat16 *q, float scale, int lq, int lv, int nkeys, Key key)
{
	const int lane = threadIdx.x & 31;
	float qr[ATTEND_MAXC], acc[ATTEND_MAXC];
	float m = -INFINITY, l = 0.0f;

#pragma unroll
	for (int c = 0; c < ATTEND_MAXC; c++) {
		const int i = lane + 32 * c;
		qr[c] = i < lq ? __bfloat162float(q[i]) * scale : 0.0f;
		acc[c] = 0.0f;
	}
	for (int s = 0; s < nkeys; s++) {
		const attend_key kr = key(s);
		float d = 0.0f;

#pragma unroll
		for (int c = 0; c < ATTEND_MAXC; c++)
			if (lane + 32 * c < lq)
				d += qr[c] * __bfloat162float(kr.k[lane + 32 * c]);
		d = attend_warp_sum(d) * kr.ks;
		const float mn = fmaxf(m, d), corr = __expf(m - mn), p = __expf(d - mn);
		l = l * corr + p;
#pragma unroll
		for (int c = 0; c < ATTEND_MAXC; c++)
			if (lane + 32 * c < lv)
				acc[c] = acc[c] * corr + p * kr.vs * __bfloat162float(kr.v[lane + 32 * c]);
		m = mn;
	}
#pragma unroll
	for (int c = 0; c < ATTEND_MAXC; c++)
		if (lane + 32 * c < lv)
			o[lane + 32 * c] = __float2bfloat16_rn(acc[c] / l);
}

#endif

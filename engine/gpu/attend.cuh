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

/* lane + 32 c of the @n bf16 elements at @p as fp32 (zeros past @n). */
__device__ __forceinline__ void attend_lanes(float (&r)[ATTEND_MAXC], const __nv_bfloat16 *p, int n)
{
	const int lane = threadIdx.x & 31;

#pragma unroll
	for (int c = 0; c < ATTEND_MAXC; c++)
		r[c] = lane + 32 * c < n ? __bfloat162float(p[lane + 32 * c]) : 0.0f;
}

/* A warp's running softmax over the keys it has added: max score m, sum l of exp(score - m),
 * and this lane's elements lane + 32 c of sum exp(score - m) * vs * v. */
struct attend_state {
	float m, l, acc[ATTEND_MAXC];
};

/* st = no keys; qr = this lane's elements of q (of @lq) times @scale. */
__device__ __forceinline__ void attend_begin(attend_state &st, float (&qr)[ATTEND_MAXC], const __nv_bfloat16 *q,
					     float scale, int lq)
{
	const int lane = threadIdx.x & 31;

	st.m = -INFINITY, st.l = 0.0f;
#pragma unroll
	for (int c = 0; c < ATTEND_MAXC; c++) {
		const int i = lane + 32 * c;
		qr[c] = i < lq ? __bfloat162float(q[i]) * scale : 0.0f;
		st.acc[c] = 0.0f;
	}
}

/*
 * attend_keys - keys s0 .. s1 - 1 (key(s) gives each) added to @st in key
 * order: fp32 scores ks_s * (q . k_s), online softmax.  Key s + 1's K row
 * is loaded, and key s's V row, before key s's score is summed (no load
 * waits on the sums before it).  All 32 lanes of a warp, the same arguments.
 */
template <class Key>
__device__ void attend_keys(attend_state &st, const float (&qr)[ATTEND_MAXC], int lq, int lv, int s0, int s1,
			    Key key)
{
	const int lane = threadIdx.x & 31;
	float kn[ATTEND_MAXC];
	attend_key next = {};

	if (s0 < s1) {
		next = key(s0);
		attend_lanes(kn, next.k, lq);
	}
	for (int s = s0; s < s1; s++) {
		const attend_key kr = next;
		float kc[ATTEND_MAXC], vc[ATTEND_MAXC], d = 0.0f;

#pragma unroll
		for (int c = 0; c < ATTEND_MAXC; c++)
			kc[c] = kn[c];
		attend_lanes(vc, kr.v, lv);
		if (s + 1 < s1) {
			next = key(s + 1);
			attend_lanes(kn, next.k, lq);
		}
#pragma unroll
		for (int c = 0; c < ATTEND_MAXC; c++)
			if (lane + 32 * c < lq)
				d += qr[c] * kc[c];
		d = attend_warp_sum(d) * kr.ks;
		const float mn = fmaxf(st.m, d), corr = __expf(st.m - mn), p = __expf(d - mn);
		st.l = st.l * corr + p;
#pragma unroll
		for (int c = 0; c < ATTEND_MAXC; c++)
			if (lane + 32 * c < lv)
				st.acc[c] = st.acc[c] * corr + p * kr.vs * vc[c];
		st.m = mn;
	}
}

/* o (@lv bf16 elements) = st's weighted sum / its softmax sum, rounded once. */
__device__ __forceinline__ void attend_end(__nv_bfloat16 *o, const attend_state &st, int lv)
{
	const int lane = threadIdx.x & 31;

#pragma unroll
	for (int c = 0; c < ATTEND_MAXC; c++)
		if (lane + 32 * c < lv)
			o[lane + 32 * c] = __float2bfloat16_rn(st.acc[c] / st.l);
}

/*
 * attend - o = softmax_s(scale * ks_s * (q . k_s)) . (vs_s * v_s) over keys
 * 0 .. nkeys-1 (key(s) gives each), q of @lq and o of @lv bf16 elements
 * (both <= 576); fp32 sums in key order (attend_keys); o rounded to bf16
 * once.  Called by all 32 lanes of a warp with the same arguments.
 */
template <class Key>
__device__ void attend(__nv_bfloat16 *o, const __nv_bfloat16 *q, float scale, int lq, int lv, int nkeys, Key key)
{
	attend_state st;
	float qr[ATTEND_MAXC];

	attend_begin(st, qr, q, scale, lq);
	attend_keys(st, qr, lq, lv, 0, nkeys, key);
	attend_end(o, st, lv);
}

#endif

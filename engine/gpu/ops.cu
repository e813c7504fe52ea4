/*
 * ops.cu - the GPU backend's own kernels: everything of a forward pass that
 * is not a weight GEMM of a quantized format (those are kernels/moe's
 * moe_gemm_*) and not a framework-shaped launch (standin.cu).
 *
 * Activations: the residual stream is fp32 [tokens][hidden]; what feeds a
 * GEMM is bf16 (as the frameworks' bf16 models do); attention scores, norms
 * and softmax are fp32.  Every kernel is a plain extern "C" entry with its
 * launch shape in the comment above it; gpu.c launches them through the
 * Driver API.  One source for sm_90 and sm_120, no Hopper-only instruction.
 */
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "attend.cuh"
#include "ops.h"

typedef __nv_bfloat16 bf16;

namespace {

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* block_sum - the sum of @v over a block of blockDim.x (a multiple of 32, <= 1024) threads. */
__device__ float block_sum(float v)
{
	__shared__ float part[32];
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;

	v = attend_warp_sum(v);
	__syncthreads();
	if (lane == 0)
		part[warp] = v;
	__syncthreads();
	v = lane < nw ? part[lane] : 0.0f;
	return attend_warp_sum(v);
}

/* rotate - one RoPE pair at position @pos, frequency @inv, cos/sin times @mul. */
__device__ __forceinline__ void rotate(float &a, float &b, int pos, float inv, float mul)
{
	const float ang = (float)pos * inv;
	const float c = cosf(ang) * mul, s = sinf(ang) * mul;
	const float xa = a, xb = b;

	a = xa * c - xb * s;
	b = xb * c + xa * s;
}

} /* namespace */

/*
 * eng_embed - x[t][:] = float(table[tokens[t]][:]).
 * grid (n), block 256.
 */
extern "C" __global__ void eng_embed(float *x, const bf16 *table, const int32_t *tokens, int hidden)
{
	const bf16 *row = table + (int64_t)tokens[blockIdx.x] * hidden;
	float *out = x + (int64_t)blockIdx.x * hidden;

	for (int i = threadIdx.x; i < hidden; i += blockDim.x)
		out[i] = __bfloat162float(row[i]);
}

/*
 * eng_add_rmsnorm - per row t: if @add, x[t] += add[t] (bf16 rows of @ld_add);
 * then out[t] = bf16(w * x[t] / sqrt(mean(x[t]^2) + eps)).
 * grid (n), block 256.
 */
extern "C" __global__ void eng_add_rmsnorm(float *x, const bf16 *add, int64_t ld_add, bf16 *out,
					   const float *w, int hidden, float eps)
{
	float *xr = x + (int64_t)blockIdx.x * hidden;
	bf16 *o = out + (int64_t)blockIdx.x * hidden;
	float ss = 0.0f;

	for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
		float v = xr[i];

		if (add) {
			v += __bfloat162float(add[(int64_t)blockIdx.x * ld_add + i]);
			xr[i] = v;
		}
		ss += v * v;
	}
	const float r = rsqrtf(block_sum(ss) / hidden + eps);
	for (int i = threadIdx.x; i < hidden; i += blockDim.x)
		o[i] = __float2bfloat16_rn(xr[i] * r * w[i]);
}

/*
 * eng_rmsnorm_bf16 - out[t][0:dim) = bf16(w * in / rms(in)) for bf16 rows
 * @ld_in apart (out rows @ld_out apart; may alias in).
 * grid (n), block 256.
 */
extern "C" __global__ void eng_rmsnorm_bf16(bf16 *out, int64_t ld_out, const bf16 *in, int64_t ld_in,
					    const float *w, int dim, float eps)
{
	const bf16 *ir = in + (int64_t)blockIdx.x * ld_in;
	bf16 *o = out + (int64_t)blockIdx.x * ld_out;
	float ss = 0.0f;

	for (int i = threadIdx.x; i < dim; i += blockDim.x) {
		const float v = __bfloat162float(ir[i]);

		ss += v * v;
	}
	const float r = rsqrtf(block_sum(ss) / dim + eps);
	for (int i = threadIdx.x; i < dim; i += blockDim.x)
		o[i] = __float2bfloat16_rn(__bfloat162float(ir[i]) * r * w[i]);
}

/*
 * eng_mla_latent - the MLA cache rows of @n new tokens: for token t,
 * kv[t] = [c_kv (kvl) | k_pe (R)] from kv_a_proj; the cache row pos0 + t gets
 * bf16(rmsnorm(c_kv) * w) and k_pe rotated (interleaved pairs) at pos0 + t.
 * grid (n), block 256.
 */
extern "C" __global__ void eng_mla_latent(bf16 *cache, const bf16 *kv, const float *w, const float *inv_freq,
					  int kvl, int R, int pos0, float mul, float eps)
{
	const int t = blockIdx.x, W = kvl + R;
	const bf16 *in = kv + (int64_t)t * W;
	bf16 *out = cache + (int64_t)(pos0 + t) * W;
	float ss = 0.0f;

	for (int i = threadIdx.x; i < kvl; i += blockDim.x) {
		const float v = __bfloat162float(in[i]);

		ss += v * v;
	}
	const float r = rsqrtf(block_sum(ss) / kvl + eps);
	for (int i = threadIdx.x; i < kvl; i += blockDim.x)
		out[i] = __float2bfloat16_rn(__bfloat162float(in[i]) * r * w[i]);
	for (int i = threadIdx.x; i < R / 2; i += blockDim.x) {
		float a = __bfloat162float(in[kvl + 2 * i]), b = __bfloat162float(in[kvl + 2 * i + 1]);

		rotate(a, b, pos0 + t, inv_freq[i], mul);
		out[kvl + 2 * i] = __float2bfloat16_rn(a);
		out[kvl + 2 * i + 1] = __float2bfloat16_rn(b);
	}
}

/*
 * eng_mla_qpe - the rotary part of absorbed MLA queries: q[t][h] = [q_nope
 * (P) | q_pe (R)] with row stride @ld_q; qf[t][h][kvl .. kvl + R) gets q_pe
 * rotated (interleaved) at pos0 + t.  qf rows are heads * (kvl + R) apart.
 * grid (n, heads), block 32.
 */
extern "C" __global__ void eng_mla_qpe(bf16 *qf, const bf16 *q, int64_t ld_q, const float *inv_freq,
				       int P, int R, int kvl, int pos0, float mul)
{
	const int t = blockIdx.x, h = blockIdx.y, heads = gridDim.y;
	const bf16 *in = q + (int64_t)t * ld_q + (int64_t)h * (P + R) + P;
	bf16 *out = qf + ((int64_t)t * heads + h) * (kvl + R) + kvl;

	for (int i = threadIdx.x; i < R / 2; i += blockDim.x) {
		float a = __bfloat162float(in[2 * i]), b = __bfloat162float(in[2 * i + 1]);

		rotate(a, b, pos0 + t, inv_freq[i], mul);
		out[2 * i] = __float2bfloat16_rn(a);
		out[2 * i + 1] = __float2bfloat16_rn(b);
	}
}

/*
 * eng_gqa_prep - GLM attention inputs of @n tokens.  q [n][hq*hd], k and v
 * [n][hkv*hd] (bf16 GEMM outputs); per head: + bias (if any), RMSNorm with
 * qnorm / knorm (if any), then NeoX RoPE on the first @rot entries (pairs i,
 * i + rot/2) at pos0 + t.  Writes qo [n][hq][hd] and cache rows pos0 + t of
 * kc, vc [slots][hkv][hd].
 * grid (n, hq + hkv), block 128 (hd <= 512).
 */
extern "C" __global__ void eng_gqa_prep(bf16 *qo, bf16 *kc, bf16 *vc, const bf16 *q, const bf16 *k,
					const bf16 *v, const float *qb, const float *kb, const float *vb,
					const float *qn, const float *kn, const float *inv_freq, int hq, int hkv,
					int hd, int rot, int pos0, float mul, float eps)
{
	__shared__ float row[512];
	const int t = blockIdx.x, j = blockIdx.y, isq = j < hq, h = isq ? j : j - hq;
	const bf16 *in = isq ? q + ((int64_t)t * hq + h) * hd : k + ((int64_t)t * hkv + h) * hd;
	const float *bias = isq ? qb : kb, *norm = isq ? qn : kn;
	bf16 *out = isq ? qo + ((int64_t)t * hq + h) * hd : kc + ((int64_t)(pos0 + t) * hkv + h) * hd;
	float ss = 0.0f;

	for (int i = threadIdx.x; i < hd; i += blockDim.x) {
		float x = __bfloat162float(in[i]) + (bias ? bias[h * hd + i] : 0.0f);

		row[i] = x;
		ss += x * x;
	}
	const float r = norm ? rsqrtf(block_sum(ss) / hd + eps) : 1.0f;
	__syncthreads();
	for (int i = threadIdx.x; i < hd; i += blockDim.x)
		row[i] = norm ? row[i] * r * norm[i] : row[i];
	__syncthreads();
	for (int i = threadIdx.x; i < rot / 2; i += blockDim.x)
		rotate(row[i], row[i + rot / 2], pos0 + t, inv_freq[i], mul);
	__syncthreads();
	for (int i = threadIdx.x; i < hd; i += blockDim.x)
		out[i] = __float2bfloat16_rn(row[i]);
	if (!isq) {
		const bf16 *vi = v + ((int64_t)t * hkv + h) * hd;
		bf16 *vo = vc + ((int64_t)(pos0 + t) * hkv + h) * hd;

		for (int i = threadIdx.x; i < hd; i += blockDim.x)
			vo[i] = __float2bfloat16_rn(__bfloat162float(vi[i]) + (vb ? vb[h * hd + i] : 0.0f));
	}
}

/*
 * eng_attention - causal attention of @n queries at positions pos0 .. pos0+n-1
 * over cache slots 0 .. pos0 + t:
 *   o[t][h] = softmax_s(scale * q[t][h] . k[s][h / group]) . v[s][h / group]
 * q [n][hq][lq], k [slots][hkv][lq], v [slots][hkv][lv] (v may be a view of
 * k: MLA's latent), o [n][hq][lv], all bf16 with the given token strides and
 * head strides; attend.cuh's fp32 online softmax.  lq, lv <= 576.
 *   @split 0: one warp per (token, head), its keys in order (attend: the
 *     numbers of the stand-in's extend attention);
 *     grid (ceil(n * hq / 8)), block 256.
 *   @split 1 (decode: too few (token, head) pairs to fill the GPU with
 *     warps): a block per pair, warp w adding the w-th eighth of its keys,
 *     the eight partial softmaxes then merged in warp order by warp 0;
 *     grid (n * hq), block 256.
 * About 135 registers (attend's next K row rides in them): the bounds say
 * one block per SM, without which ptxas held the kernel to 128 and spilled.
 */
extern "C" __global__ void __launch_bounds__(256, 1) eng_attention(
	bf16 *o, int64_t o_tok, int64_t o_head, const bf16 *q, int64_t q_tok, int64_t q_head,
	const bf16 *k, int64_t k_tok, int64_t k_head, const bf16 *v, int64_t v_tok, int64_t v_head,
	int n, int hq, int group, int lq, int lv, int pos0, float scale, int split)
{
	__shared__ float part_acc[8][ATTEND_MAXC * 32], part_ml[8][2];
	const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	const int64_t wid = split ? (int64_t)blockIdx.x : (int64_t)blockIdx.x * 8 + w;
	if (wid >= (int64_t)n * hq)
		return;
	const int t = (int)(wid / hq), h = (int)(wid % hq), kh = h / group, nkeys = pos0 + t + 1;
	bf16 *out = o + t * o_tok + h * o_head;
	const bf16 *qrow = q + t * q_tok + h * q_head;
	auto key = [&](int s) {
		return attend_key{ k + s * k_tok + kh * k_head, v + s * v_tok + kh * v_head, 1.0f, 1.0f };
	};

	if (!split) {
		attend(out, qrow, scale, lq, lv, nkeys, key);
		return;
	}
	attend_state st;
	float qr[ATTEND_MAXC];
	const int per = (nkeys + 7) / 8, s0 = w * per, s1 = min(nkeys, s0 + per);

	attend_begin(st, qr, qrow, scale, lq);
	attend_keys(st, qr, lq, lv, s0, s1, key);
#pragma unroll
	for (int c = 0; c < ATTEND_MAXC; c++)
		part_acc[w][lane + 32 * c] = st.acc[c];
	if (lane == 0)
		part_ml[w][0] = st.m, part_ml[w][1] = st.l;
	__syncthreads();
	if (w != 0)
		return;
	float m = -INFINITY;
	for (int j = 0; j < 8; j++)
		m = fmaxf(m, part_ml[j][0]);
	st.l = 0.0f;
#pragma unroll
	for (int c = 0; c < ATTEND_MAXC; c++)
		st.acc[c] = 0.0f;
	for (int j = 0; j < 8; j++) {
		const float f = part_ml[j][1] > 0.0f ? __expf(part_ml[j][0] - m) : 0.0f;

		st.l += part_ml[j][1] * f;
#pragma unroll
		for (int c = 0; c < ATTEND_MAXC; c++)
			st.acc[c] += part_acc[j][lane + 32 * c] * f;
	}
	attend_end(out, st, lv);
}

/*
 * eng_bgemm - batched C[b][m][n] = sum_k A[b][m][k] * B[b][n][k], fp32
 * accumulation: A bf16, B bf16 (BF == 0) or fp32 (BF == 1), C fp32 (CF == 1)
 * or bf16 (CF == 0); every matrix row-major with its own batch and row
 * strides (elements).  For the absorbed MLA products (bf16) and the router
 * (fp32 weights and logits, as transformers computes it).
 * grid (ceil(N / 64), ceil(M / 64), batch), block 256.
 */
template <int BF, int CF>
__device__ void bgemm(const bf16 *A, int64_t a_b, int64_t a_m, const void *B, int64_t b_b, int64_t b_n,
		      void *C, int64_t c_b, int64_t c_m, int M, int N, int K)
{
	__shared__ float as[32][65], bs[32][65];
	const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
	const bf16 *a = A + blockIdx.z * a_b;
	float acc[4][4] = {};

	for (int k0 = 0; k0 < K; k0 += 32) {
		for (int i = threadIdx.x; i < 64 * 32; i += 256) {
			const int r = i / 32, kk = i % 32, gm = m0 + r, gn = n0 + r, gk = k0 + kk;
			as[kk][r] = gm < M && gk < K ? __bfloat162float(a[gm * a_m + gk]) : 0.0f;
			float bv = 0.0f;
			if (gn < N && gk < K) {
				const int64_t off = blockIdx.z * b_b + gn * b_n + gk;
				bv = BF ? ((const float *)B)[off] : __bfloat162float(((const bf16 *)B)[off]);
			}
			bs[kk][r] = bv;
		}
		__syncthreads();
#pragma unroll 8
		for (int kk = 0; kk < 32; kk++) {
			float av[4], bv[4];
#pragma unroll
			for (int i = 0; i < 4; i++) {
				av[i] = as[kk][ty + 16 * i];
				bv[i] = bs[kk][tx + 16 * i];
			}
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					acc[i][j] += av[i] * bv[j];
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 4; j++) {
			const int gm = m0 + ty + 16 * i, gn = n0 + tx + 16 * j;
			if (gm >= M || gn >= N)
				continue;
			const int64_t off = blockIdx.z * c_b + gm * c_m + gn;
			if (CF)
				((float *)C)[off] = acc[i][j];
			else
				((bf16 *)C)[off] = __float2bfloat16_rn(acc[i][j]);
		}
}

#define ENG_BGEMM(name, bf, cf)                                                                    \
	extern "C" __global__ void __launch_bounds__(256) name(                                     \
		const bf16 *A, int64_t a_b, int64_t a_m, const void *B, int64_t b_b, int64_t b_n,   \
		void *C, int64_t c_b, int64_t c_m, int M, int N, int K)                             \
	{                                                                                           \
		bgemm<bf, cf>(A, a_b, a_m, B, b_b, b_n, C, c_b, c_m, M, N, K);                      \
	}
ENG_BGEMM(eng_bgemm_bf16, 0, 0)
ENG_BGEMM(eng_bgemm_f32, 1, 1)

/*
 * eng_router_rows - the router's logits: C[m][n] = sum_k A[m][k] * B[n][k]
 * for m < M, A bf16 [M][K] (row stride @a_m), B fp32 [N][K] (row stride
 * @b_n), C fp32 [M][N] (row stride @c_m), fp32 sums.  A warp per column n
 * and ENG_ROUTER_ROWS rows (block y: rows 8 y ..): lane l adds k = 4 l +
 * 128 i + j (j < 4) in order, then the lanes' sums meet by shuffles; a fixed
 * order per row, the same bits for a token whichever rows share its launch
 * (prefill and decode), not eng_bgemm_f32's (the logits may differ from it
 * in the last bits).  One decode token's 384 experts are 384 warps
 * streaming the weights, where eng_bgemm_f32 had six blocks walk K 32 k at
 * a time; a 1024-token prefill's 160 experts took eng_bgemm_f32's 48 blocks
 * 894 us (ncu, H200, GLM-4.7 at real dimensions).  K, @a_m and @b_n
 * multiples of 4, A and B 16-byte aligned (gpu.c checks K).
 * grid (ceil(N / 8), ceil(M / ENG_ROUTER_ROWS)), block 256.
 */
extern "C" __global__ void __launch_bounds__(256) eng_router_rows(const bf16 *A, int64_t a_m, const float *B,
								    int64_t b_n, float *C, int64_t c_m, int M,
								    int N, int K)
{
	const int lane = threadIdx.x & 31, n = blockIdx.x * 8 + (threadIdx.x >> 5);
	const int64_t row0 = (int64_t)blockIdx.y * ENG_ROUTER_ROWS;
	if (n >= N)
		return;
	const float4 *b = (const float4 *)(B + (int64_t)n * b_n);
	A += row0 * a_m, C += row0 * c_m, M -= (int)row0;
	float acc[ENG_ROUTER_ROWS] = {};

#pragma unroll 4
	for (int k = 4 * lane; k < K; k += 128) {
		const float4 bv = __ldg(b + k / 4);
#pragma unroll
		for (int r = 0; r < ENG_ROUTER_ROWS; r++)
			if (r < M) {
				const uint2 a = *(const uint2 *)(A + (int64_t)r * a_m + k);
				const float2 a01 = __bfloat1622float2(*(const __nv_bfloat162 *)&a.x);
				const float2 a23 = __bfloat1622float2(*(const __nv_bfloat162 *)&a.y);
				acc[r] += a01.x * bv.x;
				acc[r] += a01.y * bv.y;
				acc[r] += a23.x * bv.z;
				acc[r] += a23.y * bv.w;
			}
	}
#pragma unroll
	for (int r = 0; r < ENG_ROUTER_ROWS; r++)
		if (r < M) {
			const float v = attend_warp_sum(acc[r]);
			if (lane == 0)
				C[(int64_t)r * c_m + n] = v;
		}
}

/*
 * eng_route - noaux_tc routing of one token per warp (cpu.c's route()):
 * sigmoid scores, + correction bias for selection only, the topk_group
 * groups with the largest sums of their two best biased scores (others out),
 * top_k by biased score (ties: the lower index); weights are the unbiased
 * scores, normalised if @norm, times @scaling.  The lanes score the experts
 * e = lane (mod 32) into shared memory; lane g (mod 32) sums group g's best
 * two in expert order; each of the top_k picks is every lane's best in
 * expert order, then the warp's best (score, then index).  E <= 1024,
 * groups <= 64, finite logits.
 * grid (ceil(n / 8)), block 256.
 */
extern "C" __global__ void __launch_bounds__(256) eng_route(int32_t *ids, float *wts, const float *logits,
							      const float *bias, int n, int E, int top_k, int n_group,
							      int topk_group, int norm, float scaling)
{
	__shared__ float sbs[8][1024], gss[8][64];
	const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, t = blockIdx.x * 8 + w;
	if (t >= n)
		return;
	const float *lg = logits + (int64_t)t * E;
	float *sb = sbs[w], *gs = gss[w];
	const int per = E / n_group;
	uint64_t keep = 0;

	for (int e = lane; e < E; e += 32)
		sb[e] = 1.0f / (1.0f + expf(-lg[e])) + bias[e];
	__syncwarp();
	for (int g = lane; g < n_group; g += 32) {
		float b1 = -INFINITY, b2 = -INFINITY;
		for (int e = g * per; e < (g + 1) * per; e++) {
			if (sb[e] > b1) {
				b2 = b1;
				b1 = sb[e];
			} else if (sb[e] > b2) {
				b2 = sb[e];
			}
		}
		gs[g] = per > 1 ? b1 + b2 : b1;
	}
	__syncwarp();
	for (int j = 0; j < topk_group; j++) {
		int best = -1;
		for (int g = 0; g < n_group; g++)
			if (!(keep >> g & 1) && (best < 0 || gs[g] > gs[best]))
				best = g;
		keep |= 1ull << best;
	}
	float sum = 0.0f, prev = INFINITY;
	int prev_e = -1;
	for (int k = 0; k < top_k; k++) {
		/* the k-th best: the largest biased score below (prev, prev_e) in (score desc, index asc) order */
		int best = -1;
		float bv = -INFINITY;
		for (int e = lane; e < E; e += 32) {
			if (!(keep >> (e / per) & 1))
				continue;
			const float v = sb[e];
			const bool after = v < prev || (v == prev && e > prev_e);
			if (after && (best < 0 || v > bv)) {
				best = e;
				bv = v;
			}
		}
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
			const int ob = __shfl_xor_sync(0xffffffffu, best, o);
			const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
			if (ob >= 0 && (best < 0 || ov > bv || (ov == bv && ob < best))) {
				best = ob;
				bv = ov;
			}
		}
		const float s = 1.0f / (1.0f + expf(-lg[best]));
		if (lane == 0) {
			ids[(int64_t)t * top_k + k] = best;
			wts[(int64_t)t * top_k + k] = s;
		}
		sum += s;
		prev = bv;
		prev_e = best;
	}
	if (lane != 0)
		return;
	for (int k = 0; k < top_k; k++) {
		float w = wts[(int64_t)t * top_k + k];
		if (norm)
			w = w / (sum + 1e-20f);
		wts[(int64_t)t * top_k + k] = w * scaling;
	}
}

/*
 * eng_moe_align - the framework's align step (moe_align_block_size) for
 * @numel routed rows (ids[numel]: the expert of routed row r = t * top_k + k):
 * each expert's rows listed in sorted[] and padded to a multiple of
 * @block_m with the id @numel; expert_ids[i] is the expert of sorted rows
 * i * block_m ...; *ntpp the padded total.  sorted[] is filled up to @cap
 * (the launch's EM).  The order within an expert is not fixed (atomics); a
 * routed row's result does not depend on it.  E <= 1024.
 * grid (1), block 1024.
 */
extern "C" __global__ void eng_moe_align(int32_t *sorted, int32_t *expert_ids, int32_t *ntpp, const int32_t *ids,
					 int numel, int E, int block_m, int cap)
{
	__shared__ int count[1024], start[1025];

	for (int e = threadIdx.x; e < E; e += blockDim.x)
		count[e] = 0;
	for (int i = threadIdx.x; i < cap; i += blockDim.x)
		sorted[i] = numel;
	__syncthreads();
	for (int r = threadIdx.x; r < numel; r += blockDim.x)
		atomicAdd(&count[ids[r]], 1);
	__syncthreads();
	if (threadIdx.x == 0) {
		start[0] = 0;
		for (int e = 0; e < E; e++)
			start[e + 1] = start[e] + (count[e] + block_m - 1) / block_m * block_m;
		*ntpp = start[E];
	}
	__syncthreads();
	for (int e = threadIdx.x; e < E; e += blockDim.x) {
		for (int b = start[e] / block_m; b < start[e + 1] / block_m; b++)
			expert_ids[b] = e;
		count[e] = 0;
	}
	for (int b = start[E] / block_m + threadIdx.x; b < (cap + block_m - 1) / block_m; b += blockDim.x)
		expert_ids[b] = -1;
	__syncthreads();
	for (int r = threadIdx.x; r < numel; r += blockDim.x) {
		const int e = ids[r];
		sorted[start[e] + atomicAdd(&count[e], 1)] = r;
	}
}

/*
 * eng_silu_mul - out[r][i] = bf16(silu(g[r][i]) * u[r][i]) for @rows rows of
 * width @I (g, u bf16 rows @ld_g, @ld_u apart; out @I apart).  SwiGLU's
 * product, as the frameworks' silu_and_mul.
 * grid (rows), block 256.
 */
extern "C" __global__ void eng_silu_mul(bf16 *out, const bf16 *g, int64_t ld_g, const bf16 *u, int64_t ld_u, int I)
{
	const int64_t r = blockIdx.x;

	for (int i = threadIdx.x; i < I; i += blockDim.x) {
		const float gv = __bfloat162float(g[r * ld_g + i]), uv = __bfloat162float(u[r * ld_u + i]);

		out[r * I + i] = __float2bfloat16_rn(gv / (1.0f + __expf(-gv)) * uv);
	}
}

/*
 * eng_quant_fp8 - dynamic FP8 E4M3 activations, as the frameworks'
 * per-token-group quantization: for each row and group of @group along K
 * (the last one partial when K is not a multiple), scale = max(amax, 1e-10)
 * / 448, q = e4m3(x / scale) (saturating, round to nearest even);
 * scale[row][g] at scale + row * ceil(K / group) + g.  @group = K gives
 * per-token scales.
 * grid (rows, ceil(K / group)), block 32.
 */
extern "C" __global__ void eng_quant_fp8(uint8_t *q, float *scale, const bf16 *x, int K, int group)
{
	const int64_t r = blockIdx.x;
	const int g = blockIdx.y, groups = (K + group - 1) / group;
	const int len = min(group, K - g * group);
	const bf16 *in = x + r * K + (int64_t)g * group;
	float amax = 0.0f;

	for (int i = threadIdx.x; i < len; i += 32)
		amax = fmaxf(amax, fabsf(__bfloat162float(in[i])));
	amax = warp_max(amax);
	const float s = fmaxf(amax, 1e-10f) / 448.0f;
	for (int i = threadIdx.x; i < len; i += 32) {
		__nv_fp8_e4m3 v(__bfloat162float(in[i]) / s);
		q[r * K + (int64_t)g * group + i] = *(uint8_t *)&v;
	}
	if (threadIdx.x == 0)
		scale[r * groups + g] = s;
}

/*
 * eng_moe_sum - x[t] += sum_k y[t * top_k + k] (+ shared[t] if given): the
 * routed experts' rows (already times their routing weights) and the shared
 * expert added to the fp32 residual.
 * grid (n), block 256.
 */
extern "C" __global__ void eng_moe_sum(float *x, const bf16 *y, const bf16 *shared, int top_k, int hidden)
{
	const int64_t t = blockIdx.x;

	for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
		float s = shared ? __bfloat162float(shared[t * hidden + i]) : 0.0f;

		for (int k = 0; k < top_k; k++)
			s += __bfloat162float(y[(t * top_k + k) * hidden + i]);
		x[t * hidden + i] += s;
	}
}

/*
 * eng_fill_iota - v[i] = i for i < n: the sorted-row list of a dense GEMM
 * run as a one-expert grouped GEMM (rows past the token count are padding),
 * and the padded counts its num_tokens_post_padded points into.
 * grid (ceil(n / 256)), block 256.
 */
extern "C" __global__ void eng_fill_iota(int32_t *v, int n)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		v[i] = i;
}

/*
 * lightning_kv.cu - the lightning_kv_* kernels, see lightning_kv.h for the
 * math and the launch.  Only cp.async and plain fp32 arithmetic (FFMA): the
 * same source builds for sm_90 and sm_120.  The kernels are the rows of
 * lightning_kv.h's LIGHTNING_KV_KERNELS, defined at the end of this file.
 *
 * A block owns one d x e kv tile in registers: thread (ty, tx) of a 16 x 16
 * grid holds rows ty*4..ty*4+3 and d/2+ty*4.. of it, columns tx*4.. and
 * e/2+tx*4.. (8 x 8 fp32 accumulators).  Split halves keep every shared
 * read a 16-byte load without bank conflicts: the 16 tx of a warp read 256
 * contiguous bytes of a value row, its two ty broadcast a key row.  For each
 * key the thread multiplies its 8 key channels by the key's decay (the
 * framework's k_trans * k_decay, rounded to fp32 the same way) and does 64
 * FFMAs against its 8 value channels.
 *
 * Streaming.  The block's window (lightning_kv.h) goes through shared
 * memory in 32-row chunks: k (32 x d), v (32 x e) and the 32 decays, by
 * cp.async into two stages, chunk c+1 in flight while chunk c is summed.
 * Rows before the window's shift are written as zeros by cp.async (source
 * size 0, nothing read), like the framework's masked loads.  d = e = 128:
 * 2 x (16384 + 16384 + 128) = 65792 B of dynamic shared memory, no static.
 * The Triton kernel keeps two 64-key stages of k and v (131584 B on sm_120,
 * 164352 B on sm_90).
 *
 * Impossible arguments (lightning_kv.h contracts) make the block write NaN
 * to its kv tile.
 */
#include <math_constants.h>
#include <stdint.h>

#include "../common.cuh"
#include "../primitives.cuh"
#include "lightning_kv.h"

namespace lightning_kv {

using namespace sm120k;

/* floats of one stage: k and v rows, then the chunk's decays */
template <int D, int E>
__host__ __device__ constexpr int stage_floats()
{
	return LIGHTNING_KV_CHUNK * (D + E) + LIGHTNING_KV_CHUNK;
}

/* The contracts of lightning_kv.h that the block can check. */
template <int D, int E>
__device__ __forceinline__ bool args_ok(const lightning_kv_args &a)
{
	const uintptr_t any = (uintptr_t)a.k | (uintptr_t)a.v | (uintptr_t)a.k_decay | (uintptr_t)a.kv;

	return a.d == D && a.e == E && a.heads >= 1 && a.n >= 1 && a.cblock >= LIGHTNING_KV_CHUNK &&
	       a.cblock % LIGHTNING_KV_CHUNK == 0 && a.block >= a.cblock && a.block % a.cblock == 0 &&
	       a.num_block == (a.n + a.block - 1) / a.block && (int64_t)blockIdx.y < a.num_block &&
	       any % 16 == 0 && a.k && a.v && a.k_decay;
}

/*
 * load_chunk - rows c*CHUNK .. of the window into stage @st (shared @s): k
 * and v from @k0 / @v0 (the window's row 0), zeros for rows below @shift,
 * and the decays from @dec0.  Called by every thread; one cp.async group.
 */
template <int D, int E>
__device__ __forceinline__ void load_chunk(float *s, int c, int shift, const float *k0,
					   const float *v0, const float *dec0, const float *valid)
{
	constexpr int CH = LIGHTNING_KV_CHUNK;
	float *ks = s, *vs = s + CH * D, *ds = vs + CH * E;
	const int tid = threadIdx.x;

	for (int i = tid; i < CH * D / 4; i += LIGHTNING_KV_THREADS) {
		const int r = i / (D / 4), col = (i % (D / 4)) * 4, row = c * CH + r;
		const bool in = row >= shift;

		cp_async16(smem_u32(ks + r * D + col), in ? k0 + (int64_t)row * D + col : valid,
			   in ? 16 : 0);
	}
	for (int i = tid; i < CH * E / 4; i += LIGHTNING_KV_THREADS) {
		const int r = i / (E / 4), col = (i % (E / 4)) * 4, row = c * CH + r;
		const bool in = row >= shift;

		cp_async16(smem_u32(vs + r * E + col), in ? v0 + (int64_t)row * E + col : valid,
			   in ? 16 : 0);
	}
	if (tid < CH / 4)
		cp_async16(smem_u32(ds + tid * 4), dec0 + c * CH + tid * 4, 16);
	cp_async_commit();
}

/* acc[i][j] += sum over the stage's rows of (k[r][row i] * decay[r]) * v[r][col j]. */
template <int D, int E>
__device__ __forceinline__ void sum_chunk(float acc[8][8], const float *s, int ty, int tx)
{
	constexpr int CH = LIGHTNING_KV_CHUNK;
	const float *ks = s, *vs = s + CH * D, *ds = vs + CH * E;

#pragma unroll 4
	for (int r = 0; r < CH; r++) {
		const float dr = ds[r];
		const float4 k_lo = *(const float4 *)(ks + r * D + ty * 4);
		const float4 k_hi = *(const float4 *)(ks + r * D + D / 2 + ty * 4);
		const float4 v_lo = *(const float4 *)(vs + r * E + tx * 4);
		const float4 v_hi = *(const float4 *)(vs + r * E + E / 2 + tx * 4);
		const float kd[8] = { k_lo.x * dr, k_lo.y * dr, k_lo.z * dr, k_lo.w * dr,
				      k_hi.x * dr, k_hi.y * dr, k_hi.z * dr, k_hi.w * dr };
		const float vv[8] = { v_lo.x, v_lo.y, v_lo.z, v_lo.w, v_hi.x, v_hi.y, v_hi.z, v_hi.w };

#pragma unroll
		for (int i = 0; i < 8; i++)
#pragma unroll
			for (int j = 0; j < 8; j++)
				acc[i][j] = fmaf(kd[i], vv[j], acc[i][j]);
	}
}

/*
 * kv_block - one kv tile (lightning_kv.h): called by all LIGHTNING_KV_THREADS
 * threads with @smem the block's dynamic shared memory (two stages).
 */
template <int D, int E>
__device__ __forceinline__ void kv_block(const lightning_kv_args &a, float *smem)
{
	static_assert((D / 8) * (E / 8) == LIGHTNING_KV_THREADS, "one 8 x 8 piece a thread");
	constexpr int CH = LIGHTNING_KV_CHUNK, ST = stage_floats<D, E>();
	const int tid = threadIdx.x, tx = tid % (E / 8), ty = tid / (E / 8);
	const int bh = blockIdx.x, blk = blockIdx.y;
	const bool ok = args_ok<D, E>(a);
	float *tile = a.kv + ((int64_t)bh * a.num_block + blk) * D * E;
	float acc[8][8];

	if (!ok) {
		for (int i = tid; a.kv && (uintptr_t)a.kv % 16 == 0 && i < D * E; i += blockDim.x)
			tile[i] = CUDART_NAN_F;
		return;
	}
#pragma unroll
	for (int i = 0; i < 8; i++)
#pragma unroll
		for (int j = 0; j < 8; j++)
			acc[i][j] = 0.f;

	const int64_t split = blk == a.num_block - 1 ? a.n - (int64_t)(a.num_block - 1) * a.block
						     : a.block;
	const int w = (int)((split + a.cblock - 1) / a.cblock) * a.cblock;
	const int shift = w - (int)split, chunks = w / CH;
	/* the window's row 0: `shift` rows before the block (never read below row `shift`) */
	const int64_t row0 = (int64_t)bh * a.n + (int64_t)blk * a.block - shift;
	const float *k0 = a.k + row0 * D, *v0 = a.v + row0 * E;
	const float *dec0 = a.k_decay + (int64_t)(bh % a.heads) * a.block + a.block - w;

	load_chunk<D, E>(smem, 0, shift, k0, v0, dec0, a.k);
	for (int c = 0; c < chunks; c++) {
		if (c + 1 < chunks)
			load_chunk<D, E>(smem + ((c + 1) & 1) * ST, c + 1, shift, k0, v0, dec0, a.k);
		else
			cp_async_commit();
		cp_async_wait<1>();
		__syncthreads();
		sum_chunk<D, E>(acc, smem + (c & 1) * ST, ty, tx);
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < 8; i++) {
		float *row = tile + (int64_t)((i < 4 ? 0 : D / 2) + ty * 4 + i % 4) * E;

		*(float4 *)(row + tx * 4) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
		*(float4 *)(row + E / 2 + tx * 4) = make_float4(acc[i][4], acc[i][5], acc[i][6],
								acc[i][7]);
	}
}

} /* namespace lightning_kv */

/* ------------------------------------------------------------ kernels */

/* One kernel per row of lightning_kv.h's LIGHTNING_KV_KERNELS. */
#define LIGHTNING_KV_DEFINE(name, d, e, smem_bytes)                                     \
	SM120_DYNAMIC_SMEM(name, smem_bytes);                                           \
	extern "C" __global__ void __launch_bounds__(LIGHTNING_KV_THREADS, 1)          \
		name(const struct lightning_kv_args a)                                  \
	{                                                                               \
		static_assert(2 * lightning_kv::stage_floats<d, e>() * 4 == (smem_bytes), \
			      "the stages fill the declared shared memory");            \
		extern __shared__ __align__(16) float lightning_kv_smem[];              \
		lightning_kv::kv_block<d, e>(a, lightning_kv_smem);                     \
	}

LIGHTNING_KV_KERNELS(LIGHTNING_KV_DEFINE)

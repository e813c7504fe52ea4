/*
 * extend.cu - extend attention kernels, see extend.h for the math and the
 * launch.  Only mma.sync m16n8k16 (bf16 in, fp32 accumulate), ldmatrix,
 * cp.async and plain loads (the wrappers of ../primitives.cuh): the same
 * source builds for sm_90 and sm_120.  The kernels are the rows of
 * extend.h's ATTN_EXTEND_KERNELS, defined at the end of this file.
 *
 * Packed rows.  A block owns ROWS consecutive (token, q head) rows of one kv
 * head, token-major, so the q heads that share a kv head (all 8-16 heads of
 * MLA absorbed, 12 in GLM-4.x) share every key and value the block loads:
 * the prefix is read once per ROWS rows, not once per BLOCK_M tokens and q
 * head as in the Triton grid.  The causal mask uses the row's token.
 *
 * Streaming.  Keys and values arrive in 8 KiB granules (64 keys x 64 key
 * channels, or 32 keys x 128 / 16 keys x 256 value channels) through two
 * shared-memory slots.  Each thread loads its 16 elements of granule g+1
 * into registers before computing on granule g and stores them after it, and
 * asks L1 to prefetch its part of granule g+2, so each granule costs one
 * __syncthreads and global latency hides behind two granules of math
 * without more shared memory (there is none left in the MLA kernel).  The
 * register stop is also where an FP8 prefix becomes bf16 (e4m3 -> f16 ->
 * f32 -> bf16, exact), so the math is one bf16 path for both cache dtypes.
 * k_scale multiplies the fp32 scores and v_scale the fp32 probabilities
 * before they are rounded to bf16 for P.V: no rounding step is added.
 * SGLang instead rounds q and p to FP8 for an FP8 cache (q.to(k.dtype),
 * p.to(v.dtype)); we keep them bf16, so FP8 results are closer to exact.
 * Prefix slots of a tile are read from kv_indices into a shared table one
 * tile ahead.  Every shared tile is XOR-swizzled in 16-byte units (chunk ^
 * row % 8): ldmatrix and the 16-byte stores are free of bank conflicts, and
 * with 1024-aligned tiles the per-step ldmatrix addresses are a lane base
 * XOR a constant, which keeps them out of registers.
 *
 * lq 128 / 192, lv 128 ("rows" kernels, 8 warps, 128 rows x 64 keys per
 * tile): FlashAttention-2 style.  Each warp owns 16 rows: S = Q K^T for
 * 16 x 64 is accumulated over 2 / 3 key granules (q fragments by ldmatrix
 * from the resident q tile: holding them in registers made ptxas spill on
 * sm_120), the online softmax is warp-local and P goes from the S
 * accumulators straight into the P.V A fragments; O (16 x 128 fp32) is 64
 * registers.  Shared: q tile (later the o tile), two slots, the slot table:
 * 50176 B (lq 128) / 66560 B (lq 192).  L2 traffic: 512 / 640 B per key per
 * 128 rows.
 *
 * lq 576, lv 512 ("mla" kernel, 8 warps, 64 rows x 64 keys per tile): O is
 * 64 x 512 fp32 = 128 KiB, so no warp can own whole rows.  The Hopper config
 * (BLOCK 32x64, q and a whole 64-key K tile in shared memory) needs 106496
 * B; here the q tile (64 x 576 bf16, 72 KiB) stays in shared memory and K/V
 * stream through the 8 KiB slots:
 *   S phase: warp (r, h) computes S rows 16r..16r+15, keys 32h..32h+31 over
 *     nine 64-channel key granules (ldmatrix of q and K per granule).
 *   softmax: per-row maxima of the two key halves meet in shared memory
 *     (published by the last key granule's barrier); both warps of a row
 *     derive the same running max, write P (bf16, 64 x 64) and the row's
 *     rescale factor to shared memory: one extra barrier per tile.
 *   P.V phase: warp w owns, of each 256-column half of O, the 8-column groups
 *     w, w+8, w+16, w+24 for all 64 rows (4 x 32 accumulators x 2 halves =
 *     128 registers).  The interleave makes every value granule (16 keys x
 *     256 channels) feed all eight warps, and P's A fragments are loaded once
 *     per 16 keys for both halves.
 * Shared: q 73728 + slots 16384 + P 8192 + table 1024 + row stats 768 =
 * 100096 B <= 101376 - 1024.  Per tile (4.46 M MACs) a block reads 136 KiB
 * (bf16 cache) from L2 for 64 rows = 8 tokens of Kimi K2's 8 local heads;
 * SGLang's SM120 config (BLOCK 32x32, one head) reads 68 KiB per 1.1 M
 * MACs, twice the traffic per MAC, and its Hopper config (32x64) the same.
 *
 * lq 256, lv 256 (SGLang's context_attention_fwd at head size 256): the
 * "mla" kernel with a 64 x 256 q tile, 4 key granules and one 256-channel
 * value half per tile: 32768 + 16384 + 8192 + 1024 + 768 = 59136 B.
 *
 * Impossible arguments (extend.h contracts) make a block write NaN to its
 * rows; a grid too small for a sequence makes the last tile's block write NaN
 * to the rows nobody covers.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>
#include <stdint.h>

#include "../common.cuh"
#include "../primitives.cuh"
#include "extend.h"

namespace attn_extend {

using namespace sm120k;

constexpr int THREADS = ATTN_EXTEND_THREADS;
constexpr int N = 64;        /* keys per tile */
constexpr int SLOT = 8192;   /* bytes of one granule in shared memory */
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

/* ------------------------------------------------------------ sequence setup */

struct seq_info {
	int b, kvh, G;
	int64_t q0, kv0;   /* first extend row; first kv_indices entry */
	int E, P;          /* extend tokens; prefix keys used (0 with SKIP_PREFIX) */
	int rows;          /* E * G packed rows */
	int row0, nrows;   /* this block's first packed row and how many are valid */
	int t_lo, t_hi;    /* tokens of its first and last valid row */
	int n_ext;         /* extend keys any of its rows sees */
	int n_pt, n_tiles; /* prefix tiles; prefix + extend tiles */
	bool causal;
};

struct tile_info {
	bool prefix;
	bool mask;   /* some key of the tile is invisible to some row */
	int k0;      /* first key of the tile within its part */
	int n_valid; /* keys of the tile that exist */
	int par;     /* slot-table half */
};

__device__ __forceinline__ tile_info describe(const seq_info &s, int t)
{
	tile_info ti;

	ti.prefix = t < s.n_pt;
	ti.par = t & 1;
	if (ti.prefix) {
		ti.k0 = t * N;
		ti.n_valid = min(N, s.P - ti.k0);
		ti.mask = ti.n_valid < N;
	} else {
		ti.k0 = (t - s.n_pt) * N;
		ti.n_valid = min(N, s.n_ext - ti.k0);
		ti.mask = ti.n_valid < N || (s.causal && ti.k0 + N - 1 > s.t_lo);
	}
	return ti;
}

template <int DQK, int DV, bool FP8>
__device__ __forceinline__ bool args_ok(const attn_extend_args &a)
{
	const uint64_t ptrs = (uint64_t)a.q | (uint64_t)a.k_ext | (uint64_t)a.v_ext | (uint64_t)a.o |
			      (uint64_t)a.k_buf | (uint64_t)a.v_buf;
	const int64_t s8 = a.q_tok | a.q_head | a.kx_tok | a.kx_head | a.vx_tok | a.vx_head | a.o_tok | a.o_head;
	const int64_t sb = a.kb_slot | a.kb_head | a.vb_slot | a.vb_head;

	return (ptrs & 15) == 0 && (s8 & 7) == 0 && (sb & (FP8 ? 15 : 7)) == 0 && a.lq == DQK && a.lv == DV &&
	       a.kv_group_num >= 1 && (a.flags & ~ATTN_EXTEND_FLAGS) == 0 && isfinite(a.sm_scale) && isfinite(a.k_scale) &&
	       isfinite(a.v_scale) && isfinite(a.logit_cap) && a.logit_cap >= 0.f &&
	       ((uint64_t)a.lse & 3) == 0;
}

/* NaN into o (and lse) for packed rows [r_begin, r_end) of the sequence. */
template <int DV>
__device__ void fill_nan(const attn_extend_args &a, const seq_info &s, int64_t r_begin, int64_t r_end)
{
	uint16_t *o = (uint16_t *)a.o;

	if ((uint64_t)a.o & 1)
		return;
	for (int64_t i = r_begin * DV + threadIdx.x; i < r_end * DV; i += THREADS) {
		const int64_t r = i / DV, tok = r / s.G;
		const int64_t head = (int64_t)s.kvh * s.G + r % s.G;

		o[(s.q0 + tok) * a.o_tok + head * a.o_head + i % DV] = 0x7fc0;
	}
	if (a.lse && ((uint64_t)a.lse & 3) == 0)
		for (int64_t r = r_begin + threadIdx.x; r < r_end; r += THREADS)
			a.lse[(s.q0 + r / s.G) * a.lse_tok + ((int64_t)s.kvh * s.G + r % s.G) * a.lse_head] =
				CUDART_NAN_F;
}

/*
 * seq_setup - this block's sequence, rows and tiles.  Returns false when the
 * block has nothing to compute (after writing NaN where the contracts say so).
 */
/* qo_at - qo_indptr[i] at the width the flags give (ATTN_EXTEND_QO_I64: int64). */
__device__ __forceinline__ int64_t qo_at(const attn_extend_args &a, int i)
{
	if (a.flags & ATTN_EXTEND_QO_I64)
		return static_cast<const int64_t *>(a.qo_indptr)[i];
	return static_cast<const int32_t *>(a.qo_indptr)[i];
}

template <int M, int DQK, int DV, bool FP8>
__device__ __forceinline__ bool seq_setup(const attn_extend_args &a, const unsigned char *smem, seq_info &s)
{
	s.b = blockIdx.z;
	s.kvh = blockIdx.y;
	if (s.b >= a.batch)
		return false;

	const bool start_len = (a.flags & ATTN_EXTEND_START_LEN) != 0;
	const bool prefix = (a.flags & ATTN_EXTEND_SKIP_PREFIX) == 0;

	if (start_len && !a.qo_len)
		return false; /* no rows can be located: nothing to write */

	const int64_t q0 = qo_at(a, s.b);
	const int64_t q1 = start_len ? q0 + a.qo_len[s.b] : qo_at(a, s.b + 1);
	const int k0 = prefix ? a.kv_indptr[s.b] : 0, k1 = prefix ? a.kv_indptr[s.b + 1] : 0;

	if (q0 < 0 || q1 < q0 || q1 > 0x7fffffff)
		return false; /* no rows can be located: nothing to write */
	s.G = a.kv_group_num >= 1 ? a.kv_group_num : 1;
	s.q0 = (int)q0;
	s.kv0 = k0;
	s.E = (int)(q1 - q0);

	const int64_t rows = (int64_t)s.E * s.G;
	const int x = (int)(gridDim.x - 1 - blockIdx.x); /* the last (heaviest causal) tiles start first */
	const int64_t row0 = (int64_t)x * M;
	/* the XOR address arithmetic assumes 1024-aligned tiles (extern __align__(1024)) */
	const bool bad = !args_ok<DQK, DV, FP8>(a) || k0 < 0 || k1 < k0 || rows > 0x7fffffff ||
			 (smem_u32(smem) & 1023) != 0;

	if (x == (int)gridDim.x - 1 && rows > (int64_t)gridDim.x * M)
		fill_nan<DV>(a, s, (int64_t)gridDim.x * M, rows);
	if (row0 >= rows)
		return false;
	if (bad) {
		fill_nan<DV>(a, s, row0, min(row0 + M, rows));
		return false;
	}
	s.rows = (int)rows;
	s.row0 = (int)row0;
	s.nrows = min(M, s.rows - s.row0);
	s.t_lo = (int)((unsigned)s.row0 / (unsigned)s.G);
	s.t_hi = (int)((unsigned)(s.row0 + s.nrows - 1) / (unsigned)s.G);
	s.causal = (a.flags & ATTN_EXTEND_CAUSAL) != 0;
	s.P = prefix ? k1 - k0 : 0;
	s.n_ext = (a.flags & ATTN_EXTEND_SKIP_EXTEND) ? 0 : s.causal ? s.t_hi + 1 : s.E;
	s.n_pt = (s.P + N - 1) / N;
	s.n_tiles = s.n_pt + (s.n_ext + N - 1) / N;
	return true;
}

/* Packed row -> element offset of its q / o row (token-major, head-minor). */
__device__ __forceinline__ int64_t row_offset(const seq_info &s, int r, int64_t tok_stride, int64_t head_stride)
{
	const unsigned tok = (unsigned)r / (unsigned)s.G;
	const int head = s.kvh * s.G + (int)((unsigned)r - tok * (unsigned)s.G);

	return (s.q0 + tok) * tok_stride + head * head_stride;
}

/* Q tile -> shared (swizzled, rows of DQK), zeros for rows past the sequence. */
template <int M, int DQK>
__device__ __forceinline__ void load_q(const attn_extend_args &a, const seq_info &s, unsigned char *sq)
{
	constexpr int QCH = DQK / 8;
	const uint32_t base = smem_u32(sq);

	for (int i = threadIdx.x; i < M * QCH; i += THREADS) {
		const int r = i / QCH, c = i - r * QCH;
		const bool ok = r < s.nrows;
		const void *src = a.q;

		if (ok)
			src = (const __nv_bfloat16 *)a.q + row_offset(s, s.row0 + r, a.q_tok, a.q_head) + c * 8;
		cp_async16(base + swz(r, c, QCH), src, ok ? 16 : 0);
	}
}

/* o tile (bf16, swizzled rows of DV in shared memory) -> global, valid rows. */
template <int M, int DV>
__device__ __forceinline__ void store_o(const attn_extend_args &a, const seq_info &s, const unsigned char *so)
{
	constexpr int OCH = DV / 8;

	for (int i = threadIdx.x; i < M * OCH; i += THREADS) {
		const int r = i / OCH, c = i - r * OCH;

		if (r < s.nrows)
			*(uint4 *)((__nv_bfloat16 *)a.o + row_offset(s, s.row0 + r, a.o_tok, a.o_head) + c * 8) =
				*(const uint4 *)(so + swz(r, c, OCH));
	}
}

/* ------------------------------------------------------------ granule loads */

/*
 * One thread's 16 elements of a granule: two runs of 8 channels (col_a,
 * col_b) of one key, as 2 x 16 bytes of bf16 or 2 x 8 bytes of FP8.  Value
 * granules give a thread channels 8j and 8j + half the row, so that the 8
 * threads of a 16-byte store phase write 8 distinct bank groups.
 */
struct stage {
	uint4 v0, v1;
	bool fp8;
};

/*
 * granule_row - element 0 of key `key` (of tile ti) in K (is_v false) or V;
 * NULL for keys past the tile's end (they load as zeros).
 */
template <bool FP8>
__device__ __forceinline__ const void *granule_row(const attn_extend_args &a, const seq_info &s,
						   const tile_info &ti, const int64_t *table, int key, bool is_v)
{
	if (key >= ti.n_valid)
		return nullptr;
	if (ti.prefix) {
		const int64_t slot = table[ti.par * N + key];
		const int64_t off = is_v ? slot * a.vb_slot + s.kvh * a.vb_head : slot * a.kb_slot + s.kvh * a.kb_head;

		if (FP8)
			return (const uint8_t *)(is_v ? a.v_buf : a.k_buf) + off;
		return (const __nv_bfloat16 *)(is_v ? a.v_buf : a.k_buf) + off;
	}

	const int64_t row = s.q0 + ti.k0 + key;

	return is_v ? (const __nv_bfloat16 *)a.v_ext + row * a.vx_tok + s.kvh * a.vx_head
		    : (const __nv_bfloat16 *)a.k_ext + row * a.kx_tok + s.kvh * a.kx_head;
}

/*
 * stage_load - issue the loads of one thread's two runs; with PREFETCH, only
 * ask L1 for them (two granules ahead).
 */
template <bool FP8, bool PREFETCH = false>
__device__ __forceinline__ void stage_load(stage &st, const attn_extend_args &a, const seq_info &s,
					   const tile_info &ti, const int64_t *table, int key, int col_a, int col_b,
					   bool is_v)
{
	const void *p = granule_row<FP8>(a, s, ti, table, key, is_v);
	const bool fp8 = FP8 && ti.prefix;
	const int esz = fp8 ? 1 : 2;

	if (PREFETCH) {
		if (p) {
			prefetch_l1((const char *)p + col_a * esz);
			prefetch_l1((const char *)p + col_b * esz);
		}
		return;
	}
	st.v0 = make_uint4(0, 0, 0, 0);
	st.v1 = st.v0;
	st.fp8 = fp8;
	if (!p)
		return;
	if (fp8) {
		const uint2 lo = __ldg((const uint2 *)((const uint8_t *)p + col_a));
		const uint2 hi = __ldg((const uint2 *)((const uint8_t *)p + col_b));

		st.v0 = make_uint4(lo.x, lo.y, hi.x, hi.y);
	} else {
		st.v0 = ldg16((const __nv_bfloat16 *)p + col_a);
		st.v1 = ldg16((const __nv_bfloat16 *)p + col_b);
	}
}

/* stage_store - the staged runs as bf16 into chunks chunk_a and chunk_b of row. */
__device__ __forceinline__ void stage_store(const stage &st, unsigned char *tile, int row, int chunk_a, int chunk_b,
					    int rchunks)
{
	uint4 lo = st.v0, hi = st.v1;

	if (st.fp8) {
		lo = make_uint4(e4m3x2_to_bf16x2(st.v0.x), e4m3x2_to_bf16x2(st.v0.x >> 16),
				e4m3x2_to_bf16x2(st.v0.y), e4m3x2_to_bf16x2(st.v0.y >> 16));
		hi = make_uint4(e4m3x2_to_bf16x2(st.v0.z), e4m3x2_to_bf16x2(st.v0.z >> 16),
				e4m3x2_to_bf16x2(st.v0.w), e4m3x2_to_bf16x2(st.v0.w >> 16));
	}
	*(uint4 *)(tile + swz(row, chunk_a, rchunks)) = lo;
	*(uint4 *)(tile + swz(row, chunk_b, rchunks)) = hi;
}

/* Key granule kg: 64 keys x channels 64kg..64kg+63; thread: key tid/4, chunks 2j, 2j+1. */
template <bool FP8, bool PREFETCH = false>
__device__ __forceinline__ void load_k(stage &st, const attn_extend_args &a, const seq_info &s,
				       const tile_info &ti, const int64_t *table, int kg)
{
	const int col = 64 * kg + ((threadIdx.x & 3) << 4);

	stage_load<FP8, PREFETCH>(st, a, s, ti, table, threadIdx.x >> 2, col, col + 8, false);
}

__device__ __forceinline__ void store_k(const stage &st, unsigned char *slot)
{
	const int c = (threadIdx.x & 3) << 1;

	stage_store(st, slot, threadIdx.x >> 2, c, c + 1, 8);
}

/* rows kernels, value granule vg: keys 32vg..32vg+31 x 128 channels; thread: key tid/8, chunks j, j+8. */
template <bool FP8, bool PREFETCH = false>
__device__ __forceinline__ void load_v128(stage &st, const attn_extend_args &a, const seq_info &s,
					  const tile_info &ti, const int64_t *table, int vg)
{
	const int col = (threadIdx.x & 7) << 3;

	stage_load<FP8, PREFETCH>(st, a, s, ti, table, 32 * vg + (threadIdx.x >> 3), col, col + 64, true);
}

__device__ __forceinline__ void store_v128(const stage &st, unsigned char *slot)
{
	const int c = threadIdx.x & 7;

	stage_store(st, slot, threadIdx.x >> 3, c, c + 8, 16);
}

/* mla kernel, value granule (kk, hf): keys 16kk..16kk+15 x channels 256hf..256hf+255;
 * thread: key tid/16, chunks j, j+16. */
template <bool FP8, bool PREFETCH = false>
__device__ __forceinline__ void load_v512(stage &st, const attn_extend_args &a, const seq_info &s,
					  const tile_info &ti, const int64_t *table, int kk, int hf)
{
	const int col = 256 * hf + ((threadIdx.x & 15) << 3);

	stage_load<FP8, PREFETCH>(st, a, s, ti, table, 16 * kk + (threadIdx.x >> 4), col, col + 128, true);
}

__device__ __forceinline__ void store_v512(const stage &st, unsigned char *slot)
{
	const int c = threadIdx.x & 15;

	stage_store(st, slot, threadIdx.x >> 4, c, c + 16, 32);
}

/* Slot table of the next tile: threads 0..63 read its kv_indices (issue now, store later). */
__device__ __forceinline__ bool table_load(const attn_extend_args &a, const seq_info &s, int next, int64_t &slot)
{
	const int idx = next * N + (int)threadIdx.x;

	slot = 0;
	if (next >= s.n_pt || threadIdx.x >= N)
		return false;
	if (idx < s.P)
		slot = __ldg(a.kv_indices + s.kv0 + idx);
	return true;
}

/* ------------------------------------------------------------ softmax pieces */

/*
 * scores - accumulators -> log2-domain scores of one thread's 2 rows x
 * (2 * NT) keys: scale, logit cap, mask.  Fragment (j, e) is row (e >> 1 ?
 * tok1 : tok0), tile key kbase + 8j + 2*(lane % 4) + (e & 1).
 */
template <int NT>
__device__ __forceinline__ void scores(float x[][4], const attn_extend_args &a, const seq_info &s,
				       const tile_info &ti, int kbase, int tok0, int tok1)
{
	const float ks = ti.prefix ? a.k_scale : 1.f;

	if (a.logit_cap > 0.f) {
		const float c1 = a.sm_scale * ks / a.logit_cap, c2 = a.logit_cap * LOG2E;

#pragma unroll
		for (int j = 0; j < NT; j++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				x[j][e] = c2 * tanhf(x[j][e] * c1);
	} else {
		const float c = a.sm_scale * ks * LOG2E;

#pragma unroll
		for (int j = 0; j < NT; j++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				x[j][e] *= c;
	}
	if (ti.mask) {
		const int lim0 = ti.prefix || !s.causal ? ti.n_valid : min(ti.n_valid, tok0 - ti.k0 + 1);
		const int lim1 = ti.prefix || !s.causal ? ti.n_valid : min(ti.n_valid, tok1 - ti.k0 + 1);
		const int k = kbase + 2 * (threadIdx.x & 3);

#pragma unroll
		for (int j = 0; j < NT; j++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				if (k + 8 * j + (e & 1) >= ((e >> 1) ? lim1 : lim0))
					x[j][e] = -CUDART_INF_F;
	}
}

/* Row maxima of a thread's 2 rows, reduced over the 4 threads of the row. */
template <int NT>
__device__ __forceinline__ void row_max(const float x[][4], float &mx0, float &mx1)
{
	mx0 = -CUDART_INF_F;
	mx1 = -CUDART_INF_F;
#pragma unroll
	for (int j = 0; j < NT; j++) {
		mx0 = fmaxf(mx0, fmaxf(x[j][0], x[j][1]));
		mx1 = fmaxf(mx1, fmaxf(x[j][2], x[j][3]));
	}
	mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
	mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
	mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
	mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
}

/*
 * online_update - new running max m from the tile max mx; returns the factor
 * for the old accumulators and sets mu, the offset for this tile's exponents
 * (0 while the row has seen no key, so -inf - -inf never happens).
 */
__device__ __forceinline__ float online_update(float &m, float mx, float &mu)
{
	const float mn = fmaxf(m, mx);

	mu = mn == -CUDART_INF_F ? 0.f : mn;

	const float alpha = ex2(m - mu);

	m = mn;
	return alpha;
}

/* p = 2^(x - mu) in place; adds this thread's part of the row sums. */
template <int NT>
__device__ __forceinline__ void exponentiate(float x[][4], float mu0, float mu1, float &l0, float &l1)
{
#pragma unroll
	for (int j = 0; j < NT; j++) {
		x[j][0] = ex2(x[j][0] - mu0);
		x[j][1] = ex2(x[j][1] - mu0);
		x[j][2] = ex2(x[j][2] - mu1);
		x[j][3] = ex2(x[j][3] - mu1);
		l0 += x[j][0] + x[j][1];
		l1 += x[j][2] + x[j][3];
	}
}

/* ------------------------------------------------------------ lq 128 / 192, lv 128 */

template <int DQK, bool FP8>
__device__ __forceinline__ void extend_rows(const attn_extend_args &a, unsigned char *smem)
{
	constexpr int M = 128, DV = 128;
	constexpr int NKG = DQK / 64;   /* key granules per tile */
	constexpr int NVG = 2;          /* value granules per tile, 32 keys each */
	constexpr int QCH = DQK / 8;
	constexpr int QBYTES = M * DQK * 2;
	static_assert(QBYTES >= M * DV * 2, "the o tile reuses the q tile");
	static_assert(QBYTES + 2 * SLOT + 2 * N * 8 == (DQK == 128 ? ATTN_EXTEND_SMEM_128 : ATTN_EXTEND_SMEM_192),
		      "extend.h states the shared memory of the launch");
	unsigned char *sq = smem;
	unsigned char *slots = smem + QBYTES;
	int64_t *table = (int64_t *)(slots + 2 * SLOT);
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
	seq_info s;

	if (!seq_setup<M, DQK, DV, FP8>(a, smem, s))
		return;

	const int r0 = warp * 16 + g, r1 = r0 + 8; /* this thread's rows of S and O */
	const int tok0 = (int)((unsigned)(s.row0 + r0) / (unsigned)s.G);
	const int tok1 = (int)((unsigned)(s.row0 + r1) / (unsigned)s.G);
	/*
	 * Lane parts of the ldmatrix addresses.  With rows of 8 or 16 chunks
	 * and even chunk steps, swz() of the k-th step is the lane part XOR
	 * (k << 5) (the tile bases are 1024-aligned), which keeps the per-step
	 * offsets out of registers.  q fragments: rows 16 warp + (lane & 15),
	 * chunk 8kg + 2k4 + (lane >> 4).  Key fragments: rows 16p + (lane & 7) +
	 * 8 (lane >> 4), chunk 2 k4 + ((lane >> 3) & 1); value fragments
	 * (transposed): rows 16 s2 + (lane & 7) + 8 ((lane >> 3) & 1), chunk
	 * 2p + (lane >> 4).
	 */
	const uint32_t q_lane = smem_u32(sq) + (r0 - g + (lane & 15)) * (QCH * 16) + (((lane >> 4) ^ (lane & 7)) << 4);
	const uint32_t k_lane = ((lane & 7) + ((lane >> 4) << 3)) * 128 + ((((lane >> 3) & 1) ^ (lane & 7)) << 4);
	const uint32_t v_lane = ((lane & 7) + (((lane >> 3) & 1) << 3)) * 256 + (((lane >> 4) ^ (lane & 7)) << 4);

	load_q<M, DQK>(a, s, sq);
	if (s.n_pt > 0 && tid < N)
		table[tid] = tid < s.P ? __ldg(a.kv_indices + s.kv0 + tid) : 0;
	cp_async_commit();
	cp_async_wait<0>();
	__syncthreads();

	if (s.n_tiles > 0) {
		stage st;

		load_k<FP8>(st, a, s, describe(s, 0), table, 0);
		store_k(st, slots);
	}
	__syncthreads();

	float o[DV / 8][4];
	float m0 = -CUDART_INF_F, m1 = -CUDART_INF_F, l0 = 0.f, l1 = 0.f;
	int cur = 0;

#pragma unroll
	for (int n = 0; n < DV / 8; n++)
		o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

#pragma unroll 1
	for (int tile = 0; tile < s.n_tiles; tile++) {
		const tile_info ti = describe(s, tile);
		float x[8][4];
		uint32_t pf[4][4];

#pragma unroll
		for (int j = 0; j < 8; j++)
			x[j][0] = x[j][1] = x[j][2] = x[j][3] = 0.f;

		/* S = Q K^T, 16 rows x 64 keys per warp */
#pragma unroll
		for (int kg = 0; kg < NKG; kg++) {
			stage st;
			int64_t tslot = 0;
			const bool tload = kg == 0 && table_load(a, s, tile + 1, tslot);
			const uint32_t base = smem_u32(slots + cur * SLOT) + k_lane;

			if (kg + 1 < NKG)
				load_k<FP8>(st, a, s, ti, table, kg + 1);
			else
				load_v128<FP8>(st, a, s, ti, table, 0);
			if (kg + 2 < NKG) /* and two granules ahead into L1 */
				load_k<FP8, true>(st, a, s, ti, table, kg + 2);
			else
				load_v128<FP8, true>(st, a, s, ti, table, kg + 2 - NKG);
#pragma unroll
			for (int k4 = 0; k4 < 4; k4++) {
				uint32_t af[4];

				ldsm_x4(af, (q_lane ^ (k4 << 5)) + kg * 128);
#pragma unroll
				for (int p = 0; p < 4; p++) {
					uint32_t b[4];

					ldsm_x4(b, (base ^ (k4 << 5)) + p * 2048);
					mma_bf16(x[2 * p], af, b[0], b[1]);
					mma_bf16(x[2 * p + 1], af, b[2], b[3]);
				}
			}
			if (kg + 1 < NKG)
				store_k(st, slots + (cur ^ 1) * SLOT);
			else
				store_v128(st, slots + (cur ^ 1) * SLOT);
			if (tload)
				table[((tile + 1) & 1) * N + tid] = tslot;
			__syncthreads();
			cur ^= 1;
		}

		/* online softmax, warp-local: every row lives in one warp */
		{
			float mx0, mx1, mu0, mu1;

			scores<8>(x, a, s, ti, 0, tok0, tok1);
			row_max<8>(x, mx0, mx1);

			const float al0 = online_update(m0, mx0, mu0);
			const float al1 = online_update(m1, mx1, mu1);
			const float vs = ti.prefix ? a.v_scale : 1.f;

			l0 *= al0;
			l1 *= al1;
#pragma unroll
			for (int n = 0; n < DV / 8; n++) {
				o[n][0] *= al0;
				o[n][1] *= al0;
				o[n][2] *= al1;
				o[n][3] *= al1;
			}
			exponentiate<8>(x, mu0, mu1, l0, l1);
#pragma unroll
			for (int kb = 0; kb < 4; kb++) {
				pf[kb][0] = pack_bf16(x[2 * kb][0] * vs, x[2 * kb][1] * vs);
				pf[kb][1] = pack_bf16(x[2 * kb][2] * vs, x[2 * kb][3] * vs);
				pf[kb][2] = pack_bf16(x[2 * kb + 1][0] * vs, x[2 * kb + 1][1] * vs);
				pf[kb][3] = pack_bf16(x[2 * kb + 1][2] * vs, x[2 * kb + 1][3] * vs);
			}
		}

		/* O += P V */
#pragma unroll
		for (int vg = 0; vg < NVG; vg++) {
			stage st;
			bool next = true;
			const uint32_t base = smem_u32(slots + cur * SLOT) + v_lane;

			if (vg + 1 < NVG)
				load_v128<FP8>(st, a, s, ti, table, vg + 1);
			else if (tile + 1 < s.n_tiles)
				load_k<FP8>(st, a, s, describe(s, tile + 1), table, 0);
			else
				next = false;
			static_assert(NVG == 2, "two granules ahead of V0 / V1 are K0 / K1 of the next tile");
			if (tile + 1 < s.n_tiles)
				load_k<FP8, true>(st, a, s, describe(s, tile + 1), table, vg);
#pragma unroll
			for (int s2 = 0; s2 < 2; s2++) {
#pragma unroll
				for (int p = 0; p < 8; p++) {
					uint32_t b[4];

					ldsm_x4_trans(b, (base ^ (p << 5)) + s2 * 4096);
					mma_bf16(o[2 * p], pf[2 * vg + s2], b[0], b[1]);
					mma_bf16(o[2 * p + 1], pf[2 * vg + s2], b[2], b[3]);
				}
			}
			if (next) {
				if (vg + 1 < NVG)
					store_v128(st, slots + (cur ^ 1) * SLOT);
				else
					store_k(st, slots + (cur ^ 1) * SLOT);
			}
			__syncthreads();
			cur ^= 1;
		}
	}

	/* epilogue: O / l through shared memory (the q tile is dead) */
	l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
	l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
	l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
	l1 += __shfl_xor_sync(0xffffffffu, l1, 2);

	const float inv0 = 1.f / l0, inv1 = 1.f / l1;

#pragma unroll
	for (int n = 0; n < DV / 8; n++) {
		*(uint32_t *)(sq + swz(r0, n, DV / 8) + 4 * t4) = pack_bf16(o[n][0] * inv0, o[n][1] * inv0);
		*(uint32_t *)(sq + swz(r1, n, DV / 8) + 4 * t4) = pack_bf16(o[n][2] * inv1, o[n][3] * inv1);
	}
	if (a.lse && t4 == 0) {
		if (r0 < s.nrows)
			a.lse[(s.q0 + tok0) * a.lse_tok + (s.kvh * s.G + (s.row0 + r0) - tok0 * s.G) * a.lse_head] =
				(m0 + log2f(l0)) * LN2;
		if (r1 < s.nrows)
			a.lse[(s.q0 + tok1) * a.lse_tok + (s.kvh * s.G + (s.row0 + r1) - tok1 * s.G) * a.lse_head] =
				(m1 + log2f(l1)) * LN2;
	}
	__syncthreads();
	store_o<M, DV>(a, s, sq);
}

/* ------------------------------------------------------------ lq 576 / lv 512, lq 256 / lv 256 */

/*
 * extend_mla - the "mla" kernel for head sizes DQK / DV (576 / 512, or 256 /
 * 256): 64 rows per block, NKG 64-channel key granules and NH 256-channel
 * value halves per tile.  SMEM is the launch's dynamic shared memory.
 */
template <int DQK, int DV, bool FP8, int SMEM>
__device__ __forceinline__ void extend_mla(const attn_extend_args &a, unsigned char *smem)
{
	constexpr int M = 64;
	constexpr int NKG = DQK / 64; /* key granules per tile: 9 (576), 4 (256) */
	constexpr int NH = DV / 256;  /* value halves: 2 (512), 1 (256) */
	constexpr int AHEAD = 2 / NH; /* key groups from a value granule to the one two granules on */
	constexpr int QCH = DQK / 8;
	static_assert(DQK % 64 == 0 && (NH == 1 || NH == 2) && NKG >= 2, "granule shapes");
	unsigned char *sq = smem;                         /* 64 x DQK bf16; at the end 64 x DV o */
	unsigned char *slots = sq + M * DQK * 2;          /* 2 x 8192 */
	unsigned char *sp = slots + 2 * SLOT;             /* P: 64 x 64 bf16 */
	int64_t *table = (int64_t *)(sp + M * N * 2);     /* 2 x 64 slots */
	float *red = (float *)(table + 2 * N);            /* [key half][row]: maxima, at the end sums */
	float *rowf = red + 2 * M;                        /* [row]: rescale factor, at the end max */
	static_assert(M * DQK * 2 + 2 * SLOT + M * N * 2 + 2 * N * 8 + 3 * M * 4 == SMEM,
		      "extend.h states the shared memory of the launch");
	static_assert(M * DQK * 2 >= M * DV * 2, "the o tile reuses the q tile");
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
	const int r = warp & 3, h = warp >> 2;            /* S phase: rows 16r.., keys 32h.. */
	seq_info s;

	if (!seq_setup<M, DQK, DV, FP8>(a, smem, s))
		return;

	const int r0 = r * 16 + g, r1 = r0 + 8;
	const int tok0 = (int)((unsigned)(s.row0 + r0) / (unsigned)s.G);
	const int tok1 = (int)((unsigned)(s.row0 + r1) / (unsigned)s.G);
	/*
	 * Lane parts of the ldmatrix addresses (see extend_rows): q fragments
	 * rows 16r + (lane & 15), chunk 8kg + 2k4 + (lane >> 4); key fragments
	 * rows 32h + 16p + (lane & 7) + 8 (lane >> 4), chunk 2k4 + ((lane >> 3)
	 * & 1); P fragments rows 16mt + (lane & 15), chunk 2kk + (lane >> 4);
	 * value fragments (transposed) rows (lane & 7) + 8 ((lane >> 3) & 1),
	 * chunk warp + 8 (2p + (lane >> 4)), which swizzles to (warp ^ (lane & 7))
	 * + 16p + 8 (lane >> 4).
	 */
	const uint32_t q_lane = smem_u32(sq) + (r * 16 + (lane & 15)) * (QCH * 16) + (((lane >> 4) ^ (lane & 7)) << 4);
	const uint32_t k_lane = (32 * h + (lane & 7) + ((lane >> 4) << 3)) * 128 +
				((((lane >> 3) & 1) ^ (lane & 7)) << 4);
	const uint32_t p_lane = smem_u32(sp) + (lane & 15) * 128 + (((lane >> 4) ^ (lane & 7)) << 4);
	const uint32_t v_lane = ((lane & 7) + (((lane >> 3) & 1) << 3)) * 512 + ((warp ^ (lane & 7)) << 4) +
				((lane >> 4) << 7);
	/* this thread's P stores: rows r0, r1 (= r0 + 8), chunk 4h + j -> lane part XOR (j << 4) */
	const uint32_t pw_lane = smem_u32(sp) + r0 * 128 + (((4 * h) ^ g) << 4) + 4 * t4;

	load_q<M, DQK>(a, s, sq);
	if (s.n_pt > 0 && tid < N)
		table[tid] = tid < s.P ? __ldg(a.kv_indices + s.kv0 + tid) : 0;
	cp_async_commit();
	cp_async_wait<0>();
	__syncthreads();
	if (s.n_tiles > 0) {
		stage st;

		load_k<FP8>(st, a, s, describe(s, 0), table, 0);
		store_k(st, slots);
	}
	__syncthreads();

	float o[NH][4][4][4]; /* [half][8-col group j: cols 8(warp + 8j)][m tile][frag] */
	float m0 = -CUDART_INF_F, m1 = -CUDART_INF_F, l0 = 0.f, l1 = 0.f;
	int cur = 0;

#pragma unroll
	for (int hf = 0; hf < NH; hf++)
#pragma unroll
		for (int j = 0; j < 4; j++)
#pragma unroll
			for (int mt = 0; mt < 4; mt++)
				o[hf][j][mt][0] = o[hf][j][mt][1] = o[hf][j][mt][2] = o[hf][j][mt][3] = 0.f;

#pragma unroll 1
	for (int tile = 0; tile < s.n_tiles; tile++) {
		const tile_info ti = describe(s, tile);
		float x[4][4];

#pragma unroll
		for (int j = 0; j < 4; j++)
			x[j][0] = x[j][1] = x[j][2] = x[j][3] = 0.f;

		/* S = Q K^T: warp (r, h) computes 16 rows x 32 keys over NKG granules */
#pragma unroll 1
		for (int kg = 0; kg < NKG; kg++) {
			stage st;
			int64_t tslot = 0;
			const bool tload = kg == 0 && table_load(a, s, tile + 1, tslot);
			const uint32_t base = smem_u32(slots + cur * SLOT) + k_lane;

			if (kg + 1 < NKG)
				load_k<FP8>(st, a, s, ti, table, kg + 1);
			else
				load_v512<FP8>(st, a, s, ti, table, 0, 0);
			if (kg + 2 < NKG) /* and two granules ahead into L1 */
				load_k<FP8, true>(st, a, s, ti, table, kg + 2);
			else
				load_v512<FP8, true>(st, a, s, ti, table, NH == 2 ? 0 : kg + 2 - NKG,
						     NH == 2 ? kg + 2 - NKG : 0);
#pragma unroll
			for (int k4 = 0; k4 < 4; k4++) {
				uint32_t af[4];

				ldsm_x4(af, (q_lane ^ (k4 << 5)) + kg * 128);
#pragma unroll
				for (int p = 0; p < 2; p++) {
					uint32_t b[4];

					ldsm_x4(b, (base ^ (k4 << 5)) + p * 2048);
					mma_bf16(x[2 * p], af, b[0], b[1]);
					mma_bf16(x[2 * p + 1], af, b[2], b[3]);
				}
			}
			if (kg + 1 < NKG) {
				store_k(st, slots + (cur ^ 1) * SLOT);
			} else {
				/* last granule: scores and this half's row maxima, published by the barrier */
				float mx0, mx1;

				store_v512(st, slots + (cur ^ 1) * SLOT);
				scores<4>(x, a, s, ti, 32 * h, tok0, tok1);
				row_max<4>(x, mx0, mx1);
				if (t4 == 0) {
					red[h * M + r0] = mx0;
					red[h * M + r1] = mx1;
				}
			}
			if (tload)
				table[((tile + 1) & 1) * N + tid] = tslot;
			__syncthreads();
			cur ^= 1;
		}

		/* softmax: both key halves of a row reach the same running max */
		{
			float mu0, mu1;
			const float al0 = online_update(m0, fmaxf(red[r0], red[M + r0]), mu0);
			const float al1 = online_update(m1, fmaxf(red[r1], red[M + r1]), mu1);
			const float vs = ti.prefix ? a.v_scale : 1.f;

			l0 *= al0;
			l1 *= al1;
			exponentiate<4>(x, mu0, mu1, l0, l1);
#pragma unroll
			for (int j = 0; j < 4; j++) {
				sts32(pw_lane ^ (j << 4), pack_bf16(x[j][0] * vs, x[j][1] * vs));
				sts32((pw_lane ^ (j << 4)) + 1024, pack_bf16(x[j][2] * vs, x[j][3] * vs));
			}
			if (h == 0 && t4 == 0) {
				rowf[r0] = al0;
				rowf[r1] = al1;
			}
		}
		__syncthreads();
#pragma unroll
		for (int mt = 0; mt < 4; mt++) {
			const float a0 = rowf[mt * 16 + g], a1 = rowf[mt * 16 + g + 8];

#pragma unroll
			for (int hf = 0; hf < NH; hf++)
#pragma unroll
				for (int j = 0; j < 4; j++) {
					o[hf][j][mt][0] *= a0;
					o[hf][j][mt][1] *= a0;
					o[hf][j][mt][2] *= a1;
					o[hf][j][mt][3] *= a1;
				}
		}

		/* O += P V: 4 key groups x NH column halves, granule NH kk + hf */
#pragma unroll 1
		for (int kk = 0; kk < 4; kk++) {
			uint32_t pf[4][4];

#pragma unroll
			for (int mt = 0; mt < 4; mt++)
				ldsm_x4(pf[mt], (p_lane ^ (kk << 5)) + mt * 2048);
#pragma unroll
			for (int hf = 0; hf < NH; hf++) {
				stage st;
				int next = 1; /* 1: value granule, 2: next tile's first key granule, 0: none */
				const uint32_t base = smem_u32(slots + cur * SLOT) + v_lane;

				if (hf + 1 < NH) /* the next granule: (kk, hf + 1), (kk + 1, 0) or K 0 of the next tile */
					load_v512<FP8>(st, a, s, ti, table, kk, hf + 1);
				else if (kk + 1 < 4)
					load_v512<FP8>(st, a, s, ti, table, kk + 1, 0);
				else if (tile + 1 < s.n_tiles) {
					next = 2;
					load_k<FP8>(st, a, s, describe(s, tile + 1), table, 0);
				} else {
					next = 0;
				}
				/* two granules ahead: (kk + 1, hf) for NH 2, (kk + 2, 0) for NH 1, or a
				   key granule of the next tile (hf, or kk - 2) */
				if (kk + AHEAD < 4)
					load_v512<FP8, true>(st, a, s, ti, table, kk + AHEAD, NH == 2 ? hf : 0);
				else if (tile + 1 < s.n_tiles)
					load_k<FP8, true>(st, a, s, describe(s, tile + 1), table, NH == 2 ? hf : kk - 2);
#pragma unroll
				for (int p = 0; p < 2; p++) {
					uint32_t b[4];

					ldsm_x4_trans(b, base + p * 256);
#pragma unroll
					for (int mt = 0; mt < 4; mt++) {
						mma_bf16(o[hf][2 * p][mt], pf[mt], b[0], b[1]);
						mma_bf16(o[hf][2 * p + 1][mt], pf[mt], b[2], b[3]);
					}
				}
				if (next == 1)
					store_v512(st, slots + (cur ^ 1) * SLOT);
				else if (next == 2)
					store_k(st, slots + (cur ^ 1) * SLOT);
				__syncthreads();
				cur ^= 1;
			}
		}
	}

	/* epilogue: row sums of both halves meet in shared memory */
	l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
	l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
	l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
	l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
	if (t4 == 0) {
		red[h * M + r0] = l0;
		red[h * M + r1] = l1;
		if (h == 0) {
			rowf[r0] = m0;
			rowf[r1] = m1;
		}
	}
	__syncthreads();
#pragma unroll
	for (int mt = 0; mt < 4; mt++) {
		const int ra = mt * 16 + g, rb = ra + 8;
		const float inva = 1.f / (red[ra] + red[M + ra]), invb = 1.f / (red[rb] + red[M + rb]);

#pragma unroll
		for (int hf = 0; hf < NH; hf++)
#pragma unroll
			for (int j = 0; j < 4; j++) {
				const int c = 32 * hf + warp + 8 * j;

				*(uint32_t *)(sq + swz(ra, c, DV / 8) + 4 * t4) =
					pack_bf16(o[hf][j][mt][0] * inva, o[hf][j][mt][1] * inva);
				*(uint32_t *)(sq + swz(rb, c, DV / 8) + 4 * t4) =
					pack_bf16(o[hf][j][mt][2] * invb, o[hf][j][mt][3] * invb);
			}
	}
	if (a.lse && tid < s.nrows) {
		const unsigned tok = (unsigned)(s.row0 + tid) / (unsigned)s.G;

		a.lse[(s.q0 + tok) * a.lse_tok + (s.kvh * s.G + (s.row0 + tid) - (int)tok * s.G) * a.lse_head] =
			(rowf[tid] + log2f(red[tid] + red[M + tid])) * LN2;
	}
	__syncthreads();
	store_o<M, DV>(a, s, sq);
}

/* ------------------------------------------------------------ dispatch */

/*
 * extend_block - one block of the kernel of a row of extend.h's
 * ATTN_EXTEND_KERNELS (head sizes LQ / LV, FP8 prefix, ROWS packed rows per
 * block, SMEM bytes of dynamic shared memory): extend_mla for lq 576 and
 * 256, extend_rows otherwise.  Called by all ATTN_EXTEND_THREADS threads with
 * @smem the block's 1024-aligned dynamic shared memory.
 */
template <int LQ, int LV, bool FP8, int ROWS, int SMEM>
__device__ __forceinline__ void extend_block(const attn_extend_args &a, unsigned char *smem)
{
	if constexpr (LQ == 576 || LQ == 256) {
		static_assert(((LQ == 576 && LV == 512 && SMEM == ATTN_EXTEND_SMEM_MLA576) ||
			       (LQ == 256 && LV == 256 && SMEM == ATTN_EXTEND_SMEM_256)) && ROWS == 64,
			      "the mla kernel's shapes");
		extend_mla<LQ, LV, FP8, SMEM>(a, smem);
	} else {
		static_assert(LV == 128 && ROWS == 128 &&
				      SMEM == (LQ == 128 ? ATTN_EXTEND_SMEM_128 : ATTN_EXTEND_SMEM_192),
			      "the rows kernels' shape");
		extend_rows<LQ, FP8>(a, smem);
	}
}

} /* namespace attn_extend */

/* ------------------------------------------------------------ kernels */

/* One kernel per row of extend.h's ATTN_EXTEND_KERNELS. */
#define ATTN_EXTEND_DEFINE(name, lq, lv, fp8, rows, smem_bytes)                                 \
	SM120_DYNAMIC_SMEM(name, smem_bytes);                                                   \
	extern "C" __global__ void __launch_bounds__(ATTN_EXTEND_THREADS, 1)                   \
		name(const struct attn_extend_args a)                                           \
	{                                                                                       \
		extern __shared__ __align__(1024) unsigned char attn_extend_smem[];             \
		attn_extend::extend_block<lq, lv, (fp8) != 0, rows, smem_bytes>(a, attn_extend_smem); \
	}

ATTN_EXTEND_KERNELS(ATTN_EXTEND_DEFINE)

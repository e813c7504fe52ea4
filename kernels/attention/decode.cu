/*
 * decode.cu - split-KV decode attention, stage 1: attn_decode_{gqa128,mla}_
 * {bf16,fp8}.  The contract (schemes, splits, partial-output layout) is in
 * decode.h; this file is how one block computes it.
 *
 * One block = 4 warps = up to 16 q heads of one kv head (the M of
 * mma.m16n8k16) x one split of one sequence.  K/V stream through shared
 * memory in tiles of 32 tokens with cp.async, double buffered, so each kv
 * head's K/V is read once per 16 q heads.  Per tile:
 *   S = Q K^T  the 4 warps split the head dimension (dk/4 each, their slice
 *              of Q held in registers) and add their partial S through shared
 *              memory in a fixed order, so every warp holds the same S;
 *   softmax    online, in fp32 and base 2, identical in every warp;
 *   O += P V   every warp takes dv/4 output channels, P (rounded to bf16)
 *              straight from registers, V through ldmatrix.trans.
 * FP8 (e4m3) tiles are converted to bf16 in shared memory once per tile
 * (exactly: e4m3 values are bf16 values) and then take the bf16 path; the
 * per-tensor scales multiply the scores and the output in fp32.
 * Tokens past the split's end are zero-filled (cp.async src-size 0), so no
 * stale shared memory can reach P V as NaN or inf.
 *
 * Shared memory (bytes, static_assert'ed against decode.h):
 *   bf16: 2 stages x [K tile 32 x (dk+8) bf16 (+ V tile 32 x (dv+8) GQA)]
 *         + partial S 4 warps x 16 x 32 fp32
 *   fp8:  2 stages x raw e4m3 tiles + one converted bf16 tile + partial S
 * The +8 pad makes every 8 consecutive tile rows start in distinct 16-byte
 * bank groups (row pitch an odd number of 16-byte units): ldmatrix, plain
 * and transposed, is conflict-free.
 */
#include <cuda_bf16.h>
#include <math_constants.h>
#include <stdint.h>

#include "../common.cuh"
#include "decode.h"

namespace attn_decode {

/* ------------------------------------------------------------ PTX helpers */

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16-byte async copy; !valid writes 16 zero bytes and reads nothing. */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
		     "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void cp_async_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::);
}

template <int N> __device__ __forceinline__ void cp_async_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t r[4])
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_trans(uint32_t addr, uint32_t r[4])
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr));
}

/* c += a (16x16 bf16, row) * b (16x8 bf16, col), fp32 accumulate. */
__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
	__nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x (low half) = lo */

	return *reinterpret_cast<uint32_t *>(&v);
}

/*
 * Two e4m3 bytes (low byte = first element) -> bf16x2, exact.  The format is
 * OCP/NVIDIA E4M3 "fn": bias 7, no infinities, S.1111.111 (0x7f, 0xff) NaN,
 * S.1111.110 = +-448, exponent 0 subnormal (m * 2^-9).  The hardware
 * e4m3x2 -> f16x2 conversion implements exactly that; every e4m3 value is an
 * f16 normal (or zero) and a bf16 value, so f16 -> f32 -> bf16 is exact and
 * NaN stays NaN.
 */
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint32_t two)
{
	uint32_t h2, r;
	float lo, hi;

	asm("{\n\t.reg .b16 x;\n\tcvt.u16.u32 x, %1;\n\tcvt.rn.f16x2.e4m3x2 %0, x;\n}\n"
	    : "=r"(h2)
	    : "r"(two));
	asm("{\n\t.reg .f16 l, h;\n\tmov.b32 {l, h}, %2;\n\tcvt.f32.f16 %0, l;\n\tcvt.f32.f16 %1, h;\n}\n"
	    : "=f"(lo), "=f"(hi)
	    : "r"(h2));
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}

/* 16 e4m3 bytes -> 16 bf16 (two 16-byte halves), element order kept. */
__device__ __forceinline__ void e4m3x16_to_bf16(uint4 in, uint4 &lo, uint4 &hi)
{
	lo.x = e4m3x2_to_bf16x2(in.x);
	lo.y = e4m3x2_to_bf16x2(in.x >> 16);
	lo.z = e4m3x2_to_bf16x2(in.y);
	lo.w = e4m3x2_to_bf16x2(in.y >> 16);
	hi.x = e4m3x2_to_bf16x2(in.z);
	hi.y = e4m3x2_to_bf16x2(in.z >> 16);
	hi.z = e4m3x2_to_bf16x2(in.w);
	hi.w = e4m3x2_to_bf16x2(in.w >> 16);
}

/* A staged e4m3 tile (rows of chunks x 16 bytes) -> bf16 tile, every thread a share. */
template <int ROWS, int CHUNKS, int THREADS>
__device__ __forceinline__ void e4m3_tile_to_bf16(const unsigned char *raw, int raw_pitch, unsigned char *out,
						  int out_pitch, int tid)
{
	static_assert(CHUNKS > 0 && ROWS * CHUNKS % THREADS == 0, "convert split");
#pragma unroll
	for (int k = 0; k < ROWS * CHUNKS / THREADS; k++) {
		const int c = tid + k * THREADS, row = c / CHUNKS, col = c % CHUNKS;
		uint4 lo, hi;

		e4m3x16_to_bf16(*(const uint4 *)(raw + row * raw_pitch + col * 16), lo, hi);
		*(uint4 *)(out + row * out_pitch + col * 32) = lo;
		*(uint4 *)(out + row * out_pitch + col * 32 + 16) = hi;
	}
}

/* --------------------------------------------------------- configuration */

template <int DK, int DV, bool FP8, bool MLA> struct cfg {
	static constexpr int HB = ATTN_DECODE_HEADS_PER_BLOCK;
	static constexpr int THREADS = ATTN_DECODE_THREADS;
	static constexpr int WARPS = THREADS / 32;
	static constexpr int BN = 32;     /* tokens per tile */
	static constexpr int STAGES = 2;  /* cp.async ring */
	static constexpr int ESZ = FP8 ? 1 : 2;
	static constexpr int KP = DK + 8; /* bf16 tile pitches, elements */
	static constexpr int VP = MLA ? KP : DV + 8;
	static constexpr int KT_BYTES = BN * KP * 2;
	static constexpr int VT_BYTES = MLA ? 0 : BN * VP * 2;
	static constexpr int KROW = FP8 ? DK : KP * 2; /* staged row pitch, bytes */
	static constexpr int VROW = FP8 ? DV : VP * 2;
	static constexpr int KR_BYTES = BN * KROW;
	static constexpr int VR_BYTES = MLA ? 0 : BN * VROW;
	static constexpr int STAGE_BYTES = KR_BYTES + VR_BYTES;
	static constexpr int TILE_BYTES = FP8 ? KT_BYTES + VT_BYTES : 0;
	static constexpr int NT_S = BN / 8;       /* score n-tiles per tile */
	static constexpr int PART_BYTES = WARPS * NT_S * 32 * 16;
	static constexpr int SMEM = STAGES * STAGE_BYTES + TILE_BYTES + PART_BYTES;
	static constexpr int KSTEPS_W = DK / 16 / WARPS; /* k-steps of S per warp */
	static constexpr int DV_W = DV / WARPS;          /* output channels per warp */
	static constexpr int NT_O = DV_W / 8;
	static constexpr int TPR = THREADS / BN;         /* copy threads per token row */
	static constexpr int KCHUNKS = DK * ESZ / 16;    /* 16-byte chunks per row */
	static constexpr int VCHUNKS = MLA ? 0 : DV * ESZ / 16;

	static_assert(THREADS % BN == 0 && BN % 16 == 0, "tile shape");
	static_assert(DK % (16 * WARPS) == 0 && DV % (16 * WARPS) == 0, "head sizes");
	static_assert(KCHUNKS % TPR == 0 && VCHUNKS % TPR == 0, "copy split");
	static_assert((BN * KCHUNKS) % THREADS == 0 && (BN * VCHUNKS) % THREADS == 0, "convert split");
	static_assert(((KP * 2 / 16) & 1) && ((VP * 2 / 16) & 1), "pitch: odd 16-byte units");
	static_assert(!MLA || DV <= DK, "MLA: V is the head of K");
};

static_assert(cfg<128, 128, false, false>::SMEM == ATTN_DECODE_GQA128_BF16_SMEM, "decode.h");
static_assert(cfg<128, 128, true, false>::SMEM == ATTN_DECODE_GQA128_FP8_SMEM, "decode.h");
static_assert(cfg<576, 512, false, true>::SMEM == ATTN_DECODE_MLA_BF16_SMEM, "decode.h");
static_assert(cfg<576, 512, true, true>::SMEM == ATTN_DECODE_MLA_FP8_SMEM, "decode.h");
static_assert(ATTN_DECODE_MLA_BF16_SMEM <= 101376 - 1024 && ATTN_DECODE_MLA_FP8_SMEM <= 101376 - 1024,
	      "SM120 opt-in limit less the driver's reserved 1 KiB");

/* Where (b, h, split) lives: o[0 .. dv) and its lse. */
struct slot {
	float *o;
	float *lse;
};

template <int DV> __device__ __forceinline__ slot slot_of(const attn_decode_args &a, int b, int h, int s)
{
	const long long off =
		(long long)b * a.out_stride_b + (long long)h * a.out_stride_h + (long long)s * a.out_stride_s;
	slot r;

	r.o = a.out + off;
	if (a.scheme == ATTN_DECODE_VLLM)
		r.lse = r.o + DV;
	else
		r.lse = a.lse ? a.lse + off / DV : nullptr; /* SGLang: offset // Lv */
	return r;
}

/* ----------------------------------------------------------------- kernel */

template <int DK, int DV, bool FP8, bool MLA>
__device__ __forceinline__ void decode_block(const attn_decode_args &a)
{
	using C = cfg<DK, DV, FP8, MLA>;
	extern __shared__ __align__(16) unsigned char smem[];
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int g = lane >> 2, t = lane & 3;
	const int b = blockIdx.z, split = blockIdx.y;
	const bool sglang = a.scheme == ATTN_DECODE_SGLANG;
	const int G = a.kv_group;
	const int chunks = G >= 1 ? (G + C::HB - 1) / C::HB : 1;
	const int kvh = (int)blockIdx.x / chunks;
	const int h0 = G >= 1 ? kvh * G + ((int)blockIdx.x % chunks) * C::HB : (int)blockIdx.x * C::HB;
	const int nh = G >= 1 ? min(C::HB, G - ((int)blockIdx.x % chunks) * C::HB) : C::HB;
	const int P = a.page_size;
	const size_t align = 16;

	/* Launches no framework can make: NaN into every slot this block owns. */
	bool bad = (a.scheme != ATTN_DECODE_SGLANG && a.scheme != ATTN_DECODE_VLLM) || P < 1 || G < 1 ||
		   a.q_heads < 1 || a.q_heads % G != 0 || a.batch != (int)gridDim.z ||
		   (int)gridDim.x != a.q_heads / G * chunks || !a.q || !a.k || !a.v;
	bad = bad || ((uintptr_t)a.k | (uintptr_t)a.v) % align ||
	      ((a.k_stride_page | a.k_stride_tok | a.k_stride_head) * C::ESZ) % 16 ||
	      ((a.v_stride_page | a.v_stride_tok | a.v_stride_head) * C::ESZ) % 16;
	if (MLA)
		bad = bad || a.v != a.k || a.v_stride_page != a.k_stride_page || a.v_stride_tok != a.k_stride_tok ||
		      a.v_stride_head != a.k_stride_head;
	if (sglang)
		bad = bad || !a.lse || !a.kv_indptr || !a.kv_indices || !a.num_splits;
	else
		bad = bad || a.lse || !a.block_table || !a.seq_lens;

	long long seq_len = 0, beg = 0, len = 1;
	if (!bad && b < a.batch) {
		if (sglang) {
			/* SGLang: cdiv(cdiv(seq_len, splits), MIN_BLOCK_KV) * MIN_BLOCK_KV.  Its
			 * split heuristic gives an empty sequence 0 splits: only a non-empty
			 * one needs 1..gridDim.y. */
			int ns = a.num_splits[b];

			beg = a.kv_indptr[b];
			seq_len = a.kv_indptr[b + 1] - beg;
			bad = seq_len > 0 && (ns < 1 || ns > (int)gridDim.y);
			if (seq_len > 0 && !bad)
				len = (seq_len + ns - 1) / ns, len = (len + 31) / 32 * 32;
		} else {
			seq_len = a.seq_lens[b];
			len = (seq_len + gridDim.y - 1) / gridDim.y; /* vLLM: cdiv(seq_len, NUM_KV_SPLITS) */
		}
		bad = bad || seq_len < 0;
	}
	if (bad) {
		if (!a.out || b >= a.batch)
			return;
		for (int r = 0; r < nh && h0 + r < a.q_heads; r++) {
			slot s = slot_of<DV>(a, b, h0 + r, split);

			for (int d = tid; d < DV; d += C::THREADS)
				s.o[d] = CUDART_NAN_F;
			if (tid == 0 && s.lse)
				*s.lse = CUDART_NAN_F;
		}
		return;
	}

	const long long start = len * split;
	const long long end = min(start + len, seq_len);
	if (start >= end)
		return; /* empty split: the frameworks' stage 2 never reads it */
	const int ntiles = (int)((end - start + C::BN - 1) / C::BN);

	/* Q fragments of this warp's k-steps: rows g, g+8 = heads h0+g, h0+g+8
	 * (zero for rows past the block's heads).  Pairs are 4-byte loads when Q
	 * allows, as both frameworks' Q does. */
	uint32_t qf[C::KSTEPS_W][4];
	{
		const uint16_t *q = (const uint16_t *)a.q + (long long)b * a.q_stride_b + (long long)h0 * a.q_stride_h;
		const uint16_t *qr[2] = { q + (long long)g * a.q_stride_h, q + (long long)(g + 8) * a.q_stride_h };
		const bool q32 = (uintptr_t)a.q % 4 == 0 && ((a.q_stride_b | a.q_stride_h) & 1) == 0;
		auto pair = [&](int row, int d) -> uint32_t {
			if (g + 8 * row >= nh)
				return 0;
			if (q32)
				return *(const uint32_t *)(qr[row] + d);
			return qr[row][d] | (uint32_t)qr[row][d + 1] << 16;
		};

#pragma unroll
		for (int j = 0; j < C::KSTEPS_W; j++) {
			const int d = (warp * C::KSTEPS_W + j) * 16 + 2 * t;

			qf[j][0] = pair(0, d);
			qf[j][1] = pair(1, d);
			qf[j][2] = pair(0, d + 8);
			qf[j][3] = pair(1, d + 8);
		}
	}

	float score_scale = a.sm_scale;
	float out_scale = 1.f;
	if (FP8 && a.k_scale)
		score_scale *= *a.k_scale;
	if (FP8 && a.v_scale)
		out_scale = *a.v_scale;
	const float cap = a.logit_cap;
	float temp = 1.f; /* SGLang xai_temperature_len */
	if (a.xai_temperature_len > 0 && seq_len - 1 > a.xai_temperature_len)
		temp = log2f((float)(seq_len - 1)) * (1.f / log2f((float)a.xai_temperature_len));

	/* Copy roles: thread tid copies chunks sub, sub+TPR, ... of token row r. */
	const int r = tid / C::TPR, sub = tid % C::TPR;
	const unsigned char *kbase = (const unsigned char *)a.k + (long long)kvh * a.k_stride_head * C::ESZ;
	const unsigned char *vbase = (const unsigned char *)a.v + (long long)kvh * a.v_stride_head * C::ESZ;

	/* Index of token row r of tile j: SGLang slot, vLLM page; prefetched a tile ahead. */
	auto fetch = [&](int j) -> long long {
		long long pos = start + (long long)j * C::BN + r;

		if (j >= ntiles || pos >= end)
			return -1;
		if (sglang)
			return a.kv_indices[beg + pos];
		return a.block_table[(long long)b * a.block_table_stride + (P == 1 ? pos : pos / P)];
	};
	long long next_idx = fetch(0);

	auto issue = [&](int j) {
		unsigned char *stage = smem + (j % C::STAGES) * C::STAGE_BYTES;
		const long long pos = start + (long long)j * C::BN + r;
		const long long idx = next_idx;
		const bool valid = idx >= 0;
		long long page = 0, row = 0;

		next_idx = fetch(j + 1);
		if (valid) {
			if (sglang)
				page = P == 1 ? idx : idx / P, row = idx - page * P;
			else
				page = idx, row = P == 1 ? 0 : pos % P;
		}
		const unsigned char *ksrc = kbase + (page * a.k_stride_page + row * a.k_stride_tok) * C::ESZ;
		const uint32_t kdst = smem_addr(stage + r * C::KROW);
#pragma unroll
		for (int i = 0; i < C::KCHUNKS / C::TPR; i++) {
			const int c = sub + i * C::TPR;

			cp_async16(kdst + c * 16, valid ? ksrc + c * 16 : kbase, valid);
		}
		if constexpr (!MLA) {
			const unsigned char *vsrc = vbase + (page * a.v_stride_page + row * a.v_stride_tok) * C::ESZ;
			const uint32_t vdst = smem_addr(stage + C::KR_BYTES + r * C::VROW);
#pragma unroll
			for (int i = 0; i < C::VCHUNKS / C::TPR; i++) {
				const int c = sub + i * C::TPR;

				cp_async16(vdst + c * 16, valid ? vsrc + c * 16 : vbase, valid);
			}
		}
	};

	float4 *part = (float4 *)(smem + C::STAGES * C::STAGE_BYTES + C::TILE_BYTES);
	float acc[C::NT_O][4];
	float m[2] = { -CUDART_INF_F, -CUDART_INF_F }; /* running max, log2 units, rows g / g+8 */
	float l[2] = { 0.f, 0.f };                     /* this thread's share of the row sums */
#pragma unroll
	for (int n = 0; n < C::NT_O; n++)
		acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;

#pragma unroll
	for (int j = 0; j < C::STAGES - 1; j++) {
		if (j < ntiles)
			issue(j);
		cp_async_commit();
	}

	for (int i = 0; i < ntiles; i++) {
		cp_async_wait<C::STAGES - 2>();
		__syncthreads(); /* tile i landed; every warp is done with tile i-1 */
		if (i + C::STAGES - 1 < ntiles)
			issue(i + C::STAGES - 1);
		cp_async_commit();

		const unsigned char *stage = smem + (i % C::STAGES) * C::STAGE_BYTES;
		const unsigned char *kt = stage;
		if constexpr (FP8) {
			unsigned char *tile = smem + C::STAGES * C::STAGE_BYTES;

			e4m3_tile_to_bf16<C::BN, C::KCHUNKS, C::THREADS>(stage, C::KROW, tile, C::KP * 2, tid);
			if constexpr (!MLA)
				e4m3_tile_to_bf16<C::BN, C::VCHUNKS, C::THREADS>(stage + C::KR_BYTES, C::VROW,
										tile + C::KT_BYTES, C::VP * 2, tid);
			__syncthreads();
			kt = tile;
		}
		const unsigned char *vt = MLA ? kt : kt + C::KT_BYTES; /* bf16 V rows, pitch VP */
		const int mi = lane >> 3, rr = lane & 7;               /* ldmatrix: matrix, row */

		/* Partial S over this warp's slice of the head dimension. */
		float s[C::NT_S][4];
#pragma unroll
		for (int n = 0; n < C::NT_S; n++)
			s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
		for (int j = 0; j < C::KSTEPS_W; j++) {
			const int dim = (warp * C::KSTEPS_W + j) * 16 + (mi & 1) * 8;

#pragma unroll
			for (int np = 0; np < C::NT_S / 2; np++) {
				const int tok = np * 16 + (mi >> 1) * 8 + rr;
				uint32_t kb[4];

				ldsm_x4(smem_addr(kt + (tok * C::KP + dim) * 2), kb);
				mma_bf16(s[2 * np], qf[j], kb[0], kb[1]);
				mma_bf16(s[2 * np + 1], qf[j], kb[2], kb[3]);
			}
		}
#pragma unroll
		for (int n = 0; n < C::NT_S; n++)
			part[(warp * C::NT_S + n) * 32 + lane] = make_float4(s[n][0], s[n][1], s[n][2], s[n][3]);
		__syncthreads();
#pragma unroll
		for (int n = 0; n < C::NT_S; n++) { /* same order in every warp: identical S */
			float4 v = part[n * 32 + lane];

#pragma unroll
			for (int w = 1; w < C::WARPS; w++) {
				const float4 u = part[(w * C::NT_S + n) * 32 + lane];

				v.x += u.x, v.y += u.y, v.z += u.z, v.w += u.w;
			}
			s[n][0] = v.x, s[n][1] = v.y, s[n][2] = v.z, s[n][3] = v.w;
		}

		/* Scores (natural units: scale, cap, temperature), then base 2. */
		const long long tile0 = start + (long long)i * C::BN;
		float mx[2] = { -CUDART_INF_F, -CUDART_INF_F };
#pragma unroll
		for (int n = 0; n < C::NT_S; n++) {
#pragma unroll
			for (int e = 0; e < 4; e++) {
				float x = s[n][e] * score_scale;

				if (cap > 0.f)
					x = cap * tanhf(x / cap);
				x *= temp * CUDART_L2E_F;
				if (tile0 + n * 8 + 2 * t + (e & 1) >= end)
					x = -CUDART_INF_F;
				s[n][e] = x;
				mx[e >> 1] = fmaxf(mx[e >> 1], x);
			}
		}
		float alpha[2];
#pragma unroll
		for (int h = 0; h < 2; h++) {
			mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
			mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
			const float mn = fmaxf(m[h], mx[h]);

			alpha[h] = exp2f(m[h] - mn);
			m[h] = mn;
			l[h] *= alpha[h];
		}
#pragma unroll
		for (int n = 0; n < C::NT_S; n++) {
#pragma unroll
			for (int e = 0; e < 4; e++) {
				s[n][e] = exp2f(s[n][e] - m[e >> 1]);
				l[e >> 1] += s[n][e];
			}
		}
#pragma unroll
		for (int n = 0; n < C::NT_O; n++) {
			acc[n][0] *= alpha[0], acc[n][1] *= alpha[0];
			acc[n][2] *= alpha[1], acc[n][3] *= alpha[1];
		}

		/* O += P V over this warp's channels. */
#pragma unroll
		for (int kk = 0; kk < C::BN / 16; kk++) {
			const uint32_t pa[4] = { pack_bf16(s[2 * kk][0], s[2 * kk][1]),
						 pack_bf16(s[2 * kk][2], s[2 * kk][3]),
						 pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
						 pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]) };
			const int tok = kk * 16 + (mi & 1) * 8 + rr;

#pragma unroll
			for (int np = 0; np < C::NT_O / 2; np++) {
				const int ch = warp * C::DV_W + np * 16 + (mi >> 1) * 8;
				uint32_t vb[4];

				ldsm_x4_trans(smem_addr(vt + (tok * C::VP + ch) * 2), vb);
				mma_bf16(acc[2 * np], pa, vb[0], vb[1]);
				mma_bf16(acc[2 * np + 1], pa, vb[2], vb[3]);
			}
		}
	}
	cp_async_wait<0>();

	/* out = acc / l * v_scale; lse = ln(sum) = m ln2 + ln l (rows of this block's heads). */
#pragma unroll
	for (int h = 0; h < 2; h++) {
		l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
		l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
	}
#pragma unroll
	for (int h = 0; h < 2; h++) {
		const int row = g + 8 * h;

		if (row >= nh)
			continue;
		const slot o = slot_of<DV>(a, b, h0 + row, split);
		const float inv = out_scale / l[h];

#pragma unroll
		for (int n = 0; n < C::NT_O; n++) {
			const int ch = warp * C::DV_W + n * 8 + 2 * t;

			o.o[ch] = acc[n][2 * h] * inv;
			o.o[ch + 1] = acc[n][2 * h + 1] * inv;
		}
		if (warp == 0 && t == 0)
			*o.lse = m[h] * CUDART_LN2_F + logf(l[h]);
	}
}

} /* namespace attn_decode */

#define ATTN_DECODE_KERNEL(name, dk, dv, fp8, mla, smem_bytes)                                  \
	SM120_DYNAMIC_SMEM(name, smem_bytes);                                                    \
	extern "C" __global__ void __launch_bounds__(ATTN_DECODE_THREADS) name(const struct attn_decode_args a) \
	{                                                                                        \
		attn_decode::decode_block<dk, dv, fp8, mla>(a);                                  \
	}

ATTN_DECODE_KERNEL(attn_decode_gqa128_bf16, 128, 128, false, false, ATTN_DECODE_GQA128_BF16_SMEM)
ATTN_DECODE_KERNEL(attn_decode_gqa128_fp8, 128, 128, true, false, ATTN_DECODE_GQA128_FP8_SMEM)
ATTN_DECODE_KERNEL(attn_decode_mla_bf16, 576, 512, false, true, ATTN_DECODE_MLA_BF16_SMEM)
ATTN_DECODE_KERNEL(attn_decode_mla_fp8, 576, 512, true, true, ATTN_DECODE_MLA_FP8_SMEM)

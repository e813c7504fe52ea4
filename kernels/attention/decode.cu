/*
 * decode.cu - split-KV decode attention, stage 1: attn_decode_{gqa128,mla}_
 * {bf16,fp8}.  The contract (schemes, splits, partial-output layout) is in
 * decode.h; this file is how one block computes it.
 *
 * One block = 8 warps = up to 16 q heads of one kv head x one split of one
 * sequence, run as two independent groups of 4 warps (named barriers 1 and 2;
 * no block-wide barrier inside the loop):
 *   <= 8 heads: both groups take the block's heads and alternate tiles (group
 *               0 the even ones, group 1 the odd ones), each with its own
 *               online-softmax state; at the end group 1 hands (m, l, O) to
 *               group 0 through shared memory, and group 0 merges and writes.
 *   9..16 heads: group g takes heads 8g .. 8g+7 and every tile (its copies
 *               of a tile the other group also loads mostly hit L2).
 * Each group streams its tiles (32 tokens; MLA bf16: 16) through its own
 * two-stage cp.async ring, so one group computes while the other waits.
 *
 * The MMAs are transposed so that the 8 heads of a group are the N of
 * mma.m16n8k16 and the tokens its M: 8 heads waste no rows.  Per tile, in
 * each group:
 *   S^T = K Q^T  the 4 warps split the head dimension (warp w: k-steps w,
 *                w+4, ...; Q^T fragments from shared memory) and add their
 *                partial S^T through shared memory in a fixed order, so every
 *                warp holds the same S^T;
 *   softmax      online, fp32, base 2, identical in every warp of the group;
 *   O^T += V^T P^T  warp w takes the 16-channel blocks w, w+4, ... of dv;
 *                P^T comes from the S^T accumulators by movmatrix.trans.
 * FP8 (e4m3) tiles are never converted in shared memory: ldmatrix reads the
 * raw bytes and cvt.rn.f16x2.e4m3x2 widens them in registers (exact: every
 * e4m3 value, subnormals and NaN included, is an f16 value).  S^T = K Q^T
 * then runs as an fp16 MMA: so that the ldmatrix layout of bytes is the MMA
 * fragment, each k-step takes its 16 dims in a permuted order (quad t holds
 * dims 4t..4t+3; Q^T is permuted alike; a dot product does not care), and Q,
 * bf16, is multiplied per head by the power of two that puts its largest |q|
 * in [2^14, 2^15) (exact for every element above 2^-29 of the largest), the
 * scores by the inverse.  P V stays bf16 x bf16 as for a bf16 cache: fp16
 * cannot hold p below 2^-24, which matters where the heaviest tokens' V is 0;
 * the FP8 V fragments go e4m3 -> f16 -> f32, whose top halves are the exact
 * bf16, picked and transposed by one prmt (row r of a 16-channel block of
 * V^T is channel 2r, row r+8 channel 2r+1; the stores put every channel where
 * it belongs).  P is rounded to bf16 for P V; the softmax sums are of the
 * unrounded p.  The per-tensor scales multiply the scores and the output in
 * fp32.  Tokens past the split's end are zero-filled (cp.async src-size 0),
 * so no stale shared memory can reach P V as NaN or inf.
 *
 * Shared memory (bytes, static_assert'ed against decode.h):
 *   2 groups x 2 stages x [K tile BN x pitch (+ V tile, GQA)]
 *   + 2 groups x partial S^T (4 warps x BN x 8 fp32)
 *   + Q^T fragments (16 heads x dk x 2 bytes)
 * Row pitches are dk*esz + 16 bytes, an odd number of 16-byte units, so the 8
 * rows of each ldmatrix phase land in distinct bank groups; MLA FP8 rows (576
 * bytes, 36 units) instead stay unpadded with unit u of row r stored at u ^
 * (r/2 % 4), also conflict-free, which keeps that kernel at 100352 bytes, the
 * SM120 limit.
 */
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

/* 16-byte async copy of [src + OFF] to [dst + OFF]; n = 0 writes 16 zero
 * bytes and reads nothing, n = 16 copies. */
template <int OFF> __device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, uint32_t n)
{
	asm volatile("cp.async.cg.shared.global [%0+%3], [%1+%3], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n),
		     "n"(OFF));
}

__device__ __forceinline__ void cp_async_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::);
}

template <int N> __device__ __forceinline__ void cp_async_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/*
 * Barrier of the 128 threads of group gr (named barrier 1 + gr).  The
 * non-.aligned form: the two groups reach it through different instructions,
 * which bar.sync (= barrier.sync.aligned) does not allow.
 */
__device__ __forceinline__ void group_sync(int gr)
{
	if (gr == 0)
		asm volatile("barrier.sync 1, 128;\n" ::: "memory");
	else
		asm volatile("barrier.sync 2, 128;\n" ::: "memory");
}

/* ldmatrix x4 (.trans) at shared address addr + OFF. */
template <int OFF> __device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t r[4])
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4+%5];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr), "n"(OFF));
}

template <int OFF> __device__ __forceinline__ void ldsm_x4_trans(uint32_t addr, uint32_t r[4])
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4+%5];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr), "n"(OFF));
}

/* c += a (16x16, row) * b (16x8, col), fp32 accumulate; bf16 or fp16 inputs. */
template <bool F16>
__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
	if constexpr (F16)
		asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
			     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
			     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
			     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
	else
		asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
			     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
			     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
			     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two words at shared address addr + OFF. */
template <int OFF> __device__ __forceinline__ void lds64(uint32_t addr, uint32_t r[2])
{
	asm volatile("ld.shared.v2.b32 {%0, %1}, [%2+%3];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr), "n"(OFF));
}

/* 8x8 b16 matrix, one row per lane quad, transposed across the warp. */
__device__ __forceinline__ uint32_t movtrans(uint32_t a)
{
	uint32_t d;

	asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
	return d;
}

/* (lo, hi) -> bf16x2 / f16x2, round to nearest even; lo in the low half. */
template <bool F16> __device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
	uint32_t r;

	if constexpr (F16)
		asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
	else
		asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}

/*
 * Four e4m3 bytes -> two f16x2 (bytes 0,1 -> lo; bytes 2,3 -> hi; the lower
 * byte in the lower half), exact.  The format is OCP/NVIDIA E4M3 "fn": bias
 * 7, no infinities, S.1111.111 (0x7f, 0xff) NaN, S.1111.110 = +-448,
 * exponent 0 subnormal (m * 2^-9); every such value is an f16 normal (or
 * zero) and NaN stays NaN.
 */
__device__ __forceinline__ void e4m3x4_to_f16x2(uint32_t x, uint32_t &lo, uint32_t &hi)
{
	asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\tcvt.rn.f16x2.e4m3x2 %0, l;\n\t"
	    "cvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
	    : "=r"(lo), "=r"(hi)
	    : "r"(x));
}

/*
 * Four e4m3 bytes (x0, x1, x2, x3), a 2x2 block [row 0: x0 x1; row 1: x2 x3]
 * -> its two columns as bf16x2: c0 = (x0, x2), c1 = (x1, x3), exact (e4m3 ->
 * f16 -> f32 is exact, and the f32 of an e4m3 value has 16 zero low bits).
 */
__device__ __forceinline__ void e4m3x4_to_bf16x2_cols(uint32_t x, uint32_t &c0, uint32_t &c1)
{
	asm("{\n\t.reg .b16 l, h, x0, x1, x2, x3;\n\t.reg .b32 lo, hi;\n\t.reg .f32 f0, f1, f2, f3;\n\t"
	    "mov.b32 {l, h}, %2;\n\tcvt.rn.f16x2.e4m3x2 lo, l;\n\tcvt.rn.f16x2.e4m3x2 hi, h;\n\t"
	    "mov.b32 {x0, x1}, lo;\n\tmov.b32 {x2, x3}, hi;\n\t"
	    "cvt.f32.f16 f0, x0;\n\tcvt.f32.f16 f1, x1;\n\tcvt.f32.f16 f2, x2;\n\tcvt.f32.f16 f3, x3;\n\t"
	    "prmt.b32 %0, f0, f2, 0x7632;\n\tprmt.b32 %1, f1, f3, 0x7632;\n}\n"
	    : "=r"(c0), "=r"(c1)
	    : "r"(x));
}

/* 2^x; -inf -> 0, results below 2^-126 flush to 0 (p that small is 0 at bf16/fp16 anyway). */
__device__ __forceinline__ float ex2(float x)
{
	float r;

	asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
	return r;
}

__device__ __forceinline__ float bf16_bits_to_float(uint32_t h)
{
	return __uint_as_float(h << 16);
}

/* f(ci<0>()), ..., f(ci<N - 1>()): indices usable as template arguments. */
template <int I> struct ci {
	static constexpr int v = I;
};
template <int I, int N, class F> __device__ __forceinline__ void unroll_for_(F &&f)
{
	if constexpr (I < N) {
		f(ci<I>());
		unroll_for_<I + 1, N>(f);
	}
}
template <int N, class F> __device__ __forceinline__ void unroll_for(F &&f)
{
	unroll_for_<0, N>(f);
}

/* --------------------------------------------------------- configuration */

template <int DK, int DV, bool FP8, bool MLA> struct cfg {
	static constexpr int HB = ATTN_DECODE_HEADS_PER_BLOCK;
	static constexpr int THREADS = ATTN_DECODE_THREADS;
	static constexpr int GROUPS = 2;
	static constexpr int GT = THREADS / GROUPS;  /* threads per group */
	static constexpr int GW = GT / 32;           /* warps per group */
	static constexpr int HG = 8;                 /* heads per group: the MMA's N */
	static constexpr int BN = MLA && !FP8 ? 16 : 32; /* tokens per tile */
	static constexpr int MT = BN / 16;           /* 16-token m-tiles per tile */
	static constexpr int STAGES = 2;             /* cp.async ring of each group */
	static constexpr int ESZ = FP8 ? 1 : 2;
	static constexpr int KU = DK * ESZ / 16;     /* 16-byte units per K row */
	static constexpr int VU = DV * ESZ / 16;
	/* Rows of 4 mod 8 units (MLA fp8: 36) are stored unpadded, unit u of row
	 * r at u ^ (r/2 % 4); other rows get one unit of padding (odd pitch). */
	static constexpr bool SWZ = MLA && KU % 8 == 4;
	static constexpr int KROW = SWZ ? KU * 16 : KU * 16 + 16; /* staged row pitches, bytes */
	static constexpr int VROW = MLA ? KROW : VU * 16 + 16;
	static constexpr int KR_BYTES = BN * KROW;
	static constexpr int VR_BYTES = MLA ? 0 : BN * VROW;
	static constexpr int STAGE_BYTES = KR_BYTES + VR_BYTES;
	static constexpr int RING_BYTES = GROUPS * STAGES * STAGE_BYTES;
	static constexpr int PART_BYTES = GW * MT * 32 * 16; /* per group */
	static constexpr int KS = DK / 16;           /* k-steps of S */
	static constexpr int Q_OFF = RING_BYTES + GROUPS * PART_BYTES;
	static constexpr int Q_BYTES = HB / 8 * KS * 32 * 8; /* Q^T fragments */
	static constexpr int SMEM = Q_OFF + Q_BYTES;
	static constexpr int KW = KS / GW;           /* k-steps of S per warp */
	static constexpr int MO = DV / 16 / GW;      /* 16-channel blocks of O^T per warp */
	static constexpr int TPR = GT / BN;          /* copy threads per token row */
	/* what group 1 hands to group 0 at the end, fp32 words per thread */
	static constexpr int MERGE_WORDS = MO * 4 + 4;

	static_assert(THREADS == 256 && GT == 128 && HB == 16 && GT % BN == 0, "block shape");
	static_assert(!FP8 || MT == 2, "fp8 fragments come in pairs of m-tiles");
	static_assert(DK % (16 * GW) == 0 && DV % (16 * GW) == 0, "head sizes");
	static_assert(KU % TPR == 0 && (MLA || VU % TPR == 0), "copy split");
	static_assert(!SWZ || (TPR == 4 && FP8), "swizzle: a thread's chunks share their unit mod 4");
	static_assert(SWZ || (((KROW / 16) & 1) && ((VROW / 16) & 1)), "pitch: odd 16-byte units");
	static_assert(!MLA || DV <= DK, "MLA: V is the head of K");
	static_assert(MERGE_WORDS * GT * 4 <= STAGE_BYTES, "merge buffer: one stage of group 1's ring");
	static_assert(HB * 4 <= PART_BYTES, "q exponents");
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
	const int tid = threadIdx.x, lane = tid & 31;
	const int gr = tid / C::GT, gtid = tid % C::GT, w = gtid >> 5; /* group, its thread, its warp */
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
		   (int)gridDim.x != a.q_heads / G * chunks || !a.q || !a.k || !a.v ||
		   blockDim.x != C::THREADS || blockDim.y != 1 || blockDim.z != 1;
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

			for (int d = tid; d < DV; d += blockDim.x)
				s.o[d] = CUDART_NAN_F;
			if (tid == 0 && s.lse)
				*s.lse = CUDART_NAN_F;
		}
		return;
	}

	if (len * split >= seq_len)
		return; /* empty split: the frameworks' stage 2 never reads it */
	/* From here on positions fit int32 (seq_len does: int32 seq_lens / indptr). */
	const int start = (int)(len * split);
	const int n_tok = (int)(min(len * split + len, seq_len) - start); /* tokens of this split */
	const int ntiles = (n_tok + C::BN - 1) / C::BN;

	/* Work of this group: heads hg .. hg+7 (block-relative) and local tiles
	 * i = 0 .. nloc-1, tile tfirst + i*tstep of the split. */
	const bool split_heads = nh > C::HG;
	const int hg = split_heads ? gr * C::HG : 0;
	const int tfirst = split_heads ? 0 : gr, tstep = split_heads ? 1 : C::GROUPS;
	const int nloc = ntiles > tfirst ? (ntiles - tfirst + tstep - 1) / tstep : 0;

	float score_scale = a.sm_scale;
	if (FP8 && a.k_scale)
		score_scale *= *a.k_scale;

	/* Copy roles: thread gtid copies chunks sub, sub+TPR, ... of token row r. */
	const int r = gtid / C::TPR, sub = gtid % C::TPR;
	const unsigned char *kbase =
		(const unsigned char *)a.k + (long long)kvh * a.k_stride_head * C::ESZ + sub * 16;
	const unsigned char *vbase =
		(const unsigned char *)a.v + (long long)kvh * a.v_stride_head * C::ESZ + sub * 16;
	unsigned char *ring = smem + gr * C::STAGES * C::STAGE_BYTES;
	const uint32_t ring_s = smem_addr(ring);
	const uint32_t kdst0 = r * C::KROW + (C::SWZ ? sub ^ (r >> 1 & 3) : sub) * 16; /* in a stage */

	/* Index of token row r of local tile i: SGLang slot, vLLM page; prefetched a tile ahead. */
	const int64_t *slots = sglang ? a.kv_indices + beg + start : nullptr;
	const int32_t *pages = sglang ? nullptr : a.block_table + (long long)b * a.block_table_stride;
	auto fetch = [&](int i) -> long long {
		const int rel = (tfirst + i * tstep) * C::BN + r; /* token of the split */

		if (i >= nloc || rel >= n_tok)
			return -1;
		if (sglang)
			return slots[rel];
		return pages[P == 1 ? start + rel : (start + rel) / P];
	};
	long long next_idx = fetch(0);

	auto issue = [&](int i) {
		const uint32_t stage = ring_s + (i % C::STAGES) * C::STAGE_BYTES;
		const int pos = start + (tfirst + i * tstep) * C::BN + r;
		const long long idx = next_idx;
		const bool valid = idx >= 0;
		long long page = 0, row = 0; /* invalid rows: page 0, row 0, never read (size 0) */

		next_idx = fetch(i + 1);
		if (valid) {
			if (sglang)
				page = P == 1 ? idx : idx / P, row = idx - page * P;
			else
				page = idx, row = P == 1 ? 0 : pos % P;
		}
		const uint32_t n = valid ? 16 : 0;
		const unsigned char *ksrc = kbase + (page * a.k_stride_page + row * a.k_stride_tok) * C::ESZ;
		unroll_for<C::KU / C::TPR>(
			[&](auto k) { cp_async16<decltype(k)::v * C::TPR * 16>(stage + kdst0, ksrc, n); });
		if constexpr (!MLA) {
			const unsigned char *vsrc = vbase + (page * a.v_stride_page + row * a.v_stride_tok) * C::ESZ;
			const uint32_t vdst = stage + C::KR_BYTES + r * C::VROW + sub * 16;

			unroll_for<C::VU / C::TPR>(
				[&](auto k) { cp_async16<decltype(k)::v * C::TPR * 16>(vdst, vsrc, n); });
		}
	};

	/*
	 * Warp w takes k-steps w, w+4, w+8, ... of S and channel blocks w, w+4,
	 * ... (16 channels each) of O, so that all its ldmatrix addresses are one
	 * per-lane base plus constants, swizzle included (unit u = w + 4j of a
	 * row r sits at (w ^ (r/2 % 4)) + 4j).  Lane rows:
	 *   fp8  S and V: token lane, unit w;
	 *   bf16 S: token lane % 16, dims 16w + (lane/16)*8;
	 *        V: token lane % 8 + (lane/16)*8, channels 16w + (lane/8 % 2)*8.
	 */
	const uint32_t qk_lane =
		FP8 ? lane * C::KROW + (C::SWZ ? w ^ (lane >> 1 & 3) : w) * 16
		    : (lane & 15) * C::KROW + (w * 16 + (lane >> 4) * 8) * 2;
	const uint32_t pv_lane =
		FP8 ? lane * C::VROW + (C::SWZ ? w ^ (lane >> 1 & 3) : w) * 16
		    : ((lane & 7) + (lane >> 4) * 8) * C::VROW + (w * 16 + ((lane >> 3) & 1) * 8) * 2;
	const uint32_t qf_lane = smem_addr(smem + C::Q_OFF) + (((split_heads ? gr : 0) * C::KS + w) * 32 + lane) * 8;

	if (nloc > 0)
		issue(0); /* the first tile's latency overlaps the Q setup */
	cp_async_commit();

	/*
	 * Q^T fragments (B of S^T = K Q^T) into shared memory, [head block of 8]
	 * [k-step][lane] x 2 words: column g = head 8*block + g (zero past the
	 * block's heads); bf16: dims 2t, 2t+1 | 2t+8, 2t+9 of the k-step; fp8
	 * (permuted k): dims 4t, 4t+1 | 4t+2, 4t+3, as fp16 times 2^e(head), the
	 * power of two that puts max |q| of the head in [2^14, 2^15), e in
	 * [-114, 126].  16 threads a head, dk/16 contiguous dims each; e goes
	 * to each group through its partial-S buffer, which the group only
	 * writes after its next barrier.
	 */
	float qmul[2]; /* score multiplier of this thread's S^T columns 2t, 2t+1 */
	{
		constexpr int QD = DK / 16;
		const int h = tid >> 4, j = tid & 15;
		const uint16_t *qr = (const uint16_t *)a.q + (long long)b * a.q_stride_b +
				     (long long)(h0 + h) * a.q_stride_h + j * QD;
		const bool q32 = (uintptr_t)a.q % 4 == 0 && ((a.q_stride_b | a.q_stride_h) & 1) == 0;
		uint32_t *qsm = (uint32_t *)(smem + C::Q_OFF);
		uint32_t v[QD / 2];

		static_assert(QD % 4 == 0 && C::THREADS == 16 * C::HB, "q setup");
#pragma unroll
		for (int k = 0; k < QD / 2; k++)
			v[k] = 0;
		if (h < nh) {
			if (q32) {
#pragma unroll
				for (int k = 0; k < QD / 2; k++)
					v[k] = *(const uint32_t *)(qr + 2 * k);
			} else {
#pragma unroll
				for (int k = 0; k < QD / 2; k++)
					v[k] = qr[2 * k] | (uint32_t)qr[2 * k + 1] << 16;
			}
		}
		if constexpr (FP8) {
			float mx = 0.f;

#pragma unroll
			for (int k = 0; k < QD / 2; k++)
				mx = fmaxf(mx, fmaxf(fabsf(bf16_bits_to_float(v[k] & 0xffff)),
						     fabsf(bf16_bits_to_float(v[k] >> 16))));
#pragma unroll
			for (int o = 8; o >= 1; o >>= 1)
				mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
			const int e = min(141 - (int)(__float_as_uint(mx) >> 23), 126);
			const float qs = __uint_as_float((uint32_t)(127 + e) << 23);

			if (j == 0)
				for (int gg = 0; gg < C::GROUPS; gg++)
					((int *)(smem + C::RING_BYTES + gg * C::PART_BYTES))[h] = e;
#pragma unroll
			for (int k = 0; k < QD / 2; k++)
				v[k] = pack2<true>(bf16_bits_to_float(v[k] & 0xffff) * qs, bf16_bits_to_float(v[k] >> 16) * qs);
		}
#pragma unroll
		for (int k = 0; k < QD / 2; k++) {
			const int d = j * QD + 2 * k, ks = d >> 4, u = d & 15;
			/* fp8: dims 4t.. -> word 0, 4t+2.. -> word 1; bf16: 2t.. -> 0, 2t+8.. -> 1 */
			const int tt = FP8 ? u >> 2 : (u & 7) >> 1, word = FP8 ? (u >> 1) & 1 : u >> 3;

			qsm[(((h >> 3) * C::KS + ks) * 32 + (h & 7) * 4 + tt) * 2 + word] = v[k];
		}
		__syncthreads();
		const int *qexp = (const int *)(smem + C::RING_BYTES + gr * C::PART_BYTES);
#pragma unroll
		for (int e = 0; e < 2; e++)
			qmul[e] = FP8 ? score_scale * __uint_as_float((uint32_t)(127 - qexp[hg + 2 * t + e]) << 23)
				      : score_scale;
	}

	float4 *part = (float4 *)(smem + C::RING_BYTES + gr * C::PART_BYTES);
	float acc[C::MO][4]; /* O^T: rows = channels, columns = heads 2t, 2t+1 */
	float m[2] = { -CUDART_INF_F, -CUDART_INF_F }; /* running max, log2 units, heads 2t, 2t+1 */
	float l[2] = { 0.f, 0.f };                     /* this thread's share of their sums */
#pragma unroll
	for (int n = 0; n < C::MO; n++)
		acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
	const float cap = a.logit_cap;
	float tl2e = CUDART_L2E_F; /* SGLang xai_temperature_len, and base 2 */
	if (a.xai_temperature_len > 0 && seq_len - 1 > a.xai_temperature_len)
		tl2e = log2f((float)(seq_len - 1)) * (1.f / log2f((float)a.xai_temperature_len)) * CUDART_L2E_F;

	for (int i = 0; i < nloc; i++) {
		cp_async_wait<0>();
		group_sync(gr); /* tile i landed; the group is done with tile i-1 */
		if (i + 1 < nloc)
			issue(i + 1);
		cp_async_commit();

		const uint32_t kt = ring_s + (i % C::STAGES) * C::STAGE_BYTES; /* shared addresses */
		const uint32_t vt = MLA ? kt : kt + C::KR_BYTES;

		/* Partial S^T over this warp's k-steps: rows = tokens mt*16 + g (+8),
		 * columns = heads 2t, 2t+1. */
		float s[C::MT][4];
#pragma unroll
		for (int mt = 0; mt < C::MT; mt++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				s[mt][e] = 0.f;
		unroll_for<C::KW>([&](auto jj) {
			constexpr int j = decltype(jj)::v;
			uint32_t qf[2];

			lds64<j * C::GW * 32 * 8>(qf_lane, qf);
			if constexpr (FP8) {
				/* matrices: tokens 0-7, 8-15, 16-23, 24-31 x the k-step's 16 bytes */
				uint32_t kb[4], af[2][4];

				ldsm_x4<j * C::GW * 16>(kt + qk_lane, kb);
#pragma unroll
				for (int mt = 0; mt < 2; mt++) {
					e4m3x4_to_f16x2(kb[2 * mt], af[mt][0], af[mt][2]);
					e4m3x4_to_f16x2(kb[2 * mt + 1], af[mt][1], af[mt][3]);
					mma<true>(s[mt], af[mt], qf[0], qf[1]);
				}
			} else {
				unroll_for<C::MT>([&](auto mm) {
					constexpr int mt = decltype(mm)::v;
					uint32_t af[4];

					ldsm_x4<mt * 16 * C::KROW + j * C::GW * 32>(kt + qk_lane, af);
					mma<false>(s[mt], af, qf[0], qf[1]);
				});
			}
		});
#pragma unroll
		for (int mt = 0; mt < C::MT; mt++)
			part[(w * C::MT + mt) * 32 + lane] = make_float4(s[mt][0], s[mt][1], s[mt][2], s[mt][3]);
		group_sync(gr);
#pragma unroll
		for (int mt = 0; mt < C::MT; mt++) { /* same order in every warp: identical S */
			float4 v = part[mt * 32 + lane];

#pragma unroll
			for (int ww = 1; ww < C::GW; ww++) {
				const float4 u = part[(ww * C::MT + mt) * 32 + lane];

				v.x += u.x, v.y += u.y, v.z += u.z, v.w += u.w;
			}
			s[mt][0] = v.x, s[mt][1] = v.y, s[mt][2] = v.z, s[mt][3] = v.w;
		}

		/* Scores (natural units: scale, cap, temperature), then base 2. */
		const int valid = n_tok - (tfirst + i * tstep) * C::BN; /* tokens of this tile (may exceed BN) */
		float mx[2] = { -CUDART_INF_F, -CUDART_INF_F };
		if (cap > 0.f) {
#pragma unroll
			for (int mt = 0; mt < C::MT; mt++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					s[mt][e] = cap * tanhf(s[mt][e] * qmul[e & 1] / cap) * tl2e;
		} else {
#pragma unroll
			for (int mt = 0; mt < C::MT; mt++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					s[mt][e] *= qmul[e & 1] * tl2e;
		}
		if (valid < C::BN) { /* the split's last tile */
#pragma unroll
			for (int mt = 0; mt < C::MT; mt++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					if (mt * 16 + g + 8 * (e >> 1) >= valid)
						s[mt][e] = -CUDART_INF_F;
		}
#pragma unroll
		for (int mt = 0; mt < C::MT; mt++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				mx[e & 1] = fmaxf(mx[e & 1], s[mt][e]);
		float alpha[2];
#pragma unroll
		for (int h = 0; h < 2; h++) {
			mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 4));
			mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 8));
			mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 16));
			const float mn = fmaxf(m[h], mx[h]);

			alpha[h] = ex2(m[h] - mn);
			m[h] = mn;
			l[h] *= alpha[h];
		}
		uint32_t pb[C::MT][2]; /* P^T as B fragments: k = tokens, n = heads */
#pragma unroll
		for (int mt = 0; mt < C::MT; mt++) {
#pragma unroll
			for (int e = 0; e < 4; e++) {
				s[mt][e] = ex2(s[mt][e] - m[e & 1]);
				l[e & 1] += s[mt][e];
			}
			pb[mt][0] = movtrans(pack2<false>(s[mt][0], s[mt][1]));
			pb[mt][1] = movtrans(pack2<false>(s[mt][2], s[mt][3]));
		}
		/* O^T *= alpha unless no column's max moved (alpha 1; NaN does rescale).
		 * Every warp of the group has the same S, so all take the same branch. */
		if (__any_sync(0xffffffffu, !(alpha[0] == 1.f && alpha[1] == 1.f))) {
#pragma unroll
			for (int n = 0; n < C::MO; n++) {
				acc[n][0] *= alpha[0], acc[n][1] *= alpha[1];
				acc[n][2] *= alpha[0], acc[n][3] *= alpha[1];
			}
		}

		/* O^T += V^T P^T over this warp's channel blocks w + 4n. */
		unroll_for<C::MO>([&](auto nn) {
			constexpr int n = decltype(nn)::v;

			if constexpr (FP8) {
				/* matrices: tokens 0-7, 8-15, 16-23, 24-31 x the block's 16 channel
				 * bytes, transposed: lane (g, t) gets tokens 2t, 2t+1 x channels 2g, 2g+1 */
				uint32_t vb[4];

				ldsm_x4_trans<n * C::GW * 16>(vt + pv_lane, vb);
#pragma unroll
				for (int kk = 0; kk < 2; kk++) {
					uint32_t af[4];

					e4m3x4_to_bf16x2_cols(vb[2 * kk], af[0], af[1]);
					e4m3x4_to_bf16x2_cols(vb[2 * kk + 1], af[2], af[3]);
					mma<false>(acc[n], af, pb[kk][0], pb[kk][1]);
				}
			} else {
				unroll_for<C::MT>([&](auto kq) {
					constexpr int kk = decltype(kq)::v;
					uint32_t af[4];

					ldsm_x4_trans<kk * 16 * C::VROW + n * C::GW * 32>(vt + pv_lane, af);
					mma<false>(acc[n], af, pb[kk][0], pb[kk][1]);
				});
			}
		});
	}
	cp_async_wait<0>();

	/* Row sums: add the shares of the 8 lanes of each column. */
#pragma unroll
	for (int h = 0; h < 2; h++) {
		l[h] += __shfl_xor_sync(0xffffffffu, l[h], 4);
		l[h] += __shfl_xor_sync(0xffffffffu, l[h], 8);
		l[h] += __shfl_xor_sync(0xffffffffu, l[h], 16);
	}

	/* Both groups on the same heads: group 1 hands (O, m, l) to group 0,
	 * which merges.  The hand-off buffer lies in group 1's own ring, in the
	 * stage its last tile did not use (group 1 has tiles 1, 3, ...: ntiles / 2
	 * of them): group 0 never touches that ring, and group 1 last used that
	 * stage, if at all, a tile earlier, two of its group barriers ago.  It
	 * must not be group 0's ring: group 0's last tile reads it up to the
	 * __syncthreads below (racecheck flagged the hand-off through group 0's
	 * stage 0).  The barriers put the stores after both groups' tiles and
	 * the loads after the stores. */
	if (!split_heads) {
		const int stage1 = C::STAGES + ntiles / C::GROUPS % C::STAGES; /* in smem, in stages */
		float *mb = (float *)(smem + stage1 * C::STAGE_BYTES) + gtid;

		__syncthreads();
		if (gr == 1) {
#pragma unroll
			for (int n = 0; n < C::MO; n++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					mb[(n * 4 + e) * C::GT] = acc[n][e];
#pragma unroll
			for (int h = 0; h < 2; h++) {
				mb[(C::MO * 4 + h) * C::GT] = m[h];
				mb[(C::MO * 4 + 2 + h) * C::GT] = l[h];
			}
		}
		__syncthreads();
		if (gr == 1)
			return;
		float f0[2], f1[2];
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const float m1 = mb[(C::MO * 4 + h) * C::GT], l1 = mb[(C::MO * 4 + 2 + h) * C::GT];
			const float mn = fmaxf(m[h], m1);

			/* a group without tiles has m = -inf, l = 0, O = 0: factor 0 */
			f0[h] = ex2(m[h] - mn), f1[h] = ex2(m1 - mn);
			m[h] = mn;
			l[h] = l[h] * f0[h] + l1 * f1[h];
		}
#pragma unroll
		for (int n = 0; n < C::MO; n++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				acc[n][e] = acc[n][e] * f0[e & 1] + mb[(n * 4 + e) * C::GT] * f1[e & 1];
	}

	/* out = O / l * v_scale; lse = ln(sum) = m ln2 + ln l, for this group's heads. */
	const float out_scale = FP8 && a.v_scale ? *a.v_scale : 1.f;
#pragma unroll
	for (int h = 0; h < 2; h++) {
		const int row = hg + 2 * t + h;

		if (row >= nh)
			continue;
		const slot o = slot_of<DV>(a, b, h0 + row, split);
		const float inv = out_scale / l[h];

#pragma unroll
		for (int n = 0; n < C::MO; n++) {
			const int c0 = (w + n * C::GW) * 16;
			/* fp8: rows g, g+8 = channels 2g, 2g+1; bf16: g, g+8 */
			const int ca = FP8 ? c0 + 2 * g : c0 + g, cb = FP8 ? ca + 1 : ca + 8;

			o.o[ca] = acc[n][h] * inv;
			o.o[cb] = acc[n][2 + h] * inv;
		}
		if (w == 0 && g == 0)
			*o.lse = m[h] * CUDART_LN2_F + logf(l[h]);
	}
}

} /* namespace attn_decode */

/* Blocks per SM the registers are sized for (<= 128 a thread for 2): an SM
 * of sm_90 holds two of any of these blocks' shared memory, one of sm_120
 * (~100 KiB) only one MLA block, which then gets the registers to itself. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
#define ATTN_DECODE_MLA_MIN_BLOCKS 1
#else
#define ATTN_DECODE_MLA_MIN_BLOCKS 2
#endif

#define ATTN_DECODE_KERNEL(name, dk, dv, fp8, mla, smem_bytes, min_blocks)                      \
	SM120_DYNAMIC_SMEM(name, smem_bytes);                                                    \
	extern "C" __global__ void __launch_bounds__(ATTN_DECODE_THREADS, min_blocks)           \
		name(const struct attn_decode_args a)                                            \
	{                                                                                        \
		attn_decode::decode_block<dk, dv, fp8, mla>(a);                                  \
	}

ATTN_DECODE_KERNEL(attn_decode_gqa128_bf16, 128, 128, false, false, ATTN_DECODE_GQA128_BF16_SMEM, 2)
ATTN_DECODE_KERNEL(attn_decode_gqa128_fp8, 128, 128, true, false, ATTN_DECODE_GQA128_FP8_SMEM, 2)
ATTN_DECODE_KERNEL(attn_decode_mla_bf16, 576, 512, false, true, ATTN_DECODE_MLA_BF16_SMEM,
		   ATTN_DECODE_MLA_MIN_BLOCKS)
ATTN_DECODE_KERNEL(attn_decode_mla_fp8, 576, 512, true, true, ATTN_DECODE_MLA_FP8_SMEM, ATTN_DECODE_MLA_MIN_BLOCKS)

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
 *
 * Code: decode_block strings together the stages below (plan, K/V ring,
 * Q^T, then per tile S^T, its reduction, scores, online softmax, P V, then
 * the merge of the groups and the partial output), each a __forceinline__
 * function with its contract, so the kernel still compiles as one function;
 * the instructions are kernels/primitives.cuh's.
 */
#include <math_constants.h>
#include <stdint.h>

#include "../common.cuh"
#include "../primitives.cuh"
#include "decode.h"

namespace attn_decode {

using namespace sm120k;

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


/* ----------------------------------------------------------------- stages */

/*
 * decode_block runs these stages in order; each is a __forceinline__
 * function, so the kernel compiles as the one function it was (the same
 * registers, no calls).  Every stage is called by every thread of the block
 * unless its comment says otherwise; "the group" is this thread's group of
 * 4 warps (gr = tid / GT), "the lane" its (g, t) = (lane / 4, lane % 4).
 */

/* Named barrier of the 128 threads of group gr (barriers 1 and 2). */
__device__ __forceinline__ void group_sync(int gr)
{
	if (gr == 0)
		barrier_sync<1, 128>();
	else
		barrier_sync<2, 128>();
}

/*
 * What the block computes and this thread's group's share of it, as
 * plan_block sets it.  Heads are block-relative (q head h0 + row); tiles are
 * the split's BN-token tiles, the group's local tile i being tile
 * tfirst + i * tstep.
 */
struct work {
	int b, split;             /* sequence (blockIdx.z) and split (blockIdx.y) */
	int kvh, h0, nh;          /* kv head, first q head, q heads of the block (<= HB) */
	long long seq_len, beg;   /* tokens of the sequence; SGLang: its first kv_indices entry */
	int start, n_tok, ntiles; /* the split: first token, tokens, tiles */
	bool split_heads;         /* 9..16 heads: group g takes heads 8g .. 8g+7 and every tile */
	int hg;                   /* the group's first head */
	int tfirst, tstep, nloc;  /* the group's tiles: tfirst + i * tstep, i < nloc */
	float score_scale;        /* sm_scale, times *k_scale for FP8 */
};

/*
 * plan_block - stage 1: the block's sequence, heads and split, and group
 * @gr's share of them, into @wk.  Returns false when the block has nothing
 * to compute: a launch no framework can make (decode.h's NaN contracts),
 * after writing NaN into every slot the block owns, or an empty split,
 * which is not written at all (the frameworks' stage 2 never reads it).
 * No barrier; shared memory untouched.
 */
template <int DK, int DV, bool FP8, bool MLA>
__device__ __forceinline__ bool plan_block(const attn_decode_args &a, int gr, work &wk)
{
	using C = cfg<DK, DV, FP8, MLA>;
	const int tid = threadIdx.x;
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
			return false;
		for (int r = 0; r < nh && h0 + r < a.q_heads; r++) {
			slot s = slot_of<DV>(a, b, h0 + r, split);

			for (int d = tid; d < DV; d += blockDim.x)
				s.o[d] = CUDART_NAN_F;
			if (tid == 0 && s.lse)
				*s.lse = CUDART_NAN_F;
		}
		return false;
	}

	if (len * split >= seq_len)
		return false; /* empty split: the frameworks' stage 2 never reads it */
	/* From here on positions fit int32 (seq_len does: int32 seq_lens / indptr). */
	wk.b = b, wk.split = split;
	wk.kvh = kvh, wk.h0 = h0, wk.nh = nh;
	wk.seq_len = seq_len, wk.beg = beg;
	wk.start = (int)(len * split);
	wk.n_tok = (int)(min(len * split + len, seq_len) - wk.start); /* tokens of this split */
	wk.ntiles = (wk.n_tok + C::BN - 1) / C::BN;

	/* Work of this group: heads hg .. hg+7 (block-relative) and local tiles
	 * i = 0 .. nloc-1, tile tfirst + i*tstep of the split. */
	wk.split_heads = nh > C::HG;
	wk.hg = wk.split_heads ? gr * C::HG : 0;
	wk.tfirst = wk.split_heads ? 0 : gr, wk.tstep = wk.split_heads ? 1 : C::GROUPS;
	wk.nloc = wk.ntiles > wk.tfirst ? (wk.ntiles - wk.tfirst + wk.tstep - 1) / wk.tstep : 0;

	wk.score_scale = a.sm_scale;
	if (FP8 && a.k_scale)
		wk.score_scale *= *a.k_scale;
	return true;
}

/*
 * kv_ring - stage 2, streaming: one group's K (and, GQA, V) tiles through
 * its two-stage cp.async ring in shared memory.  Thread gtid of the group
 * copies the 16-byte chunks sub, sub + TPR, ... of token row r of every
 * tile; the index of its row (SGLang slot, vLLM page) is read one tile
 * ahead.  Tokens past the split's end are zero-filled (cp.async src-size
 * 0), so no stale shared memory reaches P V as NaN or inf.
 */
template <int DK, int DV, bool FP8, bool MLA>
struct kv_ring {
	using C = cfg<DK, DV, FP8, MLA>;

	bool sglang;                        /* the scheme: SGLang (slots) or vLLM (pages) */
	int P;                              /* page size */
	int r, sub;                         /* this thread's token row and first chunk */
	const unsigned char *kbase, *vbase; /* its chunk of the kv head's row 0 of page 0 */
	uint32_t ring_s;                    /* shared address of the group's ring */
	uint32_t kdst0;                     /* its first K chunk's offset in a stage */
	const int64_t *slots;               /* SGLang: the split's token slots */
	const int32_t *pages;               /* vLLM: the sequence's block-table row */
	long long next_idx;                 /* index of its row of the next tile to issue, -1: none */

	/* init - the copy role of thread @gtid of group @gr in the ring inside
	 * @smem, and the index of its row of local tile 0. */
	__device__ __forceinline__ void init(const attn_decode_args &a, const work &wk, unsigned char *smem, int gr,
					     int gtid)
	{
		sglang = a.scheme == ATTN_DECODE_SGLANG, P = a.page_size;
		r = gtid / C::TPR, sub = gtid % C::TPR;
		kbase = (const unsigned char *)a.k + (long long)wk.kvh * a.k_stride_head * C::ESZ + sub * 16;
		vbase = (const unsigned char *)a.v + (long long)wk.kvh * a.v_stride_head * C::ESZ + sub * 16;
		ring_s = smem_u32(smem + gr * C::STAGES * C::STAGE_BYTES);
		kdst0 = r * C::KROW + (C::SWZ ? sub ^ (r >> 1 & 3) : sub) * 16; /* in a stage */
		slots = sglang ? a.kv_indices + wk.beg + wk.start : nullptr;
		pages = sglang ? nullptr : a.block_table + (long long)wk.b * a.block_table_stride;
		next_idx = fetch(a, wk, 0);
	}

	/* fetch - the index of this thread's token row of local tile @i: SGLang
	 * slot, vLLM page; -1 past the group's tiles or the split's tokens. */
	__device__ __forceinline__ long long fetch(const attn_decode_args &a, const work &wk, int i) const
	{
		const int rel = (wk.tfirst + i * wk.tstep) * C::BN + r; /* token of the split */

		if (i >= wk.nloc || rel >= wk.n_tok)
			return -1;
		if (sglang)
			return slots[rel];
		return pages[P == 1 ? wk.start + rel : (wk.start + rel) / P];
	}

	/* stage - the shared address of local tile @i's stage (K rows; V rows,
	 * GQA, KR_BYTES after them; MLA: V is K's head). */
	__device__ __forceinline__ uint32_t stage(int i) const
	{
		return ring_s + (i % C::STAGES) * C::STAGE_BYTES;
	}

	/* issue - the cp.async of this thread's chunks of local tile @i, whose row
	 * index the previous issue (or init) fetched; fetches tile i+1's.  The
	 * caller commits. */
	__device__ __forceinline__ void issue(const attn_decode_args &a, const work &wk, int i)
	{
		const uint32_t st = stage(i);
		const int pos = wk.start + (wk.tfirst + i * wk.tstep) * C::BN + r;
		const long long idx = next_idx;
		const bool valid = idx >= 0;
		long long page = 0, row = 0; /* invalid rows: page 0, row 0, never read (size 0) */

		next_idx = fetch(a, wk, i + 1);
		if (valid) {
			if (sglang)
				page = P == 1 ? idx : idx / P, row = idx - page * P;
			else
				page = idx, row = P == 1 ? 0 : pos % P;
		}
		const int n = valid ? 16 : 0;
		const unsigned char *ksrc = kbase + (page * a.k_stride_page + row * a.k_stride_tok) * C::ESZ;
		unroll_for<C::KU / C::TPR>(
			[&](auto k) { cp_async16<decltype(k)::value * C::TPR * 16>(st + kdst0, ksrc, n); });
		if constexpr (!MLA) {
			const unsigned char *vsrc = vbase + (page * a.v_stride_page + row * a.v_stride_tok) * C::ESZ;
			const uint32_t vdst = st + C::KR_BYTES + r * C::VROW + sub * 16;

			unroll_for<C::VU / C::TPR>(
				[&](auto k) { cp_async16<decltype(k)::value * C::TPR * 16>(vdst, vsrc, n); });
		}
	}
};

/*
 * load_q - stage 3: the block's Q^T fragments (B of S^T = K Q^T) into
 * shared memory at Q_OFF, [head block of 8][k-step][lane] x 2 words: column
 * g = head 8*block + g (zero past the block's heads); bf16: dims 2t, 2t+1 |
 * 2t+8, 2t+9 of the k-step; fp8 (permuted k): dims 4t, 4t+1 | 4t+2, 4t+3,
 * as fp16 times 2^e(head), the power of two that puts max |q| of the head
 * in [2^14, 2^15), e in [-114, 126].  16 threads a head, dk/16 contiguous
 * dims each; e goes to each group through its partial-S buffer, which the
 * group only writes after its next barrier.  Ends with __syncthreads; sets
 * @qmul, the score multipliers of this lane's S^T columns (heads hg + 2t,
 * hg + 2t + 1): score_scale, over 2^e for FP8.
 */
template <int DK, int DV, bool FP8, bool MLA>
__device__ __forceinline__ void load_q(const attn_decode_args &a, const work &wk, unsigned char *smem, int gr,
				       int t, float qmul[2])
{
	using C = cfg<DK, DV, FP8, MLA>;
	constexpr int QD = DK / 16;
	const int tid = threadIdx.x;
	const int h = tid >> 4, j = tid & 15;
	const uint16_t *qr = (const uint16_t *)a.q + (long long)wk.b * a.q_stride_b +
			     (long long)(wk.h0 + h) * a.q_stride_h + j * QD;
	const bool q32 = (uintptr_t)a.q % 4 == 0 && ((a.q_stride_b | a.q_stride_h) & 1) == 0;
	uint32_t *qsm = (uint32_t *)(smem + C::Q_OFF);
	uint32_t v[QD / 2];

	static_assert(QD % 4 == 0 && C::THREADS == 16 * C::HB, "q setup");
#pragma unroll
	for (int k = 0; k < QD / 2; k++)
		v[k] = 0;
	if (h < wk.nh) {
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
			v[k] = pack_f16(bf16_bits_to_float(v[k] & 0xffff) * qs, bf16_bits_to_float(v[k] >> 16) * qs);
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
		qmul[e] = FP8 ? wk.score_scale * __uint_as_float((uint32_t)(127 - qexp[wk.hg + 2 * t + e]) << 23)
			      : wk.score_scale;
}

/*
 * partial_scores - stage 4a: this warp's share of S^T = K Q^T for the tile
 * whose K rows start at shared address @kt, into s[MT][4] (rows = tokens
 * mt*16 + g (+8), columns = heads 2t, 2t+1), summed over the warp's k-steps
 * w, w+4, ... only.  @qk_lane and @qf_lane are the lane parts of the K and
 * Q^T fragment addresses (decode_block).  FP8 K bytes are widened to f16 in
 * registers and multiplied by the 2^e-scaled f16 Q^T.  No barrier.
 */
template <int DK, int DV, bool FP8, bool MLA>
__device__ __forceinline__ void partial_scores(float s[][4], uint32_t kt, uint32_t qk_lane, uint32_t qf_lane)
{
	using C = cfg<DK, DV, FP8, MLA>;

#pragma unroll
	for (int mt = 0; mt < C::MT; mt++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			s[mt][e] = 0.f;
	unroll_for<C::KW>([&](auto jj) {
		constexpr int j = decltype(jj)::value;
		uint32_t qf[2];

		lds64<j * C::GW * 32 * 8>(qf, qf_lane);
		if constexpr (FP8) {
			/* matrices: tokens 0-7, 8-15, 16-23, 24-31 x the k-step's 16 bytes */
			uint32_t kb[4], af[2][4];

			ldsm_x4<j * C::GW * 16>(kb, kt + qk_lane);
#pragma unroll
			for (int mt = 0; mt < 2; mt++) {
				e4m3x4_to_f16x2(kb[2 * mt], af[mt][0], af[mt][2]);
				e4m3x4_to_f16x2(kb[2 * mt + 1], af[mt][1], af[mt][3]);
				mma_f16(s[mt], af[mt], qf[0], qf[1]);
			}
		} else {
			unroll_for<C::MT>([&](auto mm) {
				constexpr int mt = decltype(mm)::value;
				uint32_t af[4];

				ldsm_x4<mt * 16 * C::KROW + j * C::GW * 32>(af, kt + qk_lane);
				mma_bf16(s[mt], af, qf[0], qf[1]);
			});
		}
	});
}

/*
 * reduce_scores - stage 4b: the group's whole S^T in every warp of it.  Each
 * warp parks its partial @s in its part of @part (the group's GW x MT x 32
 * float4), and after the group's barrier adds all GW partials in warp order,
 * so that every warp holds the same S^T, bit for bit.  The group must be
 * done reading @part (the barrier at the top of each tile sees to it).
 */
template <int DK, int DV, bool FP8, bool MLA>
__device__ __forceinline__ void reduce_scores(float s[][4], float4 *part, int gr, int w, int lane)
{
	using C = cfg<DK, DV, FP8, MLA>;

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
}

/*
 * scale_scores - stage 4c: S^T -> scores in log2 units: times @qmul (per
 * head column, e & 1) and the temperature @tl2e (which carries log2 e),
 * through cap * tanh(x / cap) first when @cap > 0; rows (tokens) at or past
 * @valid, the tile's tokens that exist (may exceed BN), become -inf.
 * Warp-local, no barrier.
 */
template <int DK, int DV, bool FP8, bool MLA>
__device__ __forceinline__ void scale_scores(float s[][4], const float qmul[2], float tl2e, float cap, int valid,
					     int g)
{
	using C = cfg<DK, DV, FP8, MLA>;

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
}

/*
 * online_softmax - stage 4d: the tile's scores @s into the running state of
 * this lane's two head columns (e & 1): max @m (log2 units) and @l (this
 * lane's share of the sums, of the unrounded p) updated, O^T @acc rescaled
 * unless no column's max moved (alpha 1; NaN does rescale), and
 * p = 2^(s - m) rounded to bf16 into @pb as P^T B fragments (k = tokens,
 * n = heads) by movmatrix.  Every warp of the group has the same S, so all
 * take the same branch; no barrier.
 */
template <int DK, int DV, bool FP8, bool MLA>
__device__ __forceinline__ void online_softmax(float s[][4], float m[2], float l[2], float acc[][4],
					       uint32_t pb[][2])
{
	using C = cfg<DK, DV, FP8, MLA>;
	float mx[2] = { -CUDART_INF_F, -CUDART_INF_F };

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
#pragma unroll
	for (int mt = 0; mt < C::MT; mt++) {
#pragma unroll
		for (int e = 0; e < 4; e++) {
			s[mt][e] = ex2(s[mt][e] - m[e & 1]);
			l[e & 1] += s[mt][e];
		}
		pb[mt][0] = movtrans(pack_bf16(s[mt][0], s[mt][1]));
		pb[mt][1] = movtrans(pack_bf16(s[mt][2], s[mt][3]));
	}
	if (__any_sync(0xffffffffu, !(alpha[0] == 1.f && alpha[1] == 1.f))) {
#pragma unroll
		for (int n = 0; n < C::MO; n++) {
			acc[n][0] *= alpha[0], acc[n][1] *= alpha[1];
			acc[n][2] *= alpha[0], acc[n][3] *= alpha[1];
		}
	}
}

/*
 * accumulate_pv - stage 4e: O^T += V^T P^T over this warp's 16-channel
 * blocks w + 4n of the tile whose V rows start at shared address @vt;
 * @pv_lane is the lane part of the V fragment address (decode_block).  FP8
 * V fragments go e4m3 -> f16 -> f32, whose top halves are the exact bf16,
 * picked and transposed by one prmt; the MMA is bf16 x bf16.  No barrier.
 */
template <int DK, int DV, bool FP8, bool MLA>
__device__ __forceinline__ void accumulate_pv(float acc[][4], const uint32_t pb[][2], uint32_t vt,
					      uint32_t pv_lane)
{
	using C = cfg<DK, DV, FP8, MLA>;

	unroll_for<C::MO>([&](auto nn) {
		constexpr int n = decltype(nn)::value;

		if constexpr (FP8) {
			/* matrices: tokens 0-7, 8-15, 16-23, 24-31 x the block's 16 channel
			 * bytes, transposed: lane (g, t) gets tokens 2t, 2t+1 x channels 2g, 2g+1 */
			uint32_t vb[4];

			ldsm_x4_trans<n * C::GW * 16>(vb, vt + pv_lane);
#pragma unroll
			for (int kk = 0; kk < 2; kk++) {
				uint32_t af[4];

				e4m3x4_to_bf16x2_cols(vb[2 * kk], af[0], af[1]);
				e4m3x4_to_bf16x2_cols(vb[2 * kk + 1], af[2], af[3]);
				mma_bf16(acc[n], af, pb[kk][0], pb[kk][1]);
			}
		} else {
			unroll_for<C::MT>([&](auto kq) {
				constexpr int kk = decltype(kq)::value;
				uint32_t af[4];

				ldsm_x4_trans<kk * 16 * C::VROW + n * C::GW * 32>(af, vt + pv_lane);
				mma_bf16(acc[n], af, pb[kk][0], pb[kk][1]);
			});
		}
	});
}

/* sum_rows - stage 5a: @l, this lane's shares of its two columns' sums,
 * completed over the 8 lanes of each column (warp-local). */
__device__ __forceinline__ void sum_rows(float l[2])
{
#pragma unroll
	for (int h = 0; h < 2; h++) {
		l[h] += __shfl_xor_sync(0xffffffffu, l[h], 4);
		l[h] += __shfl_xor_sync(0xffffffffu, l[h], 8);
		l[h] += __shfl_xor_sync(0xffffffffu, l[h], 16);
	}
}

/*
 * merge_groups - stage 5b, when both groups took the same heads
 * (!split_heads): group 1 hands (O^T, m, l) to group 0, which merges them
 * into its own @acc, @m, @l.  Returns false for the threads with nothing
 * left to write (group 1 after the hand-off), true otherwise.  Two
 * __syncthreads when !split_heads (every thread must call it); none else.
 *
 * The hand-off buffer lies in group 1's own ring, in the stage its last
 * tile did not use (group 1 has tiles 1, 3, ...: ntiles / 2 of them):
 * group 0 never touches that ring, and group 1 last used that stage, if at
 * all, a tile earlier, two of its group barriers ago.  It must not be group
 * 0's ring: group 0's last tile reads it up to the first __syncthreads
 * (racecheck flagged the hand-off through group 0's stage 0).  The barriers
 * put the stores after both groups' tiles and the loads after the stores.
 */
template <int DK, int DV, bool FP8, bool MLA>
__device__ __forceinline__ bool merge_groups(const work &wk, unsigned char *smem, int gr, int gtid, float acc[][4],
					     float m[2], float l[2])
{
	using C = cfg<DK, DV, FP8, MLA>;

	if (wk.split_heads)
		return true;
	const int stage1 = C::STAGES + wk.ntiles / C::GROUPS % C::STAGES; /* in smem, in stages */
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
		return false;
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
	return true;
}

/*
 * write_partial - stage 6: the split's partial output of this group's heads
 * hg + 2t + h (h = 0, 1; those past nh skipped) into its slot (decode.h):
 * out = O / l * v_scale over this warp's channel blocks, and (warp 0, g 0)
 * lse = ln(sum) = m ln2 + ln l.  No barrier.
 */
template <int DK, int DV, bool FP8, bool MLA>
__device__ __forceinline__ void write_partial(const attn_decode_args &a, const work &wk, int w, int g, int t,
					      const float acc[][4], const float m[2], const float l[2])
{
	using C = cfg<DK, DV, FP8, MLA>;
	const float out_scale = FP8 && a.v_scale ? *a.v_scale : 1.f;

#pragma unroll
	for (int h = 0; h < 2; h++) {
		const int row = wk.hg + 2 * t + h;

		if (row >= wk.nh)
			continue;
		const slot o = slot_of<DV>(a, wk.b, wk.h0 + row, wk.split);
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

/* ----------------------------------------------------------------- kernel */

/*
 * decode_block - one block of attn_decode_* (decode.h's launch): plan, Q^T
 * fragments, then per tile of the group: wait for it and issue the next,
 * S^T, scores, online softmax, P V; then the merge of the two groups and
 * the partial output.  Called by all ATTN_DECODE_THREADS threads.
 */
template <int DK, int DV, bool FP8, bool MLA>
__device__ __forceinline__ void decode_block(const attn_decode_args &a)
{
	using C = cfg<DK, DV, FP8, MLA>;
	extern __shared__ __align__(16) unsigned char smem[];
	const int tid = threadIdx.x, lane = tid & 31;
	const int gr = tid / C::GT, gtid = tid % C::GT, w = gtid >> 5; /* group, its thread, its warp */
	const int g = lane >> 2, t = lane & 3;
	work wk;

	if (!plan_block<DK, DV, FP8, MLA>(a, gr, wk))
		return;

	kv_ring<DK, DV, FP8, MLA> kv;
	kv.init(a, wk, smem, gr, gtid);

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
	const uint32_t qf_lane =
		smem_u32(smem + C::Q_OFF) + (((wk.split_heads ? gr : 0) * C::KS + w) * 32 + lane) * 8;

	if (wk.nloc > 0)
		kv.issue(a, wk, 0); /* the first tile's latency overlaps the Q setup */
	cp_async_commit();

	float qmul[2]; /* score multiplier of this thread's S^T columns 2t, 2t+1 */
	load_q<DK, DV, FP8, MLA>(a, wk, smem, gr, t, qmul);

	float4 *part = (float4 *)(smem + C::RING_BYTES + gr * C::PART_BYTES);
	float acc[C::MO][4]; /* O^T: rows = channels, columns = heads 2t, 2t+1 */
	float m[2] = { -CUDART_INF_F, -CUDART_INF_F }; /* running max, log2 units, heads 2t, 2t+1 */
	float l[2] = { 0.f, 0.f };                     /* this thread's share of their sums */
#pragma unroll
	for (int n = 0; n < C::MO; n++)
		acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
	const float cap = a.logit_cap;
	float tl2e = CUDART_L2E_F; /* SGLang xai_temperature_len, and base 2 */
	if (a.xai_temperature_len > 0 && wk.seq_len - 1 > a.xai_temperature_len)
		tl2e = log2f((float)(wk.seq_len - 1)) * (1.f / log2f((float)a.xai_temperature_len)) * CUDART_L2E_F;

	for (int i = 0; i < wk.nloc; i++) {
		cp_async_wait<0>();
		group_sync(gr); /* tile i landed; the group is done with tile i-1 */
		if (i + 1 < wk.nloc)
			kv.issue(a, wk, i + 1);
		cp_async_commit();

		const uint32_t kt = kv.stage(i); /* shared addresses */
		const uint32_t vt = MLA ? kt : kt + C::KR_BYTES;
		float s[C::MT][4];
		uint32_t pb[C::MT][2];

		partial_scores<DK, DV, FP8, MLA>(s, kt, qk_lane, qf_lane);
		reduce_scores<DK, DV, FP8, MLA>(s, part, gr, w, lane);
		scale_scores<DK, DV, FP8, MLA>(s, qmul, tl2e, cap, wk.n_tok - (wk.tfirst + i * wk.tstep) * C::BN, g);
		online_softmax<DK, DV, FP8, MLA>(s, m, l, acc, pb);
		accumulate_pv<DK, DV, FP8, MLA>(acc, pb, vt, pv_lane);
	}
	cp_async_wait<0>();

	sum_rows(l);
	if (!merge_groups<DK, DV, FP8, MLA>(wk, smem, gr, gtid, acc, m, l))
		return;
	write_partial<DK, DV, FP8, MLA>(a, wk, w, g, t, acc, m, l);
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

/* One kernel per row of decode.h's ATTN_DECODE_KERNELS. */
#define ATTN_DECODE_DEFINE(name, dk, dv, fp8, mla, smem_bytes)                                       \
	SM120_DYNAMIC_SMEM(name, smem_bytes);                                                        \
	extern "C" __global__ void __launch_bounds__(ATTN_DECODE_THREADS,                           \
						     (mla) ? ATTN_DECODE_MLA_MIN_BLOCKS : 2)         \
		name(const struct attn_decode_args a)                                                \
	{                                                                                            \
		attn_decode::decode_block<dk, dv, (fp8) != 0, (mla) != 0>(a);                        \
	}

ATTN_DECODE_KERNELS(ATTN_DECODE_DEFINE)

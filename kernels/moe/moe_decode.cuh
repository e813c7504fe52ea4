/*
 * moe_decode.cuh - the device code of moe_gemm.h's decode kernels
 * (moe_gemm_<quant>_d<TN>, bf16, FP8 and INT4 W4A16) as a template;
 * moe_gemm.cu instantiates them.  No kernel is defined here.
 *
 * At decode each expert gets one or a few routed rows: the kernel reads each
 * touched weight once and does almost no arithmetic per byte, so what it
 * needs is every SM keeping enough weight bytes in flight.  Hence:
 *   - W is the mma.sync A operand (a warp's 16 weight columns, m16) and the
 *     routed rows the B operand (n8), so one MMA covers a pass of up to 8
 *     rows: no 16-row padding of A (a framework block of more valid rows
 *     takes more passes, each streaming the weights again; the plans keep
 *     such launches on the row tiles, moe_gemm_decode_wanted, and W4A16's
 *     of more than a few rows an expert on the staged kernels below).  Most
 *     W4A16 warps take two W fragments (32 columns, MG = 2:
 *     MOE_DECODE_WARP_N), so that each A fragment loaded serves both;
 *   - each lane loads 16 contiguous bytes of a W row (and of an A row) per
 *     64-byte half k step straight into registers.  The k order inside a half
 *     step is permuted, identically for W and A (a dot product does not
 *     depend on the order of its k), so that those 16 bytes are exactly the
 *     lane's fragment registers of two MMAs: lane quad q holds bytes
 *     16q .. 16q + 15 of the half step, words w0..w3, and MMA t (0, 1) takes
 *     word 2t as its low-k register (a0/a1, b0) and word 2t + 1 as its
 *     high-k one (a2/a3, b1).  For bf16 (m16n8k16) MMA t multiplies the k
 *     {8q + 4t + 0..3}, for E4M3 (m16n8k32) {16q + 8t + 0..7}, over q;
 *   - a warp owns whole 128-byte k steps (64 bf16 or 128 E4M3 k: one FP8
 *     128 x 128 block-scale group, applied per step as Triton does per
 *     BLOCK_SIZE_K), every MOE_DECODE_KWARPS-th of K, and keeps
 *     MOE_DECODE_DEPTH of them in flight in registers: no shared-memory
 *     staging and no barrier in the k loop;
 *   - the warps' k partial sums meet in shared memory and are added in warp
 *     order (deterministic), then the epilogue writes whole bf16 pairs.
 *
 * W4A16 (4-bit weights, bf16 scales per group of 32, 64 or 128 along K): a k
 * step is 128 k, 64 bytes of a W row and 256 of an A row.  Lane quad q
 * holds k 32q .. 32q + 31 of the step: 16 bytes of each of its 2 MG W
 * columns g + 8c (one group: its scale is one bf16 per column) and 64 bytes
 * of its A row, four words w_j and four uint4 x_j.  Word w_j (k 8j .. 8j +
 * 7 of the lane's 32, nibble i = k 8j + i) turns into four bf16 pairs, w >>
 * 4s through w4_pair (primitives.cuh: the codes u_s and u_s+4, as moe_gemm.h
 * defines the weight).  MMA 2j + t takes the pairs s = 2t (low k) and 2t +
 * 1 (high k), and A's matching pairs come from x_j by byte permutes (k 0 and
 * 4, 1 and 5, 2 and 6, 3 and 7); the warp's m16 fragment m takes the lane's
 * columns c = 2m and 2m + 1 (the warp's 16m + g and 16m + g + 8), each
 * dequantized once for every n8 operand.  W and its scales are fetched
 * shape::WDEPTH steps ahead, A (from L1 or L2, the same bytes for every
 * tile) one step ahead, in registers.  The staged kernels (moe_gemm.h's
 * MOE_DECODE_STAGED_KERNELS; STAGED SLOTS: K up to MOE_DECODE_W4_STAGE_K;
 * HALVED: SLOTS at K MOE_DECODE_W4_HALVED_K; STREAMED: any K) swap the
 * operands: the same
 * pairs of W (column g of each n8 operand, the warp's columns g and g + 8)
 * are the n8 operand, and a pass's rows, up to two m16 operands (SLOTS on
 * a K of two k steps at most: three; HALVED: seven), the other, in shared
 * memory as the very fragments the MMAs take (frag_at, xs_at), by the same
 * byte permutes: copied once at the pass's
 * start (SLOTS, HALVED), or step by step through two slots (STREAMED); a
 * warp owns its 16 columns of each tile over the whole of K and stores their
 * sums from its accumulators (no meeting, no barrier between tiles;
 * STREAMED, one a step).
 */
#ifndef SM120_KERNELS_MOE_DECODE_CUH
#define SM120_KERNELS_MOE_DECODE_CUH

#include <stdint.h>

#include "../primitives.cuh"
#include "moe_epilogue.cuh"
#include "moe_gemm.h"

namespace moe_decode {

using namespace sm120k;

template <int QUANT, int TN, int NP>
struct shape {
	static constexpr int MG = MOE_DECODE_WARP_N(QUANT, TN, 8 * NP) / 16;   /* m16 W fragments a warp */
	static constexpr int WN = TN / (16 * MG);                     /* warps along N */
	static constexpr int WK = MOE_DECODE_KWARPS(QUANT, TN, 8 * NP);   /* warps along K */
	static constexpr int ESZ = QUANT == MOE_FP8 ? 1 : 2;
	static constexpr int STEP = 128;                   /* bytes of a W or A row per k step (not W4A16) */
	static constexpr int WINDOW = MOE_GEMM_THREADS;    /* sorted rows gathered at a time */
	static constexpr int PASS = 8 * NP;                /* routed rows per pass: NP n8 operands */
	static constexpr int DEPTH = MOE_DECODE_DEPTH;     /* k steps in flight per warp (not W4A16) */
	/* W4A16, unstaged: steps of W and scales in flight, one for 32-column warps
	 * (MOE_DECODE_W4_WIDE_DEPTH), else three (MOE_DECODE_W4_DEPTH) */
	static constexpr int WDEPTH = MG == 2 ? MOE_DECODE_W4_WIDE_DEPTH : MOE_DECODE_W4_DEPTH;
	/* the epilogue's values() path (moe_epilogue.cuh), but for W4A16's 16-column kernel of 8
	 * rows a pass, which it spills on sm_90 (16 bytes: 127 registers before it): each_value */
	static constexpr bool PAIR_VALUES = !(QUANT == MOE_W4A16 && TN == 16 && NP == 1);
	static_assert(WN * WK * 32 == MOE_GEMM_THREADS && TN % (16 * MG) == 0, "8 warps, whole warp tiles");
	static_assert(MG == 1 || (MG == 2 && QUANT == MOE_W4A16), "32-column warps for W4A16 only");
	static_assert(QUANT == MOE_BF16 || QUANT == MOE_FP8 || QUANT == MOE_W4A16, "bf16, FP8 and W4A16 only");
	/* NP 2 for the staged W4A16 kernels only (their n8 operands: the warp's W columns g and
	 * g + 8); an unstaged bf16 kernel of 16 rows a pass, measured (H200, Kimi K2 and GLM-4.7 at
	 * 8 to 1024 tokens), was no faster than the row tiles wherever an expert gets more than 8
	 * rows */
	static_assert(NP == 1 || (NP == 2 && QUANT == MOE_W4A16), "8 rows a pass, or 16 for W4A16");
};

/* The decode kernels' treatment of A, their template argument STAGED (moe_gemm.h's tables; the
 * staged ones' values moe_gemm.h's enum moe_decode_staging):
 * none (the rows are the n8 operands, read from L1), the staged kernels' with each k step in a
 * slot of xs, their streamed one's, or HALVED: SLOTS on a K of MOE_DECODE_W4_HALVED_K (two k
 * steps, the second 64 k), whose second step a lane quad q takes as k 16 q .. 16 q + 15, two
 * words (W's and A's alike), so that it costs four MMAs an operand and half the
 * dequantization, not a full step's on zeros, and which holds a tile's W over both steps,
 * dequantized, while it multiplies every m16 operand of its pass (up to
 * MOE_DECODE_W4_HALVED_PASS rows) by it; W steps in flight: the tile's two (wb[0], wb[1]) */
enum { UNSTAGED, SLOTS = MOE_DECODE_SLOTS, STREAMED = MOE_DECODE_STREAMED, HALVED = MOE_DECODE_HALVED };

/* HALVED's A fragments an m16 operand: 8 of the first k step, 4 of the half one */
enum { HALVED_FRAGS = 12 };

/* the most routed rows a pass of a kernel of @NP n8 operands and staging @STAGED takes: the
 * staged kernels' two m16 operands (MOE_DECODE_W4_SPASS), SLOTS' three on a K of two k steps at
 * most (MOE_DECODE_W4_WIDE_PASS: rows_a_pass), HALVED's up to MOE_DECODE_W4_HALVED_PASS, the
 * unstaged ones' NP n8 operands */
template <int NP, int STAGED>
__host__ __device__ constexpr int pass_of()
{
	return STAGED == HALVED ? MOE_DECODE_W4_HALVED_PASS
	       : STAGED == SLOTS ? MOE_DECODE_W4_WIDE_PASS
	       : STAGED	       ? MOE_DECODE_W4_SPASS
				 : 8 * NP;
}

/* the routed rows a pass of those kernels takes at K @k: pass_of, but SLOTS' two m16 operands
 * (MOE_DECODE_W4_SPASS) past MOE_DECODE_W4_WIDE_K, where its three would not fit xs */
template <int NP, int STAGED>
__device__ __forceinline__ int rows_a_pass(int k)
{
	return STAGED == SLOTS && k > MOE_DECODE_W4_WIDE_K ? MOE_DECODE_W4_SPASS : pass_of<NP, STAGED>();
}

/* A block's shared memory: the warps' k partial sums of a pass's column tile
 * (two buffers: tiles alternate), or, for the STAGED kernels, whose warps
 * keep their sums, the pass's A rows (xs, frag_at's layout: every k step,
 * K up to MOE_DECODE_W4_STAGE_K, or STREAMED's two and two raw; HALVED's,
 * xs_at, its MOE_DECODE_W4_HALVED_PASS rows, 42 KB) in the
 * same bytes; the valid routed ids of the current
 * window of a framework block, in order, and, for FP8, each thread's row of
 * W block scales in its current tile (bsr; one register more spilled the FP8
 * kernels on sm_90). */
template <int QUANT, int TN, int NP, int STAGED>
struct smem {
	union {
		float red[2][MOE_DECODE_KWARPS(QUANT, TN, 8 * NP)][8 * NP][TN];
		uint4 xs[STAGED == HALVED ? MOE_DECODE_W4_HALVED_PASS / 16 * HALVED_FRAGS * 32
			 : STAGED ? MOE_DECODE_W4_SPASS * MOE_DECODE_W4_STAGE_K / 8 : 1];
	};
	int ids[MOE_GEMM_THREADS];
	int warp_count[MOE_GEMM_THREADS / 32];
	int bsr[QUANT == MOE_FP8 ? MOE_GEMM_THREADS : 1];
	/* the pass's factors for every tile's epilogue (decode's factors): each row's routed
	 * weight and FP8 per-channel activation scale, the FP8 per-tensor scale */
	float row_w[pass_of<NP, STAGED>()];
	/* the STREAMED kernels' A row of each row of the pass (NULL past its rows; a thread's
	 * row pointer in registers spilled them on sm_90) */
	const unsigned char *arow[STAGED == STREAMED ? MOE_DECODE_W4_SPASS : 1];
	float row_as[8 * NP];
	float ts;
	/* the STAGED kernels' output row of each row of the pass, in elements of C (store_tile;
	 * last, so that the other kernels' fields keep their places) */
	int64_t row_c[STAGED ? pass_of<NP, STAGED>() : 1];
};

/*
 * frag_at - the STAGED kernels' place in smem.xs of lane @lane's A fragment
 * (the four registers of one m16n8k16 MMA's m16 operand) for MMA @jt (2j +
 * t) of k step @st and m16 operand @m (pass rows 16 m .. 16 m + 15): a
 * step's fragments operand by operand, in MMA order, lane by lane, so that
 * a warp's 16-byte reads of one MMA's fragment are 512 contiguous bytes (no
 * bank conflict), operand 1 4096 bytes on and step st + 1 8192; operands 2
 * and 3 (SLOTS' wide passes, on two k steps at most) those of 0 and 1 16384
 * bytes on, so that an operand's place in a step is a constant.
 */
__device__ __forceinline__ int frag_at(int st, int m, int jt, int lane)
{
	return ((st * 2 + (m & 1) + 4 * (m >> 1)) * 8 + jt) * 32 + lane;
}

/*
 * xs_at - frag_at for the staged kernels of staging @STAGED; HALVED's
 * fragments go operand by operand instead (an operand's 12, HALVED_FRAGS:
 * step 0's 8 MMAs, then the half step's 4, each 512 contiguous bytes), so
 * that its pass's rows fill xs whatever their count of m16 operands.
 */
template <int STAGED>
__device__ __forceinline__ int xs_at(int st, int m, int jt, int lane)
{
	if (STAGED == HALVED)
		return (m * HALVED_FRAGS + 8 * st + jt) * 32 + lane;
	return frag_at(st, m, jt, lane);
}

/*
 * a_pairs - the bf16 pairs of eight consecutive k of an A row (@x: k 2u and
 * 2u + 1 in x[u]) in the k order of a W word's pairs (w4_pair of w >> 4s:
 * k s and s + 4): p[2t] = (k 2t, 2t + 4) and p[2t + 1] = (k 2t + 1, 2t + 5),
 * the low-k and high-k registers of MMA t of the word.
 */
__device__ __forceinline__ void a_pairs(const uint32_t x[4], uint32_t p[4])
{
	p[0] = __byte_perm(x[0], x[2], 0x5410);
	p[1] = __byte_perm(x[0], x[2], 0x7632);
	p[2] = __byte_perm(x[1], x[3], 0x5410);
	p[3] = __byte_perm(x[1], x[3], 0x7632);
}

/*
 * One k step of a lane in registers: its 16 bytes of each half h of W
 * columns g and g + 8 of the warp (w[c][h]) and of rows g + 8 f of the
 * pass (x[f][h], one per n8 operand f); FP8 block scales: the activation
 * scale of row @lane of the pass (lanes 0 .. 8 NP - 1; shuffled to the
 * accumulators' rows) and the W scale of the warp's 16 columns.
 */
template <int NP>
struct step {
	uint32_t w[2][2][4];
	uint32_t x[NP][2][4];
	float as, bs;
};

/*
 * W4A16: one k step of a lane's 2 MG W columns g + 8c of the warp's 16 MG
 * (16 bytes each: words w[c][j]) and their scales (bf16 bits, 0 past N or
 * K), and, separately (fetched as many or fewer steps ahead), its 64 bytes
 * of A rows g + 8 f (x[f][j]).
 */
template <int MG>
struct wstep4 {
	uint32_t w[2 * MG][4];
	uint32_t s[2 * MG];
};

template <int NP>
struct xstep4 {
	uint32_t x[NP][4][4];
};

/* A lane's rows of a pass: the A row of the pass's row g + 8 f (src[f]) and
 * whether it is one of the pass's rows (ok[f]); nf, the n8 operands that hold
 * rows (warp-uniform). */
template <int NP>
struct pass_rows {
	const unsigned char *src[NP];
	bool ok[NP];
	int nf;
};

/* the type of decode's framework block index for staging @STAGED: int for the staged kernels,
 * int64_t for the others (decode's is_block says why) */
template <int STAGED>
struct block_index {
	using type = int;
};
template <>
struct block_index<UNSTAGED> {
	using type = int64_t;
};

/* @d = 0: a tile's sums gone, the accumulators for the next. */
template <int M, int F>
__device__ __forceinline__ void zero_sums(float (&d)[M][F][4])
{
#pragma unroll
	for (int m = 0; m < M; m++)
#pragma unroll
		for (int f = 0; f < F; f++)
#pragma unroll
			for (int j = 0; j < 4; j++)
				d[m][f][j] = 0.0f;
}

/* r = the 16 bytes at @p if @ok, else zeros (nothing read); PF as for ldg16. */
template <int PF = 0>
__device__ __forceinline__ void load16(uint32_t r[4], bool ok, const unsigned char *p)
{
	uint4 v = make_uint4(0u, 0u, 0u, 0u);

	if (ok)
		v = ldg16<PF>(p);
	r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w;
}

/*
 * ring - @total consecutive steps of a warp's k-step sequence, step j as
 * step(constant<j % NS>()): the caller's ring buffers of NS slots (and of
 * any depth dividing NS) are indexed by constants, so they stay in
 * registers and a step refills the slot it consumed instead of shifting
 * the ring down (no register moves).  Unrolled NS times (one copy of the
 * step each; the last round stops at @total).
 */
template <int NS, class F>
__device__ __forceinline__ void ring(int total, F &&step)
{
#pragma unroll 1
	for (int j = 0; j < total; j += NS)
		unroll_for<NS>([&](auto s) {
			if (j + decltype(s)::value < total)
				step(s);
		});
}

/*
 * gather - the valid routed ids of sorted positions base + w0 .. base + w0 +
 * WINDOW - 1 of framework block @fb (rows of it: @rows), in order, into
 * sm.ids; returns their count.  @sid0 is this thread's sorted id for window
 * 0, read early by the caller (-1: none).  Row mode: the block's one routed
 * row, fb.  Positions at or past EM or *num_tokens_post_padded hold none.
 * Called by the whole block; ends with a barrier.
 */
template <class SM>
__device__ __forceinline__ int gather(const moe_gemm_args &a, SM &sm, int64_t fb, int64_t base,
				      int w0, int rows, int ntpp, int sid0)
{
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int i = w0 + (int)threadIdx.x;
	int id = -1, off = 0, total = 0;

	if (i < rows) {
		const int64_t p = base + i;

		if (!a.sorted_ids)
			id = (int)fb;
		else if (p < a.EM && p < ntpp)
			id = w0 == 0 ? sid0 : __ldg(a.sorted_ids + p);
	}
	const bool valid = id >= 0 && id < a.num_valid;
	const unsigned m = __ballot_sync(0xffffffffu, valid);

	if (lane == 0)
		sm.warp_count[warp] = __popc(m);
	__syncthreads();
#pragma unroll
	for (int w = 0; w < MOE_GEMM_THREADS / 32; w++) {
		const int c = sm.warp_count[w];

		off += w < warp ? c : 0;
		total += c;
	}
	if (valid)
		sm.ids[off + __popc(m & ((1u << lane) - 1u))] = id;
	__syncthreads();
	return total;
}

/*
 * decode - moe_gemm.h's semantics for column tiles blockIdx.x, blockIdx.x +
 * gridDim.x, ... (TN columns each) of framework blocks blockIdx.y,
 * blockIdx.y + gridDim.y, ...  Called by all MOE_GEMM_THREADS threads of the
 * block with the same arguments; @sm is the block's shared memory.
 *
 * A pass (up to 8 NP rows of one framework block) streams its column tiles one
 * after another as one sequence of k steps per warp, so the loads of the
 * next tile are in flight while a tile's partial sums meet and its epilogue
 * runs (one barrier per tile: red is double-buffered).
 */
template <int QUANT, int TN, int NP, int STAGED>
__device__ void decode(const moe_gemm_args &a, smem<QUANT, TN, NP, STAGED> &sm)
{
	using S = shape<QUANT, TN, NP>;
	enum { MG = S::MG };   /* not a constexpr local: nvcc 13.0 crashed on one (segmentation fault) */
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int wn = warp % S::WN, kg = warp / S::WN;    /* the warp's 16 MG columns and k slice */
	static_assert(!STAGED || (QUANT == MOE_W4A16 && MG == 1 && NP == 2 && S::WK == 1),
		      "staged kernels are W4A16's, of 16-column warps over all of K");
	static_assert(STAGED || NP == 1, "unstaged kernels take 8 rows a pass");
	/* routed rows a pass (pass_of: the most; rows_a_pass: at this K) */
	enum { PASS = pass_of<NP, STAGED>() };
	static_assert(STAGED != HALVED || PASS % 16 == 0, "HALVED: whole m16 operands a pass");
	static_assert(MOE_DECODE_W4_WIDE_K <= 2 * 128 && MOE_DECODE_W4_WIDE_PASS <= 64 &&
			      MOE_DECODE_W4_STAGE_K >= 4 * 128 && MOE_DECODE_W4_SPASS == 32,
		      "SLOTS: a wide pass's operands 2 and 3 in the places of k steps 2 and 3 (frag_at)");
	const int prows = rows_a_pass<NP, STAGED>(a.K);
	/* W4A16: W steps in flight */
	enum { WD = STAGED ? MOE_DECODE_W4_SDEPTH : S::WDEPTH };

	if (STAGED == SLOTS && a.K > MOE_DECODE_W4_STAGE_K)
		__trap();   /* xs cannot hold the rows: a launch moe_gemm_decode_kernel never makes */
	if (STAGED == STREAMED && a.K <= MOE_DECODE_W4_STAGE_K)
		__trap();   /* steps_on's copies take more k steps: a launch it never makes either */
	if (STAGED == HALVED && a.K != MOE_DECODE_W4_HALVED_K)
		__trap();   /* its steps are that K's: a launch it never makes either */
	static_assert(STAGED != HALVED || (WD == 2 && MOE_DECODE_W4_HALVED_K == 192),
		      "HALVED: a W slot for each of a tile's two k steps, the second a half one");
	const int g = lane >> 2, q = lane & 3;
	const int kbytes = a.K * S::ESZ;   /* of an A row (and of a W row but for W4A16) */
	const int steps = QUANT == MOE_W4A16 ? (a.K + 127) / 128 : (kbytes + S::STEP - 1) / S::STEP;
	const int nst = kg < steps ? (steps - kg + S::WK - 1) / S::WK : 0;   /* this warp's k steps a tile */
	const int tiles = (a.N + TN - 1) / TN;
	const int ntl = (int)blockIdx.x < tiles ? (tiles - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x : 0;
	/* whether @fb is one of the launch's framework blocks: fb < ceil(EM / block_m) (row mode: and
	 * num_valid, expert_ids' entries), tested from the launch's arguments each time.  With that
	 * count held in a register, a 64-bit index and window 0's sorted id held across the passes,
	 * the _s kernel's three m16 operands spilled 8 to 24 bytes on sm_90 or sm_120, or the _sl
	 * kernel did; so the staged kernels also take a block's index as an int (block_index) and
	 * let that id die with its window (sid0 below).  The other kernels keep the 64-bit index and
	 * the id: with those two as well, bf16's and FP8's decode rows ran 1-2% slower; with this
	 * test alone, against the count, 1.004 times as fast on average (0.995 to 1.013 by format:
	 * H200, gpu_bench_moe_decode, bf16, FP8 and INT4 at 1 to 64 tokens, 136 rows, as ALT of the
	 * build before, two runs) */
	auto is_block = [&](int64_t fb) { return fb * a.block_m < a.EM && (a.sorted_ids || fb < a.num_valid); };

	/* the first column of this block's tile t */
	auto tile_n0 = [&](int t) { return ((int)blockIdx.x + t * (int)gridDim.x) * TN; };

	/* valid rows ids[r0 .. r0 + nr) of an expert on another rank: zeros in every tile */
	auto zeros = [&](int r0, int nr) {
		for (int t = 0; t < ntl; t++)
			for (int i = threadIdx.x; i < nr * TN; i += MOE_GEMM_THREADS) {
				const int n = tile_n0(t) + i % TN;

				if (n < a.N)
					((__nv_bfloat16 *)a.c)[(int64_t)sm.ids[r0 + i / TN] * a.c_stride_m + n] =
						__float2bfloat16(0.0f);
			}
	};

	/*
	 * factors - the factors of the pass of rows ids[r0 .. r0 + nr) of expert @e that do not
	 * change from tile to tile into sm.row_w, sm.row_as and sm.ts (STAGED: and each row's place
	 * in C, sm.row_c), read by the epilogues of
	 * all its tiles.  Called after the pass's first k steps are asked for, so that these
	 * reads travel with them: in the epilogue they were one more round trip to memory after
	 * every tile's meeting, and the decode kernels at a few tokens are a chain of such trips
	 * (ncu, H200, moe_gemm_fp8_d128 at Kimi K2's down GEMM, 1 token: 5% of the warps' stall
	 * samples waited on the per-tensor scale after the meeting).  Published by the meeting's
	 * barrier; the barrier that ends the pass keeps the next pass from overwriting them early.
	 */
	auto factors = [&](int64_t e, int r0, int nr) {
		const int t = threadIdx.x;

		if (t < nr) {
			const int id = sm.ids[r0 + t];

			if (a.mul_routed_weight)
				sm.row_w[t] = __ldg(a.topk_weights + id);
			if (STAGED)
				sm.row_c[t] = (int64_t)id * a.c_stride_m;
			if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_CHANNEL)
				sm.row_as[t] = moe_epilogue::act_scale(a, id);
		}
		/* a thread of another warp than the rows', so that the two waits overlap */
		if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_TENSOR && t == 32)
			sm.ts = __ldg(a.a_scale) * __ldg((const float *)a.b_scale + e * a.bs_stride_e);
	};

	/* tile @t's epilogue: the k slices' sums (buffer @rb) in warp order, scale, bias,
	 * routed weight, bf16, a column pair at a time (moe_epilogue::values: no per-column
	 * tests where no bias is added and both columns are inside N); the pass's factors from
	 * sm (factors) */
	auto epilogue = [&](int64_t e, int r0, int nr, int t, int rb) {
		const int n0 = tile_n0(t);
		const float ts = QUANT == MOE_FP8 && a.scale == MOE_SCALE_TENSOR ? sm.ts : 1.0f;
#pragma unroll 1
		for (int i = threadIdx.x; i < nr * (TN / 2); i += MOE_GEMM_THREADS) {
			const int row = i / (TN / 2), col = 2 * (i % (TN / 2)), n = n0 + col;
			if (n >= a.N)
				continue;
			const int id = sm.ids[r0 + row];
			float as = 1.0f, w = 1.0f, cw[2], v[2];
			float x[2] = { sm.red[rb][0][row][col], sm.red[rb][0][row][col + 1] };

			if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_CHANNEL) {
				as = sm.row_as[row];
				moe_epilogue::col_scales<2>(a, e, n, cw);
				/* the 128-column kernels (the down GEMM's short K: an epilogue every
				 * two or so k steps) ask L2 for the next tile's scales here, so that
				 * its epilogue does not wait on memory for them: H200, against the
				 * kernels before as ALT, three runs, Kimi K2's down GEMM at 8 to 64
				 * tokens 0.64-0.68 of the floor against 0.60-0.65 (per tensor
				 * unchanged).  The narrower kernels spill 16 bytes with it on sm_90 */
				if (TN == 128 && row == 0 && t + 1 < ntl && n + (int)gridDim.x * TN < a.N)
					prefetch_l2((const float *)a.b_scale + e * a.bs_stride_e +
						    (int64_t)(n + (int)gridDim.x * TN) * a.bs_stride_n);
			}
			if (a.mul_routed_weight)
				w = sm.row_w[row];
#pragma unroll
			for (int k = 1; k < S::WK; k++)
#pragma unroll
				for (int j = 0; j < 2; j++)
					x[j] += sm.red[rb][k][row][col + j];
			if constexpr (S::PAIR_VALUES)
				moe_epilogue::values<QUANT, 2>(a, x, e, n, ts, as, w, cw, v);
			else
				moe_epilogue::each_value<QUANT, 2>(a, x, e, n, ts, as, w, v);
			moe_epilogue::store_pair(a, id, n, v);
		}
	};

	/* tile @t's k slices meet (buffer t & 1: the one before was read by every thread
	 * before it passed the last barrier), then its epilogue.  The barrier is the
	 * non-.aligned one: warps of fewer k steps, or none, reach it from another
	 * unrolled copy of their k loop (ring) or after it, and __syncthreads' bar.sync
	 * requires every thread at one instruction (compute-sanitizer synccheck:
	 * "divergent thread(s) in block") */
	auto meet = [&](const float (&acc)[MG][NP][4], int64_t e, int r0, int nr, int t) {
#pragma unroll
		for (int m = 0; m < MG; m++)
#pragma unroll
			for (int f = 0; f < NP; f++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					sm.red[t & 1][kg][8 * f + 2 * q + (j & 1)][(wn * MG + m) * 16 + g + 8 * (j >> 1)] =
						acc[m][f][j];
		barrier_sync<1, MOE_GEMM_THREADS>();
		epilogue(e, r0, nr, t, t & 1);
	};

	/* this lane's rows of the pass of rows ids[r0 .. r0 + nr) */
	auto rows_of = [&](int r0, int nr) {
		pass_rows<NP> p;

#pragma unroll
		for (int f = 0; f < NP; f++) {
			p.ok[f] = g + 8 * f < nr;
			p.src[f] = (const unsigned char *)a.a +
				   (p.ok[f] ? (int64_t)(sm.ids[r0 + g + 8 * f] / a.top_k) * a.a_stride_m * S::ESZ : 0);
		}
		p.nf = (nr + 7) / 8;
		return p;
	};

	/* one pass: valid rows ids[r0 .. r0 + nr) (nr <= PASS) of expert @e >= 0, every tile of the block */
	auto pass = [&](auto block, int64_t e, int r0, int nr) {
		constexpr bool BLOCK = decltype(block)::value;
		const unsigned char *wexp = (const unsigned char *)a.b + e * a.b_stride_e * S::ESZ;
		const pass_rows<NP> xr = rows_of(r0, nr);
		/* block scales: row @lane of the pass */
		const bool asok = BLOCK && lane < nr;
		const float *ascale = a.a_scale + (asok ? (int64_t)(sm.ids[r0 + lane] / a.top_k) * a.as_stride_m : 0);
		int ft = 0, fi = 0;   /* the next step to fetch: tile ft, the warp's step fi of it */
		/* BLOCK: the row of W block scales of tile ft's 16 columns of the warp (-1 past N),
		 * found once a tile and kept in sm.bsr[threadIdx.x].  The division by group_n at
		 * every step had held these kernels back: against it (H200, gpu_bench_moe_decode,
		 * each build as ALT in alternating processes, two runs each) Kimi K2's down GEMM at
		 * 16 and 64 tokens ran at 0.67 and 0.73 of the floor against 0.58-0.60 and
		 * 0.62-0.63, GLM-4.7's at 0.44-0.46 against 0.38-0.39 at 16, the gate/up at 1 to 4
		 * tokens 0.01-0.06 faster; per tensor within 0.01 */
		auto point = [&]() {
			if (BLOCK)
				sm.bsr[threadIdx.x] = moe_epilogue::block_row(a, tile_n0(ft) + wn * 16);
		};
		point();

		/* the next step of the warp's sequence (tile ft, step kg + fi WK of K) into @s; none past the last */
		auto fetch = [&](step<NP> &s) {
			if (ft >= ntl || nst == 0)
				return;
			const int st = kg + fi * S::WK, wcol = tile_n0(ft) + wn * 16;
#pragma unroll
			for (int h = 0; h < 2; h++) {
				const int o = st * S::STEP + 64 * h + 16 * q;
				const bool in = o < kbytes;   /* K % 16 == 0: 16 bytes are all in or all out */

#pragma unroll
				for (int c = 0; c < 2; c++) {
					const int col = wcol + g + 8 * c;

					load16<MOE_GEMM_W_PREFETCH>(s.w[c][h], in && col < a.N,
								    wexp + (int64_t)col * a.b_stride_n * S::ESZ + o);
				}
#pragma unroll
				for (int f = 0; f < NP; f++)
					load16(s.x[f][h], in && xr.ok[f], xr.src[f] + o);
			}
			if (BLOCK) {
				s.as = asok ? __ldg(ascale + (int64_t)st * a.as_stride_k) : 0.0f;
				const int bsr = sm.bsr[threadIdx.x];

				s.bs = bsr >= 0 ? __ldg((const float *)a.b_scale + e * a.bs_stride_e +
							(int64_t)bsr * a.bs_stride_n + (int64_t)st * a.bs_stride_k)
						: 0.0f;
			}
			if (++fi == nst) {
				fi = 0, ft++;
				point();
			}
		};

		/* d += the products of step @s: four MMAs per n8 operand that holds rows */
		auto dots = [&](float (&d)[NP][4], const step<NP> &s) {
#pragma unroll
			for (int h = 0; h < 2; h++)
#pragma unroll
				for (int t = 0; t < 2; t++) {
					const uint32_t af[4] = { s.w[0][h][2 * t], s.w[1][h][2 * t], s.w[0][h][2 * t + 1],
								 s.w[1][h][2 * t + 1] };

#pragma unroll
					for (int f = 0; f < NP; f++)
						if (f < xr.nf) {
							if (QUANT == MOE_FP8)
								mma_e4m3(d[f], af, s.x[f][h][2 * t], s.x[f][h][2 * t + 1]);
							else
								mma_bf16(d[f], af, s.x[f][h][2 * t], s.x[f][h][2 * t + 1]);
						}
				}
		};

		/* acc[0] += the products of step @s (BLOCK: times its scales) */
		auto add = [&](float (&acc)[MG][NP][4], const step<NP> &s) {
			if (BLOCK) {
				/* one step is one 128 x 128 group: acc += (dot * a_scale) * b_scale */
				float part[NP][4] = {};

				dots(part, s);
#pragma unroll
				for (int f = 0; f < NP; f++)
#pragma unroll
					for (int j = 0; j < 4; j++) {
						const float as = __shfl_sync(0xffffffffu, s.as, 8 * f + 2 * q + (j & 1));

						acc[0][f][j] += part[f][j] * as * s.bs;
					}
			} else {
				dots(acc[0], s);
			}
		};

		step<NP> buf[S::DEPTH];
#pragma unroll
		for (int d = 0; d < S::DEPTH; d++)
			fetch(buf[d]);
		factors(e, r0, nr);
		/* step j of the sequence in buf[j % DEPTH] (slots by constant: ring), refilled with
		 * step j + DEPTH once added.  Shifting the steps down a buffer made the warp wait, at
		 * the register move, on the load of the step after the one just added (ncu, H200:
		 * bf16_d32 at Kimi K2's gate/up, 16 tokens, 54% of the stall samples; fp8_d128 at its
		 * down GEMM, 16 tokens, 20%).  Measured on an H200 against the shifting kernels in one
		 * run (gpu_bench_moe_decode, bf16 at TP8, both models and GEMMs, 1 to 256 tokens, two
		 * runs): 1.02 to 1.17 times as fast, Kimi K2's gate/up at 16 tokens 0.88 of the floor
		 * against 0.78.  FP8 shifted until the ring stopped spilling on sm_90 (mma_e4m3's
		 * converted fragments); with the ring (and the epilogue's values(), +0.01 to 0.02 alone)
		 * its down GEMM ran, against the shifting kernels (H200, gpu_bench_moe_decode, each build
		 * as ALT in alternating processes, per tensor, two runs each), at Kimi K2's 16 and 64
		 * tokens 0.60 and 0.68 of the floor against 0.55-0.56 and 0.63-0.64, GLM-4.7's 0.42-0.43
		 * and 0.49 against 0.38-0.39 and 0.43-0.44; the gate/up at 1 to 4 tokens 0.01 to 0.03
		 * faster.  acc[0][f]: columns g, g + 8 (c0 c1, c2 c3) x rows 8 f + 2q, 8 f + 2q + 1
		 * of the pass */
		float acc[MG][NP][4] = {};
		int t = 0, i = 0;

		ring<S::DEPTH>(ntl * nst, [&](auto slot) {
			add(acc, buf[decltype(slot)::value]);
			fetch(buf[decltype(slot)::value]);
			if (++i == nst) {
				meet(acc, e, r0, nr, t++);
				i = 0;
				zero_sums(acc);
			}
		});
		for (; t < ntl; t++)   /* a warp without k steps: zeros at every tile's meeting */
			meet(acc, e, r0, nr, t);
	};

	/* W4A16's pass: the same sequence of k steps, W and its scales WDEPTH steps ahead in a
	 * ring (slots by constant: ring), A one step ahead (from L1 or L2, the same bytes for
	 * every tile; a second step of A in flight spills the 128-column kernel on sm_90; each
	 * 16 bytes of A refilled as soon as taken, under the step's MMAs, ran 0.81 to 1.00 the
	 * fraction of the floor, 0.89 on average: H200, INT4, 8 rows a pass, both models and
	 * GEMMs, 1 to 64 tokens, two runs each way).
	 * STAGED: up to rows_a_pass rows a pass (MOE_DECODE_W4_SPASS, SLOTS' wide passes
	 * MOE_DECODE_W4_WIDE_PASS, HALVED's MOE_DECODE_W4_HALVED_PASS), and W is the n8
	 * operand, the rows the m16 one (two of them, three; HALVED's one at a time), so
	 * that each W fragment dequantized serves every row of the
	 * pass.  The rows are copied into xs at the pass's start (SLOTS, K up to
	 * MOE_DECODE_W4_STAGE_K: the down GEMM) or a step at a time (STREAMED: steps_on),
	 * already as fragments (frag_at: one 16-byte read a lane and MMA), and the
	 * warp's sums leave straight from its accumulators (store_tile): the warp owns its 16
	 * columns of every tile over all of K (WK 1), so no partial sums meet and no barrier
	 * stands between tiles.  ncu, H200, GLM-4.7's down GEMM at 512 tokens: 48.8 M warp
	 * instructions, against 95.4 M for the kernel before, of 16 rows a pass read from xs as
	 * n8 operands (13% of them dequantizing, the rest the meetings, their epilogues and the
	 * reads of A around each fragment) */
	auto pass4 = [&](int64_t e, int r0, int nr) {
		const unsigned char *wexp = (const unsigned char *)a.b + e * a.b_stride_e;
		const uint16_t *sexp = (const uint16_t *)a.b_scale + e * a.bs_stride_e;
		const int gshift = __ffs(a.group_size) - 1;   /* group_size: a power of two >= 32 */
		const pass_rows<NP> xr = rows_of(r0, nr);
		const int nm = (nr + 15) / 16;   /* STAGED: the m16 operands that hold rows */
		int wt = 0, wi = 0, xt = 0, xi = 0;   /* the next W and A steps to fetch: tile, step */
		wstep4<MG> wb[WD];   /* step j of the sequence in wb[j % WD] */
		xstep4<NP> xb;       /* its A (STAGED: in xs) */

		/* W and scales of the warp's next step (tile wt, step kg + wi WK of K); none past the last */
		/* the W and scale rows of the lane's first column of tile wt (its column c, c < 2 MG,
		 * is 8 c rows further), formed once per tile rather than at every step; how many of
		 * them are inside N */
		const unsigned char *wrow;
		const uint16_t *srow;
		int wok;   /* the lane's columns col + 8 c inside N: c < wok */
		auto point_w = [&]() {
			const int col = tile_n0(wt) + wn * 16 * MG + g;

			wok = col < a.N ? (a.N - col + 7) / 8 : 0;
			wrow = wexp + (int64_t)col * a.b_stride_n;
			srow = sexp + (int64_t)col * a.bs_stride_n;
		};
		point_w();
		auto fetch_w = [&](wstep4<MG> &s, auto halfc) {
			constexpr bool half = decltype(halfc)::value;   /* HALVED's second step: 16 k a lane */

			if (wt >= ntl || nst == 0)
				return;
			const int st = kg + wi * S::WK, k = st * 128 + (half ? 16 : 32) * q;
			const bool in = k < a.K;   /* K % 32 == 0: the lane's 32 k are all in or all out */

#pragma unroll
			for (int c = 0; c < 2 * MG; c++) {
				const bool ok = in && c < wok;

				if constexpr (half) {
					const uint2 v = ok ? __ldg((const uint2 *)(wrow + 8 * c * a.b_stride_n + k / 2))
							   : make_uint2(0u, 0u);

					s.w[c][0] = v.x, s.w[c][1] = v.y;
				} else {
					load16<MOE_GEMM_W_PREFETCH>(s.w[c], ok, wrow + 8 * c * a.b_stride_n + k / 2);
				}
				s.s[c] = ok ? __ldg(srow + 8 * c * a.bs_stride_n + (k >> gshift)) : 0u;
			}
			if (++wi == nst) {
				wi = 0, wt++;
				point_w();
			}
		};

		/* A of the warp's next step (the same k for every tile; none when STAGED) */
		auto fetch_x = [&](xstep4<NP> &s) {
			if (STAGED || xt >= ntl || nst == 0)
				return;
			const int k = (kg + xi * S::WK) * 128 + 32 * q;

#pragma unroll
			for (int f = 0; f < NP; f++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					load16(s.x[f][j], xr.ok[f] && k < a.K, xr.src[f] + (int64_t)k * 2 + 16 * j);
			if (++xi == nst)
				xi = 0, xt++;
		};

		/* @body(j, wf) for each word j < @jc (4; HALVED's second step 2) of step @w, wf[c][s]
		 * its bf16 pairs (k s, k s + 4), s = 0..3, of the lane's column c, scaled (w4_pair) */
		auto words = [&](const wstep4<MG> &w, auto jc, auto &&body) {
			__nv_bfloat162 sc[2 * MG];

#pragma unroll
			for (int c = 0; c < 2 * MG; c++)
				sc[c] = __bfloat162bfloat162(__ushort_as_bfloat16((unsigned short)w.s[c]));
#pragma unroll
			for (int j = 0; j < decltype(jc)::value; j++) {
				uint32_t wf[2 * MG][4];

#pragma unroll
				for (int c = 0; c < 2 * MG; c++)
#pragma unroll
					for (int p = 0; p < 4; p++)
						wf[c][p] = w4_pair(w.w[c][j] >> (4 * p), sc[c]);
				body(j, wf);
			}
		};

		/* d += the products of one step: W dequantized word by word, eight MMAs per n8 operand
		 * that holds rows and 16-column group m of the warp (d[m]) */
		auto dots = [&](float (&d)[MG][NP][4], const wstep4<MG> &w) {
			words(w, constant<4>(), [&](int j, const uint32_t (&wf)[2 * MG][4]) {
#pragma unroll
				for (int f = 0; f < NP; f++) {
					if (f >= xr.nf)
						continue;
					uint32_t xp[4];

					a_pairs(xb.x[f][j], xp);
#pragma unroll
					for (int m = 0; m < MG; m++)
#pragma unroll
						for (int t = 0; t < 2; t++) {
							const uint32_t af[4] = { wf[2 * m][2 * t], wf[2 * m + 1][2 * t],
										 wf[2 * m][2 * t + 1], wf[2 * m + 1][2 * t + 1] };

							mma_bf16(d[m][f], af, xp[2 * t], xp[2 * t + 1]);
						}
				}
			});
		};

		/* STAGED: d[m][c] += the products of one step for the pass's m16 operands m < NM (the
		 * ones that hold rows, d's count: a constant, so that the MMAs are not predicated) and
		 * the lane's n8 operand c (columns 8 c .. 8 c + 7 of the warp's 16), in the order of
		 * dots' (word j, then MMA t); A's fragments from xs, the step's first of the lane at
		 * shared address @xa (frag_at) */
		auto sdots = [&](auto &d, const wstep4<MG> &w, uint32_t xa) {
			constexpr int NM = sizeof d / sizeof d[0];

			words(w, constant<4>(), [&](int j, const uint32_t (&wf)[2 * MG][4]) {
#pragma unroll
				for (int t = 0; t < 2; t++)
#pragma unroll
					for (int m = 0; m < NM; m++) {
						const uint4 v = lds128(xa + (uint32_t)(frag_at(0, m, 2 * j + t, 0) * 16));
						const uint32_t af[4] = { v.x, v.y, v.z, v.w };

#pragma unroll
						for (int c = 0; c < 2; c++)
							mma_bf16(d[m][c], af, wf[c][2 * t], wf[c][2 * t + 1]);
					}
			});
		};

		/* STAGED: no bias, and C's rows all 4-byte aligned, so that store_tile's pairs
		 * are whole words wherever the warp's 16 columns lie below N */
		const bool plain = !a.bias && ((uintptr_t)a.c & 3) == 0 && (a.c_stride_m & 1) == 0;

		/* STAGED: tile @t's sums of the warp's columns straight from its accumulators (d[m][c]
		 * of m16 operand @m0 + m: rows 16 (m0 + m) + g and 16 (m0 + m) + g + 8 of the pass,
		 * columns 8 c + 2q and 8 c + 2q + 1 of the warp's 16) through the epilogue's values and
		 * pair stores, as the meeting's epilogue does with the same sums.  Where the launch is
		 * plain and the warp's 16 columns lie below N, the same products (values' x * 1.0 *
		 * w: no bias, no FP8 scale) go out as whole words at each row's place in C, found
		 * once a pass (factors: sm.row_c), with no test but the row's: about 35 instructions
		 * an operand on sm_120 against about 130 through values and store_pair, where the
		 * _sh kernel's 24 MMAs an operand take about 50 (a loop of its own: as a branch in
		 * the general loop's rows, sm_120's code found each row's shared-memory place again,
		 * about 26 instructions a row against 17).  H200 (gpu_bench_moe_decode, INT4
		 * at TP8, both builds in alternating processes, two runs each): the down GEMM from
		 * 512 tokens 1.15-1.18 times as fast on Kimi K2 (181-182 us against 208-210 at 512,
		 * 713-716 against 840 at 4096), GLM-4.7's 1.10 at 512 and 1.13-1.16 at 1024 to
		 * 4096 (136 against 156 at 1024), 1.08 at 256; the gate/up (_sl, K 7168 and 5120:
		 * a store every 56 or 40 k steps) within 1.5%, but GLM-4.7's at 512 tokens, 1.04-1.06.
		 * One loop over the operands here: a lambda of one operand, called for each,
		 * scheduled the _s and _sl kernels' code otherwise on sm_90 */
		auto store_tile = [&](const auto &d, int m0, int t) {
			constexpr int NM = sizeof d / sizeof d[0];   /* d[m]: m16 operand m0 + m */
			const int n0 = tile_n0(t) + wn * 16 + 2 * q;   /* the lane's first column */

			if (plain && n0 - 2 * q + 16 <= a.N) {
#pragma unroll
				for (int m = 0; m < NM; m++)
#pragma unroll
					for (int h = 0; h < 2; h++) {
						const int row = 16 * (m0 + m) + g + 8 * h;

						if (row >= nr)
							continue;
						__nv_bfloat16 *dst = (__nv_bfloat16 *)a.c + sm.row_c[row] + n0;
						const float w = a.mul_routed_weight ? sm.row_w[row] : 1.0f;

#pragma unroll
						for (int c = 0; c < 2; c++)
							*(uint32_t *)(dst + 8 * c) = pack_bf16(d[m][c][2 * h] * w,
											       d[m][c][2 * h + 1] * w);
					}
				return;
			}
#pragma unroll
			for (int m = 0; m < NM; m++)
#pragma unroll
				for (int h = 0; h < 2; h++) {
					const int row = 16 * (m0 + m) + g + 8 * h;

					if (row >= nr)
						continue;
					const int id = sm.ids[r0 + row];
					const float w = a.mul_routed_weight ? sm.row_w[row] : 1.0f;

#pragma unroll
					for (int c = 0; c < 2; c++) {
						const int n = n0 + 8 * c;
						const float x[2] = { d[m][c][2 * h], d[m][c][2 * h + 1] };
						float cw[2], v[2];

						if (n >= a.N)
							continue;
						moe_epilogue::values<QUANT, 2>(a, x, e, n, 1.0f, 1.0f, w, cw, v);
						moe_epilogue::store_pair(a, id, n, v);
					}
				}
		};

		/* STAGED: the pass's A rows as m16 fragments in xs (frag_at), slot by slot, a slot a k
		 * step of every row: piece @p (row p / 16 of the pass, the 16 bytes at k 8 (p % 16) of
		 * k step @ks) read (stage_load: zeros past K and for the rows past nr) and stored in
		 * slot @sl (stage_store) by the same byte permutes as W's pairs (a_pairs): the 16 bytes
		 * of a row at k 8 j .. 8 j + 7 of lane quad q's 32 are the row's half (word (r & 8) / 8
		 * of the low-k pair, 2 + that of the high) of MMA 2j's and MMA 2j + 1's fragments of
		 * lane 4 (r & 7) + q */
		auto a_row = [&](int r) {   /* the A row of the pass's row @r, or NULL past nr */
			return r < nr ? (const unsigned char *)a.a + (int64_t)(sm.ids[r0 + r] / a.top_k) * a.a_stride_m * 2
				      : nullptr;
		};
		auto stage_load = [&](const unsigned char *row, int p, int ks) {
			const int k = ks * 128 + 8 * (p & 15);

			return row && k < a.K ? ldg16(row + 2 * k) : make_uint4(0u, 0u, 0u, 0u);
		};
		auto stage_store = [&](int p, int sl, uint4 v, auto halfc) {   /* half: 16 k a lane quad */
			constexpr bool half = decltype(halfc)::value;
			const int r = p >> 4, c = p & 15, j = half ? c & 1 : c & 3, qc = half ? c >> 1 : c >> 2;
			const int f0 = 4 * xs_at<STAGED>(sl, r >> 4, 2 * j, 4 * (r & 7) + qc) + ((r >> 3) & 1);
			const uint32_t x[4] = { v.x, v.y, v.z, v.w };
			uint32_t *xw = (uint32_t *)sm.xs, pr[4];

			a_pairs(x, pr);
			xw[f0] = pr[0];
			xw[f0 + 2] = pr[1];
			xw[f0 + 4 * 32] = pr[2];   /* MMA 2j + 1: 32 fragments on */
			xw[f0 + 4 * 32 + 2] = pr[3];
		};
		/* STREAMED: the steps through two of xs's slots (steps_on: a barrier a step); SLOTS:
		 * every step in its own, filled once at the pass's start */
		constexpr bool stream = STAGED == STREAMED;

		if constexpr (STAGED == HALVED) {
			fetch_w(wb[0], constant<false>());
			fetch_w(wb[1], constant<true>());
		} else {
#pragma unroll
			for (int d = 0; d < WD; d++)
				fetch_w(wb[d], constant<false>());
		}
		factors(e, r0, nr);
		uint32_t xa0 = 0;   /* STAGED: the lane's first fragment (frag_at(0, 0, 0, lane)) */
		if (STAGED) {
			/* under the first W steps' loads, row by row; stream's rows for its copies */
			const int sst = stream ? 1 : steps;

			if (stream && threadIdx.x < MOE_DECODE_W4_SPASS)
				sm.arow[threadIdx.x] = a_row(threadIdx.x);
			for (int i = threadIdx.x; i < 16 * nm * sst * 16; i += MOE_GEMM_THREADS) {
				const int r = i / (sst * 16), c = i % (sst * 16);

				if (STAGED == HALVED && c >> 4 == 1) {   /* its 64 k: pieces 0..7 of a row */
					if ((c & 15) < 8)
						stage_store(16 * r + (c & 15), 1, stage_load(a_row(r), 16 * r + (c & 15), 1),
							    constant<true>());
				} else {
					stage_store(16 * r + (c & 15), c >> 4, stage_load(a_row(r), 16 * r + (c & 15), c >> 4),
						    constant<false>());
				}
			}
			__syncthreads();
			xa0 = smem_u32(&sm.xs[frag_at(0, 0, 0, lane)]);
		}
		fetch_x(xb);
		int t = 0, i = 0;

		if constexpr (STAGED == HALVED) {
			/*
			 * A tile's W over the whole of K, dequantized once and held (wd[c][jj]: the
			 * lane's column c, word jj of the first step's four and the half step's two,
			 * its pairs as words() gives them), then multiplied by the pass's m16
			 * operands one at a time in the k order of sdots' (word, then MMA), so that
			 * the sums are the _s kernel's and a pass takes as many rows as xs holds
			 * (MOE_DECODE_W4_HALVED_PASS) at one dequantization a tile.  The next
			 * tile's W is asked for before the rows are multiplied.
			 */
			uint32_t wd[2][6][4];
			auto hold = [&](const wstep4<MG> &w, auto halfc) {
				constexpr bool half = decltype(halfc)::value;

				words(w, constant<half ? 2 : 4>(), [&](int j, const uint32_t (&wf)[2 * MG][4]) {
#pragma unroll
					for (int c = 0; c < 2; c++)
#pragma unroll
						for (int p = 0; p < 4; p++)
							wd[c][(half ? 4 : 0) + j][p] = wf[c][p];
				});
			};
			/* m16 operand @m of the pass times tile @t's held W, stored.  One operand at a
			 * time: two (16 accumulators beside wd and the next tile's W) spilled 12 bytes on
			 * sm_90, and two with the next tile's W copied into shared memory (cp.async) to
			 * free those registers ran no faster (H200, gpu_bench_moe_decode, GLM-4.7's
			 * down GEMM at TP8, in one process: 512 to 1536 tokens 0.3-1.2% slower, 256 6%) */
			auto rows_by = [&](int m, int t) {
				float d[1][NP][4] = {};

#pragma unroll
				for (int jj = 0; jj < 6; jj++)
#pragma unroll
					for (int u = 0; u < 2; u++) {
						const uint4 v = lds128(xa0 + (uint32_t)((m * HALVED_FRAGS + 2 * jj + u) * 512));
						const uint32_t af[4] = { v.x, v.y, v.z, v.w };

#pragma unroll
						for (int c = 0; c < 2; c++)
							mma_bf16(d[0][c], af, wd[c][jj][2 * u], wd[c][jj][2 * u + 1]);
					}
				store_tile(d, m, t);
			};
#pragma unroll 1
			for (; t < ntl; t++) {
				hold(wb[0], constant<false>());
				fetch_w(wb[0], constant<false>());
				hold(wb[1], constant<true>());
				fetch_w(wb[1], constant<true>());
#pragma unroll 1
				for (int m = 0; m < nm; m++)
					rows_by(m, t);
			}
		} else if constexpr (STAGED) {
			/* the pass's steps on @nmc m16 operands (a constant: sdots), each tile's sums stored
			 * by its warps (store_tile) from their accumulators d */
			auto steps_on = [&](auto nmc) {
				constexpr int NM = decltype(nmc)::value;
				float d[NM][NP][4] = {};

				/* stream: this thread's pieces of step @u of the sequence (k step @ks, NM t + h,
				 * h < NM: one row) copied (cp.async, a group a call) into raw slot u & 1, xs's
				 * slot 2 + (u & 1), piece p at 16 p, two steps ahead; then, a step ahead, by the
				 * thread itself into the fragments of slot u & 1 (raw_to_slot) */
				auto raw_at = [&](int u) {
					return smem_u32(&sm.xs[frag_at(2 + (u & 1), 0, 0, 0)]) + 16 * NM * (int)threadIdx.x;
				};
				auto copy = [&](int u, int ks) {
					if (u < ntl * nst) {
						const unsigned char *row = sm.arow[(NM * (int)threadIdx.x) >> 4];
#pragma unroll
						for (int h = 0; h < NM; h++) {
							const int k = ks * 128 + 8 * ((NM * (int)threadIdx.x + h) & 15);
							const bool ok = row && k < a.K;

							cp_async16(raw_at(u) + 16 * h, ok ? row + 2 * k : a.a, ok ? 16 : 0);
						}
					}
					cp_async_commit();
				};
				auto raw_to_slot = [&](int u) {
					if (u < ntl * nst)
#pragma unroll
						for (int h = 0; h < NM; h++)
							stage_store(NM * (int)threadIdx.x + h, u & 1, lds128(raw_at(u) + 16 * h),
								    constant<false>());
				};
				if (stream) {   /* nst > 4: steps 1 and 2 are k steps 1 and 2 */
					copy(1, 1);
					copy(2, 2);
				}

				ring<WD>(ntl * nst, [&](auto slot) {
					constexpr int sl = decltype(slot)::value;
					const int u = t * nst + i;   /* stream: the step, in slot u & 1 */

					if (stream) {
						/* step u + 1, copied two steps ago, into slot (u + 1) & 1, read at step
						 * u - 1 by every warp (the barrier below); step u + 3 (k step i + 3,
						 * of this tile or the next) copied into the raw slot just emptied */
						cp_async_wait<1>();
						raw_to_slot(u + 1);
						copy(u + 3, i + 3 < nst ? i + 3 : i + 3 - nst);
					}
					/* step i or u: frag_at(i or u & 1, 0, 0, lane) */
					sdots(d, wb[sl], xa0 + (uint32_t)(stream ? u & 1 : i) * 8192u);
					fetch_w(wb[sl], constant<false>());
					if (stream)
						barrier_sync<1, MOE_GEMM_THREADS>();   /* slot (u + 1) & 1 full, u & 1 read */
					if (++i == nst) {
						store_tile(d, 0, t++);
						i = 0;
						zero_sums(d);
					}
				});
			};
			if (STAGED == SLOTS && nm == 3)
				steps_on(constant<3>());
			else if (nm == 2)
				steps_on(constant<2>());
			else
				steps_on(constant<1>());
		} else {
			float acc[MG][NP][4] = {};

			ring<WD>(ntl * nst, [&](auto slot) {
				constexpr int sl = decltype(slot)::value;

				dots(acc, wb[sl]);
				fetch_w(wb[sl], constant<false>());
				fetch_x(xb);
				if (++i == nst) {
					meet(acc, e, r0, nr, t++);
					i = 0;
					zero_sums(acc);
				}
			});
			for (; t < ntl; t++)   /* a warp without k steps: zeros at every tile's meeting */
				meet(acc, e, r0, nr, t);
		}
	};

	/* the framework blocks of this block, one copy per FP8 scale treatment (BLOCK: per step) */
	auto run = [&](auto block) {
		const int rows = a.sorted_ids ? a.block_m : 1;
		int ntpp = 0;

		for (typename block_index<STAGED>::type fb = blockIdx.y; is_block(fb); fb += gridDim.y) {
			const int64_t base = (int64_t)fb * a.block_m;

			if (fb != blockIdx.y && base >= ntpp)
				break;   /* the count is known: no read past it at the block's end */
			/* the framework block's expert and this thread's sorted id, then the count,
			 * in flight together (ld_relaxed keeps them so, the sorted id's read outside a
			 * branch); used once the count allows.  ncu, H200, moe_gemm_fp8_d128 at Kimi
			 * K2's down GEMM, 1 token: with the count read first, its wait came before
			 * these were asked for (11% of the warps' stall samples), and each block
			 * ended on one more read of them.  With factors (above), against the kernels
			 * before (H200, gpu_bench_moe_decode, each build as ALT of the other, two
			 * runs each, bf16, FP8 of every scale layout and INT4, both models and
			 * GEMMs, 1 to 64 tokens): 0.98 to 1.11 times the fraction of the floor,
			 * 1.026 on average over the 102 rows; Kimi K2's FP8 down GEMM at 1 token
			 * 0.25 against 0.24, per block at 16 tokens 0.70 against 0.65 */
			const bool has = a.sorted_ids && (int)threadIdx.x < rows && base + threadIdx.x < a.EM;
			const int64_t e = ld_relaxed(a.expert_ids + fb);
			const int sid = ld_relaxed(has ? a.sorted_ids + base + threadIdx.x : a.num_tokens_post_padded);
			int sid0 = has ? sid : -1;

			ntpp = ld_relaxed(a.num_tokens_post_padded);
			if (base >= ntpp)
				break;   /* so are the blocks after it */
			for (int w0 = 0; w0 < rows; w0 += S::WINDOW) {
				const int cnt = gather(a, sm, fb, base, w0, rows, ntpp, sid0);

				if (STAGED)
					sid0 = -1;   /* window 0's only (is_block says why it dies here) */

				for (int r0 = 0; r0 < cnt; r0 += prows) {
					const int nr = cnt - r0 < prows ? cnt - r0 : prows;

					if (e < 0)
						zeros(r0, nr);
					else if (QUANT == MOE_W4A16)
						pass4(e, r0, nr);
					else
						pass(block, e, r0, nr);
					__syncthreads();   /* ids and red are read no more */
				}
			}
		}
	};
	if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_BLOCK)
		run(constant<1>());
	else
		run(constant<0>());
}

} /* namespace moe_decode */

#endif

/*
 * moe_gemm.cuh - the device code of the fused-MoE grouped GEMM of
 * moe_gemm.h, as a template: moe_gemm.cu instantiates the bundled
 * moe_gemm_* kernels from it, and the reference engine's stand-ins
 * (engine/gpu/standin.cu) run its 128 x 256 tile.  No kernel is defined
 * here.
 *
 * SM120-sized tiles: a cp.async pipeline of A and W k tiles in XOR-swizzled
 * shared memory, ldmatrix fragments and mma.sync (bf16 m16n8k16, or E4M3
 * m16n8k32 for w8a8).  4-bit weights are staged packed and turned into bf16
 * fragments in registers.  One template serves every variant:
 *   QUANT  what A and W hold (enum moe_quant);
 *   TM     rows of sorted_ids per block; with it (and QUANT) the warps
 *          (moe_gemm.h's MOE_GEMM_WARPS: 8, or 4), TN columns, the warp
 *          grid WARPS_M x WARPS_N and KS, the number of warps that split
 *          one k tile (their partial sums are added in shared memory at
 *          the end).
 * Each warp owns a WM x WN tile of the output (16 x 32, 16 x 32, 32 x 32 or
 * 64 x 64 for TM 16, 32, 64 and 128; the four-warp tiles 16 x 16 at TM 16
 * (FP8: 16 x 32, moe_gemm.h's MOE_GEMM_K64) and 16 x 32 at TM 32; W4A16 at
 * TM 64: 64 x 16, MOE_GEMM_PAIRED) and a 128-byte slice of every k tile (64
 * k of bf16, 128 k of FP8; 64 bytes on MOE_GEMM_K64).  FP8 128 x 128 block
 * scales are applied per slice, which lies in one 128-k group (is one, but
 * on MOE_GEMM_K64), as Triton does (acc += dot * a_scale * b_scale), the
 * group's scales copied into the stage with its k tile; at TM 128
 * a group's partial sums are formed for half the warp's rows at a time (a
 * second 64 x 64 set would not fit the registers).  The 4-bit weights'
 * scales ride in registers, except at TM 128, where each stage carries its
 * 256 columns' scales in shared memory.  The row tiles (KS 1) stage their
 * sums in shared memory and store the output 16 bytes a lane, whole rows of
 * a warp's columns at a time, not as the fragments' 4-byte pairs.  (Staged
 * as bf16 instead, the epilogue applied in registers and four 8 x 8
 * matrices stored at a time (stmatrix), the same output bytes ran slower on
 * every row tile that has a short K: H200 at SM120's blocks per SM,
 * gpu_bench_moe_decode MOE_DECODE_ROWTILES=1 against this build as ALT,
 * BLOCK_SIZE_M 128, two runs: bf16's down GEMM at 512 tokens on the 32-row
 * tile 0.65-0.70 of the floor against 0.74 (Kimi K2), 0.49-0.53 against
 * 0.56-0.57 (GLM-4.7), on the 128-row tile 0.41 against 0.48-0.49 (Kimi
 * K2); the gate/up within 0.01 but the 32-row tile at 4096 tokens, 0.36
 * against 0.40-0.41; FP8's 128-row tile at 255 registers, 0.07 against 0.26
 * on Kimi K2's down GEMM at 512.)
 */
#ifndef SM120_KERNELS_MOE_GEMM_CUH
#define SM120_KERNELS_MOE_GEMM_CUH

#include <stdint.h>

#include "../primitives.cuh"
#include "moe_epilogue.cuh"
#include "moe_gemm.h"

namespace moe_gemm {

using namespace sm120k;

template <int QUANT, int TM, int NSTAGES = MOE_GEMM_STAGES(QUANT, TM), bool K64 = false, bool FIT = false>
struct shape {
	static constexpr bool PACKED = MOE_GEMM_PACKED(QUANT);
	static constexpr int WARPS = MOE_GEMM_WARPS(QUANT, TM), THREADS = WARPS * 32;
	static constexpr int TN = K64 ? MOE_GEMM_K64_TN : FIT ? MOE_GEMM_FIT_TN : MOE_GEMM_TN(QUANT, TM);
	static constexpr int KS = MOE_GEMM_KSPLIT(QUANT, TM);
	static constexpr int WARPS_M = KS == 1 && !MOE_GEMM_PAIRED(QUANT, TM) && TM >= 32 ? 2 : 1;
	static constexpr int WARPS_N = WARPS / (WARPS_M * KS);
	static constexpr int WM = TM / WARPS_M, WN = TN / WARPS_N;
	static constexpr int MI = WM / 16;            /* m16 fragments per warp */
	static constexpr int NI = WN / 8;             /* n8 fragments per warp */
	static constexpr int KROW = K64 ? MOE_GEMM_K64_KROW : MOE_GEMM_KROW;   /* bytes of an A row a warp slice */
	static constexpr int KE = KROW / (QUANT == MOE_FP8 ? 1 : 2);   /* k per warp slice */
	static constexpr int KSTEPS = KROW / 32;               /* its mma k steps (32 bytes of A) */
	/* (FP8: a slice's k steps past K, half of GLM-4.7's last slice at TP8, K 192, are multiplied
	 * as zeros.  Skipping them (a warp-uniform test a step) measured no faster there and 0.03
	 * slower on Kimi K2's down GEMM at 512 tokens: H200, sm_90's emulated FP8 MMAs, two runs.) */
	static constexpr int ESZ = QUANT == MOE_FP8 ? 1 : 2;   /* bytes of an A element */
	static constexpr int ACH = KS * KROW / 16;    /* 16-byte chunks per A row and stage */
	static constexpr int BROW = K64 ? KROW : MOE_GEMM_BROW(QUANT);
	static constexpr int BCH = KS * BROW / 16;    /* 16-byte chunks per W row and stage */
	static constexpr int BPITCH = K64 ? KS * BROW : MOE_GEMM_BPITCH(QUANT, TM);
	static constexpr int A_BYTES = TM * KS * KROW;
	static constexpr int SC_OFF = A_BYTES + TN * BPITCH;  /* staged W scales: float [TN][4] */
	static constexpr bool SMEM_SCALES = MOE_GEMM_SCALE_BYTES(QUANT, TM) > 0;
	static constexpr int STAGE = A_BYTES + TN * BPITCH + MOE_GEMM_SCALE_BYTES(QUANT, TM);
	static constexpr int STAGES = NSTAGES;
	/* FP8 group scales (moe_gemm.h): GSC bytes a stage from GS_OFF, GCOLS weight scales a slice */
	static constexpr int GSC = MOE_GEMM_GSCALE_BYTES(QUANT, TM);
	static constexpr int GS_OFF = STAGES * STAGE;
	static constexpr int GCOLS = MOE_GEMM_GSCALE_COLS(QUANT, TM);
	static constexpr int GSLOTS = QUANT == MOE_FP8 ? 128 / KE : 1;   /* k slices a 128-k group */
	/* FP8 block scales: threads 0 .. TM * KS - 1 copy the activation scales, GS_W + j the
	 * weight scales */
	static constexpr int GS_W = THREADS / 2;
	/* several column tiles per block, the next tile's loads under this one's epilogue */
	static constexpr bool MULTI = MOE_GEMM_MULTI(QUANT, TM);
	/* bytes a row of a warp's staged m16 x WN sums (fp32, padded by 32 bytes: the
	 * 8-byte fragment writes of 4 rows fall in distinct banks) */
	static constexpr int EPITCH = WN * 4 + 32;
	/* rows of those staged at a time: 16, or 8 where the warps' 16 would not fit the free
	 * shared memory (MULTI: one stage; the packed tiles' stages are small) */
	static constexpr int ER = WARPS * 16 * EPITCH <= (MULTI ? STAGE : STAGES * STAGE) ? 16 : 8;
	/* the staged epilogue's 8-column chunks a lane takes of ER rows (EPASS), and the output
	 * rows a lane takes in all (RPL); where those are few (PRE), each one's routed weight is
	 * read once for all column tiles, not at each tile's end.  bf16 only: on an H200 at
	 * SM120's blocks per SM (gpu_bench_moe_decode MOE_DECODE_ROWTILES=1, BLOCK_SIZE_M 128,
	 * two runs) bf16's down GEMM on the 16-row tile ran 0.03-0.04 faster (Kimi K2 at 512
	 * tokens 0.77 of the floor against 0.73, GLM-4.7 at 256 0.65 against 0.60-0.61), on the
	 * 32-row tile 0.03-0.05, its gate/up within 0.01; FP8's down GEMM 0.01-0.02 faster but
	 * its gate/up 0.01-0.02 slower (Kimi K2's at 1024 tokens on the 32-row tile 0.67-0.68
	 * against 0.69-0.70), the per-tensor and per-channel scales read once too (sm_90's
	 * emulated FP8 MMAs hold more registers) */
	static constexpr int EPASS = (ER * (WN / 8) + 31) / 32;
	static constexpr int RPL = MI * (16 / ER) * EPASS;
	static constexpr bool PRE = KS == 1 && RPL <= 2 && QUANT == MOE_BF16;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
	/* sm_90 has no FP8 mma.sync: ptxas turns each into two f16 MMAs on converted
	 * fragments, whose registers a 64 x 64 warp tile cannot spare; FP8 at TM 128
	 * then works in narrower parts (the Hopper build only emulates SM120) */
	static constexpr bool NARROW = QUANT == MOE_FP8 && MI > 2;
#else
	static constexpr bool NARROW = false;
#endif
	/* m16 fragments per pass over a slice (MP), and per FP8 block-scale partial
	 * sum (MB: half the warp's rows when it has four, as a second 64 x 64 set of
	 * sums would not fit the registers); k steps unrolled in a pass (KU) and in a
	 * partial sum (KUB), as far as the registers allow */
	static constexpr int MP = NARROW ? MI / 2 : MI;
	static constexpr int MB = MI > 2 ? (NARROW ? 1 : MI / 2) : MI;
	static constexpr int KU = NARROW ? 1 : SMEM_SCALES ? 2 : 4;
	static constexpr int KUB = MB < MI ? 1 : 4;
	static_assert(WARPS_M * WARPS_N * KS == WARPS && WM % 16 == 0, "the warps cover the rows and k slices");
	static_assert(WARPS_N * WN == TN && NI % 2 == 0, "warps cover the columns, n8 fragments in pairs");
	static_assert(!SMEM_SCALES || (KS == 1 && TN == THREADS &&
				       MOE_GEMM_SCALE_BYTES(QUANT, TM) == TN * 16),
		      "one thread stages the 4 scales of one column");
	static_assert(STAGES >= 2, "a pipeline needs two stages");
	static_assert(K64 ? MOE_GEMM_K64(QUANT, TM) && !PACKED && GCOLS == 1 &&
				    STAGES == MOE_GEMM_K64_STAGES(QUANT, TM) &&
				    STAGES * (STAGE + GSC) == MOE_GEMM_K64_PIPE_BYTES(QUANT, TM) &&
				    MOE_GEMM_K64_PIPE_BYTES(QUANT, TM) <= moe_gemm_smem(QUANT, TM)
		      : FIT ? MOE_GEMM_FIT(QUANT, TM) && !K64 && STAGES == MOE_GEMM_FIT_STAGES &&
				      STAGES * STAGE <= moe_gemm_smem(QUANT, TM)
			    : STAGE == MOE_GEMM_STAGE_BYTES(QUANT, TM),
		      "the 64-byte and fitted forms: their kernels', the bytes moe_gemm.h gives, within the declared "
		      "shared memory");
	static_assert(GSC == 0 || (TM * KS <= GS_W && KS * GCOLS <= THREADS - GS_W),
		      "threads below GS_W copy the activation scales, the rest the weight scales");
	static_assert(KS > 1 || WARPS * ER * EPITCH <= (MULTI ? STAGE : STAGES * STAGE),
		      "the free shared memory holds every warp's staged rows");
};

/* The block's routed ids (-1 for padding), and (args.row_parts) the parts of its framework
 * block that hold a routed row, bit q for rows q * TM .. q * TM + TM - 1. */
template <int TM>
struct rows {
	int tok[TM];
	unsigned parts;
};

/*
 * load_rows - the routed ids of the block at sorted position @m0; returns
 * whether any row is valid.  Row mode (no sorted_ids): the framework block
 * m0 / block_m holds that routed row in its first row, padding after it.
 */
template <int TM>
__device__ __forceinline__ bool load_rows(const moe_gemm_args &a, int m0, rows<TM> &r)
{
	bool valid = false;

	if (threadIdx.x < TM) {
		int idx = m0 + (int)threadIdx.x;
		int id = !a.sorted_ids ? (threadIdx.x == 0 ? m0 / a.block_m : a.num_valid)
				       : idx < a.EM ? a.sorted_ids[idx] : a.num_valid;

		valid = id >= 0 && id < a.num_valid;
		r.tok[threadIdx.x] = valid ? id : -1;
	}
	return __syncthreads_or(valid);
}

/*
 * schedule_rows - schedule mode: the rows of row block @by and their expert
 * into @r and *@e; returns whether any row is valid (false for a framework
 * block at or past *num_blocks).  Every thread reads the same word.
 */
template <int TM>
__device__ __forceinline__ bool schedule_rows(const moe_gemm_args &a, int by, rows<TM> &r, int64_t *e)
{
	const int parts = a.block_m / TM, f = by / parts;
	bool valid = false;

	if (f >= a.EM / a.block_m || f >= __ldg(a.num_blocks))
		return false;
	const int32_t w = __ldg(a.schedule + f);
	*e = w & 0xffff;
	const int32_t first = __ldg(a.token_offs + *e);
	const int32_t start = first + (w >> 16) * a.block_m;
	const int32_t end = min(start + a.block_m, first + __ldg(a.tokens_per_expert + *e));

	if (threadIdx.x < TM) {
		const int32_t id = start + (by % parts) * TM + (int32_t)threadIdx.x;

		valid = id < end;
		r.tok[threadIdx.x] = valid ? id : -1;
	}
	return __syncthreads_or(valid);
}

/* write_zeros - valid rows of a block whose expert is on another rank. */
template <int TM, int TN, int THREADS>
__device__ void write_zeros(const moe_gemm_args &a, const rows<TM> &r, int n0)
{
	for (int i = threadIdx.x; i < TM * TN; i += THREADS) {
		int row = i / TN, n = n0 + i % TN;
		int id = r.tok[row];

		if (id >= 0 && n < a.N)
			((__nv_bfloat16 *)a.c)[(int64_t)id * a.c_stride_m + n] = __float2bfloat16(0.0f);
	}
}

/*
 * Per-thread copy plan for one stage: which 16-byte chunks of A and W this
 * thread moves: one chunk column, rows A_STEP (B_STEP) apart.  Rows and
 * sources are fixed for a column tile's K loop (advance moves W's on to the
 * next tile); only the k offset moves.  The chunks' source addresses are
 * formed once, at init (a chunk that copies nothing keeps an address it
 * never reads: cp_async16 of 0 bytes), so that an issue adds the k offset
 * and tests it: formed at each issue, with the row gathers' 64-bit products,
 * they were 45% of moe_gemm_bf16_m64's executed instructions (ncu, H200,
 * GLM-4.7's gate/up at 4096 tokens).  FP8 at TM 128 on sm_90 (shape::NARROW,
 * the emulation build, at its 255 registers) keeps each A chunk's row and
 * forms the addresses at each issue, as before: the kept ones spilled there.
 */
template <int QUANT, int TM, int NSTAGES, bool K64, bool FIT>
struct loader {
	using S = shape<QUANT, TM, NSTAGES, K64, FIT>;
	/* the threads that copy A: all, or the first TM * ACH where a stage's A has fewer chunks
	 * (MOE_GEMM_K64: 16 or 32 rows of 64 bytes); the others copy W only */
	static constexpr int A_THREADS = TM * S::ACH < S::THREADS ? TM * S::ACH : S::THREADS;
	static constexpr int A_PER = TM * S::ACH / A_THREADS;
	static constexpr int B_PER = S::TN * S::BCH / S::THREADS;
	static constexpr int A_STEP = A_THREADS / S::ACH;
	static constexpr int B_STEP = S::THREADS / S::BCH;
	static_assert(A_PER >= 1 && B_PER >= 1, "every thread copies");
	static_assert(A_STEP * S::ACH == A_THREADS && A_PER * A_STEP == TM &&
			      B_STEP * S::BCH == S::THREADS && B_PER * B_STEP == S::TN,
		      "every copying thread copies one chunk column");

	/* whether this thread copies A chunks */
	static __device__ __forceinline__ bool copies_a()
	{
		return A_THREADS == S::THREADS || (int)threadIdx.x < A_THREADS;
	}

	static constexpr bool KEEP = !S::NARROW;     /* the sources kept (else formed at each issue) */
	const unsigned char *a_src[A_PER];  /* each A chunk's source at k 0 (padding: never read) */
	int a_row[A_PER];            /* else each A chunk's activation row, -1 for padding */
	unsigned a_live;             /* bit i: A chunk i's row is a routed row */
	int a_left, b_left;          /* bytes of an A (W) row from this thread's chunk column on */
	int b_n;                     /* output column of the first W chunk */
	const unsigned char *b_src;  /* its source at k 0 (else its row's) */
	int64_t b_step;              /* bytes between the sources of consecutive W chunks */
	/* FP8 block scales (block: the launch has them), one per thread: thread t < TM * KS
	 * copies the activation scale of row t % TM and slice t / TM, from s_src (its
	 * activation row's scales, NULL for padding); thread GS_W + j, j < KS * GCOLS, the weight
	 * scale of slice j / GCOLS and the 128 columns from s_col (s_src: the expert's scales),
	 * the row s_grp of its scales (moe_epilogue::block_row, found when s_col moves, not at
	 * every k tile: H200, the 16-row tile 0.02-0.035 of the floor faster at 16 to 512
	 * tokens, Kimi K2) */
	bool block;
	const float *s_src;
	int s_col, s_grp;

	__device__ __forceinline__ void init(const moe_gemm_args &a, const rows<TM> &r, int64_t e, int n0)
	{
		const int64_t esz = S::PACKED ? 1 : S::ESZ;

		if constexpr (KEEP) {
			const int a_ch = threadIdx.x % S::ACH, b_ch = threadIdx.x % S::BCH;

			a_live = 0;
#pragma unroll
			for (int i = 0; i < A_PER; i++) {
				const int id = copies_a() ? r.tok[threadIdx.x / S::ACH + i * A_STEP] : -1;

				a_src[i] = (const unsigned char *)a.a + a_ch * 16 +
					   (id < 0 ? 0 : (int64_t)(id / a.top_k) * a.a_stride_m * S::ESZ);
				a_live |= (id >= 0 ? 1u : 0u) << i;
			}
			a_left = a.K * S::ESZ - a_ch * 16;
			b_left = (S::PACKED ? a.K / 2 : a.K * S::ESZ) - b_ch * 16;
			b_n = n0 + threadIdx.x / S::BCH;
			b_src = (const unsigned char *)a.b + (e * a.b_stride_e + (int64_t)b_n * a.b_stride_n) * esz +
				b_ch * 16;
			b_step = (int64_t)B_STEP * a.b_stride_n * esz;
		} else {
#pragma unroll
			for (int i = 0; i < A_PER; i++) {
				const int id = copies_a() ? r.tok[threadIdx.x / S::ACH + i * A_STEP] : -1;

				a_row[i] = id < 0 ? -1 : id / a.top_k;
			}
			b_n = n0 + threadIdx.x / S::BCH;
			b_src = (const unsigned char *)a.b + (e * a.b_stride_e + (int64_t)b_n * a.b_stride_n) * esz;
		}
		block = QUANT == MOE_FP8 && a.scale == MOE_SCALE_BLOCK;
		s_src = 0;
		s_col = 0;
		s_grp = -1;
		if (S::GSC && threadIdx.x < TM * S::KS) {
			const int id = r.tok[threadIdx.x % TM];

			if (id >= 0)
				s_src = a.a_scale + (int64_t)(id / a.top_k) * a.as_stride_m;
		} else if (S::GSC && threadIdx.x >= S::GS_W) {
			s_src = (const float *)a.b_scale + e * a.bs_stride_e;
			s_col = n0 + (int)(threadIdx.x - S::GS_W) % S::GCOLS * 128;
			s_grp = block ? moe_epilogue::block_row(a, s_col) : -1;
		}
	}

	/* on to the column tile @dn columns past the current one (MOE_GEMM_MULTI) */
	__device__ __forceinline__ void advance(const moe_gemm_args &a, int dn)
	{
		b_n += dn;
		b_src += (int64_t)dn * a.b_stride_n * (S::PACKED ? 1 : S::ESZ);
		s_col += dn;
		if (S::GSC && block && threadIdx.x >= S::GS_W)
			s_grp = moe_epilogue::block_row(a, s_col);
	}

	/* block launches: issue the copies of k tile @kt's group scales for the current column
	 * tile to the stage's scales at @dst (zeros for padding rows, past N and past K) */
	__device__ __forceinline__ void issue_scales(const moe_gemm_args &a, uint32_t dst, int kt)
	{
		const int t = threadIdx.x, j = t - S::GS_W;

		if (!S::GSC || !block)
			return;
		if (t < TM * S::KS) {
			const int slot = kt * S::KS + t / TM;
			const bool ok = s_src && slot * S::KE < a.K;

			cp_async4(dst + t * 4, ok ? s_src + (int64_t)(slot / S::GSLOTS) * a.as_stride_k : a.a_scale,
				  ok ? 4 : 0);
		} else if (j >= 0 && j < S::KS * S::GCOLS) {
			const int slot = kt * S::KS + j / S::GCOLS;
			const bool ok = s_grp >= 0 && slot * S::KE < a.K;

			cp_async4(dst + (TM * S::KS + j) * 4,
				  ok ? s_src + (int64_t)s_grp * a.bs_stride_n +
					       (int64_t)(slot / S::GSLOTS) * a.bs_stride_k
				     : (const float *)a.b_scale,
				  ok ? 4 : 0);
		}
	}

	/* issue the copies of k tile @kt of the current column tile into the stage at @stage
	 * (zeros past N and K, and for padding) */
	__device__ __forceinline__ void issue(const moe_gemm_args &a, uint32_t stage, int kt)
	{
		const int a_ch = threadIdx.x % S::ACH, b_ch = threadIdx.x % S::BCH;

		if constexpr (KEEP) {
			const int a_kb = kt * S::KS * S::KROW, b_kb = kt * S::KS * S::BROW;

#pragma unroll
			for (int i = 0; i < A_PER && copies_a(); i++) {
				const int row = threadIdx.x / S::ACH + i * A_STEP;
				const bool ok = (a_live >> i & 1u) && a_kb < a_left;

				cp_async16(stage + swz(row, a_ch, S::ACH), a_src[i] + a_kb, ok ? 16 : 0);
			}
#pragma unroll
			for (int i = 0; i < B_PER; i++) {
				const bool ok = b_n + i * B_STEP < a.N && b_kb < b_left;

				cp_async16<0, MOE_GEMM_W_PREFETCH>(stage + b_dst(i, b_ch), b_src + i * b_step + b_kb,
								   ok ? 16 : 0);
			}
		} else {
			const int a_row_bytes = a.K * S::ESZ;
			const int b_row_bytes = S::PACKED ? a.K / 2 : a.K * S::ESZ;
			const int a_kb = kt * S::KS * S::KROW + a_ch * 16;
			const int b_kb = kt * S::KS * S::BROW + b_ch * 16;
			const int64_t step = (int64_t)B_STEP * a.b_stride_n * (S::PACKED ? 1 : S::ESZ);

#pragma unroll
			for (int i = 0; i < A_PER && copies_a(); i++) {
				const int row = threadIdx.x / S::ACH + i * A_STEP;
				const bool ok = a_row[i] >= 0 && a_kb < a_row_bytes;
				const unsigned char *src =
					(const unsigned char *)a.a + (int64_t)a_row[i] * a.a_stride_m * S::ESZ;

				cp_async16(stage + swz(row, a_ch, S::ACH), ok ? src + a_kb : a.a, ok ? 16 : 0);
			}
#pragma unroll
			for (int i = 0; i < B_PER; i++) {
				const bool ok = b_n + i * B_STEP < a.N && b_kb < b_row_bytes;

				cp_async16<0, MOE_GEMM_W_PREFETCH>(stage + b_dst(i, b_ch), ok ? b_src + i * step + b_kb : a.b,
								   ok ? 16 : 0);
			}
		}
	}

	/* the stage offset of this thread's W chunk @i (column @ch) */
	static __device__ __forceinline__ uint32_t b_dst(int i, int ch)
	{
		const int row = threadIdx.x / S::BCH + i * B_STEP;

		return S::A_BYTES + (S::PACKED ? (uint32_t)(row * S::BPITCH + ch * 16) : swz(row, ch, S::BCH));
	}
};

/* The scales of the 4-bit weights of columns @n (NC of them) for the 64-k
 * slice at @k0, as stored (W4A16: bf16 bits, NVFP4: an E4M3 byte): one per
 * column and k16 step (W4A16 groups are >= 16 wide, NVFP4's are 16), each
 * loaded on its own; 0 past N or K.  Nothing here reads a loaded value, so
 * the loads stay in flight until wscale turns them into floats where they
 * are used (converted here, the first read waited on each load: 8% of
 * w4a16_m128's stall samples, ncu).  @gshift is wscale_shift's. */
template <int QUANT, int NC>
__device__ __forceinline__ void load_wscales(const moe_gemm_args &a, int64_t e, const int n[NC], int k0,
					     int gshift, uint32_t sc[NC][4])
{
#pragma unroll
	for (int ni = 0; ni < NC; ni++) {
		const bool col = n[ni] < a.N;
		const int64_t row = e * a.bs_stride_e + (int64_t)(col ? n[ni] : 0) * a.bs_stride_n;

#pragma unroll
		for (int ks = 0; ks < 4; ks++) {
			const int k = k0 + ks * 16, g = gshift >= 0 ? k >> gshift : k / a.group_size;
			uint32_t v = 0;

			if (col && k < a.K)
				v = QUANT == MOE_W4A16 ? __ldg((const uint16_t *)a.b_scale + row + g)
						       : __ldg((const unsigned char *)a.b_scale + row + g);
			sc[ni][ks] = v;
		}
	}
}

/* The scale group of k is k >> wscale_shift(a): NVFP4's groups are 16 wide,
 * W4A16's a.group_size (-1 where that is no power of two: k / group_size). */
template <int QUANT>
__device__ __forceinline__ int wscale_shift(const moe_gemm_args &a)
{
	const int gs = QUANT == MOE_W4A16 ? a.group_size : 16;

	return gs & (gs - 1) ? -1 : __ffs(gs) - 1;
}

/* A scale as load_wscales stores it -> its float.  (W4A16's staged as its bf16 twice instead, the
 * bf16x2 word w4_pair multiplies by, so that no F2FP converts it where used: 24 fewer of
 * w4a16_m128's 846 loop instructions on sm_90, the same bytes, but no faster: the plan's row
 * tiles 1.0-1.7% slower in 6 of 16 rows (Kimi K2's gate/up at 512 to 2048 tokens 1.2%), 0.7-1.1%
 * faster in 2, within 0.6% in the rest; H200, gpu_bench_moe_decode MOE_DECODE_ROWTILES=1, INT4 at
 * TP8, 512 to 4096 tokens, each build as the other's ALT, two runs each.) */
template <int QUANT>
__device__ __forceinline__ float wscale(uint32_t stored)
{
	return QUANT == MOE_W4A16 ? bf16_bits_to_float(stored) : e4m3_to_float(stored);
}

/*
 * The two 4-bit codes (low nibble first) of byte @j of the word @w -> bf16x2
 * weights, with @sel = j | (j + 4) << 8 (byte_sel).  W4A16: one byte permute
 * takes byte j of w and of w >> 4 (whose low nibble is byte j's high code)
 * into the two halves, then w4_pair (primitives.cuh) with the scale @sc.
 * NVFP4: E2M1 codes times @scale and @global.
 */
__device__ __forceinline__ uint32_t byte_sel(int j)
{
	return (uint32_t)j | (uint32_t)(j + 4) << 8;
}

template <int QUANT>
__device__ __forceinline__ uint32_t dequant2(uint32_t w, uint32_t sel, __nv_bfloat162 sc, float scale, float global)
{
	if (QUANT == MOE_W4A16)
		return w4_pair(__byte_perm(w, w >> 4, sel), sc);
	const uint32_t byte = __byte_perm(w, 0, sel) & 0xffu;

	return pack_bf16(e2m1_to_float(byte & 15) * scale * global, e2m1_to_float((byte >> 4) & 15) * scale * global);
}

/*
 * tile - the output tiles of column block @bx (blockIdx.x) over the rows of @r
 * (the routed ids of one row block, in shared memory), of expert @e (-1:
 * another rank's, its valid rows written as zeros): column tile bx, and, for
 * the MULTI kernels, bx + gridDim.x, bx + 2 gridDim.x, ... as one sequence
 * of k tiles (the pipeline runs on across a tile's end, so the next tile's
 * first loads are in flight under this one's epilogue; the other kernels
 * need gridDim.x = ceil(N / TN)).  Called by all moe_gemm_threads(QUANT, TM)
 * threads of the block with the same arguments, @r holding a valid row; the
 * k tiles run through an NSTAGES-deep pipeline (moe_gemm.h's shallow one:
 * MOE_GEMM_SHALLOW_STAGES); @smem is MOE_GEMM_PIPE_BYTES(QUANT, TM,
 * NSTAGES) bytes of 1024-aligned dynamic shared memory (the caller's,
 * overwritten).  No copy is in flight when it returns.
 */
template <int QUANT, int TM, int NSTAGES, bool K64, bool FIT>
__device__ void tile(const moe_gemm_args &a, unsigned char *smem, const rows<TM> &r, int64_t e, int bx)
{
	using S = shape<QUANT, TM, NSTAGES, K64, FIT>;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int kg = warp / (S::WARPS_M * S::WARPS_N);             /* k slice of this warp */
	const int wm = (warp % (S::WARPS_M * S::WARPS_N)) / S::WARPS_N;
	const int wn = warp % S::WARPS_N;
	/* the column tiles' count and spacing, and the first column of the tile being computed */
	const int tiles = (a.N + S::TN - 1) / S::TN, tstride = (int)gridDim.x * S::TN;
	const int ntl = !S::MULTI ? 1 : bx < tiles ? (tiles - bx + (int)gridDim.x - 1) / (int)gridDim.x : 0;
	int n0 = bx * S::TN;
	const uint32_t base = smem_u32(smem);

	if (e < 0) {
		for (int t = 0; t < ntl; t++)
			write_zeros<TM, S::TN, S::THREADS>(a, r, n0 + t * tstride);
		return;
	}

	/* this warp's m16 fragments up to the last that holds a valid row (warp-uniform);
	 * the MMAs run on whole runs of fragments, unconditionally (padding rows are zeros) */
	int live = 0;
#pragma unroll
	for (int mi = 0; mi < S::MI; mi++)
		for (int j = 0; j < 16; j++)
			if (r.tok[wm * S::WM + mi * 16 + j] >= 0)
				live = mi + 1;

	loader<QUANT, TM, NSTAGES, K64, FIT> ld;
	ld.init(a, r, e, n0);
	const int nk = (a.K + S::KS * S::KE - 1) / (S::KS * S::KE);

	/* 4-bit weights: global scale, and W scales in registers (narrow tiles) or per stage (TM 128) */
	float global = 1.0f;
	if (QUANT == MOE_NVFP4)
		global = __ldg(a.b_global + e);
	int ncol[S::NI];
#pragma unroll
	for (int ni = 0; ni < S::NI; ni++)
		ncol[ni] = n0 + wn * S::WN + ni * 8 + lane / 4;
	float wsc[S::NI][4];
	uint32_t wsc_next[S::NI][4];
	const int gshift = wscale_shift<QUANT>(a);
	if (S::PACKED && !S::SMEM_SCALES)
		load_wscales<QUANT, S::NI>(a, e, ncol, kg * 64, gshift, wsc_next);

	/* the block's k tiles in order: step g is k tile g % nk of its tile g / nk, issued in
	 * order: the issue side counts its k tile (ik) and moves the loader on a tile at ik's wrap;
	 * TM 128, packed: it also loads into @sc the scales of the step it issues (column scol of
	 * the issue side's tile), which the caller stores into the stage once that is free */
	const int total = ntl * nk;
	int ik = 0;
	int scol[1] = { n0 + (int)threadIdx.x };   /* the column whose scales this thread stages */
	auto issue_next = [&](int slot, uint32_t (&sc)[1][4]) {
		ld.issue(a, base + slot * S::STAGE, ik);
		ld.issue_scales(a, base + S::GS_OFF + slot * S::GSC, ik);
		if (S::SMEM_SCALES)
			load_wscales<QUANT, 1>(a, e, scol, ik * 64, gshift, sc);
		if (++ik == nk) {
			ik = 0;
			ld.advance(a, tstride);
			scol[0] += tstride;
		}
	};
	auto store_scales = [&](int slot, const uint32_t (&sc)[1][4]) {
		*(float4 *)(smem + slot * S::STAGE + S::SC_OFF + threadIdx.x * 16) =
			make_float4(wscale<QUANT>(sc[0][0]), wscale<QUANT>(sc[0][1]), wscale<QUANT>(sc[0][2]),
				    wscale<QUANT>(sc[0][3]));
	};

	for (int s = 0; s < S::STAGES - 1; s++) {
		if (s < total) {
			uint32_t v[1][4];

			issue_next(s, v);
			if (S::SMEM_SCALES)
				store_scales(s, v);
		}
		cp_async_commit();
	}

	/*
	 * This lane's ldmatrix row and chunk in a fragment's first k step: A rows
	 * 0-15 at chunks 0 and 1, W rows 0-7 and 8-15 at chunks 0 and 1 (the x4
	 * matrices).  Fragments start at rows that are multiples of 8 and slices
	 * at multiples of 8 chunks, so the swizzled offset of k step ks (chunks
	 * 2 ks and 2 ks + 1) is this one XOR 2 ks chunks.
	 */
	const uint32_t a_lane = swz(lane & 15, lane >> 4, S::ACH);
	const uint32_t b_lane = swz((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1, S::BCH);
	float acc[S::MI][S::NI][4] = {};

	/* S::PRE (bf16: no activation scale): the routed weight of each of this lane's output
	 * rows in the staged epilogue below, that of its chunk c = lane + 32 p of m16 fragment
	 * mi's rows h0 * 8 .. h0 * 8 + ER - 1 in slot pre_slot(mi, h0, p) (1 for padding) */
	auto pre_slot = [](int mi, int h0, int p) { return (mi * (16 / S::ER) + h0 * 8 / S::ER) * S::EPASS + p; };
	float pre_w[S::PRE ? S::RPL : 1];
	if constexpr (S::PRE) {
#pragma unroll
		for (int mi = 0; mi < S::MI; mi++)
#pragma unroll
			for (int h0 = 0; h0 < 2; h0 += S::ER / 8)
#pragma unroll
				for (int p = 0; p < S::EPASS; p++) {
					const int c = lane + 32 * p, cpr = S::WN / 8;
					const int id = c < S::ER * cpr ? r.tok[wm * S::WM + mi * 16 + h0 * 8 + c / cpr] : -1;

					pre_w[pre_slot(mi, h0, p)] =
						id >= 0 && a.mul_routed_weight ? __ldg(a.topk_weights + id) : 1.0f;
				}
	}

	/* after the k loop: the k slices' sums added, then the epilogue (in each copy of the
	 * loop, so that the copies need not agree on where the accumulators live); a row
	 * tile's output goes through @stage, bytes past the dynamic shared memory's start
	 * that no copy is in flight to */
	auto finish = [&](uint32_t stage) {
		float ts = 1.0f;
		if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_TENSOR)
			ts = __ldg(a.a_scale) * __ldg((const float *)a.b_scale + e * a.bs_stride_e);
		/* the per-row factors of routed row @id: activation scale (FP8 per channel) and
		 * routed weight */
		auto row_factors = [&](int id, float &as, float &w) {
			as = w = 1.0f;
			if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_CHANNEL)
				as = moe_epilogue::act_scale(a, id);
			if (a.mul_routed_weight)
				w = __ldg(a.topk_weights + id);
		};

		if (S::KS == 1) {
			/* ER rows of an m16 fragment row of the warp's tile at a time (S::ER): their
			 * fp32 sums into the warp's rows of @stage, then each lane takes 8 columns of
			 * a row, applies the epilogue and stores them as 16 bytes (pairs where N, C's
			 * row stride or C is not 8-element aligned) */
			constexpr int ER = S::ER;
			const uint32_t ep = base + stage + warp * ER * S::EPITCH;
			const bool wide = a.c_stride_m % 8 == 0 && ((uintptr_t)a.c & 15) == 0;
			constexpr int CPR = S::WN / 8;   /* 8-column chunks per row */
			static_assert(QUANT != MOE_FP8 || 32 % CPR == 0,
				      "FP8 per channel: a lane's chunks c = lane + 32 p share one column");
			/* FP8 per channel: the weight scales of this lane's 8 columns, read once */
			float cw[8];
			if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_CHANNEL)
				moe_epilogue::col_scales<8>(a, e, n0 + wn * S::WN + lane % CPR * 8, cw);

			__syncthreads();   /* every warp is done with the stage's k tile */
#pragma unroll
			for (int mi = 0; mi < S::MI; mi++) {
#pragma unroll
				for (int h0 = 0; h0 < 2; h0 += ER / 8) {
#pragma unroll
					for (int h = 0; h < ER / 8; h++)
#pragma unroll
						for (int ni = 0; ni < S::NI; ni++)
							sts64(ep + (lane / 4 + h * 8) * S::EPITCH + (ni * 8 + (lane & 3) * 2) * 4,
							      acc[mi][ni][(h0 + h) * 2], acc[mi][ni][(h0 + h) * 2 + 1]);
					__syncwarp();
#pragma unroll
					for (int c = lane; c < ER * CPR; c += 32) {
						const int row = c / CPR, n = n0 + wn * S::WN + c % CPR * 8;
						const int id = r.tok[wm * S::WM + mi * 16 + h0 * 8 + row];
						if (id < 0 || n >= a.N)
							continue;
						const uint4 lo = lds128(ep + row * S::EPITCH + c % CPR * 32);
						const uint4 hi = lds128(ep + row * S::EPITCH + c % CPR * 32 + 16);
						const float x[8] = { __uint_as_float(lo.x), __uint_as_float(lo.y),
								     __uint_as_float(lo.z), __uint_as_float(lo.w),
								     __uint_as_float(hi.x), __uint_as_float(hi.y),
								     __uint_as_float(hi.z), __uint_as_float(hi.w) };
						float as, w, v[8];
						if constexpr (S::PRE)
							as = 1.0f, w = pre_w[pre_slot(mi, h0, (c - lane) / 32)];
						else
							row_factors(id, as, w);
						moe_epilogue::values<QUANT, 8>(a, x, e, n, ts, as, w, cw, v);
						if (wide && n + 8 <= a.N)
							*(uint4 *)((__nv_bfloat16 *)a.c + (int64_t)id * a.c_stride_m + n) =
								make_uint4(pack_bf16(v[0], v[1]), pack_bf16(v[2], v[3]),
									   pack_bf16(v[4], v[5]), pack_bf16(v[6], v[7]));
						else
#pragma unroll
							for (int j = 0; j < 8; j += 2)
								moe_epilogue::store_pair(a, id, n + j, v + j);
					}
					__syncwarp();
				}
			}
			return;
		}

		/* add the k slices' partial sums: slices 1.. park theirs, slice 0 sums */
		float *red = (float *)smem;
		constexpr int PER = S::MI * S::NI * 4;
		__syncthreads();
		if (kg > 0) {
			float *dst = red + ((kg - 1) * (S::WARPS_M * S::WARPS_N) + wm * S::WARPS_N + wn) * 32 * PER;
			for (int i = 0; i < PER; i++)
				dst[i * 32 + lane] = (&acc[0][0][0])[i];
		}
		__syncthreads();
		if (kg > 0)
			return;
		for (int g = 1; g < S::KS; g++) {
			const float *src = red + ((g - 1) * (S::WARPS_M * S::WARPS_N) + wm * S::WARPS_N + wn) * 32 * PER;
			for (int i = 0; i < PER; i++)
				(&acc[0][0][0])[i] += src[i * 32 + lane];
		}

		/* the fragments' pairs straight from registers: scale, bias, routed weight, bf16;
		 * FP8 per channel: the weight scales of the lane's columns, read once */
		float cw[S::NI][2];
		if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_CHANNEL)
#pragma unroll
			for (int ni = 0; ni < S::NI; ni++)
				moe_epilogue::col_scales<2>(a, e, n0 + wn * S::WN + ni * 8 + (lane & 3) * 2, cw[ni]);
#pragma unroll
		for (int mi = 0; mi < S::MI; mi++)
#pragma unroll
			for (int h = 0; h < 2; h++) {
				const int id = r.tok[wm * S::WM + mi * 16 + lane / 4 + h * 8];
				if (id < 0)
					continue;
				float as, w;
				row_factors(id, as, w);
#pragma unroll
				for (int ni = 0; ni < S::NI; ni++) {
					const int n = n0 + wn * S::WN + ni * 8 + (lane & 3) * 2;
					float v[2];
					moe_epilogue::values<QUANT, 2>(a, &acc[mi][ni][h * 2], e, n, ts, as, w, cw[ni], v);
					moe_epilogue::store_pair(a, id, n, v);
				}
			}
	};

	/* the k loop, one copy per FP8 scale treatment (BLOCK: 128 x 128 block scales), for the registers */
	auto run = [&](auto block) {
		constexpr bool BLOCK = decltype(block)::value;
		int kt = 0;   /* step g's k tile */

		for (int g = 0; g < total; g++) {
			const int gi = g + S::STAGES - 1;   /* the step issued now */

			cp_async_wait<S::STAGES - 2>();
			__syncthreads();
			/* TM 128, packed: nsc, the scales of the stage issued now, stored once this one is consumed */
			uint32_t nsc[1][4] = {};
			if (gi < total)
				issue_next(gi % S::STAGES, nsc);
			cp_async_commit();

			const uint32_t st = base + (g % S::STAGES) * S::STAGE;
			const int kslot = kt * S::KS + kg;                  /* k slice index over K */

			if (S::PACKED && !S::SMEM_SCALES) {
#pragma unroll
				for (int ni = 0; ni < S::NI; ni++)
#pragma unroll
					for (int ks = 0; ks < 4; ks++)
						wsc[ni][ks] = wscale<QUANT>(wsc_next[ni][ks]);
				if (kt + 1 < nk) {
					load_wscales<QUANT, S::NI>(a, e, ncol, (kslot + S::KS) * 64, gshift, wsc_next);
				} else if (S::MULTI && g + 1 < total) {
					/* the next tile's first k slice */
					int nn[S::NI];
#pragma unroll
					for (int ni = 0; ni < S::NI; ni++)
						nn[ni] = ncol[ni] + tstride;
					load_wscales<QUANT, S::NI>(a, e, nn, kg * 64, gshift, wsc_next);
				}
			}

			uint32_t bw[S::NI][8];   /* packed, narrow tiles: this thread's W row slice (32 bytes) per n8 */
			if (S::PACKED && !S::SMEM_SCALES && kslot * S::KE < a.K)
#pragma unroll
				for (int ni = 0; ni < S::NI; ni++) {
					const uint32_t row = wn * S::WN + ni * 8 + lane / 4;
					const uint4 *p = (const uint4 *)(smem + (st - base) + S::A_BYTES + row * S::BPITCH +
									  kg * S::BROW);
					uint4 lo = p[0], hi = p[1];

					bw[ni][0] = lo.x, bw[ni][1] = lo.y, bw[ni][2] = lo.z, bw[ni][3] = lo.w;
					bw[ni][4] = hi.x, bw[ni][5] = hi.y, bw[ni][6] = hi.z, bw[ni][7] = hi.w;
				}

			/* the warp's k slice of this stage for its m16 fragments mf .. mf + MC - 1, added
			 * into @sum[so .. so + MC - 1], its 4 k steps unrolled KU times; W fragments a
			 * pair of n8 at a time */
			auto slice = [&](auto mc, auto ku, auto &sum, int so, int mf) {
				constexpr int MC = decltype(mc)::value, KU = decltype(ku)::value;

#pragma unroll(KU)
				for (int ks = 0; ks < S::KSTEPS; ks++) {       /* 32 bytes of A per step */
					uint32_t af[MC][4];

#pragma unroll
					for (int mi = 0; mi < MC; mi++)
						ldsm_x4(af[mi], st + (wm * S::WM + (mf + mi) * 16) * S::ACH * 16 +
								kg * S::KROW + (a_lane ^ (ks << 5)));
#pragma unroll
					for (int nj = 0; nj < S::NI / 2; nj++) {
						uint32_t bf[2][2];   /* n8 fragments 2 nj and 2 nj + 1 */

						if (S::PACKED) {
							const uint32_t sel = byte_sel(lane & 3);
							const unsigned char *sp = smem + (st - base);

#pragma unroll
							for (int q = 0; q < 2; q++) {
								const int ni = 2 * nj + q;
								uint32_t w0, w1;
								float sc;

								if (S::SMEM_SCALES) {
									const int row = wn * S::WN + ni * 8 + lane / 4;
									const uint2 w = *(const uint2 *)(sp + S::A_BYTES +
													 row * S::BPITCH +
													 kg * S::BROW + ks * 8);

									w0 = w.x, w1 = w.y;
									sc = *(const float *)(sp + S::SC_OFF + row * 16 + ks * 4);
								} else {
									w0 = bw[ni][2 * ks], w1 = bw[ni][2 * ks + 1];
									sc = wsc[ni][ks];
								}
								const __nv_bfloat162 sc2 = __float2bfloat162_rn(sc);

								bf[q][0] = dequant2<QUANT>(w0, sel, sc2, sc, global);
								bf[q][1] = dequant2<QUANT>(w1, sel, sc2, sc, global);
							}
						} else {
							uint32_t t[4];

							ldsm_x4(t, st + S::A_BYTES + (wn * S::WN + nj * 16) * S::BCH * 16 +
								       kg * S::BROW + (b_lane ^ (ks << 5)));
							bf[0][0] = t[0], bf[0][1] = t[1];
							bf[1][0] = t[2], bf[1][1] = t[3];
						}
#pragma unroll
						for (int mi = 0; mi < MC; mi++)
#pragma unroll
							for (int q = 0; q < 2; q++) {
								if (QUANT == MOE_FP8)
									mma_e4m3(sum[so + mi][2 * nj + q], af[mi], bf[q][0], bf[q][1]);
								else
									mma_bf16(sum[so + mi][2 * nj + q], af[mi], bf[q][0], bf[q][1]);
							}
					}
				}
			};

			if (kslot * S::KE >= a.K) {
				/* a k-split warp past K: nothing to add */
			} else if (BLOCK) {
				/* a slice lies in one group: acc += (dot * a_scale) * b_scale, MB fragments at
				 * a time, the scales from the stage's (the warp's columns share a group) */
				const float *gs = (const float *)(smem + S::GS_OFF + (g % S::STAGES) * S::GSC);
				const float bs = gs[TM * S::KS + kg * S::GCOLS + wn * S::WN / 128];
#pragma unroll
				for (int mf = 0; mf < S::MI; mf += S::MB) {
					if (live <= mf)
						continue;
					float part[S::MB][S::NI][4] = {};
					slice(constant<S::MB>(), constant<S::KUB>(), part, 0, mf);
#pragma unroll
					for (int mi = 0; mi < S::MB; mi++) {
						const int rr = wm * S::WM + (mf + mi) * 16 + lane / 4;
						const float as0 = gs[kg * TM + rr], as1 = gs[kg * TM + rr + 8];
#pragma unroll
						for (int ni = 0; ni < S::NI; ni++) {
							acc[mf + mi][ni][0] += part[mi][ni][0] * as0 * bs;
							acc[mf + mi][ni][1] += part[mi][ni][1] * as0 * bs;
							acc[mf + mi][ni][2] += part[mi][ni][2] * as1 * bs;
							acc[mf + mi][ni][3] += part[mi][ni][3] * as1 * bs;
						}
					}
				}
			} else if (live > S::MI / 2) {
#pragma unroll
				for (int mf = 0; mf < S::MI; mf += S::MP)
					slice(constant<S::MP>(), constant<S::KU>(), acc, mf, mf);
			} else if (live > 0) {                             /* the first half holds every valid row */
				slice(constant<(S::MI + 1) / 2>(), constant<S::KU>(), acc, 0, 0);
			}

			if (S::SMEM_SCALES && gi < total)
				store_scales(gi % S::STAGES, nsc);
			if (++kt == nk && S::MULTI) {
				/* the tile's end: its epilogue, staged in the stage just consumed (the
				 * only one not in flight), while the next tile's first k tiles load,
				 * then on to that tile */
				finish((uint32_t)((g % S::STAGES) * S::STAGE));
				kt = 0;
				n0 += tstride;
				if (S::PACKED && !S::SMEM_SCALES)
#pragma unroll
					for (int ni = 0; ni < S::NI; ni++)
						ncol[ni] += tstride;
#pragma unroll
				for (int mi = 0; mi < S::MI; mi++)
#pragma unroll
					for (int ni = 0; ni < S::NI; ni++)
#pragma unroll
						for (int j = 0; j < 4; j++)
							acc[mi][ni][j] = 0.0f;
			}
		}
		cp_async_wait<0>();
		if (!S::MULTI)
			finish(0);
	};
	if (QUANT == MOE_FP8 && a.scale == MOE_SCALE_BLOCK)
		run(constant<1>());
	else
		run(constant<0>());
}

/*
 * block_rows - the routed ids of row block @by into @r and its expert into
 * *@e: the sorted list's rows by * TM .. by * TM + TM - 1, row mode's
 * framework block by (its first row), or the schedule's block by; false
 * when it holds no valid row (nothing else read then).
 */
template <int TM>
__device__ __forceinline__ bool block_rows(const moe_gemm_args &a, rows<TM> &r, int by, int64_t *e)
{
	const int m0 = a.sorted_ids ? by * TM : by * a.block_m;

	if (a.schedule)
		return schedule_rows<TM>(a, by, r, e);
	if (m0 >= a.EM || m0 >= __ldg(a.num_tokens_post_padded) || !load_rows<TM>(a, m0, r))
		return false;
	*e = __ldg(a.expert_ids + m0 / a.block_m);
	return true;
}

/*
 * next_part - args.row_parts P > 0 (aligned layouts, the MOE_GEMM_PARTS
 * kernels): the next of the parts (TM rows each) p = by % P, p + P, p + 2P,
 * ... of framework block by / P below num_tokens_post_padded and EM that
 * holds a routed row: its routed ids into @r (in shared memory), its
 * expert into *@e, its index into @q (-1 at a block's first call); false
 * when none is left.  Where MOE_GEMM_PARTS_HELD (the framework block's ids
 * MOE_GEMM_PARTS_IDS a thread, its parts the bits of a word: the launches
 * moe_gemm_row_parts makes), the first call reads all of them once, finding the parts that
 * hold a routed row (r.parts) and the first one's ids; a later part, or
 * every part otherwise, is read as a row block is.  Every call after a
 * block's first waits for all its threads first (the last part's epilogue
 * reads @r and the stages).
 */
template <int QUANT, int TM>
__device__ __forceinline__ bool next_part(const moe_gemm_args &a, rows<TM> &r, int by, int &q, int64_t *e)
{
	constexpr int THREADS = MOE_GEMM_WARPS(QUANT, TM) * 32;
	const int P = a.row_parts, f0 = by / P * a.block_m, parts = a.block_m / TM;
	const int lim = min(a.EM, __ldg(a.num_tokens_post_padded));
	const bool held = a.block_m <= MOE_GEMM_PARTS_IDS * THREADS && parts <= 32;   /* MOE_GEMM_PARTS_HELD */

	if (f0 >= lim)
		return false;
	*e = __ldg(a.expert_ids + f0 / a.block_m);
	if (q >= 0) {
		__syncthreads();
	} else if (held) {
		int ids[MOE_GEMM_PARTS_IDS];   /* routed ids of rows threadIdx.x, threadIdx.x + THREADS, ... */
		unsigned bits = 0;

#pragma unroll
		for (int j = 0; j < MOE_GEMM_PARTS_IDS; j++) {
			const int i = (int)threadIdx.x + j * THREADS;
			const int id = i < a.block_m && f0 + i / TM * TM < lim && f0 + i < a.EM ? __ldg(a.sorted_ids + f0 + i)
												 : -1;

			ids[j] = id >= 0 && id < a.num_valid ? id : -1;
			bits |= ids[j] >= 0 ? 1u << (i / TM) : 0u;
		}
		if (threadIdx.x == 0)
			r.parts = 0;
		__syncthreads();
		bits = __reduce_or_sync(0xffffffffu, bits);
		if ((threadIdx.x & 31) == 0 && bits)
			atomicOr(&r.parts, bits);
		__syncthreads();
		for (q = by % P; q < parts && !(r.parts >> q & 1u); q += P)
			;
		if (q >= parts)
			return false;
#pragma unroll
		for (int j = 0; j < MOE_GEMM_PARTS_IDS; j++) {
			const int i = (int)threadIdx.x + j * THREADS;

			if (i < a.block_m && i / TM == q)
				r.tok[i % TM] = ids[j];
		}
		__syncthreads();
		return true;
	} else {
		q = by % P - P;
	}
	for (q += P; q < parts && f0 + q * TM < lim; q += P)
		if ((!held || (r.parts >> q & 1u)) && load_rows<TM>(a, f0 + q * TM, r))
			return true;
	return false;
}

/*
 * gemm - block (@bx, @by) (blockIdx.x and .y) of a moe_gemm_* launch:
 * moe_gemm.h's semantics for the rows of row block by (block_rows), or, on
 * a MOE_GEMM_PARTS kernel launched with args.row_parts, of each part
 * next_part gives it, on column block bx (tile).  Called by all moe_gemm_threads(QUANT, TM)
 * threads with the same arguments; @smem as for tile, @r the block's routed
 * ids in shared memory (both the caller's, overwritten).  Returns at once
 * when the block has no valid row.  @K64: the tile's 64-byte form
 * (moe_gemm.h's MOE_GEMM_K64; the launch's K decides, entry); @FIT: its
 * fitted column tile (MOE_GEMM_FIT; the launch's N decides).
 */
template <int QUANT, int TM, int NSTAGES = MOE_GEMM_STAGES(QUANT, TM), bool K64 = false, bool FIT = false>
__device__ void gemm(const moe_gemm_args &a, unsigned char *smem, rows<TM> &r, int bx, int by)
{
	int64_t e;

	if (MOE_GEMM_PARTS(QUANT, TM) && a.row_parts > 0 && a.sorted_ids && !a.schedule) {
		for (int q = -1; next_part<QUANT, TM>(a, r, by, q, &e);)
			tile<QUANT, TM, NSTAGES, K64, FIT>(a, smem, r, e, bx);
	} else if (block_rows<TM>(a, r, by, &e)) {
		tile<QUANT, TM, NSTAGES, K64, FIT>(a, smem, r, e, bx);
	}
}

/*
 * entry - the body of kernel moe_gemm_<QUANT>_m<TM> (block blockIdx): gemm on
 * the kernel's own pipeline, or its shallow one where it has one and
 * args.stages asks (MOE_GEMM_SHALLOW), or its 64-byte form where it has one
 * and K asks (MOE_GEMM_ROWS_K64), or its fitted column tile where it has one
 * and N asks (MOE_GEMM_ROWS_FIT), as moe_gemm_tn and moe_gemm_rows_cols size
 * the grid for.  @smem, @r as for gemm.
 */
template <int QUANT, int TM>
__device__ __forceinline__ void entry(const moe_gemm_args &a, unsigned char *smem, rows<TM> &r)
{
	if (MOE_GEMM_SHALLOW(QUANT, TM) && a.stages == MOE_GEMM_SHALLOW_STAGES) {
		gemm<QUANT, TM, MOE_GEMM_SHALLOW_STAGES>(a, smem, r, blockIdx.x, blockIdx.y);
		return;
	}
	if constexpr (MOE_GEMM_K64(QUANT, TM)) {
		if (MOE_GEMM_ROWS_K64(QUANT, TM, a.K)) {
			gemm<QUANT, TM, MOE_GEMM_K64_STAGES(QUANT, TM), true>(a, smem, r, blockIdx.x, blockIdx.y);
			return;
		}
	}
	if constexpr (MOE_GEMM_FIT(QUANT, TM)) {
		if (MOE_GEMM_ROWS_FIT(QUANT, TM, a.N)) {
			gemm<QUANT, TM, MOE_GEMM_FIT_STAGES, false, true>(a, smem, r, blockIdx.x, blockIdx.y);
			return;
		}
	}
	gemm<QUANT, TM>(a, smem, r, blockIdx.x, blockIdx.y);
}

} /* namespace moe_gemm */

#endif

/*
 * moe_gemm.h - one half of a fused-MoE expert layer (gate/up or down) as a
 * grouped GEMM over the framework's aligned routing: the semantics of the
 * Triton `fused_moe_kernel` (SGLang and vLLM) and SGLang's
 * `fused_moe_kernel_gptq_awq`, on tiles that fit SM120's 101376 bytes.
 *
 * Routing, exactly as the align step lays it out (moe_align_block_size):
 * sorted_ids[0 .. EM) lists "routed rows" grouped by expert, each expert's
 * list padded to a multiple of block_m (the framework's BLOCK_SIZE_M, which
 * the padding depends on) with ids >= num_valid; expert_ids[i] is the expert
 * of sorted rows i*block_m .. i*block_m + block_m - 1 (-1: not on this rank,
 * the rows are written as zeros); rows at or past *num_tokens_post_padded
 * are not touched.
 *
 * Row mode (sorted_ids NULL): vLLM's naive block assignment, which skips the
 * align step for small batches (fused_moe.py _prepare_expert_assignment,
 * vLLM 0.33.0).  Row block by (grid y = ceil(EM / block_m)) is the
 * framework's block pid_m = by: it holds routed row by alone (when by <
 * num_valid), of expert expert_ids[by] (the flat topk_ids; -1: zeros), and
 * is not touched when by * block_m >= *num_tokens_post_padded.  Any TM
 * computes it; the 16-row kernels waste the least (one row of 16, as vLLM's
 * own kernel computes one of BLOCK_SIZE_M).
 *
 * Schedule mode (schedule not NULL; sorted_ids, expert_ids,
 * num_tokens_post_padded and num_valid not read): SGLang's inkling grouped
 * GEMM (inkling_moe.py _grouped_gemm_kernel, 0.5.16 to 0.5.23), whose rows
 * are already grouped by expert, each expert's rows contiguous.  Framework
 * block f < EM / block_m (the schedule's entries) is computed when f <
 * *num_blocks; its word w = schedule[f] names expert e = w & 0xffff and its
 * block j = w >> 16, the rows token_offs[e] + j * block_m up to that +
 * block_m or token_offs[e] + tokens_per_expert[e], whichever is first.  Row
 * block by (TM dividing block_m) is part by % (block_m / TM) of framework
 * block by / (block_m / TM).  top_k is 1 and no routed weight is applied
 * (the adapter sets both): each row is read from A and written to C at its
 * own index.
 *
 * In every mode, routed row id (< num_valid; schedule mode: each row a
 * block names) reads activation row id / top_k and writes output row id:
 *
 *   acc[id, n] = sum_k A[id / top_k, k] * W[e, n, k]      (fp32)
 *   acc *= scale                                          (quantized variants, below)
 *   acc += bias[e, n]                                     (if bias)
 *   acc *= topk_weights[id]                               (if mul_routed_weight)
 *   C[id, n] = bf16(acc)                                  (round to nearest even)
 *
 * Variants (one kernel each, times the row tiles below):
 *   MOE_BF16   A bf16, W bf16 [E, N, K]: mma.sync bf16.
 *   MOE_FP8    A and W FP8 E4M3 (w8a8), mma.sync e4m3, fp32 scales:
 *              MOE_SCALE_TENSOR  acc *= a_scale[0] * b_scale[e * bs_stride_e]
 *              MOE_SCALE_CHANNEL acc *= a_scale[row] * b_scale[e, n]
 *                                (row = id / top_k: per-token activation scales)
 *              MOE_SCALE_BLOCK   per K group g of group_k (= 128):
 *                                acc += dot_g * a_scale[row, g] * b_scale[e, n / group_n, g]
 *   MOE_W4A16  A bf16, W 4-bit integers packed two per byte along K (low
 *              nibble = even k), stored u = q + 8 (SGLang gptq/awq without
 *              zero points; compressed-tensors pack-quantized read as bytes);
 *              bf16 scales per group_size along K:
 *              W[e, n, k] = bf16((u - 8) * float(b_scale[e, n, k / group_size]))
 *   MOE_NVFP4  A bf16, W E2M1 codes packed two per byte (low nibble = even k,
 *              ModelOpt layout), E4M3 scales per 16 along K, fp32 global scale
 *              per expert:
 *              W[e, n, k] = bf16(e2m1(nib) * float(b_scale[e, n, k / 16]) * b_global[e])
 * The products of the weight-only variants are the bf16 weights above, as
 * Triton's gptq/awq kernel forms them before its dot.
 *
 * Precision: fp32 accumulation; FP8 products are exact in the MMA.  The
 * result differs from Triton's only by the order of fp32 additions, which is
 * well under one bf16 rounding of the output.
 *
 * Plain C: adapters, the tests and the reference engine fill this struct and
 * pass it by value as the kernel's only parameter.  Strides are in elements
 * of their tensors (bytes for packed 4-bit weights and E4M3 scales).
 */
#ifndef SM120_KERNELS_MOE_GEMM_H
#define SM120_KERNELS_MOE_GEMM_H

#include <stdint.h>

enum moe_quant { MOE_BF16 = 0, MOE_FP8, MOE_W4A16, MOE_NVFP4 };
enum moe_scale { MOE_SCALE_NONE = 0, MOE_SCALE_TENSOR, MOE_SCALE_CHANNEL, MOE_SCALE_BLOCK };

/*
 * Kernels: moe_gemm_<quant>_m<TM>: a block computes TM consecutive rows of
 * sorted_ids (block_m must be a multiple of TM) and moe_gemm_tn(quant, TM, K)
 * output columns (MOE_GEMM_TN(quant, TM), but on MOE_GEMM_ROWS_K64's short K)
 * with MOE_GEMM_WARPS(quant, TM) warps, 8 unless noted:
 *   TM 16   bf16 and FP8: 64 columns, 4 warps of 16 x 16 on three stages
 *           (MOE_GEMM_WARPS); the packed formats 32 columns, the warps
 *           splitting K (MOE_GEMM_KSPLIT ways), each 16 x 32 on its own k
 *           slice, so that small batches still put enough blocks on the
 *           weights;
 *   TM 32   bf16: 64 columns, 4 warps 2 (M) x 2 (N), each 16 x 32, on four
 *           stages (48 KiB) or its shallow two (24 KiB); FP8: 128 columns,
 *           warps 2 (M) x 4 (N), each 16 x 32, on two stages (about 41 KB:
 *           two blocks per SM on SM120 too);
 *   TM 64   128 columns; warps 2 (M) x 4 (N), each 32 x 32 (W4A16: 1 x 8,
 *           each 64 x 16: MOE_GEMM_PAIRED);
 *   TM 128  256 columns; warps 2 (M) x 4 (N), each 64 x 64 (the reuse per
 *           byte of shared memory that large batches need).
 * Blocks whose rows are all padding exit at once.  The MOE_GEMM_MULTI
 * kernels (TM 32, 64 and 128, every quantization) take column tiles bx, bx +
 * gridDim.x, ... of their rows as one pipelined sequence of k tiles, so
 * that a short K (the down GEMM's 192 or 256) does not leave each block
 * loading, computing and storing in turn; the others (the packed formats'
 * TM 16) take one, tile bx.  The 4-bit weights gained least: W4A16's down GEMM at TP8 on
 * the 128-row tile ran at 0.10, 0.08 and 0.06 of the floor against 0.09,
 * 0.07 and 0.05 on a block per tile (H200, gpu_bench_moe_decode
 * MOE_DECODE_ROWTILES=1, Kimi K2 at 1024, 2048 and 4096 tokens; GLM-4.7
 * up by 0.01 or less), as its warps, two a scheduler, wait on their own
 * dequantization and MMAs more than on the loads (ncu, Kimi K2's down
 * GEMM at 4096 tokens: 32% of issue slots used, the tensor pipe 15%).
 * Launch: block (moe_gemm_threads(quant, TM), 1, 1),
 *   grid (moe_gemm_rows_cols(quant, TM, N, K, num_valid), ceil(EM / TM), 1)
 *   (row mode: ceil(EM / block_m) rows of the grid; schedule mode EM / TM),
 *   dynamic shared memory moe_gemm_launch_smem(quant, TM, args.stages)
 *   (moe_gemm_smem(quant, TM) unless args.stages asks for the shallow
 *   pipeline, below).
 */
#define MOE_GEMM_THREADS 256
/*
 * MOE_GEMM_WARPS - the warps of a row-tile kernel: 8 (MOE_GEMM_THREADS), but 4 for bf16 and
 * FP8 at TM 16 and bf16 at TM 32.  A four-warp tile is KS 1, warps 1 (TM 16) or 2 (TM 32)
 * along M, 64 columns (warp tiles of 16 x 16 and 16 x 32), and small enough that SM120
 * holds several: TM 16 on three stages (30 KiB: three blocks per SM), bf16's TM 32 on four
 * (48 KiB: two) or its shallow two (24 KiB: three).  Their blocks' barriers and epilogues
 * then overlap each other's loads, as Triton's best SM120 configurations for these batches
 * do (4 warps, 16 or 32 x 64 or 128, three stages: bench_moe.py's search, H200, Kimi K2 and
 * GLM-4.7 at 512 tokens, both GEMMs, bf16 and FP8).  Measured on an H200 at SM120's blocks
 * per SM (gpu_bench_moe_decode MOE_DECODE_ROWTILES=1, TP8, BLOCK_SIZE_M 128, two runs,
 * against the eight-warp kernels of the same TM: 16 x 32 splitting K eight ways, 96 KiB;
 * bf16 32 x 128 on 80 KiB): bf16's 32-row tile on the gate/up 0.90, 0.88 and 0.85 of the
 * floor at Kimi K2's 256, 512 and 1024 tokens against 0.87, 0.85 and 0.82, 0.80-0.81 and
 * 0.76-0.77 at GLM-4.7's 256 and 512 against 0.76-0.77 and 0.72; FP8's 16-row tile on the
 * gate/up 0.82 and 0.80 at Kimi K2's 256 and 512 tokens (per block 0.77 and 0.74) against
 * the 32-row tile's 0.74 and 0.73 (0.74 and 0.73), and the down GEMM on the 16-row tile
 * 5 to 20 times as fast as on the k-split one (bf16 at Kimi K2's 512 tokens 0.62 against
 * 0.06).  Not FP8's 32-row tile: on four warps its four stages (49728 bytes, with the 1024
 * bytes of static shared memory, the routed ids padded to the dynamic region's 1024-byte
 * alignment, and the 1024 SM120 reserves a block) leave one block per SM (0.40 against 0.73 at
 * Kimi K2's gate/up, 512 tokens) and its two (three blocks) no faster than the eight-warp
 * tile's two stages.  Nor the packed formats (not measured so).  Under BLOCK_SIZE_M 32 bf16's
 * down GEMM runs this tile at any count, four stages deep up to 32 rows an expert and on its
 * shallow pipeline past (moe_gemm_rows_stages).
 */
#define MOE_GEMM_WARPS(quant, tm) \
	(((quant) == MOE_BF16 && ((tm) == 16 || (tm) == 32)) || ((quant) == MOE_FP8 && (tm) == 16) ? 4 : 8)
/*
 * MOE_GEMM_PARTS - the row tiles that take args.row_parts (moe_gemm_row_parts; it is 0 for
 * every other kernel, which would leave rows unwritten): the four-warp ones.  A block's loop
 * over parts holds the tile's setup across it: on sm_120 bf16 at TM 16 takes 118 registers
 * (78 without the loop), bf16 at TM 32 122 (92), FP8 at TM 16 114 (89), within the 128 of
 * their four blocks an SM (an H200 then holds four of bf16's 16-row blocks an SM, not seven:
 * its plain figures, not SM120's, drop); the eight-warp tiles spilled (FP8 at TM 32 and 128,
 * NVFP4 at TM 128).  A launch without parts runs a copy of the tile outside that loop (its
 * figures at SM120's blocks per SM as before: gpu_bench_moe_decode MOE_DECODE_PARTS=0).
 */
#define MOE_GEMM_PARTS(quant, tm) (MOE_GEMM_WARPS(quant, tm) == 4)
/* MOE_GEMM_PARTS_HELD - whether such a kernel finds the parts of a framework block of @block_m
 * rows in one read of its ids: MOE_GEMM_PARTS_IDS a thread, a part a bit of a word (the only
 * launches moe_gemm_row_parts makes; the kernel reads each part on its own otherwise). */
#define MOE_GEMM_PARTS_IDS 2
#define MOE_GEMM_PARTS_HELD(quant, tm, block_m) \
	((block_m) <= MOE_GEMM_PARTS_IDS * 32 * MOE_GEMM_WARPS(quant, tm) && (block_m) / (tm) <= 32)
#define MOE_GEMM_TN(quant, tm) \
	(MOE_GEMM_WARPS(quant, tm) == 4 ? 64 : (tm) == 16 ? 32 : (tm) <= 64 ? 128 : 256)
#define MOE_GEMM_KSPLIT(quant, tm) ((tm) == 16 && MOE_GEMM_WARPS(quant, tm) == 8 ? 8 : 1)
#define MOE_GEMM_KROW 128           /* bytes of A per row, k slice and warp (MOE_GEMM_K64: 64) */
#define MOE_GEMM_PACKED(quant) ((quant) == MOE_W4A16 || (quant) == MOE_NVFP4)
/* Kernels that take several column tiles per block (above): those whose warps do not split K. */
#define MOE_GEMM_MULTI(quant, tm) (MOE_GEMM_KSPLIT(quant, tm) == 1)
/*
 * MOE_GEMM_K64 - the row tiles with a second form for the down GEMM's short K
 * (MOE_GEMM_ROWS_K64): k tiles of 64 bytes of a row, not 128, on MOE_GEMM_K64_TN columns, as
 * Triton's best SM120 configurations of the FP8 down GEMM at 512 tokens have (16 or 32 x 128 x
 * 64, 4 warps, 3 stages: bench_moe.py's search, H100).  A column tile then streams its W bytes
 * over twice the k tiles before its epilogue (K 256: four, not two), and GLM-4.7's K 192 fills
 * its last k tile (the 128-byte form's is half empty).  The same sums, in the same order within
 * each 128-k group, but for the FP8 block scales' (a group is two slices: each adds its own dot
 * times the group's scales).  The kernel picks the form from K; moe_gemm_tn and
 * moe_gemm_rows_cols size the grid for it.  Two tiles have it:
 *   FP8's four-warp 16-row tile, on any short K: 128 columns (warps of 16 x 32), three stages
 *   (27888 bytes: three blocks per SM on SM120 as before);
 *   FP8's 32-row tile, where K ends mid-way through a 128-byte k tile (GLM-4.7's 192): warps
 *   2 x 4 of 16 x 32 as before, four stages (41536 bytes: two blocks per SM on SM120 as before).
 * Measured, this tile's fraction of the floor at SM120's blocks per SM without the form, then
 * with it (gpu_bench_moe_decode MOE_DECODE_ROWTILES=1, BLOCK_SIZE_M 128, two builds, two runs
 * each, alternating):
 *   the 16-row tile on an H200 (the form in every launch): Kimi K2's down GEMM at 256 tokens
 *   0.55 and 0.60 (per tensor), 0.47 and 0.52 (per block); GLM-4.7's at 256 0.32-0.33 and
 *   0.36, 0.28 and 0.31-0.32, at 512 0.19 and 0.22-0.23, 0.17 and 0.20-0.21; Kimi K2's at 512
 *   within 0.01; the gate/up (long K) slower, Kimi K2's at 512 tokens 0.83-0.84 and 0.80 (per
 *   tensor), 0.78-0.79 and 0.70-0.71 (per block), GLM-4.7's at 256 0.70 and 0.56-0.57: hence
 *   K decides;
 *   the 16-row tile on two H100s (the plan's tile): GLM-4.7's down GEMM at 192 and 256 tokens
 *   0.50 and 0.56, 0.47 and 0.51 (per tensor), 0.45 and 0.51, 0.42 and 0.45-0.46 (per block);
 *   Kimi K2's at 512 slower, 0.73-0.75 and 0.72-0.73 (per tensor), 0.66-0.67 and 0.64-0.65
 *   (per block), four runs; on the gate/up the kernel runs as before (the same tiles in one
 *   process against the base build as ALT.fatbin: within 0.01);
 *   the 32-row tile on an H100 (the form on every short K): GLM-4.7's down GEMM at 512 tokens
 *   0.33-0.35 and 0.37-0.38 (per tensor), 0.32 and 0.41 (per block); Kimi K2's at 1024 (K
 *   256) slower, 0.57 and 0.51 (per tensor), 0.53-0.55 and 0.53-0.54 (per block): hence K
 *   192 only (with its column tiles a block counted in bytes, not k tiles, 16 a block: 0.55
 *   and 0.57 against the 128-byte form's 0.56 and 0.54 on the plan's grid, mixed).
 * Other shapes of the 16-row tile's form ran slower at SM120's blocks per SM (Kimi K2's down
 * GEMM at 256, 384 and 512 tokens, per tensor, padded; two runs each, alternating with this
 * form's three stages of 64 bytes, which ran 0.81, 0.77 and 0.72 on an H100 and 0.59, 0.55
 * and 0.51 on an H200): two stages (H100) 0.77, 0.74 and 0.69; four (two blocks per SM, H200)
 * 0.46, 0.43 and 0.39-0.40; 128-byte k tiles on the 128 columns, the geometry of Triton's best
 * SM120 configuration there, on two stages (36 KiB: two blocks per SM, H100) 0.75-0.76, 0.70-0.71
 * and 0.65-0.66, per block 0.66 against 0.72 at 256 (plain, at this GPU's four blocks per SM,
 * per tensor within 0.02 of the form, per block up to 0.05 faster: 0.78-0.79 against 0.74 at
 * 512), and on three (one block per SM, H200) 0.31, 0.28 and 0.26.
 * The plan's figures: MOE_DECODE_SHORT_ROWS.  MOE_GEMM_FP8_K64 0 builds without the form.
 */
#ifndef MOE_GEMM_FP8_K64
#define MOE_GEMM_FP8_K64 1
#endif
#define MOE_GEMM_K64(quant, tm) \
	(MOE_GEMM_FP8_K64 && (quant) == MOE_FP8 && (MOE_GEMM_WARPS(quant, tm) == 4 || (tm) == 32))
#define MOE_GEMM_K64_TN 128
#define MOE_GEMM_K64_KROW 64   /* bytes of an A (and a W) row a k tile */
#define MOE_GEMM_K64_STAGES(quant, tm) ((tm) == 32 ? 4 : 3)
/* MOE_GEMM_ROWS_K64 - whether a launch of moe_gemm_<quant>_m<tm> on K @k runs the 64-byte form */
#define MOE_GEMM_ROWS_K64(quant, tm, k) \
	(MOE_GEMM_K64(quant, tm) && MOE_GEMM_SHORT_K(quant, k) && ((tm) != 32 || (k) % 128 != 0))

/*
 * MOE_GEMM_FIT - the row tiles with a second column tile for an N that their own would leave
 * partly idle: bf16's 128-row tile, MOE_GEMM_FIT_TN (192) columns, warps 2 (M) x 4 (N) of 64 x
 * 48, on MOE_GEMM_FIT_STAGES (two: 80 KiB) stages.  GLM-4.7's gate/up at TP8 (N 384) then
 * computes 384 columns, not the 256-column tile's 512.  The kernel picks the form from N
 * (MOE_GEMM_ROWS_FIT: where it computes fewer columns than the kernel's own tile); moe_gemm_tn
 * and moe_gemm_rows_cols size the grid for it.  The same sums in the same order.
 */
#define MOE_GEMM_FIT(quant, tm) ((quant) == MOE_BF16 && (tm) == 128)
#ifndef MOE_GEMM_FIT_TN
#define MOE_GEMM_FIT_TN 192
#endif
#ifndef MOE_GEMM_FIT_STAGES
#define MOE_GEMM_FIT_STAGES 2
#endif
/* the columns a launch on N @n computes on tiles of @tn */
#define MOE_GEMM_COLS(n, tn) (((int64_t)(n) + (tn) - 1) / (tn) * (tn))
/* MOE_GEMM_ROWS_FIT - whether a launch of moe_gemm_<quant>_m<tm> on N @n runs the fitted form */
#define MOE_GEMM_ROWS_FIT(quant, tm, n) \
	(MOE_GEMM_FIT(quant, tm) && MOE_GEMM_COLS(n, MOE_GEMM_FIT_TN) < MOE_GEMM_COLS(n, MOE_GEMM_TN(quant, tm)))

#define MOE_GEMM_KERNELS(X)                                 \
	X(MOE_BF16, 16, moe_gemm_bf16_m16)                  \
	X(MOE_BF16, 32, moe_gemm_bf16_m32)                  \
	X(MOE_BF16, 64, moe_gemm_bf16_m64)                  \
	X(MOE_BF16, 128, moe_gemm_bf16_m128)                \
	X(MOE_FP8, 16, moe_gemm_fp8_m16)                    \
	X(MOE_FP8, 32, moe_gemm_fp8_m32)                    \
	X(MOE_FP8, 64, moe_gemm_fp8_m64)                    \
	X(MOE_FP8, 128, moe_gemm_fp8_m128)                  \
	X(MOE_W4A16, 16, moe_gemm_w4a16_m16)                \
	X(MOE_W4A16, 64, moe_gemm_w4a16_m64)                \
	X(MOE_W4A16, 128, moe_gemm_w4a16_m128)              \
	X(MOE_NVFP4, 16, moe_gemm_nvfp4_m16)                \
	X(MOE_NVFP4, 64, moe_gemm_nvfp4_m64)                \
	X(MOE_NVFP4, 128, moe_gemm_nvfp4_m128)

/* The row-tile kernels as a table, in MOE_GEMM_KERNELS' order (each format's tiles
 * ascending): format, tile, entry name. */
struct moe_gemm_kernel {
	int quant, tm;
	const char *name;
};
#define MOE_GEMM_KERNEL_ROW(q, t, n) { q, t, #n },
static const struct moe_gemm_kernel moe_gemm_kernels[] = { MOE_GEMM_KERNELS(MOE_GEMM_KERNEL_ROW) };
#undef MOE_GEMM_KERNEL_ROW
enum { MOE_GEMM_NKERNELS = sizeof(moe_gemm_kernels) / sizeof(moe_gemm_kernels[0]) };

/* moe_gemm_kernel_index - the row of moe_gemm_kernels for @quant at tile @tm, or -1. */
static inline int moe_gemm_kernel_index(int quant, int tm)
{
	int i;

	for (i = 0; i < MOE_GEMM_NKERNELS; i++)
		if (moe_gemm_kernels[i].quant == quant && moe_gemm_kernels[i].tm == tm)
			return i;
	return -1;
}

/* moe_gemm_kernel_name - "moe_gemm_<quant>_m<tm>", or NULL for another pair. */
static inline const char *moe_gemm_kernel_name(int quant, int tm)
{
	const int i = moe_gemm_kernel_index(quant, tm);

	return i < 0 ? 0 : moe_gemm_kernels[i].name;
}

/* Bytes of W per output column, k slice and warp: 128 for bf16 (64 k) and FP8 (128 k), 32 packed. */
#define MOE_GEMM_BROW(quant) (MOE_GEMM_PACKED(quant) ? 32 : 128)
/* Bytes between W rows in shared memory (packed rows padded against bank conflicts). */
#define MOE_GEMM_BPITCH(quant, tm) \
	(MOE_GEMM_KSPLIT(quant, tm) * MOE_GEMM_BROW(quant) + (MOE_GEMM_PACKED(quant) ? 16 : 0))
/*
 * MOE_GEMM_W_PREFETCH - the L2 prefetch size of the weight loads (the row tiles' cp.async of
 * W, the decode kernels' W loads; primitives.cuh's PF): 256, L2 then fills the aligned 256
 * bytes around each 16-byte chunk from memory, so that a W row's next k tile (the next 128
 * bytes, a block's next stage or another warp's step) is in L2 when it is asked for.  A
 * hint: the bytes read are the same.  Measured on an H100 at SM120's blocks per SM
 * (gpu_bench_moe_decode with a build of 0 as ALT.fatbin, the same tiles in the same
 * process, BLOCK_SIZE_M 128, two runs), the plan's tiles, plain figures: Kimi K2's bf16
 * gate/up at 256, 512 and 1024 tokens on the 32-row tile 0.92-0.93, 0.91 and 0.88-0.89 of
 * the floor without, 0.97-0.98, 0.96 and 0.93-0.94 with; its FP8 gate/up at 512 on the
 * 16-row tile 0.86-0.89 against 0.92, at 1024 on the 32-row tile 0.80 against 0.85; its
 * bf16 down GEMM at 1024 and 4096 on the shallow 64-row tile 0.74 and 0.43-0.44 against
 * 0.79 and 0.45-0.46; GLM-4.7's bf16 gate/up at 256 and 512 on the 32-row tile 0.87 and
 * 0.84-0.85 against 0.92 and 0.89; GLM-4.7's down GEMM (K 192: 384 bytes a bf16 row, odd
 * rows starting mid-way through a 256-byte block) within 0.01 but for bf16 at 256 tokens on
 * the 16-row tile, 0.77 against 0.78 in one run and 0.71 in the other (padded); the decode
 * kernels 0.00 to 0.04 faster (Kimi K2's FP8 down GEMM at 64 tokens 0.76 against 0.80).
 * Slower where the plan does not run it: the 16-row tile on a long K past 16 rows an expert
 * (Kimi K2's bf16 gate/up at 1024 tokens, 0.86 against 0.83-0.84).  128 changed nothing
 * (within 0.01).  SM120's L2 and GDDR7 are not these; a build with -DMOE_GEMM_W_PREFETCH=0
 * measures the difference there.  A chunk that copies nothing (past N or K) keeps its
 * address and reads nothing; the hint adds no read of its own.
 */
#ifndef MOE_GEMM_W_PREFETCH
#define MOE_GEMM_W_PREFETCH 256
#endif
/* Bytes of W scales per stage: packed at TM 128, the scales of the block's
 * 256 columns (fp32, one per k16 step: 4 per 64-k slice) are staged in
 * shared memory; the narrower tiles keep theirs in registers. */
#define MOE_GEMM_SCALE_BYTES(quant, tm) ((tm) == 128 && MOE_GEMM_PACKED(quant) ? MOE_GEMM_TN(quant, tm) * 16 : 0)
/*
 * MOE_GEMM_PAIRED - the row tiles that run two blocks per SM, on SM120 too: W4A16 at TM 64,
 * on MOE_GEMM_PAIRED_STAGES stages (43008 bytes) and warps 1 (M) x 8 (N), each 64 x 16, that
 * dequantize each W fragment once (the 2 x 4 warps of 32 x 32 dequantize each twice), in 128
 * registers.  One block of 8 warps held that tile by its latency: its warps, two a scheduler,
 * waited on their own dequantization and MMAs (ncu, the 128-row tile at Kimi K2's down GEMM
 * at 4096 tokens: 32% of issue slots used, the tensor pipe 15%).  Measured on an H200
 * (gpu_bench_moe_decode MOE_DECODE_BM=64 MOE_DECODE_ROWTILES=1, INT4 at TP8, against the
 * four-stage tile of 2 x 4 warps in one run): Kimi K2's gate/up at 2048, 4096 and 8192
 * tokens 2.33 to 2.35 times as fast (3108, 5881 and 9208 us to 1335, 2515 and 3911), its
 * down GEMM 2.20 to 2.28 (2026, 3733 and 5918 us to 890, 1655 and 2688); GLM-4.7's gate/up
 * 2.31 to 2.36 and down 2.09 to 2.18 at 1024 to 8192 tokens.  (That run's kernel also
 * dequantized a warp's W fragments before its A loop; without that, as here, it ran within
 * 1% of it in another run.)  The warps matter as much as the blocks per SM: on the same three
 * stages and two blocks per SM, warps 2 x 4 of 32 x 32 ran at 0.10, 0.09 and 0.05 of the floor
 * against these warps' 0.14, 0.13 and 0.07 (Kimi K2's gate/up at 1024, 2048 and 4096 tokens;
 * slower on every other row of both models, both GEMMs, 1024 to 8192 tokens, but GLM-4.7's
 * down GEMM at 4096 and 8192, equal at 0.02 and 0.01; H200, one run, the same output bytes).
 * A framework block of 64 rows admits no 128-row tile, and
 * BLOCK_SIZE_M 64 is common: 591 of the 1537 buckets from 1024 tokens in SGLang 0.5.9's tuned
 * configuration files.
 */
#define MOE_GEMM_PAIRED(quant, tm) ((quant) == MOE_W4A16 && (tm) == 64)
#define MOE_GEMM_PAIRED_STAGES 3
/* Bytes of one pipeline stage: a k tile of A and of W (and the W scales). */
#define MOE_GEMM_STAGE_BYTES(quant, tm)                                                        \
	((tm) * MOE_GEMM_KSPLIT(quant, tm) * MOE_GEMM_KROW + MOE_GEMM_TN(quant, tm) * MOE_GEMM_BPITCH(quant, tm) + \
	 MOE_GEMM_SCALE_BYTES(quant, tm))
/*
 * Pipeline depth: as many stages as fit in 96 KiB, at most 4 (the FP8 group
 * scales below come on top, within SM120's 101376 bytes).  The bf16 and
 * FP8 tiles at TM 128 get two: one 128-byte k tile computed while the next
 * loads.  (Four stages of 64-byte k tiles, a barrier every 64 bytes and 192
 * bytes in flight, measured slower: bf16 at TM 128 on an H200, 270 against
 * 342 TFLOP/s.)  FP8 at TM 32 runs two stages, so that SM120 holds two of
 * its blocks (moe_gemm_rows_tile).  (Three stages, one block on SM120, and
 * four warps on four stages, 48 KiB and two blocks as bf16's, both ran
 * slower at SM120's blocks per SM on every row measured: H200,
 * gpu_bench_moe_decode MOE_DECODE_ROWTILES=1, FP8 per tensor and 128 x 128
 * blocks at 512 to 4096 tokens, BLOCK_SIZE_M 128, two runs alternating: Kimi
 * K2's gate/up at 512 tokens per tensor 0.74-0.75 and 0.48 of the floor
 * against 0.84, GLM-4.7's 0.54-0.55 and 0.39 against 0.67-0.68, Kimi K2's
 * down GEMM 0.46 and 0.25-0.26 against 0.67-0.68; on the H200's own blocks
 * per SM three stages ran faster at 512 tokens, 0.90 against 0.84, and the
 * four warps, their registers limited to 255 for two blocks, slower, 0.76.)
 * bf16 at TM 32 four (48 KiB on its four
 * warps, two blocks on SM120), and two on its shallow pipeline
 * (MOE_GEMM_SHALLOW); the four-warp tiles at TM 16 three (MOE_GEMM_WARPS).
 */
#define MOE_GEMM_STAGES(quant, tm)                                                    \
	(MOE_GEMM_PAIRED(quant, tm)                             ? MOE_GEMM_PAIRED_STAGES : \
	 (tm) == 16 && MOE_GEMM_WARPS(quant, tm) == 4           ? 3 :                        \
	 (tm) == 32 && (quant) == MOE_FP8                       ? 2 :                        \
	 98304 / MOE_GEMM_STAGE_BYTES(quant, tm) > 4 ? 4 : 98304 / MOE_GEMM_STAGE_BYTES(quant, tm))
/*
 * Bytes of FP8 group scales per stage, past the stages' data: for each of a
 * k tile's KS slices (one 128-k group each), the activation scale of each of
 * the TM rows, then the weight scale of each 128 columns of the TN (fp32,
 * rounded up to 16 bytes).  MOE_SCALE_BLOCK launches copy them with the k
 * tile, so that the pipeline fetches them ahead of their use as it does the
 * operands; 0 for the other variants.
 */
#define MOE_GEMM_GSCALE_COLS(quant, tm) (MOE_GEMM_TN(quant, tm) > 128 ? MOE_GEMM_TN(quant, tm) / 128 : 1)
#define MOE_GEMM_GSCALE_BYTES(quant, tm) \
	((quant) == MOE_FP8 ? (MOE_GEMM_KSPLIT(quant, tm) * ((tm) + MOE_GEMM_GSCALE_COLS(quant, tm)) * 4 + 15) / 16 * 16 : 0)
/* The dynamic shared memory of a @stages-deep pipeline of moe_gemm_<quant>_m<tm>. */
#define MOE_GEMM_PIPE_BYTES(quant, tm, stages) \
	((stages) * (MOE_GEMM_STAGE_BYTES(quant, tm) + MOE_GEMM_GSCALE_BYTES(quant, tm)))
/* The dynamic shared memory of the 64-byte form (MOE_GEMM_K64) of moe_gemm_<quant>_m<tm>. */
#define MOE_GEMM_K64_PIPE_BYTES(quant, tm)                                                               \
	(MOE_GEMM_K64_STAGES(quant, tm) *                                                                 \
	 (((tm) + MOE_GEMM_K64_TN) * MOE_GEMM_K64_KROW + MOE_GEMM_GSCALE_BYTES(quant, tm)))
/* moe_gemm_smem - the dynamic shared memory of a kernel (its deepest pipeline, of either form). */
#define MOE_GEMM_OWN_PIPE_BYTES(quant, tm) MOE_GEMM_PIPE_BYTES(quant, tm, MOE_GEMM_STAGES(quant, tm))
#define moe_gemm_smem(quant, tm)                                                                       \
	(MOE_GEMM_K64(quant, tm) && MOE_GEMM_K64_PIPE_BYTES(quant, tm) > MOE_GEMM_OWN_PIPE_BYTES(quant, tm) \
		 ? MOE_GEMM_K64_PIPE_BYTES(quant, tm)                                                        \
		 : MOE_GEMM_OWN_PIPE_BYTES(quant, tm))

/*
 * The shallow pipeline: a MOE_GEMM_SHALLOW kernel (bf16 at TM 64 and 32,
 * whose registers allow two blocks per SM) runs two stages instead of
 * MOE_GEMM_STAGES when args.stages is 2, in moe_gemm_launch_smem bytes
 * (48 and 24 KiB): SM120's 100 KiB per SM then hold two of its blocks
 * instead of one (three of the four-warp TM 32), so one block's loads, barriers and epilogue overlap the
 * other's MMAs.  The same sums, bit for bit; only the depth of the
 * pipeline differs.
 */
#define MOE_GEMM_SHALLOW(quant, tm) ((quant) == MOE_BF16 && ((tm) == 64 || (tm) == 32))
#define MOE_GEMM_SHALLOW_STAGES 2

/* moe_gemm_launch_smem - the dynamic shared memory of a launch of moe_gemm_<quant>_m<tm>
 * with args.stages @stages (0: the kernel's own depth). */
static inline int moe_gemm_launch_smem(int quant, int tm, int32_t stages)
{
	return MOE_GEMM_SHALLOW(quant, tm) && stages == MOE_GEMM_SHALLOW_STAGES
		       ? MOE_GEMM_PIPE_BYTES(quant, tm, MOE_GEMM_SHALLOW_STAGES)
		       : moe_gemm_smem(quant, tm);
}

/* moe_gemm_threads - the block size (x) of a launch of moe_gemm_<quant>_m<tm>. */
static inline int moe_gemm_threads(int quant, int tm)
{
	return MOE_GEMM_WARPS(quant, tm) * 32;
}

/*
 * moe_gemm_rows_per_expert - the routed rows each expert gets in a launch of
 * @num_valid routed rows in a sorted list of @em rows aligned to @block_m
 * (the framework's BLOCK_SIZE_M), the experts counted from the align step's
 * padding, EM = rows + (E + 1)(block_m - 1) (one when block_m is 1).  An
 * estimate: it only steers speed.
 */
static inline int64_t moe_gemm_rows_per_expert(int32_t block_m, int32_t num_valid, int32_t em)
{
	int64_t experts = block_m > 1 ? (em - (int64_t)num_valid) / (block_m - 1) : 1;

	return num_valid / (experts > 1 ? experts : 1);
}

/* moe_gemm_short_k - whether K @k spans at most 8 k steps of 128 bytes of a @quant
 * row (64 k of bf16, 128 of the others): the down GEMM's K 192 or 256.  (The macro:
 * the kernels' form, MOE_GEMM_ROWS_K64, takes it too.) */
#define MOE_GEMM_SHORT_K(quant, k) ((int64_t)(k) <= 8 * ((quant) == MOE_BF16 ? 64 : 128))
static inline int moe_gemm_short_k(int quant, int32_t k)
{
	return MOE_GEMM_SHORT_K(quant, k);
}

/* moe_gemm_tn - the column tile of a launch of moe_gemm_<@quant>_m<@tm> on N @n and K @k. */
static inline int moe_gemm_tn(int quant, int tm, int32_t n, int32_t k)
{
	return MOE_GEMM_ROWS_K64(quant, tm, k) ? MOE_GEMM_K64_TN
	       : MOE_GEMM_ROWS_FIT(quant, tm, n) ? MOE_GEMM_FIT_TN
						 : MOE_GEMM_TN(quant, tm);
}

/*
 * moe_gemm_wide_waste - whether N @n leaves more of the 128-row tile's
 * 256-column tiles idle than of the 64-row tile's 128-column ones: N % 256
 * in 1 .. 128 (GLM-4.7's gate/up at TP8, N 384: 512 columns computed
 * against 384).  Pure.
 */
static inline int moe_gemm_wide_waste(int32_t n)
{
	return n % 256 > 0 && n % 256 <= 128;
}

/*
 * moe_gemm_rows_tile - the row tile TM (16, 32, 64 or 128) of the
 * moe_gemm_<quant>_m<TM> kernel for a launch of @quant (FP8: its scale
 * layout @scale, enum moe_scale; others MOE_SCALE_NONE) with N @n and K @k
 * (@block_m, @num_valid, @em as for moe_gemm_rows_per_expert): the largest
 * tile of @quant up to the wanted one that divides @block_m (a block of the
 * framework is then whole blocks of ours); 0 if none does.  (Under
 * BLOCK_SIZE_M 32 or 96 bf16 takes 32 rows, not 16: H200, Kimi K2 at TP8,
 * its gate/up at 1024 tokens 0.84 of the floor against 0.62, its down GEMM
 * at 512 tokens 0.78 against 0.11, as tiles on BLOCK_SIZE_M 128, against
 * the 16-row tile of eight warps splitting K.)  Wanted, by rows per
 * expert: 16 up to MOE_GEMM_M16_ROWS (where the decode kernels do not take
 * the launch: moe_gemm_decode_wanted), and up to MOE_GEMM_M16_PARTS_ROWS on
 * the four-warp 16-row tiles (MOE_GEMM_WARPS), whose launches skip a
 * framework block's padding parts (MOE_GEMM_PARTS, moe_gemm_row_parts), for
 * FP8 (16) and for bf16 on a short K (13, below).  Measured on an H200 at
 * SM120's blocks per SM (gpu_bench_moe_decode MOE_DECODE_ROWTILES=1,
 * BLOCK_SIZE_M 128, args.row_parts as the plan sets it, two runs): the down
 * GEMM at Kimi K2's 512 tokens (10.7 rows an expert, counted 10) bf16 0.73 of
 * the floor against the shallow 64-row tile's 0.63, FP8 per tensor 0.50
 * against the 32-row tile's 0.45; at GLM-4.7's 256 (12.8 rows) bf16 0.60
 * against 0.50, FP8 0.31 against 0.29; GLM-4.7's FP8 gate/up at 256 tokens
 * 0.69-0.70 against 0.63-0.64; but at 21 rows (Kimi K2 at 1024 tokens) FP8's
 * gate/up 0.59 against the 32-row tile's 0.69-0.70 and bf16's down GEMM 0.48
 * against 0.58.  bf16 on a short K keeps 16 rows up to 13 an expert, then its
 * four-warp 32-row tile, four stages deep, up to
 * MOE_GEMM_BF16_SHORT_M32_ROWS: measured (H200, SM120's blocks per SM, the
 * plan of these bounds against one without them, alternating processes, two
 * runs, the down GEMM at TP8, BLOCK_SIZE_M 128 and 64) at Kimi K2's 700 and
 * 768 tokens (14 and 15 rows an expert as counted) 1.02 and 1.07 times as
 * fast on BLOCK_SIZE_M 128 (0.71 and 0.70 of the floor against 0.69-0.70 and
 * 0.65-0.66), 1.07 and 1.12 on 64, at TP4 (K 512) 1.02 and 1.07, 1.08 and
 * 1.12, GLM-4.7's 290 and 320 1.01 and 1.03, 1.07 and 1.12; at 12 rows
 * (GLM-4.7's 256 tokens) the 16-row tile ran 0.67 against 0.63-0.64
 * (BLOCK_SIZE_M 128), and at 19 rows the shallow 64-row tile kept Kimi K2's
 * 960 tokens at 0.70-0.71 against 0.67 (GLM-4.7's 400 ran 0.58-0.59 on the
 * 32-row tile against 0.53-0.54).
 * Then 64 up to 64 rows, 128 beyond
 * (bf16 on a long K where N fills the 256-column tiles: beyond
 * MOE_GEMM_BF16_M64_ROWS, 52; on an H200 at SM120's blocks per SM, two runs,
 * the 128-row tile at Kimi K2's gate/up at 2560 and 3072 tokens, 53 and 64
 * rows an expert, 0.75 and 0.69-0.73 of the floor against the 64-row tile's
 * shallow pipeline's 0.72 and 0.62, GLM-4.7's unsplit at 1280, 64 rows,
 * 0.75 against 0.63; but at 1024, 51 rows, 0.75 against 0.80, Kimi K2's at
 * 2048, 43, 0.77-0.78 against 0.80-0.81: the 64-row tile streams W twice
 * only for the experts past 64 rows, which at 51 rows on average are few);
 * but 64 at any count for a kernel with a shallow pipeline on a short K (bf16's
 * down GEMM: moe_gemm_rows_stages), and for FP8 on an N that wastes the
 * wide tiles (moe_gemm_wide_waste), and for bf16 there unless its 128-row
 * tile's fitted form computes fewer columns (MOE_GEMM_ROWS_FIT: GLM-4.7's
 * N 384); FP8 takes 32 up to 32 rows
 * an expert, where its 64-row tile's registers (161 on sm_120) leave one
 * block per SM and the 32-row tile's two stages and 113 registers two, and
 * at any count on a short K (the down GEMM: a column tile is two to eight
 * k tiles of 128 bytes between epilogues, on the 64- and 128-row tiles' one
 * block per SM on SM120).  Measured on an H100 at SM120's blocks per SM
 * (gpu_bench_moe_decode MOE_DECODE_ROWTILES=1, the down GEMM at TP8, one
 * run, per tensor, then per block): Kimi K2 at 2048 and 4096 tokens (43
 * and 85 rows an expert) on BLOCK_SIZE_M 64 0.34 and 0.21 of the floor on
 * the 32-row tile against 0.26 and 0.15 on the 64-row one (0.32 and 0.19
 * against 0.28 and 0.16), on BLOCK_SIZE_M 128 at 4096 0.21 against the
 * 128-row tile's 0.15 (0.19 against 0.12-0.13); GLM-4.7 at 1024, 2048 and
 * 4096 (51, 102 and 205 rows) on BLOCK_SIZE_M 64 0.23, 0.13 and 0.07
 * against 0.17, 0.09 and 0.05 (0.26, 0.15 and 0.08 against 0.18, 0.10
 * and 0.06), on BLOCK_SIZE_M 128 0.13 and 0.07 against the 128-row tile's
 * 0.10 and 0.05 (0.15 and 0.08 against 0.09 and 0.04); Kimi K2 at TP4
 * and TP2 (K 512 and 1024, MOE_DECODE_MODEL kimi_tp4 and kimi_tp2) at 2048
 * and 4096 tokens 0.45 and 0.27, 0.53-0.54 and 0.32-0.33 against the 64-row
 * tile's 0.37 and 0.21, 0.46 and 0.26 (BLOCK_SIZE_M 64), the 128-row
 * tile's 0.29 and 0.22, 0.39 and 0.30 (BLOCK_SIZE_M 128), per block
 * likewise; the 16-row tile 0.01-0.15 slower padded (plain, from 0.08
 * slower to 0.04 faster).  On the gate/up FP8 takes 32 rows at any count
 * with 128 x 128 block scales only (whose per-group scaling of the 64- and
 * 128-row tiles' wider accumulators costs them more): per tensor the 32-row
 * tile ran within 0.05 of the plan's, either way (Kimi K2 at 4096 tokens,
 * BLOCK_SIZE_M 128, H100: 0.40 against the 128-row tile's 0.43), per block
 * faster (0.35 against 0.30).  On an H200 (gpu_bench_moe_decode
 * MOE_DECODE_ROWTILES=1, the gate/up at TP8, after mma_e4m3's sm_90 form)
 * per block Kimi K2 at 2048 and 4096 tokens 0.45 and 0.28 of the floor
 * against 0.41 on the 64-row tile and 0.23 on the 128-row one (BLOCK_SIZE_M
 * 64: 0.46 and 0.28 against 0.42 and 0.25), GLM-4.7 (N 384, the 64-row
 * tile) at 2048 and 4096 0.22 and 0.12 against 0.20 and 0.11, at 1024 0.37
 * against 0.38; per tensor Kimi K2 at 2048 and 4096 0.49 and 0.31 against
 * 0.52 and 0.35.  tests/gpu/bench_moe.sh, per block, padded, two runs on
 * an H200, before and after: Kimi K2 at 2048 and 4096 tokens 0.739 and
 * 1.379 ms, 0.700 and 1.135 ms (0.72 and 0.65 of the best SM120 Triton's
 * speed, 0.76-0.77 and 0.79-0.80), GLM-4.7 0.335 and 0.606 ms, 0.323 and
 * 0.591 ms.
 * Measured on an H200 (gpu_bench_moe_decode MOE_DECODE_ROWTILES=1, FP8
 * per tensor and per block at TP8, BLOCK_SIZE_M 128, one run): Kimi K2's
 * gate/up at 256, 512 and 1024 tokens (5, 11 and 21 rows an expert) 0.75,
 * 0.73 and 0.67 of the floor on the 32-row tile against 0.67, 0.65 and
 * 0.53 on the 64-row one (per block: 0.74, 0.71, 0.61 against 0.53, 0.53,
 * 0.52), GLM-4.7's at 256 and 512 (13 and 26 rows) 0.61 and 0.55 against
 * 0.53 and 0.44, its down GEMM at 512 and 1024 0.22 and 0.14 against 0.13
 * and 0.11; at 51 rows (GLM-4.7's gate/up, 1024 tokens) 0.33 and 0.29
 * against 0.33 and 0.32.  bf16 takes 32 up to 32 rows an expert on a long
 * K (gate/up), its four stages holding as many W bytes in flight as the
 * 64-row tile's four for half the A rows.  Measured on an H200 at SM120's
 * blocks per SM (gpu_bench_moe_decode MOE_DECODE_ROWTILES=1, bf16 at TP8,
 * BLOCK_SIZE_M 128, padded, two runs): Kimi K2's gate/up at 256, 512 and
 * 1024 tokens (5, 11 and 21 rows) 0.88, 0.86 and 0.83 of the floor
 * against the 64-row tile's 0.85, 0.84 and 0.81, GLM-4.7's at 256 and
 * 512 (13 and 26 rows) 0.77 and 0.72 against 0.76 and 0.71, but at 51
 * rows (1024 tokens) 0.45 against 0.64; on two stages the 32-row tile had
 * run 0.77 at Kimi K2's 512 tokens.  (These on its eight-warp form; on its
 * four warps it ran 0.02-0.05 faster again: MOE_GEMM_WARPS.)  Past 20 rows the margin is within
 * 0.02 either way (three runs on another H200: GLM-4.7's 512 tokens 0.72
 * against 0.73, its TP1 shapes, N 3072, 0.80-0.81 against 0.81-0.82), and
 * one H200 ran GLM-4.7's 26 rows 8% slower on the 32-row tile (0.65
 * against 0.71, two runs): a bound near 20 rows is the fallback if that
 * recurs.  bf16's down GEMM keeps the 64-row
 * tile's shallow pipeline (Kimi K2 at 256 and 512 tokens 0.66 and 0.63;
 * the 32-row tile 0.66 and 0.62 on two stages, 0.59 and 0.54 on four).
 * W4A16 takes 128 past 16's
 * but 64 (MOE_GEMM_PAIRED: two blocks per SM) up to 64 rows an expert on a
 * short K or an N that wastes the wide tiles.  Measured on an H200
 * (gpu_bench_moe_decode MOE_DECODE_ROWTILES=1, INT4 at TP8, BLOCK_SIZE_M
 * 128, the plan of this rule against the 128-row tile in one run): Kimi
 * K2's down GEMM at 2048 and 3072 tokens (43 and 64 rows an expert) 903
 * and 1271 us against 1159 and 1373, GLM-4.7's gate/up (N 384) and down at
 * 1024 tokens (51 rows) 331 and 260 us against 459 and 340; not Kimi's
 * gate/up, whose long K the 128-row tile streamed faster (2048 and 3072
 * tokens: 1279 and 1469 us against 1337 and 1911), nor past 64 rows (GLM
 * at 2048 tokens, 102 rows: 0.07 and 0.05 of the floor against 0.06 and
 * 0.04).  Chosen for SM120's blocks
 * per SM, as measured on an H100 and an H200 with the launches padded to
 * them (tests/gpu/bench_moe_decode.c, Kimi K2 and GLM-4.7 at TP8, 8 to 4096
 * tokens): the 16-row tile's 96 KiB keep one block per SM there, and past 4
 * rows an expert it streamed the gate/up weights at 0.2-0.8 of the floor,
 * the 64-row tile at 0.5-0.9; bf16's down GEMM past 8 rows an expert ran
 * 7-41% faster on the shallow 64-row tile than on the 128-row one; GLM's
 * gate/up (N 384) at 2048 and 4096 tokens ran 10-22% faster on the 64-row
 * tile (bf16 on its shallow pipeline, FP8 per tensor and per block) than on
 * the 128-row one's 256 columns.  bf16's 128-row tile on its fitted 192
 * columns (MOE_GEMM_FIT) ran ahead of the shallow 64-row tile there:
 * H200, gpu_bench_moe_decode MOE_DECODE_ROWTILES=1, BLOCK_SIZE_M 128, at
 * SM120's blocks per SM, two runs, GLM-4.7's gate/up at 2048, 4096 and 8192
 * tokens (102, 205 and 410 rows an expert) 0.51-0.52, 0.31-0.32 and 0.16
 * of the floor against 0.47, 0.28-0.29 and 0.14, but at 1024 (51 rows)
 * 0.56 against the 64-row tile's 0.70 (the 128 x 128 tile on three stages:
 * 0.65, 0.49, 0.25 and 0.14).  NVFP4 keeps 16 rows up to 24 an expert (not
 * measured so).  Pure, plain C: the shim's fused-MoE adapter and the reference
 * engine both choose with it.
 */
#define MOE_GEMM_M16_ROWS(quant) ((quant) == MOE_NVFP4 ? 24 : 4)
#define MOE_GEMM_M16_PARTS_ROWS(quant) ((quant) == MOE_BF16 ? 13 : 16)
#define MOE_GEMM_BF16_M64_ROWS 52
#define MOE_GEMM_BF16_SHORT_M32_ROWS 16
static inline int moe_gemm_rows_tile(int quant, int scale, int32_t block_m, int32_t num_valid, int32_t em,
				     int32_t n, int32_t k)
{
	const int64_t per = moe_gemm_rows_per_expert(block_m, num_valid, em);
	const int short_k = moe_gemm_short_k(quant, k);
	const int narrow = (MOE_GEMM_SHALLOW(quant, 64) && short_k) ||
			   (!MOE_GEMM_PACKED(quant) && moe_gemm_wide_waste(n) && !MOE_GEMM_ROWS_FIT(quant, 128, n));
	const int paired = MOE_GEMM_PAIRED(quant, 64) && per <= 64 && (short_k || moe_gemm_wide_waste(n));
	/* the 32-row tile: FP8 up to 32 rows an expert and at any count on a short K or with block
	 * scales, bf16 up to 32 on a long K and MOE_GEMM_BF16_SHORT_M32_ROWS on a short one */
	const int rows32 = quant == MOE_FP8 ? per <= 32 || short_k || scale == MOE_SCALE_BLOCK
					    : quant == MOE_BF16 && per <= (short_k ? MOE_GEMM_BF16_SHORT_M32_ROWS : 32);
	/* bf16 on a long K, where N fills the 256-column tiles: the 128-row tile past
	 * MOE_GEMM_BF16_M64_ROWS */
	const int64_t rows64 = quant == MOE_BF16 && !short_k && !moe_gemm_wide_waste(n) ? MOE_GEMM_BF16_M64_ROWS : 64;
	const int want = per <= MOE_GEMM_M16_ROWS(quant) ||
					 (MOE_GEMM_PARTS(quant, 16) && per <= MOE_GEMM_M16_PARTS_ROWS(quant) &&
					  (quant == MOE_FP8 || short_k))
				 ? 16
			 : rows32 ? 32
			 : (quant != MOE_W4A16 && (per <= rows64 || narrow)) || paired ? 64
										       : 128;
	int i;

	for (i = MOE_GEMM_NKERNELS - 1; i >= 0; i--)   /* the format's tiles, largest first */
		if (moe_gemm_kernels[i].quant == quant && moe_gemm_kernels[i].tm <= want &&
		    block_m % moe_gemm_kernels[i].tm == 0)
			return moe_gemm_kernels[i].tm;
	return 0;
}

/*
 * moe_gemm_rows_stages - args.stages for moe_gemm_<@quant>_m<@tm> on K @k
 * at @per rows an expert (moe_gemm_rows_per_expert): the shallow pipeline
 * (MOE_GEMM_SHALLOW_STAGES) where the kernel has one, on the 64-row tile at
 * any K and count (on the down GEMM's short K 14-50% faster than its four
 * stages at SM120's blocks per SM, Kimi K2 and GLM-4.7 at 64 to 4096
 * tokens; this build, BLOCK_SIZE_M 128, Kimi K2 at 2048 tokens 0.62 of the
 * floor against 0.45-0.46, GLM-4.7 at 512 0.56-0.57 against 0.47), on the
 * 32-row tile where K is short and an expert's rows
 * span more than one of its tiles (the down GEMM past 32 rows an expert,
 * which only BLOCK_SIZE_M 32 or 96 gives it: a block's column tiles are a
 * few k tiles each, and the third block per SM overlaps one's epilogue
 * with the others' loads); else 0.  The 32-row tile on a short K, four
 * stages against two, measured on an H200 at SM120's blocks per SM
 * (gpu_bench_moe_decode MOE_DECODE_ROWTILES=1, bf16's down GEMM at TP8,
 * BLOCK_SIZE_M 32, two runs): Kimi K2 at 512, 768, 1152 and 1536 tokens
 * (10, 15, 23 and 31 rows an expert) 0.83, 0.80, 0.73-0.74 and 0.56 of the
 * floor against 0.76, 0.74, 0.70 and 0.56-0.57, at TP4 (K 512) 1536 0.58-0.60
 * against 0.56-0.57; GLM-4.7 at 512 and 640 (25 and 31) 0.64 and 0.53
 * against 0.55 and 0.47; but at 2048 and 4096 Kimi K2 (42 and 85 rows)
 * 0.44 and 0.26-0.27 against 0.45-0.46 and 0.28, GLM-4.7 at 4096 (203)
 * 0.12 against 0.12 (GLM-4.7 at 1024, 50 rows: 0.37-0.38 against 0.35).
 * The plan against the last one (shallow at any count on a short K), in
 * alternating processes, two runs, padded: GLM-4.7 at 512 and 640 tokens
 * 1.16-1.17 times as fast, Kimi K2 at 1536 1.02, at TP4 1.07.  Measured
 * on an H200 at SM120's blocks per SM (gpu_bench_moe_decode
 * MOE_DECODE_ROWTILES=1, bf16 gate/up, BLOCK_SIZE_M 128, two runs), four
 * stages against two: the 64-row tile at Kimi K2's 1600, 2048, 2560 and
 * 3072 tokens (33, 43, 53 and 64 rows an expert) 0.81, 0.77-0.78,
 * 0.71-0.72 and 0.57 of the floor against 0.82-0.83, 0.80-0.81, 0.72 and
 * 0.62; at GLM-4.7's 700, 1024 and 1280 (35, 51 and 64) 0.71-0.72, 0.69 and
 * 0.51-0.52 against 0.75-0.76, 0.75 and 0.59, its unsplit shapes' 0.82,
 * 0.74 and 0.55 against 0.80-0.81, 0.80 and 0.63 (the one loss, 35 rows);
 * past 64 rows 25-28% (GLM-4.7's gate/up at 2048 and 4096 tokens, an
 * earlier build).  (An H100 had run the four stages 0-12% faster up to 64
 * rows.)  On the gate/up's long K the
 * 32-row tile streamed faster four stages deep at every count, 0.58 and
 * 0.43-0.44 at Kimi K2's 2048 and 3072 tokens against 0.47 and 0.38, under
 * BLOCK_SIZE_M 64 at GLM-4.7's 3072 (154 rows) 0.22-0.23 against 0.19.
 * Pure.
 */
static inline int32_t moe_gemm_rows_stages(int quant, int tm, int32_t k, int64_t per)
{
	return MOE_GEMM_SHALLOW(quant, tm) && (tm == 64 || (moe_gemm_short_k(quant, k) && per > tm))
		       ? MOE_GEMM_SHALLOW_STAGES
		       : 0;
}

/*
 * moe_gemm_rows_cols - the grid's x for moe_gemm_<@quant>_m<@tm> on N @n,
 * K @k, with @num_valid routed rows: ceil(N / TN) (TN: moe_gemm_tn), a block per column
 * tile, but for the MOE_GEMM_MULTI kernels, whose blocks take about
 * MOE_GEMM_MULTI_STEPS k tiles each (several tiles when K is short),
 * unless that leaves fewer than MOE_GEMM_MULTI_BLOCKS blocks over the row
 * blocks the routed rows fill at least (num_valid / tm: padding makes
 * more).  Pure, plain C; any x from 1 to ceil(N / TN) computes the same
 * result on a MULTI kernel.
 */
#define MOE_GEMM_MULTI_STEPS 16
#define MOE_GEMM_MULTI_BLOCKS 512   /* 1024 kept GLM-4.7's down GEMM at 512 tokens to 2 tiles a block,
				     * 10% slower than 4 to 8 (H100, bench_moe_decode "per") */
static inline int moe_gemm_rows_cols(int quant, int tm, int32_t n, int32_t k, int32_t num_valid)
{
	const int tn = moe_gemm_tn(quant, tm, n, k);
	const int64_t tiles = ((int64_t)n + tn - 1) / tn;
	const int kb = MOE_GEMM_ROWS_K64(quant, tm, k) ? MOE_GEMM_K64_KROW : MOE_GEMM_KROW;   /* A bytes a k tile */
	const int ke = kb / (quant == MOE_FP8 ? 1 : 2);
	const int64_t nk = ((int64_t)k + ke - 1) / ke;
	const int64_t rows = num_valid / tm > 1 ? num_valid / tm : 1;
	int64_t per = nk > 0 ? (MOE_GEMM_MULTI_STEPS + nk - 1) / nk : 1;

	if (!MOE_GEMM_MULTI(quant, tm))
		return (int)tiles;
	if (per > tiles * rows / MOE_GEMM_MULTI_BLOCKS)
		per = tiles * rows / MOE_GEMM_MULTI_BLOCKS;
	if (per > tiles)
		per = tiles;
	if (per < 1)
		per = 1;
	return (int)((tiles + per - 1) / per);
}

/*
 * Decode kernels: moe_gemm_<quant>_d<TN>, bf16, FP8 (every scale layout) and
 * W4A16 (group_size a power of two >= 32: 32, 64 or 128), for launches whose
 * experts get a few routed rows each (decode batches), where reading the
 * touched experts' weights is the whole cost.  The same semantics (sorted
 * and row mode) and rounding contract as above; any block_m >= 1.
 *
 * A block takes framework blocks (block_m sorted rows each) blockIdx.y,
 * blockIdx.y + gridDim.y, ... below *num_tokens_post_padded, and of each
 * the column tiles (TN columns) blockIdx.x, blockIdx.x + gridDim.x, ...  It
 * gathers a framework block's valid routed rows (up to 256 at a time) and computes
 * them 8 at a time (W4A16 past a few rows an expert: the staged kernels below,
 * moe_gemm_decode_rows): each pass streams its tiles' weights once, tile
 * after tile.  Its 8 warps split TN / MOE_DECODE_WARP_N ways along N and
 * the rest (MOE_DECODE_KWARPS) along K: a warp multiplies
 * 16 weight columns, or 32 (MOE_DECODE_WARP_N; two m16 fragments: W4A16),
 * the mma.sync A operand, by the rows (the n8 operand), loading W and A from
 * global memory straight into fragments, MOE_DECODE_DEPTH k steps ahead
 * (across tiles; a k step is MOE_DECODE_STEP_K(quant) k: 128 bytes of a bf16
 * or FP8 row; W4A16: 64 bytes of W, fetched MOE_DECODE_W4_DEPTH steps ahead
 * with its scales (one step ahead on 32-column warps), A one step ahead, and
 * dequantized in registers); no shared-memory staging, no barrier in the k
 * loop.  The warps' k partial sums are added in shared memory in warp order
 * (deterministic), then the epilogue, one barrier per tile.  No workspace;
 * one launch; any grid computes the whole result.
 *
 * Launch: block (MOE_GEMM_THREADS, 1, 1),
 *   grid (moe_gemm_decode_cols(quant, N, K, TN, EM, block_m, num_valid),
 *         moe_gemm_decode_blocks(EM, block_m, num_valid), 1),
 *   no dynamic shared memory.
 */
/*
 * MOE_DECODE_WARP_N - the weight columns a warp of the decode kernel of @quant, @tn columns and
 * @rows a pass multiplies: 32 for the W4A16 tiles of 32 and more columns, two m16 W fragments
 * that take each dequantized A fragment (a lane's A row, 64 bytes a k step) twice, so that a
 * warp reads half the A bytes a W byte that it reads at 16 columns: A, the same bytes for every
 * warp and tile, came from L1, and L1 held these kernels (ncu, H200, Kimi K2's gate/up at 1024
 * tokens, 16 rows a pass: L1/TEX 81% busy against DRAM 29%).  Measured on an H200
 * (gpu_bench_moe_decode, INT4 at TP8, the plan's kernel against the same kernel of 16-column
 * warps in one run): Kimi K2's gate/up at 8 to 1536 tokens 1.13 to 1.30 times as fast (512
 * tokens: 0.44 of the floor against 0.35), GLM-4.7's at 8 to 512 tokens 1.13 to 1.27; the down
 * GEMM's 128-column kernel of 8 rows a pass 1.11 to 1.13 times as fast as the staged one of
 * 16-column warps at 16 and 64 tokens (1.05 at 256; another run).  16 for the rest, and for the
 * staged W4A16 kernels (the 128-column tile of 16 rows a pass): with 32-column warps their rows
 * of a K of 512 would pass the 48 KiB of static shared memory and SM120's two blocks a SM, and
 * a staged kernel of 32-column warps for K up to 256 (8 KiB of A rows: 43008 bytes in all)
 * gained 0.01 of the floor at most on the staged one of 16 columns (H200, two runs: Kimi K2's
 * down GEMM at 512, 768, 1024 and 1536 tokens 0.32, 0.23, 0.18 and 0.13
 * against 0.31, 0.22, 0.17 and 0.12; GLM-4.7's at 256 and 512 within 0.01) and spilled 16
 * bytes on sm_120: not kept.
 */
#define MOE_DECODE_WARP_N(quant, tn, rows) \
	((quant) == MOE_W4A16 && (tn) >= 32 && !((tn) == 128 && (rows) == 16) ? 32 : 16)
#define MOE_DECODE_KWARPS(quant, tn, rows) (MOE_GEMM_THREADS / 32 / ((tn) / MOE_DECODE_WARP_N(quant, tn, rows)))
#define MOE_DECODE_DEPTH 2
/* W4A16's W steps in flight: three, with the per-tile column pointers (a fourth does not fit
 * 128 registers on sm_90 with them; three measured 2-4% faster than four without them, H100) */
#define MOE_DECODE_W4_DEPTH 3
/* ... on 32-column warps (MOE_DECODE_WARP_N): one, which holds as many W bytes in flight as two
 * of 16 columns.  Two ran slower: H200,
 * gpu_bench_moe_decode, INT4 at TP8, both models and GEMMs, 1 to 64 tokens, as ALT of this build,
 * two runs: 0.87 to 1.00 the fraction of the floor, 0.97 on average (Kimi K2's down GEMM at one
 * token 0.13-0.14 against 0.15-0.16).  With every expert's weights in the L2 these kernels ran
 * only 0.00 to 0.12 of the floor faster (gpu_bench_moe_decode's "own" column, 1 to 64 tokens):
 * their own work, more than W's latency, holds them */
#define MOE_DECODE_W4_WIDE_DEPTH 1
/* The largest K whose k steps the staged W4A16 kernel holds each in a slot of its own (the down
 * GEMM's 192 and 256 at TP8, 512 at TP4): 32 KB of a pass's A rows at MOE_DECODE_W4_SPASS rows;
 * a longer K streams through two of those slots (MOE_DECODE_STREAMED) */
#define MOE_DECODE_W4_STAGE_K 512
/* ... their routed rows a pass: two m16 operands (W is their n8 operand) */
#define MOE_DECODE_W4_SPASS 32
/* ... but for the slots kernel on a K of at most MOE_DECODE_W4_WIDE_K (two k steps: Kimi K2's
 * down GEMM at TP8), whose rows take half the bytes there: three m16 operands, 24 KB of xs, so
 * that an expert of up to 48 rows dequantizes each tile's W once, not twice (four operands
 * spilled 24 bytes on sm_120 and 80 on sm_90, even with the staged kernels' leaner block loop
 * that three need: moe_decode.cuh's is_block).  Against two, H200 (gpu_bench_moe_decode, INT4,
 * Kimi K2's down GEMM at TP8, both builds in alternating processes, two runs each): 1536, 2048,
 * 3072, 4096 and 6144 tokens (32 to 128 rows an expert) 273.5-273.6, 354.3-354.4, 512.5-513.6,
 * 624.1-626.2 and 948.3-950.4 us against 324.5-325.1, 415.7-416.8, 559.4-560.0, 708.4-711.5 and
 * 1033.2-1033.5 (1.19, 1.17-1.18, 1.09, 1.13-1.14 and 1.09 times as fast); on 32 SMs (an RTX
 * 5090's share of DRAM a SM) 1.12 of that share at 1536 tokens against 0.95, 0.90 at 2048
 * against 0.74 */
#define MOE_DECODE_W4_WIDE_K 256
#define MOE_DECODE_W4_WIDE_PASS 48
/* ... and their W steps in flight */
#define MOE_DECODE_W4_SDEPTH 2
#define MOE_DECODE_STEP_K(quant) ((quant) == MOE_BF16 ? 64 : 128)
/* Bytes of W per column (the weights a decode kernel streams; not the scales). */
#define MOE_DECODE_WBYTES(quant, k) \
	((int64_t)(k) * ((quant) == MOE_BF16 ? 4 : (quant) == MOE_FP8 ? 2 : 1) / 2)

#define MOE_DECODE_KERNELS(X)                           \
	X(MOE_BF16, 16, 8, moe_gemm_bf16_d16)           \
	X(MOE_BF16, 32, 8, moe_gemm_bf16_d32)           \
	X(MOE_BF16, 64, 8, moe_gemm_bf16_d64)           \
	X(MOE_BF16, 128, 8, moe_gemm_bf16_d128)         \
	X(MOE_FP8, 16, 8, moe_gemm_fp8_d16)             \
	X(MOE_FP8, 32, 8, moe_gemm_fp8_d32)             \
	X(MOE_FP8, 64, 8, moe_gemm_fp8_d64)             \
	X(MOE_FP8, 128, 8, moe_gemm_fp8_d128)           \
	X(MOE_W4A16, 16, 8, moe_gemm_w4a16_d16)         \
	X(MOE_W4A16, 32, 8, moe_gemm_w4a16_d32)         \
	X(MOE_W4A16, 64, 8, moe_gemm_w4a16_d64)         \
	X(MOE_W4A16, 128, 8, moe_gemm_w4a16_d128)

/* moe_gemm_decode_has - whether decode kernels compute @quant. */
static inline int moe_gemm_decode_has(int quant)
{
	return quant == MOE_BF16 || quant == MOE_FP8 || quant == MOE_W4A16;
}

/*
 * The staged W4A16 decode kernels, the decode kernels of 16 rows a pass
 * (moe_gemm_decode_rows; their tile, 128 columns: moe_gemm_decode_tile),
 * which moe_gemm_decode_kernel picks by K: moe_gemm_w4a16_d128_r16_s for K
 * up to MOE_DECODE_W4_STAGE_K (the down GEMM at TP8 and TP4; it traps on a
 * longer K; at K 192 its halved form below), moe_gemm_w4a16_d128_r16_sl,
 * streamed, for a longer one (the gate/up).  The grid of the decode kernels above, each tile computed the
 * other way round; the _s kernel's sums are the 8-row kernel's of its
 * tile, to the bit (gpu_bench_moe_decode's "eq"; the _sl kernel's warps
 * each take the whole of K, the 8-row kernel's split it, so not to the bit
 * there).  A
 * pass takes up to MOE_DECODE_W4_SPASS routed rows, copied into shared
 * memory once as the m16 operands of its MMAs (two of them; three, up to
 * MOE_DECODE_W4_WIDE_PASS rows, on a K up to MOE_DECODE_W4_WIDE_K), and W is the
 * n8 operand: each W fragment dequantized serves every row of the pass, and
 * each warp owns 16 columns of every tile over the whole of K, so it writes
 * its sums straight from its accumulators, without the partial sums'
 * meeting in shared memory and its barrier at every tile.  Against the
 * kernel before it (the rows read from shared memory as two n8 operands, 16
 * a pass, a meeting a tile), measured on an H200 (gpu_bench_moe_decode, INT4
 * down GEMM at TP8, both builds alternating, two runs): Kimi K2 at 512 and
 * 1024 tokens 0.39 and 0.32 of the floor against 0.30 and 0.17-0.18,
 * GLM-4.7 at 256 and 512 0.24 and 0.16 against 0.16-0.17 and 0.09; on 32
 * SMs (MOE_DECODE_SMS, an RTX 5090's share of DRAM a SM) GLM-4.7's at 512
 * streamed 0.72 of that share against 0.38, Kimi K2's 1.35 against 1.04.
 * ncu (H200, GLM-4.7's at 512 tokens): 48.8 M warp instructions against
 * 95.4 M, dequantization the largest part.  Where an expert gets a few rows
 * the 128-column kernel of 32-column warps stays ahead of it:
 * moe_gemm_decode_rows.  Its W steps in flight: MOE_DECODE_W4_SDEPTH (three
 * and four ran within 0.01 of two: H200, 256 to 1024 tokens, two runs).
 * Its count of m16 operands is a constant of the step's code (one or two),
 * so that no MMA is predicated: against predicated ones (H200, both builds
 * alternating, two runs) Kimi K2 at 512 and 1024 tokens 0.43 and 0.33 of
 * the floor against 0.39 and 0.32, GLM-4.7 at 256 and 512 0.25 and 0.18
 * against 0.23 and 0.17.  GLM-4.7's half last step (K 192: 64 k in the
 * second step, multiplied as 128 with zeros), taken as 16 k a lane, ran
 * slower in the same runs: 0.21 and 0.16, and Kimi K2's, which has none,
 * 0.34 at 512 (11% more code).
 * The streamed kernel holds two steps of the pass's rows as fragments and
 * two raw: each thread copies its pieces of a step (cp.async) two steps
 * ahead into raw bytes of its own, and a step ahead turns them into the
 * fragments itself (no wait on another thread's copy), so that one barrier
 * a step hands a full slot over.  Against the 32-column kernel of 16 rows a
 * pass (the plan before: two n8 operands, unstaged; the four unstaged
 * kernels of 16 rows went when no plan launched them) and the row tiles,
 * H200 (gpu_bench_moe_decode, INT4 gate/up at TP8, both builds
 * alternating, two runs, and the committed
 * form once more): Kimi K2 at 512, 768, 1024 and 1536 tokens 0.46-0.48,
 * 0.38, 0.32-0.33 and 0.24 of the floor against 0.43-0.45, 0.32, 0.24-0.25
 * and 0.19, at 2048 (the 128-row tile before) 0.19-0.20 against 0.16-0.17;
 * GLM-4.7 at 256, 384 and 512 0.34, 0.29 and 0.22-0.24 against 0.32, 0.23
 * and 0.18-0.20, at 768 0.17 against 0.14; GLM-4.7 TP1's down GEMM (K 1536)
 * at 256 and 512 0.41 and 0.28 against 0.30 and 0.16; on 32 SMs (an RTX
 * 5090's share of DRAM a SM) GLM-4.7's gate/up at 512 tokens streamed 0.99
 * of that share against 0.77, Kimi K2's at 1024 1.15 against 0.93.  The
 * reference engine (Kimi K2 INT4 at real dimensions, two layers, experts
 * unsplit: K 7168 and 2048) prefilled 48759-49147 tokens a second in chunks
 * of 512 against 45286-45892, 67446-67632 in chunks of 2048 against
 * 60746-60918, the same tokens.  Restaging the rows at every 512 k of each
 * tile with two barriers a chunk and the copies not ahead ran slower than
 * the 32-column kernel (GLM-4.7 at 512 tokens 0.18 against 0.20).
 */
/* The halved kernel: the staged kernel on K = MOE_DECODE_W4_HALVED_K, two k steps a tile, the second of 64 k (the
 * down GEMM of a model of 1536 expert columns at TP8: GLM-4.7, Qwen3-235B-A22B), which the _s
 * kernel multiplies as a full step with zeros: this one takes it as 16 k a lane, two words
 * (moe_decode.cuh's HALVED), its own instance, so that the _s kernel's code stays (its first,
 * two-operand form: 3864 instructions against 4240 on sm_90, 72 MMAs against 96).  It writes the 8-row kernel's bytes
 * (gpu_bench_moe_decode's eq).  Against the _s kernel, H200 (gpu_bench_moe_decode, INT4, GLM-4.7's
 * down GEMM at TP8, both builds alternating, two runs): 256, 512 and 1024 tokens 76.6-77.2,
 * 103.5-104.1 and 177.3-179.7 us against 79.4, 108.9-109.4 and 185.0-185.1 (1.03, 1.05 and
 * 1.04 times as fast; kernels unchanged in the same runs moved by up to 3%); on 32 SMs 0.76 of
 * an RTX 5090's DRAM share at 512 tokens against 0.72.  (One kernel taking either kind of last
 * step at run time, tried before, ran slower: the _s kernel's comment.)  Its W of a tile, both
 * steps, is dequantized once and held in registers (48 of them) while every m16 operand of the
 * pass is multiplied by it, one at a time, so that a pass takes as many rows as xs holds at
 * this K: MOE_DECODE_W4_HALVED_PASS, where two operands a pass had dequantized each tile again
 * for every 32 rows.  1784 instructions against 3864 on sm_90, 122 registers on both (128 and
 * 112 before), the same sums in the same order (eq).  Against the two-operand form, H200
 * (gpu_bench_moe_decode, INT4, GLM-4.7's down GEMM at TP8, both builds in alternating
 * processes, two runs each, on two machines): 768, 1024 and 1536 tokens (38, 51 and 77 rows an
 * expert) 123.7-125.3, 146.8-155.4 and 218.9-225.7 us against 141.5-143.7, 173.7-182.2 and
 * 254.4-259.7 (1.15, 1.17-1.18 and 1.16 times as fast), 512 tokens 1.01-1.08 times, 256 within
 * 1%; on 32 SMs at 1024 tokens 0.50 of an RTX 5090's DRAM share against 0.43. */
#define MOE_DECODE_W4_HALVED_K 192
/* ... its routed rows a pass: seven m16 operands, 42 KB of A rows in shared memory (46080 bytes
 * of static shared memory in all with each row's place in C: sm120 scan; cuobjdump -res-usage
 * counts the 1 KB a block reserves too, 47104), so that SM120 holds two of its blocks, as their
 * registers allow; 48 KB is the most a block's static shared memory may take).  Against five
 * (the 32 KB of the other staged kernels' rows), H200 (gpu_bench_moe_decode, INT4, GLM-4.7's
 * down GEMM at TP8, both builds in alternating processes, two runs): 1536 and 2048 tokens (77
 * and 102 rows an expert, some experts past 80) 212.1-212.2 and 271.0-271.3 us against
 * 224.3-224.4 and 290.8-291.7, where the row tile ran 281.4-282.6 at 2048; 512 and 1024 within
 * 1%, 2560 to 4096 (128 to 205 rows) 0.985-1.00 times */
#define MOE_DECODE_W4_HALVED_PASS 112

/* How a staged kernel holds a pass's rows (moe_decode.cuh's template argument STAGED, 0 there
 * for the unstaged kernels): a slot of xs for every k step (K up to MOE_DECODE_W4_STAGE_K), so
 * at K MOE_DECODE_W4_HALVED_K with its second step halved, or streamed through two slots. */
enum moe_decode_staging { MOE_DECODE_SLOTS = 1, MOE_DECODE_STREAMED, MOE_DECODE_HALVED };

/* The staged kernels as a table: quant, columns, rows a pass (the plan's name, 16), staging,
 * entry name. */
#define MOE_DECODE_STAGED_KERNELS(X)                                           \
	X(MOE_W4A16, 128, 16, MOE_DECODE_SLOTS, moe_gemm_w4a16_d128_r16_s)     \
	X(MOE_W4A16, 128, 16, MOE_DECODE_STREAMED, moe_gemm_w4a16_d128_r16_sl) \
	X(MOE_W4A16, 128, 16, MOE_DECODE_HALVED, moe_gemm_w4a16_d128_r16_sh)

/* moe_gemm_decode_staging - the staging of the staged kernel for K @k: MOE_DECODE_HALVED at
 * MOE_DECODE_W4_HALVED_K, MOE_DECODE_SLOTS up to MOE_DECODE_W4_STAGE_K, else
 * MOE_DECODE_STREAMED.  Pure, plain C. */
static inline int moe_gemm_decode_staging(int32_t k)
{
	return k == MOE_DECODE_W4_HALVED_K ? MOE_DECODE_HALVED
	       : k <= MOE_DECODE_W4_STAGE_K ? MOE_DECODE_SLOTS
					    : MOE_DECODE_STREAMED;
}

/* moe_gemm_decode_steps - the k steps of a reduction of length @k. */
static inline int64_t moe_gemm_decode_steps(int quant, int32_t k)
{
	return ((int64_t)k + MOE_DECODE_STEP_K(quant) - 1) / MOE_DECODE_STEP_K(quant);
}

/* moe_gemm_decode_name - the unstaged decode kernel of @quant, @tn columns and @rows routed rows
 * a pass ("moe_gemm_<quant>_d<tn>", 8 rows), or NULL for another triple (16 rows a pass: the
 * staged kernels, moe_gemm_decode_kernel). */
static inline const char *moe_gemm_decode_name(int quant, int tn, int rows)
{
#define MOE_DECODE_NAME_OF(q, t, r, name) if (quant == (q) && tn == (t) && rows == (r)) return #name;
	MOE_DECODE_KERNELS(MOE_DECODE_NAME_OF)
	return 0;
}

#undef MOE_DECODE_NAME_OF

/* moe_gemm_decode_kernel - the decode kernel to launch for @quant, @tn columns and @rows
 * routed rows a pass at K @k: the staged one of the triple and of K's staging
 * (moe_gemm_decode_staging) where one is, else moe_gemm_decode_name's; NULL for a triple of
 * neither.  Pure, plain C. */
static inline const char *moe_gemm_decode_kernel(int quant, int tn, int rows, int32_t k)
{
	const int staging = moe_gemm_decode_staging(k);

#define MOE_DECODE_STAGED_OF(q, t, r, s, name) \
	if (quant == (q) && tn == (t) && rows == (r) && staging == (s)) return #name;
	MOE_DECODE_STAGED_KERNELS(MOE_DECODE_STAGED_OF)
#undef MOE_DECODE_STAGED_OF
	return moe_gemm_decode_name(quant, tn, rows);
}

/* moe_gemm_decode_staged - whether staged decode kernels (16 rows a pass) compute @quant. */
static inline int moe_gemm_decode_staged(int quant)
{
#define MOE_DECODE_QUANT_OF(q, t, r, s, name) if (quant == (q)) return 1;
	MOE_DECODE_STAGED_KERNELS(MOE_DECODE_QUANT_OF)
	return 0;
#undef MOE_DECODE_QUANT_OF
}

/*
 * moe_gemm_decode_tn - the column tile TN of the decode kernel for a launch
 * of @quant with reduction length @k: the narrowest (the most blocks per
 * expert, to keep every SM streaming at one token) whose warps along K
 * still get at least 4 of the k steps each (MOE_DECODE_KWARPS of the kernel
 * of 8 rows a pass: a warp's pipeline fills); 0 if
 * no decode kernel computes @quant.  Pure, plain C.
 */
static inline int moe_gemm_decode_tn(int quant, int32_t k)
{
	const int64_t steps = moe_gemm_decode_steps(quant, k);
	int tn;

	if (!moe_gemm_decode_has(quant))
		return 0;
	for (tn = 16; tn < 128; tn *= 2)
		if (steps >= 4 * MOE_DECODE_KWARPS(quant, tn, 8))
			return tn;
	return 128;
}

/* moe_gemm_decode_blocks - the decode grid's y: one block per framework block
 * up to the routed rows' count (each block below num_tokens_post_padded
 * holds one at least), at most 65535; the blocks loop over the rest. */
static inline int moe_gemm_decode_blocks(int32_t em, int32_t block_m, int32_t num_valid)
{
	int64_t n = block_m > 0 ? ((int64_t)em + block_m - 1) / block_m : 1;

	if (n > num_valid)
		n = num_valid;
	if (n > 65535)
		n = 65535;
	return n < 1 ? 1 : (int)n;
}

/*
 * moe_gemm_decode_cols - the decode grid's x for a launch of @quant, N @n,
 * K @k on tile @tn: a block takes every x-th of the ceil(N / tn) column
 * tiles.  A block streams about MOE_DECODE_BLOCK_BYTES of weights, in at
 * most MOE_DECODE_BLOCK_TILES tiles (its fixed costs, the routing reads,
 * the gather and the pipeline's fill and drain, then come once per several
 * small tiles: the down GEMM's short K), unless that leaves fewer
 * than MOE_DECODE_MIN_BLOCKS blocks over the moe_gemm_decode_blocks() block
 * rows: at one token each tile of a long K gets its own block (every SM
 * streaming), and many short blocks keep the last wave short on any SM
 * count.  On a short K (moe_gemm_short_k: the down GEMM), whose tiles are
 * one or two k steps a warp, the floor is MOE_DECODE_SHORT_MIN_BLOCKS, more
 * blocks than the largest SM120 card has SMs (188), so that a block's warps
 * stream the next tile while a tile's sums meet.  Measured on an H200
 * (gpu_bench_moe_decode, the down GEMM at TP8, every quantization, 1 to 64
 * tokens, two runs of each rule in one call, best of two): Kimi K2's at 1,
 * 2 and 4 tokens 0.15, 0.24 and 0.33 of the floor in INT4 against 0.13,
 * 0.17 and 0.21 with MOE_DECODE_MIN_BLOCKS, FP8 per tensor 0.24, 0.33 and
 * 0.39 against 0.21, 0.26 and 0.33, bf16 0.39, 0.46 and 0.54 against 0.34,
 * 0.41 and 0.50; GLM-4.7's INT4 at 4 and 8 tokens 0.21 and 0.27 against
 * 0.14 and 0.22.  Slower: GLM-4.7's FP8 at 16 tokens, 0.37, 0.33 and 0.32
 * against 0.41, 0.35 and 0.35 (per tensor, channel, block: 7 blocks a row,
 * of 5 or 6 tiles, against 8 of 5); every other row within 0.01.  On a long K the lower floor was slower (per-block sweep, one run):
 * GLM-4.7's gate/up at 8 tokens 0.31 against 0.35 (INT4), 0.57 against
 * 0.65 (bf16).  (Those with 128 KiB a block and no tile bound.)  256 KiB
 * in at most 8 tiles against 128 KiB (H200, gpu_bench_moe_decode built
 * with each, alternating, three runs, the FP8 decode kernels on their ring;
 * 1 to 128 tokens, the down GEMM in every format, the gate/up in bf16 and
 * INT4; a block of 8 tiles streamed faster than one of 4 wherever the
 * blocks fill the waves alike): Kimi K2's down GEMM 0.02-0.05 faster in 17
 * of its 40 rows (FP8 per tensor at 8, 16 and 64 tokens 0.55, 0.66 and 0.72
 * against 0.52, 0.61 and 0.69; bf16 at 2 tokens 0.57 against 0.52), the
 * rest within 0.013 (INT4 on 8 tiles before too); GLM-4.7's
 * (40 tiles: 5 blocks a row against 7) 0.03-0.04 faster at 16 and 64
 * tokens in FP8 (per tensor 0.48 and 0.51 against 0.45 and 0.48) and bf16 at
 * 4 (0.57 against 0.52), but 0.03-0.05 slower at 8 tokens in every format
 * (FP8 per tensor 0.32 against 0.36: 320 blocks, 1.2 waves of this GPU's
 * 264, against 448) and per channel at 64 (0.41 against 0.43); the gate/up
 * within 0.01.  Without the tile bound (GLM-4.7's FP8 11 tiles a block)
 * GLM-4.7 lost up to 0.08 (per channel at 64 tokens).  A fill test on this
 * GPU's waves, as moe_gemm_decode_tile's, kept the losses but also the
 * largest gains out (Kimi K2 at 16 tokens: the hit experts, not the block
 * rows, fill the waves), and SM120's cards have other SM counts: none.
 */
#ifndef MOE_DECODE_BLOCK_BYTES
#define MOE_DECODE_BLOCK_BYTES 262144
#endif
#ifndef MOE_DECODE_BLOCK_TILES
#define MOE_DECODE_BLOCK_TILES 8
#endif
#define MOE_DECODE_MIN_BLOCKS 1024
#define MOE_DECODE_SHORT_MIN_BLOCKS 224
static inline int moe_gemm_decode_cols(int quant, int32_t n, int32_t k, int tn, int32_t em, int32_t block_m,
				       int32_t num_valid)
{
	const int64_t tiles = ((int64_t)n + tn - 1) / tn;
	const int64_t tile_bytes = tn * MOE_DECODE_WBYTES(quant, k);
	const int64_t least = moe_gemm_short_k(quant, k) ? MOE_DECODE_SHORT_MIN_BLOCKS : MOE_DECODE_MIN_BLOCKS;
	const int64_t cap = tiles * moe_gemm_decode_blocks(em, block_m, num_valid) / least;
	int64_t per = tile_bytes > 0 ? (MOE_DECODE_BLOCK_BYTES + tile_bytes - 1) / tile_bytes : 1;

	if (per > MOE_DECODE_BLOCK_TILES)
		per = MOE_DECODE_BLOCK_TILES;
	if (per > cap)
		per = cap;
	if (per > tiles)
		per = tiles;
	if (per < 1)
		per = 1;
	return (int)((tiles + per - 1) / per);
}

/*
 * moe_gemm_decode_rows - the routed rows a pass of the decode kernel for a
 * launch of @quant with K @k (@block_m, @num_valid, @em as for
 * moe_gemm_rows_per_expert): 16, the plan's name for the staged kernels
 * (MOE_DECODE_STAGED_KERNELS: up to MOE_DECODE_W4_SPASS rows a pass in
 * fact, MOE_DECODE_W4_WIDE_PASS for the _s kernel on a K up to
 * MOE_DECODE_W4_WIDE_K, MOE_DECODE_W4_HALVED_PASS for the halved one, on 128 columns,
 * moe_gemm_decode_tile and moe_gemm_decode_kernel),
 * where @quant has them (moe_gemm_decode_staged: W4A16) and the experts get
 * more than MOE_DECODE_R16_ROWS rows each (MOE_DECODE_R16_SHORT_ROWS where the
 * staged kernel of K holds a pass's rows whole, moe_gemm_decode_staging: K up to
 * MOE_DECODE_W4_STAGE_K, the down GEMM), else 8.  Measured on an
 * H200 since the staged kernels store a tile's sums as whole words
 * (gpu_bench_moe_decode, INT4 at TP8, a build taking them at any count
 * against one taking them past 8 rows, two runs each, and on 32 SMs, the
 * SM120 proxy, one run; rows an expert as counted here):
 *   - the down GEMM: Kimi K2 at 64 tokens (1 row) 0.99-1.01 times as fast
 *     on them, at 128 (2) 1.03-1.04, 192 (3) 1.11-1.13, 256 (5) 1.25-1.27,
 *     384 (7) 1.55-1.58; GLM-4.7 at 32 (1) 1.03-1.08, 64 (3) 1.10-1.13, 128
 *     (6) 1.41-1.44; on 32 SMs the same within 0.04 (Kimi K2 at 384 tokens
 *     0.66 ms against 1.06; 1.77 of an RTX 5090's DRAM share against 1.11);
 *   - the gate/up: Kimi K2 at 64 to 256 tokens (1 to 5 rows) 0.88-0.99 (on
 *     32 SMs 0.81-0.87), at 384 (7) 1.24-1.26 (1.11); GLM-4.7 at 32 and 64
 *     (1 and 3) 0.82-0.96, at 128 (6) 1.13-1.14 (1.15).
 * Before that store the 8-row kernels had been ahead at up to 8 rows (Kimi
 * K2's down GEMM at 64 and 128 tokens 0.49-0.50 and 0.48 of the floor
 * against 0.41 and 0.42).  Why the rows sit in
 * shared memory as m16 operands: the unstaged kernels of 16 rows a pass
 * before them (two n8 operands, rows from L1; 1.17-1.38 times as fast as 8
 * rows a pass from 10 to 51 rows an expert, H200) were held by L1, not by
 * the dequantization (ncu, Kimi K2's gate/up at 1024 tokens: L1/TEX 81%
 * busy against DRAM 29%, issue slots 55%), since a warp of 16 columns read
 * 4 KB of A a k step against its 1 KB of W, the same A bytes for every
 * warp and tile; 32 rows a pass that way (four n8 operands, about 200
 * registers: one block per SM) was no faster than 16 at any of 128 to 3072
 * tokens.  Pure, plain C.
 */
#define MOE_DECODE_R16_ROWS 5
#define MOE_DECODE_R16_SHORT_ROWS 1
static inline int moe_gemm_decode_rows(int quant, int32_t block_m, int32_t num_valid, int32_t em, int32_t k)
{
	const int64_t least = moe_gemm_decode_staging(k) != MOE_DECODE_STREAMED ? MOE_DECODE_R16_SHORT_ROWS
										 : MOE_DECODE_R16_ROWS;

	return moe_gemm_decode_staged(quant) && moe_gemm_rows_per_expert(block_m, num_valid, em) > least ? 16 : 8;
}

/*
 * moe_gemm_decode_tile - the column tile of the decode kernel for a
 * sorted-mode launch of @quant with N @n and K @k (@em, @block_m,
 * @num_valid as for moe_gemm_decode_blocks) on a GPU of @sms
 * multiprocessors (0: unknown): moe_gemm_decode_tn's, twice as wide (at
 * most 128) from MOE_DECODE_WIDE_ROWS routed rows (8 tokens of top_k 8),
 * where the launch's experts (about 60 and more for Kimi K2 and GLM-4.7)
 * give every SM blocks enough on the wider tile, whose warps then stream
 * twice the k steps a tile.  Below that, the widest of the tile, twice it
 * and four times it (at most 128) whose blocks fill the GPU's block slots
 * (@sms times MOE_DECODE_SM_BLOCKS) in waves as full as the narrowest
 * tile's, but for MOE_DECODE_FILL_SLACK percent of it: a wave's fill is the
 * blocks (moe_gemm_decode_cols' columns times moe_gemm_decode_blocks' rows:
 * one a routed row at these counts, an upper bound on the experts they
 * hit) over the slots of the waves they take (moe_gemm_decode_fill); with
 * @sms 0 the tile itself.  Where moe_gemm_decode_rows takes 16 rows a pass
 * (W4A16 past a few rows an expert), 128 on any K and GPU:
 * the staged kernels' tile (MOE_DECODE_STAGED_KERNELS),
 * whose warps share a pass's rows in shared memory across all 128 columns.
 * On the gate/up's long K, H200 (gpu_bench_moe_decode, INT4 at TP8, one
 * run): from 9 rows an expert, Kimi K2 at 512 tokens (10.7) 0.47 of the
 * floor against 0.44 on the 32-column kernel of 16 rows a pass, GLM-4.7 at
 * 256 (12.8) 0.34 against 0.32-0.33; from 17 rows, the staged kernels'
 * comment (MOE_DECODE_STAGED_KERNELS).
 * Measured on an H200 (gpu_bench_moe_decode, gate/up of Kimi K2 and GLM-4.7
 * at TP8, 8 to 128 tokens, bf16, FP8 per tensor / channel / block and
 * W4A16; the down GEMM's short K is on 128 columns already): the doubling
 * from 64 rows was equal or up to 11% faster in 32 of 36 rows, 2% slower in
 * 3 and 8% in one (GLM's W4A16 at 64 tokens, equal in the run before); at
 * one token the narrow tile stays far ahead (Kimi bf16: 0.51 of the floor
 * against 0.39).  The fill rule, on an H200 (132 SMs, 2 blocks each) at 1
 * to 6 tokens, those five formats, both models (60 rows, one run): it took
 * the fastest tile in 47 rows, one within 0.02 of it in 5 and one 0.04-0.09
 * slower in 8 (GLM-4.7 at 6 tokens, whose 48 rows hit about 42 of its 160
 * experts, bf16 0.70 against 0.78; Kimi K2's W4A16 at 5 tokens 0.34 against
 * 0.38), none slower than the narrowest tile, the rule before, and 0.03-0.10
 * faster than it in 23 rows: at 2 tokens every format on its 32-column tile
 * (one wave, as full as two of the 16-column), e.g. Kimi K2's bf16 0.70 of
 * the floor against 0.66, FP8 per block 0.48 against 0.43; at 4 tokens Kimi
 * K2's on its 64-column tile (a 0.94-full wave), bf16 0.82 against 0.75,
 * W4A16 0.42 against 0.32; no tile gained where the wider one's last wave
 * is emptier (Kimi K2 at 3 tokens: 0.69 on 16 columns, 0.66 on 32).  On
 * an H100 (132 SMs too; one run) it took the fastest tile in 40 rows and
 * one within 0.02 in 11, none slower than the narrowest, 0.03-0.13 faster
 * than it in 20 (Kimi K2 at 2 tokens, FP8 per tensor, 0.61 against 0.58;
 * at 4, W4A16, 0.56 against 0.44).
 * SM120's cards have other SM counts (188 on an RTX PRO 6000), so the
 * tile follows the device's.  Pure, plain C.
 */
#define MOE_DECODE_WIDE_ROWS 64
#define MOE_DECODE_SM_BLOCKS 2      /* decode blocks an SM holds (moe_gemm.cu's launch bounds) */
#define MOE_DECODE_FILL_SLACK 5

/* moe_gemm_decode_fill - the fill of @blocks over waves of @slots, in per mille (0: none). */
static inline int64_t moe_gemm_decode_fill(int64_t blocks, int64_t slots)
{
	if (blocks <= 0 || slots <= 0)
		return 0;
	return blocks * 1000 / ((blocks + slots - 1) / slots * slots);
}

static inline int moe_gemm_decode_tile(int quant, int32_t n, int32_t k, int32_t em, int32_t block_m,
				       int32_t num_valid, int sms)
{
	const int tn = moe_gemm_decode_tn(quant, k);
	const int64_t slots = (int64_t)sms * MOE_DECODE_SM_BLOCKS;
	const int64_t y = moe_gemm_decode_blocks(em, block_m, num_valid);
	int64_t least;
	int best = tn;

	if (!tn || tn >= 128)
		return tn;
	if (moe_gemm_decode_rows(quant, block_m, num_valid, em, k) == 16)
		return 128;   /* the staged kernels' (MOE_DECODE_STAGED_KERNELS) */
	if (num_valid >= MOE_DECODE_WIDE_ROWS)
		return 2 * tn;
	if (sms <= 0 || num_valid < 1)
		return tn;
	least = moe_gemm_decode_fill((int64_t)moe_gemm_decode_cols(quant, n, k, tn, em, block_m, num_valid) * y,
				     slots) * (100 - MOE_DECODE_FILL_SLACK);
	for (int t = 2 * tn; t <= 4 * tn && t <= 128; t *= 2)
		if (moe_gemm_decode_fill((int64_t)moe_gemm_decode_cols(quant, n, k, t, em, block_m, num_valid) * y,
					 slots) * 100 >= least)
			best = t;
	return best;
}

/*
 * moe_gemm_decode_wanted - whether a sorted-mode launch of @quant with N @n
 * and K @k (@block_m, @num_valid, @em as for moe_gemm_rows_per_expert) is better
 * served by the decode kernels than by the row tiles: @quant has them and
 * the experts get at most
 *   MOE_DECODE_W4_ROWS rows each for W4A16, any count where N leaves half
 *     or more of the 128-row tile's last 256 columns idle
 *     (moe_gemm_wide_waste) (the 128-row tile beyond: on the streamed
 *     kernel, H200, gpu_bench_moe_decode, INT4 gate/up at TP8, BLOCK_SIZE_M
 *     128, MOE_DECODE_W4_ROWS against 48, both plans' binaries in
 *     alternating processes, two runs: GLM-4.7 at 1024 and 1280 tokens
 *     (50 and 63 rows estimated) 272.4-273.0 and 323.4 us against
 *     275.7-276.0 and 393.9-394.7, Kimi K2 at 2560 and 3072 (53 and 63)
 *     1057.7-1062.7 and 1250.3-1255.9 against 1108.8-1109.7 and
 *     1253.8-1256.3; on 32 SMs (an RTX 5090's share of DRAM a SM, where
 *     SM120's own MMA rate allows 0.64, 0.51, 0.62 and 0.51 of that share)
 *     0.59, 0.47, 0.59 and 0.50 of it against 0.50, 0.37, 0.54 and 0.48;
 *     past 64, three passes a tile, Kimi K2's at 3584 and 4096 (74 and 85)
 *     ran 0.97 and 0.89 times as fast as on the row tile (one run; on 32
 *     SMs 0.99 and 0.91), GLM-4.7 unsplit's at 1536 and 1792 (76 and 89)
 *     0.98-0.99 and 0.89-0.91 (gate/up and down, two runs); but where N
 *     wastes the wide tiles (GLM-4.7's gate/up at TP8, N 384: 512 columns
 *     computed), against the row tile (two runs), 1536, 1792 and 2048
 *     tokens (76, 89 and 101) 388.6-391.7, 415.7-416.5 and 469.4-470.5 us
 *     against 495.4-496.1, 496.7-498.3 and 519.8-520.8 (1.27, 1.20 and 1.11
 *     times as fast; on 32 SMs 1.21 and 1.13 at 76 and 89, one run); past
 *     101 rows too, a plan without a bound there against the earlier one of
 *     104 rows, two runs, at 2304, 2560, 3072, 4096, 6144 and 8192 tokens
 *     (115 to 410 rows)
 *     493.2-497.0, 580.5-581.0, 689.7-694.0, 850.6-857.1, 1189.8-1199.7
 *     and 1527.7-1539.3 us against 533.4-537.2, 641.5-642.3, 783.5-791.6,
 *     862.7-866.5, 1247.5-1251.0 and 1592.4-1597.1 (1.01 to 1.14 times as
 *     fast; on 32 SMs, one run, 1.04 to 1.19).
 *     The bound was 48, from GLM-4.7 at 1024 tokens on all 132 SMs
 *     (0.13-0.14 of the floor against 0.14), where the two still run within
 *     2%, and 40 on the unstaged kernels); and at any count where no
 *     128-row tile divides block_m: at BLOCK_SIZE_M 64 the streamed kernel
 *     ran ahead of the 64-row tile at every count measured (two runs and
 *     the committed form once more: Kimi K2 at 2048, 4096 and 8192 tokens
 *     0.19-0.20, 0.11-0.12 and 0.06 against 0.16, 0.09 and 0.06, 905-933
 *     us against 1092-1100, 1534-1599 against 2027-2049, 2910 against
 *     3194-3201; GLM-4.7 at 2048 and 4096 (102 and 205 rows) 455-470 us
 *     against 520-522, 804-806 against 911-917); below it the 16-row tile
 *     is all that is left.  Measured on an H200 (INT4 at TP8, the plan with this against
 *     the plan without, one run): BLOCK_SIZE_M 32, Kimi K2's gate/up at
 *     2048, 3072, 4096 and 6144 tokens 3.31 to 3.34 times as fast (3825 us
 *     to 1156 at 2048), GLM-4.7's at 1024 and 2048 3.15 and 3.21, and the
 *     decode kernel of the down GEMM at 0.08 to 0.02 of the floor against
 *     the 16-row tile's 0.01 to 0.00 (Kimi, 2048 to 8192 tokens);
 *     and on K up to MOE_DECODE_W4_STAGE_K (the down GEMM, on the staged
 *     kernels: MOE_DECODE_STAGED_KERNELS) at any count: measured on an H200
 *     (gpu_bench_moe_decode, the decode kernels at every count against the
 *     row tile, two runs), BLOCK_SIZE_M 128, Kimi K2's at 2048, 3072, 4096,
 *     6144 and 8192 tokens (43 to 171 rows an expert) 486, 662, 828, 1209
 *     and 1564 us against 699-703, 990-996, 1063, 1436 and 1952-1953 (at TP4,
 *     K 512, 4096 and 8192 tokens 1330-1338 and 2522-2526 against 1763-1767
 *     and 3243-3248), GLM-4.7's at 2560, 3072, 4096, 6144 and 8192 (128 to
 *     410) 344-347, 396-397, 491-496, 699-702 and 909 against 370, 465-467,
 *     545-549, 792-794 and 1015-1016, at 2048 (102) 271.0-271.3 against
 *     281.4-282.6 on 112-row passes (MOE_DECODE_W4_HALVED_PASS; 285-286
 *     against 278-279 on 80-row ones); BLOCK_SIZE_M 64, Kimi K2's at
 *     4096 and 8192 834 and 1546 against 1287 and 2095, GLM-4.7's at 2048,
 *     4096 and 8192 265, 480 and 898 against 342, 624 and 1148 (the bound
 *     was 96 rows, set by GLM-4.7's at 2048 and 4096 tokens when its kernel
 *     took 32 rows a pass);
 *   on a short K (moe_gemm_short_k: the down GEMM), MOE_DECODE_SHORT_ROWS
 *     (the estimate, which counts E + 1 lists: Kimi K2's 4 rows an expert
 *     are 3): the four-warp 16-row tiles (moe_gemm_rows_tile; FP8's in its
 *     64-byte form, MOE_GEMM_K64) pass the decode kernels from 3 to 5 rows.
 *     The row tile against the decode kernel at SM120's blocks per SM
 *     (gpu_bench_moe_decode MOE_DECODE_ROWTILES=1, TP8, one run each): FP8
 *     per tensor on an H200, Kimi K2 at 64, 96, 128, 192, 256 and 384
 *     tokens (1.3 to 8 rows an expert) 0.57, 0.61, 0.62, 0.61, 0.61 and
 *     0.57 of the floor against 0.62, 0.61, 0.60, 0.58, 0.54 and 0.43,
 *     GLM-4.7 at 64, 96 and 128 tokens (3.2, 4.8 and 6.4 rows) 0.39, 0.42
 *     and 0.44 against 0.42, 0.38 and 0.33; bf16 on an H100, Kimi K2 at 64,
 *     128, 192, 256 and 384 tokens 0.94, 0.94, 0.93, 0.92 and 0.87 against
 *     0.94, 0.95, 0.93, 0.90 and 0.82, GLM-4.7 at 64 and 128 0.82 and 0.80
 *     against 0.83 and 0.73.  (8, the bound before, was measured against
 *     bf16's shallow 64-row tile and FP8's 32-row one.)  The plan with it
 *     against the plan before (H100, two runs each, alternating, padded):
 *     FP8 per tensor, Kimi K2's down GEMM at 256 and 384 tokens 0.72 and
 *     0.58 of the floor before, 0.81-0.82 and 0.77 after (per block 0.65
 *     and 0.51-0.53, 0.73 and 0.69; per channel 0.65 and 0.53, 0.77 and
 *     0.73), GLM-4.7's at 128 tokens 0.45 and 0.59-0.60 (per block
 *     0.33-0.39 and 0.54); bf16, Kimi K2's at 384 tokens 0.81-0.82 and
 *     0.91, GLM-4.7's at 128 0.73-0.74 and 0.81, within 0.01 at 128 and 192
 *     (Kimi K2) and at 256;
 *   on a long K (gate/up), MOE_DECODE_LONG_ROWS: from 5 rows the 64-row
 *     tile reads the weights faster; for FP8 also fewer than
 *     MOE_DECODE_FP8_LONG_VALID routed rows in all (Kimi K2 and GLM-4.7
 *     below 5 tokens).  Past them FP8's 16-row tile streams the weights
 *     faster since its MMAs stopped waiting on sm_90's emulation (mma_e4m3),
 *     as they never do on SM120's native FP8 MMA.  Measured on an H200 at
 *     SM120's blocks per SM (gpu_bench_moe_decode, gate/up at TP8, 1 to 96
 *     tokens, BLOCK_SIZE_M 16, 64 and 128, the row tile against the decode
 *     kernel of the plan before): per tensor, Kimi K2 at 6, 12, 24, 48 and
 *     96 tokens 0.72, 0.77, 0.83, 0.85 and 0.88 of the floor against 0.54,
 *     0.60, 0.68, 0.70 and 0.72, GLM-4.7 0.56, 0.52, 0.73, 0.68 and 0.70
 *     against 0.47, 0.54, 0.61, 0.63 and 0.58; per block Kimi K2 0.69,
 *     0.69, 0.72, 0.80 and 0.81 against 0.51, 0.58, 0.64, 0.66 and 0.67;
 *     per channel as per tensor; at 8 tokens Kimi K2 0.57 against 0.60, at
 *     4 0.62 against 0.53 per tensor but 0.46 and GLM-4.7's 0.35 against
 *     0.48 and 0.39 per block, so 4 tokens keep the decode kernels.  In
 *     tests/gpu/bench_moe.sh (H200, two runs, padded, the Hopper
 *     configurations' BLOCK_SIZE_M, the L2 flushed by a write): GLM-4.7 at
 *     8 tokens 0.43, 0.43 and 0.41 of the floor before, 0.53, 0.52 and 0.50
 *     after (per tensor, channel, block), Kimi K2 at 16 0.63, 0.62 and 0.60,
 *     0.67, 0.67 and 0.61-0.62; but GLM-4.7 at 16 per block 0.51 and
 *     0.46-0.47 (per tensor and channel 0.53 and 0.52), Kimi K2 at 8 per
 *     block 0.47 and 0.45-0.46 (per tensor 0.54 both).  That flush writes
 *     back up to the L2's size while the kernel reads, which a decode step's
 *     small activations do not: flushed by rotating weight copies instead,
 *     GLM-4.7 at 16 tokens per block ran 0.54-0.55 on the row tile and 0.55
 *     on the decode kernel, by the write 0.48 and 0.52 (two runs each).
 *     The bound was 48 (6 tokens); at 5 tokens, with moe_gemm_decode_tile's
 *     fill rule, Kimi K2's row tile ran 0.65, 0.64-0.66 and 0.56 (per
 *     tensor, channel, block) against the decode kernels' 0.49, 0.52 and
 *     0.47-0.48, GLM-4.7's 0.48, 0.47 and 0.38 against 0.47, 0.47 and 0.44
 *     (H200, padded, two runs), and at 4 tokens the decode kernels stay
 *     within 0.03 of it or ahead (Kimi K2 per block 0.55-0.56 against 0.49).
 * Measured on an H100 (W4A16: the first figures above) at SM120's blocks per SM
 * (tests/gpu/bench_moe_decode.c, Kimi K2 and GLM-4.7 at TP8, 8 to 2048
 * tokens).  (Row mode, one routed row per block, always is.)  Pure, plain C.
 */
#define MOE_DECODE_W4_ROWS 64
#define MOE_DECODE_SHORT_ROWS 3
#define MOE_DECODE_LONG_ROWS 4
#define MOE_DECODE_FP8_LONG_VALID 40
static inline int moe_gemm_decode_wanted(int quant, int32_t block_m, int32_t num_valid, int32_t em, int32_t n,
					 int32_t k)
{
	const int64_t per = moe_gemm_rows_per_expert(block_m, num_valid, em);

	if (!moe_gemm_decode_has(quant))
		return 0;
	if (quant == MOE_W4A16 && k <= MOE_DECODE_W4_STAGE_K)
		return 1;
	if (quant == MOE_W4A16)
		return per <= MOE_DECODE_W4_ROWS || moe_gemm_wide_waste(n) || block_m % 128;
	if (moe_gemm_short_k(quant, k))
		return per <= MOE_DECODE_SHORT_ROWS;
	return per <= MOE_DECODE_LONG_ROWS && (quant != MOE_FP8 || num_valid < MOE_DECODE_FP8_LONG_VALID);
}

/*
 * moe_gemm_row_parts - args.row_parts for row tile @tm of @quant on
 * framework blocks of @block_m rows (@num_valid, @em as for
 * moe_gemm_rows_per_expert): P > 0 launches ceil(EM / block_m) x P row
 * blocks (moe_gemm_rows_grid), each taking the parts p, p + P, ... of its
 * framework block that hold a routed row, instead of a row block per TM
 * rows, most of them padding where the framework's blocks are much longer
 * than its experts' rows.  At BLOCK_SIZE_M 128 (SGLang's default FP8
 * configuration from 512 tokens on a 384-expert model) and 10.7 rows an
 * expert, seven of eight 16-row blocks exit at once, and their launches
 * cost most where a column tile is few k tiles: on an H200 at SM120's
 * blocks per SM (gpu_bench_moe_decode MOE_DECODE_ROWTILES=1, two runs),
 * Kimi K2's bf16 down GEMM at 512 tokens on the four-warp 16-row tile ran
 * at 0.63 of the floor on a row block per 16 rows, 0.72-0.73 on these
 * parts, and 0.78-0.81 under BLOCK_SIZE_M 16, where no block is padding;
 * GLM-4.7's at 256 tokens 0.54, 0.60 and 0.65-0.66; FP8 per tensor 0.44,
 * 0.50 and 0.54; the gate/up within 0.02 either way.  P is the parts the
 * estimated rows an expert fill, and one more, so that an expert of more
 * rows than that spreads them over P blocks (one part a block, P 1, ran the
 * down GEMM 0.02 faster, but Kimi K2's FP8 gate/up at 512 tokens at 0.75
 * against 0.81 and GLM-4.7's bf16 one at 512 at 0.68 against 0.76-0.77);
 * 0 (a row block per TM rows) on a tile without MOE_GEMM_PARTS, where P
 * would be every part, where a part would need more than a bit of a word,
 * or where block_m passes the two ids a thread holds (moe_gemm.cuh
 * next_part).  Pure.
 */
#define MOE_GEMM_PARTS_SLACK 1
static inline int moe_gemm_row_parts(int quant, int tm, int32_t block_m, int32_t num_valid, int32_t em)
{
	const int parts = MOE_GEMM_PARTS(quant, tm) ? block_m / tm : 0;
	const int64_t want = (moe_gemm_rows_per_expert(block_m, num_valid, em) + tm - 1) / (tm > 0 ? tm : 1) +
			     MOE_GEMM_PARTS_SLACK;

	if (parts < 2 || block_m % tm || !MOE_GEMM_PARTS_HELD(quant, tm, block_m) || want >= parts)
		return 0;
	return (int)want;
}

/* moe_gemm_rows_grid - the grid's y for a row tile @tm on @em sorted rows in framework blocks
 * of @block_m with args.row_parts @parts (row mode, @naive: a row block per framework block). */
static inline int64_t moe_gemm_rows_grid(int tm, int32_t block_m, int32_t em, int parts, int naive)
{
	if (naive || parts > 0)
		return ((int64_t)em + block_m - 1) / block_m * (naive ? 1 : parts);
	return ((int64_t)em + tm - 1) / tm;
}

/*
 * moe_gemm_choose - the plan's whole choice for a launch of @quant (@scale
 * as for moe_gemm_rows_tile) with N @n and K @k (@block_m, @num_valid, @em
 * as for moe_gemm_rows_per_expert; @naive: row mode) on a GPU of @sms
 * multiprocessors (0: unknown; moe_gemm_decode_tile), from the rules
 * above: the row tile tm (moe_gemm_rows_tile; 0 if none divides block_m;
 * row mode: 16) and its args.stages (moe_gemm_rows_stages), and the decode kernel where one takes
 * the launch (moe_gemm_decode_wanted; row mode always): its column tile tn
 * (moe_gemm_decode_tile; row mode moe_gemm_decode_tn's: one routed row a
 * block; 0: the row tile runs) and its rows a pass (moe_gemm_decode_rows;
 * row mode 8), and the row tile's args.row_parts (moe_gemm_row_parts; row
 * mode 0).  Pure, plain C: the shim's fused-MoE adapter, the reference
 * engine and tests/gpu/bench_moe_decode.c all choose with it.
 */
struct moe_gemm_choice {
	int tm, stages;   /* the row tile and its args.stages */
	int tn, rows;     /* the decode kernel: column tile (0: none) and rows a pass */
	int parts;        /* the row tile's args.row_parts */
};

static inline struct moe_gemm_choice moe_gemm_choose(int quant, int scale, int32_t block_m, int32_t num_valid,
						     int32_t em, int32_t n, int32_t k, int naive, int sms)
{
	struct moe_gemm_choice c;

	c.tm = naive ? 16 : moe_gemm_rows_tile(quant, scale, block_m, num_valid, em, n, k);
	c.stages = c.tm ? moe_gemm_rows_stages(quant, c.tm, k, moe_gemm_rows_per_expert(block_m, num_valid, em)) : 0;
	c.tn = naive ? moe_gemm_decode_tn(quant, k)
	       : moe_gemm_decode_wanted(quant, block_m, num_valid, em, n, k)
		       ? moe_gemm_decode_tile(quant, n, k, em, block_m, num_valid, sms)
		       : 0;
	c.rows = naive ? 8 : moe_gemm_decode_rows(quant, block_m, num_valid, em, k);
	c.parts = naive || !c.tm ? 0 : moe_gemm_row_parts(quant, c.tm, block_m, num_valid, em);
	return c;
}

struct moe_gemm_args {
	const void *a;                  /* [rows, K] bf16, or E4M3 for MOE_FP8 */
	const void *b;                  /* [E, N, K] weights (packed: [E, N, K / 2] bytes) */
	void *c;                        /* [num_valid, N] bf16, row id at c + id * c_stride_m */
	const void *bias;               /* [E, N] bf16, or NULL */
	const float *a_scale;           /* MOE_FP8: [1], [rows] or [rows, K / group_k] */
	const void *b_scale;            /* fp32 (FP8), bf16 (W4A16), E4M3 (NVFP4) */
	const float *b_global;          /* MOE_NVFP4: [E] */
	const float *topk_weights;      /* [num_valid], read if mul_routed_weight */
	const int32_t *sorted_ids;      /* [EM], or NULL: row mode (above) */
	const int32_t *expert_ids;      /* [EM / block_m] (row mode: [num_valid]) */
	const int32_t *num_tokens_post_padded; /* [1] */
	const int32_t *schedule;        /* schedule mode: [EM / block_m] words e | j << 16; else NULL */
	const int32_t *token_offs;      /* schedule mode: [E] each expert's first row */
	const int32_t *tokens_per_expert; /* schedule mode: [E] */
	const int32_t *num_blocks;      /* schedule mode: [1] the framework blocks in use */
	int64_t a_stride_m;
	int64_t b_stride_e, b_stride_n; /* k is contiguous */
	int64_t c_stride_m;             /* n is contiguous */
	int64_t bias_stride_e, bias_stride_n;
	int64_t as_stride_m, as_stride_k;          /* MOE_SCALE_CHANNEL / BLOCK */
	int64_t bs_stride_e, bs_stride_n, bs_stride_k; /* k stride: BLOCK groups; 1 for W4A16 / NVFP4 */
	int32_t N, K;                   /* K % 16 == 0; K % 64 == 0 for the packed variants */
	int32_t EM, num_valid;
	int32_t top_k;                  /* activation row = routed row / top_k */
	int32_t block_m;                /* the framework's BLOCK_SIZE_M */
	int32_t scale;                  /* enum moe_scale (MOE_FP8) */
	int32_t group_n, group_k;       /* MOE_SCALE_BLOCK: group_k == 128, group_n % 128 == 0 */
	int32_t group_size;             /* MOE_W4A16: 32, 64 or 128 (NVFP4: 16) */
	int32_t mul_routed_weight;
	int32_t stages;                 /* row tiles: 0, or MOE_GEMM_SHALLOW_STAGES on a MOE_GEMM_SHALLOW
					 * kernel (launched with moe_gemm_launch_smem bytes) */
	int32_t row_parts;              /* MOE_GEMM_PARTS row tiles on sorted_ids: 0 (a row block per TM
					 * rows), or P: row block by takes parts by % P, by % P + P, ... of
					 * framework block by / P (moe_gemm_row_parts, moe_gemm_rows_grid);
					 * 0 for every other kernel */
};

#endif

/*
 * moe_gemm.c - the MoE grouped-GEMM kernels (kernels/moe/moe_gemm.h: bf16,
 * FP8 w8a8, W4A16 and NVFP4, each with 16-, 64- and 128-row tiles, bf16 and
 * FP8 also with 32-row ones) on a real
 * GPU against a double-precision CPU reference, through the Driver API only.
 * Kernels come from the fatbin embedded in the shim, or from the cubin or
 * fatbin named by argv[1] (standalone use: nvcc -cubin moe_gemm.cu).
 *
 * The routing is built here as the framework's moe_align_block_size lays it
 * out: distinct random experts per token, each expert's routed rows in
 * increasing order padded to a multiple of block_m with num_valid, in a
 * sorted_ids of num_valid + (E + 1) (block_m - 1) entries (the tail
 * num_valid too), expert_ids -1 past the used blocks.  The cases (cases[])
 * cover all twelve kernels; odd sizes (N 72, 200 and 456, not multiples of
 * the 32-, 128- or 256-column tile, and 100 and 204, whose output rows are
 * not 8-element aligned (the row tiles' staged stores); K 16, 48, 192, 208 and 320, not multiples
 * of the 64 or 128 k tile, and 1024 for the 16-row kernels, which split K
 * over their warps; K 64, 192, 256 and 320 packed); 1, 7 and 33 tokens with
 * top_k 1..8 over 5..9 experts (most of them empty for one token); block_m
 * 16, 32, 48, 64, 128 and 256, the smaller tiles under a larger block_m too; FP8 with
 * tensor, per-channel and 128 x 128 block scales (column-major activation
 * scales when padded); W4A16 groups of 32, 64 and 128; with and without bias
 * and routed weights; padded strides (a, b between columns and between
 * experts, c, bias along e and n, both scale tensors) with NaN in the
 * padding; experts on another rank (expert_ids -1: their rows must be zeros);
 * num_tokens_post_padded short of the padded length (the blocks past it must
 * not be written); routed rows listed nowhere; one medium case per variant
 * (300 tokens, top_k 8, 16 experts, N 384, K 1024) and five for the 128-row
 * kernels (300 tokens, 16 experts, N 200 or 456: whole 128-row blocks, every
 * warp of the 2 x 4 grid with valid rows, next to experts on another rank)
 * whose rows are compared with the reference in a sample (every 5th routed
 * row, the first and last 64) and the rest checked for finiteness.  Pointers
 * a case must not read are NULL.  The output is the NaN pattern 0x7fc0 before
 * each launch, with GUARD more rows after the last routed row: every word
 * that no routed row of a block before num_tokens_post_padded names (unlisted
 * rows, rows of blocks past it, the stride padding, the guard rows) must
 * still hold that pattern.
 *
 * Row mode (NAIVE: sorted_ids NULL, vLLM's naive block assignment): expert_ids
 * is the flat top-k list itself (-1 for DROP's slots and OFF's experts: rows
 * of zeros), EM = num_valid x block_m, grid y = EM / block_m, and
 * num_tokens_post_padded = EM (SHORT: cut inside the last third, not on a
 * block boundary, so routed rows from there on must stay poisoned); cases at
 * block_m 16 and 64 over every FP8 scale layout and bf16, in the 16-row
 * kernels the shim launches, and one each for W4A16, NVFP4 and the 64- and
 * 128-row tiles (the header says every tile computes it).
 *
 * Inputs: A ~ U(-1, 1) in bf16, or any finite E4M3 code (zeros, subnormals
 * and 256..448 included); weights and scales drawn so that outputs are O(1);
 * bias ~ U(-1, 1), routed weights ~ U(0.05, 1).
 *
 * Tolerance, per output element, from the same inputs (u = 2^-24; u' = 2^-23
 * per addition inside the tensor cores, whose rounding is not guaranteed to
 * be round-to-nearest).  The products are exact in fp32: bf16 x bf16 has 16
 * significant bits and e4m3 x e4m3 8, and the weights of the weight-only
 * variants are bf16 values that the reference forms with the kernel's fp32
 * roundings (W4A16: (u - 8) * scale is exact, then one rounding to bf16;
 * NVFP4: e2m1 * scale is exact, * global rounds to fp32, then to bf16), so
 * they are the same numbers.  With S = sum_k |a_k w_k s_k| (s_k the FP8
 * scale product of k's group, else 1) and G the number of k groups (FP8
 * block scales: ceil(K / 128), else 1): the K additions, in any order (split
 * over warps or not), cost at most K u' S; the scale multiplications (two
 * roundings of u per group) and the G - 1 additions of the group terms at
 * most (G + 4) u' S; the bias addition u (S + |bias|); the routed weight w
 * scales all that by |w| and adds u |v|.
 * So the fp32 value before the output rounding is within
 *     e = |w| ((K + G + 4) u' S + u (S + |bias|)) + u |v|
 * of the exact result v (w = 1 without routed weights), and the bf16 output
 * must be within 2 e + half a bf16 ulp of |v| + 2 e of v (a margin of 2 on
 * e).  Expert -1 rows must be exactly zero.  The count of outputs equal to
 * the correctly rounded v is printed as a sanity figure.  The FP8 MMA is
 * taken to accumulate in fp32 as the header says; an accumulator of 13
 * significant bits (as in Ada and Hopper FP8 MMAs) would show here as
 * errors of about 2^-13 S per MMA, several times the bound.
 *
 * The decode kernels (moe_gemm_<quant>_d<TN>, DEC(TN) below) run the same
 * semantics on the same checks, launched as moe_gemm.h says (grid
 * moe_gemm_decode_cols() x moe_gemm_decode_blocks()), or on a grid of 2 x 3
 * (GRID3: each block loops over several column tiles and framework
 * blocks).  Their cases: one token over a block_m of 128 (most of
 * the grid past num_tokens_post_padded), N not a multiple of the 16-column
 * warp tile, K ending inside a 128-byte k step (bf16 208, FP8 48, 192 and
 * 320: half steps and 16-byte pieces past K), every FP8 scale layout (block
 * scales per k step, partial groups along N and K; per-channel scales on
 * the 128-column kernel over four column tiles a block, the last partial:
 * its epilogue asks L2 for the next tile's), framework blocks of
 * more than 8 valid rows (several passes) and of more than 256 (several
 * windows, block_m 512), experts on another rank, short and dropped rows,
 * row mode, and two model-like shapes (gate/up N 512 K 2048, down N 1024 K
 * 256 at 16 tokens).
 *
 * FP8's 16-row tile runs its 64-byte form (moe_gemm.h's MOE_GEMM_K64: 128
 * columns, block scales applied per half group) on every K up to 1024 ("64-byte
 * k tiles" in its cases), and its own on the K of 1344 and 1408; FP8's 32-row
 * tile its form on K 48, 192 and 208, its own on 1024 and 1344.
 *
 * The MOE_GEMM_MULTI row tiles (every quantization at TM 64 and 128) run on the
 * grid x of moe_gemm_rows_cols(), and, flag GRID3, on a grid x of 2 over 3
 * to 8 column tiles (a block's tiles one pipelined sequence: the next
 * tile's loads under the last one's epilogue; a partial last tile, K
 * ending inside a k tile, experts on another rank, row mode).  Flag SHALLOW
 * runs bf16 at TM 64 and 32 on their shallow two-stage pipelines (args.stages;
 * K of 16, 192, 208 and 1024, so from one k tile to more than the stages),
 * and FP8 at TM 64, which has none, with args.stages set (ignored).
 *
 * The W4A16 decode kernels (the last two blocks of cases[]): groups of 32, 64 and
 * 128; K ending inside their 128-k step (64, 192, 320, 448: lanes past K),
 * odd N (201, 199) and N under one warp tile (72); one token over 5..9
 * experts (most of them empty), several passes and windows (block_m 512),
 * padded strides with NaN scales and 0x77 bytes between packed columns,
 * experts on another rank, short and dropped rows, grid (2, 3), row mode,
 * and the two model-like shapes.  The kernels of 32-column warps
 * (MOE_DECODE_WARP_N) on a longer K and on the down GEMM's short one.  The
 * staged W4A16 kernels, the decode kernels of 16 rows a pass (flag STG: up
 * to 32 rows a pass as two m16 operands, W the n8 one;
 * moe_gemm_w4a16_d128_r16_s for K up to 512, moe_gemm_w4a16_d128_r16_sl,
 * streamed, past it): K inside one 128-k step, ending inside one, and 512,
 * passes on both m16 operands (the second partly rows, about 29 an expert)
 * and on one, several passes and windows, other ranks, grid (2, 3), row
 * mode; streamed, K one step past the slots, 1024, 1536, 1600 and 2304
 * (ending inside a step, or at one), several tiles a block (copies crossing
 * from a tile's last step to the next's first), N under one tile; at K 192
 * (moe_gemm_w4a16_d128_r16_sh, its second step taken 16 k a lane, a tile's W
 * held for up to 112 rows a pass): passes of one m16 operand to seven
 * (four, the last partly), several passes and windows, group sizes 32, 64 and 128,
 * odd N, other ranks, grid (2, 3) and row mode; the _s kernel's wide passes
 * on K up to 256 (up to 48 rows, three m16 operands): the third operand
 * partly, plain and with bias and padded strides, and passes of 48 and 2.
 *
 * Flags P1 and P2 launch the row tiles with args.row_parts 1 and 2 (grid
 * y moe_gemm_rows_grid: a row block per framework block, or two, each
 * taking the parts of TM rows that hold a routed row in turn), and HOLES
 * puts each expert's rows at the end of its padded list instead of the
 * start, so that a framework block's first parts are all padding: the
 * parts found from one read of the block's ids, and, at block_m 512 on a
 * four-warp tile, each part read on its own.
 *
 * Schedule mode (SGLang's inkling grouped GEMM): its own cases after these,
 * see the section "schedule mode" below.
 *
 * MOE_GEMM_CASE=n runs case n only, MOE_GEMM_CASE=sn schedule case n only
 * (for compute-sanitizer).
 */
#include "../../kernels/moe/moe_gemm.h"
#include "../../shim/reroute/bundle.h"
#include "gpu_test.h"

#define NAN_E4M3 0x7f
#define GUARD 2            /* poisoned output rows after the last routed row */
#define SAMPLE_EDGE 64     /* SAMPLE: routed rows checked at each end */
#define U24 (1.0 / 16777216.0)
#define U23 (1.0 / 8388608.0)

/* ------------------------------------------------------------ cases */

/* tm: the row tile, or DEC(TN) for the decode kernel of TN columns; rows: a decode
 * kernel's routed rows a pass (8, or 16 for the staged ones), 0 for the row tiles; staged: a
 * staged kernel's staging (enum moe_decode_staging), else 0 */
struct kernel {
	const char *name;
	int quant, tm, rows, staged;
};

#define DEC(tn) (-(tn))
#define KERNEL_ROW(quant, tm, name) { #name, quant, tm, 0, 0 },
#define DECODE_ROW(quant, tn, rows, name) { #name, quant, DEC(tn), rows, 0 },
#define STAGED_ROW(quant, tn, rows, staging, name) { #name, quant, DEC(tn), rows, staging },
static const struct kernel kernels[] = { MOE_GEMM_KERNELS(KERNEL_ROW) MOE_DECODE_KERNELS(DECODE_ROW)
						 MOE_DECODE_STAGED_KERNELS(STAGED_ROW) };
#undef KERNEL_ROW
#undef DECODE_ROW
#undef STAGED_ROW

#define RW (1u << 0)     /* mul_routed_weight */
#define BIAS (1u << 1)   /* a bias */
#define PAD (1u << 2)    /* padded strides, NaN in the padding */
#define OFF (1u << 3)    /* experts e % 3 == 1 on another rank: their expert_ids -1 */
#define SHORT (1u << 4)  /* num_tokens_post_padded a third of the used blocks short */
#define DROP (1u << 5)   /* about one routed row in 6 listed nowhere */
#define SAMPLE (1u << 6) /* reference for a sample of the rows, finiteness for the rest */
#define NAIVE (1u << 7)  /* row mode: no sorted_ids, one routed row per block of block_m */
#define GRID3 (1u << 8)  /* decode kernels: grid (2, 3), each block looping over tiles and framework blocks;
			  * MOE_GEMM_MULTI row tiles: grid x 2, each block every other column tile */
#define SHALLOW (1u << 9) /* args.stages MOE_GEMM_SHALLOW_STAGES, moe_gemm_launch_smem bytes (the shallow
			   * pipeline; a kernel without one ignores it) */
#define STG (1u << 11)    /* decode kernels: the staged one of the K, 16 rows a pass, of the staging
			   * moe_gemm_decode_kernel picks (moe_gemm_decode_staging) */
#define P1 (1u << 12)     /* row tiles: args.row_parts 1 (a row block per framework block, its parts in turn) */
#define P2 (1u << 13)     /* row tiles: args.row_parts 2 */
#define HOLES (1u << 14)  /* each expert's rows at the end of its padded rows (its first parts padding) */

struct tcase {
	int quant, tm; /* the kernel */
	int M, top_k, E, N, K, block_m;
	int scale;      /* MOE_FP8: enum moe_scale */
	int group_size; /* MOE_W4A16 */
	unsigned flags;
};

#define BF16 MOE_BF16
#define FP8 MOE_FP8
#define W4 MOE_W4A16
#define FP4 MOE_NVFP4
#define TENSOR MOE_SCALE_TENSOR
#define CHANNEL MOE_SCALE_CHANNEL
#define BLOCK MOE_SCALE_BLOCK
static const struct tcase cases[] = {
	/* quant, tm, tokens, top_k, experts, N, K, block_m, FP8 scales, W4A16 group, flags */
	{ BF16, 16, 1, 1, 5, 200, 208, 16, 0, 0, 0 },
	{ BF16, 16, 7, 2, 6, 200, 1024, 64, 0, 0, RW | BIAS | PAD | DROP },
	{ BF16, 16, 33, 8, 9, 72, 16, 16, 0, 0, OFF | SHORT },
	{ BF16, 64, 1, 1, 5, 200, 208, 64, 0, 0, 0 },
	{ BF16, 64, 7, 2, 6, 200, 192, 128, 0, 0, RW | BIAS | PAD },
	{ BF16, 128, 33, 8, 9, 200, 208, 128, 0, 0, BIAS | PAD | OFF },
	{ BF16, 128, 33, 3, 7, 72, 192, 128, 0, 0, RW | SHORT | DROP },
	{ BF16, 128, 7, 2, 5, 200, 16, 128, 0, 0, RW | BIAS },
	{ BF16, 64, 300, 8, 16, 384, 1024, 64, 0, 0, RW | BIAS | PAD | SAMPLE },
	{ FP8, 16, 7, 2, 5, 200, 208, 16, TENSOR, 0, RW | PAD },
	{ FP8, 16, 33, 4, 8, 200, 1024, 64, BLOCK, 0, BIAS | PAD | OFF | SHORT },
	{ FP8, 16, 1, 8, 9, 72, 48, 16, CHANNEL, 0, DROP },
	{ FP8, 64, 7, 2, 5, 200, 208, 64, TENSOR, 0, RW },
	{ FP8, 64, 33, 4, 8, 200, 192, 128, CHANNEL, 0, BIAS | PAD | OFF },
	{ FP8, 128, 33, 8, 9, 200, 208, 128, BLOCK, 0, RW | BIAS | PAD },
	{ FP8, 128, 1, 8, 9, 200, 192, 128, TENSOR, 0, SHORT | DROP },
	{ FP8, 64, 7, 3, 6, 72, 48, 64, CHANNEL, 0, RW | DROP },
	{ FP8, 128, 33, 2, 5, 200, 16, 128, BLOCK, 0, OFF | SHORT },
	{ FP8, 64, 300, 8, 16, 384, 1024, 64, BLOCK, 0, RW | BIAS | PAD | SAMPLE },
	{ W4, 16, 7, 2, 5, 200, 192, 16, 0, 32, RW | BIAS },
	{ W4, 16, 33, 8, 9, 200, 1024, 64, 0, 128, PAD | OFF | SHORT },
	{ W4, 16, 1, 3, 6, 72, 64, 16, 0, 64, DROP },
	{ W4, 64, 7, 2, 5, 200, 192, 64, 0, 32, BIAS },
	{ W4, 64, 33, 4, 8, 200, 256, 128, 0, 128, RW | PAD | OFF },
	{ W4, 128, 33, 8, 9, 200, 192, 128, 0, 32, RW | BIAS | PAD | SHORT },
	{ W4, 128, 1, 3, 6, 72, 64, 128, 0, 64, DROP },
	{ W4, 128, 300, 8, 16, 384, 1024, 128, 0, 128, RW | BIAS | PAD | SAMPLE },
	{ FP4, 16, 7, 2, 5, 200, 192, 16, 0, 0, RW | PAD },
	{ FP4, 16, 33, 4, 8, 200, 1024, 64, 0, 0, BIAS | OFF | SHORT },
	{ FP4, 16, 1, 1, 5, 72, 64, 16, 0, 0, 0 },
	{ FP4, 64, 7, 2, 5, 200, 192, 64, 0, 0, RW },
	{ FP4, 64, 33, 8, 9, 200, 192, 128, 0, 0, BIAS | PAD | OFF | DROP },
	{ FP4, 128, 33, 4, 7, 200, 256, 128, 0, 0, RW | BIAS | PAD | SHORT },
	{ FP4, 128, 1, 1, 5, 72, 192, 128, 0, 0, 0 },
	{ FP4, 64, 300, 8, 16, 384, 1024, 64, 0, 0, RW | BIAS | PAD | SAMPLE },
	/* the 128-row tiles with whole blocks (every warp live), N past one 256-column block */
	{ BF16, 128, 300, 8, 16, 456, 208, 128, 0, 0, RW | BIAS | PAD | OFF | SAMPLE },
	{ FP8, 128, 300, 8, 16, 456, 320, 128, BLOCK, 0, BIAS | PAD | OFF | SHORT | SAMPLE },
	{ FP8, 128, 300, 4, 16, 456, 208, 128, CHANNEL, 0, RW | DROP | SAMPLE },
	{ W4, 128, 300, 4, 16, 200, 320, 128, 0, 64, RW | PAD | OFF | DROP | SAMPLE },
	{ FP4, 128, 300, 8, 16, 456, 192, 128, 0, 0, BIAS | PAD | OFF | SAMPLE },
	/* block sizes the frameworks also tune (32, 48, 256): tiles of 16, 64 and 128 rows
	   under them, for the tile-generic rules (rules/fused_moe.json admits them once
	   these pass) */
	{ FP8, 16, 33, 4, 8, 200, 1024, 32, BLOCK, 0, RW | PAD | OFF },
	{ BF16, 16, 7, 2, 6, 200, 208, 48, 0, 0, RW | BIAS | PAD },
	{ FP8, 64, 33, 8, 9, 200, 208, 256, TENSOR, 0, RW | OFF | SHORT },
	{ BF16, 128, 300, 8, 16, 384, 1024, 256, 0, 0, RW | BIAS | PAD | SAMPLE },
	/* row mode (vLLM's naive block assignment): one routed row per block_m */
	{ FP8, 16, 4, 8, 35, 200, 1024, 16, BLOCK, 0, NAIVE | PAD | OFF },
	{ FP8, 16, 2, 8, 17, 456, 320, 64, TENSOR, 0, NAIVE | RW | SHORT },
	{ FP8, 16, 5, 3, 9, 72, 48, 16, CHANNEL, 0, NAIVE | RW | PAD | DROP },
	{ BF16, 16, 12, 8, 40, 200, 1024, 16, 0, 0, NAIVE | RW | BIAS | OFF },
	{ BF16, 16, 1, 1, 5, 200, 208, 64, 0, 0, NAIVE },
	{ FP8, 16, 3, 8, 12, 200, 208, 128, BLOCK, 0, NAIVE | RW | SHORT | DROP },
	{ W4, 16, 3, 4, 9, 200, 256, 32, 0, 64, NAIVE | RW | PAD },
	{ FP4, 16, 3, 4, 9, 72, 192, 16, 0, 0, NAIVE | OFF },
	{ FP8, 64, 3, 4, 9, 200, 208, 64, CHANNEL, 0, NAIVE | RW | OFF },
	{ BF16, 128, 2, 4, 9, 456, 192, 128, 0, 0, NAIVE | BIAS | PAD | SHORT },
	/* MOE_GEMM_MULTI row tiles, grid x 2 (see the top comment) */
	{ BF16, 64, 33, 8, 9, 456, 208, 128, 0, 0, RW | BIAS | PAD | OFF | GRID3 },
	{ FP8, 128, 33, 8, 9, 600, 320, 128, BLOCK, 0, RW | BIAS | PAD | SHORT | GRID3 },
	{ FP8, 64, 7, 2, 5, 456, 192, 64, CHANNEL, 0, NAIVE | RW | GRID3 },
	{ FP8, 128, 33, 4, 8, 1000, 256, 128, TENSOR, 0, OFF | DROP | GRID3 },
	{ BF16, 128, 300, 8, 16, 1000, 256, 128, 0, 0, RW | BIAS | PAD | SAMPLE | GRID3 },
	/* the shallow pipeline of bf16 at TM 64 (moe_gemm.h), and args.stages on a kernel
	   without one (FP8 at TM 64: ignored, its own pipeline in its own bytes) */
	{ BF16, 64, 7, 2, 6, 200, 192, 128, 0, 0, RW | BIAS | PAD | SHALLOW },
	{ BF16, 64, 33, 8, 9, 456, 208, 128, 0, 0, RW | BIAS | PAD | OFF | SHORT | GRID3 | SHALLOW },
	{ BF16, 64, 300, 8, 16, 384, 1024, 64, 0, 0, RW | BIAS | PAD | SAMPLE | SHALLOW },
	{ BF16, 64, 3, 4, 9, 200, 16, 64, 0, 0, NAIVE | RW | DROP | SHALLOW },
	{ FP8, 64, 33, 4, 8, 200, 192, 128, CHANNEL, 0, BIAS | PAD | OFF | SHALLOW },
	/* row tiles whose output rows are not 8-element aligned (N 204, 100; C's row stride
	   N + 24): the staged epilogue's pair stores, and a last 8-column chunk past N */
	{ BF16, 64, 33, 8, 9, 204, 208, 64, 0, 0, RW | BIAS | PAD | GRID3 },
	{ FP8, 128, 33, 4, 8, 100, 256, 128, CHANNEL, 0, RW | PAD },
	{ W4, 128, 33, 8, 9, 204, 192, 128, 0, 32, BIAS | OFF },
	/* the decode kernels (see the top comment) */
	{ BF16, DEC(16), 1, 8, 9, 200, 1024, 128, 0, 0, RW | BIAS | PAD },
	{ BF16, DEC(128), 7, 2, 6, 456, 208, 16, 0, 0, OFF | SHORT },
	{ BF16, DEC(32), 33, 8, 9, 72, 192, 64, 0, 0, RW | DROP },
	{ BF16, DEC(64), 300, 8, 9, 384, 320, 512, 0, 0, RW | BIAS | PAD | SAMPLE },
	{ BF16, DEC(16), 1, 1, 5, 72, 16, 16, 0, 0, 0 },
	{ BF16, DEC(64), 33, 4, 8, 200, 256, 32, 0, 0, BIAS | OFF | GRID3 },
	{ FP8, DEC(16), 1, 8, 9, 200, 1024, 128, TENSOR, 0, RW | PAD },
	{ FP8, DEC(16), 7, 4, 8, 200, 1024, 16, BLOCK, 0, BIAS | PAD | OFF | SHORT },
	{ FP8, DEC(32), 5, 8, 12, 200, 320, 64, BLOCK, 0, RW | DROP },
	{ FP8, DEC(64), 33, 8, 9, 456, 208, 128, CHANNEL, 0, RW | BIAS | PAD },
	{ FP8, DEC(128), 3, 8, 17, 456, 192, 16, BLOCK, 0, RW | PAD | OFF },
	{ FP8, DEC(128), 2, 4, 9, 72, 48, 32, CHANNEL, 0, SHORT },
	{ FP8, DEC(128), 16, 8, 16, 1000, 256, 128, CHANNEL, 0, RW | PAD | GRID3 },
	{ FP8, DEC(32), 33, 8, 9, 200, 320, 64, BLOCK, 0, RW | PAD | GRID3 },
	{ FP8, DEC(16), 16, 8, 16, 512, 2048, 16, BLOCK, 0, RW | PAD },
	{ BF16, DEC(128), 16, 8, 16, 1024, 256, 128, 0, 0, RW | BIAS },
	/* ... row mode */
	{ FP8, DEC(16), 4, 8, 35, 200, 1024, 16, BLOCK, 0, NAIVE | PAD | OFF },
	{ BF16, DEC(128), 2, 8, 17, 456, 320, 64, 0, 0, NAIVE | RW | SHORT | DROP },
	{ FP8, DEC(32), 5, 3, 9, 72, 48, 16, CHANNEL, 0, NAIVE | RW | PAD },
	{ FP8, DEC(64), 3, 8, 12, 200, 208, 128, TENSOR, 0, NAIVE | RW | BIAS | SHORT | GRID3 },
	/* the W4A16 decode kernels (see the top comment) */
	{ W4, DEC(16), 1, 8, 9, 200, 1024, 128, 0, 32, RW | BIAS | PAD },
	{ W4, DEC(128), 7, 2, 6, 456, 192, 16, 0, 32, OFF | SHORT },
	{ W4, DEC(32), 33, 8, 9, 72, 320, 64, 0, 64, RW | DROP },
	{ W4, DEC(64), 300, 8, 9, 384, 320, 512, 0, 128, RW | BIAS | PAD | SAMPLE },
	{ W4, DEC(16), 1, 1, 5, 72, 64, 16, 0, 32, 0 },
	{ W4, DEC(64), 33, 4, 8, 201, 256, 32, 0, 32, BIAS | PAD | OFF | GRID3 },
	{ W4, DEC(32), 5, 8, 12, 199, 448, 128, 0, 128, RW | PAD | DROP | SHORT },
	{ W4, DEC(16), 16, 8, 16, 512, 2048, 16, 0, 32, RW | PAD },
	{ W4, DEC(128), 16, 8, 16, 1024, 256, 128, 0, 32, RW | BIAS },
	{ W4, DEC(32), 3, 8, 12, 199, 448, 16, 0, 32, NAIVE | RW | PAD | OFF },
	{ W4, DEC(16), 2, 4, 9, 72, 1024, 64, 0, 64, NAIVE | SHORT | DROP | GRID3 },
	/* the staged W4A16 decode kernels (16 rows a pass): streamed, K of 8 whole steps on both
	   m16 operands (about 29 rows an expert) and in row mode on N under one tile; block_m 48
	   (no power of two) on a K of 6 steps; short K ending inside its third step (320), K 256
	   on N of 8 tiles at 8 rows an expert (one m16 operand, half of it); streamed, K 2304 at
	   block_m 512 (several passes and windows) */
	{ W4, DEC(128), 33, 8, 9, 200, 1024, 128, 0, 32, STG | RW | BIAS | PAD },
	{ W4, DEC(128), 7, 2, 6, 456, 768, 48, 0, 128, STG | OFF | SHORT },
	{ W4, DEC(128), 12, 8, 12, 199, 320, 64, 0, 64, STG | RW | PAD | DROP | GRID3 },
	{ W4, DEC(128), 300, 8, 9, 384, 2304, 512, 0, 128, STG | RW | BIAS | PAD | SAMPLE },
	{ W4, DEC(128), 2, 4, 9, 72, 1024, 64, 0, 64, STG | NAIVE | SHORT | DROP },
	{ W4, DEC(128), 16, 8, 16, 1024, 256, 128, 0, 32, STG | RW | BIAS | OFF },
	/* the W4A16 decode kernels of 32-column warps (MOE_DECODE_WARP_N) on a longer K than
	   above: k steps spread unevenly over the warps along K (12 steps over 8, 18 over 4),
	   a last tile of 8 valid columns (a quarter of a warp's; of the 64-column tile's two
	   warps, the second with none) */
	{ W4, DEC(32), 20, 8, 10, 264, 1536, 64, 0, 32, RW | BIAS | OFF },
	{ W4, DEC(64), 6, 8, 11, 200, 2304, 16, 0, 128, RW | PAD | DROP },
	/* ... and on the down GEMM's short K (the 128-column kernel of 8 rows a pass, which
	   took the place of a staged one): K 192, 320, 448 and 512, a warp tile partly past N
	   (201), several passes and windows, grid (2, 3) and row mode */
	{ W4, DEC(128), 33, 4, 8, 201, 512, 32, 0, 64, BIAS | PAD | OFF | GRID3 },
	{ W4, DEC(128), 300, 8, 9, 384, 320, 512, 0, 128, RW | BIAS | PAD | SAMPLE },
	{ W4, DEC(128), 3, 8, 12, 199, 448, 16, 0, 32, NAIVE | RW | PAD | OFF },
	/* the staged W4A16 decode kernel (up to 32 rows a pass, in shared memory as two m16
	   operands, K <= 512): K inside one step (64) and ending inside one (192, 448), K 512 (the
	   most it holds), 29 rows an expert (both operands, the second partly), 2 or 3 (one),
	   several passes and windows, odd N, experts on another rank, short and dropped rows,
	   grid (2, 3) and row mode */
	{ W4, DEC(128), 33, 8, 9, 200, 64, 128, 0, 32, STG | RW | PAD },
	{ W4, DEC(128), 7, 2, 6, 456, 192, 16, 0, 32, STG | OFF | SHORT },
	{ W4, DEC(128), 300, 8, 9, 384, 256, 512, 0, 128, STG | RW | BIAS | PAD | SAMPLE | DROP },
	{ W4, DEC(128), 12, 8, 12, 199, 448, 64, 0, 64, STG | RW | PAD | DROP | GRID3 },
	{ W4, DEC(128), 33, 4, 8, 201, 512, 32, 0, 64, STG | BIAS | PAD | OFF | GRID3 },
	{ W4, DEC(128), 3, 8, 12, 199, 448, 16, 0, 32, STG | NAIVE | RW | PAD | OFF },
	/* ... on a K past its four slots, its steps streamed through two (the gate/up's long K):
	   K 640 (one step past them) on one m16 operand, 1536 on both, 1600 ending inside a step,
	   several tiles a block (the copies crossing from a tile's last step to the next's first),
	   other ranks, short and dropped rows, row mode */
	{ W4, DEC(128), 7, 2, 6, 456, 640, 16, 0, 32, STG | OFF | SHORT },
	{ W4, DEC(128), 300, 8, 9, 384, 1536, 512, 0, 128, STG | RW | BIAS | PAD | SAMPLE | DROP },
	{ W4, DEC(128), 33, 8, 9, 200, 1600, 128, 0, 64, STG | RW | PAD },
	{ W4, DEC(128), 40, 8, 12, 456, 1088, 64, 0, 32, STG | RW | PAD | DROP | GRID3 },
	{ W4, DEC(128), 3, 8, 12, 199, 704, 16, 0, 32, STG | NAIVE | RW | PAD | OFF },
	/* bf16's 128-row tile in its fitted form (192 columns, moe_gemm.h's MOE_GEMM_FIT: the
	   launch's N decides, as cases 6 and 43 too): N 330 (a partial second tile), K 208 ending
	   inside a k tile; N 1100 over six tiles on a grid x of 2; N 100 (not 8-element aligned)
	   in row mode */
	{ BF16, 128, 300, 8, 16, 330, 208, 128, 0, 0, RW | PAD | DROP | SAMPLE },
	{ BF16, 128, 33, 8, 9, 1100, 1024, 128, 0, 0, RW | BIAS | PAD | OFF | GRID3 },
	{ BF16, 128, 5, 4, 9, 100, 208, 128, 0, 0, NAIVE | RW | PAD },
	/* FP8 block scales copied with the k tiles: the 64-row tile's column tiles in turn
	   (grid x 2) on an N and a K that end inside a 128 group, the 128-row tile's second
	   128 columns past N, and the 16-row tile's eight k slices on a third of a k tile */
	{ FP8, 64, 61, 8, 9, 328, 448, 64, BLOCK, 0, RW | PAD | OFF | SHORT | GRID3 },
	{ FP8, 128, 21, 8, 7, 200, 576, 128, BLOCK, 0, BIAS | DROP },
	{ FP8, 16, 9, 8, 9, 328, 1344, 16, BLOCK, 0, RW | PAD | OFF },
	/* the packed row tiles at TM 64 and 128 as MOE_GEMM_MULTI tiles, grid x 2 over 3 to 8
	   column tiles: the W scales staged with the k tile of the step issued (TM 128) or held
	   for the next step (TM 64) across a tile's end, a partial last tile, a K of one k tile
	   (the pipeline's first stages span tiles) to more than the stages, row mode */
	{ W4, 128, 33, 8, 9, 1000, 192, 128, 0, 32, RW | BIAS | PAD | OFF | GRID3 },
	{ W4, 128, 300, 8, 16, 600, 320, 128, 0, 128, RW | PAD | DROP | SAMPLE | GRID3 },
	{ W4, 128, 7, 3, 6, 520, 64, 128, 0, 64, NAIVE | BIAS | SHORT | GRID3 },
	{ W4, 64, 33, 4, 8, 456, 64, 64, 0, 64, RW | PAD | OFF | GRID3 },
	{ W4, 64, 61, 8, 9, 1000, 1024, 128, 0, 32, BIAS | DROP | SHORT | GRID3 },
	{ FP4, 128, 33, 8, 9, 1000, 256, 128, 0, 0, RW | BIAS | PAD | OFF | GRID3 },
	{ FP4, 64, 7, 2, 5, 456, 64, 64, 0, 0, NAIVE | RW | GRID3 },
	/* W4A16 at TM 64 on warps of 64 x 16 (MOE_GEMM_PAIRED): whole blocks (every warp's four
	   m16 fragments live) on a K past its three stages, and row mode */
	{ W4, 64, 300, 8, 16, 456, 320, 64, 0, 64, RW | BIAS | PAD | OFF | SAMPLE },
	{ W4, 64, 3, 4, 9, 200, 256, 64, 0, 128, NAIVE | RW | DROP },
	/* TM 32 (bf16, FP8): framework blocks of 32, 64 and 128 rows (one to four tiles each), a
	   partial column tile, K from one k tile to past the stages (bf16 four, FP8 two), several
	   column tiles a block, row mode */
	{ BF16, 32, 33, 8, 9, 200, 208, 64, 0, 0, RW | BIAS | PAD },
	{ BF16, 32, 7, 2, 6, 456, 320, 32, 0, 0, OFF | SHORT | DROP | GRID3 },
	{ BF16, 32, 300, 8, 16, 384, 1024, 128, 0, 0, RW | BIAS | PAD | SAMPLE },
	{ BF16, 32, 3, 4, 9, 200, 64, 32, 0, 0, NAIVE | RW },
	{ FP8, 32, 33, 8, 9, 200, 208, 128, BLOCK, 0, RW | PAD | OFF },
	{ FP8, 32, 7, 3, 6, 200, 192, 32, TENSOR, 0, BIAS | SHORT | GRID3 },
	{ FP8, 32, 33, 4, 8, 72, 48, 64, CHANNEL, 0, RW | DROP },
	{ FP8, 32, 300, 8, 16, 456, 1024, 64, BLOCK, 0, RW | BIAS | PAD | SAMPLE },
	{ FP8, 32, 33, 8, 9, 200, 1344, 64, BLOCK, 0, RW | PAD | OFF | GRID3 },
	/* bf16 at TM 32 on its shallow two-stage pipeline: the down GEMM's short K over several
	   column tiles a block, and a K past the stages */
	{ BF16, 32, 33, 8, 9, 456, 192, 64, 0, 0, RW | BIAS | PAD | OFF | GRID3 | SHALLOW },
	{ BF16, 32, 61, 8, 9, 200, 1024, 32, 0, 0, SHORT | DROP | SHALLOW },
	/* the four-warp 16-row tiles (bf16, FP8: MOE_GEMM_WARPS): whole blocks over several
	   column tiles a block on a K past the three stages, a partial column tile, and FP8's
	   block scales on the tile's scale threads */
	{ BF16, 16, 300, 8, 16, 456, 1344, 32, 0, 0, RW | BIAS | PAD | OFF | GRID3 | SAMPLE },
	{ FP8, 16, 300, 8, 16, 456, 1408, 16, BLOCK, 0, RW | PAD | DROP | GRID3 | SAMPLE },
	/* args.row_parts on the MOE_GEMM_PARTS tiles (moe_gemm_row_parts): a row block per
	   framework block (P1) or two (P2), each taking its parts in turn; experts of more rows
	   than a tile (several live parts a block) and of fewer (parts skipped), rows at the end
	   of their padded list (HOLES: a framework block's first parts all padding), the shallow
	   pipeline and several column tiles a block, and framework blocks longer than two ids a
	   thread (block_m 512 on 128 threads: each part read on its own) */
	{ FP8, 16, 33, 8, 9, 200, 1024, 128, TENSOR, 0, P1 | RW | PAD | OFF },
	{ FP8, 16, 33, 8, 9, 200, 256, 128, BLOCK, 0, P2 | HOLES | BIAS | SHORT | DROP | GRID3 },
	{ FP8, 16, 33, 4, 8, 200, 320, 64, CHANNEL, 0, P1 | HOLES | RW | OFF | SHORT },
	{ FP8, 16, 61, 8, 9, 328, 448, 512, BLOCK, 0, P2 | HOLES | RW | PAD | OFF | GRID3 },
	{ BF16, 16, 61, 8, 9, 456, 256, 64, 0, 0, P1 | HOLES | RW | BIAS | PAD | OFF },
	{ BF16, 16, 7, 2, 6, 200, 1024, 128, 0, 0, P1 | RW },
	{ BF16, 32, 33, 8, 9, 200, 1024, 128, 0, 0, P1 | HOLES | RW | SHORT | GRID3 },
	{ BF16, 32, 61, 8, 9, 456, 192, 128, 0, 0, P2 | RW | PAD | DROP | SHALLOW },
	{ BF16, 32, 300, 8, 16, 384, 208, 256, 0, 0, P2 | HOLES | RW | BIAS | PAD | SAMPLE | SHALLOW },
	{ BF16, 32, 7, 3, 6, 456, 64, 512, 0, 0, P1 | HOLES | DROP },
	/* the staged W4A16 kernel at K 192 (the halved one, its second step 16 k a lane, a tile's
	   W held for up to 112 rows a pass): about 29 rows an expert (two m16 operands) and 267
	   (passes of all seven, of two and of one, several windows), group sizes 64 and 128
	   (case 110's 7-token one has 32), odd N, other ranks, grid (2, 3), row mode; then about
	   54 rows an expert (four operands, the last partly), in framework blocks of 64 (some
	   experts in two), a last tile of 72 columns */
	{ W4, DEC(128), 33, 8, 9, 201, 192, 128, 0, 64, STG | RW | BIAS | PAD | OFF | GRID3 },
	{ W4, DEC(128), 300, 8, 9, 456, 192, 512, 0, 128, STG | RW | PAD | SAMPLE | DROP },
	{ W4, DEC(128), 3, 8, 12, 199, 192, 16, 0, 32, STG | NAIVE | RW | PAD | OFF | SHORT },
	{ W4, DEC(128), 61, 8, 9, 328, 192, 64, 0, 32, STG | RW | BIAS | OFF | DROP },
	/* the staged kernel's wide passes (K up to 256: up to 48 rows a pass, three m16 operands):
	   about 40 rows an expert (the third operand partly) on K 256, plain (no bias, C's rows
	   aligned: the whole-word store) and with bias and padded strides; about 50 on K 128 (one
	   step: passes of 48 and 2) in framework blocks of 64, other ranks, grid (2, 3) */
	{ W4, DEC(128), 45, 8, 9, 1024, 256, 128, 0, 32, STG | RW },
	{ W4, DEC(128), 45, 8, 9, 200, 256, 128, 0, 64, STG | RW | BIAS | PAD | DROP },
	{ W4, DEC(128), 56, 8, 9, 456, 128, 64, 0, 32, STG | RW | OFF | GRID3 },
	/* bf16 at TM 32 four stages deep on the down GEMM's short K with args.row_parts, as the
	   plan runs it at 14 to 16 rows an expert (moe_gemm_rows_tile): about 15 rows an expert,
	   each framework block's parts taken two row blocks at a time, several column tiles a block */
	{ BF16, 32, 17, 8, 9, 456, 192, 128, 0, 0, P2 | HOLES | RW | PAD | OFF | GRID3 },
};
#undef BF16
#undef FP8
#undef W4
#undef FP4
#undef TENSOR
#undef CHANNEL
#undef BLOCK

/* find_kernel - the kernels[] entry of a case. */
static const struct kernel *find_kernel(const struct tcase *tc)
{
	for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++)
		if (kernels[i].quant == tc->quant && kernels[i].tm == tc->tm &&
		    kernels[i].rows == (tc->tm > 0 ? 0 : tc->flags & STG ? 16 : 8) &&
		    kernels[i].staged == (tc->flags & STG ? moe_gemm_decode_staging(tc->K) : 0))
			return &kernels[i];
	fprintf(stderr, "no kernel for quant %d, tile %d\n", tc->quant, tc->tm);
	exit(1);
}

/* describe - one line for the case's TAP result. */
static void describe(int idx, char *buf, size_t len)
{
	static const char *const scales[] = { "", ", tensor scales", ", channel scales", ", 128x128 block scales" };
	static const struct {
		unsigned flag;
		const char *what;
	} flags[] = {
		{ RW, ", routed weights" },
		{ BIAS, ", bias" },
		{ PAD, ", padded strides" },
		{ OFF, ", experts on another rank" },
		{ SHORT, ", short num_tokens_post_padded" },
		{ DROP, ", unlisted rows" },
		{ SAMPLE, ", sampled rows" },
		{ NAIVE, ", row mode (naive block assignment)" },
		{ GRID3, "" },
		{ P1, ", row_parts 1" },
		{ P2, ", row_parts 2" },
		{ HOLES, ", rows at the end of each expert's list" },
	};
	const struct tcase *tc = &cases[idx];
	const struct kernel *kd = find_kernel(tc);
	size_t n = 0;

	n += (size_t)snprintf(buf, len, "case %d: %s, M %d top_k %d E %d N %d K %d block_m %d%s", idx, kd->name,
			      tc->M, tc->top_k, tc->E, tc->N, tc->K, tc->block_m,
			      kd->quant == MOE_FP8 ? scales[tc->scale] : "");
	if (kd->quant == MOE_W4A16 && n < len)
		n += (size_t)snprintf(buf + n, len - n, ", group %d", tc->group_size);
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if ((tc->flags & flags[i].flag) && n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s", flags[i].what);
	if ((tc->flags & GRID3) && n < len)
		n += (size_t)snprintf(buf + n, len - n, "%s", kd->tm < 0 ? ", grid (2, 3)" : ", grid x 2");
	if (kd->tm > 0 && MOE_GEMM_ROWS_K64(kd->quant, kd->tm, tc->K) && n < len)
		n += (size_t)snprintf(buf + n, len - n, ", 64-byte k tiles");
}

/* ------------------------------------------------------------ inputs */

static int irand(int n) /* [0, n) */
{
	return (int)(urand() * n);
}

static double urange(double lo, double hi)
{
	return lo + (hi - lo) * urand();
}

/* x rounded to the nearest bf16 (8 significant bits, ties to even). */
static double bf16_round(double x)
{
	int e;
	double m;

	if (x == 0 || !isfinite(x))
		return x;
	m = frexp(x, &e);
	return ldexp(rint(ldexp(m, 8)), e - 8);
}

/* A random finite E4M3 code, every exponent, zeros and subnormals included. */
static uint8_t e4m3_code(void)
{
	uint8_t c;

	do
		c = (uint8_t)(rand64() >> 24);
	while ((c & 0x7f) == NAN_E4M3);
	return c;
}

/*
 * One case on the host: the kernel's arguments (dimensions and strides; the
 * pointers are set at launch), the buffers as uploaded, with NaN wherever
 * the kernel must not look, and the reference's exact copies of A and of the
 * (dequantized) weights.
 */
struct host {
	const struct tcase *tc;
	int quant, nv, nblk; /* num_valid, expert_ids entries */
	int32_t ntpp;        /* num_tokens_post_padded */
	struct moe_gemm_args g;
	size_t a_bytes, b_bytes, c_elems, bias_elems, as_elems, bs_elems, bs_esz;
	uint8_t *a;      /* bf16 or E4M3 [M, a_stride_m] */
	uint8_t *b;      /* bf16, E4M3 or packed 4-bit [E, b_stride_e] */
	uint8_t *bs;     /* b_scale: fp32 (FP8), bf16 (W4A16) or E4M3 (NVFP4) */
	uint16_t *c;     /* [num_valid + GUARD, c_stride_m], as downloaded */
	uint16_t *bias;  /* [E, bias_stride_e] or NULL */
	float *as;       /* a_scale (FP8) or NULL */
	float *bg;       /* b_global (NVFP4) or NULL */
	float *tw;       /* topk_weights (mul_routed_weight) or NULL */
	int32_t *sorted; /* [EM]; not uploaded in row mode */
	int32_t *expert; /* [nblk]; row mode: the flat top-k experts */
	float *ad;       /* A [M, K] */
	float *wd;       /* W [E, N, K], the values the products use */
};

/* layout - dimensions, strides and buffer sizes (PAD: padding of 16-byte multiples). */
static void layout(struct host *hs)
{
	const struct tcase *tc = hs->tc;
	struct moe_gemm_args *g = &hs->g;
	const int pad = (tc->flags & PAD) != 0;
	const int packed = hs->quant == MOE_W4A16 || hs->quant == MOE_NVFP4;
	const int aesz = hs->quant == MOE_FP8 ? 1 : 2, wesz = hs->quant == MOE_BF16 ? 2 : 1;

	memset(g, 0, sizeof(*g));
	g->N = tc->N;
	g->K = tc->K;
	g->top_k = tc->top_k;
	g->block_m = tc->block_m;
	g->num_valid = hs->nv = tc->M * tc->top_k;
	g->EM = (tc->flags & NAIVE) ? hs->nv * tc->block_m : hs->nv + (tc->E + 1) * (tc->block_m - 1);
	g->mul_routed_weight = (tc->flags & RW) != 0;
	g->stages = (tc->flags & SHALLOW) ? MOE_GEMM_SHALLOW_STAGES : 0;
	hs->nblk = (g->EM + tc->block_m - 1) / tc->block_m;

	g->a_stride_m = tc->K + pad * 48 / aesz;
	g->b_stride_n = (packed ? tc->K / 2 : tc->K) + pad * 32 / wesz;
	g->b_stride_e = tc->N * g->b_stride_n + pad * 64;
	g->c_stride_m = tc->N + pad * 24;
	g->bias_stride_n = 1 + pad;
	g->bias_stride_e = tc->N * g->bias_stride_n + pad * 8;
	hs->a_bytes = (size_t)tc->M * g->a_stride_m * aesz;
	hs->b_bytes = (size_t)tc->E * g->b_stride_e * wesz;
	hs->c_elems = (size_t)(hs->nv + GUARD) * g->c_stride_m;
	hs->bias_elems = (tc->flags & BIAS) ? (size_t)tc->E * g->bias_stride_e : 0;

	switch (hs->quant) {
	case MOE_FP8:
		g->scale = tc->scale;
		hs->bs_esz = 4;
		if (tc->scale == MOE_SCALE_TENSOR) {
			hs->as_elems = 1;
			g->bs_stride_e = 1 + pad;
		} else if (tc->scale == MOE_SCALE_CHANNEL) {
			g->as_stride_m = 1 + pad;
			hs->as_elems = (size_t)tc->M * g->as_stride_m;
			g->bs_stride_n = 1;
			g->bs_stride_e = tc->N + pad * 8;
		} else {
			const int gk = (tc->K + 127) / 128, gn = (tc->N + 127) / 128;

			g->group_k = g->group_n = 128;
			/* padded: column-major, as per-token-group quantization can lay it out */
			g->as_stride_m = pad ? 1 : gk;
			g->as_stride_k = pad ? tc->M + 3 : 1;
			hs->as_elems = (size_t)((gk - 1) * g->as_stride_k + (tc->M - 1) * g->as_stride_m + 1);
			g->bs_stride_k = 1;
			g->bs_stride_n = gk + pad;
			g->bs_stride_e = gn * g->bs_stride_n + pad * 3;
		}
		break;
	case MOE_W4A16:
		g->group_size = tc->group_size;
		hs->bs_esz = 2;
		g->bs_stride_k = 1;
		g->bs_stride_n = (tc->K + tc->group_size - 1) / tc->group_size + pad * 2;
		g->bs_stride_e = tc->N * g->bs_stride_n + pad * 8;
		break;
	case MOE_NVFP4:
		g->group_size = 16;
		hs->bs_esz = 1;
		g->bs_stride_k = 1;
		g->bs_stride_n = tc->K / 16 + pad * 16;
		g->bs_stride_e = tc->N * g->bs_stride_n + pad * 32;
		break;
	}
	hs->bs_elems = hs->quant == MOE_BF16 ? 0 : (size_t)tc->E * g->bs_stride_e;
}

static void alloc_host(struct host *hs)
{
	const struct tcase *tc = hs->tc;

	hs->a = malloc(hs->a_bytes);
	hs->b = malloc(hs->b_bytes);
	hs->c = malloc(hs->c_elems * 2);
	hs->bias = hs->bias_elems ? malloc(hs->bias_elems * 2) : NULL;
	hs->as = hs->as_elems ? malloc(hs->as_elems * sizeof(float)) : NULL;
	hs->bs = hs->bs_elems ? malloc(hs->bs_elems * hs->bs_esz) : NULL;
	hs->bg = hs->quant == MOE_NVFP4 ? malloc((size_t)tc->E * sizeof(float)) : NULL;
	hs->tw = (tc->flags & RW) ? malloc((size_t)hs->nv * sizeof(float)) : NULL;
	hs->sorted = malloc((size_t)hs->g.EM * sizeof(int32_t));
	hs->expert = malloc((size_t)hs->nblk * sizeof(int32_t));
	hs->ad = malloc((size_t)tc->M * tc->K * sizeof(float));
	hs->wd = malloc((size_t)tc->E * tc->N * tc->K * sizeof(float));
}

static void free_host(struct host *hs)
{
	free(hs->a);
	free(hs->b);
	free(hs->c);
	free(hs->bias);
	free(hs->as);
	free(hs->bs);
	free(hs->bg);
	free(hs->tw);
	free(hs->sorted);
	free(hs->expert);
	free(hs->ad);
	free(hs->wd);
}

/*
 * route - moe_align_block_size on the host: top_k distinct experts per
 * token (DROP: some slots unlisted), each expert's routed rows in increasing
 * order padded to block_m with num_valid (HOLES: the padding first); OFF marks experts 1, 4, 7, ... as
 * on another rank, SHORT stops num_tokens_post_padded early.  Row mode:
 * the flat top-k list as expert_ids (DROP's slots -1), no sorted list.
 */
static void route(struct host *hs)
{
	const struct tcase *tc = hs->tc;
	const int nv = hs->nv, bm = tc->block_m;
	int *topk = malloc((size_t)nv * sizeof(int)), *perm = malloc((size_t)tc->E * sizeof(int));
	int pos = 0, used;

	for (int t = 0; t < tc->M; t++) {
		for (int e = 0; e < tc->E; e++)
			perm[e] = e;
		for (int j = 0; j < tc->top_k; j++) {
			const int r = j + irand(tc->E - j), x = perm[r];

			perm[r] = perm[j];
			perm[j] = x;
			topk[t * tc->top_k + j] = (tc->flags & DROP) && irand(6) == 0 ? -1 : x;
		}
	}
	for (int i = 0; i < hs->g.EM; i++)
		hs->sorted[i] = nv;
	for (int b = 0; b < hs->nblk; b++)
		hs->expert[b] = -1;
	if (tc->flags & NAIVE) {
		/* row mode: vLLM's expert_ids = topk_ids.view(-1); SHORT cuts mid-block */
		for (int id = 0; id < nv; id++)
			hs->expert[id] = (tc->flags & OFF) && topk[id] % 3 == 1 ? -1 : topk[id];
		hs->ntpp = nv * bm;
		if ((tc->flags & SHORT) && nv >= 3)
			hs->ntpp = (nv - nv / 3) * bm - bm / 2;
		free(topk);
		free(perm);
		return;
	}
	for (int e = 0; e < tc->E; e++) {
		const int start = pos;

		for (int id = 0; id < nv; id++)
			if (topk[id] == e)
				hs->sorted[pos++] = id;
		if (tc->flags & HOLES) {
			const int count = pos - start, end = (pos + bm - 1) / bm * bm;

			memmove(hs->sorted + end - count, hs->sorted + start, (size_t)count * sizeof(int32_t));
			for (int i = start; i < end - count; i++)
				hs->sorted[i] = nv;
		}
		pos = (pos + bm - 1) / bm * bm;
		for (int b = start / bm; b < pos / bm; b++)
			hs->expert[b] = (tc->flags & OFF) && e % 3 == 1 ? -1 : e;
	}
	used = pos / bm;
	hs->ntpp = pos;
	if ((tc->flags & SHORT) && used >= 2)
		hs->ntpp = pos - bm * (used / 3 > 1 ? used / 3 : 1);
	free(topk);
	free(perm);
}

static void fill_a(struct host *hs)
{
	const struct moe_gemm_args *g = &hs->g;
	uint16_t *a16 = (uint16_t *)hs->a;

	if (hs->quant == MOE_FP8)
		memset(hs->a, NAN_E4M3, hs->a_bytes);
	else
		for (size_t i = 0; i < hs->a_bytes / 2; i++)
			a16[i] = NAN_BF16;
	for (int r = 0; r < hs->tc->M; r++)
		for (int k = 0; k < g->K; k++) {
			const int64_t i = r * g->a_stride_m + k;
			float *d = &hs->ad[(size_t)r * g->K + k];

			if (hs->quant == MOE_FP8) {
				hs->a[i] = e4m3_code();
				*d = (float)e4m3_to_double(hs->a[i]);
			} else {
				a16[i] = bf16_from_double(urange(-1, 1));
				*d = bf16_to_float(a16[i]);
			}
		}
}

/* fill_fp8_scales - a_scale and b_scale: products near 1 / (sum of K e4m3 products). */
static void fill_fp8_scales(struct host *hs)
{
	const struct tcase *tc = hs->tc;
	const struct moe_gemm_args *g = &hs->g;
	const double sa = 1.0 / 128, sb = 1.0 / (128 * sqrt((double)tc->K));
	const int gk = (tc->K + 127) / 128, gn = (tc->N + 127) / 128;
	float *bs = (float *)hs->bs;

	for (size_t i = 0; i < hs->as_elems; i++)
		hs->as[i] = NAN;
	for (size_t i = 0; i < hs->bs_elems; i++)
		bs[i] = NAN;
	switch (tc->scale) {
	case MOE_SCALE_TENSOR:
		hs->as[0] = (float)(sa * urange(0.5, 1.5));
		for (int e = 0; e < tc->E; e++)
			bs[e * g->bs_stride_e] = (float)(sb * urange(0.5, 1.5));
		break;
	case MOE_SCALE_CHANNEL:
		for (int r = 0; r < tc->M; r++)
			hs->as[r * g->as_stride_m] = (float)(sa * urange(0.5, 1.5));
		for (int e = 0; e < tc->E; e++)
			for (int n = 0; n < tc->N; n++)
				bs[e * g->bs_stride_e + n * g->bs_stride_n] = (float)(sb * urange(0.5, 1.5));
		break;
	case MOE_SCALE_BLOCK:
		for (int r = 0; r < tc->M; r++)
			for (int k = 0; k < gk; k++)
				hs->as[r * g->as_stride_m + k * g->as_stride_k] = (float)(sa * urange(0.5, 1.5));
		for (int e = 0; e < tc->E; e++)
			for (int n = 0; n < gn; n++)
				for (int k = 0; k < gk; k++)
					bs[e * g->bs_stride_e + n * g->bs_stride_n + k * g->bs_stride_k] =
						(float)(sb * urange(0.5, 1.5));
		break;
	}
}

/*
 * fill_group_scales - W4A16: bf16 scales near sqrt(3 / K) / 4.6 (4.6: the
 * RMS of u - 8); NVFP4: positive E4M3 scales 2^-4 .. 7.5 and a global
 * scale near 0.2 / sqrt(K), weights of RMS about sqrt(3 / K).
 */
static void fill_group_scales(struct host *hs)
{
	const struct tcase *tc = hs->tc;
	const struct moe_gemm_args *g = &hs->g;
	const int groups = hs->quant == MOE_W4A16 ? (tc->K + tc->group_size - 1) / tc->group_size : tc->K / 16;
	uint16_t *bs16 = (uint16_t *)hs->bs;

	if (hs->quant == MOE_W4A16)
		for (size_t i = 0; i < hs->bs_elems; i++)
			bs16[i] = NAN_BF16;
	else
		memset(hs->bs, NAN_E4M3, hs->bs_elems);
	for (int e = 0; e < tc->E; e++)
		for (int n = 0; n < tc->N; n++)
			for (int k = 0; k < groups; k++) {
				const int64_t i = e * g->bs_stride_e + n * g->bs_stride_n + k;

				if (hs->quant == MOE_W4A16)
					bs16[i] = bf16_from_double(urange(0.5, 1.5) * sqrt(3.0 / tc->K) / 4.6);
				else
					hs->bs[i] = (uint8_t)((3 + irand(7)) << 3 | irand(8));
			}
	for (int e = 0; e < tc->E && hs->bg; e++)
		hs->bg[e] = (float)(urange(0.5, 1.5) * 0.2 / sqrt((double)tc->K));
}

/*
 * dequant - weight k of column n of expert e from its 4-bit code q, as the
 * header defines it: fp32 products in that order, then rounded to bf16.
 */
static float dequant(const struct host *hs, int e, int n, int k, int q)
{
	static const float e2m1[8] = { 0, 0.5f, 1, 1.5f, 2, 3, 4, 6 };
	const struct moe_gemm_args *g = &hs->g;
	const int64_t s = e * g->bs_stride_e + n * g->bs_stride_n + k / g->group_size;
	float w;

	if (hs->quant == MOE_W4A16) {
		w = (float)(q - 8) * bf16_to_float(((const uint16_t *)hs->bs)[s]);
	} else {
		w = ((q & 8) ? -e2m1[q & 7] : e2m1[q & 7]) * (float)e4m3_to_double(hs->bs[s]);
		w = w * hs->bg[e];
	}
	return bf16_to_float(bf16_from_double(w));
}

/* fill_w - weights (after the scales they depend on): NaN padding, 7s between packed columns. */
static void fill_w(struct host *hs)
{
	const struct tcase *tc = hs->tc;
	const struct moe_gemm_args *g = &hs->g;
	const double amp = sqrt(3.0 / tc->K);
	uint16_t *b16 = (uint16_t *)hs->b;

	if (hs->quant == MOE_BF16)
		for (size_t i = 0; i < hs->b_bytes / 2; i++)
			b16[i] = NAN_BF16;
	else
		memset(hs->b, hs->quant == MOE_FP8 ? NAN_E4M3 : 0x77, hs->b_bytes);
	for (int e = 0; e < tc->E; e++)
		for (int n = 0; n < tc->N; n++) {
			const int64_t col = e * g->b_stride_e + n * g->b_stride_n;
			float *d = &hs->wd[((size_t)e * tc->N + n) * tc->K];

			for (int k = 0; k < tc->K; k++) {
				if (hs->quant == MOE_BF16) {
					b16[col + k] = bf16_from_double(amp * urange(-1, 1));
					d[k] = bf16_to_float(b16[col + k]);
				} else if (hs->quant == MOE_FP8) {
					hs->b[col + k] = e4m3_code();
					d[k] = (float)e4m3_to_double(hs->b[col + k]);
				} else {
					const int q = irand(16);

					if (k & 1)
						hs->b[col + k / 2] |= (uint8_t)(q << 4);
					else
						hs->b[col + k / 2] = (uint8_t)q;
					d[k] = dequant(hs, e, n, k, q);
				}
			}
		}
}

static void fill_inputs(struct host *hs)
{
	const struct tcase *tc = hs->tc;
	const struct moe_gemm_args *g = &hs->g;

	route(hs);
	fill_a(hs);
	if (hs->quant == MOE_FP8)
		fill_fp8_scales(hs);
	else if (hs->quant != MOE_BF16)
		fill_group_scales(hs);
	fill_w(hs);
	if (hs->bias) {
		for (size_t i = 0; i < hs->bias_elems; i++)
			hs->bias[i] = NAN_BF16;
		for (int e = 0; e < tc->E; e++)
			for (int n = 0; n < tc->N; n++)
				hs->bias[e * g->bias_stride_e + n * g->bias_stride_n] = bf16_from_double(urange(-1, 1));
	}
	for (int i = 0; i < hs->nv && hs->tw; i++)
		hs->tw[i] = (float)urange(0.05, 1);
}

/* ------------------------------------------------------------ launch */

/* to_device - a device copy of n bytes at p; 0 (a NULL argument) for none. */
static CUdeviceptr to_device(const void *p, size_t n)
{
	CUdeviceptr d = 0;

	if (p && n) {
		CHECK(cuMemAlloc(&d, n));
		CHECK(cuMemcpyHtoD(d, p, n));
	}
	return d;
}

/* launch - upload, poison the output, run the kernel once, download the output. */
static void launch(CUmodule mod, const struct kernel *kd, struct host *hs)
{
	struct moe_gemm_args a = hs->g;
	void *params[] = { &a };
	const int decode = kd->tm < 0;
	const int smem = decode ? 0 : moe_gemm_launch_smem(kd->quant, kd->tm, a.stages);
	CUdeviceptr d[11];
	CUfunction fn;
	unsigned gx, gy;

	d[0] = to_device(hs->a, hs->a_bytes);
	d[1] = to_device(hs->b, hs->b_bytes);
	CHECK(cuMemAlloc(&d[2], hs->c_elems * 2));
	CHECK(cuMemsetD16(d[2], NAN_BF16, hs->c_elems));
	d[3] = to_device(hs->bias, hs->bias_elems * 2);
	d[4] = to_device(hs->as, hs->as_elems * sizeof(float));
	d[5] = to_device(hs->bs, hs->bs_elems * hs->bs_esz);
	d[6] = to_device(hs->bg, hs->bg ? (size_t)hs->tc->E * sizeof(float) : 0);
	d[7] = to_device(hs->tw, hs->tw ? (size_t)hs->nv * sizeof(float) : 0);
	d[8] = (hs->tc->flags & NAIVE) ? 0 : to_device(hs->sorted, (size_t)a.EM * sizeof(int32_t));
	d[9] = to_device(hs->expert, (size_t)hs->nblk * sizeof(int32_t));
	d[10] = to_device(&hs->ntpp, sizeof(int32_t));
	a.a = (const void *)d[0];
	a.b = (const void *)d[1];
	a.c = (void *)d[2];
	a.bias = (const void *)d[3];
	a.a_scale = (const float *)d[4];
	a.b_scale = (const void *)d[5];
	a.b_global = (const float *)d[6];
	a.topk_weights = (const float *)d[7];
	a.sorted_ids = (const int32_t *)d[8];
	a.expert_ids = (const int32_t *)d[9];
	a.num_tokens_post_padded = (const int32_t *)d[10];

	CHECK(cuModuleGetFunction(&fn, mod, kd->name));
	CHECK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
	if (decode) {
		const int tn = DEC(kd->tm); /* DEC is its own inverse */

		gx = (unsigned)moe_gemm_decode_cols(kd->quant, a.N, a.K, tn, a.EM, a.block_m, a.num_valid);
		gy = (unsigned)moe_gemm_decode_blocks(a.EM, a.block_m, a.num_valid);
		if (hs->tc->flags & GRID3)
			gx = 2, gy = 3;
	} else {
		const int rows = (hs->tc->flags & NAIVE) ? a.block_m : kd->tm; /* row mode: a row block per framework block */

		a.row_parts = (hs->tc->flags & P1) ? 1 : (hs->tc->flags & P2) ? 2 : 0;
		gx = (unsigned)moe_gemm_rows_cols(kd->quant, kd->tm, a.N, a.K, a.num_valid);
		gy = a.row_parts ? (unsigned)moe_gemm_rows_grid(kd->tm, a.block_m, a.EM, a.row_parts, 0)
				 : (unsigned)((a.EM + rows - 1) / rows);
		if (hs->tc->flags & GRID3)
			gx = 2;
	}
	CHECK(cuLaunchKernel(fn, gx, gy, 1, decode ? MOE_GEMM_THREADS : (unsigned)moe_gemm_threads(kd->quant, kd->tm), 1,
			     1, (unsigned)smem, NULL, params, NULL));
	CHECK(cuCtxSynchronize());
	CHECK(cuMemcpyDtoH(hs->c, d[2], hs->c_elems * 2));
	for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++)
		if (d[i])
			CHECK(cuMemFree(d[i]));
}

/* ------------------------------------------------------------ reference and checks */

/* dot_scale - the FP8 scale product of k group kg of (row, e, n); 1 for the other variants. */
static double dot_scale(const struct host *hs, int row, int e, int n, int kg)
{
	const struct moe_gemm_args *g = &hs->g;
	const float *bs = (const float *)hs->bs;

	if (hs->quant != MOE_FP8)
		return 1;
	switch (g->scale) {
	case MOE_SCALE_TENSOR:
		return (double)hs->as[0] * bs[e * g->bs_stride_e];
	case MOE_SCALE_CHANNEL:
		return (double)hs->as[row * g->as_stride_m] * bs[e * g->bs_stride_e + n * g->bs_stride_n];
	default:
		return (double)hs->as[row * g->as_stride_m + kg * g->as_stride_k] *
		       bs[e * g->bs_stride_e + n / g->group_n * g->bs_stride_n + kg * g->bs_stride_k];
	}
}

/* expect - the exact C[id, n] of expert e, and the bound on the kernel's error (top comment). */
static double expect(const struct host *hs, int id, int e, int n, double *bound)
{
	const struct moe_gemm_args *g = &hs->g;
	const int row = id / g->top_k, K = g->K;
	const int block = hs->quant == MOE_FP8 && g->scale == MOE_SCALE_BLOCK, gk = block ? g->group_k : K;
	/* the k spans that take their own scale product: a group, or half one where the
	   16-row tile runs its 64-byte form (MOE_GEMM_K64), whose slices each add theirs */
	const int gs = block && hs->tc->tm > 0 && MOE_GEMM_ROWS_K64(hs->quant, hs->tc->tm, K) ? gk / 2 : gk;
	const float *a = hs->ad + (size_t)row * K, *w = hs->wd + ((size_t)e * g->N + n) * K;
	double v = 0, S = 0, bias = 0, rw = 1, err;
	int groups = 0;

	for (int k0 = 0; k0 < K; k0 += gs, groups++) {
		const double sc = dot_scale(hs, row, e, n, k0 / gk);
		double dot = 0, mag = 0;

		for (int k = k0; k < K && k < k0 + gs; k++) {
			const double p = (double)a[k] * w[k];

			dot += p;
			mag += fabs(p);
		}
		v += dot * sc;
		S += mag * fabs(sc);
	}
	if (hs->bias)
		bias = bf16_to_float(hs->bias[e * g->bias_stride_e + n * g->bias_stride_n]);
	if (g->mul_routed_weight)
		rw = hs->tw[id];
	v = (v + bias) * rw;
	err = fabs(rw) * ((K + groups + 4) * U23 * S + U24 * (S + fabs(bias))) + U24 * fabs(v);
	*bound = 2 * err + 0.5 * bf16_ulp(fabs(v) + 2 * err);
	return v;
}

struct stats {
	long bad, poisoned, checked, exact, finite_only;
	double worst, err, bound; /* max |err| / bound, and that element's error and bound */
	int row, col;
	char first[128];          /* the first failure */
};

/* note - count a failure in *count; the first few are described on stderr. */
static void note(struct stats *st, long *count, const char *what, int id, int64_t n, double got, double want,
		 double bound)
{
	if (st->bad + st->poisoned == 0)
		snprintf(st->first, sizeof(st->first), "%s at row %d col %ld", what, id, (long)n);
	if (st->bad + st->poisoned < 6)
		fprintf(stderr, "  %s: row %d col %ld: got %.7g want %.7g (bound %.3g)\n", what, id, (long)n, got,
			want, bound);
	(*count)++;
}

static void check_value(const struct host *hs, int id, int e, int n, double got, struct stats *st)
{
	double bound, want = expect(hs, id, e, n, &bound), err = fabs(got - want);
	double ratio = isnan(err) ? INFINITY : err / bound;

	st->checked++;
	st->exact += got == bf16_round(want);
	if (!(err <= bound))
		note(st, &st->bad, "value", id, n, got, want, bound);
	if (ratio > st->worst) {
		st->worst = ratio;
		st->err = err;
		st->bound = bound;
		st->row = id;
		st->col = n;
	}
}

static int sampled(const struct host *hs, int id)
{
	return !(hs->tc->flags & SAMPLE) || id % 5 == 0 || id < SAMPLE_EDGE || id >= hs->nv - SAMPLE_EDGE;
}

/*
 * check - every word of the output: routed rows of the blocks before
 * num_tokens_post_padded against the reference (zeros for expert -1),
 * everything else still the poison pattern.
 */
static void check(const struct host *hs, struct stats *st)
{
	const struct moe_gemm_args *g = &hs->g;
	const int rows = hs->nv + GUARD;
	int *owner = malloc((size_t)rows * sizeof(int)); /* expert of a written row; -2: not written */

	for (int id = 0; id < rows; id++)
		owner[id] = -2;
	if (hs->tc->flags & NAIVE) {
		for (int id = 0; id < hs->nv; id++)
			if ((int64_t)id * g->block_m < hs->ntpp)
				owner[id] = hs->expert[id];
	} else {
		for (int i = 0; i < hs->ntpp; i++)
			if (hs->sorted[i] < hs->nv)
				owner[hs->sorted[i]] = hs->expert[i / g->block_m];
	}
	for (int id = 0; id < rows; id++) {
		const uint16_t *c = hs->c + (size_t)id * g->c_stride_m;

		for (int64_t n = 0; n < g->c_stride_m; n++) {
			const double got = bf16_to_float(c[n]);

			if (owner[id] == -2 || n >= g->N) {
				if (c[n] != NAN_BF16)
					note(st, &st->poisoned, "written outside the routed rows", id, n, got, NAN, 0);
			} else if (owner[id] == -1) {
				st->checked++;
				st->exact += (c[n] & 0x7fff) == 0;
				if (c[n] & 0x7fff)
					note(st, &st->bad, "expert -1 (zero expected)", id, n, got, 0, 0);
			} else if (!sampled(hs, id)) {
				st->finite_only++;
				if (!isfinite(got))
					note(st, &st->bad, "finite expected", id, n, got, 0, 0);
			} else {
				check_value(hs, id, owner[id], (int)n, got, st);
			}
		}
	}
	free(owner);
}

/* ------------------------------------------------------------ schedule mode */

/*
 * Schedule mode (SGLang's inkling grouped GEMM, moe_gemm.h): routed rows
 * 0 .. rows - 1 grouped by expert (random experts; SCHED_EMPTY: experts 1,
 * 4, 7, ... get none), each expert's rows contiguous; token_offs the
 * exclusive sum of the counts, and the schedule as SGLang's
 * compute_expert_block_metadata builds it: expert e's blocks j = 0 ..
 * ceil(count / block_m) - 1 in expert order as e | j << 16, then -1 up to
 * ceil(rows / block_m) + E - 1 entries (its _get_max_num_blocks),
 * *num_blocks the blocks in use (SHORT: a third fewer, so that the rows of
 * the blocks past it must stay poisoned).  The
 * kernels launched as the shim launches them: grid (ceil(N / TN), entries x
 * block_m / TM), bf16, top_k 1, no routed weight, no bias.  The checks are
 * the aligned layout's above, on the sorted list and expert_ids these
 * blocks amount to (each block's rows padded to block_m), so every word no
 * block before *num_blocks names must still hold the poison.
 */
#define SCHED_EMPTY (1u << 9) /* schedule mode: experts e % 3 == 1 get no rows */

struct scase {
	int tm, rows, E, N, K, block_m;
	unsigned flags;  /* PAD, SHORT, SAMPLE, SCHED_EMPTY */
};

static const struct scase sched_cases[] = {
	/* tm, rows, experts, N, K, block_m, flags */
	{ 16, 1, 5, 200, 208, 16, 0 },                  /* one token, top_k 1 (decode) */
	{ 16, 8, 64, 456, 1024, 16, PAD },              /* one token, top_k 8: 56 experts empty */
	{ 16, 77, 9, 72, 48, 16, PAD | SCHED_EMPTY },
	{ 16, 300, 16, 384, 1024, 16, SHORT | SAMPLE },
	{ 16, 40, 9, 72, 16, 128, SCHED_EMPTY },        /* the 16-row tile under block_m 128 */
	{ 64, 333, 7, 200, 192, 128, PAD | SHORT },
	{ 128, 7, 3, 72, 1024, 128, 0 },
	{ 128, 300, 5, 456, 208, 128, PAD | SCHED_EMPTY },
	{ 128, 1000, 16, 200, 320, 128, SAMPLE },
};

/* The schedule mode's buffers, with the aligned layout check() reads in hs. */
struct sched {
	int32_t *schedule, *token_offs, *counts, num_blocks, entries;
};

/*
 * schedule - the routing of @sc into @s, and into @hs the sorted list,
 * expert_ids and num_tokens_post_padded of the same blocks (for check()).
 */
static void schedule(const struct scase *sc, struct host *hs, struct sched *s)
{
	const int bm = sc->block_m;
	int used = 0, pos = 0;

	s->entries = (sc->rows + bm - 1) / bm + sc->E - 1;
	s->schedule = malloc((size_t)s->entries * sizeof(int32_t));
	s->token_offs = calloc((size_t)sc->E + 1, sizeof(int32_t));
	s->counts = calloc((size_t)sc->E, sizeof(int32_t));
	for (int i = 0; i < sc->rows; i++) {
		int e;

		do
			e = irand(sc->E);
		while ((sc->flags & SCHED_EMPTY) && e % 3 == 1);
		s->counts[e]++;
	}
	for (int e = 0; e < sc->E; e++)
		s->token_offs[e + 1] = s->token_offs[e] + s->counts[e];
	for (int i = 0; i < s->entries; i++)
		s->schedule[i] = -1;
	for (int e = 0; e < sc->E; e++)
		for (int j = 0; j * bm < s->counts[e]; j++)
			s->schedule[used++] = e | j << 16;
	s->num_blocks = used;
	if ((sc->flags & SHORT) && used >= 2)
		s->num_blocks = used - (used / 3 > 1 ? used / 3 : 1);

	hs->g.EM = s->entries * bm;
	hs->nblk = s->entries;
	free(hs->sorted);
	free(hs->expert);
	hs->sorted = malloc((size_t)hs->g.EM * sizeof(int32_t));
	hs->expert = malloc((size_t)hs->nblk * sizeof(int32_t));
	for (int i = 0; i < hs->g.EM; i++)
		hs->sorted[i] = hs->nv;
	for (int f = 0; f < s->entries; f++)
		hs->expert[f] = -1;
	for (int f = 0; f < s->num_blocks; f++) {
		const int e = s->schedule[f] & 0xffff, j = s->schedule[f] >> 16;
		const int start = s->token_offs[e] + j * bm, end = s->token_offs[e + 1];

		for (int row = start; row < end && row < start + bm; row++)
			hs->sorted[pos + row - start] = row;
		hs->expert[f] = e;
		pos += bm;
	}
	hs->ntpp = pos;
}

/* launch_schedule - upload, poison the output, run the kernel once, download the output. */
static void launch_schedule(CUmodule mod, const struct kernel *kd, struct host *hs, const struct sched *s,
			    const struct scase *sc)
{
	struct moe_gemm_args a = hs->g;
	void *params[] = { &a };
	const int smem = moe_gemm_smem(MOE_BF16, sc->tm);
	CUdeviceptr d[7];
	CUfunction fn;

	d[0] = to_device(hs->a, hs->a_bytes);
	d[1] = to_device(hs->b, hs->b_bytes);
	CHECK(cuMemAlloc(&d[2], hs->c_elems * 2));
	CHECK(cuMemsetD16(d[2], NAN_BF16, hs->c_elems));
	d[3] = to_device(s->schedule, (size_t)s->entries * sizeof(int32_t));
	d[4] = to_device(s->token_offs, (size_t)(sc->E + 1) * sizeof(int32_t));
	d[5] = to_device(s->counts, (size_t)sc->E * sizeof(int32_t));
	d[6] = to_device(&s->num_blocks, sizeof(int32_t)); /* the shim passes &ExpertBlockOffs[E] */
	a.a = (const void *)d[0];
	a.b = (const void *)d[1];
	a.c = (void *)d[2];
	a.schedule = (const int32_t *)d[3];
	a.token_offs = (const int32_t *)d[4];
	a.tokens_per_expert = (const int32_t *)d[5];
	a.num_blocks = (const int32_t *)d[6];

	CHECK(cuModuleGetFunction(&fn, mod, kd->name));
	CHECK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
	CHECK(cuLaunchKernel(fn, (unsigned)((a.N + MOE_GEMM_TN(MOE_BF16, sc->tm) - 1) / MOE_GEMM_TN(MOE_BF16, sc->tm)),
			     (unsigned)(a.EM / sc->tm), 1, (unsigned)moe_gemm_threads(MOE_BF16, sc->tm), 1, 1,
			     (unsigned)smem, NULL, params, NULL));
	CHECK(cuCtxSynchronize());
	CHECK(cuMemcpyDtoH(hs->c, d[2], hs->c_elems * 2));
	for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++)
		if (d[i])
			CHECK(cuMemFree(d[i]));
}

static int run_schedule_case(CUmodule mod, int idx)
{
	const struct scase *sc = &sched_cases[idx];
	/* the aligned layout's fields that layout() and the fills read */
	const struct tcase tc = { MOE_BF16, sc->tm, sc->rows, 1, sc->E, sc->N, sc->K, sc->block_m, 0, 0,
				  sc->flags & (PAD | SAMPLE) };
	const struct kernel *kd = find_kernel(&tc);
	struct host hs;
	struct sched s;
	struct stats st;
	char what[256];

	gpu_test_rng = 0x2545f4914f6cdd1dull ^ (uint64_t)(idx + 1) * 0xd1b54a32d192ed03ull; /* per case */
	memset(&hs, 0, sizeof(hs));
	memset(&st, 0, sizeof(st));
	hs.tc = &tc;
	hs.quant = MOE_BF16;
	layout(&hs);
	alloc_host(&hs);
	schedule(sc, &hs, &s);
	fill_a(&hs);
	fill_w(&hs);
	launch_schedule(mod, kd, &hs, &s, sc);
	check(&hs, &st);

	snprintf(what, sizeof(what), "schedule case %d: %s, %d rows E %d N %d K %d block_m %d, %d of %d "
		 "blocks%s%s%s", idx, kd->name, sc->rows, sc->E, sc->N, sc->K, sc->block_m, s.num_blocks,
		 s.entries, (sc->flags & PAD) ? ", padded strides" : "",
		 (sc->flags & SCHED_EMPTY) ? ", empty experts" : "", (sc->flags & SAMPLE) ? ", sampled rows" : "");
	if (st.worst > 1)
		printf("not ok - %s (max err %.3g at row %d col %d, bound %.3g; %ld bad of %ld checked, "
		       "%ld words outside the scheduled rows written)\n",
		       what, st.err, st.row, st.col, st.bound, st.bad, st.checked + st.finite_only, st.poisoned);
	else if (st.bad || st.poisoned)
		printf("not ok - %s (first: %s; %ld bad of %ld checked, %ld words outside the scheduled rows "
		       "written)\n", what, st.first, st.bad, st.checked + st.finite_only, st.poisoned);
	else
		printf("ok - %s: %ld checked (%ld more only for finiteness), %ld correctly rounded, "
		       "worst error %.2f of the bound\n",
		       what, st.checked, st.finite_only, st.exact, st.worst);
	free(s.schedule);
	free(s.token_offs);
	free(s.counts);
	free_host(&hs);
	return st.bad || st.poisoned;
}

/* ------------------------------------------------------------ main */

static int run_case(CUmodule mod, int idx)
{
	const struct tcase *tc = &cases[idx];
	const struct kernel *kd = find_kernel(tc);
	struct host hs;
	struct stats st;
	char what[512];

	gpu_test_rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(idx + 1) * 0xd1b54a32d192ed03ull; /* per case */
	memset(&hs, 0, sizeof(hs));
	memset(&st, 0, sizeof(st));
	hs.tc = tc;
	hs.quant = kd->quant;
	layout(&hs);
	alloc_host(&hs);
	fill_inputs(&hs);
	launch(mod, kd, &hs);
	check(&hs, &st);

	describe(idx, what, sizeof(what));
	if (st.worst > 1)
		printf("not ok - %s (max err %.3g at row %d col %d, bound %.3g; %ld bad of %ld checked, "
		       "%ld words outside the routed rows written)\n",
		       what, st.err, st.row, st.col, st.bound, st.bad, st.checked + st.finite_only, st.poisoned);
	else if (st.bad || st.poisoned)
		printf("not ok - %s (first: %s; %ld bad of %ld checked, %ld words outside the routed rows written)\n",
		       what, st.first, st.bad, st.checked + st.finite_only, st.poisoned);
	else
		printf("ok - %s: %ld checked (%ld more only for finiteness), %ld correctly rounded, "
		       "worst error %.2f of the bound\n",
		       what, st.checked, st.finite_only, st.exact, st.worst);
	free_host(&hs);
	return st.bad || st.poisoned;
}

int main(int argc, char **argv)
{
	const char *only = getenv("MOE_GEMM_CASE");
	CUmodule mod;
	int fails = 0;

	mod = gpu_test_module(argc > 1 ? argv[1] : NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!only || (only[0] != 's' && atoi(only) == (int)i))
			fails += run_case(mod, (int)i);
	for (size_t i = 0; i < sizeof(sched_cases) / sizeof(sched_cases[0]); i++)
		if (!only || (only[0] == 's' && atoi(only + 1) == (int)i))
			fails += run_schedule_case(mod, (int)i);
	CHECK(cuModuleUnload(mod));
	return fails ? 1 : 0;
}

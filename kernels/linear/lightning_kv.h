/*
 * lightning_kv.h - the per-block key-value outer products of lightning
 * attention: the semantics of vLLM's and SGLang's Triton `_fwd_kv_parallel`
 * (lightning_attn.py, step 2 of lightning_attention), on a tile that fits
 * SM120's 101376 bytes of shared memory per block.
 *
 * For each (batch x head bh, block blk of `block` tokens) of k (bh, n, d)
 * and v (bh, n, e), with head hh = bh % heads, the last block holding
 * split = n - (num_block - 1) * block tokens (every other block: block):
 *
 *   w      = cdiv(split, cblock) * cblock        rows of the window
 *   shift  = w - split                           zero rows at its start
 *   row r  = 0 .. w-1: key blk * block - shift + r, zero (k and v) for r < shift
 *   kv[bh, blk] = sum_r (k_r^T * k_decay[hh * block + block - w + r]) v_r     (d x e)
 *
 * which is the framework's loop over min(cdiv(split, cblock), block / cblock)
 * sub-blocks of cblock keys, the window right-aligned on the block's last
 * key, the first sub-block masked below its left_shift and the decay taken
 * from sub-block NUM_CBLOCK - num_blocks on (lightning_attn.py:209-244 in
 * vLLM 0.33.0).  The zero rows are multiplied like the framework's masked
 * lanes (0 * decay * 0), so a non-finite decay there makes the same NaN.
 *
 * Precision: fp32 throughout, k * decay rounded to fp32 and one FFMA per
 * product.  The framework's tl.dot rounds its fp32 operands to TF32 (10
 * mantissa bits): these kernels are closer to exact than it, by TF32's
 * error.
 *
 * Plain C: the shim's adapter and the tests fill this struct and pass it by
 * value as the kernel's only parameter.  Every tensor is contiguous (the
 * framework's host calls .contiguous() and allocates kv itself).
 */
#ifndef SM120_KERNELS_LIGHTNING_KV_H
#define SM120_KERNELS_LIGHTNING_KV_H

#include <stdint.h>

#define LIGHTNING_KV_D128_E128_FP32 "lightning_kv_d128_e128_fp32"

/*
 * Launch (every kernel): block (LIGHTNING_KV_THREADS, 1, 1), grid
 * (batch * heads, num_block, 1), the dynamic shared memory below.  A block
 * computes kv[bh, blk] (blockIdx.x = bh, blockIdx.y = blk): 256 threads of
 * 8 x 8 outputs each; keys and values stream through shared memory in
 * LIGHTNING_KV_CHUNK-row chunks, two in flight.
 */
#define LIGHTNING_KV_THREADS 256
#define LIGHTNING_KV_CHUNK 32  /* rows per chunk; cblock must be a multiple */
#define LIGHTNING_KV_SMEM_D128_E128 65792 /* 2 x (32 x 128 k + 32 x 128 v + 32 decay) fp32 */

/*
 * The variant table: X(name, d, e, smem) for every kernel, with its
 * (unquoted) name, head sizes and dynamic shared memory.  lightning_kv.cu
 * defines the kernels from it; C code can build tables from it, the name as
 * #name.
 */
#define LIGHTNING_KV_KERNELS(X) \
	X(lightning_kv_d128_e128_fp32, 128, 128, LIGHTNING_KV_SMEM_D128_E128)

/*
 * Contracts, checked by the kernel; a violation makes the block write NaN to
 * its kv tile instead of plausible numbers:
 *  - d, e equal the kernel's head sizes; heads >= 1; n >= 1;
 *    num_block == cdiv(n, block); cblock a multiple of LIGHTNING_KV_CHUNK,
 *    block a multiple of cblock;
 *  - k, v, k_decay and kv 16-byte aligned.
 * Not checkable, the caller's duty: grid (batch * heads, num_block); k, v
 * hold grid.x * n rows, k_decay heads * block values, kv grid.x * num_block
 * tiles.  kv must not overlap an input.
 */
struct lightning_kv_args {
	const float *k;             /* (batch * heads, n, d) fp32 */
	const float *v;             /* (batch * heads, n, e) fp32 */
	const float *k_decay;       /* (heads, block) fp32: exp(-s_h * (block - 1 - i)) on the host */
	float *kv;                  /* (batch * heads, num_block, d, e) fp32 */
	int64_t n;                  /* tokens per sequence */
	int32_t heads;              /* h: the decay row of bh is bh % heads */
	int32_t num_block;          /* cdiv(n, block) */
	int32_t block;              /* BLOCK: tokens per kv tile (256) */
	int32_t cblock;             /* CBLOCK: the sub-block that aligns the last block (64) */
	int32_t d, e;               /* head sizes, must match the kernel */
};

#endif

/*
 * moe_gemm.cu - the bundled moe_gemm_* kernels: one extern "C" instance of
 * moe_gemm.cuh's template per row of moe_gemm.h's MOE_GEMM_KERNELS table
 * (quant, rows tile, name), and of moe_decode.cuh's per row of its
 * MOE_DECODE_KERNELS and MOE_DECODE_STAGED_KERNELS tables (quant, columns tile, rows a pass,
 * the staged ones' staging, name), each declaring its dynamic shared memory.
 */
#include "../common.cuh"
#include "moe_decode.cuh"
#include "moe_gemm.cuh"
#include "moe_gemm.h"

/* Blocks per SM the registers must allow: the four-warp tiles (MOE_GEMM_WARPS) four, 128
 * registers, as SM120 holds two or three of them; of the eight-warp ones, FP8 at TM 32 fits in
 * 128 registers, so that Hopper (228 KiB of shared memory per SM) runs two of them per SM
 * (SM120 too, on its two stages), and so do the MOE_GEMM_SHALLOW kernels, whose shallow
 * pipeline SM120's 100 KiB hold twice, and the MOE_GEMM_PAIRED ones; SM120 holds one block of
 * the others. */
#define MOE_GEMM_MIN_BLOCKS(quant, tm)                                                               \
	(MOE_GEMM_WARPS(quant, tm) == 4                                                    ? 4 : \
	 ((tm) <= 32 && !MOE_GEMM_PACKED(quant)) || MOE_GEMM_SHALLOW(quant, tm) || MOE_GEMM_PAIRED(quant, tm) ? 2 : 1)

/* the kernel's own pipeline, its shallow one or its 64-byte form (moe_gemm::entry) */
#define MOE_GEMM_DEFINE(quant, tm, name)                                                     \
	SM120_DYNAMIC_SMEM(name, moe_gemm_smem(quant, tm));                                  \
	extern "C" __global__ void __launch_bounds__(MOE_GEMM_WARPS(quant, tm) * 32, MOE_GEMM_MIN_BLOCKS(quant, tm)) \
		name(const struct moe_gemm_args a)                                           \
	{                                                                                    \
		extern __shared__ __align__(1024) unsigned char moe_gemm_smem_[];            \
		__shared__ moe_gemm::rows<tm> rows_;                                         \
		moe_gemm::entry<quant, tm>(a, moe_gemm_smem_, rows_);                        \
	}

MOE_GEMM_KERNELS(MOE_GEMM_DEFINE)

/* The decode kernels: static shared memory only; MOE_DECODE_SM_BLOCKS (two) blocks per SM on
 * SM120 and Hopper alike (their registers: 128 each), so that one block's k-step loads overlap
 * the other's.  The staged and streamed ones (a pass's A rows in shared memory) likewise. */
#define MOE_DECODE_DEFINE_AS(quant, tn, rows, name, staged)                                  \
	SM120_DYNAMIC_SMEM(name, 0);                                                         \
	extern "C" __global__ void __launch_bounds__(MOE_GEMM_THREADS, MOE_DECODE_SM_BLOCKS) \
		name(const struct moe_gemm_args a)                                           \
	{                                                                                    \
		__shared__ moe_decode::smem<quant, tn, (rows) / 8, staged> moe_decode_smem_; \
		moe_decode::decode<quant, tn, (rows) / 8, staged>(a, moe_decode_smem_);      \
	}
#define MOE_DECODE_DEFINE(quant, tn, rows, name) MOE_DECODE_DEFINE_AS(quant, tn, rows, name, moe_decode::UNSTAGED)
#define MOE_DECODE_DEFINE_STAGED(quant, tn, rows, staging, name) MOE_DECODE_DEFINE_AS(quant, tn, rows, name, staging)

MOE_DECODE_KERNELS(MOE_DECODE_DEFINE)
MOE_DECODE_STAGED_KERNELS(MOE_DECODE_DEFINE_STAGED)

/*
 * primitives.cuh - the instructions the bundled kernels are built from, one
 * wrapper each: shared-memory addressing, cp.async, ldmatrix, mma.sync (bf16
 * and FP8 E4M3) and conversions.  All exist on sm_90 and sm_120 (common.cuh).
 */
#ifndef SM120_KERNELS_PRIMITIVES_CUH
#define SM120_KERNELS_PRIMITIVES_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace sm120k {

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

/* Byte offset of 16-byte chunk @chunk of row @row in a tile of @rchunks chunks
 * per row (a multiple of 8), XOR-swizzled so ldmatrix reads are conflict-free. */
__device__ __forceinline__ uint32_t swz(int row, int chunk, int rchunks)
{
	return (uint32_t)((row * rchunks + (chunk ^ (row & 7))) << 4);
}

/* 16 bytes global -> shared; src_bytes 0 writes zeros (src is not read). */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
		     : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Wait until at most N committed groups are still in flight. */
template <int N>
__device__ __forceinline__ void cp_async_wait()
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(uint32_t r[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr));
}

/* c += a * b for one 16x8x16 tile, bf16 inputs, fp32 accumulators. */
__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* c += a * b for one 16x8x32 tile, FP8 E4M3 inputs, fp32 accumulators (the
 * same register layout as mma_bf16 with four bytes where it has two halves). */
__device__ __forceinline__ void mma_e4m3(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two floats -> bf16x2 (round to nearest even), lo in the low half. */
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
	__nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);

	return *(uint32_t *)&v;
}

__device__ __forceinline__ float bf16_bits_to_float(uint32_t b16)
{
	return __uint_as_float(b16 << 16);
}

/* One FP8 E4M3 byte -> float, exact. */
__device__ __forceinline__ float e4m3_to_float(uint32_t byte)
{
	uint32_t h2;
	unsigned short in = (unsigned short)(byte & 0xff);

	asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"(in));
	return __half2float(__ushort_as_half((unsigned short)(h2 & 0xffff)));
}

/* One E2M1 code (bit 3 sign, bits 2..0 magnitude: 0, .5, 1, 1.5, 2, 3, 4, 6) -> float, exact. */
__device__ __forceinline__ float e2m1_to_float(uint32_t code)
{
	uint32_t m = code & 7;
	uint32_t bits = m >= 2 ? ((((m >> 1) + 126) << 23) | ((m & 1) << 22)) : (m ? 0x3f000000u : 0u);

	return __uint_as_float(bits | ((code & 8) << 28));
}

} /* namespace sm120k */

#endif

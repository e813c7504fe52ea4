/*
 * primitives.cuh - the instructions the bundled kernels are built from, one
 * wrapper each, shared by every kernel under kernels/ (and the engine's
 * stand-ins, through moe_gemm.cuh): shared-memory addressing, cp.async,
 * shared loads and stores, ldmatrix, movmatrix, mma.sync (bf16, f16 and FP8
 * E4M3), named barriers and conversions.  Every one exists on sm_90 and
 * sm_120 (common.cuh states the rule).
 *
 * Conventions, so that a wrapper reads the same in every kernel:
 *   - arguments follow the PTX operand order: destination first (the
 *     registers a load fills, the shared address a store or copy writes),
 *     then the sources;
 *   - shared addresses are 32-bit shared-window addresses (smem_u32);
 *   - an immediate byte offset, where a wrapper takes one, is the template
 *     argument OFF, added in the instruction's address ([addr+OFF]) so that
 *     unrolled loops keep one base register;
 *   - every asm that reads or writes memory (cp.async and its commit / wait,
 *     ld/st.shared, ldmatrix, barriers) is volatile with a "memory" clobber,
 *     so the compiler neither caches shared memory in registers across it
 *     nor moves plain loads and stores over it.  prefetch is only a hint and
 *     the arithmetic wrappers touch no memory: they have no clobber.  ldg16's
 *     hinted form and ld_relaxed read global memory that no thread writes
 *     during the kernel (weights, the routing lists): volatile, as timed or
 *     placed, without a clobber, so that they do not order the shared-memory
 *     traffic around them.
 */
#ifndef SM120_KERNELS_PRIMITIVES_CUH
#define SM120_KERNELS_PRIMITIVES_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace sm120k {

/* ------------------------------------------------------------ compile time */

/* An integer as a type: loops instantiated per value (template arguments). */
template <int N>
struct constant {
	static constexpr int value = N;
};

template <int I, int N, class F>
__device__ __forceinline__ void unroll_for_(F &&f)
{
	if constexpr (I < N) {
		f(constant<I>());
		unroll_for_<I + 1, N>(f);
	}
}

/* unroll_for - f(constant<0>()), ..., f(constant<N - 1>()): fully unrolled,
 * with each index usable as a template argument (decltype(i)::value). */
template <int N, class F>
__device__ __forceinline__ void unroll_for(F &&f)
{
	unroll_for_<0, N>(f);
}

/* ------------------------------------------------------------ addressing */

/* The shared-window address of a pointer into shared memory. */
__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

/* Byte offset of 16-byte chunk @chunk of row @row in a tile of @rchunks chunks
 * per row (a multiple of 8, or 4), XOR-swizzled so ldmatrix reads of 8 rows at one
 * chunk are conflict-free: the chunk XOR row % 8, or, on 4-chunk (64-byte) rows, two
 * of which share a 128-byte line of banks, XOR (row / 2) % 4.  The offset XOR 16 c
 * is chunk @chunk XOR c of the same row, for c below @rchunks (ldmatrix k steps). */
__device__ __forceinline__ uint32_t swz(int row, int chunk, int rchunks)
{
	const int x = rchunks == 4 ? (row >> 1) & 3 : row & 7;

	return (uint32_t)((row * rchunks + (chunk ^ x)) << 4);
}

/* ------------------------------------------------------------ global -> shared */

/* 16 bytes from [src + OFF] to shared [dst + OFF]; src_bytes 16 copies,
 * 0 writes 16 zero bytes and reads nothing (src need not be valid).  PF 256
 * adds the L2::256B prefetch-size hint (L2 fills the aligned 256 bytes
 * around the chunk from memory; a hint: the bytes copied are the same), 0
 * none. */
template <int OFF = 0, int PF = 0>
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes)
{
	static_assert(PF == 0 || PF == 256, "a prefetch size this file issues");
	if constexpr (PF == 256)
		asm volatile("cp.async.cg.shared.global.L2::256B [%0+%3], [%1+%3], 16, %2;\n" ::"r"(dst), "l"(src),
			     "r"(src_bytes), "n"(OFF)
			     : "memory");
	else
		asm volatile("cp.async.cg.shared.global [%0+%3], [%1+%3], 16, %2;\n" ::"r"(dst), "l"(src),
			     "r"(src_bytes), "n"(OFF)
			     : "memory");
}

/* 4 bytes from [src] to shared [dst], through L1; src_bytes 4 copies, 0 writes
 * 4 zero bytes and reads nothing (src need not be valid). */
__device__ __forceinline__ void cp_async4(uint32_t dst, const void *src, int src_bytes)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
		     : "memory");
}

/* Close the group of this thread's cp.async issued since the last commit. */
__device__ __forceinline__ void cp_async_commit()
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Wait until at most N of this thread's committed groups are still in flight
 * (their bytes are then visible to this thread; a barrier shares them). */
template <int N>
__device__ __forceinline__ void cp_async_wait()
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* 16 bytes of read-only global memory through the non-coherent path; PF as
 * for cp_async16. */
template <int PF = 0>
__device__ __forceinline__ uint4 ldg16(const void *p)
{
	uint4 v;

	static_assert(PF == 0 || PF == 256, "a prefetch size this file issues");
	if constexpr (PF == 256)
		asm volatile("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
			     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
			     : "l"(p));
	else
		v = __ldg((const uint4 *)p);
	return v;
}

/* The int at p, read where the source has it: a relaxed GPU-scope load,
 * which the compiler keeps in place and in order with the others, where it
 * moved a plain or non-coherent one below a later branch, after the wait on
 * another load (a block's first reads, which should be in flight together).
 * It is served by L2, not L1: for words that many blocks of an SM read, as the
 * row tiles' routed ids, __ldg measured faster (H200, those tiles' first reads
 * so ordered ran 0.91 to 1.03 times as fast, 0.99 on average).  For global
 * memory no thread writes during the kernel. */
__device__ __forceinline__ int ld_relaxed(const int *p)
{
	int v;

	asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p));
	return v;
}

/* Hint: bring the line holding p into L1 (no register, no fault, may be dropped). */
__device__ __forceinline__ void prefetch_l1(const void *p)
{
	asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p));
}

/* Hint: bring the line holding p into L2 (no register, no fault, may be dropped). */
__device__ __forceinline__ void prefetch_l2(const void *p)
{
	asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

/* ------------------------------------------------------------ shared memory */

/* r = the two words at shared [addr + OFF] (8-byte aligned). */
template <int OFF = 0>
__device__ __forceinline__ void lds64(uint32_t r[2], uint32_t addr)
{
	asm volatile("ld.shared.v2.b32 {%0, %1}, [%2+%3];\n"
		     : "=r"(r[0]), "=r"(r[1])
		     : "r"(addr), "n"(OFF)
		     : "memory");
}

/* The 16 bytes at shared [addr] (16-byte aligned). */
__device__ __forceinline__ uint4 lds128(uint32_t addr)
{
	uint4 r;

	asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
		     : "r"(addr)
		     : "memory");
	return r;
}

/* shared [addr] = x, y as two fp32 words (8-byte aligned). */
__device__ __forceinline__ void sts64(uint32_t addr, float x, float y)
{
	asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(x), "f"(y) : "memory");
}

/* shared [addr] = v (4-byte aligned). */
__device__ __forceinline__ void sts32(uint32_t addr, uint32_t v)
{
	asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

/* Four 8x8 b16 matrices from shared memory: lanes 8i .. 8i+7 give the row
 * addresses (+ OFF) of matrix i, which lands in r[i]. */
template <int OFF = 0>
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4+%5];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr), "n"(OFF)
		     : "memory");
}

/* ldsm_x4, each matrix transposed. */
template <int OFF = 0>
__device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4+%5];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr), "n"(OFF)
		     : "memory");
}

/* ------------------------------------------------------------ synchronization */

/*
 * Named barrier ID for THREADS threads (a multiple of 32).  The non-.aligned
 * form: groups of warps may reach one barrier through different instructions,
 * which bar.sync (= barrier.sync.aligned) does not allow.  ID 0 is
 * __syncthreads'.
 */
template <int ID, int THREADS>
__device__ __forceinline__ void barrier_sync()
{
	static_assert(ID > 0 && ID < 16 && THREADS % 32 == 0, "named barrier");
	asm volatile("barrier.sync %0, %1;\n" ::"n"(ID), "n"(THREADS) : "memory");
}

/* ------------------------------------------------------------ tensor cores */

/* c += a (16x16, row) * b (16x8, col) for one m16n8k16 tile, bf16 inputs, fp32 accumulators. */
__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* mma_bf16 with f16 inputs. */
__device__ __forceinline__ void mma_f16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Four E4M3 bytes -> two f16x2: bytes 0,1 -> lo, bytes 2,3 -> hi (the lower
 * byte in the lower half), exact. */
__device__ __forceinline__ void e4m3x4_to_f16x2(uint32_t x, uint32_t &lo, uint32_t &hi)
{
	asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\tcvt.rn.f16x2.e4m3x2 %0, l;\n\t"
	    "cvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
	    : "=r"(lo), "=r"(hi)
	    : "r"(x));
}

/*
 * c += a * b for one 16x8x32 tile, FP8 E4M3 inputs, fp32 accumulators (the
 * same register layout as mma_bf16 with four bytes where it has two halves).
 *
 * sm_90 has no e4m3 mma.sync; ptxas emulates it with two f16 MMAs from zero
 * and four FADDs into c per call, which makes the FP8 tiles issue-bound
 * there (about 45 instructions per FP8 MMA) where SM120's is one native
 * instruction.  So on sm_90 each byte quad is converted exactly to f16
 * (e4m3 -> f16 is exact) and two m16n8k16 f16 MMAs accumulate into c
 * directly: the first takes bytes 0,1 of every A and B register (k 4q, 4q+1
 * of lane quad q's k 4q..4q+3) at f16 k 2q, 2q+1 and bytes 2,3 at 8+2q, 9+2q;
 * A and B are permuted alike, so each MMA sums over the same products as the
 * e4m3 MMA's first and second 16 k.  Products of two e4m3 values are exact
 * in fp32; only the order of the fp32 additions differs.  sm_120 compiles
 * the native instruction.
 *
 * MOE_FP8_MMA_PROXY (the benchmarks' timing build, tests/tests.mk's
 * fp8_mma_proxy.fatbin, never bundled): on sm_90, one f16 MMA on the raw
 * bytes instead, as many MMA instructions as SM120 issues and none of the
 * conversions.  Its sums are wrong; only its time is read.
 */
__device__ __forceinline__ void mma_e4m3(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(MOE_FP8_MMA_PROXY)
	mma_f16(c, a, b0, b1);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
	uint32_t lo[4], hi[4], b[4];

	e4m3x4_to_f16x2(a[0], lo[0], lo[2]);
	e4m3x4_to_f16x2(a[1], lo[1], lo[3]);
	e4m3x4_to_f16x2(a[2], hi[0], hi[2]);
	e4m3x4_to_f16x2(a[3], hi[1], hi[3]);
	e4m3x4_to_f16x2(b0, b[0], b[1]);
	e4m3x4_to_f16x2(b1, b[2], b[3]);
	mma_f16(c, lo, b[0], b[1]);
	mma_f16(c, hi, b[2], b[3]);
#else
	asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

/* An 8x8 b16 matrix, one row per lane quad, transposed across the warp. */
__device__ __forceinline__ uint32_t movtrans(uint32_t a)
{
	uint32_t d;

	asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
	return d;
}

/* ------------------------------------------------------------ conversions */

/* Two floats -> bf16x2 (round to nearest even), lo in the low half (the lower
 * column of a fragment); the instruction __floats2bfloat162_rn emits. */
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
	uint32_t r;

	asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}

/*
 * The 4-bit codes u at bits 0-3 and 16-19 of @x -> the bf16x2 weights
 * (u - 8) * @sc of W4A16 (moe_gemm.h's rounding), without an integer-to-float
 * conversion: (x & 0x000f000f) | 0x43004300 is the bf16 pair 128 + u, minus
 * 136 the exact u - 8, times the scale one bf16 rounding, the same bits as
 * rounding the fp32 product.  The mask and the OR are one LOP3, one constant
 * held in a register (ptxas gives the C expression's two constants an
 * instruction each: LOP3 takes one immediate).
 */
__device__ __forceinline__ uint32_t w4_pair(uint32_t x, __nv_bfloat162 sc)
{
	const uint32_t off = 0x43084308u;
	uint32_t q;

	asm("lop3.b32 %0, %1, %2, %3, 0xea;\n" : "=r"(q) : "r"(x), "n"(0x000f000fu), "n"(0x43004300u));
	const __nv_bfloat162 v = __hmul2(__hsub2(*(const __nv_bfloat162 *)&q, *(const __nv_bfloat162 *)&off), sc);

	return *(const uint32_t *)&v;
}

/* Two floats -> f16x2 (round to nearest even), lo in the low half. */
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi)
{
	uint32_t r;

	asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}

/* The float of a bf16 held in the low 16 bits of @b16 (higher bits must be 0). */
__device__ __forceinline__ float bf16_bits_to_float(uint32_t b16)
{
	return __uint_as_float(b16 << 16);
}

/* 2^x; -inf -> 0, results below 2^-126 flush to 0 (p that small is 0 at bf16/fp16 anyway). */
__device__ __forceinline__ float ex2(float x)
{
	float r;

	asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
	return r;
}

/*
 * The E4M3 conversions.  The format is OCP/NVIDIA E4M3 "fn": bias 7, no
 * infinities, S.1111.111 (0x7f, 0xff) NaN, S.1111.110 = +-448, exponent 0
 * subnormal (m * 2^-9); every such value is an f16 normal (or zero), so
 * e4m3 -> f16 (cvt.rn.f16x2.e4m3x2) -> f32 is exact and NaN stays NaN.
 */

/* One E4M3 byte (the low 8 bits of @byte) -> float, exact. */
__device__ __forceinline__ float e4m3_to_float(uint32_t byte)
{
	uint32_t h2;
	unsigned short in = (unsigned short)(byte & 0xff);

	asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"(in));
	return __half2float(__ushort_as_half((unsigned short)(h2 & 0xffff)));
}

/* Two E4M3 bytes (the low 16 bits of @v, low byte first) -> bf16x2, exact. */
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint32_t v)
{
	uint32_t h2;
	unsigned short in = (unsigned short)v;

	asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"(in));
	__half2 h = *(__half2 *)&h2;
	return pack_bf16(__low2float(h), __high2float(h));
}

/*
 * Four E4M3 bytes (x0, x1, x2, x3), a 2x2 block [row 0: x0 x1; row 1: x2 x3]
 * -> its two columns as bf16x2: c0 = (x0, x2), c1 = (x1, x3), exact (the f32
 * of an e4m3 value has 16 zero low bits: its top half is the exact bf16).
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

/* One E2M1 code (bit 3 sign, bits 2..0 magnitude: 0, .5, 1, 1.5, 2, 3, 4, 6) -> float, exact. */
__device__ __forceinline__ float e2m1_to_float(uint32_t code)
{
	uint32_t m = code & 7;
	uint32_t bits = m >= 2 ? ((((m >> 1) + 126) << 23) | ((m & 1) << 22)) : (m ? 0x3f000000u : 0u);

	return __uint_as_float(bits | ((code & 8) << 28));
}

} /* namespace sm120k */

#endif

/*
 * bench_peaks.cu - the hardware ceilings the benchmarks are measured against,
 * with the instructions SM120 has:
 *   mma_peak  back-to-back mma.sync m16n8k16 bf16 -> fp32 from registers
 *             (8 independent accumulators per warp), no memory traffic;
 *   mma_peak_fp8  the same with m16n8k32 FP8 E4M3 (the w8a8 MoE kernels;
 *             on sm_90, which has no FP8 mma.sync, the rate of ptxas's
 *             emulation);
 *   read_bw   a streaming read of a large buffer in 16-byte loads;
 *   stream_rw a streaming read of one buffer and write of another in one
 *             grid-stride loop, 16-byte accesses: the traffic of one fused-MoE
 *             GEMM (its weights and activations read once, its output written
 *             once) with nothing else, the "limit" of tests/gpu/bench_moe.py.
 * Built into a cubin by tests/tests.mk; tests/gpu/bench_peaks.c launches the
 * first three, tests/gpu/bench_moe_decode.c read_bw, tests/gpu/bench_moe.py
 * stream_rw.
 */
#include <cstdint>

/* FP8: m16n8k32 e4m3 (one = 1.0 in every input byte lane), else m16n8k16 bf16. */
template <bool FP8>
__device__ __forceinline__ void peak(float *out, int iters)
{
	const uint32_t one = FP8 ? 0x38383838u : 0x3f803f80u;
	uint32_t a[4] = { one ^ threadIdx.x, one, one, one };
	const uint32_t b0 = one, b1 = one ^ blockIdx.x;
	float c[8][4] = {};

	/* A changes every iteration and B with j: no two MMAs multiply the same operands,
	 * so a compiler that emulates an MMA (sm_90 has no FP8 mma.sync: ptxas converts
	 * the operands and runs f16 MMAs) cannot compute a product once and add it in
	 * the loop; one integer op per operand register and iteration besides */
	for (int i = 0; i < iters; i++) {
#pragma unroll
		for (int r = 0; r < 4; r++)
			a[r] ^= 0x01010101u;
#pragma unroll
		for (int j = 0; j < 8; j++) {
			const uint32_t bj = b1 ^ (uint32_t)(j << 8);

			if (FP8)
				asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
					     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
					     : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
					     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(bj));
			else
				asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
					     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
					     : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
					     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(bj));
		}
	}
	float s = 0.f;
#pragma unroll
	for (int j = 0; j < 8; j++)
		s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
	if (s == 1.2345f)
		out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

extern "C" __global__ void __launch_bounds__(256) mma_peak(float *out, int iters)
{
	peak<false>(out, iters);
}

extern "C" __global__ void __launch_bounds__(256) mma_peak_fp8(float *out, int iters)
{
	peak<true>(out, iters);
}

extern "C" __global__ void __launch_bounds__(256) read_bw(const uint4 *in, size_t n, uint32_t *out)
{
	uint32_t acc = 0;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		uint4 v = __ldcs(in + i);

		acc ^= v.x ^ v.y ^ v.z ^ v.w;
	}
	if (acc == 0x12345678u)
		out[0] = acc;
}

/*
 * stream_rw - reads in[0, n) and writes out[0, m) once each (16-byte elements,
 * streaming cache hints), one grid-stride loop over max(n, m); each store is
 * the XOR of the words this thread has read so far and the index, and a
 * check on the final XOR (never true in practice) writes out[0], so no load
 * can be removed.  Any grid of 256-thread blocks.
 */
extern "C" __global__ void __launch_bounds__(256) stream_rw(const uint4 *in, size_t n, uint4 *out, size_t m)
{
	const size_t end = n > m ? n : m;
	uint32_t acc = 0;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < end;
	     i += (size_t)gridDim.x * blockDim.x) {
		if (i < n) {
			uint4 v = __ldcs(in + i);

			acc ^= v.x ^ v.y ^ v.z ^ v.w;
		}
		if (i < m)
			__stcs(out + i, make_uint4(acc, acc ^ (uint32_t)i, acc, acc));
	}
	if (acc == 0x12345678u && m)
		out[0] = make_uint4(acc, acc, acc, acc);
}

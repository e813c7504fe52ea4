/*
 * common.cuh - rules every bundled kernel follows.
 *
 * Each kernel is compiled from one source for sm_90 and sm_120.  Only
 * instructions both have are allowed (mma.sync, ldmatrix, cp.async; no wgmma,
 * tcgen05, TMA multicast or clusters): plain sm_90 (not sm_90a) and sm_120
 * targets make ptxas reject anything else, so every build checks it.  The
 * instructions are used through the one wrapper each in primitives.cuh.
 *
 * Every kernel declares the dynamic shared memory it is launched with (0 if
 * none), next to the kernel, with SM120_DYNAMIC_SMEM(kernel, bytes).  The
 * value lands in the cubin as the u32 symbol sm120_dynamic_smem__<kernel>;
 * the image reader reports it, and `make test` checks that static + dynamic
 * fits 101376 bytes on sm_120 (sm120 scan --target sm120).
 */
#ifndef SM120_KERNELS_COMMON_CUH
#define SM120_KERNELS_COMMON_CUH

#define SM120_DYNAMIC_SMEM(kernel, bytes) \
	extern "C" __device__ const unsigned int sm120_dynamic_smem__##kernel = (bytes)

#endif

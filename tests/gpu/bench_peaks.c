/*
 * bench_peaks.c - measured ceilings for `make bench-gpu`: the mma.sync bf16
 * and FP8 rates (TFLOP/s) and the streaming read bandwidth (GB/s) of device 0, with
 * the kernels of bench_peaks.cu (cubin path in argv[1]).  Prints
 * "mma_sync_bf16_tflops <x>", "mma_sync_fp8_tflops <x>" and "read_gbps <y>", best of 5.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu_test.h"

/* best_ms - the fastest of 5 timed launches of @f (after one warm-up). */
static float best_ms(CUfunction f, unsigned int grid, void **params)
{
	CUevent a, b;
	float best = 1e30f, ms;
	int i;

	CHECK(cuEventCreate(&a, 0));
	CHECK(cuEventCreate(&b, 0));
	for (i = 0; i < 6; i++) {
		CHECK(cuEventRecord(a, NULL));
		CHECK(cuLaunchKernel(f, grid, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
		CHECK(cuEventRecord(b, NULL));
		CHECK(cuEventSynchronize(b));
		CHECK(cuEventElapsedTime(&ms, a, b));
		if (i > 0 && ms < best)
			best = ms;
	}
	return best;
}

int main(int argc, char **argv)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction mma, mma8, rd;
	CUdeviceptr out, buf;
	int sms, iters = 4096;
	size_t n = (size_t)4 << 30;                 /* 4 GiB read */
	size_t n16 = n / 16;
	unsigned int grid;
	void *mma_params[] = { &out, &iters };
	void *rd_params[] = { &buf, &n16, &out };
	float ms;

	if (argc < 2) {
		fprintf(stderr, "usage: %s bench_peaks.cubin\n", argv[0]);
		return 2;
	}
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	CHECK(cuModuleLoad(&mod, argv[1]));
	CHECK(cuModuleGetFunction(&mma, mod, "mma_peak"));
	CHECK(cuModuleGetFunction(&mma8, mod, "mma_peak_fp8"));
	CHECK(cuModuleGetFunction(&rd, mod, "read_bw"));
	grid = (unsigned int)sms * 8;
	CHECK(cuMemAlloc(&out, (size_t)grid * 256 * 4));
	CHECK(cuMemAlloc(&buf, n));
	CHECK(cuMemsetD8(buf, 1, n));
	ms = best_ms(mma, grid, mma_params);
	printf("mma_sync_bf16_tflops %.1f\n",
	       (double)grid * 8 /* warps */ * iters * 8 * 4096.0 / (ms * 1e-3) / 1e12);
	ms = best_ms(mma8, grid, mma_params);
	printf("mma_sync_fp8_tflops %.1f\n",
	       (double)grid * 8 /* warps */ * iters * 8 * 8192.0 / (ms * 1e-3) / 1e12);
	ms = best_ms(rd, (unsigned int)sms * 16, rd_params);
	printf("read_gbps %.0f\n", (double)n / (ms * 1e-3) / 1e9);
	return 0;
}

/*
 * bench_launch.c - launches per second of an empty kernel through
 * cuLaunchKernel and cuLaunchKernelEx (the shim's hot path).  Prints
 * "<api> <launches/s>"; tests/gpu/bench.sh runs it with no shim and with the
 * shim in each mode, interleaved, and prints the ratios.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	".visible .entry empty(.param .u64 p) { ret; }\n";

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200000, i, rep;
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;
	CUstream s;
	CUdeviceptr p = 0;
	void *params[] = { &p };
	CUlaunchConfig cfg = { 1, 1, 1, 32, 1, 1, 0, NULL, NULL, 0 };
	double best_k = 0, best_ex = 0;

	if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
	    cuCtxSetCurrent(ctx) || cuModuleLoadData(&mod, ptx) ||
	    cuModuleGetFunction(&f, mod, "empty") || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) {
		fprintf(stderr, "setup failed\n");
		return 1;
	}
	cfg.hStream = s;
	for (rep = 0; rep < 5; rep++) {
		double t0 = now(), t1;

		for (i = 0; i < n; i++)
			if (cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL))
				return 1;
		cuStreamSynchronize(s);
		t1 = now();
		if (n / (t1 - t0) > best_k)
			best_k = n / (t1 - t0);
		t0 = now();
		for (i = 0; i < n; i++)
			if (cuLaunchKernelEx(&cfg, f, params, NULL))
				return 1;
		cuStreamSynchronize(s);
		t1 = now();
		if (n / (t1 - t0) > best_ex)
			best_ex = n / (t1 - t0);
	}
	printf("cuLaunchKernel %.0f\ncuLaunchKernelEx %.0f\n", best_k, best_ex);
	return 0;
}

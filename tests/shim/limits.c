/*
 * limits.c - what a process sees of shared-memory limits through the shim,
 * against the fake driver (an H200: 232448 B opt-in).  Prints one line per
 * question; tests/scripts/test_modes.sh checks them per mode and target.
 */
#include <cuda.h>
#include <stdio.h>

int main(void)
{
	static const char image[64] = "\x7f" "ELF";
	CUmodule mod;
	CUfunction f;
	CUlaunchConfig cfg = { .gridDimX = 3, .gridDimY = 8, .gridDimZ = 1, .blockDimX = 256,
			       .blockDimY = 1, .blockDimZ = 1 };
	int v = -1;

	cuInit(0);
	cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0);
	printf("optin %d\n", v);
	cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 0);
	printf("per_sm %d\n", v);
	cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
	printf("other %d\n", v);
	cuModuleLoadData(&mod, image);
	cuModuleGetFunction(&f, mod, "_fwd_kernel");
	printf("set 232448 -> %d\n", cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 232448));
	printf("set 101376 -> %d\n", cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 101376));
	printf("launch 106496 -> %d\n", cuLaunchKernel(f, 3, 8, 1, 256, 1, 1, 106496, NULL, NULL, NULL));
	printf("launch 101376 -> %d\n", cuLaunchKernel(f, 3, 8, 1, 256, 1, 1, 101376, NULL, NULL, NULL));
	cfg.sharedMemBytes = 106496;
	printf("launchex 106496 -> %d\n", cuLaunchKernelEx(&cfg, f, NULL, NULL));
	cfg.sharedMemBytes = 4096;
	printf("launchex 4096 -> %d\n", cuLaunchKernelEx(&cfg, f, NULL, NULL));
	return 0;
}

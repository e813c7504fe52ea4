/*
 * limits.c - what a process sees of shared-memory limits through the shim,
 * against the fake driver (an H200: 232448 B opt-in).  Prints one line per
 * question; tests/scripts/test_modes.sh checks them per mode and target.
 * The module loaded is a real cubin (the fixture triton_like.cubin, in
 * $SM120_FIXTURES), read into memory the way Triton hands it to the driver.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

/* read_fixture - the cubin's bytes (malloc'd), or exit 2 naming the file. */
static void *read_fixture(const char *name)
{
	const char *dir = getenv("SM120_FIXTURES");
	char path[4096];
	FILE *f;
	void *buf = malloc(1 << 20);

	snprintf(path, sizeof(path), "%s/%s", dir ? dir : "build/test/fixtures", name);
	f = fopen(path, "rb");
	if (!f || !buf || fread(buf, 1, 1 << 20, f) == 0) {
		fprintf(stderr, "shim_limits: cannot read %s (run `make test`, which builds it)\n",
			path);
		exit(2);
	}
	fclose(f);
	return buf;
}

/* 200 bytes of dynamic shared memory per thread. */
static size_t smem_of_block(int block_size)
{
	return (size_t)block_size * 200;
}

int main(void)
{
	void *image = read_fixture("triton_like.cubin");
	CUmodule mod;
	CUfunction f;
	CUlaunchConfig cfg = { .gridDimX = 3, .gridDimY = 8, .gridDimZ = 1, .blockDimX = 256,
			       .blockDimY = 1, .blockDimZ = 1 };
	/* _fwd_kernel(const float *q, float *o, int n, void *scratch0, void *scratch1) */
	CUdeviceptr q = 0x1000, o = 0x2000, s0 = 0, s1 = 0;
	int n = 7;
	void *args[5] = { &q, &o, &n, &s0, &s1 };
	int v = -1, grid = -1, size = -1;
	size_t dyn = 0;
	CUlibrary lib;
	CUkernel k;

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
	printf("launch 106496 -> %d\n", cuLaunchKernel(f, 3, 8, 1, 256, 1, 1, 106496, NULL, args, NULL));
	printf("launch 101376 -> %d\n", cuLaunchKernel(f, 3, 8, 1, 256, 1, 1, 101376, NULL, args, NULL));
	cfg.sharedMemBytes = 106496;
	printf("launchex 106496 -> %d\n", cuLaunchKernelEx(&cfg, f, args, NULL));
	cfg.sharedMemBytes = 4096;
	printf("launchex 4096 -> %d\n", cuLaunchKernelEx(&cfg, f, args, NULL));
	cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, 256, 51200);
	printf("occupancy 256 threads 51200 B -> %d blocks\n", v);
	cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&v, f, 256, 51200, 0);
	printf("occupancy flags 256 threads 51200 B -> %d blocks\n", v);
	cuOccupancyAvailableDynamicSMemPerBlock(&dyn, f, 2, 256);
	printf("available dynamic at 2 blocks -> %zu\n", dyn);
	cuOccupancyMaxPotentialBlockSize(&grid, &size, f, smem_of_block, 0, 0);
	printf("potential 200 B per thread -> block %d grid %d\n", size, grid);
	cuOccupancyMaxPotentialBlockSizeWithFlags(&grid, &size, f, NULL, 60000, 0, 0);
	printf("potential 60000 B -> block %d grid %d\n", size, grid);
	/* cudart's way: a library, a CUkernel handle, its attribute, a launch by CUkernel. */
	cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0);
	cuLibraryGetKernel(&k, lib, "_fwd_kernel");
	printf("kernel set 232448 -> %d\n",
	       cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 232448, k, 0));
	printf("kernel launch 106496 -> %d\n",
	       cuLaunchKernel((CUfunction)k, 1, 1, 1, 128, 1, 1, 106496, NULL, args, NULL));
	free(image);
	return 0;
}

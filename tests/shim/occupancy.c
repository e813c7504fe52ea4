/*
 * occupancy.c - a process whose launches SM120SHIM_EMULATE_OCCUPANCY pads,
 * against the fake driver (an H200, with FAKECUDA_OCCUPANCY: attributes kept
 * and enforced as the driver does).  It sets and reads
 * MAX_DYNAMIC_SHARED_SIZE_BYTES and launches one kernel of a module and one
 * of a library (a CUkernel, as cudart launches it) every way the shim
 * interposes, printing one line per call; tests/scripts/test_occupancy.sh
 * compares them, and what the driver saw, with and without the shim.
 * Launches use 256 threads (8 warps): SM120 keeps 1 block of 96 KiB and 2
 * of 48 KiB per SM where the H200 keeps 2 and 4.  With the argument
 * "threads": 8 threads launch 98304 and 49152 B 500 times each while another
 * sets the attribute back and forth, and the failed launches are counted.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *read_fixture(const char *name)
{
	const char *dir = getenv("SM120_FIXTURES");
	char path[4096];
	void *buf = malloc(1 << 20);
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir ? dir : "build/test/fixtures", name);
	f = fopen(path, "rb");
	if (!f || !buf || fread(buf, 1, 1 << 20, f) == 0) {
		fprintf(stderr, "shim_occupancy: cannot read %s (run `make test`)\n", path);
		exit(2);
	}
	fclose(f);
	return buf;
}

static CUresult launch(CUfunction f, unsigned int smem, void **args)
{
	return cuLaunchKernel(f, 132, 1, 1, 256, 1, 1, smem, NULL, args, NULL);
}

static CUfunction shared_fn;
static atomic_int failures, running;

static void *launcher(void *arg)
{
	CUdeviceptr q = 0x1000, o = 0x2000, s0 = 0, s1 = 0;
	int n = 7, i;
	void *args[5] = { &q, &o, &n, &s0, &s1 };
	CUlaunchConfig cfg = { .gridDimX = 132, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 256,
			       .blockDimY = 1, .blockDimZ = 1, .sharedMemBytes = 49152 };

	(void)arg;
	for (i = 0; i < 500; i++) {
		if (launch(shared_fn, 98304, args) != CUDA_SUCCESS)
			atomic_fetch_add(&failures, 1);
		if (cuLaunchKernelEx(&cfg, shared_fn, args, NULL) != CUDA_SUCCESS)
			atomic_fetch_add(&failures, 1);
	}
	atomic_fetch_sub(&running, 1);
	return NULL;
}

/* threads - the launches of 8 threads against attribute sets of another: failures counted. */
static int threads(CUfunction f)
{
	pthread_t t[8];
	int i, v = 101376;

	shared_fn = f;
	cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, v);
	atomic_store(&running, 8);
	for (i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, launcher, NULL);
	while (atomic_load(&running) > 0) {
		v = v == 101376 ? 99000 : 101376;
		if (cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, v))
			atomic_fetch_add(&failures, 1);
	}
	for (i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	printf("threads: %d failed\n", atomic_load(&failures));
	return 0;
}

int main(int argc, char **argv)
{
	void *image = read_fixture("triton_like.cubin");
	CUdeviceptr q = 0x1000, o = 0x2000, s0 = 0, s1 = 0;
	int n = 7, v = -1;
	void *args[5] = { &q, &o, &n, &s0, &s1 };
	CUlaunchConfig cfg = { .gridDimX = 132, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 256,
			       .blockDimY = 1, .blockDimZ = 1, .sharedMemBytes = 49152 };
	CUmodule mod;
	CUfunction f;
	CUlibrary lib;
	CUkernel k;
	CUresult rc;

	cuInit(0);
	cuModuleLoadData(&mod, image);
	cuModuleGetFunction(&f, mod, "_fwd_kernel");
	if (argc > 1 && strcmp(argv[1], "threads") == 0)
		return threads(f);
	rc = cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f);
	printf("get -> %d %d\n", rc, v);
	printf("set 101376 -> %d\n",
	       cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 101376));
	printf("launch 98304 -> %d\n", launch(f, 98304, args));
	rc = cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f);
	printf("get -> %d %d\n", rc, v);
	printf("launch 101377 -> %d\n", launch(f, 101377, args));
	printf("launchex 49152 -> %d\n", cuLaunchKernelEx(&cfg, f, args, NULL));
	printf("set 60000 -> %d\n",
	       cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 60000));
	rc = cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f);
	printf("get -> %d %d\n", rc, v);
	printf("launch 65536 -> %d\n", launch(f, 65536, args));
	printf("launch 59904 -> %d\n", launch(f, 59904, args));
	rc = cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, 256, 70000);
	printf("occupancy 70000 -> %d %d blocks\n", rc, v);
	/* A CUkernel on device 0; its first launch comes while the stream is captured. */
	cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0);
	cuLibraryGetKernel(&k, lib, "_fwd_kernel");
	printf("kernel set 101376 -> %d\n",
	       cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 101376, k, 0));
	setenv("FAKECUDA_CAPTURING", "1", 1);
	printf("kernel launch 98304, capturing -> %d\n", launch((CUfunction)k, 98304, args));
	unsetenv("FAKECUDA_CAPTURING");
	printf("kernel launch 98304 -> %d\n", launch((CUfunction)k, 98304, args));
	rc = cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k, 0);
	printf("kernel get -> %d %d\n", rc, v);
	/* 400 blocks are co-resident at 4 per SM (528), not at 2 (264): the padding would
	 * make the launch fail, so it is launched as asked, and not padded again. */
	printf("cooperative 49152 x 400 -> %d\n",
	       cuLaunchCooperativeKernel(f, 400, 1, 1, 256, 1, 1, 49152, NULL, args));
	printf("cooperative 49152 x 400 -> %d\n",
	       cuLaunchCooperativeKernel(f, 400, 1, 1, 256, 1, 1, 49152, NULL, args));
	free(image);
	return 0;
}

/*
 * reroute.c - the shim's reroute decision on a real image, against the fake
 * driver (an H200).  Loads a cubin with SGLang's extend `_fwd_kernel`
 * parameter list at SGLang 0.5.8/0.5.9 ($SM120_FIXTURES/sglang_extend.sm_90.cubin), sets its
 * dynamic shared memory as Triton does, and launches it as SGLang launches
 * the MLA absorbed extend at the Hopper tiles (Kimi K2 TP8: 8 q heads, grid
 * (3, 8, 32), 256 threads, 106496 B).  With REROUTE_BAD_STRIDE set, q's head
 * stride is one the MLA layout cannot have.  Prints one line per call;
 * tests/scripts/test_reroute_cli.sh reads them with the shim's stderr and log.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

static void *read_fixture(const char *name)
{
	const char *dir = getenv("SM120_FIXTURES");
	char path[4096];
	void *buf = malloc(1 << 20);
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir ? dir : "build/test/fixtures", name);
	f = fopen(path, "rb");
	if (!f || !buf || fread(buf, 1, 1 << 20, f) == 0) {
		fprintf(stderr, "shim_reroute: cannot read %s (run `make test`)\n", path);
		exit(2);
	}
	fclose(f);
	return buf;
}

int main(void)
{
	void *image = read_fixture("sglang_extend.sm_90.cubin");
	CUdeviceptr ptr[9] = { 0x10000, 0x20000, 0x20000, 0x30000, 0x40000, 0x40000,
			       0x50000, 0x60000, 0x70000 }, none = 0;
	float sm_scale = 0.0416f;
	int group = 8, strides[12] = { 8 * 576, 576, 576, 576, 576, 576, 8 * 512, 512,
				       576, 576, 576, 576 };
	void *params[25];
	CUlaunchConfig cfg = { 3, 8, 32, 256, 1, 1, 106496, NULL, NULL, 0 };
	CUmodule mod;
	CUfunction f;
	int i;

	if (getenv("REROUTE_BAD_STRIDE"))
		strides[1] = 520;
	for (i = 0; i < 9; i++)
		params[i] = &ptr[i];
	params[9] = &sm_scale;
	params[10] = &group;
	for (i = 0; i < 12; i++)
		params[11 + i] = &strides[i];
	params[23] = params[24] = &none;
	cuInit(0);
	cuModuleLoadData(&mod, image);
	cuModuleGetFunction(&f, mod, "_fwd_kernel");
	printf("set 106496 -> %d\n",
	       cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 106496));
	printf("launch 106496 -> %d\n", cuLaunchKernelEx(&cfg, f, params, NULL));
	free(image);
	return 0;
}

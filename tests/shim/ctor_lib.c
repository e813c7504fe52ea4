/*
 * ctor_lib.c - a library whose constructor launches through the driver, by
 * direct link and by dlsym: the shim must already work when another
 * library's constructor runs before main (and possibly before the shim's).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

__attribute__((constructor)) static void ctor_launch(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	CUresult (*ex)(const CUlaunchConfig *, CUfunction, void **, void **) =
		h ? (CUresult(*)(const CUlaunchConfig *, CUfunction, void **, void **))dlsym(h, "cuLaunchKernelEx") : NULL;
	CUlaunchConfig cfg = { 0 };

	if (cuLaunchKernel((CUfunction)0x1, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS ||
	    !ex || ex(&cfg, (CUfunction)0x1, NULL, NULL) != CUDA_SUCCESS)
		fprintf(stderr, "FAIL: launch from a constructor\n");
}

int ctor_lib_linked(void)
{
	return 1;
}

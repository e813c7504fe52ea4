/*
 * loader_lib.c - a test-only shared object that loads a raw cubin the way
 * cuBLASLt does: it hands the driver ELF bytes from memory, from its own
 * code.  tests.mk adds a .nv_fatbin section to copies of it (one with
 * sm_120 code, one with sm_90 code only), so the shim can tell what the
 * library ships for the target.
 */
#include <cuda.h>

#define EXPORT __attribute__((visibility("default")))

/* Counted after the call, so the call is never a tail call: the driver sees this object. */
static volatile int loads;

/* loader_load - cuModuleLoadData(@m, @image) from inside this object. */
EXPORT CUresult loader_load(CUmodule *m, const void *image)
{
	CUresult rc = cuModuleLoadData(m, image);

	loads++;
	return rc;
}

/* loader_optin - the opt-in per block of device 0, asked from inside this object (as NCCL asks). */
EXPORT int loader_optin(void)
{
	int v = -1;

	if (cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0) !=
	    CUDA_SUCCESS)
		v = -1;
	loads++;
	return v;
}

/* loader_available - cuOccupancyAvailableDynamicSMemPerBlock(@f, 1 block of 128 threads), asked from inside this object (as cuBLAS asks). */
EXPORT long loader_available(CUfunction f)
{
	size_t v = 0;

	if (cuOccupancyAvailableDynamicSMemPerBlock(&v, f, 1, 128) != CUDA_SUCCESS)
		return -1;
	loads++;
	return (long)v;
}

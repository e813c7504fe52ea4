/* facts.c - see facts.h. */
#include "facts.h"

#include "hooks.h"

typedef CUresult func_name_fn(const char **, CUfunction);
typedef CUresult kernel_name_fn(const char **, CUkernel);
typedef CUresult ctx_device_fn(CUdevice *);

/* kernel_static - declared static smem of a CUkernel on the current device. */
static int kernel_static(CUkernel k, int *value)
{
	shim_fn_cuKernelGetAttribute *get = shim_real(SHIM_HOOK_cuKernelGetAttribute);
	ctx_device_fn *dev_of = shim_call(SHIM_CALL_cuCtxGetDevice);
	CUdevice dev = 0;

	if (!get || (dev_of && dev_of(&dev) != CUDA_SUCCESS))
		return -1;
	return get(value, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k, dev) == CUDA_SUCCESS ? 0 : -1;
}

struct kernel_rec *shim_kernel(void *handle, int is_kernel, const char *name, void *owner)
{
	struct kernel_rec *r = handles_get(handle);
	shim_fn_cuFuncGetAttribute *fget;
	int value = 0, known = 0;

	if (r && (!name || r->owner == owner))
		return r;
	fget = shim_real(SHIM_HOOK_cuFuncGetAttribute);
	if (!is_kernel && fget &&
	    fget(&value, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, (CUfunction)handle) == CUDA_SUCCESS) {
		known = 1;
	} else if (kernel_static((CUkernel)handle, &value) == 0) {
		known = 1;
		is_kernel = 1;
	}
	if (!known)
		return NULL;
	if (!name) {
		func_name_fn *fname = shim_call(SHIM_CALL_cuFuncGetName);
		kernel_name_fn *kname = shim_call(SHIM_CALL_cuKernelGetName);

		if (is_kernel ? !kname || kname(&name, (CUkernel)handle) != CUDA_SUCCESS :
				!fname || fname(&name, (CUfunction)handle) != CUDA_SUCCESS)
			name = "?";
	}
	return handles_put(handle, owner, is_kernel, name, value > 0 ? (uint32_t)value : 0);
}

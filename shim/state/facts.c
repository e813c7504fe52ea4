/* facts.c - see facts.h: kernel records and their facts. */
#include "facts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forklock.h"
#include "../log/log.h"

typedef CUresult func_name_fn(const char **, CUfunction);
typedef CUresult kernel_name_fn(const char **, CUkernel);
typedef CUresult ctx_device_fn(CUdevice *);
typedef CUresult param_info_fn(void *, size_t, size_t *, size_t *);

/* The most parameters asked of the driver (Triton kernels have a few dozen). */
#define MAX_DRIVER_PARAMS 512

FORK_SAFE_MUTEX(facts)

CUdevice shim_current_device(void)
{
	ctx_device_fn *dev_of = shim_call(SHIM_CALL_cuCtxGetDevice);
	CUdevice dev = 0;

	if (!dev_of || dev_of(&dev) != CUDA_SUCCESS)
		dev = 0;
	return dev;
}

/* kernel_attr - a CUkernel's attribute on the current device. */
static int kernel_attr(CUkernel k, CUfunction_attribute attr, int *value)
{
	shim_fn_cuKernelGetAttribute *get = shim_real(SHIM_HOOK_cuKernelGetAttribute);

	if (!get)
		return -1;
	return get(value, attr, k, shim_current_device()) == CUDA_SUCCESS ? 0 : -1;
}

/* handle_attr - @attr of a CUfunction or CUkernel handle; 0 on success. */
static int handle_attr(void *handle, int is_kernel, CUfunction_attribute attr, int *value)
{
	shim_fn_cuFuncGetAttribute *fget = shim_real(SHIM_HOOK_cuFuncGetAttribute);

	if (is_kernel)
		return kernel_attr((CUkernel)handle, attr, value);
	return fget && fget(value, attr, (CUfunction)handle) == CUDA_SUCCESS ? 0 : -1;
}

struct kernel_rec *shim_kernel(void *handle, int is_kernel, const char *name, void *owner)
{
	struct kernel_rec *r = handles_get(handle);
	int value = 0;

	if (r && (!name || (r->owner == owner && strcmp(r->name, name) == 0)))
		return r;
	if (!is_kernel && handle_attr(handle, 0, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &value) == 0)
		is_kernel = 0;
	else if (handle_attr(handle, 1, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &value) == 0)
		is_kernel = 1;
	else
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

/* driver_facts - @r's facts as the driver reports them (parameter layout: CUDA >= 12.4). */
static void driver_facts(struct kernel_rec *r, void *handle)
{
	param_info_fn *info = shim_call(r->is_kernel ? SHIM_CALL_cuKernelGetParamInfo :
						      SHIM_CALL_cuFuncGetParamInfo);
	struct img_param *p = calloc(MAX_DRIVER_PARAMS, sizeof(*p));
	size_t off, size;
	uint32_t n = 0;
	int regs;

	r->facts.dynamic_smem = -1;
	r->facts.regs = handle_attr(handle, r->is_kernel, CU_FUNC_ATTRIBUTE_NUM_REGS, &regs) ? -1 :
										      regs;
	while (p && info && n < MAX_DRIVER_PARAMS && info(handle, n, &off, &size) == CUDA_SUCCESS) {
		p[n] = (struct img_param){ n, (uint32_t)off, (uint32_t)size };
		r->facts.param_bytes = (uint32_t)(off + size);
		n++;
	}
	r->facts.n_params = n;
	r->facts.params = n ? realloc(p, n * sizeof(*p)) : NULL;
	if (!r->facts.params)
		free(p);
	if (!r->facts.params)
		r->facts.n_params = 0;
}

const struct kernel_rec *shim_kernel_facts(struct kernel_rec *r)
{
	void *handle;
	struct sm_err err = { "" };
	int rc;

	if (!r || atomic_load_explicit(&r->facts_ready, memory_order_acquire))
		return r;
	facts_lock();
	handle = atomic_load(&r->handle);
	if (!atomic_load(&r->facts_ready) && handle != HANDLES_DEAD) {
		rc = loaded_find(r->owner, r->name, &r->facts, r->origin, sizeof(r->origin), &err);
		if (rc && rc != -ENOENT)
			shim_log_warn("%s; kernel %s: using what the driver reports instead", err.msg,
				      r->name);
		if (rc) {
			memset(&r->facts, 0, sizeof(r->facts));
			driver_facts(r, handle);
			if (!r->origin[0])
				snprintf(r->origin, sizeof(r->origin), "driver");
		}
		r->facts.static_smem = r->static_smem; /* the driver's figure is the truth */
		atomic_store_explicit(&r->facts_ready, 1, memory_order_release);
	}
	facts_unlock();
	return r;
}

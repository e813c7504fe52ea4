/* facts.c - see facts.h: kernel records and their facts. */
#include "facts.h"

#include <dlfcn.h>
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

/* Set by shim_runtime_compiled around a runtime compiler's loads in this thread. */
static _Thread_local int runtime_compiled;

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
			loaded_provenance(r->owner, &r->facts.prov);
		}
		if (!r->facts.prov.device_sm)
			r->facts.prov.device_sm = shim_device_sm();
		r->facts.static_smem = r->static_smem; /* the driver's figure is the truth */
		atomic_store_explicit(&r->facts_ready, 1, memory_order_release);
	}
	facts_unlock();
	return r;
}

int shim_device_sm(void)
{
	return shim_device_sm_of(shim_current_device());
}

/* Devices whose attributes are kept once read (others are asked at each call). */
#define MAX_DEVICES 64

/*
 * device_attr - attribute @a of device @dev from the real driver, -1 if it
 * cannot say.  A device's attributes never change: each is asked once per
 * device and kept in @known[dev] as its value + 1 (0: not read yet).
 */
static int device_attr(atomic_int known[MAX_DEVICES], CUdevice dev, CUdevice_attribute a)
{
	shim_fn_cuDeviceGetAttribute *get = shim_real(SHIM_HOOK_cuDeviceGetAttribute);
	const int kept = dev >= 0 && dev < MAX_DEVICES;
	int v;

	if (kept && (v = atomic_load(&known[dev])) != 0)
		return v - 1;
	if (!get || get(&v, a, dev) != CUDA_SUCCESS || v < 0)
		return -1;
	if (kept)
		atomic_store(&known[dev], v + 1);
	return v;
}

int shim_device_sm_of(CUdevice dev)
{
	static atomic_int major[MAX_DEVICES], minor[MAX_DEVICES];
	const int ma = device_attr(major, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
	const int mi = device_attr(minor, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);

	return ma < 0 || mi < 0 ? 0 : ma * 10 + mi;
}

int shim_device_sms(void)
{
	static atomic_int known[MAX_DEVICES];
	const int sms = device_attr(known, shim_current_device(), CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);

	return sms > 0 ? sms : 0;
}

void shim_runtime_compiled(int on)
{
	runtime_compiled = on != 0;
}

void shim_image_loader(void *owner, const void *caller)
{
	Dl_info info;
	const char *path = NULL;

	if (!owner)
		return;
	if (caller && dladdr(caller, &info) && info.dli_fname && info.dli_fname[0])
		path = info.dli_fname;
	loaded_set_loader(owner, path, runtime_compiled);
}

void shim_kernel_evidence(const struct kernel_rec *k, struct route_evidence *out)
{
	const struct loaded_provenance *p = k ? &k->facts.prov : NULL;

	memset(out, 0, sizeof(*out));
	if (!p)
		return;
	*out = (struct route_evidence){
		.device_sm = p->device_sm, .image = p->image, .origin = k->origin,
		.codes = p->codes, .file = p->from_file ? k->origin : NULL,
		.loader = loaded_library_path(p->loader), .runtime_compiled = p->runtime_compiled,
	};
	if (p->image == EVIDENCE_IMAGE_CUBIN && !p->from_file && p->loader &&
	    !evidence_runtime_path(out->loader))
		out->loader_codes = loaded_library_codes(p->loader);
}

int shim_library_caller(const void *caller, CUdevice dev, const struct target_limits *t)
{
	struct route_evidence e = { .image = EVIDENCE_IMAGE_CUBIN };
	Dl_info info;
	char key[320];

	if (!caller || !t || !t->sm || !dladdr(caller, &info) || !info.dli_fname ||
	    !info.dli_fname[0])
		return 0;
	e.device_sm = shim_device_sm_of(dev);
	if (!e.device_sm || e.device_sm == t->sm)
		return 0;
	e.loader = info.dli_fname;
	e.loader_codes = loaded_path_codes(info.dli_fname);
	e.runtime_compiled = runtime_compiled;
	if (!evidence_library(&e, t, NULL, 0, NULL))
		return 0;
	snprintf(key, sizeof(key), "library_caller|%s", info.dli_fname);
	if (shim_log_first(key))
		shim_log_warn("%s ships code %s runs: it is told the device's own shared-memory "
			      "limits, as it would be told the card's for that code (it chooses its "
			      "kernels by architecture; their launches are logged as class library)",
			      info.dli_fname, t->name);
	return 1;
}

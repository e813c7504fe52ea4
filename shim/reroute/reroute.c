/* reroute.c - see reroute.h. */
#include "reroute.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../state/forklock.h"
#include "../driver/hooks.h"
#include "../log/log.h"
#include "bundle.h"

#define MAX_CONTEXTS 64
#define MAX_BUNDLED 64

typedef CUresult ctx_current_fn(CUcontext *);
typedef CUresult capturing_fn(CUstream, CUstreamCaptureStatus *);
typedef CUresult count_fn(unsigned int *, CUmodule);
typedef CUresult enumerate_fn(CUfunction *, unsigned int, CUmodule);
typedef CUresult name_fn(const char **, CUfunction);
typedef CUresult ctx_device_fn(CUdevice *);

/* The bundle as loaded into one context: every kernel resolved up front. */
struct loaded_bundle {
	_Atomic(CUcontext) ctx;      /* published last: readers need no lock */
	CUmodule module;
	unsigned int n;
	struct {
		const char *name;        /* owned by the driver while the module lives */
		CUfunction fn;
		uint32_t static_smem;    /* declared __shared__ bytes */
		uint32_t regs;           /* registers a thread (0: the driver did not say) */
	} kernels[MAX_BUNDLED];
};

static struct loaded_bundle bundles[MAX_CONTEXTS];
static atomic_uint n_bundles;
FORK_SAFE_MUTEX(bundle)

static CUcontext current_context(void)
{
	ctx_current_fn *get = shim_call(SHIM_CALL_cuCtxGetCurrent);
	CUcontext ctx = NULL;

	if (!get || get(&ctx) != CUDA_SUCCESS)
		return NULL;
	return ctx;
}

static struct loaded_bundle *find(CUcontext ctx)
{
	unsigned int i, n = atomic_load_explicit(&n_bundles, memory_order_acquire);

	for (i = 0; ctx && i < n; i++)
		if (atomic_load_explicit(&bundles[i].ctx, memory_order_acquire) == ctx)
			return &bundles[i];
	return NULL;
}

/*
 * allow_dynamic - let @fn use all the dynamic shared memory the device allows
 * it; its static bytes, or 0 if the driver does not say.
 */
static uint32_t allow_dynamic(CUfunction fn)
{
	shim_fn_cuFuncGetAttribute *get = shim_real(SHIM_HOOK_cuFuncGetAttribute);
	shim_fn_cuFuncSetAttribute *set = shim_real(SHIM_HOOK_cuFuncSetAttribute);
	shim_fn_cuDeviceGetAttribute *dev_attr = shim_real(SHIM_HOOK_cuDeviceGetAttribute);
	ctx_device_fn *dev_of = shim_call(SHIM_CALL_cuCtxGetDevice);
	int st = 0, optin = 0;
	CUdevice dev = 0;

	if (!get || !set || !dev_attr || (dev_of && dev_of(&dev) != CUDA_SUCCESS) ||
	    get(&st, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn) != CUDA_SUCCESS ||
	    dev_attr(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev) != CUDA_SUCCESS)
		return 0;
	set(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin - st);
	return st > 0 ? (uint32_t)st : 0;
}

/* regs_of - the registers a thread of @fn takes, 0 if the driver does not say. */
static uint32_t regs_of(CUfunction fn)
{
	shim_fn_cuFuncGetAttribute *get = shim_real(SHIM_HOOK_cuFuncGetAttribute);
	int regs = 0;

	if (!get || get(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn) != CUDA_SUCCESS || regs < 0)
		return 0;
	return (uint32_t)regs;
}

/* load - the bundle into @ctx (locked); its record, or NULL with @why. */
static struct loaded_bundle *load(CUcontext ctx, struct sm_err *why)
{
	shim_fn_cuModuleLoadData *load_data = shim_real(SHIM_HOOK_cuModuleLoadData);
	count_fn *count = shim_call(SHIM_CALL_cuModuleGetFunctionCount);
	enumerate_fn *enumerate = shim_call(SHIM_CALL_cuModuleEnumerateFunctions);
	name_fn *name_of = shim_call(SHIM_CALL_cuFuncGetName);
	unsigned int slot = atomic_load(&n_bundles), n = 0, i;
	struct loaded_bundle *b;
	CUfunction fns[MAX_BUNDLED];
	size_t len;
	CUresult rc;

	if (slot >= MAX_CONTEXTS) {
		sm_err_set(why, -ENOSPC, "more than %d CUDA contexts in one process", MAX_CONTEXTS);
		return NULL;
	}
	if (!load_data || !count || !enumerate || !name_of) {
		sm_err_set(why, -ENOSYS, "the driver lacks cuModuleEnumerateFunctions (CUDA 12.4 or "
			   "newer is needed to reroute)");
		return NULL;
	}
	b = &bundles[slot];
	rc = load_data(&b->module, bundle_fatbin(&len));
	if (rc == CUDA_SUCCESS)
		rc = count(&n, b->module);
	if (rc == CUDA_SUCCESS)
		rc = enumerate(fns, n < MAX_BUNDLED ? n : MAX_BUNDLED, b->module);
	if (rc != CUDA_SUCCESS) {
		sm_err_set(why, -EIO, "loading the bundled kernels failed (CUresult %d)", (int)rc);
		return NULL;
	}
	for (i = 0; i < n && i < MAX_BUNDLED; i++) {
		if (name_of(&b->kernels[b->n].name, fns[i]) != CUDA_SUCCESS)
			continue;
		b->kernels[b->n].fn = fns[i];
		b->kernels[b->n].static_smem = allow_dynamic(fns[i]);
		b->kernels[b->n].regs = regs_of(fns[i]);
		b->n++;
	}
	atomic_store_explicit(&b->ctx, ctx, memory_order_release);
	atomic_store_explicit(&n_bundles, slot + 1, memory_order_release);
	return b;
}

/* bundle_in - the current context's bundle, loading it if @may_load. */
static struct loaded_bundle *bundle_in(CUcontext ctx, int may_load, struct sm_err *why)
{
	struct loaded_bundle *b = find(ctx);

	if (b || !may_load)
		return b;
	bundle_lock();
	b = find(ctx);
	if (!b)
		b = load(ctx, why);
	bundle_unlock();
	return b;
}

void reroute_prepare(void)
{
	struct sm_err why;
	CUcontext ctx = current_context();

	if (ctx)
		bundle_in(ctx, 1, &why);
}

/* capturing - is @stream being captured into a graph (unknown counts as yes)? */
static int capturing(CUstream stream)
{
	capturing_fn *is_capturing = shim_call(SHIM_CALL_cuStreamIsCapturing);
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;

	if (!is_capturing)
		return 0;
	return is_capturing(stream, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE;
}

CUresult reroute_launch(const struct reroute_plan *plan, CUstream stream, int per_thread,
			reroute_pad_fn *pad_of, struct sm_err *why)
{
	shim_fn_cuLaunchKernel *launch = shim_real(per_thread ? SHIM_HOOK_cuLaunchKernel_ptsz :
								SHIM_HOOK_cuLaunchKernel);
	CUcontext ctx = current_context();
	struct loaded_bundle *b = find(ctx);
	void *params[1] = { (void *)plan->args };
	unsigned int i, pad;
	char key[320];
	CUresult rc;

	if (!ctx || !launch) {
		sm_err_set(why, -EINVAL, "no current CUDA context to launch %s in", plan->kernel);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (!b && capturing(per_thread && !stream ? CU_STREAM_PER_THREAD : stream)) {
		sm_err_set(why, -EBUSY, "the stream is being captured into a CUDA graph and the "
			   "bundled kernels are not loaded in this context yet (loading is not "
			   "allowed during capture): run the kernel once before capturing");
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	if (!b && !(b = bundle_in(ctx, 1, why)))
		return CUDA_ERROR_NOT_FOUND;
	for (i = 0; i < b->n; i++) {
		if (strcmp(b->kernels[i].name, plan->kernel) != 0)
			continue;
		/* Padded, and as planned if the driver refuses that. */
		pad = pad_of ? pad_of(plan->kernel, b->kernels[i].static_smem, b->kernels[i].regs,
				      plan->block, plan->dynamic_smem) : plan->dynamic_smem;
		if (pad != plan->dynamic_smem) {
			rc = launch(b->kernels[i].fn, plan->grid[0], plan->grid[1], plan->grid[2],
				    plan->block[0], plan->block[1], plan->block[2], pad, stream,
				    params, NULL);
			if (rc == CUDA_SUCCESS)
				return rc;
			snprintf(key, sizeof(key), "reroute|pad-refused|%s", plan->kernel);
			if (shim_log_first(key))
				shim_log_warn("bundled kernel %s padded to %u B of dynamic shared memory "
					      "was refused by the driver (CUresult %d): launched with "
					      "its own %u B", plan->kernel, pad, (int)rc,
					      plan->dynamic_smem);
		}
		return launch(b->kernels[i].fn, plan->grid[0], plan->grid[1], plan->grid[2],
			      plan->block[0], plan->block[1], plan->block[2], plan->dynamic_smem,
			      stream, params, NULL);
	}
	sm_err_set(why, -ENOENT, "this shim's bundle has no kernel %s", plan->kernel);
	return CUDA_ERROR_NOT_FOUND;
}

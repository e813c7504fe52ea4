/*
 * attr.c - the attribute and occupancy hooks: everything through which a
 * process learns or sets shared-memory limits.
 */
#include "../settings/config.h"
#include "../state/facts.h"
#include "../gate/gate.h"
#include "../gate/occupancy.h"
#include "../gate/triton.h"
#include "../driver/hooks.h"
#include "trace.h"

/*
 * emulated_on - the limits to emulate on @dev, or NULL when calls pass
 * unchanged (modes off and diagnose).  With target auto they are the device's
 * own, which changes nothing but what reroute advertises.
 */
static const struct target_limits *emulated_on(CUdevice dev)
{
	enum shim_mode m = shim_config()->mode;

	return route_emulates(m) ? shim_limits_of(dev) : NULL;
}

/*
 * emulated_for - emulated_on the current device, for a query made from
 * @caller: NULL as well when the caller is a shipped library that chooses
 * its kernels by the device's architecture (shim_library_caller).  Such a
 * library sizes its own kernels' launches from these answers (cuBLAS asks
 * how much dynamic shared memory its sm_90 kernels may use): given SM120's,
 * it would run them with too little and compute garbage.
 */
static const struct target_limits *emulated_for(const void *caller)
{
	CUdevice dev = shim_current_device();
	const struct target_limits *t = emulated_on(dev);

	return t && !shim_library_caller(caller, dev, t) ? t : NULL;
}

/* static_of - declared static smem of @fn (0 if the driver does not say). */
static uint32_t static_of(CUfunction fn)
{
	struct kernel_rec *r = shim_kernel(fn, 0, NULL, NULL);

	return r ? r->static_smem : 0;
}

/*
 * clamp_blocks - the occupancy answer @rc/@blocks, as the target would give it to @caller.
 * More dynamic bytes than the process allowed @fn get 0 blocks, as from the driver, also
 * where the shim raised the attribute for its occupancy padding.
 */
static CUresult clamp_blocks(CUresult rc, int *blocks, CUfunction fn, size_t dynamic_smem,
			     const void *caller)
{
	const struct target_limits *t;
	int base;

	if (rc == CUDA_SUCCESS && blocks && shim_occupancy_base(fn, -1, &base) &&
	    dynamic_smem > (size_t)base)
		*blocks = 0;
	if (rc == CUDA_SUCCESS && blocks && (t = emulated_for(caller)))
		*blocks = route_occupancy_blocks(*blocks, static_of(fn), dynamic_smem, t,
						 shim_config()->mode);
	return rc;
}

/* The driver's set of one kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES, for shim_occupancy_set. */
struct dynamic_set {
	shim_fn_cuFuncSetAttribute *fset;
	shim_fn_cuKernelSetAttribute *kset;
	void *handle;
	CUdevice dev;
};

static CUresult dynamic_set(void *ctx, int value)
{
	const struct dynamic_set *d = ctx;

	if (d->fset)
		return d->fset((CUfunction)d->handle, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
			       value);
	return d->kset(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, value, (CUkernel)d->handle,
		       d->dev);
}

/* seen_dynamic - a MAX_DYNAMIC_SHARED_SIZE_BYTES answer @rc/@value as the process set it. */
static CUresult seen_dynamic(CUresult rc, int *value, CUfunction_attribute attr, void *handle,
			     CUdevice dev)
{
	int base;

	if (rc == CUDA_SUCCESS && value && attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES &&
	    shim_occupancy_base(handle, dev, &base))
		*value = base;
	return rc;
}

CUresult shim_hook_cuFuncSetAttribute(CUfunction fn, CUfunction_attribute attr, int value)
{
	struct dynamic_set d = { .handle = fn, .dev = -1 };
	int g;
	SHIM_REAL_OR_RETURN(cuFuncSetAttribute);
	SHIM_TRACE(cuFuncSetAttribute);
	if (attr != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
		return real(fn, attr, value);
	g = shim_set_dynamic_gate(SHIM_HOOK_cuFuncSetAttribute, fn, 0, &value);
	d.fset = real;
	return g ? (CUresult)g : shim_occupancy_set(fn, -1, value, dynamic_set, &d);
}

CUresult shim_hook_cuFuncGetAttribute(int *value, CUfunction_attribute attr, CUfunction fn)
{
	SHIM_REAL_OR_RETURN(cuFuncGetAttribute);
	SHIM_TRACE(cuFuncGetAttribute);
	return seen_dynamic(real(value, attr, fn), value, attr, fn, -1);
}

CUresult shim_hook_cuKernelSetAttribute(CUfunction_attribute attr, int value, CUkernel kernel, CUdevice dev)
{
	struct dynamic_set d = { .handle = kernel, .dev = dev };
	int g;
	SHIM_REAL_OR_RETURN(cuKernelSetAttribute);
	SHIM_TRACE(cuKernelSetAttribute);
	if (attr != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
		return real(attr, value, kernel, dev);
	g = shim_set_dynamic_gate(SHIM_HOOK_cuKernelSetAttribute, kernel, 1, &value);
	d.kset = real;
	return g ? (CUresult)g : shim_occupancy_set(kernel, dev, value, dynamic_set, &d);
}

CUresult shim_hook_cuKernelGetAttribute(int *value, CUfunction_attribute attr, CUkernel kernel, CUdevice dev)
{
	SHIM_REAL_OR_RETURN(cuKernelGetAttribute);
	SHIM_TRACE(cuKernelGetAttribute);
	return seen_dynamic(real(value, attr, kernel, dev), value, attr, kernel, dev);
}

CUresult shim_hook_cuDeviceGetAttribute(int *value, CUdevice_attribute attr, CUdevice dev)
{
	const struct target_limits *t;
	CUresult rc;
	SHIM_REAL_OR_RETURN(cuDeviceGetAttribute);
	SHIM_TRACE(cuDeviceGetAttribute);
	rc = real(value, attr, dev);
	if (rc == CUDA_SUCCESS && value && (t = emulated_on(dev))) {
		int target = route_device_attr((int)attr, *value, t, shim_config()->mode,
					       shim_advertise());

		/* only a changed answer asks who is calling (dladdr) */
		if (target != *value && !shim_library_caller(__builtin_return_address(0), dev, t))
			*value = target;
	}
	return rc;
}

CUresult shim_hook_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, CUfunction fn, int block_size, size_t dynamic_smem)
{
	SHIM_REAL_OR_RETURN(cuOccupancyMaxActiveBlocksPerMultiprocessor);
	SHIM_TRACE(cuOccupancyMaxActiveBlocksPerMultiprocessor);
	return clamp_blocks(real(blocks, fn, block_size, dynamic_smem), blocks, fn, dynamic_smem,
			    __builtin_return_address(0));
}

CUresult shim_hook_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *blocks, CUfunction fn, int block_size, size_t dynamic_smem, unsigned int flags)
{
	SHIM_REAL_OR_RETURN(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags);
	SHIM_TRACE(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags);
	return clamp_blocks(real(blocks, fn, block_size, dynamic_smem, flags), blocks, fn,
			    dynamic_smem, __builtin_return_address(0));
}

CUresult shim_hook_cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamic_smem, CUfunction fn, int blocks, int block_size)
{
	const struct target_limits *t;
	CUresult rc;
	SHIM_REAL_OR_RETURN(cuOccupancyAvailableDynamicSMemPerBlock);
	SHIM_TRACE(cuOccupancyAvailableDynamicSMemPerBlock);
	rc = real(dynamic_smem, fn, blocks, block_size);
	if (rc == CUDA_SUCCESS && dynamic_smem && (t = emulated_for(__builtin_return_address(0))))
		*dynamic_smem = route_occupancy_dynamic(*dynamic_smem, blocks, static_of(fn), t,
							shim_config()->mode);
	return rc;
}

/* A cuOccupancyMaxPotentialBlockSize question, for the probes. */
struct potential_query {
	CUfunction fn;
	CUoccupancyB2DSize smem_of_block;   /* dynamic bytes per block size, or NULL */
	size_t dynamic_smem;                /* used when smem_of_block is NULL */
	unsigned int flags;
};

static struct route_block_probe probe(void *ctx, int block_size)
{
	const struct potential_query *q = ctx;
	shim_fn_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags *blocks_of =
		shim_real(SHIM_HOOK_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags);
	struct route_block_probe p = { -1, q->smem_of_block ? q->smem_of_block(block_size) :
							      q->dynamic_smem };

	if (!blocks_of || blocks_of(&p.blocks, q->fn, block_size, p.dynamic_smem, q->flags))
		p.blocks = -1;
	return p;
}

/*
 * potential_on_target - the driver's cuOccupancyMaxPotentialBlockSize answer
 * (@rc, *@min_grid, *@block_size) as the target would give it to @caller.  The driver's
 * answer stands when its block size is not limited by the target's shared
 * memory (then no other size does better on the target either); otherwise
 * every size is probed and clamped (route_potential_block).
 */
static CUresult potential_on_target(CUresult rc, int *min_grid, int *block_size,
				    const struct potential_query *q, int block_limit,
				    const void *caller)
{
	shim_fn_cuDeviceGetAttribute *dev_attr = shim_real(SHIM_HOOK_cuDeviceGetAttribute);
	shim_fn_cuFuncGetAttribute *fget = shim_real(SHIM_HOOK_cuFuncGetAttribute);
	const struct target_limits *t = emulated_for(caller);
	struct route_block_probe at;
	uint32_t st;
	int max_threads = 0, sms = 0, size, blocks;

	if (rc != CUDA_SUCCESS || !min_grid || !block_size || !t || *block_size <= 0)
		return rc;
	st = static_of(q->fn);
	at = probe((void *)q, *block_size);
	if (at.blocks >= 0 && route_occupancy_blocks(at.blocks, st, at.dynamic_smem, t,
						     shim_config()->mode) == at.blocks)
		return rc;
	if (!fget || fget(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, q->fn) ||
	    !dev_attr || dev_attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
							   shim_current_device()))
		return rc;
	if (block_limit > 0 && block_limit < max_threads)
		max_threads = block_limit;
	if (route_potential_block(max_threads, 32, st, probe, (void *)q, t, shim_config()->mode,
				  &size, &blocks))
		return rc;
	*block_size = size;
	*min_grid = blocks * sms;
	return rc;
}

CUresult shim_hook_cuOccupancyMaxPotentialBlockSize(int *min_grid, int *block_size, CUfunction fn, CUoccupancyB2DSize smem_of_block, size_t dynamic_smem, int block_limit)
{
	const struct potential_query q = { fn, smem_of_block, dynamic_smem, 0 };
	SHIM_REAL_OR_RETURN(cuOccupancyMaxPotentialBlockSize);
	SHIM_TRACE(cuOccupancyMaxPotentialBlockSize);
	return potential_on_target(real(min_grid, block_size, fn, smem_of_block, dynamic_smem,
					 block_limit),
				   min_grid, block_size, &q, block_limit, __builtin_return_address(0));
}

CUresult shim_hook_cuOccupancyMaxPotentialBlockSizeWithFlags(int *min_grid, int *block_size, CUfunction fn, CUoccupancyB2DSize smem_of_block, size_t dynamic_smem, int block_limit, unsigned int flags)
{
	const struct potential_query q = { fn, smem_of_block, dynamic_smem, flags };
	SHIM_REAL_OR_RETURN(cuOccupancyMaxPotentialBlockSizeWithFlags);
	SHIM_TRACE(cuOccupancyMaxPotentialBlockSizeWithFlags);
	return potential_on_target(real(min_grid, block_size, fn, smem_of_block, dynamic_smem,
					 block_limit, flags),
				   min_grid, block_size, &q, block_limit, __builtin_return_address(0));
}

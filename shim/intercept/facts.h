/*
 * facts.h - the kernel behind a launch handle, for the hooks.
 *
 * The registry (registry/handles.h) is filled when a handle is created
 * (cuModuleGetFunction, cuLibraryGetKernel, cuKernelGetFunction); a handle
 * the shim never saw created (loaded before it, or by a path it does not
 * hook) is asked of the driver once and recorded.  CUkernel handles, which
 * cudart passes as CUfunction and cuFuncGetAttribute rejects with
 * CUDA_ERROR_INVALID_HANDLE, are asked through the cuKernel* calls.
 */
#ifndef SM120_INTERCEPT_FACTS_H
#define SM120_INTERCEPT_FACTS_H

#include "../registry/handles.h"

/*
 * shim_kernel - the record for @handle (a CUfunction or CUkernel), creating it
 * from the driver if needed; @name and @owner are used when known (NULL
 * otherwise).  NULL only if the registry is full or the driver knows nothing.
 * Uses only real driver entry points: never re-enters a hook.
 */
struct kernel_rec *shim_kernel(void *handle, int is_kernel, const char *name, void *owner);

#endif

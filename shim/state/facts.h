/*
 * facts.h - what the shim knows about the kernels and images of a process.
 *
 * Images are recorded when a load hook succeeds (shim_image_loaded), into the
 * loaded-image registry (loaded.h), and logged as "load" events.
 * Kernel handles are recorded when created (cuModuleGetFunction,
 * cuLibraryGetKernel, cuKernelGetFunction) in the handle registry
 * (handles.h); a handle the shim never saw created (loaded before
 * it, or by a path it does not hook) is asked of the driver once and
 * recorded.  CUkernel handles, which cudart passes as CUfunction and
 * cuFuncGetAttribute rejects with CUDA_ERROR_INVALID_HANDLE, are asked
 * through the cuKernel* calls.  Everything here uses real driver entry points
 * only: it never re-enters a hook.
 */
#ifndef SM120_SHIM_STATE_FACTS_H
#define SM120_SHIM_STATE_FACTS_H

#include "handles.h"
#include "../driver/hooks.h"

/*
 * shim_kernel - the record for @handle (a CUfunction or CUkernel), creating it
 * from the driver if needed; @name and @owner are used when known (NULL
 * otherwise): a record of the handle with another name or owner is replaced
 * (a handle the driver gave out again).  NULL only if the registry is full or
 * the driver knows nothing.
 */
struct kernel_rec *shim_kernel(void *handle, int is_kernel, const char *name, void *owner);

/*
 * shim_kernel_facts - @r with r->facts and r->origin filled: from the image
 * its owner loaded (parsed now if it was deferred), else from the driver
 * (cuFuncGetParamInfo / cuKernelGetParamInfo, cuFuncGetAttribute).  Done once
 * per record; call it only off the launch fast path.  @r may be NULL.
 */
const struct kernel_rec *shim_kernel_facts(struct kernel_rec *r);

/* shim_current_device - the current context's device, or device 0 when none is current. */
CUdevice shim_current_device(void);

/*
 * shim_image_loaded - record the image the driver just loaded as @owner
 * through @via: @image (a cubin, fatbin, cudart wrapper or PTX in memory) or
 * the file @path.  @preserved: the caller promised to keep the bytes
 * (CU_LIBRARY_BINARY_IS_PRESERVED).  Logs a "load" event.  No-op in mode off.
 */
void shim_image_loaded(void *owner, enum shim_hook_id via, const void *image, const char *path,
		       int preserved);

/* shim_image_unloaded - forget @owner's image and mark its kernel handles dead (no-op in mode off). */
void shim_image_unloaded(void *owner);

#endif

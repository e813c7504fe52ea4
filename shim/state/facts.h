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
#include "../../core/route/evidence.h"

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

/*
 * shim_image_loader - record which shared object asked for @owner's image:
 * @caller is an address inside it (a load hook's return address), resolved
 * with dladdr; and whether shim_runtime_compiled was on in this thread.
 * Call it after shim_image_loaded, unless the mode is off (nothing was
 * recorded then).
 */
void shim_image_loader(void *owner, const void *caller);

/*
 * shim_runtime_compiled - mark (@on = 1) or stop marking (0) the images this
 * thread loads as compiled at run time: the Python hook sets it around
 * Triton's loads, so that those kernels are always judged (evidence.h).
 */
void shim_runtime_compiled(int on);

/*
 * shim_kernel_evidence - route_decide's evidence for kernel @k (facts
 * filled by shim_kernel_facts; NULL: nothing known): its image's provenance,
 * and for a raw cubin the codes of the loader's own fatbin (read from the
 * loader's file on its first need, then cached).  Strings and codes in @out
 * live as long as the process.  Not for the launch fast path.
 */
void shim_kernel_evidence(const struct kernel_rec *k, struct route_evidence *out);

/*
 * shim_library_caller - under an emulated target @t, is the object holding
 * the address @caller a shipped library that chooses its kernels by the
 * device's architecture (its own .nv_fatbin holds code @t's SM runs: the
 * evidence of evidence.h, 4b)?  NCCL reads the opt-in per block when it sets
 * up a communicator and refuses to start when its sm_90 kernels (103808 B)
 * do not fit; on a real card it would read the card's limit for its sm_120
 * code.  Such a caller is told device @dev's own limits.  0 on the target
 * itself, for a byte-count target, and when unsure.  Not for the launch path
 * (the first call per library reads its file).
 */
int shim_library_caller(const void *caller, CUdevice dev, const struct target_limits *t);

/* shim_device_sm_of - compute capability * 10 of device @dev, 0 if the driver cannot say. */
int shim_device_sm_of(CUdevice dev);

/* shim_device_sm - compute capability * 10 of the current device, 0 if the driver cannot say. */
int shim_device_sm(void);

/* shim_device_sms - the current device's multiprocessors, 0 if the driver cannot say. */
int shim_device_sms(void);

#endif

/*
 * gate.h - what every hook asks before it calls the driver: does the shim
 * let this call through, refuse it, or only log it (route.h decides).
 */
#ifndef SM120_INTERCEPT_GATE_H
#define SM120_INTERCEPT_GATE_H

#include "hooks.h"

/*
 * shim_launch_gate - judge a launch of @f with @smem dynamic bytes arriving
 * through @via.  Returns CUDA_SUCCESS to proceed, or the error the target's
 * driver returns (CUDA_ERROR_INVALID_VALUE) to refuse.  Logs violations.
 * The common case (small dynamic smem) costs two compares and no lookup.
 */
CUresult shim_launch_gate(enum shim_hook_id via, CUfunction f, unsigned int smem,
			  unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
			  unsigned int by, unsigned int bz);

/*
 * shim_set_dynamic_gate - judge cuFuncSetAttribute / cuKernelSetAttribute of
 * MAX_DYNAMIC_SHARED_SIZE_BYTES to @value on @handle.  Returns 0 to call the
 * driver, SHIM_GATE_ACCEPT to answer success without it (accepted and
 * recorded), or a CUresult error (> 0) to refuse.
 */
#define SHIM_GATE_ACCEPT (-1)
int shim_set_dynamic_gate(enum shim_hook_id via, void *handle, int is_kernel, int value);

#endif

/*
 * gate.h - what every hook asks before it calls the driver: does the shim
 * let this call through, refuse it, only log it, or run it on a bundled
 * kernel (route.h decides; shim/reroute does the rerouting).
 */
#ifndef SM120_SHIM_GATE_GATE_H
#define SM120_SHIM_GATE_GATE_H

#include "../driver/hooks.h"

/*
 * shim_advertise - the opt-in per block reported in reroute mode, in this
 * thread, now: the need of the Triton kernel being loaded for a rule
 * (triton.h), else SM120SHIM_ADVERTISE's bytes; 0: the target's own.
 */
uint32_t shim_advertise(void);

/* A launch as a hook received it. */
struct shim_launch {
	enum shim_hook_id via;
	CUfunction f;
	unsigned int grid[3];
	unsigned int block[3];
	unsigned int smem;           /* dynamic shared memory bytes */
	CUstream stream;
	void **params;               /* kernelParams, or NULL when 'extra' carries them */
};

/* shim_launch_gate returns this when it ran the launch itself (rerouted). */
#define SHIM_GATE_DONE (-2)

/*
 * shim_launch_gate - judge launch @l.  Returns 0 to call the driver,
 * SHIM_GATE_DONE when the launch was rerouted (the hook answers success),
 * or CUDA_ERROR_INVALID_VALUE to refuse, as the target's driver would (also
 * when a planned reroute cannot be launched; the log says why).  Logs
 * violations and reroutes.  The common case (small dynamic smem) costs two
 * compares and no lookup.
 */
int shim_launch_gate(const struct shim_launch *l);

/*
 * shim_set_dynamic_gate - judge cuFuncSetAttribute / cuKernelSetAttribute of
 * MAX_DYNAMIC_SHARED_SIZE_BYTES to *@value on @handle.  Returns 0 to call the
 * driver with *@value, or a CUresult error (> 0) to refuse.  A value accepted
 * for rerouting (over the target, within what was advertised) is lowered to
 * what the target allows the kernel, so launches that fit still run
 * natively; the bundle is loaded then, outside any graph capture.
 */
int shim_set_dynamic_gate(enum shim_hook_id via, void *handle, int is_kernel, int *value);

#endif

/*
 * triton.h - the shim's side of the Python hook (shim/python/): the loads of
 * Triton kernels.
 *
 * Triton compares a kernel's shared memory with the device's opt-in per
 * block before it loads it, and raises OutOfResources when it is over, which
 * its autotuner catches.  The device's opt-in is reported as the target's
 * own, so every kernel no rule reroutes is refused by Triton exactly as on
 * the card.  The hook wraps Triton's CompiledKernel._init_handles in two
 * calls, exported for ctypes (shim/shim.map):
 *
 *   sm120shim_triton_begin(name, shared, threads, compiled)
 *       route_admit decides; when a rule will reroute the kernel, this thread
 *       is told the kernel's need as the opt-in until the matching end, so
 *       Triton loads it.  Returns the bytes advertised (0: none).
 *   sm120shim_triton_end(function)
 *       ends the load; @function (the CUfunction Triton loaded, 0 if it
 *       raised) keeps the compiled text, which launches are checked against
 *       (select_launch.compiled).
 *
 * Both only ever return: an unknown name, a NULL pointer or a call in mode
 * off does nothing.  The window is per thread, so other threads' queries
 * are never answered with it.
 */
#ifndef SM120_SHIM_GATE_TRITON_H
#define SM120_SHIM_GATE_TRITON_H

#include <stdint.h>

/* The version of the calls above; the hook does nothing unless it is the one it knows. */
#define SHIM_TRITON_ABI 1

/* shim_triton_advertise - the opt-in to report in this thread while a load is admitted; 0: none. */
uint64_t shim_triton_advertise(void);

/* shim_triton_loading - a Triton load is in progress in this thread (its images are compiled at run time). */
int shim_triton_loading(void);

__attribute__((visibility("default"))) int sm120shim_triton_abi(void);
__attribute__((visibility("default"))) unsigned long long
sm120shim_triton_begin(const char *name, unsigned long long shared, unsigned int threads,
		       const char *compiled);
__attribute__((visibility("default"))) int sm120shim_triton_end(unsigned long long function);

#endif

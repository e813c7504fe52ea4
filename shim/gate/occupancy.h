/*
 * occupancy.h - SM120SHIM_EMULATE_OCCUPANCY: every launch the shim lets
 * through (all modes but off, rerouted bundled kernels and the process's own
 * alike) runs with its dynamic shared memory padded so that the device keeps
 * no more blocks per SM than the emulated target would (the decision is
 * occupancy_pad, core/limits/occupancy.h; the device's side comes from the
 * real device's attributes).  Off, or with target auto, nothing here does
 * anything.
 *
 * A padded launch may need more dynamic shared memory than the kernel's
 * CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES allows: the shim raises the
 * attribute in the driver (never lowers it) and keeps, per kernel (and device
 * for a CUkernel), the value the process's own calls left ("base") apart
 * from what the driver holds ("raised").  So that the process sees the
 * driver it would have seen:
 *   - cuFuncGetAttribute / cuKernelGetAttribute report base;
 *   - a launch of more dynamic bytes than base is refused with
 *     CUDA_ERROR_INVALID_VALUE, as the driver refuses it at base;
 *   - an occupancy query for more than base answers 0 blocks, as the driver
 *     does;
 *   - a later set lower than raised is kept as base, the driver keeps raised
 *     (a padded launch in another thread must not fail);
 *   - a padded launch the driver refuses (a cooperative grid no longer
 *     co-resident, a cluster) is launched again unpadded, logged once, and
 *     that kernel is not padded again: never stricter than without the shim.
 * Attributes are never raised while the launch's stream is being captured
 * (that launch runs unpadded).  Lock-free on the launch path; raises and
 * sets take one mutex.
 */
#ifndef SM120_SHIM_GATE_OCCUPANCY_H
#define SM120_SHIM_GATE_OCCUPANCY_H

#include <stdint.h>

#include "gate.h"

/*
 * shim_occupancy_launch - the dynamic bytes to launch @l with, into *@smem
 * (l->smem when nothing is padded).  Returns 0 to call the driver with
 * *@smem, or CUDA_ERROR_INVALID_VALUE to refuse a launch of more dynamic
 * bytes than the process allowed the kernel (its attribute was raised by the
 * shim only).  Call it after shim_launch_gate let the launch through.
 */
int shim_occupancy_launch(const struct shim_launch *l, unsigned int *smem);

/*
 * shim_occupancy_failed - launch @l padded to @padded bytes returned
 * @padded_rc, and then unpadded @plain_rc.  When only the padded one failed,
 * says so once (stderr and log) and stops padding that kernel.
 */
void shim_occupancy_failed(const struct shim_launch *l, unsigned int padded, CUresult padded_rc,
			   CUresult plain_rc);

/*
 * shim_occupancy_bundled - the dynamic bytes to launch bundled kernel @name
 * (@static_smem declared, @regs registers a thread or 0 if unknown, its
 * attribute already at the device's opt-in) with, in @block threads,
 * instead of @dynamic (reroute_pad_fn).  Logged once per kernel and size.
 */
unsigned int shim_occupancy_bundled(const char *name, uint32_t static_smem, uint32_t regs,
				    const unsigned int block[3], unsigned int dynamic);

/* A MAX_DYNAMIC_SHARED_SIZE_BYTES set in the driver: cuFuncSetAttribute or cuKernelSetAttribute. */
typedef CUresult shim_dynamic_set_fn(void *ctx, int value);

/*
 * shim_occupancy_set - the process sets MAX_DYNAMIC_SHARED_SIZE_BYTES to
 * @value (after shim_set_dynamic_gate) on @handle (a CUkernel: on device
 * @dev, < 0 for the current one): @set calls the driver.  Where the shim
 * raised the attribute above @value, the driver is given the raised value
 * again and @value becomes base.  Returns the driver's answer.
 */
CUresult shim_occupancy_set(void *handle, CUdevice dev, int value, shim_dynamic_set_fn *set,
			    void *ctx);

/*
 * shim_occupancy_base - where the shim raised @handle's attribute (a CUkernel
 * on device @dev; @dev < 0: the current device), the value the process left,
 * into *@value, and 1; 0 when nothing was raised (the driver's answer
 * stands).
 */
int shim_occupancy_base(void *handle, CUdevice dev, int *value);

#endif

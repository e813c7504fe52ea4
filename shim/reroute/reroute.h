/*
 * reroute.h - running a launch on a bundled kernel instead.
 *
 * The decision is reroute_select (adapters/select.h, pure); this part does
 * what needs the driver: the bundle loaded once per context (before any
 * graph capture, when a rerouted kernel is loaded), and the launch of the
 * plan on the caller's stream, so stream order and graph capture behave as
 * for the original launch.  Nothing here allocates device memory.
 */
#ifndef SM120_SHIM_REROUTE_REROUTE_H
#define SM120_SHIM_REROUTE_REROUTE_H

#include <cuda.h>
#include <stdint.h>

#include "../../core/common/err.h"
#include "../../core/adapters/adapter.h"

/*
 * reroute_prepare - load the bundle into the current context if it is not
 * there yet.  Called where a rerouted kernel is being set up (its
 * over-limit attribute accepted), which is never inside a graph capture.
 */
void reroute_prepare(void);

/*
 * reroute_pad_fn - the dynamic bytes to launch bundled kernel @kernel
 * (@static_smem declared, @regs registers a thread, 0 if the driver does not
 * say) with, in @block threads, instead of its planned @dynamic
 * (shim/gate/occupancy.h pads them).
 */
typedef unsigned int reroute_pad_fn(const char *kernel, uint32_t static_smem, uint32_t regs,
				    const unsigned int block[3], unsigned int dynamic);

/*
 * reroute_launch - launch @plan on @stream in the current context, through
 * the per-thread-default-stream entry point if @per_thread (as the original
 * launch came), with the dynamic bytes @pad_of gives (NULL: the plan's; a
 * padded launch the driver refuses is made again with the plan's, said once).  Loads the bundle first if needed, unless @stream is
 * capturing (loading a module is not allowed there: the launch is then
 * refused with that reason).  Returns CUDA_SUCCESS, or the driver's error
 * with @why saying what failed.
 */
CUresult reroute_launch(const struct reroute_plan *plan, CUstream stream, int per_thread,
			reroute_pad_fn *pad_of, struct sm_err *why);

#endif

/*
 * route.h - every decision the shim makes, as pure functions.
 *
 * The hooks, `sm120 route` (a dry run on a logged launch) and the unit tests
 * all call these and nothing else decides, so the three can never disagree.
 * No function here touches the driver, the environment or any global.
 */
#ifndef SM120_CORE_ROUTE_ROUTE_H
#define SM120_CORE_ROUTE_ROUTE_H

#include <stdint.h>

#include "../limits/target.h"

enum shim_mode {
	SHIM_MODE_OFF = 0,    /* pure pass-through */
	SHIM_MODE_DIAGNOSE,   /* log what the target would refuse, change nothing */
	SHIM_MODE_ENFORCE,    /* behave exactly like the target GPU */
	SHIM_MODE_REROUTE,    /* run matched oversized launches on bundled kernels */
};

/* route_mode_parse - "off" | "diagnose" | "enforce" | "reroute"; -1 if unknown. */
int route_mode_parse(const char *s);
const char *route_mode_name(enum shim_mode m);

enum route_action {
	ROUTE_PASS = 0,   /* call the driver unchanged */
	ROUTE_LOG,        /* call the driver unchanged, and log a violation */
	ROUTE_REFUSE,     /* return the error the target's driver would */
	ROUTE_REROUTE,    /* launch the bundled kernel a rule names instead */
};

const char *route_action_name(enum route_action a);

/* What a launch asks for. */
struct route_launch {
	uint32_t static_smem;    /* the kernel's declared __shared__ bytes */
	uint64_t dynamic_smem;   /* sharedMemBytes of the launch */
	int rule_matched;        /* a reroute rule matched this launch (none exist yet) */
};

/*
 * route_launch_decide - what to do with a launch under @mode against @t.
 * Fits (static + dynamic <= opt-in per block): PASS.  Over: OFF passes,
 * DIAGNOSE logs, ENFORCE refuses, REROUTE reroutes a matched launch and
 * refuses the rest.
 */
enum route_action route_launch_decide(const struct route_launch *l, const struct target_limits *t,
				      enum shim_mode mode);

/*
 * route_device_attr - the value cuDeviceGetAttribute reports for @attr when
 * the driver says @real.  Only ENFORCE and REROUTE emulate: the shared-memory
 * attributes (8, 81, 97, 111) report the target's limits, never more than the
 * device has; in REROUTE, opt-in per block (97) reports @advertise instead
 * when that is larger than the target's (0: no advertising), even beyond what
 * the device has, so that a framework loads kernels the shim reroutes.  Every other attribute, and every value in OFF and
 * DIAGNOSE, is @real.
 */
int route_device_attr(int attr, int real, const struct target_limits *t, enum shim_mode mode,
		      uint32_t advertise);

enum route_attr_action {
	ROUTE_ATTR_PASS = 0,      /* set it on the driver as asked */
	ROUTE_ATTR_LOG,           /* set it, and log that the target would refuse */
	ROUTE_ATTR_REFUSE,        /* CUDA_ERROR_INVALID_VALUE, as the target's driver */
	ROUTE_ATTR_ACCEPT,        /* within what was advertised: answer success, give the
				     driver what the target allows; launches over it will be
				     rerouted or refused */
};

/*
 * route_set_max_dynamic - cuFuncSetAttribute / cuKernelSetAttribute of
 * MAX_DYNAMIC_SHARED_SIZE_BYTES to @value on a kernel with @static_smem
 * declared.  The target accepts value <= optin - static.
 */
enum route_attr_action route_set_max_dynamic(int value, uint32_t static_smem,
					     const struct target_limits *t, enum shim_mode mode,
					     uint32_t advertise);

/*
 * route_occupancy_blocks - active blocks per SM on the target, given what the
 * driver computed for the real device (@real) and a block's shared memory
 * (@static_smem + @dynamic_smem; the reserved KiB is added per block): 0 if
 * one block does not fit, else min(real, per_sm / (block smem + reserved)).
 * Only ENFORCE and REROUTE emulate; otherwise @real.
 */
int route_occupancy_blocks(int real, uint32_t static_smem, uint64_t dynamic_smem,
			   const struct target_limits *t, enum shim_mode mode);

/*
 * route_occupancy_dynamic - dynamic shared memory available per block with
 * @blocks blocks per SM on the target, given the driver's @real answer.
 */
uint64_t route_occupancy_dynamic(uint64_t real, int blocks, uint32_t static_smem,
				 const struct target_limits *t, enum shim_mode mode);

/* What the driver says about one block size, for route_potential_block. */
struct route_block_probe {
	int blocks;              /* active blocks per SM on the real device (<0: error) */
	uint64_t dynamic_smem;   /* dynamic bytes a block of this size uses */
};

/*
 * route_potential_block - cuOccupancyMaxPotentialBlockSize on the target: the
 * block size, a multiple of @warp up to @max_block, with the most threads
 * resident per SM once each size's real answer is clamped by
 * route_occupancy_blocks (on ties the larger block).  @probe(ctx, size)
 * asks the real driver.  Stores the size and its blocks per SM; both 0 when
 * no size fits.  Returns 0, or -1 if a probe failed.
 */
int route_potential_block(int max_block, int warp, uint32_t static_smem,
			  struct route_block_probe (*probe)(void *ctx, int block_size), void *ctx,
			  const struct target_limits *t, enum shim_mode mode, int *block_size,
			  int *blocks);

#endif

/*
 * route.h - every decision the shim makes, as pure functions.
 *
 * The hooks, `sm120 route` (a replay of logged launches) and the unit tests
 * all call these and nothing else decides, so the three can never disagree.
 * No function here touches the driver, the environment or any global.
 */
#ifndef SM120_CORE_ROUTE_ROUTE_H
#define SM120_CORE_ROUTE_ROUTE_H

#include <stdint.h>

#include "../adapters/select.h"
#include "../limits/target.h"
#include "evidence.h"

/* The most static shared memory any kernel can declare (ptxas limit). */
#define ROUTE_MAX_STATIC_SMEM 49152u

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
	ROUTE_ACCEPT,     /* an attribute set over the target but within what was
			     advertised: answer success, give the driver what the target
			     allows; launches over it will be rerouted or refused */
	ROUTE_LIBRARY,    /* under an emulated target, a kernel a shipped library chose for
			     the device's architecture (evidence.h): call the driver
			     unchanged, log it as class "library", never count it as a
			     failure of the target */
};

const char *route_action_name(enum route_action a);

enum route_event {
	ROUTE_EVENT_LAUNCH = 0,         /* cuLaunchKernel and its kin */
	ROUTE_EVENT_SET_ATTRIBUTE,      /* MAX_DYNAMIC_SHARED_SIZE_BYTES set on a kernel */
};

/*
 * One call as the decision sees it: what the hook received and what the shim
 * knows of the kernel.  A launch fills sel (name, parameter sizes from the
 * image, kernelParams, grid, block, dynamic bytes, the rule settings); an
 * attribute set fills sel.kernel and attr_value (the bytes asked for).
 */
struct route_launch {
	enum route_event event;
	uint32_t static_smem;           /* the kernel's declared __shared__ bytes */
	int64_t attr_value;             /* SET_ATTRIBUTE: the value set (< 0: the driver's
					   to judge) */
	struct select_launch sel;       /* sel.kernel NULL: the kernel is unknown */
	const struct route_evidence *evidence; /* where the kernel's code came from; NULL:
						  nothing known (judged) */
};

/* What to do with it, and why. */
struct route_decision {
	enum route_action action;
	const struct rule *rule;        /* REROUTE: the rule that matched */
	struct reroute_plan plan;       /* REROUTE: what to launch instead */
	struct sm_err why;              /* over the limit and not rerouted: why (empty when no
					   rule names the kernel, or the mode reroutes nothing) */
	struct sm_err evidence;         /* over the limit under an emulated target: what
					   evidence_library found ("library: ..." for LIBRARY,
					   "judged: ..." otherwise); empty when the device is the
					   target or the call fits */
};

/*
 * route_decide - the one decision for every call that touches the shared-
 * memory limit.  The fit (static + dynamic against @t's opt-in per block) is
 * computed here, once:
 *   fits, or mode OFF               PASS
 *   over, the target emulated, and  LIBRARY (a launch or an attribute set, in
 *   evidence_library(@l->evidence)  every mode but OFF; no rule may name the
 *   finds a library kernel          kernel)
 *   over, DIAGNOSE                  LOG
 *   over, ENFORCE                   REFUSE
 *   over, REROUTE, a launch         REROUTE when reroute_select finds one
 *                                   consistent plan among @rules[0..n_rules);
 *                                   else REFUSE (why says what did not fit)
 *   over, REROUTE, an attribute     ACCEPT up to @advertise bytes (static
 *                                   included), or exactly the dynamic bytes
 *                                   of a tile of a rule naming the kernel;
 *                                   REFUSE otherwise
 * Pure: no driver, no environment, no global state; @d is always filled.
 */
void route_decide(const struct route_launch *l, const struct target_limits *t, enum shim_mode mode,
		  const struct rule *rules, uint32_t n_rules, uint32_t advertise,
		  struct route_decision *d);

/* route_rule_names - does any of @rules[0..n) name kernel @kernel (NULL: none does)? */
int route_rule_names(const struct rule *rules, uint32_t n, const char *kernel);

/*
 * route_cannot_exceed - true when a launch of @dynamic_smem bytes fits @t
 * whatever static bytes its kernel declares (at most 48 KiB): the launch
 * path's test before it looks anything up.
 */
static inline int route_cannot_exceed(uint64_t dynamic_smem, const struct target_limits *t)
{
	return dynamic_smem + ROUTE_MAX_STATIC_SMEM <= t->optin_per_block;
}

/* route_emulates - does @mode report and enforce the target's limits? */
int route_emulates(enum shim_mode mode);

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

/*
 * select.h - which rule, which reading of the dropped parameters, and which
 * adapter plan a launch gets: the whole reroute decision, pure, so the shim,
 * `sm120 route` and the unit tests share it.
 */
#ifndef SM120_CORE_ADAPTERS_SELECT_H
#define SM120_CORE_ADAPTERS_SELECT_H

#include "adapter.h"

/* A launch as the shim saw it. */
struct select_launch {
	const char *kernel;               /* name from the image or the driver */
	const uint32_t *param_sizes;      /* from the image (or cuFuncGetParamInfo) */
	uint32_t n_params;
	void *const *params;              /* kernelParams, NULL if passed through extra */
	unsigned int grid[3];
	unsigned int block[3];
	uint64_t dynamic_smem;
	const char *(*setting)(const char *name);
	const char *compiled;             /* what the compiler fixed in the kernel
					     (core/rules/compiled.h), NULL if unknown */
	int sm;                           /* the architecture it was compiled for (compute
					     capability x 10), 0 if unknown (core/rules/generic.h) */
	int sms;                          /* the launching device's multiprocessors, 0 if
					     unknown (adapter_input) */
};

/*
 * reroute_select - the plan for @l under @rules[0..n).  Every rule naming
 * the kernel, every tile of its dynamic shared memory and every way its
 * parameters match is tried; the launch is rerouted only when the
 * consistent readings all give the same plan.  With @l->compiled the only
 * way is the one the facts state, a rule with a generic entry takes its tile
 * from the facts (rule_generic_tile, core/rules/generic.h: the same tile
 * route_admit admitted the kernel with) instead of matching its exact tiles,
 * and a rule or tile value they state otherwise refuses the rule
 * (core/adapters/facts.h).  Without @l->compiled a rule with
 * needs_compiled_facts reroutes nothing.  Returns 0 with @plan and
 * *@rule set; -ENOENT when no rule names the kernel; -EINVAL with @why
 * saying what did not fit (the most specific reason found).
 */
int reroute_select(const struct rule *rules, uint32_t n, const struct select_launch *l,
		   struct reroute_plan *plan, const struct rule **rule, struct sm_err *why);

#endif

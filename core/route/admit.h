/*
 * admit.h - may a runtime compiler load a kernel that is over the target's
 * shared-memory limit?
 *
 * Triton compares a kernel's shared memory with the device's opt-in per block
 * before it loads the kernel, and raises OutOfResources when it is over; its
 * autotuner catches that and tries the next configuration.  That is what a
 * real SM120 card does, and what the shim must leave alone for every kernel
 * it will not reroute.  The Python hook (shim/python) asks route_admit before
 * Triton loads a kernel: only a kernel that a rule will reroute is shown a
 * larger opt-in, its own need, while it loads.  Pure: no driver, no
 * environment, no global state.
 */
#ifndef SM120_CORE_ROUTE_ADMIT_H
#define SM120_CORE_ROUTE_ADMIT_H

#include <stdint.h>

#include "../common/err.h"
#include "../limits/target.h"
#include "../rules/rules.h"
#include "route.h"

/* A kernel as the compiler describes it before it is loaded. */
struct route_kernel {
	const char *name;       /* the cubin's kernel name (Triton's metadata.name) */
	uint64_t shared;        /* dynamic shared bytes per block (metadata.shared) */
	uint32_t threads;       /* threads per block (num_warps * 32) */
	const char *compiled;   /* constexprs, options and signature (compiled.h), or NULL */
	int sm;                 /* the architecture it was compiled for (compute capability
				   x 10); 0: unknown (core/rules/generic.h) */
};

/* What to tell the compiler while it loads the kernel. */
struct route_admission {
	uint64_t advertise;       /* opt-in per block to report while it loads; 0: the
				     target's own (over it, the compiler refuses as the card) */
	const struct rule *rule;  /* the rule whose tile it matched, when admitted */
	int over;                 /* the kernel is over the target's limit */
	struct sm_err why;        /* over and not admitted though a rule names it: why */
};

/*
 * route_admit - the admission of @k on @t in @mode against @rules[0..n):
 *   fits the target, or mode is not REROUTE      advertise 0 (nothing to do)
 *   over, a rule names the kernel, and
 *     - its signature's kept parameters are all among @k->compiled's runtime
 *       arguments (when the facts type them), every argument the facts type is
 *       one of its parameters, and none it cannot reroute is one;
 *     - its tile for the kernel: with @k->compiled and a generic entry in the
 *       rule, the one rule_generic_tile builds from the facts (the launch
 *       decision, reroute_select, builds the same); otherwise an exact tile
 *       of @k->shared bytes and @k->threads;
 *     - every value of that tile and of the rule that @k->compiled states
 *       equals the rule's                        advertise @k->shared
 *   otherwise                                    advertise 0, @why says which
 *                                                value differed (or that no
 *                                                rule names the kernel); of
 *                                                several rules, the reason of
 *                                                the one that got furthest
 *                                                (signature, supported
 *                                                parameters, tile, values),
 *                                                the first of those
 * Admission only lets the kernel load: each launch is still decided by
 * route_decide, which reroutes it or refuses it.  @a is always filled.
 */
void route_admit(const struct route_kernel *k, const struct target_limits *t, enum shim_mode mode,
		 const struct rule *rules, uint32_t n_rules, struct route_admission *a);

#endif

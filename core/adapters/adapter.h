/*
 * adapter.h - how a matched launch becomes a launch of a bundled kernel.
 *
 * An adapter is a pure function: it reads the launch's parameters by the
 * names its rule gives them, derives what Triton compiled in (from the rule's
 * tile and values, the grid and the strides; with the kernel's compiled facts,
 * from them, checking every one it assumes), checks that everything agrees,
 * and either fills a plan (the bundled kernel, its argument struct, grid,
 * block, dynamic shared memory) or refuses with a reason that names the
 * value that does not add up.  It never touches the driver or device memory,
 * so it runs the same under CUDA graph capture and in the unit tests.
 */
#ifndef SM120_CORE_ADAPTERS_ADAPTER_H
#define SM120_CORE_ADAPTERS_ADAPTER_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../rules/rules.h"

/* A launch as a rule sees it: one of the ways rule_match found. */
struct adapter_input {
	const struct rule *rule;
	const struct rule_tile *tile;     /* the tile of the launch's dynamic shared memory */
	uint64_t kept;                    /* bit i: rule->params[i] is present */
	void *const *params;              /* the launch's kernelParams (present ones, in order) */
	unsigned int grid[3];
	unsigned int block[3];
	uint64_t dynamic_smem;
	/* SM120SHIM_<NAME> for each RULE_SETTINGS name, NULL if unset */
	const char *(*setting)(const char *name);
	/* what Triton compiled into the kernel (core/rules/compiled.h, facts.h), NULL if
	   unknown; when present, select.c has already read the parameters as it states
	   and checked every value of the rule and tile it states */
	const char *compiled;
	/* the launching device's multiprocessors, 0 if unknown: a plan may size its grid
	   to them (the fused-MoE decode tile, moe_gemm_decode_tile) */
	int sms;
};

#define REROUTE_MAX_ARGS 512

/* What to launch instead. */
struct reroute_plan {
	const char *kernel;               /* bundled kernel name */
	unsigned char args[REROUTE_MAX_ARGS]; /* its argument struct, passed by value */
	size_t args_size;
	unsigned int grid[3];
	unsigned int block[3];
	unsigned int dynamic_smem;
};

/*
 * adapter_fn - fill @plan from @in, or return -EINVAL with @why naming the
 * value that is missing or inconsistent; -ENOENT when this reading of the
 * parameters is not the rule's interface at all (another rule's launch
 * read with this list), so that a reason from a reading that is gets
 * reported instead.
 */
typedef int adapter_fn(const struct adapter_input *in, struct reroute_plan *plan,
		       struct sm_err *why);

/* adapter_find - the adapter named @name (rules name them), or NULL. */
adapter_fn *adapter_find(const char *name);

/*
 * adapter_known - the compiled-in values adapter @name answers for beyond a
 * rule's own, space-separated (its row of ADAPTER_KNOWN, adapter_known.h),
 * or NULL when it has none.
 */
const char *adapter_known(const char *name);

/*
 * Reading parameters by name.  A dropped parameter reads as Triton compiled
 * it: 1 for an int dropped when 1, NULL for a pointer dropped when None.
 * Each returns 0, or -EINVAL with @why when the rule has no such parameter
 * or it has another type.
 */
int adapter_ptr(const struct adapter_input *in, const char *name, const void **out,
		struct sm_err *why);
int adapter_i32(const struct adapter_input *in, const char *name, int32_t *out,
		struct sm_err *why);
int adapter_f32(const struct adapter_input *in, const char *name, float *out,
		struct sm_err *why);
/* adapter_has - is @name a parameter of the rule (present or dropped)? */
int adapter_has(const struct adapter_input *in, const char *name);

/* adapter_dropped - is @name a parameter of the rule that this reading drops? */
int adapter_dropped(const struct adapter_input *in, const char *name);

/* adapter_may_drop - is @name a parameter the rule lets Triton drop (None or 1)? */
int adapter_may_drop(const struct adapter_input *in, const char *name);

/* adapter_value - a compiled-in value from the tile, else the rule's values. */
int adapter_value(const struct adapter_input *in, const char *name, double *out,
		  struct sm_err *why);

#endif

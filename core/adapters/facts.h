/*
 * facts.h - the compiled facts of a Triton kernel (core/rules/compiled.h: its
 * constexprs, launch options and argument types, recorded by the Python hook
 * when Triton loaded it) checked against a rule and what a bundled kernel
 * reads.  A launch shows none of these; with the facts the reroute decision
 * needs no guess and no setting for them.  Pure functions, no allocation:
 * reroute_select (select.c) and the adapters call them only when the launch
 * comes with facts.
 */
#ifndef SM120_CORE_ADAPTERS_FACTS_H
#define SM120_CORE_ADAPTERS_FACTS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../rules/compiled.h"
#include "../rules/rules.h"

/*
 * facts_reading - the reading of @r's parameters that @compiled states: a
 * parameter typed there ("name:type") was passed at run time, one compiled in
 * ("name=None", "name=1") was dropped; Triton's two scratch pointers, which
 * the facts do not list, are passed.  Into *@way (bit i: @r->params[i]
 * present).  -EINVAL with @why naming the parameter when the facts are not
 * @r's signature: a parameter @r lists that the kernel lacks, a runtime
 * argument @r does not list or lists elsewhere, one of another kind than
 * @r's type, a dropped one compiled as something other than None or 1, an
 * argument compiled in as None or 1 that @r does not list (the facts'
 * "compiled_args", when the hook could tell declared constexprs from
 * arguments Triton specialised), or launch sizes @sizes[0..@n) other than
 * that reading's.
 */
int facts_reading(const struct rule *r, const char *compiled, const uint32_t *sizes, uint32_t n,
		  uint64_t *way, struct sm_err *why);

/*
 * facts_values - every compiled-in value of @tile and of @r that @compiled
 * states equals the rule's (a value the facts do not state is not compiled
 * into this kernel, or is one the adapter derives).  0, or -EINVAL with @why
 * naming the value, the rule's and why.
 */
int facts_values(const struct rule *r, const struct rule_tile *tile, const char *compiled,
		 struct sm_err *why);

/*
 * facts_unaudited - every constexpr @compiled states ("name=value") is one
 * @r answers for: a parameter of @r (compiled in as None or 1), one of its
 * values, one of @tile's, a bound of its generic entry, a launch option
 * (num_warps, num_stages, mma_v3, compiled_args), or one of the
 * space-separated names in @known (its adapter's row of ADAPTER_KNOWN,
 * adapter_known.h; NULL: none).  0, or -EINVAL with @why naming the first
 * that is none of these: a value nobody audited, whose effect on the result
 * is unknown.
 */
int facts_unaudited(const struct rule *r, const struct rule_tile *tile, const char *known,
		    const char *compiled, struct sm_err *why);

/* One pointer's element type a bundled kernel reads, and what another would do. */
struct facts_ptype {
	const char *param, *type, *consequence;
};

/*
 * facts_types - facts_type for each of @types[0..@n) (@kernel the bundled
 * kernel that reads them): 0, or -EINVAL with @why for the first that differs.
 */
int facts_types(const char *compiled, const struct facts_ptype *types, size_t n,
		const char *kernel, struct sm_err *why);

/*
 * facts_type - runtime argument @param's type in @compiled is @want (a
 * pointer's element type: "*bf16", "*i32").  0 also when @compiled does not
 * type @param (passed as None: nothing is read through it); -EINVAL with
 * @why naming the type found, @want, the bundled kernel @kernel that reads
 * it and @consequence (what reading it as @want would do).
 */
int facts_type(const char *compiled, const char *param, const char *want, const char *kernel,
	       const char *consequence, struct sm_err *why);

#endif

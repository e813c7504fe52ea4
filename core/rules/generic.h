/*
 * generic.h - tile-generic rules: a configuration of a framework kernel read
 * from the kernel's compiled facts (core/rules/compiled.h) instead of matched
 * against a rule's listed tiles, and checked before anything is rerouted.
 *
 * A rule with a "generic" entry (rules/README.md) names the compiled-in
 * values its bundled kernel needs (BLOCK_SIZE_M, ...), the values it computes
 * correctly (struct rule_bound) and a shared-memory model: the dynamic shared
 * memory Triton compiles for such a configuration (core/limits/triton_smem.h).
 * With the facts, a kernel is taken at any configuration whose values are all
 * stated, within their bounds, whose block is num_warps * 32 threads and whose
 * shared memory is the model's; the values then form the tile the adapter
 * reads.  route_admit (load time) and reroute_select (launch time) both
 * decide with rule_generic_tile, so a kernel admitted at load is judged by
 * the same values at launch.  Pure functions, no allocation.
 */
#ifndef SM120_CORE_RULES_GENERIC_H
#define SM120_CORE_RULES_GENERIC_H

#include <stdint.h>

#include "../common/err.h"
#include "rules.h"

/*
 * The shared-memory models a generic entry may name, one row each:
 * X(name, what it computes).  `sm120 rules check` accepts exactly these.
 */
#define RULE_SMEM_MODELS(X)                                                                   \
	X(triton_fused_moe_sglang, "SGLang's fused_moe_kernel as Triton 3.6 compiles it: "     \
				   "block-scale B vector when BLOCK_SIZE_N > group_n, tensor "  \
				   "descriptors when a_desc / b_desc are passed")               \
	X(triton_fused_moe_vllm, "vLLM's fused_moe_kernel as Triton 3.6 compiles it: block-"   \
				 "scale B always a vector; not its USE_TD path")                \
	X(triton_fused_moe_gptq_awq, "fused_moe_kernel_gptq_awq (int4 / int8 weight-only) as " \
				     "Triton 3.6 compiles it")
#define RULE_SMEM_MODEL_COUNT(name, what) +1
#define RULE_NSMEM_MODELS (0 RULE_SMEM_MODELS(RULE_SMEM_MODEL_COUNT))

/* rule_smem_model_names - the RULE_SMEM_MODELS names, by row. */
extern const char *const rule_smem_model_names[RULE_NSMEM_MODELS];

/* What the decision knows of one compiled kernel, at its load or its launch. */
struct rule_kernel {
	const char *compiled;   /* its compiled facts; NULL: none (no generic tile) */
	int sm;                 /* the architecture Triton compiled it for (compute
				   capability x 10); 0: unknown, then the shared memory
				   must be the model's on one of the architectures it models */
	uint32_t threads;       /* threads per block (Triton's num_warps * 32, the launch's block) */
	uint64_t shared;        /* dynamic shared memory per block */
};

/* A tile built from the facts: the values of a generic entry's bounds. */
struct rule_generic_tile {
	struct rule_tile tile;  /* dynamic_smem: the kernel's; values: below */
	struct rule_value values[RULE_MAX_BOUNDS];
};

/*
 * rule_generic_tile - @r's tile for kernel @k from its compiled facts:
 *   -ENOENT, @why empty     @r has no generic entry or @k no facts (the exact
 *                           tiles decide, rule_tile_for)
 *   -EINVAL, @why           a bound's value is not stated or not a whole
 *                           number, is out of its bounds or does not divide
 *                           the value it must; num_warps * 32 is not
 *                           @k->threads; the model does not cover the
 *                           configuration; or @k->shared is not the model's
 *                           (each names the value, what it should be, why)
 *   0                       @out->tile holds the bounds' values and @k->shared
 * Pure.
 */
int rule_generic_tile(const struct rule *r, const struct rule_kernel *k,
		      struct rule_generic_tile *out, struct sm_err *why);

/*
 * rule_smem_model - the dynamic shared memory Triton compiles, on sm_@sm, for
 * the kernel @compiled describes, as model @model (a RULE_SMEM_MODELS name)
 * computes it.  0 with @why when it cannot say: an unknown model, an
 * architecture the formula does not model, a flag it does not model (vLLM's
 * USE_TD), a weight format it does not know, or a value it needs that the
 * facts do not state.  Pure.
 */
uint64_t rule_smem_model(const char *model, const char *compiled, int sm, struct sm_err *why);

#endif

/*
 * fused_moe.h - the pure decisions of the fused-MoE adapters (fused_moe.c),
 * exposed for the unit tests.
 */
#ifndef SM120_CORE_ADAPTERS_FUSED_MOE_H
#define SM120_CORE_ADAPTERS_FUSED_MOE_H

#include <stdint.h>

#include "../common/err.h"

/*
 * moe_half - top_k and MUL_ROUTED_WEIGHT Triton compiled into a launch of
 * N x K, given the model's hidden size and top_k: gate/up (K == hidden) has
 * (top_k, 0), down (N == hidden) has (1, 1).  0, or -EINVAL with @why when
 * the launch is neither, both, or the model's top_k is 1.
 */
int moe_half(int32_t n, int32_t k, int32_t hidden, int32_t model_top_k, int32_t num_valid,
	     int32_t *top_k, int32_t *mul, struct sm_err *why);

#endif

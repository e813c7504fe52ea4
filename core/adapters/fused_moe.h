/*
 * fused_moe.h - the pure decisions of the fused-MoE adapters (fused_moe.c),
 * exposed for the unit tests and the other moe_gemm adapters.
 */
#ifndef SM120_CORE_ADAPTERS_FUSED_MOE_H
#define SM120_CORE_ADAPTERS_FUSED_MOE_H

#include <stdint.h>

#include "../common/err.h"

/*
 * moe_half - without the kernel's compiled facts: top_k and
 * MUL_ROUTED_WEIGHT Triton compiled into a launch of N x K, given the
 * model's hidden size and top_k (the settings): gate/up (K == hidden) has
 * (top_k, 0), down (N == hidden) has (1, 1).  0, or -EINVAL with @why when
 * the launch is neither, both, or the model's top_k is 1.
 */
int moe_half(int32_t n, int32_t k, int32_t hidden, int32_t model_top_k, int32_t num_valid,
	     int32_t *top_k, int32_t *mul, struct sm_err *why);

/*
 * moe_compiled_half - top_k and MUL_ROUTED_WEIGHT as Triton compiled them
 * (@c_top_k, @c_mul: the kernel's facts), which decide, checked: a top_k
 * above 1 (a gate/up launch; down compiles 1) must equal SM120SHIM_TOP_K
 * when that is set (@setting, NULL when unset), the @num_valid routed rows
 * must be whole tokens of top_k rows, and a routed weight needs the weights
 * (@has_weights: topk_weights_ptr is not None).  0 with *@top_k and *@mul,
 * or -EINVAL with @why naming the values.
 */
int moe_compiled_half(int64_t c_top_k, int64_t c_mul, const char *setting, int32_t num_valid,
		      int has_weights, int32_t *top_k, int32_t *mul, struct sm_err *why);

/*
 * moe_aligned16 - can rows at @stride elements of @esz bytes from @p be
 * copied 16 bytes at a time (moe_gemm's cp.async)?  Shared with the
 * inkling adapter (sglang_inkling.c).
 */
int moe_aligned16(const void *p, int64_t stride, int esz);

#endif

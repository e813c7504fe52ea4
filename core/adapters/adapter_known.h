/*
 * adapter_known.h - the compiled-in values each adapter answers for beyond a
 * rule's own: X(adapter, "NAME NAME ...").  With a kernel's compiled facts,
 * every constexpr the kernel was compiled with must be one its rule checks
 * (a value, a tile value, a generic bound), one of the rule's parameters
 * (compiled in as None or 1), a launch option, or one named here: what the
 * adapter reads from the facts, or what rules/AUDIT.md found not to change
 * the result under the values the rules pin.  Any other is a compiled-in
 * value nobody audited (a newer release's), and the launch is refused
 * rather than rerouted on the guess that it changes nothing
 * (facts_unaudited, facts.h).  An adapter without a row answers for none.
 */
#ifndef SM120_CORE_ADAPTERS_ADAPTER_KNOWN_H
#define SM120_CORE_ADAPTERS_ADAPTER_KNOWN_H

/*
 * sglang_extend reads Lq, Lv, BLOCK_M, SCORE_MOD (None only); the others only
 * act with a flag the rules pin off: SKIP_PREFIX_CUSTOM_MASK with
 * USE_CUSTOM_MASK, FP8_MAX and BLOCK_N_PREFIX's FP8 width with
 * USE_FP8_PREFIX/EXTEND (BLOCK_N_PREFIX is otherwise BLOCK_N, a loop step),
 * USE_EXP2 (HIP only) folds log2(e) into the scale of exp2: the same scores.
 * sglang_context and vllm_mla_decode read theirs.  The fused-MoE adapters read top_k,
 * use_fp8_w8a8, per_channel_quant, group_n, group_k (also generic bounds),
 * MUL_ROUTED_WEIGHT, compute_type, naive_block_assignment, and the gptq one
 * N and K; even_Ks and filter_expert only skip masks and
 * empty blocks the bundled kernels handle by their own checks; swap_ab and
 * SWAP_AB swap the operands of Hopper's small tiles (the same product);
 * ROUTER_TOPK and A_OUTPUT_SLICE_* act only with FUSE_* flags and
 * A_OUTPUT_SLICES 2, which the rules pin off; USE_GDC and GDC_EARLY order
 * the launch after the previous one (programmatic dependent launch), which
 * a plain launch does as well; USE_TD (vLLM) loads through tensor
 * descriptors (the same values).  sglang_inkling reads its shapes,
 * strides, KN_MASK and INT64_INDEX (GROUP_SIZE_M only orders the blocks);
 * lightning_kv_parallel reads b and h.
 */
#define ADAPTER_KNOWN(X)                                                                   \
	X(sglang_extend, "Lq Lv BLOCK_M SCORE_MOD SKIP_PREFIX_CUSTOM_MASK FP8_MAX "         \
			 "BLOCK_N_PREFIX USE_EXP2")                                           \
	X(sglang_context, "IS_CAUSAL kv_group_num")                                          \
	X(vllm_mla_decode, "NUM_KV_SPLITS PAGE_SIZE kv_group_num q_head_num")               \
	X(sglang_fused_moe, "top_k use_fp8_w8a8 per_channel_quant MUL_ROUTED_WEIGHT "      \
			    "compute_type group_n group_k even_Ks filter_expert swap_ab ROUTER_TOPK "         \
			    "A_OUTPUT_SLICE_K A_OUTPUT_SLICE_WIDTH USE_GDC GDC_EARLY")        \
	X(vllm_fused_moe, "top_k use_fp8_w8a8 per_channel_quant MUL_ROUTED_WEIGHT "        \
			  "compute_type group_n group_k naive_block_assignment SWAP_AB USE_TD") \
	X(sglang_moe_gptq_awq, "N K top_k MUL_ROUTED_WEIGHT compute_type even_Ks "         \
			       "filter_expert")                                                  \
	X(sglang_inkling, "E N K a_stride_0 b_stride_0 b_stride_1 c_stride_0 GROUP_SIZE_M "  \
			  "KN_MASK INT64_INDEX")                                              \
	X(lightning_kv_parallel, "b h")

#endif

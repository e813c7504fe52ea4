/*
 * adapter_table.h - the adapters a rule may name, one row each:
 * X(name, what it translates).  `sm120 rules check` accepts exactly these
 * names; shim/reroute implements one function per row.
 */
#ifndef SM120_CORE_ADAPTERS_ADAPTER_TABLE_H
#define SM120_CORE_ADAPTERS_ADAPTER_TABLE_H

#define SHIM_ADAPTERS(X)                                                                   \
	X(sglang_extend, "SGLang extend attention _fwd_kernel -> attn_extend_* (extend.h)")  \
	X(sglang_context, "SGLang context_attention_fwd _fwd_kernel (prefill_attention.py) -> " \
			  "attn_extend_* without a prefix (extend.h)")                         \
	X(vllm_mla_decode, "vLLM TRITON_MLA decode _fwd_grouped_kernel_stage1 -> "            \
			   "attn_decode_mla_* (decode.h)")                                     \
	X(sglang_fused_moe, "SGLang fused_moe_kernel (bf16, FP8 w8a8) -> moe_gemm_* (moe_gemm.h)") \
	X(vllm_fused_moe, "vLLM fused_moe_kernel (bf16, FP8 w8a8) -> moe_gemm_* (moe_gemm.h)")     \
	X(sglang_moe_gptq_awq, "SGLang fused_moe_kernel_gptq_awq (int4 w4a16) -> "            \
			       "moe_gemm_w4a16_* (moe_gemm.h)")                                \
	X(sglang_inkling, "SGLang inkling _grouped_gemm_kernel (inkling_moe.py, bf16) -> "     \
			  "moe_gemm_bf16_* in schedule mode (moe_gemm.h)")                     \
	X(lightning_kv_parallel, "vLLM and SGLang lightning attention _fwd_kv_parallel "      \
				 "(lightning_attn.py) -> lightning_kv_* (lightning_kv.h)")

#endif

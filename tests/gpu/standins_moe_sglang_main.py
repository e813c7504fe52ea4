"""standins_moe_sglang_main.py - SGLang's `fused_moe_kernel` with the launch
interface of upstream main (GPU tests; see standins_moe.py for what a
stand-in is).

The signature in python/sglang/kernels/ops/moe/fused_moe_triton_kernels.py
(2026-08): the 2026-03 one plus add_mask_ptr after num_tokens_post_padded_ptr
(add_output_mask: None unless the output is masked), and the constexprs
FUSE_ADD_TO_OUTPUT, MASK_OUTPUT, LORA_PRESERVE_BASE (off here, so left out).
add_mask_ptr being None, Triton 3.6 keeps the same runtime parameters as for
2026-03: 26 cubin parameters with per-tensor FP8 scales, 22 per-channel, 24
block-FP8 and bf16 (standins_moe.EXPECTED_PARAMS).  The launch arguments are
built as 2026-03's (invoke_fused_moe_kernel did not change them otherwise).

The math is standins_moe._moe_gemm; the kernel must be called
`fused_moe_kernel` (the cubin entry name), hence a module of its own.
"""
import os
import sys

import triton
import triton.language as tl

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from standins_moe import Launch, _moe_gemm, sglang_launch  # noqa: E402


@triton.jit
def fused_moe_kernel(
    a_ptr,
    a_desc,
    b_ptr,
    b_desc,
    bias_ptr,
    c_ptr,
    a_scale_ptr,
    b_scale_ptr,
    topk_weights_ptr,
    sorted_token_ids_ptr,
    expert_ids_ptr,
    num_tokens_post_padded_ptr,
    add_mask_ptr,
    N,
    K,
    EM,
    num_valid_tokens,
    stride_am,
    stride_ak,
    stride_be,
    stride_bk,
    stride_bn,
    stride_bias_e,
    stride_bias_n,
    stride_cm,
    stride_cn,
    stride_asm,
    stride_ask,
    stride_bse,
    stride_bsk,
    stride_bsn,
    group_n: tl.constexpr,
    group_k: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    MUL_ROUTED_WEIGHT: tl.constexpr,
    top_k: tl.constexpr,
    compute_type: tl.constexpr,
    use_fp8_w8a8: tl.constexpr,
    per_channel_quant: tl.constexpr,
    even_Ks: tl.constexpr,
):
    """SGLang's fused-MoE GEMM, upstream-main interface: the math is _moe_gemm's.
    TMA descriptors, the bias and the output mask are not implemented."""
    if a_desc is not None:
        tl.static_assert(False, "stand-in: a_desc (TMA) is not implemented")
    if b_desc is not None:
        tl.static_assert(False, "stand-in: b_desc (TMA) is not implemented")
    if bias_ptr is not None:
        tl.static_assert(False, "stand-in: bias is not implemented")
    if add_mask_ptr is not None:
        tl.static_assert(False, "stand-in: add_mask_ptr (MASK_OUTPUT) is not implemented")
    _moe_gemm(
        a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, topk_weights_ptr,
        sorted_token_ids_ptr, expert_ids_ptr, num_tokens_post_padded_ptr,
        N, K, EM, num_valid_tokens,
        stride_am, stride_ak, stride_be, stride_bk, stride_bn, stride_cm, stride_cn,
        stride_asm, stride_ask, stride_bse, stride_bsk, stride_bsn,
        group_n, group_k, 0,
        BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M,
        MUL_ROUTED_WEIGHT, top_k, compute_type, use_fp8_w8a8, per_channel_quant,
        False, even_Ks,
    )


def sglang_main_launch(A, B, C, A_scale, B_scale, topk_weights, topk_ids, sorted_token_ids,
                       expert_ids, num_tokens_post_padded, mul_routed_weight, top_k, config,
                       quant):
    """The launch upstream main's invoke_fused_moe_kernel makes: 2026-03's
    arguments (standins_moe.sglang_launch) with add_output_mask (None) after
    num_tokens_post_padded.  Not for int4 (the gptq kernel did not change)."""
    assert quant != "int4", "the gptq/awq kernel has one interface: standins_moe.sglang_launch"
    base = sglang_launch(A, B, C, A_scale, B_scale, topk_weights, topk_ids, sorted_token_ids,
                         expert_ids, num_tokens_post_padded, mul_routed_weight, top_k, config,
                         quant)
    args = base.args[:12] + (None,) + base.args[12:]
    return Launch(fused_moe_kernel, base.grid, args, base.kwargs)

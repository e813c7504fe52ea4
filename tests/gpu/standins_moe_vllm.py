"""standins_moe_vllm.py - vLLM's `fused_moe_kernel` with its launch interface
(GPU tests; see standins_moe.py for what a stand-in is).

The signature in vllm/model_executor/layers/fused_moe/fused_moe.py (upstream
main, 2026-07): a_ptr, b_ptr, c_ptr, b_bias_ptr, a_scale_ptr, b_scale_ptr,
topk_weights_ptr, sorted_token_ids_ptr, expert_ids_ptr,
num_tokens_post_padded_ptr, N, K, EM, num_valid_tokens, the A/B/C strides,
the scale strides, then stride_bbe, stride_bbn (the bias: 0 without one),
then constexprs.  With b_bias_ptr None Triton 3.6 keeps 24 runtime
parameters with per-tensor FP8 scales (26 in the cubin), 20 per-channel
(22), 22 block-FP8 and bf16 (24): standins_moe.EXPECTED_PARAMS.

What the launch does differently from SGLang's (vllm_launch): C strides
are C.stride(1), C.stride(2) of the [M, top_k, N] cache; EM is clamped to
M * top_k * BLOCK_SIZE_M when A has fewer rows than BLOCK_SIZE_M (and the
grid follows EM); BLOCK_SIZE_K is at most min(block_shape) for block FP8;
the kernel always masks K (no even_Ks).  Not reproduced: the "naive block
assignment" vLLM takes without alignment when M * top_k * 4 <= E (no
sorted_token_ids: a different parameter list), SWAP_AB (Hopper, BLOCK_SIZE_M
< 64 only) and the tensor-descriptor path (opt-in).

The math is standins_moe._moe_gemm; the kernel must be called
`fused_moe_kernel` (the cubin entry name), hence a module of its own.
"""
import os
import sys

import triton
import triton.language as tl

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from standins_moe import (  # noqa: E402
    FP8_BLOCK_SHAPE, Launch, _moe_gemm, a_scale_strides, b_scale_strides, quant_kwargs)


@triton.jit
def fused_moe_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    b_bias_ptr,
    a_scale_ptr,
    b_scale_ptr,
    topk_weights_ptr,
    sorted_token_ids_ptr,
    expert_ids_ptr,
    num_tokens_post_padded_ptr,
    N,
    K,
    EM,
    num_valid_tokens,
    stride_am,
    stride_ak,
    stride_be,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    stride_asm,
    stride_ask,
    stride_bse,
    stride_bsk,
    stride_bsn,
    stride_bbe,
    stride_bbn,
    group_n: tl.constexpr,
    group_k: tl.constexpr,
    naive_block_assignment: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    MUL_ROUTED_WEIGHT: tl.constexpr,
    top_k: tl.constexpr,
    compute_type: tl.constexpr,
    use_fp8_w8a8: tl.constexpr,
    per_channel_quant: tl.constexpr,
    HAS_BIAS: tl.constexpr,
):
    """vLLM's fused-MoE GEMM: the math is _moe_gemm's, K always masked.
    The bias and the naive block assignment are not implemented."""
    tl.static_assert(not naive_block_assignment,
                     "stand-in: naive block assignment is not implemented")
    tl.static_assert(not HAS_BIAS, "stand-in: bias is not implemented")
    _moe_gemm(
        a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, topk_weights_ptr,
        sorted_token_ids_ptr, expert_ids_ptr, num_tokens_post_padded_ptr,
        N, K, EM, num_valid_tokens,
        stride_am, stride_ak, stride_be, stride_bk, stride_bn, stride_cm, stride_cn,
        stride_asm, stride_ask, stride_bse, stride_bsk, stride_bsn,
        group_n, group_k, 0,
        BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M,
        MUL_ROUTED_WEIGHT, top_k, compute_type, use_fp8_w8a8, per_channel_quant,
        False, False,
    )


def vllm_launch(A, B, C, A_scale, B_scale, topk_weights, topk_ids, sorted_token_ids,
                expert_ids, num_tokens_post_padded, mul_routed_weight, top_k, config, quant):
    """The launch vLLM's invoke_fused_moe_triton_kernel makes (A already
    quantised; C is the [M, top_k, N] cache, read through stride(1)/(2)).
    num_valid_tokens is A's rows * top_k, which for both halves equals
    topk_ids.numel() (down: A has M * top_k rows, top_k 1)."""
    assert quant != "int4", "vLLM's W4A16 kernels are not stood in for"
    assert C.ndim == 3, "vLLM passes C.stride(1), C.stride(2) of a 3-D cache"
    cfg = dict(config)
    bm = cfg["BLOCK_SIZE_M"]
    em = sorted_token_ids.shape[0]
    if A.shape[0] < bm:
        # few tokens: at most one block per routed row is used
        em = min(em, A.shape[0] * top_k * bm)
    if quant == "fp8_block":
        cfg["BLOCK_SIZE_K"] = min(cfg["BLOCK_SIZE_K"], min(FP8_BLOCK_SHAPE))
    grid = (triton.cdiv(em, bm) * triton.cdiv(B.shape[1], cfg["BLOCK_SIZE_N"]),)
    args = (
        A, B, C, None, A_scale, B_scale, topk_weights, sorted_token_ids, expert_ids,
        num_tokens_post_padded,
        B.shape[1], B.shape[2], em, A.shape[0] * top_k,
        A.stride(0), A.stride(1), B.stride(0), B.stride(2), B.stride(1),
        C.stride(1), C.stride(2),
        *a_scale_strides(A_scale), *b_scale_strides(B_scale),
        0, 0,      # no bias
    )
    assert A.shape[0] * top_k == topk_ids.numel()
    kwargs = dict(naive_block_assignment=False, MUL_ROUTED_WEIGHT=mul_routed_weight, top_k=top_k,
                  compute_type=tl.bfloat16, HAS_BIAS=False, **quant_kwargs(quant), **cfg)
    return Launch(fused_moe_kernel, grid, args, kwargs)

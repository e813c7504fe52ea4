"""standins_extend_v059.py - SGLang's extend attention `_fwd_kernel` with the
launch interface of v0.5.9 (GPU tests; see standins.py for what a stand-in is).

The signature every SGLang release up to v0.5.9 has (2025-08-18, #9279, to
2026-03-01; rule `sglang-extend-2025-08`): the 2026-03 one without
`k_scale`/`v_scale`.  Runtime parameters, in order: 9 pointers, 4 optional
pointers (None for a plain extend: dropped), sm_scale, kv_group_num, 12
strides; then 15 constexprs.  At the test configuration (8 q heads, one MLA
KV head, no mask, sinks or window) Triton 3.6 keeps 23 of them and appends
its two scratch pointers: 25 cubin parameters, 106496 B of shared memory at
the Hopper tiles (BLOCK 32x64, 8 warps, 1 stage), as the 2026-03 kernel.

The math is standins._extend_attention with k_scale = v_scale = 1.0.  The
release itself multiplies an FP8 prefix as stored (it has no scales), which
is why the shim does not reroute this signature with an FP8 cache; the test
launches it with FP8 only to see that refusal.  The kernel must be called
`_fwd_kernel` (the cubin entry name), hence a module of its own.
"""
import os
import sys

import triton
import triton.language as tl

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from standins import _extend_attention, extend_block_sizes  # noqa: E402

CUBIN_PARAMS = 25  # 23 runtime (kv_group_num > 1) + 2 scratch


@triton.jit
def _fwd_kernel(
    Q_Extend,
    K_Extend,
    V_Extend,
    O_Extend,
    K_Buffer,
    V_Buffer,
    qo_indptr,
    kv_indptr,
    kv_indices,
    mask_ptr,
    mask_indptr,
    sink_ptr,
    window_kv_offset_ptr,
    sm_scale,
    kv_group_num,
    stride_qbs,
    stride_qh,
    stride_kbs,
    stride_kh,
    stride_vbs,
    stride_vh,
    stride_obs,
    stride_oh,
    stride_buf_kbs,
    stride_buf_kh,
    stride_buf_vbs,
    stride_buf_vh,
    SLIDING_WINDOW_SIZE: tl.constexpr,
    logit_cap: tl.constexpr,
    xai_temperature_len: tl.constexpr,
    Lq: tl.constexpr,
    Lv: tl.constexpr,
    BLOCK_DMODEL: tl.constexpr,
    BLOCK_DPE: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    USE_CUSTOM_MASK: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    SKIP_PREFIX_CUSTOM_MASK: tl.constexpr,
    STORE_TRANSPOSE: tl.constexpr,
    HAS_SINK: tl.constexpr,
):
    """SGLang extend attention, v0.5.9 interface: no k_scale/v_scale (both 1)."""
    _extend_attention(
        Q_Extend, K_Extend, V_Extend, O_Extend, K_Buffer, V_Buffer,
        qo_indptr, kv_indptr, kv_indices, sink_ptr,
        sm_scale, 1.0, 1.0, kv_group_num,
        stride_qbs, stride_qh, stride_kbs, stride_kh, stride_vbs, stride_vh,
        stride_obs, stride_oh, stride_buf_kbs, stride_buf_kh, stride_buf_vbs, stride_buf_vh,
        SLIDING_WINDOW_SIZE, logit_cap, xai_temperature_len, Lq, Lv,
        BLOCK_DMODEL, BLOCK_DPE, BLOCK_DV, BLOCK_M, BLOCK_N,
        USE_CUSTOM_MASK, IS_CAUSAL, STORE_TRANSPOSE, HAS_SINK,
    )


def extend_attention_fwd(
    q_extend,
    k_extend,
    v_extend,
    o_extend,
    k_buffer,
    v_buffer,
    qo_indptr,
    kv_indptr,
    kv_indices,
    custom_mask,
    is_causal,
    mask_indptr,
    max_len_extend,
    sm_scale=None,
    logit_cap=0.0,
    skip_prefix_custom_mask=True,
    sliding_window_size=-1,
    sinks=None,
    window_kv_offsets=None,
    xai_temperature_len=-1,
    warmup=False,
):
    """Launch `_fwd_kernel` as SGLang v0.5.9's extend_attention_fwd does (same
    arguments, no k_scale/v_scale), always at the Hopper tiles.

    Layouts as standins.extend_attention_fwd.  Returns the compiled kernel
    (warmup=True: compile only, no launch).
    """
    Lq, Lv = q_extend.shape[-1], v_extend.shape[-1]
    dmodel, dpe, dv, bm, bn, warps = extend_block_sizes(Lq, Lv)
    sm_scale = sm_scale or 1.0 / (Lq**0.5)
    batch, heads = qo_indptr.shape[0] - 1, q_extend.shape[1]
    grid = (batch, heads, triton.cdiv(max_len_extend, bm))
    args = (
        q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer,
        qo_indptr, kv_indptr, kv_indices,
        custom_mask, mask_indptr, sinks, window_kv_offsets,
        float(sm_scale),
        heads // k_extend.shape[1],
        q_extend.stride(0), q_extend.stride(1),
        k_extend.stride(0), k_extend.stride(1),
        v_extend.stride(0), v_extend.stride(1),
        o_extend.stride(0), o_extend.stride(1),
        k_buffer.stride(0), k_buffer.stride(1),
        v_buffer.stride(0), v_buffer.stride(1),
    )
    kwargs = dict(
        SLIDING_WINDOW_SIZE=sliding_window_size,
        logit_cap=logit_cap,
        xai_temperature_len=xai_temperature_len,
        BLOCK_DMODEL=dmodel,
        BLOCK_DPE=dpe,
        BLOCK_DV=dv,
        BLOCK_M=bm,
        BLOCK_N=bn,
        Lq=Lq,
        Lv=Lv,
        USE_CUSTOM_MASK=custom_mask is not None,
        IS_CAUSAL=is_causal,
        SKIP_PREFIX_CUSTOM_MASK=skip_prefix_custom_mask,
        HAS_SINK=sinks is not None,
        STORE_TRANSPOSE=False,
        num_warps=warps,
        num_stages=1,
    )
    if warmup:
        return _fwd_kernel.warmup(*args, grid=grid, **kwargs)
    return _fwd_kernel[grid](*args, **kwargs)

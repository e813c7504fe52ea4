"""standins_extend_main.py - SGLang's extend attention `_fwd_kernel` with the
launch interface of upstream main (GPU tests; see standins.py for what a
stand-in is).

The signature since 2026-08-06 (#29677; rule `sglang-extend-main`), in
python/sglang/kernels/ops/attention/extend_attention.py: the 2026-03 one plus
LSE_Extend (5th; None unless DCP asks for the log-sum-exp) with
stride_lse_bs/stride_lse_h after stride_oh (0 without LSE), the page strides
stride_buf_{k,v}page/{k,v}tok after the buffer strides (page size 1:
slot stride each), compact_batch_size (the batch), then the constexprs, and
last Aux0 (None without a score_mod) and three ints aux0_stride_t,
aux0_stride_h, aux0_len (0 without one; Triton keeps ints equal to 0).  For a
plain extend at the test configuration Triton 3.6 keeps 35 runtime
parameters and appends its two scratch pointers: 37 cubin parameters, or 36
when the batch is 1 (compact_batch_size == 1 is compiled in), which is
exactly the 2026-07-10 signature's layout; 106496 B of shared memory at the
Hopper tiles (BLOCK 32x64, 8 warps, 1 stage).

The math is standins._extend_attention; what main adds (LSE output, DCP's
SKIP_PREFIX/SKIP_EXTEND, pages above 1, a score_mod, HIP's compact tile
grid) is refused at compile time.  The kernel must be called `_fwd_kernel`
(the cubin entry name), hence a module of its own.
"""
import os
import sys

import triton
import triton.language as tl

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from standins import _extend_attention, extend_block_sizes  # noqa: E402

CUBIN_PARAMS = 37         # 35 runtime (kv_group_num > 1, batch > 1) + 2 scratch
CUBIN_PARAMS_BATCH1 = 36  # compact_batch_size == 1 dropped


@triton.jit
def _fwd_kernel(
    Q_Extend,
    K_Extend,
    V_Extend,
    O_Extend,
    LSE_Extend,
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
    k_scale,
    v_scale,
    kv_group_num,
    stride_qbs,
    stride_qh,
    stride_kbs,
    stride_kh,
    stride_vbs,
    stride_vh,
    stride_obs,
    stride_oh,
    stride_lse_bs,
    stride_lse_h,
    stride_buf_kbs,
    stride_buf_kh,
    stride_buf_vbs,
    stride_buf_vh,
    stride_buf_kpage,
    stride_buf_ktok,
    stride_buf_vpage,
    stride_buf_vtok,
    compact_batch_size,
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
    STORE_LSE: tl.constexpr,
    SKIP_PREFIX: tl.constexpr,
    SKIP_EXTEND: tl.constexpr,
    STORE_TRANSPOSE: tl.constexpr,
    HAS_SINK: tl.constexpr,
    USE_COMPACT_TILE_GRID: tl.constexpr,
    PAGE_SIZE: tl.constexpr = 1,
    SCORE_MOD: tl.constexpr = None,
    Aux0=None,
    aux0_stride_t=0,
    aux0_stride_h=0,
    aux0_len=0,
):
    """SGLang extend attention, upstream-main interface: the 2026-03 math, with
    the parameters main added present and in their neutral state."""
    tl.static_assert(not STORE_LSE, "stand-in: LSE output (DCP) is not implemented")
    tl.static_assert(not SKIP_PREFIX, "stand-in: SKIP_PREFIX (DCP) is not implemented")
    tl.static_assert(not SKIP_EXTEND, "stand-in: SKIP_EXTEND (DCP) is not implemented")
    tl.static_assert(not USE_COMPACT_TILE_GRID, "stand-in: the compact tile grid (HIP) "
                     "is not implemented")
    tl.static_assert(PAGE_SIZE == 1, "stand-in: only page size 1 is implemented")
    tl.static_assert(SCORE_MOD is None, "stand-in: score_mod is not implemented")
    _extend_attention(
        Q_Extend, K_Extend, V_Extend, O_Extend, K_Buffer, V_Buffer,
        qo_indptr, kv_indptr, kv_indices, sink_ptr,
        sm_scale, k_scale, v_scale, kv_group_num,
        stride_qbs, stride_qh, stride_kbs, stride_kh, stride_vbs, stride_vh,
        stride_obs, stride_oh, stride_buf_kbs, stride_buf_kh, stride_buf_vbs, stride_buf_vh,
        SLIDING_WINDOW_SIZE, logit_cap, xai_temperature_len, Lq, Lv,
        BLOCK_DMODEL, BLOCK_DPE, BLOCK_DV, BLOCK_M, BLOCK_N,
        USE_CUSTOM_MASK, IS_CAUSAL, STORE_TRANSPOSE, HAS_SINK,
    )


def kv_strides(buf, page_size):
    """(slot, head, page, token) strides of a 3-D [slots, heads, dim] KV buffer, as
    SGLang main passes them: page = slot * page_size, token = slot."""
    if buf.dim() != 3:
        raise NotImplementedError("stand-in: only 3-D [slots, heads, dim] KV buffers")
    slot = buf.stride(0)
    return slot, buf.stride(1), slot * page_size, slot


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
    k_scale,
    v_scale,
    sm_scale=None,
    logit_cap=0.0,
    skip_prefix_custom_mask=True,
    sliding_window_size=-1,
    sinks=None,
    window_kv_offsets=None,
    xai_temperature_len=-1,
    lse_extend=None,
    skip_prefix=False,
    skip_extend=False,
    page_size=1,
    score_mod=None,
    aux_tensors=None,
    extend_seq_lens_cpu=None,
    warmup=False,
):
    """Launch `_fwd_kernel` as SGLang main's extend_attention_fwd does on CUDA
    (the rectangular grid: the compact one is HIP's), at the Hopper tiles.

    Layouts as standins.extend_attention_fwd; k_scale/v_scale are Python
    floats.  What the stand-in does not implement (lse_extend, skip_*,
    page_size > 1, score_mod) raises NotImplementedError.  Returns the
    compiled kernel (warmup=True: compile only, no launch).
    """
    if (lse_extend is not None or skip_prefix or skip_extend or page_size != 1
            or score_mod is not None):
        raise NotImplementedError("stand-in: lse_extend, skip_prefix/skip_extend, page sizes "
                                  "above 1 and score_mod are not implemented")
    del aux_tensors, extend_seq_lens_cpu  # used by score_mod and the HIP grid only
    Lq, Lv = q_extend.shape[-1], v_extend.shape[-1]
    dmodel, dpe, dv, bm, bn, warps = extend_block_sizes(Lq, Lv)
    sm_scale = sm_scale or 1.0 / (Lq**0.5)
    batch, heads = qo_indptr.shape[0] - 1, q_extend.shape[1]
    grid = (batch, heads, triton.cdiv(max_len_extend, bm))
    k_slot, k_head, k_page, k_tok = kv_strides(k_buffer, page_size)
    v_slot, v_head, v_page, v_tok = kv_strides(v_buffer, page_size)
    args = (
        q_extend, k_extend, v_extend, o_extend, lse_extend, k_buffer, v_buffer,
        qo_indptr, kv_indptr, kv_indices,
        custom_mask, mask_indptr, sinks, window_kv_offsets,
        float(sm_scale), float(k_scale), float(v_scale),
        heads // k_extend.shape[1],
        q_extend.stride(0), q_extend.stride(1),
        k_extend.stride(0), k_extend.stride(1),
        v_extend.stride(0), v_extend.stride(1),
        o_extend.stride(0), o_extend.stride(1),
        0, 0,  # stride_lse_bs, stride_lse_h: no LSE
        k_slot, k_head, v_slot, v_head,
        k_page, k_tok, v_page, v_tok,
        batch,  # compact_batch_size
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
        STORE_LSE=False,
        SKIP_PREFIX=False,
        SKIP_EXTEND=False,
        HAS_SINK=sinks is not None,
        STORE_TRANSPOSE=False,
        USE_COMPACT_TILE_GRID=False,
        PAGE_SIZE=page_size,
        SCORE_MOD=None,
        Aux0=None,
        aux0_stride_t=0,
        aux0_stride_h=0,
        aux0_len=0,
        num_warps=warps,
        num_stages=1,
    )
    if warmup:
        return _fwd_kernel.warmup(*args, grid=grid, **kwargs)
    return _fwd_kernel[grid](*args, **kwargs)

"""standins.py - the Triton stand-ins of SGLang's and vLLM's attention kernels
that tests/gpu/bench_attention.py still times (GPU).

Kept for that benchmark only: the GPU test (test_reroute.py) and the oracle
(oracle_extend.py, oracle_decode.py) launch the frameworks' own kernels from
their released packages (tests/oracle/fetch.sh).  They mirror:

  _fwd_kernel                  SGLang 0.5.14's
                               sglang/srt/layers/attention/triton_ops/extend_attention.py
                               (rule sglang-extend-2026-03: k_scale/v_scale, no
                               LSE), MLA absorbed Lq 576 / Lv 512 at BLOCK
                               32x64, 8 warps, 1 stage: 106496 B of shared
                               memory (bf16 and FP8 cache)
  _fwd_grouped_kernel_stage1   vLLM 0.33.0's
                               vllm/v1/attention/ops/triton_decode_attention.py
                               (rule vllm-mla-decode-2026-06: page strides,
                               k_scale/v_scale pointers), BLOCK_N 32, BLOCK_H
                               16, 4 warps, 2 stages: 102400 B with an FP8
                               cache, 63488 B with bf16
  _fwd_kernel_stage2           vLLM 0.33.0's split-KV merge (never over the limit)

The kernels are written for this project from the frameworks' interfaces and
the math; no framework code is copied.  What must match the frameworks is
the interface: the function name (it becomes the cubin entry name), the
parameter names and order, which parameters are tl.constexpr (Triton 3.6
then drops the same ones: constexprs, None pointers, ints equal to 1, and
appends two scratch pointers), the grid, num_warps and num_stages, and the
order of the loads and dots, which decides the shared memory: per key block
the 512-wide latent part of the keys loaded "transposed" ([D, BLOCK_N]) and
dotted, then the 64-wide rope part loaded and dotted, the softmax step, then
the values [BLOCK_N, DV] loaded and dotted; queries (latent and rope apart)
loaded once before the loops.  An FP8 prefix in the extend kernel is
converted to bf16 before its dots, so its figure is the bf16 one.

Usage (needs a CUDA GPU, PyTorch, Triton and the packages in $SM120_ORACLE,
default $SM120_BUILD/oracle):
  python3 tests/gpu/standins.py check
      the stand-ins and the releases they mirror on the same inputs
      (test_reroute.py's Kimi K2 TP8 cases, bf16 and FP8 caches, k_scale
      and v_scale distinct and not 1): ok when the compiled kernels have the
      same shared memory and cubin parameter count, and every output of the
      stand-in is within 2 x the framework kernel's own error + 1 bf16 ulp
      of test_reroute.py's float64 reference.
"""
import os
import sys

import torch
import triton
import triton.language as tl

# -----------------------------------------------------------------------------
# Shared helpers
# -----------------------------------------------------------------------------


@triton.jit
def _tanh(x):
    """tanh through the logistic function: tanh(x) = 2 sigmoid(2x) - 1."""
    return 2 * tl.sigmoid(2 * x) - 1


@triton.jit
def _online_softmax_step(scores, run_max, run_sum):
    """One block of keys in a streaming softmax.

    Returns the block's unnormalised probabilities exp(s - m'), the factor
    exp(m - m') that rescales what was accumulated so far, and the new running
    max m' and sum.  A row whose scores are all -inf (a padding row) keeps a
    finite max so that it yields zeros rather than NaN.
    """
    blk_max = tl.max(scores, 1)
    blk_max = tl.where(blk_max == float("-inf"), -1e20, blk_max)
    new_max = tl.maximum(run_max, blk_max)
    rescale = tl.exp(run_max - new_max)
    probs = tl.exp(scores - new_max[:, None])
    new_sum = run_sum * rescale + tl.sum(probs, 1)
    return probs, rescale, new_max, new_sum


# -----------------------------------------------------------------------------
# SGLang extend attention, 0.5.14's interface (sglang-extend-2026-03)
# -----------------------------------------------------------------------------


@triton.jit
def _extend_attention(
    Q_Extend,
    K_Extend,
    V_Extend,
    O_Extend,
    K_Buffer,
    V_Buffer,
    qo_indptr,
    kv_indptr,
    kv_indices,
    sink_ptr,
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
    STORE_TRANSPOSE: tl.constexpr,
    HAS_SINK: tl.constexpr,
):
    """Extend attention: BLOCK_M new tokens of one sequence and one q head.

    Program (seq, head, m): rows m*BLOCK_M .. of sequence seq's extend tokens
    attend to every cached prefix key (slots kv_indices[kv_indptr[seq] ..
    kv_indptr[seq+1]] of K_Buffer/V_Buffer, scores scaled by sm_scale*k_scale,
    values by v_scale) and then to the extend keys 0..row (IS_CAUSAL) or all
    of them (scores scaled by sm_scale).  An FP8 cache is converted to the
    query dtype (exact for e4m3 -> bf16) before the dots.  Inlined into
    `_fwd_kernel`.
    """
    # The stand-ins cover the features the tests launch; the others must be off.
    tl.static_assert(not USE_CUSTOM_MASK, "stand-in: custom masks are not implemented")
    tl.static_assert(SLIDING_WINDOW_SIZE <= 0, "stand-in: sliding windows are not implemented")
    tl.static_assert(xai_temperature_len <= 0, "stand-in: xai temperature is not implemented")
    tl.static_assert(not STORE_TRANSPOSE, "stand-in: STORE_TRANSPOSE (HIP) is not implemented")

    seq = tl.program_id(0)
    head = tl.program_id(1)
    mblk = tl.program_id(2)
    kv_head = head // kv_group_num

    ext_first = tl.load(qo_indptr + seq)
    ext_len = tl.load(qo_indptr + seq + 1) - ext_first
    pre_first = tl.load(kv_indptr + seq)
    pre_len = tl.load(kv_indptr + seq + 1) - pre_first

    rows = mblk * BLOCK_M + tl.arange(0, BLOCK_M)  # positions among the extend tokens
    row_ok = rows < ext_len
    ch = tl.arange(0, BLOCK_DMODEL)  # latent channels of q/k
    ch_ok = ch < Lq
    vch = tl.arange(0, BLOCK_DV)  # channels of v/o
    vch_ok = vch < Lv
    cols = tl.arange(0, BLOCK_N)

    # Queries: loaded once, latent and rope parts apart.
    q_row = Q_Extend + (ext_first + rows)[:, None] * stride_qbs + head * stride_qh
    q = tl.load(q_row + ch[None, :], mask=row_ok[:, None] & ch_ok[None, :], other=0.0)
    if BLOCK_DPE > 0:
        pch = BLOCK_DMODEL + tl.arange(0, BLOCK_DPE)  # rope channels
        qpe = tl.load(q_row + pch[None, :], mask=row_ok[:, None], other=0.0)

    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)
    run_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    run_max = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")

    # Part 1: the cached prefix, gathered through kv_indices.
    for n0 in range(0, pre_len, BLOCK_N):
        n0 = tl.multiple_of(n0, BLOCK_N)
        col_ok = (n0 + cols) < pre_len
        slot = tl.load(kv_indices + pre_first + n0 + cols, mask=col_ok, other=0)
        k_at = K_Buffer + slot[None, :] * stride_buf_kbs + kv_head * stride_buf_kh
        kt = tl.load(k_at + ch[:, None], mask=col_ok[None, :] & ch_ok[:, None], other=0.0)
        if kt.dtype.is_fp8():
            kt = kt.to(tl.float32).to(q.dtype)
        s = tl.dot(q, kt)
        if BLOCK_DPE > 0:
            kpet = tl.load(k_at + pch[:, None], mask=col_ok[None, :], other=0.0)
            if kpet.dtype.is_fp8():
                kpet = kpet.to(tl.float32).to(qpe.dtype)
            s += tl.dot(qpe, kpet)
        s *= sm_scale * k_scale
        if logit_cap > 0:
            s = logit_cap * _tanh(s / logit_cap)
        s = tl.where(row_ok[:, None] & col_ok[None, :], s, float("-inf"))
        probs, rescale, run_max, run_sum = _online_softmax_step(s, run_max, run_sum)

        v_at = V_Buffer + slot[:, None] * stride_buf_vbs + kv_head * stride_buf_vh
        v = tl.load(v_at + vch[None, :], mask=col_ok[:, None] & vch_ok[None, :], other=0.0)
        if v.dtype.is_fp8():
            v = v.to(tl.float32).to(q.dtype)
        acc = acc * rescale[:, None] + tl.dot(probs.to(v.dtype), v) * v_scale

    # Part 2: the extend tokens themselves (the causal triangle).
    if IS_CAUSAL:
        ext_end = tl.minimum(ext_len, (mblk + 1) * BLOCK_M)
    else:
        ext_end = ext_len
    for n0 in range(0, ext_end, BLOCK_N):
        n0 = tl.multiple_of(n0, BLOCK_N)
        col_ok = (n0 + cols) < ext_end
        keep = row_ok[:, None] & col_ok[None, :]
        if IS_CAUSAL:
            keep &= rows[:, None] >= (n0 + cols)[None, :]
        tok = ext_first + n0 + cols
        k_at = K_Extend + tok[None, :] * stride_kbs + kv_head * stride_kh
        kt = tl.load(k_at + ch[:, None], mask=col_ok[None, :] & ch_ok[:, None], other=0.0)
        s = tl.dot(q, kt)
        if BLOCK_DPE > 0:
            kpet = tl.load(k_at + pch[:, None], mask=col_ok[None, :], other=0.0)
            s += tl.dot(qpe, kpet)
        s *= sm_scale
        if logit_cap > 0:
            s = logit_cap * _tanh(s / logit_cap)
        s = tl.where(keep, s, float("-inf"))
        probs, rescale, run_max, run_sum = _online_softmax_step(s, run_max, run_sum)

        v_at = V_Extend + tok[:, None] * stride_vbs + kv_head * stride_vh
        v = tl.load(v_at + vch[None, :], mask=col_ok[:, None] & vch_ok[None, :], other=0.0)
        acc = acc * rescale[:, None] + tl.dot(probs.to(v.dtype), v)

    if HAS_SINK:
        # gpt-oss style sink: one extra logit per head that takes probability mass.
        run_sum += tl.exp(tl.load(sink_ptr + head) - run_max)

    out = acc / run_sum[:, None]
    o_at = O_Extend + (ext_first + rows)[:, None] * stride_obs + head * stride_oh + vch[None, :]
    tl.store(o_at, out.to(O_Extend.dtype.element_ty), mask=row_ok[:, None] & vch_ok[None, :])


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
    """SGLang extend attention, 0.5.14's interface (k_scale/v_scale, no LSE):
    the math is _extend_attention's."""
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


def extend_block_sizes(Lq, Lv):
    """(BLOCK_DMODEL, BLOCK_DPE, BLOCK_DV, BLOCK_M, BLOCK_N, num_warps) for CUDA.

    The tiles SGLang chose for compute capability >= 9 before the SM120 branch
    of 2026-01-29 (#14311), which is also what an SM120 card got then: the
    configuration the shim must reroute.  Chosen here whatever the device is.
    """
    if Lq == 576:
        dmodel, dpe = 512, 64
    elif Lq == 288:
        dmodel, dpe = 256, 32
    elif Lq == 192:
        dmodel, dpe = 128, 64
    else:
        dmodel, dpe = triton.next_power_of_2(Lq), 0
    bm, bn = (128, 64) if Lq <= 256 else (32, 64)
    return dmodel, dpe, triton.next_power_of_2(Lv), bm, bn, 4 if Lq <= 64 else 8


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
    warmup=False,
    tiles=None,
):
    """Launch `_fwd_kernel` as SGLang 0.5.14's extend_attention_fwd does.

    tiles=(BLOCK_M, BLOCK_N) replaces the Hopper tiles (the benchmark's SM120
    configuration, SGLang's own SM120 branch: (32, 32) for Lq 576).

    q/k/v/o_extend are [tokens, heads, dim] (k, v: kv heads); k/v_buffer are
    [slots, kv heads, dim]; the indptrs are int32 [batch + 1], kv_indices
    int64.  k_scale/v_scale are Python floats (1.0 without a quantized cache).
    Returns the compiled kernel (warmup=True: compile only, no launch).
    """
    Lq, Lv = q_extend.shape[-1], v_extend.shape[-1]
    dmodel, dpe, dv, bm, bn, warps = extend_block_sizes(Lq, Lv)
    if tiles:
        bm, bn = tiles
    sm_scale = sm_scale or 1.0 / (Lq**0.5)
    batch, heads = qo_indptr.shape[0] - 1, q_extend.shape[1]
    grid = (batch, heads, triton.cdiv(max_len_extend, bm))
    args = (
        q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer,
        qo_indptr, kv_indptr, kv_indices,
        custom_mask, mask_indptr, sinks, window_kv_offsets,
        float(sm_scale), float(k_scale), float(v_scale),
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
        Lq=Lq,
        Lv=Lv,
        BLOCK_DMODEL=dmodel,
        BLOCK_DPE=dpe,
        BLOCK_DV=dv,
        BLOCK_M=bm,
        BLOCK_N=bn,
        USE_CUSTOM_MASK=custom_mask is not None,
        IS_CAUSAL=is_causal,
        SKIP_PREFIX_CUSTOM_MASK=skip_prefix_custom_mask,
        STORE_TRANSPOSE=False,
        HAS_SINK=sinks is not None,
        num_warps=warps,
        num_stages=1,
    )
    if warmup:
        return _fwd_kernel.warmup(*args, grid=grid, **kwargs)
    return _fwd_kernel[grid](*args, **kwargs)


# -----------------------------------------------------------------------------
# vLLM TRITON_MLA decode, 0.33.0's interface (vllm-mla-decode-2026-06)
# -----------------------------------------------------------------------------


@triton.jit
def _fwd_grouped_kernel_stage1(
    Q,
    K_Buffer,
    V_Buffer,
    sm_scale,
    Req_to_tokens,
    B_Seqlen,
    Att_Out,
    stride_req_to_tokens_b,
    stride_qbs,
    stride_qh,
    stride_buf_kpbs,
    stride_buf_kbs,
    stride_buf_kh,
    stride_buf_vpbs,
    stride_buf_vbs,
    stride_buf_vh,
    stride_mid_ob,
    stride_mid_oh,
    stride_mid_os,
    k_scale,
    v_scale,
    kv_group_num: tl.constexpr,
    q_head_num: tl.constexpr,
    BLOCK_DMODEL: tl.constexpr,
    BLOCK_DPE: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_H: tl.constexpr,
    NUM_KV_SPLITS: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    logit_cap: tl.constexpr,
    Lk: tl.constexpr,
    Lv: tl.constexpr,
    IS_MLA: tl.constexpr = False,
):
    """Split-KV decode, stage 1: one query token, up to BLOCK_H q heads of one kv head.

    Program (b, hb, split) covers tokens [split*len, min((split+1)*len, seq))
    of sequence b, len = cdiv(seq, NUM_KV_SPLITS); token t lives in page
    Req_to_tokens[b, t // PAGE_SIZE], row t % PAGE_SIZE.  It writes the split's
    normalised output to Att_Out[b, h, split, :Lv] and its log-sum-exp (natural
    log) to Att_Out[b, h, split, Lv]; empty splits write nothing.  An FP8 cache
    is dequantised as (k * k_scale) rounded to the query dtype; with IS_MLA the
    values are the first BLOCK_DV channels of those dequantised keys.
    """
    b = tl.program_id(0)
    hb = tl.program_id(1)
    split = tl.program_id(2)

    HEADS: tl.constexpr = BLOCK_H if kv_group_num > BLOCK_H else kv_group_num  # valid rows
    kv_head = hb // tl.cdiv(kv_group_num, BLOCK_H)
    heads = hb * HEADS + tl.arange(0, BLOCK_H)
    head_ok = (heads < (hb + 1) * HEADS) & (heads < q_head_num)

    ch = tl.arange(0, BLOCK_DMODEL)
    ch_ok = ch < Lk
    vch = tl.arange(0, BLOCK_DV)
    vch_ok = vch < Lv
    seq_len = tl.load(B_Seqlen + b)

    q_row = Q + b * stride_qbs + heads[:, None] * stride_qh
    q = tl.load(q_row + ch[None, :], mask=head_ok[:, None] & ch_ok[None, :], other=0.0,
                cache_modifier=".ca")
    if BLOCK_DPE > 0:
        pch = BLOCK_DMODEL + tl.arange(0, BLOCK_DPE)
        pch_ok = pch < Lk
        qpe = tl.load(q_row + pch[None, :], mask=head_ok[:, None] & pch_ok[None, :], other=0.0,
                      cache_modifier=".ca")

    per_split = tl.cdiv(seq_len, NUM_KV_SPLITS)
    lo = per_split * split
    hi = tl.minimum(lo + per_split, seq_len)

    run_max = tl.zeros([BLOCK_H], dtype=tl.float32) - float("inf")
    run_sum = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_DV], dtype=tl.float32)

    if hi > lo:
        # Channel offsets hoisted out of the loop; only the token part changes.
        k_ch = kv_head * stride_buf_kh + ch[:, None]
        v_ch = kv_head * stride_buf_vh + vch[None, :]
        if BLOCK_DPE > 0:
            kpe_ch = kv_head * stride_buf_kh + pch[:, None]
        kscale = tl.load(k_scale)
        vscale = tl.load(v_scale)
        table = Req_to_tokens + stride_req_to_tokens_b * b
        for n0 in tl.range(lo, hi, BLOCK_N):
            pos = n0 + tl.arange(0, BLOCK_N)
            pos_ok = pos < hi
            # page numbers in int64: page * page stride can pass 2^31
            page = tl.load(table + pos // PAGE_SIZE, mask=pos_ok, other=0,
                           cache_modifier=".ca").to(tl.int64)
            k_tok = page * stride_buf_kpbs + (pos % PAGE_SIZE) * stride_buf_kbs

            kt = tl.load(K_Buffer + k_tok[None, :] + k_ch, mask=pos_ok[None, :] & ch_ok[:, None],
                         other=0.0, cache_modifier=".cg")
            if kt.dtype.is_fp8():
                kt = (kt.to(tl.float32) * kscale).to(q.dtype)
            s = tl.dot(q, kt.to(q.dtype))
            if BLOCK_DPE > 0:
                kpet = tl.load(K_Buffer + k_tok[None, :] + kpe_ch,
                               mask=pos_ok[None, :] & pch_ok[:, None], other=0.0,
                               cache_modifier=".cg")
                if kpet.dtype.is_fp8():
                    kpet = (kpet.to(tl.float32) * kscale).to(qpe.dtype)
                s += tl.dot(qpe, kpet.to(qpe.dtype))
            s *= sm_scale
            if logit_cap > 0:
                s = logit_cap * _tanh(s / logit_cap)
            s = tl.where(head_ok[:, None] & pos_ok[None, :], s, float("-inf"))

            if IS_MLA:
                # MLA: V is the latent part of the same cache row, already in registers.
                tl.static_assert(BLOCK_DV == BLOCK_DMODEL, "MLA reads V from the K tile")
                v = tl.trans(kt)
            else:
                v_tok = page * stride_buf_vpbs + (pos % PAGE_SIZE) * stride_buf_vbs
                v = tl.load(V_Buffer + v_tok[:, None] + v_ch,
                            mask=pos_ok[:, None] & vch_ok[None, :], other=0.0)
                if v.dtype.is_fp8():
                    v = (v.to(tl.float32) * vscale).to(q.dtype)

            new_max = tl.maximum(tl.max(s, 1), run_max)
            rescale = tl.exp(run_max - new_max)
            probs = tl.exp(s - new_max[:, None])
            acc *= rescale[:, None]
            acc += tl.dot(probs.to(v.dtype), v)
            run_sum = run_sum * rescale + tl.sum(probs, 1)
            run_max = new_max

        out_row = Att_Out + b * stride_mid_ob + heads * stride_mid_oh + split * stride_mid_os
        tl.store(out_row[:, None] + vch[None, :], acc / run_sum[:, None],
                 mask=head_ok[:, None] & vch_ok[None, :])
        tl.store(out_row + Lv, run_max + tl.log(run_sum), mask=head_ok)


@triton.jit
def _fwd_kernel_stage2(
    Mid_O,
    o,
    lse,
    B_Seqlen,
    stride_mid_ob,
    stride_mid_oh,
    stride_mid_os,
    stride_obs,
    stride_oh,
    stride_lse_bs,
    NUM_KV_SPLITS: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    Lv: tl.constexpr,
    OUTPUT_FP16: tl.constexpr = 0,
):
    """Split-KV decode, stage 2: merge the non-empty splits of (b, h) by their lse."""
    b = tl.program_id(0)
    h = tl.program_id(1)
    seq_len = tl.load(B_Seqlen + b)
    vch = tl.arange(0, BLOCK_DV)
    vch_ok = vch < Lv
    row = Mid_O + b * stride_mid_ob + h * stride_mid_oh

    best = -float("inf")
    total = 0.0
    acc = tl.zeros([BLOCK_DV], dtype=tl.float32)
    per_split = tl.cdiv(seq_len, NUM_KV_SPLITS)
    for sp in range(0, NUM_KV_SPLITS):
        lo = per_split * sp
        hi = tl.minimum(lo + per_split, seq_len)
        if hi > lo:
            part = tl.load(row + sp * stride_mid_os + vch, mask=vch_ok, other=0.0)
            part_lse = tl.load(row + sp * stride_mid_os + Lv)
            new_best = tl.maximum(part_lse, best)
            keep = tl.exp(best - new_best)
            w = tl.exp(part_lse - new_best)
            acc = acc * keep + w * part
            total = total * keep + w
            best = new_best

    res = acc / total
    if OUTPUT_FP16:
        res = res.to(tl.float16)
    tl.store(o + b * stride_obs + h * stride_oh + vch, res, mask=vch_ok)
    tl.store(lse + b * stride_lse_bs + h, best + tl.log(total))


def num_kv_splits_for(max_seq_len, sm_count):
    """vLLM TRITON_MLA's split count: next_pow2(max(1, len // 512)), at most 2 per SM."""
    return min(triton.next_power_of_2(max(1, max_seq_len // 512)), 2 * sm_count)


def page_stride(buf, page_size):
    """Elements between pages: dim -4 of a 4-D cache, or of a 3-D one split into pages."""
    if buf.dim() == 3:
        buf = buf.unflatten(-3, (-1, page_size))
    return buf.stride(-4)


def decode_attention_fwd(
    q,
    k_buffer,
    v_buffer,
    o,
    lse,
    req_to_token,
    b_seq_len,
    attn_logits,
    num_kv_splits,
    sm_scale,
    page_size=1,
    logit_cap=0.0,
    k_scale=None,
    v_scale=None,
    is_mla=False,
    warmup=False,
    num_stages=None,
):
    """Launch stage 1 and stage 2 as vLLM's decode_attention_fwd (grouped path) does.

    num_stages replaces stage 1's pipeline depth (the benchmark's SM120
    configuration: 1, which fits with an FP8 cache).

    q [B, H, Lk]; k_buffer [pages, page_size, kv heads, Lk] (MLA: 1 kv head,
    v_buffer its [..., :Lv] view); o [B, H, Lv]; lse [B, H]; req_to_token
    int32 [B, pages per sequence]; b_seq_len int32 [B]; attn_logits fp32
    [B, H, num_kv_splits, Lv + 1]; k_scale / v_scale fp32 device scalars.
    Returns (stage 1, stage 2) compiled kernels (warmup=True: compile only).
    """
    assert num_kv_splits == attn_logits.shape[2]
    if k_scale is None:
        k_scale = torch.tensor(1.0, dtype=torch.float32, device=q.device)
    if v_scale is None:
        v_scale = torch.tensor(1.0, dtype=torch.float32, device=q.device)
    Lk, Lv = k_buffer.shape[-1], v_buffer.shape[-1]
    batch, heads = q.shape[0], q.shape[1]
    group = heads // v_buffer.shape[-2]
    if group == 1:
        raise NotImplementedError("stand-in: only vLLM's grouped path (kv_group_num > 1)")

    if is_mla and Lk == 576:
        dmodel, dpe = 512, 64
    elif is_mla and Lk == 288:
        dmodel, dpe = 256, 32
    elif is_mla:
        dmodel = triton.next_power_of_2(Lv)
        dpe = triton.next_power_of_2(Lk - Lv) if Lk > Lv else 0
    else:
        dmodel, dpe = triton.next_power_of_2(Lk), 0
    dv = triton.next_power_of_2(Lv)
    block_n, block_h = 32, 16
    stages = num_stages or (1 if dmodel >= 1024 else 2)

    grid1 = (batch, triton.cdiv(heads, min(block_h, group)), num_kv_splits)
    args1 = (
        q, k_buffer, v_buffer, float(sm_scale), req_to_token, b_seq_len, attn_logits,
        req_to_token.stride(0), q.stride(0), q.stride(1),
        page_stride(k_buffer, page_size), k_buffer.stride(-3), k_buffer.stride(-2),
        page_stride(v_buffer, page_size), v_buffer.stride(-3), v_buffer.stride(-2),
        attn_logits.stride(0), attn_logits.stride(1), attn_logits.stride(2),
        k_scale, v_scale,
    )
    kwargs1 = dict(
        kv_group_num=group, q_head_num=heads, BLOCK_DMODEL=dmodel, BLOCK_DPE=dpe, BLOCK_DV=dv,
        BLOCK_N=block_n, BLOCK_H=block_h, NUM_KV_SPLITS=num_kv_splits, PAGE_SIZE=page_size,
        logit_cap=logit_cap, Lk=Lk, Lv=Lv, IS_MLA=is_mla, num_warps=4, num_stages=stages,
    )
    grid2 = (batch, heads)
    args2 = (
        attn_logits, o, lse, b_seq_len,
        attn_logits.stride(0), attn_logits.stride(1), attn_logits.stride(2),
        o.stride(0), o.stride(1), lse.stride(0),
    )
    kwargs2 = dict(NUM_KV_SPLITS=num_kv_splits, BLOCK_DV=dv, Lv=Lv, num_warps=4, num_stages=2)
    if warmup:
        return (_fwd_grouped_kernel_stage1.warmup(*args1, grid=grid1, **kwargs1),
                _fwd_kernel_stage2.warmup(*args2, grid=grid2, **kwargs2))
    k1 = _fwd_grouped_kernel_stage1[grid1](*args1, **kwargs1)
    k2 = _fwd_kernel_stage2[grid2](*args2, **kwargs2)
    return k1, k2


KV_DTYPES = {"bf16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn}


# -----------------------------------------------------------------------------
# check: the stand-ins against the releases they mirror
# -----------------------------------------------------------------------------


def _check_main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import test_reroute as tr
    from reroute_tap import bf16_ulp, cubin_param_count

    bad = 0
    for kv in KV_DTYPES:
        for case in (tr.make_extend(kv, tr.EXTEND_SEQS, tr.SEED, "0514"),
                     tr.make_decode(kv, tr.DECODE_LENS, tr.SEED, "03300")):
            d = case.inputs
            real = case.launch()
            torch.cuda.synchronize()
            theirs = tr.views(case.kind, case.outputs_cpu())
            case.reset_outputs()
            if case.kind == "extend":
                k, buf = d["k_ext"], d["k_buffer"]
                mine = [extend_attention_fwd(
                    d["q"], k, k[..., :tr.LV], case.outputs["o"], buf, buf[..., :tr.LV],
                    d["qo_indptr"], d["kv_indptr"], d["kv_indices"], None, True, None,
                    d["max_len_extend"], d["k_scale"], d["v_scale"], sm_scale=d["sm_scale"])]
                ref = tr.ref_extend(d, "cuda")
            else:
                cache = d["kv_cache"]
                mine = list(decode_attention_fwd(
                    d["q"], cache, cache[..., :tr.LV], case.outputs["o"], case.outputs["lse"],
                    d["block_table"], d["seq_lens"], case.outputs["att"], d["num_kv_splits"],
                    d["sm_scale"], d["page_size"], k_scale=case.k_scale_t,
                    v_scale=case.v_scale_t, is_mla=True))
                ref = tr.ref_decode(d, "cuda")
            torch.cuda.synchronize()
            ours = tr.views(case.kind, case.outputs_cpu())
            ref = tr.views(case.kind, ref)
            for a, b in zip(mine, real):
                fa = (a.metadata.shared, cubin_param_count(a))
                fb = (b.metadata.shared, cubin_param_count(b))
                bad += fa != fb
                print(f"{'ok' if fa == fb else 'not ok'} - check {case.name}: {a.metadata.name} "
                      f"(shared memory, cubin parameters): stand-in {fa}, {case.release}'s {fb}")
            for key, r in ref.items():
                ulp = bf16_ulp(r[torch.isfinite(r)].abs().max().item())
                e_s, e_r = tr.max_err(ours[key], r), tr.max_err(theirs[key], r)
                good = e_s <= 2 * e_r + ulp
                bad += not good
                print(f"{'ok' if good else 'not ok'} - check {case.name} {key}: stand-in max|err| "
                      f"{e_s:.3g} vs float64, {case.release}'s own {e_r:.3g} (<= 2 x it + 1 "
                      f"bf16 ulp {2 * e_r + ulp:.3g})")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "check":
        sys.exit(_check_main())
    print(__doc__)
    sys.exit(2)

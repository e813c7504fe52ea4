"""standins_moe.py - Triton stand-ins for the frameworks' fused-MoE kernels (GPU tests).

The shim recognises a Triton launch by kernel name, cubin parameter sizes and
dynamic shared memory (rules/*.json).  These kernels reproduce, for the GPU
tests, what a driver-level observer sees of the fused-MoE expert GEMMs at the
Hopper configurations that overflow SM120 (CONFIGS below):

  fused_moe_kernel            SGLang, 2026-03 signature (a_desc, b_desc, bias
                              before c_ptr; stride_bias_e/n): here
  fused_moe_kernel            SGLang upstream main: the same plus add_mask_ptr
                              after num_tokens_post_padded_ptr
                              (standins_moe_sglang_main.py)
  fused_moe_kernel            vLLM (b_bias_ptr after c_ptr; stride_bbe/bbn
                              last; always masks K; grid from a clamped EM)
                              (standins_moe_vllm.py)
  fused_moe_kernel_gptq_awq   SGLang's W4A16 kernel (N and K constexpr),
                              int4 weights packed two per byte along K: here

Each signature is a module-level function named as the framework names it
(Triton names the cubin entry after the Python function), so the two other
`fused_moe_kernel`s live in modules of their own; all of them inline the one
helper _moe_gemm below.  The kernels are written for this project from the
frameworks' interfaces at the releases the rules name (rules/fused_moe.json
"source") and the math; no framework code is copied.  What must
match the frameworks is the interface: names, parameter order, which are
tl.constexpr (Triton 3.6 drops constexprs, None arguments and ints equal to
1, then appends two scratch pointers), the grid, num_warps, num_stages, and
the order of the loads and dots in the K loop (it decides the shared memory).

Semantics (all signatures): 1-D grid cdiv(EM, BLOCK_SIZE_M) * cdiv(N,
BLOCK_SIZE_N) with the GROUP_SIZE_M swizzle; a program whose row block starts
at or past *num_tokens_post_padded returns; its rows are routed ids
sorted_token_ids[...] (valid when < num_valid_tokens), all of expert
expert_ids[pid_m] (-1: the expert is on another rank, valid rows are written
as zeros); routed id r reads activation row r // top_k and writes C row r:

    acc = sum_k A[r // top_k, k] * W[e, n, k]          (fp32)
    fp8 per-tensor:  acc *= a_scale[0] * b_scale[e]    (after the K loop)
    fp8 per-channel: acc *= a_scale[row] * b_scale[e, n]
    fp8 block:       acc += dot_g * a_scale[row, g] * b_scale[e, n / 128, g]
                     per 128-wide K group g (BLOCK_SIZE_K divides 128)
    int4 (gptq):     W = bf16((u - 8) * b_scale[e, n, k / group_size]), u the
                     nibble (low nibble = even k) of B [E, N, K / 2] bytes
    MUL_ROUTED_WEIGHT: acc *= topk_weights[r]
    C[r, n] = bf16(acc) for n < N

Also here: the framework-side helpers the tests and the benchmark share
(moe_align: own torch implementation of moe_align_block_size; the FP8
activation quantisers; the launch-argument builders of each framework), the
configuration table CONFIGS, the model shapes MODELS, and the expected cubin
parameter counts EXPECTED_PARAMS.

Usage (needs a CUDA GPU, PyTorch and Triton):
  python3 tests/gpu/standins_moe.py smem [--jobs N]
      compile (no launch) every stand-in launch the GPU test makes (each
      signature, quantisation, model and half: gate/up and down) for this
      GPU and for sm_120 (Triton's own ptxas, target forced as standins.py
      --arch does, in child processes: the JIT fixes its target per device
      at first use), and print one "# " line per case with metadata.shared
      on both and the cubin parameter count, then "ok - ..." / "not ok - ..."
      lines: parameter counts as expected, every configuration over SM120's
      101376 B, and within this GPU's opt-in limit (the plain run needs it).
      If the int4 configuration fits SM120 or does not fit this GPU, the
      alternatives in INT4_ALTERNATIVES are compiled too, to pick one.
"""
import json
import os
import re
import subprocess
import sys
from typing import NamedTuple

import torch
import triton
import triton.language as tl

# -----------------------------------------------------------------------------
# Tables: models, quantisations, the over-limit configurations
# -----------------------------------------------------------------------------

SM120_SMEM_LIMIT = 101376   # opt-in shared memory per block on SM120
TOP_K = 8                   # experts per token (Kimi K2 and GLM-4.x)

# name -> (experts, hidden size, intermediate size per TP8 rank): the gate/up
# weight w1 is [E, 2*I, hidden], the down weight w2 [E, hidden, I].
MODELS = {
    "kimi": (384, 7168, 256),   # Kimi K2 at TP8: w1 N = 512
    "glm": (160, 5120, 192),    # GLM-4.7 at TP8: w1 N = 384
}

QUANTS = ("fp8_tensor", "fp8_channel", "fp8_block", "bf16", "int4")
FP8_BLOCK_SHAPE = (128, 128)  # (group_n, group_k) of block-quantised FP8
INT4_GROUP = 32               # K elements per bf16 scale (W4A16)


def _cfg(bm, bn, bk, gm, warps, stages):
    return dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=gm,
                num_warps=warps, num_stages=stages)


# quant -> the launch configuration the shim must reroute: Hopper-tuned, over
# SM120's 101376 B (sm_120 allocates num_stages - 1 buffers of A and B tiles:
# (4 - 1) * (128*128 + 128*256) * 1 B = 147456 for FP8, and the same bytes for
# bf16 at BLOCK_SIZE_K 64).  FP8 per-tensor/per-channel: SGLang's default FP8
# config (no tuned file for the device; also in H200 files for GLM E=160/161
# N=384); block FP8 and bf16: the same tile made to overflow likewise (a
# copied Hopper file); int4: see INT4_ALTERNATIVES.  One table for the test
# (test_moe_reroute.py), the benchmark (bench_moe.py) and the smem figures.
CONFIGS = {
    "fp8_tensor": _cfg(128, 256, 128, 32, 8, 4),
    "fp8_channel": _cfg(128, 256, 128, 32, 8, 4),
    "fp8_block": _cfg(128, 256, 128, 32, 8, 4),
    "bf16": _cfg(128, 256, 64, 32, 8, 4),
    "int4": _cfg(128, 256, 128, 32, 8, 4),
}

# Other int4 configurations `smem` compiles when CONFIGS["int4"] turns out to
# fit SM120, or not to fit this GPU (not measured where this was written: the
# packed B tile is read with byte gathers, so how Triton stages it is not
# obvious).  Larger ones first, then smaller ones.
INT4_ALTERNATIVES = [
    _cfg(128, 256, 256, 32, 8, 4),
    _cfg(256, 128, 128, 32, 8, 4),
    _cfg(128, 256, 128, 32, 8, 5),
    _cfg(128, 256, 128, 32, 8, 3),
    _cfg(64, 256, 128, 32, 8, 4),
]

# (signature, quant) -> cubin parameters: the runtime parameters Triton keeps
# (no constexprs, no None pointers, no ints equal to 1) + 2 scratch pointers.
#   fused_moe_kernel, SGLang 2026-03 (main alike: add_mask_ptr is None):
#     pointers a, b, c, a_scale, b_scale, topk_weights, sorted ids, expert ids,
#     num_tokens_post_padded (9; a_desc, b_desc, bias are None); N, K, EM,
#     num_valid_tokens (4); stride_am, stride_be, stride_bn, stride_bias_e,
#     stride_bias_n (0: kept), stride_cm (6; stride_ak/bk/cn are 1);
#     stride_asm, stride_ask, stride_bse, stride_bsk, stride_bsn (5, all 0
#     for per-tensor scales) -> 24 + 2 = 26.  Per-channel: A_scale [M, 1] and
#     B_scale [E, N, 1] make stride_asm, stride_ask, stride_bsk, stride_bsn 1
#     -> 22.  Block: stride_ask and stride_bsk are 1 -> 24.  bf16: no scale
#     pointers, scale strides 0 -> 24.
#   fused_moe_kernel, vLLM: no bias strides in the middle but stride_bbe,
#     stride_bbn (0) at the end: the same counts.
#   fused_moe_kernel_gptq_awq: 8 pointers (b_zp None), EM, num_valid_tokens
#     (N, K constexpr), stride_am, stride_be, stride_bn, stride_cm, stride_bse,
#     stride_bsn, stride_bze/bzk/bzn (0) -> 19 + 2 = 21.
_FUSED_PARAMS = {"fp8_tensor": 26, "fp8_channel": 22, "fp8_block": 24, "bf16": 24}
EXPECTED_PARAMS = {(sig, q): n for sig in ("sglang", "sglang_main", "vllm")
                   for q, n in _FUSED_PARAMS.items()}
EXPECTED_PARAMS[("sglang", "int4")] = 21


def kernel_name(quant):
    """The cubin entry name a launch of this quantisation has."""
    return "fused_moe_kernel_gptq_awq" if quant == "int4" else "fused_moe_kernel"


def smem_formula(config, quant):
    """SM120's shared memory for a pipelined GEMM as measured for fused_moe_kernel:
    (num_stages - 1) * (BM*BK + BK*BN) * element bytes (block FP8 adds a few
    hundred bytes of scales; int4 is not covered: None)."""
    if quant == "int4":
        return None
    eb = 2 if quant == "bf16" else 1
    bm, bn, bk = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]
    return (config["num_stages"] - 1) * (bm * bk + bk * bn) * eb


def smem_of(compiled):
    """Dynamic shared memory (bytes) Triton computed for a compiled kernel."""
    return compiled.metadata.shared


def cubin_param_count(compiled):
    """Parameters of the kernel's PTX entry (runtime args + 2 scratch pointers)."""
    ptx = compiled.asm["ptx"]
    m = re.search(r"\.entry\s+\w+\s*\((.*?)\)", ptx, re.S)
    return len(re.findall(r"\.param\b", m.group(1))) if m else -1


# -----------------------------------------------------------------------------
# The math every signature shares
# -----------------------------------------------------------------------------


@triton.jit
def _moe_gemm(
    a_ptr,
    b_ptr,
    c_ptr,
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
    group_n: tl.constexpr,
    group_k: tl.constexpr,
    group_size: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    MUL_ROUTED_WEIGHT: tl.constexpr,
    top_k: tl.constexpr,
    compute_type: tl.constexpr,
    use_fp8_w8a8: tl.constexpr,
    per_channel_quant: tl.constexpr,
    use_int4_w4a16: tl.constexpr,
    even_Ks: tl.constexpr,
):
    """One [BLOCK_SIZE_M, BLOCK_SIZE_N] tile of C for one expert's row block.

    B is [E, N, K] (int4: [E, N, K / 2] bytes) and read as [BLOCK_SIZE_K,
    BLOCK_SIZE_N] tiles; A rows are gathered through the routed ids.  Columns
    past N are read wrapped (n % N) and never stored, so B needs no N mask.
    even_Ks (K a multiple of BLOCK_SIZE_K) leaves the K masks out.  Inlined
    into every signature's kernel, so all compile to the same code.
    """
    # Row blocks in groups of GROUP_SIZE_M, column blocks fastest within a
    # group, so that programs running together share A rows and B columns.
    pid = tl.program_id(axis=0)
    blocks_m = tl.cdiv(EM, BLOCK_SIZE_M)
    blocks_n = tl.cdiv(N, BLOCK_SIZE_N)
    per_group = GROUP_SIZE_M * blocks_n
    first_m = (pid // per_group) * GROUP_SIZE_M
    rows_here = tl.minimum(blocks_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (pid % per_group) % rows_here
    pid_n = (pid % per_group) // rows_here

    # Row blocks past the aligned routing are empty.
    if pid_m * BLOCK_SIZE_M >= tl.load(num_tokens_post_padded_ptr):
        return
    slot = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M).to(tl.int64)
    ids = tl.load(sorted_token_ids_ptr + slot).to(tl.int64)   # routed ids (padding: >= valid)
    row_ok = ids < num_valid_tokens
    a_row = ids // top_k                                     # activation row of each id
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)

    cols = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_at = c_ptr + ids[:, None] * stride_cm + cols[None, :] * stride_cn
    c_ok = row_ok[:, None] & (cols[None, :] < N)
    if expert == -1:
        # The expert lives on another rank: its rows contribute zeros.
        tl.store(c_at, tl.zeros([BLOCK_SIZE_M, BLOCK_SIZE_N], dtype=compute_type), mask=c_ok)
        return

    b_cols = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N).to(tl.int64)) % N
    ks = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + a_row[:, None] * stride_am + ks[None, :] * stride_ak
    if use_int4_w4a16:
        # Two k per byte: k reads byte k // 2, its low nibble when k is even.
        b_ptrs = (b_ptr + expert * stride_be + (ks // 2)[:, None] * stride_bk
                  + b_cols[None, :] * stride_bn)
        nibble_shift = (ks % 2)[:, None] * 4
        bs_ptrs = b_scale_ptr + expert * stride_bse + b_cols[None, :] * stride_bsn
    else:
        b_ptrs = b_ptr + expert * stride_be + ks[:, None] * stride_bk + b_cols[None, :] * stride_bn

    # FP8 scales: block scales are read per K step, the others once.
    if use_fp8_w8a8:
        if group_k > 0 and group_n > 0:
            tl.static_assert(group_k % BLOCK_SIZE_K == 0, "a K tile must lie in one scale group")
            as_ptrs = a_scale_ptr + a_row * stride_asm
            bs_ptrs = b_scale_ptr + expert * stride_bse + (b_cols // group_n) * stride_bsn
        elif per_channel_quant:
            a_scale = tl.load(a_scale_ptr + a_row * stride_asm, mask=row_ok, other=0.0)
            b_scale = tl.load(b_scale_ptr + expert * stride_bse + b_cols * stride_bsn)
        else:
            a_scale = tl.load(a_scale_ptr)
            b_scale = tl.load(b_scale_ptr + expert)

    acc = tl.zeros([BLOCK_SIZE_M, BLOCK_SIZE_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_SIZE_K):
        k_ok = ks < K - k0
        if even_Ks:
            a = tl.load(a_ptrs, mask=row_ok[:, None], other=0.0)
        else:
            a = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        if use_int4_w4a16:
            if even_Ks:
                packed = tl.load(b_ptrs)
                scale = tl.load(bs_ptrs + ((k0 + ks) // group_size)[:, None] * stride_bsk)
            else:
                packed = tl.load(b_ptrs, mask=k_ok[:, None], other=0)
                scale = tl.load(bs_ptrs + ((k0 + ks) // group_size)[:, None] * stride_bsk,
                                mask=k_ok[:, None], other=0.0)
            u = (packed >> nibble_shift) & 0xF
            # the weight is rounded to the activation type before the dot
            w = ((u.to(tl.float32) - 8.0) * scale.to(tl.float32)).to(compute_type)
            acc = tl.dot(a, w, acc=acc)
        else:
            if even_Ks:
                b = tl.load(b_ptrs)
            else:
                b = tl.load(b_ptrs, mask=k_ok[:, None], other=0.0)
            if use_fp8_w8a8:
                if group_k > 0 and group_n > 0:
                    g = k0 // group_k
                    a_scale = tl.load(as_ptrs + g * stride_ask, mask=row_ok, other=0.0)
                    b_scale = tl.load(bs_ptrs + g * stride_bsk)
                    acc += tl.dot(a, b) * a_scale[:, None] * b_scale[None, :]
                else:
                    acc = tl.dot(a, b, acc=acc)
            else:
                acc += tl.dot(a, b)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        if use_int4_w4a16:
            b_ptrs += (BLOCK_SIZE_K // 2) * stride_bk
        else:
            b_ptrs += BLOCK_SIZE_K * stride_bk

    if use_fp8_w8a8:
        if group_k == 0 or group_n == 0:
            if per_channel_quant:
                acc *= a_scale[:, None] * b_scale[None, :]
            else:
                acc *= a_scale * b_scale
    if MUL_ROUTED_WEIGHT:
        routed_w = tl.load(topk_weights_ptr + ids, mask=row_ok, other=0.0)
        acc *= routed_w[:, None]
    tl.store(c_at, acc.to(compute_type), mask=c_ok)


# -----------------------------------------------------------------------------
# SGLang 2026-03: fused_moe_kernel and fused_moe_kernel_gptq_awq
# -----------------------------------------------------------------------------


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
    """SGLang's fused-MoE GEMM, 2026-03 interface: the math is _moe_gemm's.
    TMA descriptors and the bias are not implemented (the tests pass None)."""
    if a_desc is not None:
        tl.static_assert(False, "stand-in: a_desc (TMA) is not implemented")
    if b_desc is not None:
        tl.static_assert(False, "stand-in: b_desc (TMA) is not implemented")
    if bias_ptr is not None:
        tl.static_assert(False, "stand-in: bias is not implemented")
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


@triton.jit
def fused_moe_kernel_gptq_awq(
    a_ptr,
    b_ptr,
    c_ptr,
    b_scale_ptr,
    b_zp_ptr,
    topk_weights_ptr,
    sorted_token_ids_ptr,
    expert_ids_ptr,
    num_tokens_post_padded_ptr,
    N: tl.constexpr,
    K: tl.constexpr,
    EM,
    num_valid_tokens,
    stride_am,
    stride_ak,
    stride_be,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    stride_bse,
    stride_bsk,
    stride_bsn,
    stride_bze,
    stride_bzk,
    stride_bzn,
    group_size: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    MUL_ROUTED_WEIGHT: tl.constexpr,
    top_k: tl.constexpr,
    compute_type: tl.constexpr,
    has_zp: tl.constexpr,
    use_int4_w4a16: tl.constexpr,
    even_Ks: tl.constexpr,
):
    """SGLang's W4A16/W8A16 MoE GEMM (gptq/awq): int4 without zero points only
    (the stored nibble is q + 8), bf16 scales per group_size along K."""
    tl.static_assert(use_int4_w4a16, "stand-in: only int4 (W4A16) is implemented")
    tl.static_assert(not has_zp, "stand-in: zero points are not implemented")
    _moe_gemm(
        a_ptr, b_ptr, c_ptr, None, b_scale_ptr, topk_weights_ptr,
        sorted_token_ids_ptr, expert_ids_ptr, num_tokens_post_padded_ptr,
        N, K, EM, num_valid_tokens,
        stride_am, stride_ak, stride_be, stride_bk, stride_bn, stride_cm, stride_cn,
        0, 0, stride_bse, stride_bsk, stride_bsn,
        0, 0, group_size,
        BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M,
        MUL_ROUTED_WEIGHT, top_k, compute_type, False, False,
        True, even_Ks,
    )


# -----------------------------------------------------------------------------
# Launch arguments, as each framework builds them
# -----------------------------------------------------------------------------


class Launch(NamedTuple):
    """One kernel launch: the JIT function, grid, positional and keyword arguments."""
    kernel: object
    grid: tuple
    args: tuple
    kwargs: dict

    def run(self):
        """Launch; returns Triton's compiled kernel."""
        return self.kernel[self.grid](*self.args, **self.kwargs)

    def warmup(self):
        """Compile (no launch); returns the compiled kernel."""
        return self.kernel.warmup(*self.args, grid=self.grid, **self.kwargs)


def quant_kwargs(quant):
    """The quantisation constexprs of fused_moe_kernel for a test quantisation."""
    assert quant in QUANTS and quant != "int4", quant
    block = quant == "fp8_block"
    return dict(group_n=FP8_BLOCK_SHAPE[0] if block else 0,
                group_k=FP8_BLOCK_SHAPE[1] if block else 0,
                use_fp8_w8a8=quant.startswith("fp8"),
                per_channel_quant=quant == "fp8_channel")


def a_scale_strides(a_scale):
    """(stride_asm, stride_ask): A_scale's strides if it is 2-D, else 0, 0."""
    if a_scale is not None and a_scale.ndim == 2:
        return a_scale.stride(0), a_scale.stride(1)
    return 0, 0


def b_scale_strides(b_scale):
    """(stride_bse, stride_bsk, stride_bsn) as both frameworks pass them:
    B_scale.stride(0), stride(2), stride(1), each 0 where B_scale lacks it."""
    if b_scale is None:
        return 0, 0, 0
    return (b_scale.stride(0) if b_scale.ndim >= 2 else 0,
            b_scale.stride(2) if b_scale.ndim == 3 else 0,
            b_scale.stride(1) if b_scale.ndim >= 2 else 0)


def sglang_launch(A, B, C, A_scale, B_scale, topk_weights, topk_ids, sorted_token_ids,
                  expert_ids, num_tokens_post_padded, mul_routed_weight, top_k, config,
                  quant):
    """The launch SGLang's invoke_fused_moe_kernel (2026-03) makes, A already
    quantised (SGLang quantises inside; the test does it before the call).

    A [rows, K] (FP8 for fp8_*), B [E, N, K] (int4: uint8 [E, N, K / 2]), C
    with rows of stride C.stride(-2) (the tests: [M, top_k, N]), topk_ids
    [M, top_k] (only its numel is read), sorted_token_ids / expert_ids /
    num_tokens_post_padded from moe_align.  int4 goes to
    fused_moe_kernel_gptq_awq (block_shape [0, INT4_GROUP]).  No MoE padding
    (SGLANG_MOE_PADDING unset), no TMA, no bias, filter_expert on.
    """
    cfg = dict(config)
    grid = (triton.cdiv(sorted_token_ids.shape[0], cfg["BLOCK_SIZE_M"])
            * triton.cdiv(B.shape[1], cfg["BLOCK_SIZE_N"]),)
    # SGLang decides even_Ks on B.shape[2], packed bytes for int4.
    even_ks = B.shape[2] % cfg["BLOCK_SIZE_K"] == 0
    common = dict(MUL_ROUTED_WEIGHT=mul_routed_weight, top_k=top_k, compute_type=tl.bfloat16,
                  even_Ks=even_ks, **cfg)
    if quant == "int4":
        assert B.dtype == torch.uint8 and B_scale is not None and B_scale.ndim == 3
        args = (
            A, B, C, B_scale, None, topk_weights, sorted_token_ids, expert_ids,
            num_tokens_post_padded,
            B.shape[1], A.shape[1], sorted_token_ids.shape[0], topk_ids.numel(),
            A.stride(0), A.stride(1), B.stride(0), B.stride(2), B.stride(1),
            C.stride(-2), C.stride(-1),
            B_scale.stride(0), B_scale.stride(2), B_scale.stride(1),
            0, 0, 0,   # no zero points
        )
        return Launch(fused_moe_kernel_gptq_awq, grid, args,
                      dict(group_size=INT4_GROUP, has_zp=False, use_int4_w4a16=True, **common))
    args = (
        A, None, B, None, None, C, A_scale, B_scale, topk_weights, sorted_token_ids,
        expert_ids, num_tokens_post_padded,
        B.shape[1], B.shape[2], sorted_token_ids.shape[0], topk_ids.numel(),
        A.stride(0), A.stride(1), B.stride(0), B.stride(2), B.stride(1),
        0, 0,      # no bias
        C.stride(-2), C.stride(-1),
        *a_scale_strides(A_scale), *b_scale_strides(B_scale),
    )
    return Launch(fused_moe_kernel, grid, args, dict(**quant_kwargs(quant), **common))


def moe_signatures():
    """signature -> (launch builder, quantisations the tests launch it with).

    Imported here rather than at the top: standins_moe_*.py import this module
    for the math.  All builders take sglang_launch's arguments.
    """
    import standins_moe_sglang_main as sglang_main
    import standins_moe_vllm as vllm

    fused = tuple(q for q in QUANTS if q != "int4")
    return {
        "sglang": (sglang_launch, QUANTS),
        "sglang_main": (sglang_main.sglang_main_launch, fused),
        "vllm": (vllm.vllm_launch, fused),
    }


# -----------------------------------------------------------------------------
# Framework-side steps the tests reproduce in torch: routing alignment and the
# FP8 activation quantisation
# -----------------------------------------------------------------------------


def moe_align(topk_ids, block_m, num_experts, framework="sglang"):
    """moe_align_block_size: (sorted_token_ids, expert_ids, num_tokens_post_padded).

    Routed id r = token * top_k + j (position in topk_ids flattened).  Experts
    in ascending order, each with its routed ids ascending, padded with the
    value numel to a multiple of block_m; expert_ids names the expert of each
    block_m rows; num_tokens_post_padded [1] is the padded total.  The rest of
    sorted_token_ids is numel, of expert_ids 0 (never read: past
    num_tokens_post_padded).  Buffer sizes as the framework allocates them:
    SGLang numel + (E + 1) * (block_m - 1), or numel * block_m when numel <
    E + 1; vLLM numel + E * (block_m - 1), at most numel * block_m when
    numel < E.  int32 tensors on topk_ids' device.
    """
    dev = topk_ids.device
    numel = topk_ids.numel()
    if framework == "vllm":
        size = numel + num_experts * (block_m - 1)
        if numel < num_experts:
            size = min(numel * block_m, size)
    elif numel < num_experts + 1:
        size = numel * block_m
    else:
        size = numel + (num_experts + 1) * (block_m - 1)
    flat = topk_ids.reshape(-1).to(torch.int64)
    counts = torch.bincount(flat, minlength=num_experts)
    padded = (counts + block_m - 1) // block_m * block_m
    start = torch.cumsum(padded, 0) - padded          # first slot of each expert
    first = torch.cumsum(counts, 0) - counts          # first index among the sorted ids
    by_expert, order = torch.sort(flat, stable=True)  # ids grouped by expert, ascending
    rank = torch.arange(numel, device=dev) - first[by_expert]
    sorted_ids = torch.full((size,), numel, dtype=torch.int32, device=dev)
    sorted_ids[start[by_expert] + rank] = order.to(torch.int32)
    total = int(padded.sum())
    expert_ids = torch.zeros(triton.cdiv(size, block_m), dtype=torch.int32, device=dev)
    expert_ids[:total // block_m] = torch.repeat_interleave(
        torch.arange(num_experts, device=dev, dtype=torch.int32), padded // block_m)
    post = torch.tensor([total], dtype=torch.int32, device=dev)
    return sorted_ids, expert_ids, post


FP8_MAX = 448.0  # largest finite E4M3 value


def quantize_act(x, quant):
    """(A, A_scale) as the kernel reads them for activations x [rows, K] bf16.

    bf16 and int4 (W4A16): x itself, no scale.  FP8 (dynamic): fp8_tensor one
    fp32 scale [1] = amax / 448 over x; fp8_channel one per row [rows, 1];
    fp8_block one per row and 128-wide K group [rows, cdiv(K, 128)].  A zero
    row or group gets a tiny scale (its values are 0 either way).  A is
    x / scale rounded to E4M3 (contiguous), scales contiguous fp32.
    """
    if quant in ("bf16", "int4"):
        return x, None
    xf = x.float()
    rows, k = xf.shape
    if quant == "fp8_tensor":
        scale = (xf.abs().amax().clamp(min=1e-12) / FP8_MAX).reshape(1)
        full = scale
    elif quant == "fp8_channel":
        scale = xf.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / FP8_MAX
        full = scale
    else:
        g = FP8_BLOCK_SHAPE[1]
        groups = triton.cdiv(k, g)
        padded = torch.nn.functional.pad(xf, (0, groups * g - k))
        scale = padded.view(rows, groups, g).abs().amax(dim=2).clamp(min=1e-12) / FP8_MAX
        full = scale.repeat_interleave(g, dim=1)[:, :k]
    q = (xf / full).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.contiguous(), scale.contiguous()


# -----------------------------------------------------------------------------
# Small example launches (compile figures, enforce, refuse)
# -----------------------------------------------------------------------------


def example_launch(sig, quant, model, half, config=None, dev="cuda", experts=8, tokens=4):
    """A small launch with the test's layout and the model's real N and K.

    half "gate_up": A = hidden [tokens, hidden], B = w1 [experts, 2*I, hidden],
    top_k 8, no routed weight; "down": A = [tokens * 8, I], B = w2 [experts,
    hidden, I], top_k 1, routed weight.  Every token routed to experts 0..7
    (so experts >= 8).  Zero data: for compiling and launching, not results.
    """
    assert experts >= TOP_K
    _, hidden, inter = MODELS[model]
    config = config or CONFIGS[quant]
    n, k = (2 * inter, hidden) if half == "gate_up" else (hidden, inter)
    rows = tokens if half == "gate_up" else tokens * TOP_K
    act = torch.zeros(rows, k, dtype=torch.bfloat16, device=dev)
    a, a_scale = quantize_act(act, quant)
    if quant == "int4":
        b = torch.zeros(experts, n, k // 2, dtype=torch.uint8, device=dev)
        b_scale = torch.ones(experts, n, k // INT4_GROUP, dtype=torch.bfloat16, device=dev)
    elif quant == "bf16":
        b, b_scale = torch.zeros(experts, n, k, dtype=torch.bfloat16, device=dev), None
    else:
        b = torch.zeros(experts, n, k, dtype=torch.uint8, device=dev).view(torch.float8_e4m3fn)
        b_scale = {"fp8_tensor": lambda: torch.ones(experts, device=dev),
                   "fp8_channel": lambda: torch.ones(experts, n, 1, device=dev),
                   "fp8_block": lambda: torch.ones(experts, triton.cdiv(n, 128),
                                                   triton.cdiv(k, 128), device=dev)}[quant]()
    topk_ids = torch.arange(TOP_K, dtype=torch.int32, device=dev).repeat(tokens, 1)
    topk_w = torch.full((tokens, TOP_K), 1.0 / TOP_K, device=dev)
    c = torch.empty(tokens, TOP_K, n, dtype=torch.bfloat16, device=dev)
    framework = "vllm" if sig == "vllm" else "sglang"
    sorted_ids, expert_ids, post = moe_align(topk_ids, config["BLOCK_SIZE_M"], experts, framework)
    build = moe_signatures()[sig][0]
    return build(a, b, c, a_scale, b_scale, topk_w, topk_ids, sorted_ids, expert_ids, post,
                 half == "down", TOP_K if half == "gate_up" else 1, config, quant)


# -----------------------------------------------------------------------------
# Figures: python3 standins_moe.py smem
# -----------------------------------------------------------------------------

HALVES = ("gate_up", "down")


def smem_cases():
    """Every (signature, quant, model, half, config label) the GPU test launches,
    then the int4 alternatives (Kimi gate/up), labelled 'alt<i>'."""
    cases = []
    for sig, (_, quants) in moe_signatures().items():
        for quant in quants:
            for model in MODELS:
                for half in HALVES:
                    cases.append((sig, quant, model, half, "table"))
    for i in range(len(INT4_ALTERNATIVES)):
        cases.append(("sglang", "int4", "kimi", "gate_up", f"alt{i}"))
    return cases


def _smem_child(argv):
    """smem-one [--arch A] I J ...: compile cases I, J, ... of smem_cases();
    print one JSON object per case."""
    arch = None
    if "--arch" in argv:
        i = argv.index("--arch")
        arch = int(argv[i + 1])
        del argv[i:i + 2]
        from triton.backends.compiler import GPUTarget
        # Before anything compiles: the JIT reads the target once per device.
        triton.runtime.driver.active.get_current_target = lambda: GPUTarget("cuda", arch, 32)
    native = "sm_%d%d" % torch.cuda.get_device_capability()
    cases = smem_cases()
    for i in map(int, argv):
        sig, quant, model, half, label = cases[i]
        config = CONFIGS[quant] if label == "table" else INT4_ALTERNATIVES[int(label[3:])]
        rec = dict(case=i, arch=f"sm_{arch}" if arch else native)
        try:
            k = example_launch(sig, quant, model, half, config).warmup()
            rec.update(smem=smem_of(k), params=cubin_param_count(k), name=k.metadata.name)
        except Exception as e:  # noqa: BLE001  (report and go on)
            rec.update(error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        print(json.dumps(rec), flush=True)
    return 0


def _smem_main(argv):
    jobs = 4
    if "--jobs" in argv:
        jobs = max(1, int(argv[argv.index("--jobs") + 1]))
    cases = smem_cases()
    table = [i for i, c in enumerate(cases) if c[4] == "table"]
    alts = [i for i, c in enumerate(cases) if c[4] != "table"]

    def compile_all(indices):
        """{(case, 'native'|'sm_120'): record}, children in parallel (both targets)."""
        procs = []
        chunks = [indices[j::jobs] for j in range(jobs) if indices[j::jobs]]
        for arch in (None, 120):
            for chunk in chunks:
                cmd = [sys.executable, os.path.abspath(__file__), "smem-one"]
                cmd += (["--arch", str(arch)] if arch else []) + [str(i) for i in chunk]
                procs.append((arch, subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)))
        out = {}
        for arch, p in procs:
            text, _ = p.communicate()
            for line in text.splitlines():
                if line.startswith("{"):
                    r = json.loads(line)
                    out[(r["case"], "sm_120" if arch else "native")] = r
            if p.returncode:
                print(f"# a compile child exited {p.returncode}")
        return out

    optin = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    native = "sm_%d%d" % torch.cuda.get_device_capability()
    print(f"# fused-MoE stand-ins, Triton {triton.__version__}: {native} (this GPU, opt-in "
          f"{optin} B) and sm_120 (limit {SM120_SMEM_LIMIT} B)")
    print(f"# {'signature':<12} {'quant':<12} {'model':<5} {'half':<8} {'config':<22} "
          f"{native + ' B':>10} {'sm_120 B':>10} {'formula':>8} {'params':>7} {'want':>5}")
    figures = compile_all(table)

    def row(i, config):
        sig, quant, model, half, _ = cases[i]
        nat, s120 = figures.get((i, "native"), {}), figures.get((i, "sm_120"), {})
        cfg = "{BLOCK_SIZE_M}x{BLOCK_SIZE_N}x{BLOCK_SIZE_K} g{GROUP_SIZE_M} w{num_warps} " \
              "s{num_stages}".format(**config)
        want = EXPECTED_PARAMS[(sig, quant)]
        form = smem_formula(config, quant)
        print(f"# {sig:<12} {quant:<12} {model:<5} {half:<8} {cfg:<22} "
              f"{nat.get('smem', '-'):>10} {s120.get('smem', '-'):>10} "
              f"{form if form is not None else '-':>8} {s120.get('params', '-'):>7} {want:>5}")
        for r in (nat, s120):
            if "error" in r:
                print(f"#   {r['arch']}: {r['error']}")
        return nat, s120

    results = {}
    for i in table:
        results[i] = row(i, CONFIGS[cases[i][1]])

    bad = 0
    groups = {}
    for i in table:
        groups.setdefault(cases[i][:2], []).append(i)
    for (sig, quant), idx in groups.items():
        want = EXPECTED_PARAMS[(sig, quant)]
        params = {results[i][t].get("params") for i in idx for t in (0, 1)}
        over = all((results[i][1].get("smem") or 0) > SM120_SMEM_LIMIT for i in idx)
        fits = all(0 < (results[i][0].get("smem") or 0) <= optin for i in idx)
        s120 = sorted({results[i][1].get("smem") for i in idx}, key=str)
        nat = sorted({results[i][0].get("smem") for i in idx}, key=str)
        for good, what in ((params == {want}, f"cubin parameters {sorted(params, key=str)} "
                                              f"(expected {want})"),
                           (over, f"sm_120 shared memory {s120} B over {SM120_SMEM_LIMIT}"),
                           (fits, f"{native} shared memory {nat} B within this GPU's {optin}")):
            bad += not good
            print(f"{'ok' if good else 'not ok'} - smem: {kernel_name(quant)}, {sig} signature, "
                  f"{quant}: {what}")

    int4 = [i for i in table if cases[i][1] == "int4"]
    int4_fits = any((results[i][1].get("smem") or 0) <= SM120_SMEM_LIMIT for i in int4)
    int4_too_big = any(not 0 < (results[i][0].get("smem") or 0) <= optin for i in int4)
    if (int4_fits or int4_too_big) and alts:
        print(f"# CONFIGS['int4'] {'fits sm_120' if int4_fits else 'does not fit ' + native}: "
              f"the alternatives (pick one over {SM120_SMEM_LIMIT} B on sm_120 and within "
              f"{optin} B on {native}):")
        figures.update(compile_all(alts))
        for j, i in enumerate(alts):
            row(i, INT4_ALTERNATIVES[j])
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] in ("smem", "smem-one"):
        # Run as the module `standins_moe`, the one standins_moe_*.py import:
        # one copy of the shared kernels in the process.
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import standins_moe

        if sys.argv[1] == "smem":
            sys.exit(standins_moe._smem_main(sys.argv[2:]))
        sys.exit(standins_moe._smem_child(sys.argv[2:]))
    print(__doc__)
    sys.exit(2)

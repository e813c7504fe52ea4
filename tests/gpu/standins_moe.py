"""standins_moe.py - the Triton stand-ins of SGLang's fused-MoE kernels that
tests/gpu/bench_moe.py still times (GPU).

Kept for that benchmark only: the GPU test (test_moe_reroute.py), the oracle
(oracle_moe.py) and the tuner (tune_moe.py) launch the frameworks' own
kernels from their released packages (tests/oracle/fetch.sh).  They mirror
the launch interface of SGLang 0.5.9's
sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_kernels.py (rules
sglang-moe-2026-03 and sglang-moe-gptq-awq):

  fused_moe_kernel            a_desc, b_desc, bias before c_ptr;
                              stride_bias_e/n; the FP8 / bf16 GEMM
  fused_moe_kernel_gptq_awq   the W4A16 kernel, int4 weights packed two per
                              byte along K

Each is named as SGLang names it (the cubin entry), and both inline
_moe_gemm below.  They are written for this project from SGLang's interface
and the math; no framework code is copied.  What must match SGLang is the
interface (names, parameter order, which are tl.constexpr: Triton 3.6 drops
constexprs, None arguments and ints equal to 1, then appends two scratch
pointers), the grid, num_warps, num_stages and the order of the loads and
dots in the K loop (it decides the shared memory); `check` verifies it.

Semantics: 1-D grid cdiv(EM, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N) with the
GROUP_SIZE_M swizzle; a program whose row block starts at or past
*num_tokens_post_padded returns; its rows are routed ids
sorted_token_ids[...] (valid when < num_valid_tokens), all of expert
expert_ids[pid_m] (-1: the expert is on another rank, valid rows are
written as zeros); routed id r reads activation row r // top_k and writes C
row r:

    acc = sum_k A[r // top_k, k] * W[e, n, k]          (fp32)
    fp8 per-tensor:  acc *= a_scale[0] * b_scale[e]    (after the K loop)
    fp8 per-channel: acc *= a_scale[row] * b_scale[e, n]
    fp8 block:       acc += dot_g * a_scale[row, g] * b_scale[e, n / 128, g]
                     per 128-wide K group g (BLOCK_SIZE_K divides 128)
    int4 (gptq):     W = bf16((u - 8) * b_scale[e, n, k / group_size]), u the
                     nibble (low nibble = even k) of B [E, N, K / 2] bytes
    MUL_ROUTED_WEIGHT: acc *= topk_weights[r]
    C[r, n] = bf16(acc) for n < N

The tables and torch helpers the benchmarks share (MODELS, CONFIGS,
moe_align, quantize_act, ...) live in tests/gpu/moe_cases.py and are
re-exported here for them.

Usage (needs a CUDA GPU, PyTorch, Triton and the packages in
$SM120_ORACLE, default $SM120_BUILD/oracle):
  python3 tests/gpu/standins_moe.py check
      each quantisation at its CONFIGS tile (gate/up, and the down launch
      with routed weights for FP8 per tensor; 8 experts of Kimi K2's N and a
      1024-wide K, 61 tokens, top_k 8, one expert on "another rank"): the
      stand-in and SGLang 0.5.9's own kernel (its invoke_fused_moe_kernel) on
      the same quantised operands.  ok when the compiled kernels have the
      same shared memory and cubin parameter count, and the stand-in's
      result is within 2 x SGLang's own error + 1 bf16 ulp of float64.
"""
import os
import sys
from typing import NamedTuple

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from moe_cases import (CONFIGS, FP8_BLOCK_SHAPE, FP8_MAX, INT4_GROUP, MODELS,  # noqa: E402,F401
                       QUANTS, SM120_SMEM_LIMIT, TOP_K, _cfg, kernel_name, moe_align,
                       quantize_act, smem_formula)
from reroute_tap import bf16_ulp, cubin_param_count  # noqa: E402,F401


def smem_of(compiled):
    """Dynamic shared memory (bytes) Triton computed for a compiled kernel."""
    return compiled.metadata.shared


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
# SGLang 0.5.9's interfaces: fused_moe_kernel and fused_moe_kernel_gptq_awq
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
    """SGLang's fused-MoE GEMM, 0.5.9's interface: the math is _moe_gemm's.
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
    """The launch SGLang 0.5.9's invoke_fused_moe_kernel makes, A already
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


# -----------------------------------------------------------------------------
# check: the stand-ins against SGLang 0.5.9's own kernels
# -----------------------------------------------------------------------------


def _reference(a, a_scale, b, b_scale, quant, topk_ids, topk_w, expert_of, down):
    """float64 [tokens, top_k, N]: routed row (t, j) = A_row . W[e] with the
    quantised operands (0 for an expert on another rank: expert_of[e] = -1),
    times the routed weight for the down launch."""
    if quant in ("bf16", "int4"):
        x = a.double()
    else:
        s = a_scale.double()
        x = a.double() * (s.repeat_interleave(FP8_BLOCK_SHAPE[1], 1)[:, :a.shape[1]]
                          if quant == "fp8_block" else s)
    if quant == "int4":
        w = torch.stack([b & 15, b >> 4], -1).flatten(-2).double() - 8
        w = (w * b_scale.double().repeat_interleave(INT4_GROUP, 2)).to(torch.bfloat16).double()
    elif quant == "bf16":
        w = b.double()
    elif quant == "fp8_block":
        w = b.double() * b_scale.double().repeat_interleave(128, 1).repeat_interleave(128, 2)
    else:
        w = b.double() * (b_scale.double() if quant == "fp8_channel"
                          else b_scale.double()[:, None, None])
    t, k = topk_ids.shape
    out = torch.zeros(t, k, w.shape[1], dtype=torch.float64, device=a.device)
    for e in range(w.shape[0]):
        if expert_of[e] < 0:
            continue
        tt, jj = (topk_ids == e).nonzero(as_tuple=True)
        out[tt, jj] = (x[tt * k + jj] if down else x[tt]) @ w[e].T
    if down:
        out *= topk_w.double()[:, :, None]
    return out


def _check_main():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
    import oracle_moe
    from reroute_tap import Tap

    mod = oracle_moe.sglang_module("0.5.9")
    for name in ("fused_moe_kernel", "fused_moe_kernel_gptq_awq"):
        if not isinstance(getattr(mod, name), Tap):
            setattr(mod, name, Tap(getattr(mod, name)))
    experts, tokens, hidden, dev = 8, 61, 1024, "cuda"
    n_up = 2 * MODELS["kimi"][2]
    g = torch.Generator(device=dev).manual_seed(20260905)
    topk_ids = torch.stack([torch.randperm(experts, generator=g, device=dev)
                            for _ in range(tokens)]).to(torch.int32).contiguous()
    topk_w = torch.rand(tokens, TOP_K, generator=g, device=dev) * 0.8 + 0.1
    bad = 0
    for quant, down in [(q, False) for q in QUANTS] + [("fp8_tensor", True)]:
        cfg = CONFIGS[quant]
        n, k = (hidden, n_up // 2) if down else (n_up, hidden)
        rows = tokens * TOP_K if down else tokens
        x = torch.randn(rows, k, generator=g, device=dev).to(torch.bfloat16)
        if quant == "int4":
            b = torch.randint(0, 256, (experts, n, k // 2), generator=g, device=dev,
                              dtype=torch.uint8)
            b_scale = ((torch.rand(experts, n, k // INT4_GROUP, generator=g, device=dev) + 0.5)
                       * 0.01).to(torch.bfloat16)
        elif quant == "bf16":
            b = (torch.randn(experts, n, k, generator=g, device=dev) * 0.05).to(torch.bfloat16)
            b_scale = None
        else:
            b = (torch.randn(experts, n, k, generator=g, device=dev) * 100).clamp(
                -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
            b_scale = {"fp8_tensor": lambda: torch.linspace(0.011, 0.018, experts, device=dev),
                       "fp8_channel": lambda: (torch.rand(experts, n, 1, generator=g,
                                                          device=dev) + 0.5) * 0.01,
                       "fp8_block": lambda: (torch.rand(experts, n // 128, k // 128, generator=g,
                                                        device=dev) + 0.5) * 0.01}[quant]()
        a, a_scale = quantize_act(x, quant)
        sorted_ids, expert_ids, post = moe_align(topk_ids, cfg["BLOCK_SIZE_M"], experts)
        used = int(post.item()) // cfg["BLOCK_SIZE_M"]
        expert_of = torch.arange(experts, device=dev)
        expert_of[experts - 1] = -1          # on another rank: its rows are zeros
        expert_ids[:used] = expert_of[expert_ids[:used].long()].to(torch.int32)
        top_k = 1 if down else TOP_K
        outs, kernels = [], []
        for who in ("stand-in", "SGLang 0.5.9"):
            c = torch.full((tokens, TOP_K, n), float("nan"), dtype=torch.bfloat16, device=dev)
            if who == "stand-in":
                kernels.append(sglang_launch(a, b, c, a_scale, b_scale, topk_w, topk_ids,
                                             sorted_ids, expert_ids, post, down, top_k, cfg,
                                             quant).run())
            else:
                # SGLang quantises inside: its quantisers return the same operands
                mod.scaled_fp8_quant = lambda *args, **kw: (a, a_scale)
                mod.sglang_per_token_group_quant_fp8 = lambda *args, **kw: (a, a_scale)
                mod.invoke_fused_moe_kernel(
                    x, b, None, c, None, b_scale, None, topk_w, topk_ids, sorted_ids,
                    expert_ids, post, down, top_k, dict(cfg), tl.bfloat16,
                    quant.startswith("fp8"), False, False, quant == "int4",
                    quant == "fp8_channel",
                    block_shape=([0, INT4_GROUP] if quant == "int4" else
                                 list(FP8_BLOCK_SHAPE) if quant == "fp8_block" else None))
                kernels.append(getattr(mod, kernel_name(quant)).last)
            torch.cuda.synchronize()
            outs.append(c)
        ref = _reference(a, a_scale, b, b_scale, quant, topk_ids, topk_w, expert_of, down)
        e_s, e_r = [(o.double() - ref).abs().max().item() for o in outs]
        ulp = bf16_ulp(ref.abs().max().item())
        figs = [(smem_of(kk), cubin_param_count(kk)) for kk in kernels]
        good = figs[0] == figs[1] and e_s <= 2 * e_r + ulp
        bad += not good
        print(f"{'ok' if good else 'not ok'} - check: {kernel_name(quant)} {quant} "
              f"{'down' if down else 'gate/up'}, {cfg['BLOCK_SIZE_M']}x{cfg['BLOCK_SIZE_N']}x"
              f"{cfg['BLOCK_SIZE_K']}: stand-in (shared memory, cubin parameters) {figs[0]}, "
              f"SGLang 0.5.9's {figs[1]}; max|err| vs float64 {e_s:.3g}, SGLang's own {e_r:.3g} "
              f"(<= 2 x SGLang + 1 bf16 ulp {2 * e_r + ulp:.3g})")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "check":
        sys.exit(_check_main())
    print(__doc__)
    sys.exit(2)

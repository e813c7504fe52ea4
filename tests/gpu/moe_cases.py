"""moe_cases.py - what the fused-MoE GPU test (test_moe_reroute.py), the
benchmarks (bench_moe.py, bench_patch.py) and the tuner (tune_moe.py) share:
the model shapes at TP8 (MODELS), the quantisations (QUANTS) and the Hopper
configurations that overflow SM120 (CONFIGS), and two framework-side steps
written in torch for this project: moe_align (moe_align_block_size's
buffers) and quantize_act (the FP8 activation quantisers of sgl-kernel and
vLLM, which are CUDA ops outside the released wheels' Triton files).  No
framework code is copied.
"""
import torch
import triton

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
# copied Hopper file); int4: the same tile.  One table for the test
# (test_moe_reroute.py) and the benchmark (bench_moe.py).
CONFIGS = {
    "fp8_tensor": _cfg(128, 256, 128, 32, 8, 4),
    "fp8_channel": _cfg(128, 256, 128, 32, 8, 4),
    "fp8_block": _cfg(128, 256, 128, 32, 8, 4),
    "bf16": _cfg(128, 256, 64, 32, 8, 4),
    "int4": _cfg(128, 256, 128, 32, 8, 4),
}


# (quant, BLOCK_SIZE_M) -> a configuration with shorter framework blocks that
# still overflows SM120, for the plan's rules that read BLOCK_SIZE_M (the
# 64-row tile where 64 rows divide it, the decode kernels where only smaller
# ones do).  SGLang 0.5.9's tuned files have BLOCK_SIZE_M 64 in 591 and 32
# in 88 of their 1537 buckets from 1024 tokens.  Shared memory as Triton 3.6
# gives fused_moe_kernel_gptq_awq (tests/oracle/moe_smem.py): 64x256x128, 4
# stages 114688 B on sm_120 and 131072 on sm_90; 32x256x256, 4 stages 180224
# on both, 147456 on the down GEMM, whose K (256, 192) is one k step (at
# BLOCK_SIZE_K 128 a 32-row block fits: 90112).
BLOCK_M_CONFIGS = {
    ("int4", 64): _cfg(64, 256, 128, 32, 8, 4),
    ("int4", 32): _cfg(32, 256, 256, 32, 8, 4),
    # bf16 and FP8 at BLOCK_SIZE_M 16 and bf16 at 32: the plan's four-warp row
    # tiles (moe_gemm.h MOE_GEMM_WARPS) where the decode kernels do not take the
    # launch; five stages overflow SM120 at (5 - 1) * (BM*BK + BK*BN) * bytes:
    # 139264 B (bf16 16 x 256 x 64, FP8 16 x 256 x 128), 147456 (bf16 32 rows)
    ("bf16", 16): _cfg(16, 256, 64, 1, 4, 5),
    ("bf16", 32): _cfg(32, 256, 64, 1, 4, 5),
    ("fp8_block", 16): _cfg(16, 256, 128, 1, 4, 5),
}


def config_of(quant, block_m=None):
    """The overflowing configuration of `quant` (CONFIGS), or its variant with
    BLOCK_SIZE_M `block_m` (BLOCK_M_CONFIGS; KeyError where there is none)."""
    if block_m is None or block_m == CONFIGS[quant]["BLOCK_SIZE_M"]:
        return CONFIGS[quant]
    return BLOCK_M_CONFIGS[(quant, block_m)]


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

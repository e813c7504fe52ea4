"""oracle_moe.py - SGLang's own fused_moe_kernel, from its released package
(0.5.9, tests/oracle/fetch.sh), as the oracle for the shim's fused-MoE rules
(GPU).

SGLang's invoke_fused_moe_kernel runs at each case's configuration: its
default FP8 one (128x256x128, GROUP_SIZE_M 32, 8 warps, 4 stages: 196608 B on
sm_90, 197632 B with 128x128 block scales), which the shim reroutes at its
exact tiles, and buckets of SGLang's own tuned files, which the tile-generic
rules reroute at their configuration (the compiled facts of the Python hook
give it).  The routing buffers are
what moe_align_block_size gives (per expert, the flat (token, slot) indices in
order, padded to BLOCK_SIZE_M with the sentinel numel; allocated to numel +
(E + 1) x (BLOCK_SIZE_M - 1)), built here in torch; the activation quantizers
(sgl-kernel's CUDA ops, not in the wheel) are torch functions of the same
definition, and what they return is saved for the reference.  Nothing of
SGLang is committed.

Cases, every scalar distinct and non-trivial: 97 tokens (odd), 8 experts,
top_k 3, hidden 1024, intermediate 512 (gate/up N 512, down N 1024):
  block   128x128 block scales (Kimi K2's layout): per-(token, 128-group)
          activation scales, per-(expert, 128x128) weight scales drawn in
          [0.5, 2] x 1e-2;
  tensor  per-tensor activation scale 0.0173 (static), per-expert weight
          scales 0.011 .. 0.018 (GLM-4.7's FP8 layout);
  channel per-token activation scales (dynamic, amax / 448), per-(expert,
          column) weight scales in [0.5, 2] x 1e-2 (per_channel_quant);
each at the default configuration as the gate/up launch (top_k 3, no routed
weight) and the down launch (one row per routed token, top_k 1, routed
weights in [0.1, 0.9]); then at tuned buckets (TUNED): the issue's
64x256x128 4-stage bucket of E=161,N=384 H200 per-channel FP8 (gate/up and
down), BLOCK_SIZE_M 16 of E=256,N=256 B200 block FP8 (swapped dot on sm_90,
as SGLang does there), BLOCK_SIZE_M 256 of E=160,N=384 B200 FP8.  Outputs
start as NaN.

  python3 tests/gpu/oracle_moe.py run OUT.pt      launch every case, save
  python3 tests/gpu/oracle_moe.py check PLAIN.pt SHIM.pt
        inputs identical; each output against float64 of the same quantised
        operands: the shim's error within 2 x SGLang's own error + 1 bf16 ulp
        of the largest |reference|.
Prints "ok - ..." / "not ok - ..." lines.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import frameworks  # noqa: E402
from reroute_tap import bf16_ulp  # noqa: E402,F401  (the spacing of bf16 at a magnitude)

SGLANG = ("sglang", "0.5.9", "sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_kernels.py")
CONFIG = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, GROUP_SIZE_M=32, num_warps=8,
              num_stages=4)


def tuned(bm, bn, bk, gm, warps, stages):
    """A bucket of a tuned config file."""
    return dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=gm,
                num_warps=warps, num_stages=stages)


# Buckets of SGLang 0.5.9's tuned files (fused_moe_triton/configs/triton_3_5_1/ and
# triton_3_4_0/), each over 101376 B on sm_90: (name, quant, down, config).
TUNED = [
    # E=161,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8,per_channel_quant=True.json
    # bucket 4096: 163840 B on sm_90 (the refusal)
    ("channel_gateup_64x256x128", "channel", False, tuned(64, 256, 128, 16, 4, 4)),
    ("channel_down_64x256x128", "channel", True, tuned(64, 256, 128, 16, 4, 4)),
    # E=256,N=256,device_name=NVIDIA_B200,dtype=fp8_w8a8,block_shape=[128, 128].json
    # bucket 8: BLOCK_SIZE_M 16 (140288 B on sm_90 with the swapped dot)
    ("block_gateup_bm16", "block", False, tuned(16, 256, 128, 32, 8, 4)),
    # E=160,N=384,device_name=NVIDIA_B200,dtype=fp8_w8a8.json bucket 3072:
    # BLOCK_SIZE_M 256 (163840 B on sm_90)
    ("tensor_gateup_bm256", "tensor", False, tuned(256, 256, 64, 16, 8, 5)),
]
TOKENS, EXPERTS, TOP_K, HIDDEN, INTER = 97, 8, 3, 1024, 512
A_SCALE = 0.0173
FP8_MAX = 448.0


def group_quant(a, group):
    """Per (row, group of @group columns) e4m3 quantisation: scale = amax / 448."""
    g = a.float().view(a.shape[0], -1, group)
    scale = (g.abs().amax(-1, keepdim=True) / FP8_MAX).clamp(min=1e-10)
    q = (g / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.view(a.shape), scale.squeeze(-1).contiguous()


def tensor_quant(a, scale):
    """Static per-tensor e4m3 quantisation with @scale (a one-element tensor)."""
    return (a.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def token_quant(a):
    """Dynamic per-token e4m3 quantisation: scale [rows, 1] = row amax / 448."""
    scale = (a.float().abs().amax(-1, keepdim=True) / FP8_MAX).clamp(min=1e-10)
    return (a.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def scaled_fp8_quant(a, scale=None, use_per_token_if_dynamic=False):
    """sgl-kernel's scaled_fp8_quant: static per tensor, or dynamic per token."""
    return token_quant(a) if scale is None and use_per_token_if_dynamic else tensor_quant(a, scale)


def load():
    frameworks.STUBS["sglang"]()
    quant = sys.modules["sglang.srt.layers.quantization.fp8_kernel"]
    quant.sglang_per_token_group_quant_fp8 = quant.per_token_group_quant_fp8 = group_quant
    quant.scaled_fp8_quant = scaled_fp8_quant
    int8 = sys.modules["sglang.srt.layers.quantization.int8_kernel"]
    int8.per_token_group_quant_int8 = int8.per_token_quant_int8 = None
    int8.sglang_per_token_group_quant_int8 = None
    mod = frameworks.load(*SGLANG)
    # SGLang swaps the dot of small FP8 tiles on Hopper (should_enable_swap_ab)
    mod.is_sm90_supported = lambda: torch.cuda.get_device_capability() == (9, 0)
    return mod


def routing(topk_ids, experts, block_m):
    """moe_align_block_size's buffers for @topk_ids."""
    flat = topk_ids.flatten().cpu()
    numel = flat.numel()
    size = numel + (experts + 1) * (block_m - 1)
    sorted_ids = torch.full((size,), numel, dtype=torch.int32)
    expert_ids = torch.zeros((size + block_m - 1) // block_m, dtype=torch.int32)
    pos = 0
    for e in range(experts):
        idx = (flat == e).nonzero().flatten().to(torch.int32)
        n = (idx.numel() + block_m - 1) // block_m * block_m
        sorted_ids[pos:pos + idx.numel()] = idx
        expert_ids[pos // block_m:(pos + n) // block_m] = e
        pos += n
    dev = topk_ids.device
    return sorted_ids.to(dev), expert_ids.to(dev), torch.tensor([pos], dtype=torch.int32,
                                                                device=dev)


def make_case(quant, down, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    rows, k, n = (TOKENS * TOP_K, INTER, HIDDEN) if down else (TOKENS, HIDDEN, INTER)
    a = torch.randn(rows, k, generator=g, device="cuda").to(torch.bfloat16)
    b = (torch.randn(EXPERTS, n, k, generator=g, device="cuda") * 100).clamp(-FP8_MAX, FP8_MAX) \
        .to(torch.float8_e4m3fn)
    if quant == "block":
        b_scale = (torch.rand(EXPERTS, n // 128, k // 128, generator=g, device="cuda") * 1.5 + 0.5) * 1e-2
    elif quant == "channel":
        b_scale = (torch.rand(EXPERTS, n, 1, generator=g, device="cuda") * 1.5 + 0.5) * 1e-2
    else:
        b_scale = torch.linspace(0.011, 0.018, EXPERTS, device="cuda")
    scores = torch.rand(TOKENS, EXPERTS, generator=g, device="cuda")
    topk_ids = scores.topk(TOP_K, dim=1).indices.to(torch.int32)
    topk_weights = torch.rand(TOKENS, TOP_K, generator=g, device="cuda") * 0.8 + 0.1
    return dict(a=a, b=b, b_scale=b_scale, topk_ids=topk_ids, topk_weights=topk_weights)


def launch(mod, inp, quant, down, config):
    """SGLang's invoke_fused_moe_kernel on @inp at @config; returns the output
    and the quantised activations and scales it was given."""
    import triton.language as tl
    sorted_ids, expert_ids, ntpp = routing(inp["topk_ids"], EXPERTS, config["BLOCK_SIZE_M"])
    n = inp["b"].shape[1]
    out = torch.full((TOKENS, TOP_K, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    seen = {}
    quant_mod = sys.modules["sglang.srt.layers.quantization.fp8_kernel"]
    group, tensor = quant_mod.sglang_per_token_group_quant_fp8, quant_mod.scaled_fp8_quant

    def keep(fn):
        def wrapped(*args, **kw):
            seen["a"], seen["a_scale"] = fn(*args, **kw)
            return seen["a"], seen["a_scale"]
        return wrapped
    mod.sglang_per_token_group_quant_fp8 = keep(group)
    mod.scaled_fp8_quant = keep(tensor)
    a_scale = torch.tensor([A_SCALE], device="cuda") if quant == "tensor" else None
    mod.invoke_fused_moe_kernel(
        inp["a"], inp["b"], None, out, a_scale, inp["b_scale"], None, inp["topk_weights"],
        inp["topk_ids"], sorted_ids, expert_ids, ntpp, down, 1 if down else TOP_K, dict(config),
        tl.bfloat16, True, False, False, False, quant == "channel",
        block_shape=[128, 128] if quant == "block" else None)
    return out, seen["a"], seen["a_scale"]


def cases():
    """(name, quant, down, config): the default configuration's four, then TUNED."""
    return [(f"{q}_{'down' if d else 'gateup'}", q, d, CONFIG)
            for q in ("block", "tensor") for d in (False, True)] + TUNED


def run_all(seed_base=300):
    mod = load()
    saved = {}
    for i, (name, quant, down, config) in enumerate(cases()):
        inp = make_case(quant, down, seed_base + i)
        out, aq, a_scale = launch(mod, inp, quant, down, config)
        torch.cuda.synchronize()
        cpu = {k: v.cpu() for k, v in inp.items()}
        cpu.update(aq=aq.cpu(), a_scale=a_scale.cpu())
        saved[name] = (cpu, out.cpu())
    return saved


def reference(inp, quant, down):
    """float64 of SGLang's definition on the quantised operands."""
    aq = inp["aq"].double()
    a = aq * (inp["a_scale"].double().repeat_interleave(128, 1) if quant == "block"
              else inp["a_scale"].double())
    b = inp["b"].double()
    if quant == "block":
        b = b * inp["b_scale"].double().repeat_interleave(128, 1).repeat_interleave(128, 2)
    elif quant == "channel":
        b = b * inp["b_scale"].double()
    else:
        b = b * inp["b_scale"].double()[:, None, None]
    ids = inp["topk_ids"].long()
    out = torch.empty(TOKENS, TOP_K, b.shape[1], dtype=torch.float64)
    for t in range(TOKENS):
        for s in range(TOP_K):
            row = a[t * TOP_K + s] if down else a[t]
            out[t, s] = b[ids[t, s]] @ row
            if down:
                out[t, s] *= inp["topk_weights"][t, s].double()
    return out


def check(plain_path, shim_path):
    plain, shim = torch.load(plain_path), torch.load(shim_path)
    bad = 0
    for (name, quant, down, config) in cases():
        (pin, pout), (sin, sout) = plain[name], shim[name]
        same = all(torch.equal(pin[k].view(torch.uint8) if pin[k].dtype == torch.float8_e4m3fn
                               else pin[k], sin[k].view(torch.uint8)
                               if sin[k].dtype == torch.float8_e4m3fn else sin[k]) for k in pin)
        ref = reference(pin, quant, down)
        big = ref.abs().max().item()
        fw = (pout.double() - ref).abs().max().item()
        ours = (sout.double() - ref).abs().max().item()
        tol = 2 * fw + bf16_ulp(big)
        good = same and math.isfinite(ours) and ours <= tol
        bad += not good
        shape = "x".join(str(config[k]) for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"))
        print(f"{'ok' if good else 'not ok'} - SGLang {SGLANG[1]} fused_moe_kernel {name} "
              f"({shape}, {config['num_warps']} warps, {config['num_stages']} stages): "
              f"rerouted max |err| {ours:.3g} vs float64, SGLang's own {fw:.3g} "
              f"(ratio {ours / fw if fw else float('inf'):.2f}), passes under 2 x SGLang + 1 bf16 "
              f"ulp = {tol:.3g}" + ("" if same else "; the inputs differ between the runs"))
    return bad


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        torch.save(run_all(), sys.argv[2])
        print(f"ok - run ({'shim' if 'sm120shim' in os.environ.get('LD_PRELOAD', '') else 'no shim'})"
              f": {len(cases())} SGLang {SGLANG[1]} fused-MoE launches saved")
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(1 if check(sys.argv[2], sys.argv[3]) else 0)
    else:
        sys.exit(__doc__)

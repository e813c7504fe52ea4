"""oracle_moe.py - SGLang's own fused_moe_kernel, from its released package
(0.5.9, tests/oracle/fetch.sh), as the oracle for the shim's fused-MoE rules
(GPU).

SGLang's invoke_fused_moe_kernel runs at its default FP8 configuration
(128x256x128, GROUP_SIZE_M 32, 8 warps, 4 stages: 196608 B on sm_90, 197632 B
with 128x128 block scales), which the shim reroutes.  The routing buffers are
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
each as the gate/up launch (top_k 3, no routed weight) and the down launch
(one row per routed token, top_k 1, routed weights in [0.1, 0.9]).  Outputs
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

SGLANG = ("sglang", "0.5.9", "sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_kernels.py")
CONFIG = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, GROUP_SIZE_M=32, num_warps=8,
              num_stages=4)
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


def load():
    frameworks.STUBS["sglang"]()
    quant = sys.modules["sglang.srt.layers.quantization.fp8_kernel"]
    quant.sglang_per_token_group_quant_fp8 = quant.per_token_group_quant_fp8 = group_quant
    quant.scaled_fp8_quant = lambda a, scale=None, use_per_token_if_dynamic=False: \
        tensor_quant(a, scale)
    int8 = sys.modules["sglang.srt.layers.quantization.int8_kernel"]
    int8.per_token_group_quant_int8 = int8.per_token_quant_int8 = None
    int8.sglang_per_token_group_quant_int8 = None
    return frameworks.load(*SGLANG)


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
    else:
        b_scale = torch.linspace(0.011, 0.018, EXPERTS, device="cuda")
    scores = torch.rand(TOKENS, EXPERTS, generator=g, device="cuda")
    topk_ids = scores.topk(TOP_K, dim=1).indices.to(torch.int32)
    topk_weights = torch.rand(TOKENS, TOP_K, generator=g, device="cuda") * 0.8 + 0.1
    return dict(a=a, b=b, b_scale=b_scale, topk_ids=topk_ids, topk_weights=topk_weights)


def launch(mod, inp, quant, down):
    """SGLang's invoke_fused_moe_kernel on @inp; returns the output and the
    quantised activations and scales it was given."""
    import triton.language as tl
    sorted_ids, expert_ids, ntpp = routing(inp["topk_ids"], EXPERTS, CONFIG["BLOCK_SIZE_M"])
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
    a_scale = None if quant == "block" else torch.tensor([A_SCALE], device="cuda")
    mod.invoke_fused_moe_kernel(
        inp["a"], inp["b"], None, out, a_scale, inp["b_scale"], None, inp["topk_weights"],
        inp["topk_ids"], sorted_ids, expert_ids, ntpp, down, 1 if down else TOP_K, dict(CONFIG),
        tl.bfloat16, True, False, False, False, False,
        block_shape=[128, 128] if quant == "block" else None)
    return out, seen["a"], seen["a_scale"]


def cases():
    return [(q, d) for q in ("block", "tensor") for d in (False, True)]


def run_all(seed_base=300):
    mod = load()
    saved = {}
    for i, (quant, down) in enumerate(cases()):
        inp = make_case(quant, down, seed_base + i)
        out, aq, a_scale = launch(mod, inp, quant, down)
        torch.cuda.synchronize()
        name = f"{quant}_{'down' if down else 'gateup'}"
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


def bf16_ulp(x):
    return 2.0 ** (math.floor(math.log2(x)) - 7) if x > 0 else 2.0 ** -133


def check(plain_path, shim_path):
    plain, shim = torch.load(plain_path), torch.load(shim_path)
    bad = 0
    for (quant, down) in cases():
        name = f"{quant}_{'down' if down else 'gateup'}"
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
        print(f"{'ok' if good else 'not ok'} - SGLang {SGLANG[1]} fused_moe_kernel {name}: "
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

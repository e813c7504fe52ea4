"""oracle_naive.py - vLLM's own fused_moe_kernel in its naive small-batch
assignment, from its released package (0.33.0, tests/oracle/fetch.sh), as
the oracle for the shim's row mode of rule vllm-moe-main (GPU).

vLLM skips the align step when tokens x top_k x 4 <= experts (no expert map,
weights on the GPU, not grouped int4/int8: _prepare_expert_assignment,
fused_moe.py:1549-1600): sorted_token_ids None, expert_ids the flat
topk_ids, *num_tokens_post_padded = numel x BLOCK_SIZE_M, and
fused_moe_kernel compiled with naive_block_assignment computes one routed
row per program (fused_moe.py:403-414, 822-834, 904).  Here vLLM's own
_prepare_expert_assignment decides and builds those buffers (a case whose
batch does not take the naive path fails), and vLLM's own
invoke_fused_moe_triton_kernel launches the kernel, at tuned buckets over
101376 B on sm_90 (each a real file's):
  bf16     E=512,N=1344 B200 bucket 4: 16x128x128, 4 warps, 4 stages;
  tensor,  E=64,N=2560 H200 FP8 bucket 2: 64x256x128, 4 warps, 5 stages
  channel  (BLOCK_SIZE_M 64: the row blocks are not the 16-row kernel's);
  block    E=256,N=256 B200 block FP8 bucket 4: 16x256x128, 8 warps, 4
           stages (vLLM swaps the dot on sm_90).
The activation quantizers (vLLM's CUDA ops, not in the wheel) are
tests/gpu/oracle_moe.py's torch functions of the same definition.  Nothing
of vLLM is committed.

Cases, every scalar distinct and non-trivial: 128 experts, top_k 8, hidden
1024, intermediate 256 (gate/up N 512, down N 1024), 3 tokens (24 routed
rows; 3 x 8 x 4 <= 128); each format as the gate/up launch (top_k 8, no
routed weight) and the down launch (one row per routed token, top_k 1,
routed weights in [0.1, 0.9]); then the modular TritonExperts gate/up
(topk_weights None), one token, and expert ids -1 (vLLM writes those rows
as zeros).  Per-tensor activation scale 0.0173, per-expert weight scales
0.011 .. 0.018; per-token / per-(expert, column) / 128x128 block scales
drawn in [0.5, 2] x 1e-2.  Outputs start as NaN.  Each case runs eagerly,
then inside one CUDA graph (vLLM's assignment and launch captured) replayed
on new inputs and a new routing of the same shapes.

  python3 tests/gpu/oracle_naive.py run OUT.pt     launch every case, save
  python3 tests/gpu/oracle_naive.py check PLAIN.pt SHIM.pt
        inputs identical; each output against float64 of the same quantised
        operands: the shim's error within 2 x vLLM's own error + 1 bf16 ulp
        of the largest |reference|
  python3 tests/gpu/oracle_naive.py log LOG.jsonl...
        every fused_moe_kernel launch of the shimmed run (eager and at
        capture: 2 per case) rerouted by vllm-moe-main to a 16-row moe_gemm
        kernel, nothing refused
Prints "ok - ..." / "not ok - ..." lines.
"""
import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import frameworks  # noqa: E402
from oracle_moe import FP8_MAX, group_quant, tensor_quant, token_quant  # noqa: E402
from reroute_tap import bf16_ulp  # noqa: E402

VLLM = "0.33.0"
EXPERTS, TOP_K, HIDDEN, INTER = 128, 8, 1024, 256
A_SCALE = 0.0173


def tuned(bm, bn, bk, gm, warps, stages):
    """A bucket of a tuned config file."""
    return dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=gm,
                num_warps=warps, num_stages=stages)


CONFIGS = {"bf16": tuned(16, 128, 128, 1, 4, 4), "tensor": tuned(64, 256, 128, 1, 4, 5),
           "channel": tuned(64, 256, 128, 1, 4, 5), "block": tuned(16, 256, 128, 64, 8, 4)}
# (name, format, down, tokens, variant): variant "modular" passes topk_weights None,
# "minus1" routes some slots to expert -1
CASES = [(f"{q}_{'down' if d else 'gateup'}", q, d, 3, "") for q in CONFIGS for d in (False, True)]
CASES += [("block_gateup_modular", "block", False, 3, "modular"),
          ("bf16_gateup_1token", "bf16", False, 1, ""),
          ("tensor_down_expert_minus1", "tensor", True, 3, "minus1")]


def make_inputs(quant, down, tokens, variant, seed):
    """Quantised operands, routing and weights of one case (on the GPU)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    rows, k, n = (tokens * TOP_K, INTER, HIDDEN) if down else (tokens, HIDDEN, INTER)
    a = torch.randn(rows, k, generator=g, device="cuda").to(torch.bfloat16)
    if quant == "bf16":
        aq, a_scale = a, None
        b = (torch.randn(EXPERTS, n, k, generator=g, device="cuda") / math.sqrt(k)).to(torch.bfloat16)
        b_scale = None
    else:
        b = (torch.randn(EXPERTS, n, k, generator=g, device="cuda") * 100) \
            .clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        if quant == "block":
            aq, a_scale = group_quant(a, 128)
            b_scale = (torch.rand(EXPERTS, n // 128, k // 128, generator=g, device="cuda") * 1.5
                       + 0.5) * 1e-2
        elif quant == "channel":
            aq, a_scale = token_quant(a)
            b_scale = (torch.rand(EXPERTS, n, 1, generator=g, device="cuda") * 1.5 + 0.5) * 1e-2
        else:
            aq, a_scale = tensor_quant(a, torch.tensor([A_SCALE], device="cuda"))
            b_scale = torch.linspace(0.011, 0.018, EXPERTS, device="cuda")
    scores = torch.rand(tokens, EXPERTS, generator=g, device="cuda")
    topk_ids = scores.topk(TOP_K, dim=1).indices.to(torch.int32)
    if variant == "minus1":
        topk_ids[:, 1::3] = -1
    weights = torch.rand(tokens, TOP_K, generator=g, device="cuda") * 0.8 + 0.1
    return dict(aq=aq.contiguous(), a_scale=a_scale, b=b, b_scale=b_scale,
                topk_ids=topk_ids.contiguous(), topk_weights=weights.contiguous())


class Launch:
    """The static inputs and output of one case, and vLLM's assignment and launch on them."""

    def __init__(self, mod, inp, quant, down, tokens, variant):
        self.mod, self.inp, self.quant, self.down, self.variant = mod, inp, quant, down, variant
        self.tokens = tokens
        self.config = CONFIGS[quant]
        n = inp["b"].shape[1]
        self.out = torch.full((tokens, TOP_K, n), float("nan"), dtype=torch.bfloat16, device="cuda")

    def __call__(self):
        import triton.language as tl
        i = self.inp
        sorted_ids, expert_ids, ntpp = self.mod._prepare_expert_assignment(
            i["topk_ids"], self.config, self.tokens, TOP_K, EXPERTS, None,
            block_shape=[128, 128] if self.quant == "block" else None)
        if sorted_ids is not None:
            raise RuntimeError("vLLM did not take its naive block assignment for this case")
        weights = None if self.variant == "modular" else i["topk_weights"]
        self.mod.invoke_fused_moe_triton_kernel(
            i["aq"], i["b"], self.out, i["a_scale"], i["b_scale"], weights, None, expert_ids, ntpp,
            self.down, 1 if self.down else TOP_K, dict(self.config), compute_type=tl.bfloat16,
            use_fp8_w8a8=self.quant != "bf16", use_int8_w8a8=False, use_int8_w8a16=False,
            use_int4_w4a16=False, per_channel_quant=self.quant == "channel",
            block_shape=[128, 128] if self.quant == "block" else None)


def cpu(inp):
    """The inputs to save: the weights (and their scales) of the experts the
    routing uses only, with their numbers ("experts")."""
    ids = inp["topk_ids"]
    used = ids[ids >= 0].unique().long()
    out = {k: v.cpu().clone() for k, v in inp.items()
           if torch.is_tensor(v) and k not in ("b", "b_scale")}
    out["experts"] = used.cpu()
    for k in ("b", "b_scale"):
        t = inp[k]
        if t is not None:   # FP8 indexed as bytes: it has few indexing kernels
            fp8 = t.dtype == torch.float8_e4m3fn
            out[k] = (t.view(torch.uint8)[used].view(t.dtype) if fp8 else t[used]).cpu()
    return out


def run(out):
    mod = frameworks.load_vllm_moe(VLLM)
    saved = {}
    for n, (name, quant, down, tokens, variant) in enumerate(CASES):
        inp = make_inputs(quant, down, tokens, variant, seed=400 + n)
        launch = Launch(mod, inp, quant, down, tokens, variant)
        launch()
        torch.cuda.synchronize()
        saved[f"{name}_eager"] = (cpu(inp), launch.out.cpu().clone())
        # vLLM's assignment and launch captured in a graph (Triton compiled the
        # kernel above), replayed on other values and another routing
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            launch()
        fresh = make_inputs(quant, down, tokens, variant, seed=500 + n)
        for k, v in fresh.items():
            if torch.is_tensor(v):
                inp[k].copy_(v)
        launch.out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        saved[f"{name}_graph"] = (cpu(inp), launch.out.cpu().clone())
    torch.save(saved, out)
    print(f"ok - run ({'shim' if 'sm120shim' in os.environ.get('LD_PRELOAD', '') else 'no shim'}): "
          f"{len(saved)} vLLM {VLLM} naive fused-MoE launches saved ({len(CASES)} cases, eager "
          f"and in a CUDA graph)")


def reference(inp, quant, down, variant):
    """float64 of vLLM's definition on the quantised operands: row t * top_k + s
    (down) or t (gate/up) of A against expert topk_ids[t, s], times the routed
    weight on the down launch; zeros for expert -1."""
    a = inp["aq"].double()
    if quant == "block":
        a = a * inp["a_scale"].double().repeat_interleave(128, 1)
    elif quant != "bf16":
        a = a * inp["a_scale"].double()
    ids = inp["topk_ids"].long()
    where = {int(e): i for i, e in enumerate(inp["experts"].tolist())}
    tokens = ids.shape[0]
    n = inp["b"].shape[1]
    out = torch.zeros(tokens, TOP_K, n, dtype=torch.float64)
    for t in range(tokens):
        for s in range(TOP_K):
            if int(ids[t, s]) < 0:
                continue
            e = where[int(ids[t, s])]
            b = inp["b"][e].double()
            if quant == "block":
                b = b * inp["b_scale"][e].double().repeat_interleave(128, 0) \
                    .repeat_interleave(128, 1)
            elif quant == "channel":
                b = b * inp["b_scale"][e].double()
            elif quant == "tensor":
                b = b * inp["b_scale"][e].double()
            out[t, s] = b @ (a[t * TOP_K + s] if down else a[t])
            if down:
                out[t, s] *= inp["topk_weights"][t, s].double()
    return out


def same_inputs(p, s):
    def raw(t):
        return t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t
    return p.keys() == s.keys() and all(torch.equal(raw(p[k]), raw(s[k])) for k in p)


def check(plain_path, shim_path):
    plain, shim = torch.load(plain_path), torch.load(shim_path)
    bad = 0
    for (name, quant, down, tokens, variant) in CASES:
        for how in ("eager", "graph"):
            (pin, pout), (sin, sout) = plain[f"{name}_{how}"], shim[f"{name}_{how}"]
            ref = reference(pin, quant, down, variant)
            big = ref.abs().max().item()
            fw = (pout.double() - ref).abs().max().item()
            ours = (sout.double() - ref).abs().max().item()
            tol = 2 * fw + bf16_ulp(big)
            zeros = pin["topk_ids"] < 0
            good = same_inputs(pin, sin) and math.isfinite(ours) and ours <= tol
            good &= bool((sout[zeros] == 0).all())
            bad += not good
            c = CONFIGS[quant]
            shape = "x".join(str(c[k]) for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"))
            print(f"{'ok' if good else 'not ok'} - vLLM {VLLM} fused_moe_kernel naive {name} {how} "
                  f"({shape}, {c['num_warps']} warps, {c['num_stages']} stages, {tokens} tokens): "
                  f"rerouted max |err| {ours:.3g} vs float64, vLLM's own {fw:.3g} (ratio "
                  f"{ours / fw if fw else float('inf'):.2f}), passes under 2 x vLLM + 1 bf16 ulp = "
                  f"{tol:.3g}" + ("" if same_inputs(pin, sin) else
                                  "; the inputs differ between the runs"))
    return bad


def log(paths):
    ev = [json.loads(line) for p in paths for line in open(p)]
    moe = [e for e in ev if e.get("event") == "launch" and e.get("kernel") == "fused_moe_kernel"]
    refused = [e for e in ev if e.get("action") == "refuse" and (
        e.get("event") != "triton_load" or e.get("kernel") == "fused_moe_kernel")]
    for e in refused[:3]:
        print(f"# refused: {e.get('event')} {e.get('kernel')}: {e.get('reason')}")
    seen = sorted({(e.get("action"), e.get("rule"), e.get("rerouted_to")) for e in moe}, key=str)
    print(f"# {len(moe)} fused_moe_kernel launches logged: {seen}")
    good = (len(moe) == 2 * len(CASES) and not refused and
            all(e.get("action") == "reroute" and e.get("rule") == "vllm-moe-main" and
                str(e.get("rerouted_to")).startswith(("moe_gemm_bf16_d", "moe_gemm_fp8_d")) for e in moe))
    print(f"{'ok' if good else 'not ok'} - vLLM {VLLM} naive fused_moe_kernel rerouted by "
          f"vllm-moe-main to the decode moe_gemm at every launch ({2 * len(CASES)}: eager and at "
          f"capture), nothing refused")
    return not good


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        run(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(1 if check(sys.argv[2], sys.argv[3]) else 0)
    elif len(sys.argv) >= 3 and sys.argv[1] == "log":
        sys.exit(1 if log(sys.argv[2:]) else 0)
    else:
        sys.exit(__doc__)

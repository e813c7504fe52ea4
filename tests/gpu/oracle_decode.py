"""oracle_decode.py - vLLM's own TRITON_MLA decode, from its released package, as
the oracle for the shim's vllm_mla_decode rules (GPU).

The kernel file comes from the vLLM wheel unpacked by tests/oracle/fetch.sh
(tests/oracle/packages.txt names the release); nothing of vLLM is committed.
Its decode_attention_fwd runs with an FP8 (e4m3) cache, IS_MLA, as
TritonMLAImpl.forward_mqa calls it: stage 1 `_fwd_grouped_kernel_stage1`
then needs 102400 B of shared memory and the shim reroutes it; vLLM's stage 2
runs unchanged.

Every scalar takes a distinct, non-trivial value: k_scale 0.05, v_scale 1.25
(vLLM's IS_MLA kernel loads v_scale and never applies it: V is the K tile
dequantised with k_scale; a kernel that applies v_scale is off by x25),
sm_scale 0.1171, page size 16, the split count of each case.  Cases: 8 q heads
(Kimi K2 at TP8) and 20 (two head blocks), sequences of odd lengths with their
pages drawn at random; every row no sequence owns is NaN, so a read past a
sequence shows.

Run as: python3 tests/gpu/oracle_decode.py MODE ...
  run OUT.pt       every case launched eagerly, then again inside one CUDA
                   graph replayed on new inputs; saves inputs and outputs.
  check PLAIN.pt SHIM.pt
                   inputs identical; each output against float64: the shim's
                   error within 2 x vLLM's own error + 1 bf16 ulp at the
                   largest |reference| (vLLM rounds the dequantised K and P to
                   bf16, the bundled kernel P only: the same precision class).
Prints "ok - ..." / "not ok - ..." lines.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import frameworks  # noqa: E402
from reroute_tap import bf16_ulp  # noqa: E402,F401  (the spacing of bf16 at a magnitude)

VLLM = ("vllm", "0.33.0", "vllm/v1/attention/ops/triton_decode_attention.py")
LQ, LV = 576, 512
PAGE = 16
K_SCALE, V_SCALE, SM_SCALE = 0.05, 1.25, 0.1171
# (name, q heads, sequence lengths, splits)
CASES = [("kimi_tp8", 8, [1, 17, 333, 4099], 8),
         ("heads20", 20, [65, 2, 1000], 4)]


def make_inputs(heads, lens, splits, seed, dev="cuda"):
    g = torch.Generator(device=dev).manual_seed(seed)
    width = max(math.ceil(n / PAGE) for n in lens) + 1
    n_pages = sum(math.ceil(n / PAGE) for n in lens) + 3
    pages = torch.randperm(n_pages - 1, generator=g, device=dev) + 1
    table = torch.zeros(len(lens), width, dtype=torch.int32, device=dev)
    cache = torch.full((n_pages, PAGE, 1, LQ), float("nan"), device=dev)
    used = 0
    for b, n in enumerate(lens):
        mine = pages[used:used + math.ceil(n / PAGE)]
        used += mine.numel()
        table[b, :mine.numel()] = mine.to(torch.int32)
        pos = torch.arange(n, device=dev)
        cache[mine[pos // PAGE], pos % PAGE] = (
            torch.randn(n, 1, LQ, generator=g, device=dev) / K_SCALE).clamp(-448, 448)
    return dict(q=torch.randn(len(lens), heads, LQ, generator=g, device=dev).to(torch.bfloat16),
                cache=cache.to(torch.float8_e4m3fn), table=table,
                lens=torch.tensor(lens, dtype=torch.int32, device=dev), splits=splits)


class Launch:
    """Static inputs and outputs of one case, and vLLM's call on them."""

    def __init__(self, mod, inp):
        self.mod, self.inp = mod, inp
        b, h = inp["q"].shape[:2]
        dev = inp["q"].device
        self.o = torch.full((b, h, LV), float("nan"), dtype=torch.bfloat16, device=dev)
        self.lse = torch.full((b, h), float("nan"), dtype=torch.float32, device=dev)
        self.att = torch.full((b, h, inp["splits"], LV + 1), float("nan"), device=dev)
        self.ks = torch.tensor(K_SCALE, device=dev)
        self.vs = torch.tensor(V_SCALE, device=dev)

    def __call__(self):
        i = self.inp
        self.mod.decode_attention_fwd(
            i["q"], i["cache"], i["cache"][..., :LV], self.o, self.lse, i["table"], i["lens"],
            self.att, i["splits"], SM_SCALE, PAGE, k_scale=self.ks, v_scale=self.vs, is_mla=True)

    def outputs(self):
        return {"o": self.o.cpu().clone(), "lse": self.lse.cpu().clone()}


def run(out):
    mod = frameworks.load(*VLLM)
    saved = {}
    for n, (name, heads, lens, splits) in enumerate(CASES):
        inp = make_inputs(heads, lens, splits, seed=100 + n)
        launch = Launch(mod, inp)
        launch()
        torch.cuda.synchronize()
        saved[f"{name}_eager"] = ({k: v.cpu() if torch.is_tensor(v) else v for k, v in inp.items()},
                                  launch.outputs())
        # The same launch captured in a graph (Triton compiled it above), replayed
        # on other values of the same shapes.
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            launch()
        fresh = make_inputs(heads, lens, splits, seed=200 + n)
        for k, v in fresh.items():
            if torch.is_tensor(v):
                inp[k].copy_(v)
        for t in (launch.o, launch.lse, launch.att):
            t.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        saved[f"{name}_graph"] = ({k: v.cpu() if torch.is_tensor(v) else v for k, v in inp.items()},
                                  launch.outputs())
    torch.save(saved, out)
    print(f"ok - run ({'shim' if 'sm120shim' in os.environ.get('LD_PRELOAD', '') else 'no shim'}): "
          f"{len(saved)} vLLM {VLLM[1]} decode launches saved")


def reference(inp):
    """float64: K = k_scale * cache, V = K[:, :512], softmax over each sequence."""
    q = inp["q"].double()
    cache = inp["cache"][:, :, 0].double() * K_SCALE
    o = torch.empty(q.shape[0], q.shape[1], LV, dtype=torch.float64)
    lse = torch.empty(q.shape[0], q.shape[1], dtype=torch.float64)
    for b, n in enumerate(inp["lens"].tolist()):
        pos = torch.arange(n)
        k = cache[inp["table"][b, pos // PAGE].long(), pos % PAGE]
        s = (q[b] @ k.T) * SM_SCALE
        o[b] = torch.softmax(s, dim=-1) @ k[:, :LV]
        lse[b] = torch.logsumexp(s, dim=-1)
    return {"o": o, "lse": lse}


def check(plain_path, shim_path):
    plain, shim = torch.load(plain_path), torch.load(shim_path)
    bad = 0
    for name in sorted(plain):
        (pin, pout), (sin, sout) = plain[name], shim[name]
        same = all(torch.equal(pin[k].view(torch.uint8) if pin[k].dtype == torch.float8_e4m3fn
                               else pin[k], sin[k].view(torch.uint8)
                               if sin[k].dtype == torch.float8_e4m3fn else sin[k])
                   for k in pin if torch.is_tensor(pin[k]))
        ref = reference(pin)
        for key in ("o", "lse"):
            big = ref[key].abs().max().item()
            fw = (pout[key].double() - ref[key]).abs().max().item()
            ours = (sout[key].double() - ref[key]).abs().max().item()
            tol = 2 * fw + bf16_ulp(big)
            good = same and math.isfinite(ours) and ours <= tol
            bad += not good
            print(f"{'ok' if good else 'not ok'} - {name} {key}: rerouted max |err| {ours:.3g} "
                  f"vs float64, vLLM's own {fw:.3g} (ratio {ours / fw if fw else float('inf'):.2f}), "
                  f"passes under 2 x vLLM + 1 bf16 ulp = {tol:.3g}"
                  + ("" if same else "; the inputs differ between the runs"))
    return bad


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        run(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(1 if check(sys.argv[2], sys.argv[3]) else 0)
    else:
        sys.exit(__doc__)

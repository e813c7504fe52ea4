"""oracle_decode.py - vLLM's own TRITON_MLA decode, from its released packages
(0.33.0 and 0.23.0, tests/oracle/fetch.sh), as the oracle for the shim's
vllm_mla_decode rules (GPU; tests/gpu/oracle_common.py says how a case runs
and is judged): group "vllm" runs 0.33.0's kernel (vllm-mla-decode-2026-06:
page strides), group "vllm23" 0.23.0's, the newest release of
vllm-mla-decode-2026-03's line (k_scale/v_scale, IS_MLA, no page strides: a
page is addressed as (page * PAGE_SIZE + pos % PAGE_SIZE) * stride_buf_kbs,
the same rows as 0.33.0's page stride on this contiguous cache).

Its decode_attention_fwd runs with an FP8 (e4m3) cache, IS_MLA, as
TritonMLAImpl.forward_mqa calls it: stage 1 `_fwd_grouped_kernel_stage1`
then needs 102400 B of shared memory and the shim reroutes it; vLLM's stage 2
runs unchanged.

Every scalar takes a distinct, non-trivial value: k_scale 0.05, v_scale 1.25
(vLLM's IS_MLA kernel, in both releases, loads v_scale and never applies it:
V is the K tile dequantised with k_scale; a kernel that applies v_scale is
off by x25),
sm_scale 0.1171, page size 16, the split count of each case.  Cases: 8 q heads
(Kimi K2 at TP8) and 20 (two head blocks), sequences of odd lengths with their
pages drawn at random; every row no sequence owns is NaN, so a read past a
sequence shows.  A logit cap (30; the rules claim none) must be refused.
Judged: the output o and the log-sum-exp lse (vLLM rounds the dequantised K
and P to bf16, the bundled kernel P only: the same precision class).

  python3 tests/gpu/oracle_decode.py run OUT.pt vllm|vllm23
  python3 tests/gpu/oracle_decode.py check PLAIN.pt SHIM.pt
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import frameworks  # noqa: E402
from oracle_common import Case, main  # noqa: E402

DECODE = "vllm/v1/attention/ops/triton_decode_attention.py"
# release: the rule that must reroute its stage 1
RULES = {"0.33.0": "vllm-mla-decode-2026-06", "0.23.0": "vllm-mla-decode-2026-03"}
VLLM, RULE = ("vllm", "0.33.0", DECODE), RULES["0.33.0"]  # as other scripts name them
LQ, LV = 576, 512
PAGE = 16
K_SCALE, V_SCALE, SM_SCALE = 0.05, 1.25, 0.1171


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
                lens=torch.tensor(lens, dtype=torch.int32, device=dev))


_mod = {}


class Bound:
    """Static inputs and outputs of one case, and vLLM @release's call on them."""

    def __init__(self, release, inp, splits, logit_cap):
        if release not in _mod:
            _mod[release] = frameworks.load("vllm", release, DECODE)
        self.mod = _mod[release]
        self.inp, self.splits, self.logit_cap = inp, splits, logit_cap
        b, h = inp["q"].shape[:2]
        self.o = torch.full((b, h, LV), float("nan"), dtype=torch.bfloat16, device="cuda")
        self.lse = torch.full((b, h), float("nan"), dtype=torch.float32, device="cuda")
        self.att = torch.full((b, h, splits, LV + 1), float("nan"), device="cuda")
        self.ks = torch.tensor(K_SCALE, device="cuda")
        self.vs = torch.tensor(V_SCALE, device="cuda")

    def __call__(self):
        i = self.inp
        self.mod.decode_attention_fwd(
            i["q"], i["cache"], i["cache"][..., :LV], self.o, self.lse, i["table"], i["lens"],
            self.att, self.splits, SM_SCALE, PAGE, logit_cap=self.logit_cap, k_scale=self.ks,
            v_scale=self.vs, is_mla=True)

    def poison(self):
        for t in (self.o, self.lse, self.att):
            t.fill_(float("nan"))

    def inputs(self):
        return {k: v.cpu().clone() for k, v in self.inp.items()}

    def outputs(self):
        return {"o": self.o.cpu().clone(), "lse": self.lse.cpu().clone()}


def case(release, name, heads, lens, splits, expect="reroute", reason="", logit_cap=0.0):
    return Case(lambda seed: make_inputs(heads, lens, splits, seed),
                lambda inp: Bound(release, inp, splits, logit_cap),
                name=f"vllm-{release}-decode-{name}", rule=RULES[release], expect=expect,
                reason=reason, kernel=f"_fwd_grouped_kernel_stage1@vllm-{release}",
                dtype=f"FP8 e4m3 KV, k_scale {K_SCALE} v_scale {V_SCALE}",
                shape=f"MLA 576/512, {heads} heads, lens {lens}, page {PAGE}, {splits} splits, "
                      f"sm_scale {SM_SCALE}" + (f", logit_cap {logit_cap}" if logit_cap else ""))


def cases(release):
    return [
        case(release, "kimi-tp8", 8, [1, 17, 333, 4099], 8),
        case(release, "heads20", 20, [65, 2, 1000], 4),
        case(release, "kimi-tp8-logit-cap", 8, [1, 17, 333, 4099], 8, "refuse", "logit_cap 30",
             30.0),
    ]


GROUPS = {"vllm": lambda: cases("0.33.0"), "vllm23": lambda: cases("0.23.0")}


def reference(meta, inp):
    """float64: K = k_scale * cache, V = K[:, :512], softmax over each sequence
    (both releases: 0.23.0 triton_decode_attention.py:372 and :407)."""
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


if __name__ == "__main__":
    main(sys.argv, GROUPS, reference, "vLLM", seed_base=100)

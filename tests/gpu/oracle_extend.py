"""oracle_extend.py - SGLang's own extend attention `_fwd_kernel`, from its
released packages (0.5.8, 0.5.9, 0.5.14, 0.5.15, 0.5.17, 0.5.18 and 0.5.23:
one release of each signature, tests/oracle/fetch.sh), as the
oracle for the shim's sglang_extend rules (GPU; tests/gpu/oracle_common.py
says how a case runs and is judged).

extend_attention_fwd runs as SGLang's Triton backend calls it for the MLA
absorbed prefill with a cached prefix (DeepSeek-V3 / Kimi K2): q [tokens,
heads, 576]; k_extend the [tokens, 1, 576] latent and v_extend its first 512
channels; the cache [slots, 1, 576] with V_Buffer its first 512 channels;
kv_indices int64 slots drawn at random, every other slot NaN.  On an H100
(capability 9) every release picks 32x64, 8 warps: 106496 B, rerouted.
Three sequences of (prefix, extend) lengths (0, 45), (300, 1), (77, 130):
no prefix, one new token, several row blocks; the graph replay takes them
in another order (the same totals and longest extend, so the same grid).
Every scalar distinct and non-trivial: sm_scale 0.0917 (not 1/sqrt(576)),
and from 0.5.10 on (signature sglang-extend-2026-03 and later) k_scale 0.73, v_scale 1.37,
bf16 and FP8 E4M3 cache (SGLang applies k_scale to the prefix scores and
v_scale to the prefix P.V, V being the same memory as K).

Rerouted: 0.5.8 bf16 (8 heads, Kimi K2 at TP8), 0.5.9 bf16 (13 heads), and
0.5.14, 0.5.15, 0.5.17, 0.5.18 and 0.5.23 bf16 (8 heads) and FP8 (13 heads).  What the rules do not claim must
be refused, not rerouted: 0.5.9 with an FP8 cache (no k/v scales in that
signature), a logit cap (30), a sliding window (37), attention sinks, and
non-causal attention; 0.5.23 with a logit cap.  From 0.5.10 on SGLang's
Triton backend builds qo_indptr int64: the FP8 cases of those releases and
one bf16 0.5.23 case pass it so (the bundled kernel reads either width).

  python3 tests/gpu/oracle_extend.py run OUT.pt GROUP...   (groups: v058, v059, v0514, v0515, v0517, v0518, v0523)
  python3 tests/gpu/oracle_extend.py check PLAIN.pt SHIM.pt
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import frameworks  # noqa: E402
from oracle_common import Case, main  # noqa: E402

LQ, LV = 576, 512
SM_SCALE, K_SCALE, V_SCALE = 0.0917, 0.73, 1.37
SEQS = [(0, 45), (300, 1), (77, 130)]          # (prefix, extend) per sequence
# The rule of each release's signature (rules/sglang_extend.json); from
# 0.5.10 on the signature has k/v scales.
RULE_OF = {"0.5.8": "sglang-extend-2025-08", "0.5.9": "sglang-extend-2025-08",
           "0.5.14": "sglang-extend-2026-03", "0.5.15": "sglang-extend-2026-06-29",
           "0.5.17": "sglang-extend-2026-07-10", "0.5.18": "sglang-extend-main",
           "0.5.23": "sglang-extend-main"}
SCALED = tuple(r for r in RULE_OF if r not in ("0.5.8", "0.5.9"))


def make_inputs(heads, kv, seed, seqs, qo_dtype, dev="cuda"):
    g = torch.Generator(device=dev).manual_seed(seed)
    tokens = sum(e for _, e in seqs)
    prefix = sum(p for p, _ in seqs)
    slots = prefix + 29
    cache_dtype = torch.float8_e4m3fn if kv == "fp8" else torch.bfloat16
    buf = torch.full((slots, 1, LQ), float("nan"), device=dev)
    chosen = torch.randperm(slots, generator=g, device=dev)[:prefix]
    buf[chosen] = torch.randn(prefix, 1, LQ, generator=g, device=dev) * (2.0 if kv == "fp8" else 1.0)
    qo = [0]
    kvp = [0]
    for p, e in seqs:
        qo.append(qo[-1] + e)
        kvp.append(kvp[-1] + p)
    return dict(
        q=torch.randn(tokens, heads, LQ, generator=g, device=dev).to(torch.bfloat16),
        k=torch.randn(tokens, 1, LQ, generator=g, device=dev).to(torch.bfloat16),
        buf=buf.to(cache_dtype),
        qo_indptr=torch.tensor(qo, dtype=qo_dtype, device=dev),
        kv_indptr=torch.tensor(kvp, dtype=torch.int32, device=dev),
        kv_indices=chosen.to(torch.int64))


_mods = {}


class Bound:
    """SGLang @release's extend_attention_fwd on static inputs @inp."""

    def __init__(self, mod, release, inp, variant):
        self.mod, self.release, self.inp, self.variant = mod, release, inp, dict(variant)
        if self.variant.pop("sinks", False):
            self.variant["sinks"] = torch.linspace(-1.5, 2.5, inp["q"].shape[1], device="cuda")
        self.causal = self.variant.pop("is_causal", True)
        t, h = inp["q"].shape[:2]
        self.o = torch.full((t, h, LV), float("nan"), dtype=torch.bfloat16, device="cuda")

    def __call__(self):
        i = self.inp
        scales = (K_SCALE, V_SCALE) if self.release in SCALED else ()
        self.mod.extend_attention_fwd(
            i["q"], i["k"], i["k"][..., :LV], self.o, i["buf"], i["buf"][..., :LV],
            i["qo_indptr"], i["kv_indptr"], i["kv_indices"], None, self.causal, None,
            max(e for _, e in SEQS), *scales, sm_scale=SM_SCALE, **self.variant)

    def poison(self):
        self.o.fill_(float("nan"))

    def inputs(self):
        return {k: v.cpu().clone() for k, v in self.inp.items()}

    def outputs(self):
        return {"o": self.o.cpu().clone()}


SUFFIX = {"logit_cap": "logitcap", "sliding_window_size": "window", "sinks": "sinks",
          "is_causal": "noncausal"}


def case(release, kv, heads, expect="reroute", rule=None, reason="", qo="int32", **variant):
    rule = rule or RULE_OF[release]

    def make(seed):
        # the graph replay (odd seeds) takes the sequences in another order
        seqs = SEQS if seed % 2 == 0 else SEQS[1:] + SEQS[:1]
        return make_inputs(heads, kv, seed, seqs, getattr(torch, qo))

    def bind(inp):
        if release not in _mods:
            _mods[release] = frameworks.load_sglang_extend(release)
        return Bound(_mods[release], release, inp, variant)

    what = ", ".join("not causal" if k == "is_causal" else k if v is True else f"{k} {v}"
                     for k, v in variant.items()) or "causal"
    scales = f", k_scale {K_SCALE} v_scale {V_SCALE}" if release in SCALED else ""
    return Case(make, bind, name=f"sglang-{release}-extend-{kv}-h{heads}"
                + "".join(f"-{SUFFIX[k]}" for k in variant) + ("" if qo == "int32" else f"-qo-{qo}"),
                rule=rule, kernel=f"_fwd_kernel@sglang-{release}", expect=expect, reason=reason,
                dtype=f"{kv} KV cache{scales}",
                shape=f"MLA 576/512, {heads} heads, (prefix, extend) {SEQS}, sm_scale {SM_SCALE}, "
                      f"{what}, qo_indptr {qo}")


GROUPS = {
    "v058": lambda: [case("0.5.8", "bf16", 8)],
    "v059": lambda: [
        case("0.5.9", "bf16", 13),
        case("0.5.9", "fp8", 8, "refuse", reason="no k_scale/v_scale"),
        case("0.5.9", "bf16", 8, "refuse", reason="logit_cap 30", logit_cap=30.0),
        case("0.5.9", "bf16", 8, "refuse", reason="SLIDING_WINDOW_SIZE 37",
             sliding_window_size=37),
        case("0.5.9", "bf16", 8, "refuse", reason="sink", sinks=True),
        case("0.5.9", "bf16", 8, "refuse", reason="IS_CAUSAL 0", is_causal=False),
    ],
    "v0514": lambda: [case("0.5.14", "fp8", 13, qo="int64"), case("0.5.14", "bf16", 8)],
    "v0515": lambda: [case("0.5.15", "fp8", 13, qo="int64"), case("0.5.15", "bf16", 8)],
    "v0517": lambda: [case("0.5.17", "fp8", 13, qo="int64"), case("0.5.17", "bf16", 8)],
    "v0518": lambda: [case("0.5.18", "fp8", 13, qo="int64"), case("0.5.18", "bf16", 8)],
    "v0523": lambda: [
        case("0.5.23", "bf16", 8),
        case("0.5.23", "fp8", 13),
        case("0.5.23", "fp8", 8, "refuse", reason="logit_cap 30", logit_cap=30.0),
        case("0.5.23", "bf16", 8, qo="int64"),
    ],
}


def reference(meta, inp):
    """float64: per sequence, prefix keys k_scale x cache and values v_scale x
    cache[:, :512] (1 and 1 before 0.5.23), then the extend keys causally."""
    scaled = meta["kernel"].rsplit("@sglang-", 1)[1] in SCALED
    ks, vs = (K_SCALE, V_SCALE) if scaled else (1.0, 1.0)
    q, k, buf = inp["q"].double(), inp["k"][:, 0].double(), inp["buf"][:, 0].double()
    o = torch.empty(q.shape[0], q.shape[1], LV, dtype=torch.float64)
    qo, kvp, idx = inp["qo_indptr"].tolist(), inp["kv_indptr"].tolist(), inp["kv_indices"]
    for b in range(len(qo) - 1):
        rows = slice(qo[b], qo[b + 1])
        pre = buf[idx[kvp[b]:kvp[b + 1]]]
        n_pre, n_ext = pre.shape[0], qo[b + 1] - qo[b]
        keys = torch.cat([pre * ks, k[rows]])
        vals = torch.cat([pre[:, :LV] * vs, k[rows, :LV]])
        s = torch.einsum("thd,nd->htn", q[rows], keys) * SM_SCALE
        seen = torch.arange(n_pre + n_ext)[None, :] <= (n_pre + torch.arange(n_ext))[:, None]
        s = s.masked_fill(~seen, float("-inf"))
        o[rows] = torch.einsum("htn,nd->thd", torch.softmax(s, dim=-1), vals)
    return {"o": o}


if __name__ == "__main__":
    main(sys.argv, GROUPS, reference, "SGLang", seed_base=500)

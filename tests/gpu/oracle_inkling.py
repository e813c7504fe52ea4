"""oracle_inkling.py - SGLang's own inkling grouped GEMM (0.5.23 inkling_moe.py:
grouped_gemm_triton and its _grouped_gemm_kernel), from its released package,
as the oracle for rule sglang-inkling-moe (GPU; run by
tests/gpu/oracle_inkling.sh on tests/gpu/oracle_common.py's run, check and
logcheck).

The kernel file comes from the wheel unpacked by tests/oracle/fetch.sh;
nothing of SGLang is committed.  grouped_gemm_triton compiles the decode
branch (BLOCK_SIZE_M 16, up to 6144 routed rows) at 16 x 128 x 128, 4 warps,
4 stages: 110592 B on an H100/H200 as on sm_120; and the prefill branch
(BLOCK_SIZE_M 128) at 128 x 256 x 64, 8 warps, 3 stages: 147456 B on sm_90
(98304 B on sm_120, where it fits).  Under `sm120 run --mode reroute
--target sm120` on a Hopper GPU both are over SM120's 101376 B and the shim
reroutes them to moe_gemm_bf16_m16 / _m128 in schedule mode.

Inputs as moe_tp_forward builds them (sglang/srt/models/inkling_common/
moe.py:580-642): distinct random top-6 experts per token (one expert: top-1),
the routing metadata from SGLang's own helpers as its run_moe_preprocess
picks them (fused_moe_preprocess up to 1024 routed rows, else the stable sort
and compute_grouped_gemm_metadata, block_size_m by
select_grouped_gemm_block_m), A random rows already grouped by expert [rows,
K] (pre_reorder's output), B [E, N, K] of RMS 1/sqrt(K).  Shapes: the Inkling
config class's defaults (hidden 1536, intermediate 768: configs/inkling.py:
25-26) with 256 routed experts and top-6 (inkling_gate_topk_renorm.py:4,
76): gate/up N 2 x 768 / tp, K 1536; down N 1536, K 768 / tp; at TP 1, 4
and 8 (N 192 and K 192 or 96: the Triton kernel's masked tails); 4 tokens
(most of the 256 experts empty), 1 token, 1000 tokens (6000 rows, the
largest decode batches) and 2048 tokens (12288 rows, the prefill branch);
256 experts of 2048 x 2048 (B of 2 GiB: INT64_INDEX on; not more experts:
fused_moe_preprocess's schedule search takes 9 steps, E <= 512).  The output C is
allocated by grouped_gemm_triton with torch.empty; here that allocation is
NaN-filled (the module's torch.empty, for the call only), so a row the
kernel does not write shows, in eager launches and in every graph replay.
Refused: fp16 (the same 110592 B; refused at launch, "A is *fp16").

Each rerouted case runs eagerly, then grouped_gemm_triton is captured in a
CUDA graph and replayed on new inputs and a new routing of the same shapes.
The weights are not saved (2 GiB): each case regenerates them from its seed
in check, and the runs save their float64 sum to show they were the same.

  python3 tests/gpu/oracle_inkling.py run OUT.pt inkling
  python3 tests/gpu/oracle_inkling.py check PLAIN.pt SHIM.pt
        each output against float64 on the same bf16 operands: the shim's
        error within 2 x SGLang's own + 1 bf16 ulp of the largest |reference|
  python3 tests/gpu/oracle_common.py logcheck SHIM.pt.json LOG...
Prints "ok - ..." / "not ok - ..." lines.
"""
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
sys.path.insert(0, HERE)
import oracle_common  # noqa: E402
from oracle_common import Case  # noqa: E402

RULE, RELEASE = "sglang-inkling-moe", "0.5.23"
PATH = "sglang/kernels/ops/moe/inkling_moe.py"
TOP_K, HIDDEN, INTER = 6, 1536, 768
_MOD = []


def module():
    """0.5.23's inkling_moe.py, loaded once (its is_sm121: not on a Hopper GPU)."""
    if not _MOD:
        import types
        import torch
        import frameworks
        common = sys.modules.setdefault("sglang.srt.utils.common",
                                        types.ModuleType("sglang.srt.utils.common"))
        common.is_sm121 = lambda: torch.cuda.get_device_capability() == (12, 1)
        _MOD.append(frameworks.load("sglang", RELEASE, PATH))
    return _MOD[0]


def weights(case, seed):
    """B [E, N, K] of @case, a function of @seed alone."""
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed * 7919 + 17)
    b = torch.randn(case["experts"], case["n"], case["k"], generator=g, device="cuda",
                    dtype=getattr(torch, case["dtype"]))
    return b.mul_(1.0 / math.sqrt(case["k"]))


def make(case, seed):
    """The inputs of one call: A, B, the routing metadata SGLang's helpers build."""
    import torch
    mod = module()
    g = torch.Generator(device="cuda").manual_seed(seed)
    e, top_k = case["experts"], min(TOP_K, case["experts"])
    scores = torch.rand(case["tokens"], e, generator=g, device="cuda")
    topk_ids = scores.topk(top_k, dim=1).indices.to(torch.int32).contiguous()
    rows = topk_ids.numel()
    bm = mod.select_grouped_gemm_block_m(rows)
    if rows <= mod.FUSED_PREPROCESS_WIN_TOKENS:
        _, counts, offs, block_offs, schedule, _ = mod.fused_moe_preprocess(topk_ids.view(-1), e)
    else:
        ids, _ = torch.sort(topk_ids.view(-1).to(torch.int16), stable=True)
        counts, offs, block_offs, schedule = mod.compute_grouped_gemm_metadata(
            ids, e, block_size_m=bm)
    a = torch.randn(rows, case["k"], generator=g, device="cuda").to(getattr(torch, case["dtype"]))
    return dict(a=a, b=weights(case, seed), counts=counts, offs=offs, block_offs=block_offs,
                schedule=schedule, seed=torch.tensor([seed], device="cuda"),
                block_m=bm)


class _NanEmpty:
    """The torch module as grouped_gemm_triton sees it, with empty() NaN-filled."""

    def __init__(self, torch):
        self._torch = torch

    def __getattr__(self, name):
        return getattr(self._torch, name)

    def empty(self, *shape, **kw):
        return self._torch.full(*shape, float("nan"), **kw)


class Bound:
    """grouped_gemm_triton on one case's inputs (@inp), as moe_tp_forward calls it."""

    def __init__(self, case, inp):
        self.case, self.inp, self.c = case, inp, None

    def __call__(self):
        import torch
        mod, i = module(), self.inp
        mod.torch = _NanEmpty(torch)
        try:
            self.c = mod.grouped_gemm_triton(i["a"], i["b"], self.case["experts"], i["counts"],
                                             i["offs"], i["block_offs"], i["schedule"],
                                             block_size_m=i["block_m"])
        finally:
            mod.torch = torch

    def poison(self):
        """C is allocated NaN-filled by each call (and each replay)."""

    def inputs(self):
        import torch
        i = self.inp
        out = {k: i[k].cpu().clone() for k in ("a", "counts", "offs", "block_offs", "schedule",
                                                "seed")}
        out["b_sum"] = torch.sum(i["b"], dtype=torch.float64).cpu()
        return out

    def outputs(self):
        return {"c": self.c.cpu().clone()}


# name, tokens, experts, N, K, dtype, expect (reason)
SHAPES = [
    ("gateup-decode-m4", 4, 256, 2 * INTER, HIDDEN, "bfloat16", "reroute"),
    ("down-decode-m4", 4, 256, HIDDEN, INTER, "bfloat16", "reroute"),
    ("tp8-gateup-decode-m1", 1, 256, 2 * INTER // 8, HIDDEN, "bfloat16", "reroute"),
    ("tp4-down-decode-m1000", 1000, 256, HIDDEN, INTER // 4, "bfloat16", "reroute"),
    ("gateup-prefill-m2048", 2048, 256, 2 * INTER, HIDDEN, "bfloat16", "reroute"),
    ("tp8-down-prefill-m2048", 2048, 256, HIDDEN, INTER // 8, "bfloat16", "reroute"),
    ("int64-index-m4", 4, 256, 2048, 2048, "bfloat16", "reroute"),
    ("gateup-decode-m4-fp16", 4, 256, 2 * INTER, HIDDEN, "float16", "refuse"),
]


def cases():
    out = []
    for name, tokens, experts, n, k, dtype, expect in SHAPES:
        case = dict(tokens=tokens, experts=experts, n=n, k=k, dtype=dtype)
        out.append(Case(lambda seed, c=case: make(c, seed), lambda inp, c=case: Bound(c, inp),
                        name=name, rule=RULE, kernel=f"_grouped_gemm_kernel@{RELEASE}",
                        shape=f"{tokens}x{min(TOP_K, experts)} rows, E {experts}, N {n}, K {k}",
                        expect=expect,
                        reason="A is *fp16" if expect == "refuse" else "", **case))
    return out


def reference(meta, inp):
    """float64 on the GPU: row r of expert e (ExpertTokenOffs[e] <= r <
    ExpertTokenOffs[e] + NumTokensPerExpert[e]) is A[r] . B[e]^T; the
    weights regenerated from the case's seed (their sum checked)."""
    import torch
    b = weights(meta, int(inp["seed"][0]))
    if torch.sum(b, dtype=torch.float64).item() != inp["b_sum"].item():
        raise RuntimeError(f"{meta['name']}: the regenerated weights are not the run's")
    a = inp["a"].cuda().double()
    c = torch.full((a.shape[0], meta["n"]), float("nan"), dtype=torch.float64, device="cuda")
    for e in range(meta["experts"]):
        start, count = int(inp["offs"][e]), int(inp["counts"][e])
        if count:
            c[start:start + count] = a[start:start + count] @ b[e].double().T
    return {"c": c.cpu()}


if __name__ == "__main__":
    oracle_common.main(sys.argv, {"inkling": cases}, reference, "SGLang", 700)

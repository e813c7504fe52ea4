"""inkling_launches.py - SGLang's own inkling grouped GEMM (inkling_moe.py,
grouped_gemm_triton and its _grouped_gemm_kernel), compiled by Triton
without a GPU, as the launch events the shim would log: the cases of rule
sglang-inkling-moe, in tests/oracle/launches.py's format (its stand-in
torch, stub driver, event writer and main), so that
tests/scripts/test_inkling_cli.sh can run them through test_oracle_cli.sh.

    python3 tests/oracle/inkling_launches.py OUT_DIR

Each case runs 0.5.23's grouped_gemm_triton on stand-in tensors as
moe_tp_forward (sglang/srt/models/inkling_common/moe.py:580-642) calls it:
A the routed rows grouped by expert [rows, K], B the experts' weights
[E, N, K], the four routing buffers int32 as SGLang's own helpers allocate
them (NumTokensPerExpert [E], ExpertTokenOffs and ExpertBlockOffs [E + 1],
ExpertBlockSchedule [cdiv(rows, BLOCK_SIZE_M) + E - 1]), and block_size_m
as select_grouped_gemm_block_m picks it (16 up to 6144 routed rows, else
128).  Shapes: the Inkling config class's defaults (hidden 1536,
intermediate 768: sglang/srt/configs/inkling.py:25-26) with the 256 routed
experts and top-6 of its gate kernel (inkling_gate_topk_renorm.py:4, 76),
gate/up [E, 2 x 768 / tp, 1536] and down [E, 1536, 768 / tp] at TP 1 and
8.  What each configuration costs is printed (the "# case: ..." lines) and
is the rule's evidence.
"""
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import frameworks  # noqa: E402
import launches  # noqa: E402
from launches import Catch, Tensor  # noqa: E402

PATH = "sglang/kernels/ops/moe/inkling_moe.py"
EXPERTS, TOP_K, HIDDEN, INTER = 256, 6, 1536, 768


class Dense(Tensor):
    """A contiguous stand-in tensor with what grouped_gemm_triton asserts and reads."""

    def is_contiguous(self):
        return True

    @property
    def nbytes(self):
        return self.numel() * self.dtype.itemsize


class _Record:
    """torch.profiler.record_function, which the host function enters."""

    def __init__(self, name):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def inkling(tokens, experts, n, k, act="bfloat16", block_m=None):
    """0.5.23's grouped_gemm_triton for @tokens x TOP_K routed rows (all of
    them for @experts 1) over @experts experts of N @n, K @k, in dtype
    @act, with SGLang's choice of block_size_m unless @block_m is given."""
    torch = sys.modules["torch"]
    torch.profiler = types.SimpleNamespace(record_function=_Record)
    torch.empty = lambda shape, dtype=None, device=None: Dense(shape, dtype)
    sys.modules.setdefault("sglang.srt.utils.common", types.ModuleType("sglang.srt.utils.common"))
    sys.modules["sglang.srt.utils.common"].is_sm121 = lambda: False
    mod = frameworks.load("sglang", "0.5.23", PATH)
    sink = []
    mod._grouped_gemm_kernel = Catch(mod._grouped_gemm_kernel, sink)
    rows = tokens * (TOP_K if experts > 1 else 1)
    bm = block_m or mod.select_grouped_gemm_block_m(rows)
    entries = -(-rows // bm) + experts - 1
    mod.grouped_gemm_triton(
        Dense((rows, k), act), Dense((experts, n, k), act), experts,
        Dense((experts,), "int32"), Dense((experts + 1,), "int32"),
        Dense((experts + 1,), "int32"), Dense((entries,), "int32"), block_size_m=bm)
    return sink, {}


RULE16 = ("sglang-inkling-moe", "moe_gemm_bf16_m16")
RULE128 = ("sglang-inkling-moe", "moe_gemm_bf16_m128")
E, GATEUP, DOWN = EXPERTS, (2 * INTER, HIDDEN), (HIDDEN, INTER)
GATEUP8, DOWN4, DOWN8 = (2 * INTER // 8, HIDDEN), (HIDDEN, INTER // 4), (HIDDEN, INTER // 8)
# name: (function, arguments, {kernel: outcome}) as in launches.py; "-": fits
# and must pass, "!": refused (with a text the reason must contain); a dict
# by target architecture where they differ.
CASES = {
    # The decode branch (BLOCK_SIZE_M 16, 110592 B on sm_120 and sm_90): rerouted.
    "sglang-0.5.23-inkling-gateup-decode-m4": (inkling, (4, E, *GATEUP),
                                              {"_grouped_gemm_kernel": RULE16}),
    "sglang-0.5.23-inkling-down-decode-m4": (inkling, (4, E, *DOWN),
                                            {"_grouped_gemm_kernel": RULE16}),
    # TP 8 and 4: N 192 and K 192 are not multiples of the 128 x 128 tile (KN_MASK)
    "sglang-0.5.23-inkling-tp8-gateup-decode-m1": (inkling, (1, E, *GATEUP8),
                                                  {"_grouped_gemm_kernel": RULE16}),
    "sglang-0.5.23-inkling-tp4-down-decode-m1000": (inkling, (1000, E, *DOWN4),
                                                   {"_grouped_gemm_kernel": RULE16}),
    # K 96 (down at TP 8) is one k step: Triton pipelines nothing, 36864 B
    "sglang-0.5.23-inkling-tp8-down-decode-m16": (inkling, (16, E, *DOWN8),
                                                 {"_grouped_gemm_kernel": ("-", "-")}),
    # one expert, one row: grid_m is 1, which Triton compiles in and drops
    "sglang-0.5.23-inkling-e1-grid-m1": (inkling, (1, 1, *GATEUP),
                                        {"_grouped_gemm_kernel": RULE16}),
    # weights of 4 GiB: INT64_INDEX on (64-bit index arithmetic, the same numbers)
    "sglang-0.5.23-inkling-int64-index": (inkling, (4, E, 4096, 2048),
                                         {"_grouped_gemm_kernel": RULE16}),
    # The prefill branch (BLOCK_SIZE_M 128, over 6144 routed rows): 98304 B on
    # sm_120 (fits), 147456 B on sm_90 (rerouted under Hopper emulation).
    "sglang-0.5.23-inkling-gateup-prefill-m2048": (
        inkling, (2048, E, *GATEUP), {"_grouped_gemm_kernel": {120: ("-", "-"), 90: RULE128}}),
    "sglang-0.5.23-inkling-tp8-down-prefill-m2048": (
        inkling, (2048, E, *DOWN8), {"_grouped_gemm_kernel": {120: ("-", "-"), 90: RULE128}}),
    # Refused, each with the reason: fp16 (the same bytes as bf16: loaded, refused
    # at launch), fp32 (221184 B: no tile), K not a multiple of 16.
    "sglang-0.5.23-inkling-gateup-decode-fp16": (
        inkling, (4, E, *GATEUP, "float16"), {"_grouped_gemm_kernel": ("!", "-", "A is *fp16")}),
    "sglang-0.5.23-inkling-gateup-decode-fp32": (
        inkling, (4, E, *GATEUP, "float32"),
        {"_grouped_gemm_kernel": ("!", "-", "only at the shared-memory sizes of its tiles")}),
    "sglang-0.5.23-inkling-decode-k1000": (
        inkling, (4, E, HIDDEN, 1000),
        {"_grouped_gemm_kernel": ("!", "-", "K 1000 is not a multiple of 16")}),
}
# Rerouted only with the compiled facts (without them: refused, E, N, K and
# the strides being constexprs); every other case decides the same.
FACTS_DECIDE = {case for case, (_, _, want) in CASES.items()
                if any(o in (RULE16, RULE128) for o in
                       (want["_grouped_gemm_kernel"].values()
                        if isinstance(want["_grouped_gemm_kernel"], dict)
                        else [want["_grouped_gemm_kernel"]]))}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    launches.CASES, launches.FACTS_DECIDE = CASES, FACTS_DECIDE
    launches.main(sys.argv[1])

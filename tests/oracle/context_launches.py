"""context_launches.py - SGLang's own context_attention_fwd (prefill_attention.py),
compiled by Triton without a GPU, as the launch events the shim would log: the
cases of rule sglang-context-attention, in tests/oracle/launches.py's format
(its stand-in torch, stub driver, event writer and main), so that
tests/scripts/test_context_cli.sh can run them through test_oracle_cli.sh.

    python3 tests/oracle/context_launches.py OUT_DIR

Each case runs the release's context_attention_fwd on stand-in tensors as
SGLang's callers build them: VisionTritonAttention (every vision tower on the
triton_attn backend: non-causal, q/k/v [tokens, heads, head size], cu_seqlens
as B_Start_Loc and its differences as B_Seqlen, int32 unless the model built
them otherwise) and redundant_attention (causal).  On capability > 8 SGLang
compiles BLOCK 128; what that costs per head size and dtype is printed (the
"# case: _fwd_kernel N B" lines) and is the rule's evidence.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import frameworks  # noqa: E402
import launches  # noqa: E402
from launches import Catch, Tensor  # noqa: E402

PATHS = {"0.5.8": "sglang/srt/layers/attention/triton_ops/prefill_attention.py",
         "0.5.9": "sglang/srt/layers/attention/triton_ops/prefill_attention.py",
         "0.5.23": "sglang/kernels/ops/attention/prefill_attention.py"}


def sglang_context(release, heads, kv_heads, d, lens, causal, act="bfloat16", seq="int32",
                   sm_scale=None):
    """context_attention_fwd of SGLang @release: @heads q heads and @kv_heads
    kv heads of head size @d, sequences of lengths @lens packed back to back,
    B_Start_Loc the cu_seqlens array (batch + 1 entries, as VisionTritonAttention
    passes it) and B_Seqlen its differences, both of dtype @seq; q, k, v, o of
    dtype @act; @sm_scale passed only where the release takes it (0.5.23)."""
    mod = frameworks.load("sglang", release, PATHS[release])
    sink = []
    mod._fwd_kernel = Catch(mod._fwd_kernel, sink)
    tokens = sum(lens)
    extra = {} if sm_scale is None else {"sm_scale": sm_scale}
    mod.context_attention_fwd(
        Tensor((tokens, heads, d), act), Tensor((tokens, kv_heads, d), act),
        Tensor((tokens, kv_heads, d), act), Tensor((tokens, heads, d), act),
        Tensor((len(lens) + 1,), seq), Tensor((len(lens),), seq), max(lens),
        is_causal=causal, **extra)
    return sink, {}


LENS = [1, 333, 1025, 64]
RULE = ("sglang-context-attention", "attn_extend_256_bf16")
# name: (function, arguments, {kernel: outcome}) as in launches.py; "-": fits
# and must pass, "!": refused (with a text the reason must contain).
CASES = {
    # What vision towers run: head sizes up to 128 take 32768 / 65536 B and fit.
    "sglang-0.5.9-context-qwen25vl-d80": (sglang_context, ("0.5.9", 16, 16, 80, LENS, False),
                                          {"_fwd_kernel": ("-", "-")}),
    "sglang-0.5.9-context-siglip-d72": (sglang_context, ("0.5.9", 16, 16, 72, LENS, False),
                                        {"_fwd_kernel": ("-", "-")}),
    "sglang-0.5.23-context-internvit6b-d128": (sglang_context, ("0.5.23", 25, 25, 128, LENS, False),
                                               {"_fwd_kernel": ("-", "-")}),
    # Head size 256, bf16: 163840 B on sm_120, 131072 B on sm_90, rerouted.
    "sglang-0.5.9-context-d256-vit": (sglang_context, ("0.5.9", 16, 16, 256, LENS, False),
                                      {"_fwd_kernel": RULE}),
    "sglang-0.5.9-context-d256-causal-gqa": (sglang_context, ("0.5.9", 12, 3, 256, LENS, True),
                                             {"_fwd_kernel": RULE}),
    "sglang-0.5.8-context-d256-causal": (sglang_context, ("0.5.8", 4, 4, 256, [77, 5], True),
                                         {"_fwd_kernel": RULE}),
    "sglang-0.5.23-context-d256-vit-scale": (
        sglang_context, ("0.5.23", 8, 8, 256, LENS, False, "bfloat16", "int32", 0.0371),
        {"_fwd_kernel": RULE}),
    # Refused, each with the reason.
    "sglang-0.5.9-context-d192": (sglang_context, ("0.5.9", 16, 16, 192, LENS, False),
                                  {"_fwd_kernel": ("!", "-", "compiled with Lk 192")}),
    "sglang-0.5.9-context-d144": (sglang_context, ("0.5.9", 16, 16, 144, LENS, False),
                                  {"_fwd_kernel": ("!", "-", "compiled with Lk 144")}),
    "sglang-0.5.9-context-d256-fp16": (sglang_context, ("0.5.9", 16, 16, 256, LENS, False, "float16"),
                                       {"_fwd_kernel": ("!", "-", "Q is *fp16")}),
    "sglang-0.5.9-context-d256-seq-int64": (
        sglang_context, ("0.5.9", 16, 16, 256, LENS, False, "bfloat16", "int64"),
        {"_fwd_kernel": ("!", "-", "B_Start_Loc is *i64")}),
    "sglang-0.5.9-context-d128-fp32": (sglang_context, ("0.5.9", 16, 16, 128, LENS, False, "float32"),
                                       {"_fwd_kernel": ("!", "-", "compiled with Lk 128")}),
    "sglang-0.5.9-context-d80-fp32": (sglang_context, ("0.5.9", 16, 16, 80, LENS, False, "float32"),
                                      {"_fwd_kernel": ("!", "-", "compiled with Lk 80")}),
}
# Rerouted only with the compiled facts (without them: refused, IS_CAUSAL,
# kv_group_num and Lk being invisible); every other case decides the same.
FACTS_DECIDE = {case for case, (_, _, want) in CASES.items() if want["_fwd_kernel"] == RULE}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    launches.CASES, launches.FACTS_DECIDE = CASES, FACTS_DECIDE
    launches.main(sys.argv[1])

"""test_reroute.py - the shim's reroute mode on SGLang's and vLLM's own attention kernels (GPU).

The launches are the frameworks' own Triton kernels, from their released
packages (tests/oracle/fetch.sh, loaded by tests/oracle/frameworks.py),
through their own host functions, at the configurations that overflow SM120
on an H100 (capability 9):

  SGLang extend attention   extend_attention_fwd -> `_fwd_kernel`, MLA
                            absorbed 576/512 at 32x64, 8 warps: 106496 B;
                            one release of every signature the rules claim
                            (EXTEND): 0.5.8 and 0.5.9 (sglang-extend-2025-08,
                            bf16 only: no k/v scales), 0.5.14 (-2026-03),
                            0.5.15 (-2026-06-29), 0.5.17 (-2026-07-10),
                            0.5.18 and 0.5.23 (-main), and 0.5.23 with one
                            sequence (compact_batch_size == 1 compiled in)
  vLLM TRITON_MLA decode    decode_attention_fwd -> `_fwd_grouped_kernel_stage1`
                            (102400 B with an FP8 cache, rerouted; 63488 B
                            with bf16: fits, left alone) and
                            `_fwd_kernel_stage2`; 0.33.0 (vllm-mla-decode-2026-06,
                            page strides) and 0.23.0 (-2026-03)

on inputs shaped like Kimi K2 at TP8 (8 q heads, one 576-wide latent KV
head, V the first 512 channels of the K cache).  Every scalar is distinct and
non-trivial: sm_scale 192^-0.5, the extend k_scale/v_scale of each dtype
(EXTEND_SCALES; the releases before 0.5.10 have none), the decode k_scale and
a v_scale that vLLM's IS_MLA kernel loads and never applies.  The same script
runs in a plain process and in one started under the shim (sm120 run --mode
reroute --target sm120); `check` compares the two against a float64 PyTorch
reference.

Run as: python3 tests/gpu/test_reroute.py MODE ...
  run OUTDIR [--kv bf16|fp8_e4m3]
      launch every case of the KV cache dtype (default: both) on fixed-seed
      inputs and save inputs and outputs to OUTDIR/<case>.pt (CPU tensors);
      print, per case, the compiled kernels' shared memory and cubin
      parameter count against EXTEND / DECODE (ok / not ok); write
      OUTDIR/launches.json, the over-limit launches in the order made (case,
      kernel, cubin parameters, rule), for the log check.
      Cases: extend_<release>_<kv>, extend_0523b1_<kv> (one sequence),
      decode_<release>_<kv>.
      Under the shim, run one dtype per process: SM120SHIM_KV_CACHE_DTYPE must
      name it (SGLang compiles the cache dtype into the kernel).
  graph OUTDIR [--kv bf16|fp8_e4m3]
      the same launches captured in one CUDA graph (after a warm-up outside
      capture), replayed on new inputs (other lengths, pages and slots) copied
      into the static buffers; saves the replay's results like `run`, and
      prints whether the replay equals an eager launch on those inputs.
      launches.json: warm-up, capture and the eager launch (a replay passes
      no hook).
  logcheck OUTDIR LOG...
      the shim's JSON logs against OUTDIR/launches.json: the over-limit
      launches, in order, each rerouted by its case's rule with its cubin
      parameter count, nothing else rerouted or refused (no torch needed).
  check PLAIN_DIR SHIM_DIR
      for every case: inputs identical; the framework's kernel within 16 bf16
      ulps of a float64 reference (a sanity check of the test: a wrong
      reference or layout is off by far more); the shim's result within
      2 x the framework kernel's own error + 1 bf16 ulp (the error a
      same-precision kernel makes, plus one rounding step of the bf16
      output); cases the shim must not touch (vLLM decode with a bf16 cache:
      63488 B fits) bit-identical.  The ulp is taken at the largest
      |reference| value.
  enforce
      launch each over-limit kernel once (small inputs) and report whether
      Triton raised OutOfResources with the expected figures (run it under
      sm120 run --mode enforce --target sm120); the bf16 decode must run.
  refuse
      launch SGLang 0.5.9's extend kernel with an FP8 KV cache once, under
      sm120 run --mode reroute --target sm120 --set kv_cache_dtype=fp8_e4m3:
      the shim must refuse it (that release reads FP8 without k/v scales:
      not verified), so the launch fails with a CUDA error (and the context
      stays usable).  Its own process: the failed launch must not disturb
      other cases.

Prints "ok - ..." / "not ok - ..." lines (and "# ..." comments).
"""
import glob
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import torch  # noqa: E402  (after the path is set)

import frameworks  # noqa: E402
from reroute_tap import (Tap, bf16_ulp, bits, cubin_param_count, expect_refused,  # noqa: E402
                         same_bits, shim_label)

HEADS = 8                  # Kimi K2 (64 q heads) at TP8
LQ, LV = 576, 512          # kv_lora_rank 512 + rope 64; V = first 512 channels
SM_SCALE = 192 ** -0.5     # the absorbed path keeps the (128 + 64)-dim scale
POISON = 100.0             # every cache row no sequence owns: a wrong read shows
SEED, SEED_GRAPH = 20260801, 20260802
OOR_LIMIT = 101376
KV_NAMES = ("bf16", "fp8_e4m3")
BOTH = KV_NAMES

# SGLang extend: (prefix, extend) lengths per sequence, one batch.
EXTEND_SEQS = [(0, 17), (1, 1), (2211, 1000), (1, 17), (2211, 1), (0, 1000)]
EXTEND_SEQS_GRAPH = [(2211, 17), (0, 1000), (1, 1), (2211, 1000), (1, 1), (0, 17)]
EXTEND_SLOTS = sum(p for p, _ in EXTEND_SEQS) + 1 + 200   # slot 0 and 200 spare: never read
# (k_scale, v_scale) floats, distinct and not 1 (releases from 0.5.10 on)
EXTEND_SCALES = {"bf16": (0.8125, 1.375), "fp8_e4m3": (0.5, 0.25)}
# One sequence (compact_batch_size == 1 compiled in), the same shapes for the replay.
EXTEND_SEQS_BATCH1 = [(2211, 1000)]

# The extend cases: label -> (release, the rules that may reroute it, KV cache
# dtypes launched, cubin parameters, sequences, the replay's sequences: the
# same totals, as the replay reuses the tensors).  The parameter counts are
# the real kernels' as Triton 3.6 compiles them for sm_90 here (runtime
# arguments less constexprs, Nones and ints equal to 1, plus two scratch
# pointers); the shared memory is 106496 B for every one.  0.5.8 / 0.5.9 run
# with bf16 only (no k/v scales: the shim refuses their FP8 reading, see
# refuse).  0.5.17 and 0.5.23 at batch 1 have the same count (36): the
# log check tells them apart by the order of the launches.  0.5.23 at batch 1
# (compact_batch_size compiled in) has -2026-07-10's runtime list: the Python
# hook's facts name compact_batch_size among the compiled-in arguments, which
# sends it to -main (tests/oracle/launches.py).
EXTEND = {
    "058": ("0.5.8", {"sglang-extend-2025-08"}, ("bf16",), 25, EXTEND_SEQS, EXTEND_SEQS_GRAPH),
    "059": ("0.5.9", {"sglang-extend-2025-08"}, ("bf16",), 25, EXTEND_SEQS, EXTEND_SEQS_GRAPH),
    "0514": ("0.5.14", {"sglang-extend-2026-03"}, BOTH, 27, EXTEND_SEQS, EXTEND_SEQS_GRAPH),
    "0515": ("0.5.15", {"sglang-extend-2026-06-29"}, BOTH, 33, EXTEND_SEQS, EXTEND_SEQS_GRAPH),
    "0517": ("0.5.17", {"sglang-extend-2026-07-10"}, BOTH, 36, EXTEND_SEQS, EXTEND_SEQS_GRAPH),
    "0518": ("0.5.18", {"sglang-extend-main"}, BOTH, 37, EXTEND_SEQS, EXTEND_SEQS_GRAPH),
    "0523": ("0.5.23", {"sglang-extend-main"}, BOTH, 37, EXTEND_SEQS, EXTEND_SEQS_GRAPH),
    "0523b1": ("0.5.23", {"sglang-extend-main"}, BOTH, 36,
               EXTEND_SEQS_BATCH1, EXTEND_SEQS_BATCH1),
}
NO_SCALES = {"0.5.8", "0.5.9"}
EXTEND_SMEM = 106496

# vLLM decode: one query token per sequence, paged cache of PAGE tokens.
DECODE_LENS = [1, 17, 1000, 4099]
DECODE_LENS_GRAPH = [4097, 3, 1000, 64]
PAGE, N_PAGES, TABLE_WIDTH = 64, 128, 66   # page 0 and the spare pages: never read
DECODE_K_SCALE = {"bf16": 1.0, "fp8_e4m3": 0.05}  # vLLM's layer._k_scale, a device scalar
# v_scale: vLLM's IS_MLA kernel loads it and never applies it (V is the k_scale-
# dequantised K tile).  A value distinct from k_scale and from 1 makes a kernel
# that does apply it fail; TritonMLAImpl itself passes layer._k_scale.
DECODE_V_SCALE = {"bf16": 1.25, "fp8_e4m3": 0.75}
DECODE_FILE = "vllm/v1/attention/ops/triton_decode_attention.py"
# release -> (rule of stage 1, its cubin parameters; stage 2 has 12 and is never
# over the limit).  Stage 1 needs 102400 B with an FP8 cache, 63488 B with bf16.
DECODE = {"03300": ("0.33.0", "vllm-mla-decode-2026-06", 23),
          "02300": ("0.23.0", "vllm-mla-decode-2026-03", 21)}
DECODE_SMEM = {"bf16": 63488, "fp8_e4m3": 102400}
STAGE2_PARAMS = 12


def cdiv(a, b):
    return -(-a // b)


def f32(x):
    """x rounded to fp32, as Triton passes a Python float or the kernel reads a scalar."""
    return float(torch.tensor(x, dtype=torch.float32))


def kv_dtype(kv):
    return {"bf16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn}[kv]


def num_kv_splits_for(max_seq_len, sm_count):
    """vLLM TRITON_MLA's split count: next_pow2(max(1, len // 512)), at most 2 per SM."""
    return min(1 << (max(1, max_seq_len // 512) - 1).bit_length(), 2 * sm_count)


# -----------------------------------------------------------------------------
# The frameworks' modules: one per case label, so that each keeps its own
# Triton cache of compiled kernels (0.5.23 runs at two batch sizes)
# -----------------------------------------------------------------------------

_modules = {}


def extend_module(label):
    """SGLang's extend_attention module of EXTEND[label], its `_fwd_kernel` tapped."""
    if label not in _modules:
        mod = frameworks.load_sglang_extend(EXTEND[label][0])
        mod._fwd_kernel = Tap(mod._fwd_kernel)
        _modules[label] = mod
    return _modules[label]


def decode_module(label):
    """vLLM's triton_decode_attention module of DECODE[label], both stages tapped."""
    if label not in _modules:
        mod = frameworks.load("vllm", DECODE[label][0], DECODE_FILE)
        mod._fwd_grouped_kernel_stage1 = Tap(mod._fwd_grouped_kernel_stage1)
        mod._fwd_kernel_stage2 = Tap(mod._fwd_kernel_stage2)
        _modules[label] = mod
    return _modules[label]


# -----------------------------------------------------------------------------
# Cases: inputs, launch, outputs
# -----------------------------------------------------------------------------


class Case:
    """One launch sequence: device inputs, static outputs, and how to launch it."""

    def __init__(self, kind, label, kv, inputs):
        self.kind, self.label, self.kv, self.inputs = kind, label, kv, inputs
        self.name = f"{kind}_{label}_{kv}"
        # The vLLM decode with a bf16 cache fits SM120 (63488 B): never rerouted.
        self.expect_reroute = not (kind == "decode" and kv == "bf16")
        dev = inputs["q"].device
        if kind == "extend":
            t = inputs["q"].shape[0]
            self.outputs = {"o": torch.empty(t, HEADS, LV, dtype=torch.bfloat16, device=dev)}
        else:
            b, s = inputs["q"].shape[0], inputs["num_kv_splits"]
            self.outputs = {
                "o": torch.empty(b, HEADS, LV, dtype=torch.bfloat16, device=dev),
                "lse": torch.empty(b, HEADS, dtype=torch.bfloat16, device=dev),  # vLLM: q.dtype
                "att": torch.empty(b, HEADS, s, LV + 1, dtype=torch.float32, device=dev),
            }
            self.k_scale_t = torch.tensor(inputs["k_scale"], dtype=torch.float32, device=dev)
            self.v_scale_t = torch.tensor(DECODE_V_SCALE[kv], dtype=torch.float32, device=dev)
        self.reset_outputs()

    @property
    def release(self):
        return (EXTEND if self.kind == "extend" else DECODE)[self.label][0]

    def over_limit(self):
        """[(kernel, cubin parameters, rules)] of each launch over SM120's limit."""
        if self.kind == "extend":
            _, rules, _, params, _, _ = EXTEND[self.label]
            return [("_fwd_kernel", params, sorted(rules))]
        _, rule, params = DECODE[self.label]
        return [("_fwd_grouped_kernel_stage1", params, [rule])] if self.expect_reroute else []

    def reset_outputs(self):
        """NaN everywhere: whatever a kernel does not write stays visible."""
        for t in self.outputs.values():
            t.fill_(float("nan"))

    def launch(self):
        """Launch through the framework's own host function; returns the compiled kernels."""
        d = self.inputs
        if self.kind == "extend":
            mod = extend_module(self.label)
            k, buf = d["k_ext"], d["k_buffer"]
            scales = () if self.release in NO_SCALES else (d["k_scale"], d["v_scale"])
            mod.extend_attention_fwd(
                d["q"], k, k[..., :LV], self.outputs["o"], buf, buf[..., :LV],
                d["qo_indptr"], d["kv_indptr"], d["kv_indices"], None, True, None,
                d["max_len_extend"], *scales, sm_scale=d["sm_scale"])
            return [mod._fwd_kernel.last]
        mod = decode_module(self.label)
        cache = d["kv_cache"]  # [pages, PAGE, 1, LQ]: vLLM's cache.unsqueeze(2)
        mod.decode_attention_fwd(
            d["q"], cache, cache[..., :LV], self.outputs["o"], self.outputs["lse"],
            d["block_table"], d["seq_lens"], self.outputs["att"], d["num_kv_splits"],
            d["sm_scale"], d["page_size"], k_scale=self.k_scale_t, v_scale=self.v_scale_t,
            is_mla=True)
        return [mod._fwd_grouped_kernel_stage1.last, mod._fwd_kernel_stage2.last]

    def copy_inputs_from(self, other):
        """Put other's inputs into this case's (static) tensors."""
        for key, t in self.inputs.items():
            if torch.is_tensor(t):
                assert t.shape == other.inputs[key].shape, (key, t.shape, other.inputs[key].shape)
                t.copy_(other.inputs[key])
            else:
                assert t == other.inputs[key], (key, t, other.inputs[key])

    def outputs_cpu(self):
        return {k: v.cpu() for k, v in self.outputs.items()}

    def save(self, outdir, mode, outputs=None):
        torch.save({
            "case": self.name, "kind": self.kind, "kv": self.kv, "mode": mode,
            "release": self.release,
            "expect_reroute": self.expect_reroute,
            "inputs": {k: v.cpu() if torch.is_tensor(v) else v for k, v in self.inputs.items()},
            "outputs": outputs if outputs is not None else self.outputs_cpu(),
        }, os.path.join(outdir, self.name + ".pt"))


def make_extend(kv, seqs, seed, label, dev="cuda"):
    """SGLang extend inputs for EXTEND[label]: q/k of the new tokens, a
    576-wide latent KV buffer whose prefix slots are a random permutation
    (slot 0 and spares poisoned); k/v scales 1 for a release without them."""
    g = torch.Generator(device=dev).manual_seed(seed)
    pre = [p for p, _ in seqs]
    ext = [e for _, e in seqs]
    t, p = sum(ext), sum(pre)
    cum = lambda xs: torch.tensor([0] + [sum(xs[:i + 1]) for i in range(len(xs))],  # noqa: E731
                                  dtype=torch.int32, device=dev)
    slots = torch.randperm(EXTEND_SLOTS - 1, generator=g, device=dev)[:p] + 1
    q = torch.randn(t, HEADS, LQ, generator=g, device=dev).to(torch.bfloat16)
    k_ext = torch.randn(t, 1, LQ, generator=g, device=dev).to(torch.bfloat16)
    scaled = EXTEND[label][0] not in NO_SCALES
    k_scale, v_scale = EXTEND_SCALES[kv] if scaled else (1.0, 1.0)
    buf = torch.full((EXTEND_SLOTS, 1, LQ), POISON, device=dev)
    # stored values: k_scale * stored ~ N(0, 1) for the keys
    buf[slots] = torch.randn(p, 1, LQ, generator=g, device=dev) / k_scale
    if kv != "bf16":
        buf = buf.clamp(-448, 448)
    return Case("extend", label, kv, dict(
        q=q, k_ext=k_ext, k_buffer=buf.to(kv_dtype(kv)),
        qo_indptr=cum(ext), kv_indptr=cum(pre), kv_indices=slots.to(torch.int64),
        max_len_extend=max(ext), sm_scale=SM_SCALE, k_scale=k_scale, v_scale=v_scale))


def make_decode(kv, lens, seed, label, n_splits=None, dev="cuda"):
    """vLLM decode inputs: a paged [pages, PAGE, 1, 576] cache with each sequence's
    pages drawn at random (page 0, the spares and the rows past a sequence's
    end poisoned), the block table padded with page 0, and the split count
    vLLM computes from the longest sequence and the SM count."""
    g = torch.Generator(device=dev).manual_seed(seed)
    ks = DECODE_K_SCALE[kv]
    pages = torch.randperm(N_PAGES - 1, generator=g, device=dev) + 1
    table = torch.zeros(len(lens), TABLE_WIDTH, dtype=torch.int32, device=dev)
    cache = torch.full((N_PAGES, PAGE, 1, LQ), POISON, device=dev)
    used = 0
    for b, n in enumerate(lens):
        mine = pages[used:used + cdiv(n, PAGE)]
        used += mine.numel()
        table[b, :mine.numel()] = mine.to(torch.int32)
        pos = torch.arange(n, device=dev)
        cache[mine[pos // PAGE], pos % PAGE] = torch.randn(n, 1, LQ, generator=g, device=dev) / ks
    if kv != "bf16":
        cache = cache.clamp(-448, 448)
    if n_splits is None:
        sms = torch.cuda.get_device_properties(torch.device(dev)).multi_processor_count
        n_splits = num_kv_splits_for(max(lens), sms)
    return Case("decode", label, kv, dict(
        q=torch.randn(len(lens), HEADS, LQ, generator=g, device=dev).to(torch.bfloat16),
        kv_cache=cache.to(kv_dtype(kv)), block_table=table,
        seq_lens=torch.tensor(lens, dtype=torch.int32, device=dev),
        num_kv_splits=n_splits, page_size=PAGE, sm_scale=SM_SCALE, k_scale=ks))


def make_cases(kv, graph_inputs=False, n_splits=None):
    """The extend case of every release launched with this KV dtype, then the decodes."""
    seed = SEED_GRAPH if graph_inputs else SEED
    cases = []
    for label, (_, _, kvs, _, seqs, seqs_graph) in EXTEND.items():
        if kv in kvs:
            cases.append(make_extend(kv, seqs_graph if graph_inputs else seqs, seed, label))
    for label in DECODE:
        cases.append(make_decode(kv, DECODE_LENS_GRAPH if graph_inputs else DECODE_LENS, seed,
                                 label, n_splits))
    return cases


def describe(case, kernels):
    """ok / not ok: each compiled kernel's shared memory and cubin parameters as
    expected (EXTEND, DECODE: the real kernels' figures)."""
    if case.kind == "extend":
        want = [(EXTEND_SMEM, EXTEND[case.label][3])]
    else:
        want = [(DECODE_SMEM[case.kv], DECODE[case.label][2]), (0, STAGE2_PARAMS)]
    for k, (smem, params) in zip(kernels, want):
        got = (k.metadata.shared, cubin_param_count(k))
        print(f"{'ok' if got == (smem, params) else 'not ok'} - {case.name} "
              f"({case.release}): {k.metadata.name}: {got[0]} B shared memory (expected "
              f"{smem}), {got[1]} cubin parameters (expected {params}), "
              f"{k.metadata.num_warps} warps")


def write_launches(outdir, launches):
    """OUTDIR/launches.json: the over-limit launches made, in order (the log check's)."""
    with open(os.path.join(outdir, "launches.json"), "w") as f:
        json.dump([dict(case=c.name, kernel=k, params=n, rules=r)
                   for c in launches for k, n, r in c.over_limit()], f)


# -----------------------------------------------------------------------------
# run / graph / enforce / refuse / logcheck
# -----------------------------------------------------------------------------


def run_mode(outdir, kvs):
    os.makedirs(outdir, exist_ok=True)
    launched = []
    for kv in kvs:
        for case in make_cases(kv):
            kernels = case.launch()
            launched.append(case)
            torch.cuda.synchronize()
            describe(case, kernels)
            case.save(outdir, "run")
    write_launches(outdir, launched)
    print(f"# run ({shim_label()}): {len(launched)} cases saved to {outdir}")


def graph_mode(outdir, kvs):
    os.makedirs(outdir, exist_ok=True)
    who = shim_label()
    launched = []
    for kv in kvs:
        cases = make_cases(kv)
        splits = [c for c in cases if c.kind == "decode"][0].inputs["num_kv_splits"]
        fresh = make_cases(kv, graph_inputs=True, n_splits=splits)
        # Warm-up outside capture: Triton compiles and loads its modules here.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for c in cases:
                c.launch()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        warm = [c.outputs_cpu() for c in cases]

        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for c in cases:
                c.launch()
        for c, f in zip(cases, fresh):
            c.copy_inputs_from(f)
            c.reset_outputs()
        graph.replay()
        torch.cuda.synchronize()
        replayed = [c.outputs_cpu() for c in cases]

        for c in cases:  # the same inputs, launched eagerly
            c.reset_outputs()
            c.launch()
        torch.cuda.synchronize()
        launched += cases * 3   # warm-up, capture, eager: in this order
        for c, r, w in zip(cases, replayed, warm):
            eager = c.outputs_cpu()
            same = all(same_bits(r[k], eager[k]) for k in r)
            print(f"{'ok' if same else 'not ok'} - graph ({who}) {c.name}: the replay on new "
                  f"inputs equals an eager launch on them, bit for bit")
            moved = all(not same_bits(r[k], w[k]) for k in r)
            print(f"{'ok' if moved else 'not ok'} - graph ({who}) {c.name}: the replay read the "
                  f"new inputs (its results differ from the warm-up's)")
            c.save(outdir, "graph", outputs=r)
    write_launches(outdir, launched)
    print(f"# graph ({who}): saved to {outdir}")


def small_cases(kv):
    """One small launch of every over-limit kernel with this KV dtype (and the
    bf16 decode, which fits): two sequences of 3 prefix and 5 new tokens, a
    decode of one 70-token sequence."""
    cases = [make_extend(kv, [(3, 5), (3, 5)], SEED, label)
             for label, (_, _, kvs, _, seqs, _) in EXTEND.items() if kv in kvs and len(seqs) > 1]
    return cases + [make_decode(kv, [70], SEED, label, n_splits=8) for label in DECODE]


def enforce_mode():
    """Each over-limit launch once; Triton must refuse it as an SM120 card would."""
    from triton.runtime.errors import OutOfResources

    who = shim_label()
    for kv in KV_NAMES:
        for case in small_cases(kv):
            kernel = case.over_limit()[0][0] if case.expect_reroute else "decode stage 1"
            what = f"{'SGLang' if case.kind == 'extend' else 'vLLM'} {case.release} {kernel}"
            want = EXTEND_SMEM if case.kind == "extend" else DECODE_SMEM[kv]
            if want <= OOR_LIMIT:
                try:
                    case.launch()
                    torch.cuda.synchronize()
                    print(f"ok - enforce ({who}): {what} with a {kv} KV cache ({want} B) fits "
                          f"and runs")
                except Exception as e:  # noqa: BLE001  (any failure is the finding)
                    print(f"not ok - enforce ({who}): {what} with a {kv} KV cache failed: "
                          f"{type(e).__name__}: {e}")
                continue
            expect = f"Required: {want}, Hardware limit: {OOR_LIMIT}"
            try:
                case.launch()
                torch.cuda.synchronize()
                print(f"not ok - enforce ({who}): {what}, {kv} KV cache, ran: no OutOfResources "
                      f"(expected '{expect}'; is the shim preloaded in enforce mode, target "
                      f"sm120?)")
            except OutOfResources as e:
                msg = str(e).splitlines()[0] if str(e) else repr(e)
                good = expect in msg
                print(f"{'ok' if good else 'not ok'} - enforce ({who}): {what}, {kv} KV cache: "
                      f"OutOfResources: {msg}")


def refuse_mode():
    """SGLang 0.5.9's extend kernel with an FP8 KV cache, once.  The shim has
    its rule but does not reroute it with FP8 (that release reads FP8 keys
    without k/v scales: not verified), so it must refuse the launch as an SM120
    card would: Triton's launcher gets CUDA_ERROR_INVALID_VALUE and raises.
    The log check (the `refuse` event and its reason) is reroute_gpu.sh's."""
    case = make_extend("fp8_e4m3", [(3, 5)], SEED, "059")
    expect_refused("SGLang 0.5.9 extend _fwd_kernel with an FP8 KV cache", case.launch,
                   "in reroute mode with kv_cache_dtype=fp8_e4m3, target sm120")


def logcheck_mode(outdir, logs):
    """The shim's JSON logs against OUTDIR/launches.json (see the file's comment)."""
    try:
        want = json.load(open(os.path.join(outdir, "launches.json")))
    except (OSError, ValueError) as e:
        print(f"not ok - logcheck {outdir}: no record of the launches made ({e})")
        return
    events = [json.loads(line) for path in logs for line in open(path) if line.strip()]
    names = {w["kernel"] for w in want} | {"_fwd_kernel", "_fwd_grouped_kernel_stage1"}
    launch = [e for e in events if e.get("event") == "launch" and e.get("kernel") in names]
    refused = [e for e in events if e.get("action") == "refuse"]
    got = [(e.get("kernel"), len(e.get("param_sizes") or []), e.get("action"), e.get("rule"),
            bool(e.get("rerouted_to"))) for e in launch]
    bad = []
    for i, w in enumerate(want):
        g = got[i] if i < len(got) else None
        if not (g and g[0] == w["kernel"] and g[1] == w["params"] and g[2] == "reroute"
                and g[3] in w["rules"] and g[4]):
            bad.append(f"launch {i} ({w['case']}: {w['kernel']}, {w['params']} parameters, "
                       f"rule {' or '.join(w['rules'])}): logged {g}")
    if len(got) > len(want):
        bad.append(f"{len(got) - len(want)} more launches logged than made: {got[len(want):][:3]}")
    for e in refused[:3]:
        bad.append(f"refused: {e.get('event')} {e.get('kernel')}: {e.get('reason')}")
    rules = sorted({r for _, _, _, r, _ in got if r}, key=str)
    print(f"{'ok' if not bad else 'not ok'} - logcheck {os.path.basename(outdir)}: the log "
          f"holds the {len(want)} over-limit launches in the order made, each rerouted by the "
          f"rule of its release with its cubin parameter count (rules {rules}), nothing "
          f"else rerouted, nothing refused ({len(events)} events)")
    for line in bad[:8]:
        print(f"#   {line}")
    taken = {}
    for w, g in zip(want, got):
        taken.setdefault(w["case"], set()).add(g[3])
    print("# rules taken: " + "; ".join(f"{c} {sorted(r, key=str)}" for c, r in taken.items()))


# -----------------------------------------------------------------------------
# check: float64 references and the tolerance
# -----------------------------------------------------------------------------


def ref_extend(inp, dev):
    """Extend attention in float64: prefix keys scaled by sm_scale*k_scale, values
    by v_scale; extend keys causal (key j <= query i) scaled by sm_scale."""
    q = inp["q"].to(dev).double()
    kx = inp["k_ext"].to(dev)[:, 0].double()
    kb = inp["k_buffer"].to(dev)[:, 0].float().double()
    idx = inp["kv_indices"].to(dev)
    qo, kvp = inp["qo_indptr"].tolist(), inp["kv_indptr"].tolist()
    sm, ks, vs = f32(inp["sm_scale"]), f32(inp["k_scale"]), f32(inp["v_scale"])
    out = torch.full((q.shape[0], HEADS, LV), float("nan"), dtype=torch.float64, device=dev)
    for b in range(len(qo) - 1):
        qb = q[qo[b]:qo[b + 1]]                       # [E, H, LQ]
        e = qb.shape[0]
        if e == 0:
            continue
        kp = kb[idx[kvp[b]:kvp[b + 1]]]               # [P, LQ] prefix keys (V: [:, :LV])
        ke = kx[qo[b]:qo[b + 1]]                      # [E, LQ] extend keys
        s_pre = torch.einsum("ehd,pd->ehp", qb, kp) * (sm * ks)
        s_ext = torch.einsum("ehd,jd->ehj", qb, ke) * sm
        j = torch.arange(e, device=dev)
        causal = j[:, None] >= j[None, :]             # query i sees extend keys j <= i
        s_ext = s_ext.masked_fill(~causal[:, None, :], float("-inf"))
        w = torch.softmax(torch.cat([s_pre, s_ext], dim=-1), dim=-1)
        n = kp.shape[0]
        out[qo[b]:qo[b + 1]] = (torch.einsum("ehp,pd->ehd", w[..., :n], kp[:, :LV] * vs)
                                + torch.einsum("ehj,jd->ehd", w[..., n:], ke[:, :LV]))
    return {"o": out}


def ref_decode(inp, dev):
    """vLLM MLA decode in float64: K = k_scale * cache, V = K[:, :512]; the full
    result (o, lse) and each non-empty split's partial result (Att_Out)."""
    q = inp["q"].to(dev).double()
    cache = inp["kv_cache"].to(dev)[:, :, 0].float().double() * f32(inp["k_scale"])
    table = inp["block_table"].to(dev).long()
    lens = inp["seq_lens"].tolist()
    splits, page, sm = inp["num_kv_splits"], inp["page_size"], f32(inp["sm_scale"])
    nan = float("nan")
    b_n = q.shape[0]
    o = torch.full((b_n, HEADS, LV), nan, dtype=torch.float64, device=dev)
    lse = torch.full((b_n, HEADS), nan, dtype=torch.float64, device=dev)
    att = torch.full((b_n, HEADS, splits, LV + 1), nan, dtype=torch.float64, device=dev)
    for b, n in enumerate(lens):
        pos = torch.arange(n, device=dev)
        k = cache[table[b, pos // page], pos % page]  # [n, LQ]
        s = (q[b] @ k.T) * sm                         # [H, n]
        o[b] = torch.softmax(s, dim=-1) @ k[:, :LV]
        lse[b] = torch.logsumexp(s, dim=-1)
        per = cdiv(n, splits)
        for sp in range(splits):
            lo, hi = sp * per, min(sp * per + per, n)
            if hi > lo:
                att[b, :, sp, :LV] = torch.softmax(s[:, lo:hi], dim=-1) @ k[lo:hi, :LV]
                att[b, :, sp, LV] = torch.logsumexp(s[:, lo:hi], dim=-1)
    return {"o": o, "lse": lse, "att": att}


def views(kind, outs):
    """The compared quantities: Att_Out split into partial outputs and partial lse."""
    if kind == "extend":
        return {"o": outs["o"]}
    att = outs["att"]
    return {"o": outs["o"], "lse": outs["lse"], "partial o": att[..., :LV],
            "partial lse": att[..., LV]}




def max_err(x, ref):
    """max |x - ref| where the reference is defined (non-empty splits); inf for NaN."""
    keep = torch.isfinite(ref)
    d = (x.to(ref.device).double() - ref)[keep].abs()
    if d.numel() == 0:
        return 0.0
    return d.max().item() if torch.isfinite(d).all() else math.inf


def same_inputs(a, b):
    """Did both runs see exactly the same inputs (tensors bit for bit)?"""
    if a["inputs"].keys() != b["inputs"].keys():
        return False
    for k, v in a["inputs"].items():
        w = b["inputs"][k]
        if torch.is_tensor(v) and torch.is_tensor(w):
            if not same_bits(v, w):
                return False
        elif torch.is_tensor(v) or torch.is_tensor(w) or v != w:
            return False
    return True


def check_mode(plain_dir, shim_dir):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(plain_dir, "*.pt")))
    if not names:
        print(f"not ok - check: no results in {plain_dir}")
        return
    for n in names:
        a = torch.load(os.path.join(plain_dir, n), weights_only=False)
        label = f"{a['mode']} {a['case']}"
        path = os.path.join(shim_dir, n)
        if not os.path.exists(path):
            print(f"not ok - {label}: no result under the shim ({path})")
            continue
        b = torch.load(path, weights_only=False)
        if not same_inputs(a, b):
            print(f"not ok - {label}: the two runs had different inputs")
            continue
        ref = views(a["kind"], (ref_extend if a["kind"] == "extend" else ref_decode)(a["inputs"], dev))
        plain, shim = views(a["kind"], a["outputs"]), views(a["kind"], b["outputs"])

        # The framework's kernel against the reference: a wrong reference or
        # layout is off by far more than a same-precision kernel's rounding.
        sane, notes = True, []
        for k, r in ref.items():
            scale = r[torch.isfinite(r)].abs().max().item()
            e_p, ulp = max_err(plain[k], r), bf16_ulp(scale)
            sane &= e_p <= 16 * ulp
            notes.append(f"{k} {e_p:.2e} ({'<=' if e_p <= 16 * ulp else '>'} 16 ulp "
                         f"{16 * ulp:.2e})")
        print(f"{'ok' if sane else 'not ok'} - {label}: {a['release']}'s own kernel agrees "
              f"with float64: max|err| {', '.join(notes)}")

        if not a["expect_reroute"]:
            same = all(same_bits(a["outputs"][k], b["outputs"][k]) for k in a["outputs"])
            print(f"{'ok' if same else 'not ok'} - {label}: fits SM120, so the shim leaves it "
                  f"alone: bit-identical with and without the shim")
            continue
        good, notes, differ = True, [], 0
        for k, r in ref.items():
            scale = r[torch.isfinite(r)].abs().max().item()
            e_p, e_s, ulp = max_err(plain[k], r), max_err(shim[k], r), bf16_ulp(scale)
            fits = e_s <= 2 * e_p + ulp
            good &= fits
            notes.append(f"{k} {e_s:.2e} {'<=' if fits else '>'} 2*{e_p:.2e}+{ulp:.2e}")
            differ += int((bits(plain[k]) != bits(shim[k])).sum())
        print(f"{'ok' if good else 'not ok'} - {label}: rerouted result within 2x {a['release']}'s "
              f"own error + 1 bf16 ulp of float64: max|err| {', '.join(notes)}")
        print(f"# {label}: {differ} values differ from the run without the shim")


# -----------------------------------------------------------------------------


def main(argv):
    if len(argv) < 2 or argv[1] not in ("run", "graph", "check", "enforce", "refuse",
                                        "logcheck"):
        print(__doc__)
        return 2
    mode = argv[1]
    if mode == "logcheck":
        if len(argv) < 3:
            print("usage: test_reroute.py logcheck OUTDIR LOG...")
            return 2
        logcheck_mode(argv[2], argv[3:])
        return 0
    if mode == "check":
        if len(argv) != 4:
            print("usage: test_reroute.py check PLAIN_DIR SHIM_DIR")
            return 2
        check_mode(argv[2], argv[3])
        return 0
    if mode == "enforce":
        enforce_mode()
        return 0
    if mode == "refuse":
        refuse_mode()
        return 0
    rest = argv[2:]
    kvs = list(KV_NAMES)
    if "--kv" in rest:
        i = rest.index("--kv")
        kvs = [rest[i + 1]]
        del rest[i:i + 2]
        if kvs[0] not in KV_NAMES:
            print(f"--kv {kvs[0]}: use {' or '.join(KV_NAMES)}")
            return 2
    if len(rest) != 1:
        print(f"usage: test_reroute.py {mode} OUTDIR [--kv bf16|fp8_e4m3]")
        return 2
    (run_mode if mode == "run" else graph_mode)(rest[0], kvs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

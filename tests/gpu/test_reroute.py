"""test_reroute.py - the shim's reroute mode on Triton launches with SGLang's and vLLM's interfaces (GPU).

The launches are the stand-ins of tests/gpu/standins.py at the configurations
that overflow SM120 (SGLang extend attention, MLA absorbed 576/512 at 32x64:
106496 B, with the launch interface of each signature in
standins.extend_signatures(): 2026-03, v0.5.9, upstream main, and main with
a batch of 1; vLLM TRITON_MLA decode with an FP8 cache: 102400 B), on inputs
shaped like Kimi K2 at TP8 (8 q heads, one 576-wide latent KV head, V the
first 512 channels of the K cache).  The same script runs in a plain process
and in one started under the shim (sm120 run --mode reroute --target sm120);
`check` compares the two against a float64 PyTorch reference.

Run as: python3 tests/gpu/test_reroute.py MODE ...
  run OUTDIR [--kv bf16|fp8_e4m3]
      launch every case of the KV cache dtype (default: both) on fixed-seed
      inputs and save inputs and outputs to OUTDIR/<case>.pt (CPU tensors).
      Cases: extend_<kv> (2026-03 signature), extend_v059_bf16 (v0.5.9: bf16
      only), extend_main_<kv>, extend_main_batch1_bf16 (one sequence:
      compact_batch_size compiled in), decode_<kv>.
      Under the shim, run one dtype per process: SM120SHIM_KV_CACHE_DTYPE must
      name it (SGLang compiles the cache dtype into the kernel).
  graph OUTDIR [--kv bf16|fp8_e4m3]
      the same launches captured in one CUDA graph (after a warm-up outside
      capture), replayed on new inputs (other lengths, pages and slots) copied
      into the static buffers; saves the replay's results like `run`, and
      prints whether the replay equals an eager launch on those inputs.
  check PLAIN_DIR SHIM_DIR
      for every case: inputs identical; the stand-in within 4 bf16 ulps of a
      float64 reference (a self-check of the test); the shim's result within
      2 x the stand-in's own error + 1 bf16 ulp (the error a same-precision
      kernel makes, plus one rounding step of the bf16 output); cases the shim
      must not touch (vLLM decode with a bf16 cache: 63488 B fits)
      bit-identical.  The ulp is taken at the largest |reference| value.
  enforce [OUTDIR]
      launch each over-limit configuration once and report whether Triton
      raised OutOfResources with the expected figures (run it under
      sm120 run --mode enforce --target sm120); the bf16 decode must run.
  refuse
      launch the v0.5.9 extend signature with an FP8 KV cache once, under
      sm120 run --mode reroute --target sm120 --set kv_cache_dtype=fp8_e4m3:
      the shim must refuse it (that release's FP8 scaling is not verified),
      so the launch fails with a CUDA error (and the context stays usable).
      Its own process: the failed launch must not disturb other cases.

Prints "ok - ..." / "not ok - ..." lines (and "# ..." comments).
"""
import glob
import math
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standins as si  # noqa: E402  (after the path is set)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import frameworks  # noqa: E402
from reroute_tap import bf16_ulp, bits, expect_refused, same_bits, shim_label  # noqa: E402

HEADS = 8                  # Kimi K2 (64 q heads) at TP8
LQ, LV = 576, 512          # kv_lora_rank 512 + rope 64; V = first 512 channels
SM_SCALE = 192 ** -0.5     # the absorbed path keeps the (128 + 64)-dim scale
POISON = 100.0             # every cache row no sequence owns: a wrong read shows
SEED, SEED_GRAPH = 20260801, 20260802

# SGLang extend: (prefix, extend) lengths per sequence, one batch.
EXTEND_SEQS = [(0, 17), (1, 1), (2211, 1000), (1, 17), (2211, 1), (0, 1000)]
EXTEND_SEQS_GRAPH = [(2211, 17), (0, 1000), (1, 1), (2211, 1000), (1, 1), (0, 17)]
EXTEND_SLOTS = sum(p for p, _ in EXTEND_SEQS) + 1 + 200   # slot 0 and 200 spare: never read
EXTEND_SCALES = {"bf16": (1.0, 1.0), "fp8_e4m3": (0.5, 0.25)}  # (k_scale, v_scale) floats
# One sequence (main's launch with compact_batch_size == 1), the same shapes for the replay.
EXTEND_SEQS_BATCH1 = [(2211, 1000)]

# The extend stand-in of each signature -> (the case name's infix, its sequences,
# the graph replay's sequences: the same totals, as the replay reuses the tensors).
EXTEND_SIGNATURES = si.extend_signatures()
EXTEND_CASES = {
    "2026-03": ("", EXTEND_SEQS, EXTEND_SEQS_GRAPH),
    "v0.5.9": ("v059_", EXTEND_SEQS, EXTEND_SEQS_GRAPH),
    "main": ("main_", EXTEND_SEQS, EXTEND_SEQS_GRAPH),
    "main, batch 1": ("main_batch1_", EXTEND_SEQS_BATCH1, EXTEND_SEQS_BATCH1),
}


def sglang_extend(release):
    """SGLang's own extend_attention_fwd from its released wheel
    (tests/oracle/fetch.sh), as a stand-in launcher: it returns the kernel
    Triton compiled for the launch.  These releases have no k_scale/v_scale."""
    mod = frameworks.load("sglang", release,
                          "sglang/srt/layers/attention/triton_ops/extend_attention.py")

    def launch(*args, **kwargs):
        mod.extend_attention_fwd(*args, **kwargs)
        cache = mod._fwd_kernel.device_caches[torch.cuda.current_device()][0]
        return list(cache.values())[-1]
    return launch


# The real releases whose signature has no scales: bf16 only (the shim refuses
# their FP8 reading, as for the v0.5.9 stand-in).
for _release in ("0.5.8", "0.5.9"):
    EXTEND_SIGNATURES[f"sglang {_release}"] = (sglang_extend(_release), 1, ("bf16",), None)
    EXTEND_CASES[f"sglang {_release}"] = (f"sglang{_release.replace('.', '')}_", EXTEND_SEQS,
                                          EXTEND_SEQS_GRAPH)
NO_SCALES = {"v0.5.9", "sglang 0.5.8", "sglang 0.5.9"}
assert set(EXTEND_CASES) == set(EXTEND_SIGNATURES), "a signature without cases"

# vLLM decode: one query token per sequence, paged cache of PAGE tokens.
DECODE_LENS = [1, 17, 1000, 4099]
DECODE_LENS_GRAPH = [4097, 3, 1000, 64]
PAGE, N_PAGES, TABLE_WIDTH = 64, 128, 66   # page 0 and the spare pages: never read
DECODE_K_SCALE = {"bf16": 1.0, "fp8_e4m3": 0.05}  # vLLM's layer._k_scale, a device scalar
# v_scale: vLLM's IS_MLA kernel loads it and never applies it (V is the k_scale-
# dequantised K tile).  A value distinct from k_scale and from 1 makes a kernel
# that does apply it fail; TritonMLAImpl itself passes layer._k_scale.
DECODE_V_SCALE = {"bf16": 1.25, "fp8_e4m3": 0.75}

KV_DTYPES = si.KV_DTYPES
OOR_LIMIT = 101376


def cdiv(a, b):
    return -(-a // b)


def f32(x):
    """x rounded to fp32, as Triton passes a Python float or the kernel reads a scalar."""
    return float(torch.tensor(x, dtype=torch.float32))




# -----------------------------------------------------------------------------
# Cases: inputs, launch, outputs
# -----------------------------------------------------------------------------


class Case:
    """One launch sequence: device inputs, static outputs, and how to launch it."""

    def __init__(self, kind, kv, inputs, signature=None):
        self.kind, self.kv, self.inputs = kind, kv, inputs
        self.signature = signature  # extend: a key of EXTEND_SIGNATURES
        infix = EXTEND_CASES[signature][0] if kind == "extend" else ""
        self.name = f"{kind}_{infix}{kv}"
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

    def reset_outputs(self):
        """NaN everywhere: whatever a kernel does not write stays visible."""
        for t in self.outputs.values():
            t.fill_(float("nan"))

    def launch(self):
        """Launch through the stand-in's framework launcher; returns the compiled kernels."""
        d = self.inputs
        if self.kind == "extend":
            k = d["k_ext"]
            buf = d["k_buffer"]
            launch = EXTEND_SIGNATURES[self.signature][0]
            # v0.5.9 has no k_scale/v_scale (make_extend made them 1)
            scales = ({} if self.signature in NO_SCALES else
                      dict(k_scale=d["k_scale"], v_scale=d["v_scale"]))
            return [launch(
                d["q"], k, k[..., :LV], self.outputs["o"], buf, buf[..., :LV],
                d["qo_indptr"], d["kv_indptr"], d["kv_indices"], None, True, None,
                d["max_len_extend"], sm_scale=d["sm_scale"], **scales)]
        cache = d["kv_cache"]  # [pages, PAGE, 1, LQ]: vLLM's cache.unsqueeze(2)
        return list(si.decode_attention_fwd(
            d["q"], cache, cache[..., :LV], self.outputs["o"], self.outputs["lse"],
            d["block_table"], d["seq_lens"], self.outputs["att"], d["num_kv_splits"],
            d["sm_scale"], d["page_size"], k_scale=self.k_scale_t, v_scale=self.v_scale_t,
            is_mla=True))

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
            "signature": self.signature,
            "expect_reroute": self.expect_reroute,
            "inputs": {k: v.cpu() if torch.is_tensor(v) else v for k, v in self.inputs.items()},
            "outputs": outputs if outputs is not None else self.outputs_cpu(),
        }, os.path.join(outdir, self.name + ".pt"))


def make_extend(kv, seqs, seed, signature="2026-03", dev="cuda"):
    """SGLang extend inputs for the stand-in of `signature`: q/k of the new
    tokens, a 576-wide latent KV buffer whose prefix slots are a random
    permutation (slot 0 and spares poisoned)."""
    assert kv in EXTEND_SIGNATURES[signature][2], (signature, kv)
    g = torch.Generator(device=dev).manual_seed(seed)
    pre = [p for p, _ in seqs]
    ext = [e for _, e in seqs]
    t, p = sum(ext), sum(pre)
    cum = lambda xs: torch.tensor([0] + [sum(xs[:i + 1]) for i in range(len(xs))],
                                  dtype=torch.int32, device=dev)
    slots = torch.randperm(EXTEND_SLOTS - 1, generator=g, device=dev)[:p] + 1
    q = torch.randn(t, HEADS, LQ, generator=g, device=dev).to(torch.bfloat16)
    k_ext = torch.randn(t, 1, LQ, generator=g, device=dev).to(torch.bfloat16)
    k_scale, v_scale = EXTEND_SCALES[kv]
    assert signature not in NO_SCALES or k_scale == v_scale == 1.0, "no scales in " + signature
    buf = torch.full((EXTEND_SLOTS, 1, LQ), POISON, device=dev)
    # stored values: k_scale * stored ~ N(0, 1) for the keys
    buf[slots] = torch.randn(p, 1, LQ, generator=g, device=dev) / k_scale
    if kv != "bf16":
        buf = buf.clamp(-448, 448)
    return Case("extend", kv, dict(
        q=q, k_ext=k_ext, k_buffer=buf.to(KV_DTYPES[kv]),
        qo_indptr=cum(ext), kv_indptr=cum(pre), kv_indices=slots.to(torch.int64),
        max_len_extend=max(ext), sm_scale=SM_SCALE, k_scale=k_scale, v_scale=v_scale),
        signature)


def make_decode(kv, lens, seed, n_splits=None, dev="cuda"):
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
        n_splits = si.num_kv_splits_for(max(lens), sms)
    return Case("decode", kv, dict(
        q=torch.randn(len(lens), HEADS, LQ, generator=g, device=dev).to(torch.bfloat16),
        kv_cache=cache.to(KV_DTYPES[kv]), block_table=table,
        seq_lens=torch.tensor(lens, dtype=torch.int32, device=dev),
        num_kv_splits=n_splits, page_size=PAGE, sm_scale=SM_SCALE, k_scale=ks))


def make_cases(kv, graph_inputs=False, n_splits=None):
    """The extend case of every signature launched with this KV dtype, then the decode."""
    seed = SEED_GRAPH if graph_inputs else SEED
    cases = []
    for signature, (_, _, kvs, _) in EXTEND_SIGNATURES.items():
        if kv in kvs:
            _, seqs, seqs_graph = EXTEND_CASES[signature]
            cases.append(make_extend(kv, seqs_graph if graph_inputs else seqs, seed, signature))
    cases.append(make_decode(kv, DECODE_LENS_GRAPH if graph_inputs else DECODE_LENS, seed,
                             n_splits))
    return cases


def describe(case, kernels):
    for k in kernels:
        print(f"# {case.name}: {k.metadata.name}: {si.smem_of(k)} B shared memory, "
              f"{si.cubin_param_count(k)} cubin parameters, {k.metadata.num_warps} warps")


# -----------------------------------------------------------------------------
# run / graph / enforce
# -----------------------------------------------------------------------------


def run_mode(outdir, kvs):
    os.makedirs(outdir, exist_ok=True)
    for kv in kvs:
        for case in make_cases(kv):
            kernels = case.launch()
            torch.cuda.synchronize()
            describe(case, kernels)
            case.save(outdir, "run")
    print(f"# run ({shim_label()}): saved to {outdir}")






def graph_mode(outdir, kvs):
    os.makedirs(outdir, exist_ok=True)
    who = shim_label()
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
        for c, r, w in zip(cases, replayed, warm):
            eager = c.outputs_cpu()
            same = all(same_bits(r[k], eager[k]) for k in r)
            print(f"{'ok' if same else 'not ok'} - graph ({who}) {c.name}: the replay on new "
                  f"inputs equals an eager launch on them, bit for bit")
            moved = all(not same_bits(r[k], w[k]) for k in r)
            print(f"{'ok' if moved else 'not ok'} - graph ({who}) {c.name}: the replay read the "
                  f"new inputs (its results differ from the warm-up's)")
            c.save(outdir, "graph", outputs=r)
    print(f"# graph ({who}): saved to {outdir}")


def enforce_mode():
    """Each over-limit launch once; Triton must refuse it as an SM120 card would."""
    from triton.runtime.errors import OutOfResources

    who = shim_label()
    v059, main = EXTEND_SIGNATURES["v0.5.9"][0], EXTEND_SIGNATURES["main"][0]
    over = [("SGLang extend _fwd_kernel", "bf16", 106496, si.extend_attention_fwd,
             si.example_extend),
            ("SGLang extend _fwd_kernel", "fp8_e4m3", 106496, si.extend_attention_fwd,
             si.example_extend),
            ("SGLang v0.5.9 extend _fwd_kernel", "bf16", 106496, v059,
             lambda kv: si.example_extend(kv, scales=False)),
            ("SGLang main extend _fwd_kernel", "bf16", 106496, main,
             lambda kv: si.example_extend(kv, batch=2)),
            ("vLLM _fwd_grouped_kernel_stage1", "fp8_e4m3", 102400, si.decode_attention_fwd,
             si.example_decode)]
    for what, kv, want, launcher, example in over:
        expect = f"Required: {want}, Hardware limit: {OOR_LIMIT}"
        try:
            launcher(**example(kv))
            torch.cuda.synchronize()
            print(f"not ok - enforce ({who}): {what}, {kv} KV cache, ran: no OutOfResources "
                  f"(expected '{expect}'; is the shim preloaded in enforce mode, target sm120?)")
        except OutOfResources as e:
            msg = str(e).splitlines()[0] if str(e) else repr(e)
            good = expect in msg
            print(f"{'ok' if good else 'not ok'} - enforce ({who}): {what}, {kv} KV cache: "
                  f"OutOfResources: {msg}")
    try:
        si.decode_attention_fwd(**si.example_decode("bf16"))
        torch.cuda.synchronize()
        print(f"ok - enforce ({who}): vLLM decode with a bf16 KV cache (63488 B) fits and runs")
    except Exception as e:  # noqa: BLE001  (any failure is the finding)
        print(f"not ok - enforce ({who}): vLLM decode with a bf16 KV cache failed: "
              f"{type(e).__name__}: {e}")


def refuse_mode():
    """The v0.5.9 extend signature with an FP8 KV cache, once.  The shim has that
    rule but does not reroute it with FP8 (how the release scales FP8 keys is not
    verified), so it must refuse the launch as an SM120 card would: Triton's
    launcher gets CUDA_ERROR_INVALID_VALUE and raises.  The log check (the
    `refuse` event and its reason) is reroute_gpu.sh's."""
    expect_refused("SGLang v0.5.9 extend _fwd_kernel with an FP8 KV cache",
                   lambda: EXTEND_SIGNATURES["v0.5.9"][0](**si.example_extend("fp8_e4m3", scales=False)),
                   "in reroute mode with kv_cache_dtype=fp8_e4m3, target sm120")


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

        # The test's own kernel must be right, or nothing below means anything.
        sane, notes = True, []
        for k, r in ref.items():
            scale = r[torch.isfinite(r)].abs().max().item()
            e_p, ulp = max_err(plain[k], r), bf16_ulp(scale)
            sane &= e_p <= 4 * ulp
            notes.append(f"{k} {e_p:.2e} ({'<=' if e_p <= 4 * ulp else '>'} 4 ulp {4 * ulp:.2e})")
        print(f"{'ok' if sane else 'not ok'} - {label}: the Triton stand-in agrees with "
              f"float64: max|err| {', '.join(notes)}")

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
        print(f"{'ok' if good else 'not ok'} - {label}: rerouted result within 2x the stand-in's "
              f"error + 1 bf16 ulp of float64: max|err| {', '.join(notes)}")
        print(f"# {label}: {differ} values differ from the run without the shim")


# -----------------------------------------------------------------------------


def main(argv):
    if len(argv) < 2 or argv[1] not in ("run", "graph", "check", "enforce", "refuse"):
        print(__doc__)
        return 2
    mode = argv[1]
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
    kvs = list(KV_DTYPES)
    if "--kv" in rest:
        i = rest.index("--kv")
        kvs = [rest[i + 1]]
        del rest[i:i + 2]
        if kvs[0] not in KV_DTYPES:
            print(f"--kv {kvs[0]}: use {' or '.join(KV_DTYPES)}")
            return 2
    if len(rest) != 1:
        print(f"usage: test_reroute.py {mode} OUTDIR [--kv bf16|fp8_e4m3]")
        return 2
    (run_mode if mode == "run" else graph_mode)(rest[0], kvs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

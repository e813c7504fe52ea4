"""bench_patch.py - the kernels `sm120 patch` changes, run for real on the GPU:
the correctness runs of tests/gpu/patch_gpu.sh and the patch-versus-shim
benchmark of `make bench-gpu`.

    python3 tests/gpu/bench_patch.py prepare WORK
        WORK/<release>/orig: the release's files as tests/oracle/fetch.sh
        unpacked them ($SM120_ORACLE, else $SM120_BUILD/oracle); WORK/<release>/
        patched: a copy patched by `$SM120_BUILD/sm120 patch apply
        --site-packages`; prints one "ok - " / "not ok - " line per release
    python3 tests/gpu/bench_patch.py run OUT.pt ROOTS
        each patch site of each release, on one set of inputs, through the
        framework's own host function; saves inputs, outputs and errors
    python3 tests/gpu/bench_patch.py check PLAIN.pt PATCHED.pt REFUSED.pt
        PLAIN: the unpatched kernels without the shim; PATCHED: the patched
        ones under `sm120 run --mode enforce --target sm120`; REFUSED: the
        unpatched ones under the same; prints ok / not ok lines
    python3 tests/gpu/bench_patch.py time OUT.json ROOTS_PAIRS
        (under the shim in reroute mode) the patched host call and the
        unpatched one side by side, median of CUDA-graph replays
    python3 tests/gpu/bench_patch.py bench [WORK]
        prepare, time under `sm120 run --mode reroute --target sm120`, print
        the table (what `make bench-gpu` runs)
ROOTS: RELEASE=DIR ... (a release as sglang-0.5.9); ROOTS_PAIRS:
RELEASE=ORIG_DIR:PATCHED_DIR ...

The framework is told it runs on capability 12.0 (torch.cuda.
get_device_capability and the frameworks' own checks stubbed, as
tests/oracle/patch_kernels.py does for its compiles), so that the patched
files take their SM120 branch and the unpatched ones their Hopper tiles;
Triton compiles for the GPU in hand with DISABLE_MMA_V3=1 (SM120 has no
wgmma), so under `--target sm120` the shim judges what SM120 would.

Sites and inputs (every scalar distinct, shapes those of the patch tests):
  extend-attention       SGLang extend_attention_fwd, MLA absorbed 576/512,
                         8 heads, 2 sequences of 333 new tokens after 300 cached
  prefill-attention      context_attention_fwd, head 256, 16 heads over 8 KV
                         heads, 3 sequences (300, 401, 299 tokens), causal
  fused-moe-default-config  SGLang's default FP8 configuration chosen by
                         get_default_config, then invoke_fused_moe_kernel:
                         GLM-4.7 TP8 gate/up, 2048 tokens, 161 experts, top-9,
                         N 384, K 5120, FP8 per tensor (dynamic activations)
  inkling-moe-stages     grouped_gemm_triton at its 16-row block, bf16, 64
                         experts, N 1536, K 2048, 64 rows
  lightning-attn         lightning_attention, 8 heads, 1024 tokens, 128 wide,
                         fp32, with a KV history
  mla-decode-fp8-stages  vLLM decode_attention_fwd, MLA 576/512, 8 heads, an
                         E4M3 cache in 16-token pages, 5 requests of 1 to 4099
                         tokens, 16 splits
Each output is compared with float64 on the same (quantised) operands: the
patched kernel's largest error within 2 x the unpatched kernel's own + one
unit in the last place of the output type at the largest |reference| (the
project's rule: a change of tiling reorders fp32 sums, so it may be as far
from exact as the original, once more, plus one rounding).  The unpatched
error must itself stay under 5 % of the largest |reference|: a reference
that disagreed with the framework's own kernel would otherwise widen the
tolerance unseen.  The sites that change only num_stages
(inkling-moe-stages, mla-decode-fp8-stages) keep the arithmetic and its
order: their outputs must be bit-identical too.
"""
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import types

# Before Triton is imported: SM120's instructions (no wgmma).
os.environ.setdefault("DISABLE_MMA_V3", "1")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
from reroute_tap import bf16_ulp  # noqa: E402
import moe_cases as sm  # noqa: E402

SEED = 20260923
CAPABILITY = (12, 0)
REPLAYS = 20
# The settings the shim's rules need to reroute the unpatched kernels of the
# sites: SGLang extend (bf16 cache), vLLM MLA decode (16-token pages), the
# fused-MoE site's GLM-4.7 layer (top-9, hidden 5120).
SHIM_SETTINGS = ["kv_cache_dtype=bf16", "page_size=16", "top_k=9", "hidden_size=5120"]


def build():
    return os.environ.get("SM120_BUILD", "build")


def oracle_dir():
    return os.environ.get("SM120_ORACLE") or os.path.join(build(), "oracle")


# -----------------------------------------------------------------------------
# The framework as on an SM120 card
# -----------------------------------------------------------------------------

_frameworks_ready = False


def as_sm120():
    """Stub the frameworks' modules (tests/oracle/patch_kernels.stub_frameworks)
    and torch's capability as on an SM120 card; the activation quantisers of
    SGLang's MoE file are torch functions of sgl-kernel's definitions."""
    global _frameworks_ready
    if _frameworks_ready:
        return
    import patch_kernels as pk
    # Triton's driver binds torch's capability query when it starts: start it
    # first, so that it compiles for the GPU in hand and only the frameworks'
    # checks see SM120.
    triton.runtime.driver.active.get_current_target()
    torch.cuda.get_device_capability = lambda *a, **k: CAPABILITY
    pk.stub_frameworks(CAPABILITY)
    quant = pk.stub("sglang.srt.layers.quantization.fp8_kernel")
    quant.scaled_fp8_quant = scaled_fp8_quant
    quant.per_token_group_quant_fp8 = quant.sglang_per_token_group_quant_fp8 = None
    pk.stub("sglang.srt.layers.quantization.int8_kernel", per_token_group_quant_int8=None,
            per_token_quant_int8=None, sglang_per_token_group_quant_int8=None)
    _frameworks_ready = True


def load(root, paths):
    as_sm120()
    import patch_kernels as pk
    return pk.load(root, paths)


def scaled_fp8_quant(a, scale=None, use_per_token_if_dynamic=False):
    """sgl-kernel's scaled_fp8_quant: static per tensor with @scale, else
    dynamic, per token or per tensor (scale = amax / 448)."""
    a = a.float()
    if scale is None and use_per_token_if_dynamic:
        scale = (a.abs().amax(-1, keepdim=True) / sm.FP8_MAX).clamp(min=1e-10)
    elif scale is None:
        scale = (a.abs().amax() / sm.FP8_MAX).clamp(min=1e-10).reshape(1)
    return (a / scale).clamp(-sm.FP8_MAX, sm.FP8_MAX).to(torch.float8_e4m3fn), scale


# -----------------------------------------------------------------------------
# The sites: inputs, the framework's host call, float64
# -----------------------------------------------------------------------------


def gen(seed):
    return torch.Generator(device="cuda").manual_seed(seed)


def attention64(q, k, v, scale, causal_from=None):
    """float64 softmax(q k^T scale) v for q [T, H, D], k/v [S, H, D] (per head);
    causal_from: key j is seen by query t when j <= causal_from + t."""
    s = torch.einsum("thd,shd->hts", q.double(), k.double()) * scale
    if causal_from is not None:
        t = torch.arange(q.shape[0], device=q.device)[:, None]
        j = torch.arange(k.shape[0], device=q.device)[None, :]
        s = s.masked_fill((j > causal_from + t)[None], float("-inf"))
    return torch.einsum("hts,shd->thd", torch.softmax(s, -1), v.double())


class ExtendAttention:
    paths = ["sglang/srt/layers/attention/triton_ops/extend_attention.py"]
    same_math = False
    batch, heads, prefix, extend, scale = 2, 8, 300, 333, 0.1171

    def inputs(self):
        g = gen(SEED + 1)
        b, h, p, e = self.batch, self.heads, self.prefix, self.extend
        slots = b * (p + e) + 7
        return dict(q=torch.randn(b * e, h, 576, generator=g, device="cuda").to(torch.bfloat16),
                    k=torch.randn(b * e, 1, 576, generator=g, device="cuda").to(torch.bfloat16),
                    buf=torch.randn(slots, 1, 576, generator=g, device="cuda").to(torch.bfloat16),
                    kv_indices=torch.randperm(slots, generator=g, device="cuda")[:b * p])

    def bind(self, mod, x):
        b, h, p, e = self.batch, self.heads, self.prefix, self.extend
        o = torch.full((b * e, h, 512), float("nan"), dtype=torch.bfloat16, device="cuda")
        qo = torch.arange(0, b + 1, dtype=torch.int32, device="cuda") * e
        kv = torch.arange(0, b + 1, dtype=torch.int32, device="cuda") * p

        def call():
            mod.extend_attention_fwd(x["q"], x["k"], x["k"][..., :512], o, x["buf"],
                                     x["buf"][..., :512], qo, kv, x["kv_indices"], None, True,
                                     None, e, sm_scale=self.scale)
            return dict(o=o)
        return call

    def reference(self, x):
        b, p, e = self.batch, self.prefix, self.extend
        out = []
        for i in range(b):
            keys = torch.cat([x["buf"][x["kv_indices"][i * p:(i + 1) * p]],
                              x["k"][i * e:(i + 1) * e]])          # [p + e, 1, 576]
            keys = keys.expand(-1, self.heads, -1)
            out.append(attention64(x["q"][i * e:(i + 1) * e], keys, keys[..., :512],
                                   self.scale, causal_from=p))
        return dict(o=torch.cat(out))


class PrefillAttention:
    paths = ["sglang/srt/layers/attention/triton_ops/prefill_attention.py",
             "sglang/kernels/ops/attention/prefill_attention.py"]
    same_math = False
    lens, heads, kv_heads, dim = (300, 401, 299), 16, 8, 256

    def inputs(self):
        g = gen(SEED + 2)
        t = sum(self.lens)
        return dict(q=torch.randn(t, self.heads, self.dim, generator=g, device="cuda").to(torch.bfloat16),
                    k=torch.randn(t, self.kv_heads, self.dim, generator=g, device="cuda").to(torch.bfloat16),
                    v=torch.randn(t, self.kv_heads, self.dim, generator=g, device="cuda").to(torch.bfloat16))

    def bind(self, mod, x):
        o = torch.full_like(x["q"], float("nan"))
        lens = torch.tensor(self.lens, dtype=torch.int32, device="cuda")
        starts = torch.cumsum(lens, 0, dtype=torch.int32) - lens

        def call():
            mod.context_attention_fwd(x["q"], x["k"], x["v"], o, starts, lens, 512)
            return dict(o=o)
        return call

    def reference(self, x):
        out, at, group = [], 0, self.heads // self.kv_heads
        for n in self.lens:
            sl = slice(at, at + n)
            k = x["k"][sl].repeat_interleave(group, 1)
            v = x["v"][sl].repeat_interleave(group, 1)
            out.append(attention64(x["q"][sl], k, v, self.dim ** -0.5, causal_from=0))
            at += n
        return dict(o=torch.cat(out))


class FusedMoeDefault:
    paths_cfg = ["sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_config.py"]
    paths = ["sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_kernels.py"]
    same_math = False
    tokens, experts, top_k, n, k = 2048, 161, 9, 384, 5120

    def load(self, root):
        return load(root, self.paths_cfg), load(root, self.paths)

    def inputs(self):
        g = gen(SEED + 3)
        w = (torch.randn(self.experts, self.n, self.k, generator=g, device="cuda") * 100).clamp(
            -sm.FP8_MAX, sm.FP8_MAX).to(torch.float8_e4m3fn)
        ids = torch.rand(self.tokens, self.experts, generator=g, device="cuda").topk(
            self.top_k, dim=1).indices.to(torch.int32)
        return dict(a=torch.randn(self.tokens, self.k, generator=g, device="cuda").to(torch.bfloat16),
                    w=w, w_scale=torch.linspace(0.011, 0.018, self.experts, device="cuda"),
                    topk_ids=ids,
                    topk_weights=torch.rand(self.tokens, self.top_k, generator=g, device="cuda"))

    def bind(self, mods, x):
        """The configuration SGLang picks and moe_align's buffers, then the launch
        (activation quantisation, the kernel) as the call."""
        cfg, mod = mods
        config = cfg.get_default_config(self.tokens, self.experts, self.n, self.k, self.top_k,
                                        "fp8_w8a8", False, None)
        sorted_ids, expert_ids, post = sm.moe_align(x["topk_ids"], config["BLOCK_SIZE_M"],
                                                    self.experts)
        c = torch.full((self.tokens, self.top_k, self.n), float("nan"), dtype=torch.bfloat16,
                       device="cuda")
        tiles = torch.tensor([config[k] for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K",
                                                  "num_stages")])
        seen = {}

        def quant(a, scale=None, use_per_token_if_dynamic=False):
            seen["aq"], seen["a_scale"] = scaled_fp8_quant(a, scale, use_per_token_if_dynamic)
            return seen["aq"], seen["a_scale"]

        def call():
            mod.scaled_fp8_quant = quant
            mod.invoke_fused_moe_kernel(
                x["a"], x["w"], None, c, None, x["w_scale"], None, x["topk_weights"],
                x["topk_ids"], sorted_ids, expert_ids, post, False, self.top_k, dict(config),
                tl.bfloat16, True, False, False, False, False, block_shape=None)
            return dict(o=c, aq=seen["aq"], a_scale=seen["a_scale"], config=tiles)
        return call

    def reference(self, x, out):
        a = out["aq"].double() * out["a_scale"].double()
        ids = x["topk_ids"].long()
        ref = torch.empty(self.tokens, self.top_k, self.n, dtype=torch.float64, device="cuda")
        for e in range(self.experts):
            t, s = (ids == e).nonzero(as_tuple=True)
            if t.numel():
                w = x["w"][e].double() * x["w_scale"][e].double()
                ref[t, s] = a[t] @ w.T
        return dict(o=ref)


class InklingStages:
    paths = ["sglang/kernels/ops/moe/inkling_moe.py"]
    same_math = True
    experts, n, k, rows = 64, 1536, 2048, 64

    def inputs(self):
        g = gen(SEED + 4)
        ids = torch.randint(0, self.experts, (self.rows,), generator=g, device="cuda")
        return dict(a=torch.randn(self.rows, self.k, generator=g, device="cuda").to(torch.bfloat16),
                    b=(torch.randn(self.experts, self.n, self.k, generator=g, device="cuda")
                       / 45).to(torch.bfloat16),
                    ids=ids.sort().values.to(torch.int32))

    def bind(self, mod, x):
        bm = mod.SMALL_M_BLOCK_SIZE_M
        meta = mod.compute_grouped_gemm_metadata(x["ids"], self.experts, block_size_m=bm)

        def call():
            return dict(o=mod.grouped_gemm_triton(x["a"], x["b"], self.experts, *meta,
                                                  block_size_m=bm))
        return call

    def reference(self, x):
        w = x["b"][x["ids"].long()].double()                       # [rows, n, k]
        return dict(o=torch.einsum("rk,rnk->rn", x["a"].double(), w))


class Lightning:
    same_math = False
    heads, n, d = 8, 1024, 128

    def __init__(self, paths):
        self.paths = paths

    def inputs(self):
        g = gen(SEED + 5)
        shape = (1, self.heads, self.n, self.d)
        return dict(q=torch.randn(shape, generator=g, device="cuda") / self.d ** 0.5,
                    k=torch.randn(shape, generator=g, device="cuda") / self.d ** 0.5,
                    v=torch.randn(shape, generator=g, device="cuda"),
                    slope=torch.linspace(0.004, 0.06, self.heads, device="cuda"),
                    history=torch.randn(1, self.heads, self.d, self.d, generator=g,
                                        device="cuda") / self.d)

    def bind(self, mod, x):
        def call():
            o, kv = mod.lightning_attention(x["q"], x["k"], x["v"], x["slope"],
                                            kv_history=x["history"])
            return dict(o=o, state=kv[:, :, -1])
        return call

    def reference(self, x):
        """The recurrence S_t = exp(-s) S_(t-1) + k_t^T v_t from S_(-1) = the
        history, o_t = q_t S_t (float64, closed form)."""
        q, k, v = (x[n][0].double() for n in ("q", "k", "v"))    # [h, n, d]
        s = x["slope"].double()[:, None, None]
        t = torch.arange(self.n, device="cuda", dtype=torch.float64)
        decay = torch.exp(-s * (t[:, None] - t[None, :]))
        decay = torch.where(t[:, None] >= t[None, :], decay, torch.zeros_like(decay))
        hist = x["history"][0].double()
        o = (q @ k.transpose(1, 2) * decay) @ v + torch.exp(-s * (t[:, None] + 1)) * (q @ hist)
        state = torch.exp(-s * self.n) * hist + (k * torch.exp(-s * (self.n - 1 - t[:, None]))
                                                 ).transpose(1, 2) @ v
        return dict(o=o[None], state=state[None])


class MlaDecodeFp8:
    paths = ["vllm/v1/attention/ops/triton_decode_attention.py"]
    same_math = True
    lens, heads, page, splits, scale, k_scale = (4099, 1, 517, 2048, 33), 8, 16, 16, 0.1171, 0.0173

    def inputs(self):
        g = gen(SEED + 6)
        per = triton.cdiv(max(self.lens), self.page)
        pages = len(self.lens) * per + 1
        cache = (torch.randn(pages, self.page, 1, 576, generator=g, device="cuda") * 40).clamp(
            -sm.FP8_MAX, sm.FP8_MAX).to(torch.float8_e4m3fn)
        table = torch.randperm(pages, generator=g, device="cuda")[:len(self.lens) * per]
        return dict(q=torch.randn(len(self.lens), self.heads, 576, generator=g,
                                  device="cuda").to(torch.bfloat16),
                    cache=cache, table=table.view(len(self.lens), per).to(torch.int32))

    def bind(self, mod, x):
        b = len(self.lens)
        o = torch.full((b, self.heads, 512), float("nan"), dtype=torch.bfloat16, device="cuda")
        lse = torch.empty(b, self.heads, dtype=torch.float32, device="cuda")
        logits = torch.empty(b, self.heads, self.splits, 513, dtype=torch.float32, device="cuda")
        ks = torch.tensor(self.k_scale, dtype=torch.float32, device="cuda")
        lens = torch.tensor(self.lens, dtype=torch.int32, device="cuda")

        def call():
            mod.decode_attention_fwd(x["q"], x["cache"], x["cache"][..., :512], o, lse,
                                     x["table"], lens, logits, self.splits, self.scale, self.page,
                                     k_scale=ks, v_scale=ks, is_mla=True)
            return dict(o=o)
        return call

    def reference(self, x):
        out = []
        flat = x["cache"].view(-1, 576)
        for i, n in enumerate(self.lens):
            pos = torch.arange(n, device="cuda")
            rows = x["table"][i, pos // self.page].long() * self.page + pos % self.page
            kv = flat[rows].double() * self.k_scale                  # [n, 576]
            kv = kv[:, None].expand(-1, self.heads, -1)
            out.append(attention64(x["q"][i][None], kv, kv[..., :512], self.scale)[0])
        return dict(o=torch.stack(out))


# One row per patch site (patches/<framework>/<line>/<site>.patch).
SITES = {
    "sglang/extend-attention": ExtendAttention(),
    "sglang/prefill-attention": PrefillAttention(),
    "sglang/fused-moe-default-config": FusedMoeDefault(),
    "sglang/inkling-moe-stages": InklingStages(),
    "sglang/lightning-attn": Lightning(["sglang/srt/layers/attention/linear/lightning_attn.py",
                                        "sglang/kernels/ops/attention/linear/lightning_attn.py"]),
    "vllm/mla-decode-fp8-stages": MlaDecodeFp8(),
    "vllm/lightning-attn": Lightning(["vllm/model_executor/layers/lightning_attn.py"]),
}


def site_module(site, root):
    s = SITES[site]
    return s.load(root) if hasattr(s, "load") else load(root, s.paths)


def reference(site, x, out):
    s = SITES[site]
    return s.reference(x, out) if isinstance(s, FusedMoeDefault) else s.reference(x)


# -----------------------------------------------------------------------------
# Releases and their patch sets
# -----------------------------------------------------------------------------


def release_sites():
    """{release: [site]}: each release unpacked in the oracle directory that has
    a patch set (the longest release line under patches/<framework>/ that
    covers it, as sm120 patch picks it), with the sites of that set."""
    out = {}
    for rel in sorted(os.listdir(oracle_dir())):
        fw, _, ver = rel.partition("-")
        base = os.path.join(ROOT, "patches", fw)
        if not ver or not os.path.isdir(base):
            continue
        lines = [d for d in os.listdir(base) if ver == d or ver.startswith(d + ".")
                 or ver.startswith(d + "+")]
        if lines:
            line = max(lines, key=len)
            out[rel] = sorted(f"{fw}/{p[:-6]}" for p in os.listdir(os.path.join(base, line))
                              if p.endswith(".patch"))
    return out


def prepare(work):
    """WORK/<release>/{orig,patched}; the patched copy by `sm120 patch apply`."""
    sm120 = os.path.join(build(), "sm120")
    bad = 0
    for rel in release_sites():
        orig, patched = (os.path.join(work, rel, d) for d in ("orig", "patched"))
        for d in (orig, patched):
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(os.path.join(oracle_dir(), rel), d)
        r = subprocess.run([sm120, "patch", "apply", "--site-packages", patched],
                           capture_output=True, text=True)
        ok = r.returncode == 0 and "apply: done" in r.stdout
        bad += not ok
        print(f"{'ok' if ok else 'not ok'} - {rel}: sm120 patch apply --site-packages "
              f"{patched} (exit {r.returncode})")
        if not ok:
            print("\n".join("# " + line for line in (r.stdout + r.stderr).splitlines()))
    return bad


def parse_roots(args, pairs=False):
    roots = {}
    for a in args:
        rel, _, root = a.partition("=")
        roots[rel] = tuple(root.split(":", 1)) if pairs else root
    return roots


# -----------------------------------------------------------------------------
# run / check
# -----------------------------------------------------------------------------


def cpu(d):
    return {k: v.detach().cpu() for k, v in d.items()}


def run(out_path, roots):
    """Every site of every release in @roots, saved to @out_path."""
    sites = release_sites()
    saved = {}
    for rel, root in roots.items():
        for site in sites.get(rel, []):
            x = SITES[site].inputs()
            try:
                out = SITES[site].bind(site_module(site, root), x)()
                torch.cuda.synchronize()
                saved[(rel, site)] = dict(inputs=cpu(x), outputs=cpu(out), error=None)
            except Exception as e:  # noqa: BLE001  (recorded: OutOfResources is expected in one run)
                saved[(rel, site)] = dict(inputs=cpu(x), outputs=None,
                                          error=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
                                          if str(e) else type(e).__name__)
            print(f"# {rel} {site}: {saved[(rel, site)]['error'] or 'ran'}", flush=True)
    torch.save(saved, out_path)
    return 0


def ulp(t, magnitude):
    if t.dtype == torch.bfloat16:
        return bf16_ulp(magnitude)
    return 2.0 ** (math.floor(math.log2(magnitude)) - 23) if magnitude > 0 else 2.0 ** -149


def same_inputs(a, b):
    def raw(t):
        return t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t
    return a.keys() == b.keys() and all(torch.equal(raw(a[k]), raw(b[k])) for k in a)


def check(plain_path, patched_path, refused_path):
    plain, patched, refused = (torch.load(p) for p in (plain_path, patched_path, refused_path))
    bad = 0

    def say(good, text):
        nonlocal bad
        bad += not good
        print(f"{'ok' if good else 'not ok'} - {text}")

    for (rel, site), p in sorted(patched.items()):
        u, r = plain.get((rel, site)), refused.get((rel, site))
        say(p["error"] is None, f"{rel} {site}: the patched kernels run under enforce --target "
            f"sm120" + (f"; raised {p['error']}" if p["error"] else ""))
        say(r is not None and r["error"] is not None and "OutOfResources" in r["error"],
            f"{rel} {site}: the unpatched kernels under the same are refused "
            f"({r['error'] if r else 'not run'})")
        if p["error"] or u is None or u["error"]:
            say(False, f"{rel} {site}: no comparison (unpatched without the shim: "
                f"{u['error'] if u else 'not run'})")
            continue
        x = {k: v.cuda() for k, v in u["inputs"].items()}
        ref = reference(site, x, {k: v.cuda() for k, v in u["outputs"].items()})
        notes, good = [], same_inputs(u["inputs"], p["inputs"])
        if not good:
            notes.append("the inputs differ between the runs")
        for name, r64 in ref.items():
            a, b = u["outputs"][name].cuda(), p["outputs"][name].cuda()
            big = r64.abs().max().item()
            e_u = (a.double() - r64).abs().max().item()
            e_p = (b.double() - r64).abs().max().item()
            tol = 2 * e_u + ulp(b, big)
            exact = a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
            ok = math.isfinite(e_p) and e_p <= tol and e_u <= 0.05 * big
            if SITES[site].same_math:
                ok = ok and exact
            good = good and ok
            notes.append(f"{name}: patched max |err| {e_p:.3g}, unpatched {e_u:.3g} vs float64 "
                         f"(|ref| <= {big:.3g}), within 2 x unpatched + 1 ulp = {tol:.3g}; "
                         + ("bit-identical" if exact else "not bit-identical")
                         + ("" if e_u <= 0.05 * big else "; the unpatched kernel is over 5 % off "
                            "the reference: the reference is wrong"))
        if site == "sglang/fused-moe-default-config":
            notes.append("configs (BM BN BK stages) unpatched "
                         f"{u['outputs']['config'].tolist()}, patched {p['outputs']['config'].tolist()}")
        say(good, f"{rel} {site}: patched output matches the unpatched one: " + "; ".join(notes))
    return 1 if bad else 0


# -----------------------------------------------------------------------------
# time / bench
# -----------------------------------------------------------------------------


def graph_ms(fn):
    """Median ms of REPLAYS CUDA-graph replays of @fn (eager once first: compile
    and load, never during capture); (ms, "graph"), or eager (ms, "eager") when
    the call cannot be captured."""
    fn()
    torch.cuda.synchronize()
    times = []
    try:
        graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        with torch.cuda.stream(stream):
            with torch.cuda.graph(graph, stream=stream):
                fn()
        replay, how = graph.replay, "graph"
    except Exception:  # noqa: BLE001  (not capturable: timed eagerly)
        torch.cuda.synchronize()
        replay, how = fn, "eager"
    for _ in range(REPLAYS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2], how


def time_sites(out_path, pairs):
    rows = []
    sites = release_sites()
    for rel, (orig, patched) in pairs.items():
        for site in sites.get(rel, []):
            x = SITES[site].inputs()
            row = dict(release=rel, site=site)
            for which, root in (("patched", patched), ("unpatched", orig)):
                try:
                    call = SITES[site].bind(site_module(site, root), x)
                    row[which], row[which + "_how"] = graph_ms(call)
                except Exception as e:  # noqa: BLE001  (refused under the shim: reported)
                    torch.cuda.synchronize()
                    row[which] = None
                    row[which + "_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}" \
                        if str(e) else type(e).__name__
            rows.append(row)
            print(json.dumps(row), flush=True)
    with open(out_path, "w") as f:
        json.dump(rows, f)
    return 0


def bench(work):
    """prepare, time under the shim (reroute, target sm120), print the table."""
    os.makedirs(work, exist_ok=True)
    if prepare(work):
        return 1
    sm120 = os.path.join(build(), "sm120")
    pairs = [f"{rel}={work}/{rel}/orig:{work}/{rel}/patched" for rel in release_sites()]
    out = os.path.join(work, "times.json")
    cmd = [sm120, "run", "--mode", "reroute", "--target", "sm120", "--log",
           os.path.join(work, "shim.%p.jsonl")]
    for s in SHIM_SETTINGS:
        cmd += ["--set", s]
    cmd += ["--", sys.executable, os.path.abspath(__file__), "time", out] + pairs
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(out):
        print(f"not ok - timing under the shim failed (exit {r.returncode}):")
        print("\n".join("# " + line for line in (r.stdout + r.stderr).splitlines()[-20:]))
        return 1
    rows = json.load(open(out))
    print("patched framework kernel vs the shim's reroute of the unpatched one (ms, median of "
          f"{REPLAYS} replays; target sm120; {torch.cuda.get_device_name()} figures)")
    print(f"{'release':<14} {'site':<33} {'patched':>9} {'shim':>9} {'shim/patched':>12}  note")
    for row in rows:
        p, u = row.get("patched"), row.get("unpatched")
        ratio = f"{u / p:12.2f}" if p and u else f"{'-':>12}"
        note = row.get("unpatched_error", "") and "shim: " + row["unpatched_error"]
        note += ("; patched: " + row["patched_error"]) if row.get("patched_error") else ""
        hows = {row.get("patched_how"), row.get("unpatched_how")} - {None}
        note += "" if hows <= {"graph"} else f" ({'/'.join(sorted(hows))} timing)"
        print(f"{row['release']:<14} {row['site']:<33} "
              f"{'-' if p is None else format(p, '9.3f'):>9} "
              f"{'-' if u is None else format(u, '9.3f'):>9} {ratio}  {note}")
    seen = set()
    for path in glob.glob(os.path.join(work, "shim.*.jsonl")):
        for line in open(path):
            e = json.loads(line)
            key = (e.get("kernel"), e.get("reason"))
            if e.get("action") == "refuse" and key not in seen:
                seen.add(key)
                print(f"# the shim refused {key[0]}: {key[1]}")
    print("shim: the unpatched kernel under `sm120 run --mode reroute --target sm120 "
          + " ".join(f"--set {s}" for s in SHIM_SETTINGS) + "`: rerouted to the bundled kernel "
          "where a rule takes it, else refused (no rule: the patch is the only way); > 1: the "
          "patch is faster")
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "prepare":
        return 1 if prepare(argv[1]) else 0
    if len(argv) >= 2 and argv[0] == "run":
        as_sm120()
        return run(argv[1], parse_roots(argv[2:]))
    if len(argv) == 4 and argv[0] == "check":
        as_sm120()
        return check(*argv[1:])
    if len(argv) >= 2 and argv[0] == "time":
        as_sm120()
        return time_sites(argv[1], parse_roots(argv[2:], pairs=True))
    if argv[:1] == ["bench"] and len(argv) <= 2:
        import tempfile
        return bench(argv[1] if len(argv) == 2 else tempfile.mkdtemp(prefix="bench_patch."))
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

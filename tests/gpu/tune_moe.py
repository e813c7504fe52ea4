"""tune_moe.py - tune SGLang's fused-MoE kernels under SM120's limits on a
Hopper GPU and write the tables `sm120 patch configs` ships
(patches/configs/, layout in its README.md).

    python3 tests/gpu/tune_moe.py [--out DIR] [--tables NAME,...] [--occupancy] [--jobs N]
    python3 tests/gpu/tune_moe.py --model DIR --tp N [--name NAME] [--out DIR] [...]

The eight shipped tables (TABLES): Kimi K2 FP8 block 128x128 and INT4 W4A16
group 32, GLM-4.7 FP8 per channel and bf16, each at TP8 and TP4.  --model
tunes the one layer of another checkpoint (its config.json) at --tp N.
Output: DIR/<name>.json per table (default DIR: $OUT, else ./moe-tables),
then one summary line per table and the elapsed time of each phase.

What is timed: the real kernels of SGLang 0.5.9 (fused_moe_kernel, and
fused_moe_kernel_gptq_awq for INT4) from the released package
(tests/oracle/fetch.sh; loaded by tests/gpu/oracle_moe.sglang_module), launched through
its own invoke_fused_moe_kernel: the gate/up GEMM (A = hidden states [M,
hidden], B = w13 [E, 2I, hidden], top-k) and the down GEMM (A = [M * top-k,
I], B = w2 [E, hidden, I], routed weights) with one configuration, as a
tuned file serves both; SGLang's activation quantisation (config-independent)
is done beforehand and not timed.  I is moe_intermediate_size / TP.
Routing: each token picks top-k distinct experts uniformly (random logits);
GLM as SGLang runs it on CUDA, with its shared expert fused as expert 161,
chosen by every token (so 161 experts, top-9; vLLM's E=160 file gets the
same table).  moe_align as tests/gpu/moe_cases.moe_align (SGLang's
buffer sizes).  Weights: tests/gpu/test_moe_reroute.make_weight.

SM120: every candidate fits 101376 B per block by Triton's formula for
sm_120 (core/limits/triton_smem.c, asked through `$SM120_BUILD/sm120
configs --json --arch 120`, the formula that equals Triton's metadata.shared
on 2974 compiles); Triton keeps to SM120's instructions (DISABLE_MMA_V3=1:
mma.sync, no wgmma, as tests/gpu/bench_moe.py does) and the dot is never
swapped (SGLang swaps it on sm_90 only).  --occupancy runs the timing
under `$SM120_BUILD/sm120 run --mode SHIM_MODE --target sm120` with
SM120SHIM_EMULATE_OCCUPANCY=1: the shim pads each launch's dynamic shared
memory so the H100 keeps no more blocks per SM than SM120 does.

Candidates (pruned for the time budget, recorded in each table):
BLOCK_SIZE_M {16, 32, 64, 128} x BLOCK_SIZE_N {64, 128, 256} x BLOCK_SIZE_K
{64, 128, 256} (FP8 block: {64, 128}, dividing the 128-wide scale group) x
num_warps {4, 8} x GROUP_SIZE_M {1} for BLOCK_SIZE_M <= 32, {1, 16} above,
at the deepest num_stages of 2..5 that fits; per batch size only
BLOCK_SIZE_M from max(16, p/4) to max(16, p), p the next power of two of the
mean rows per expert (a larger row block only pads, a much smaller one
re-reads the weights).  Batch sizes BATCHES.  Each candidate: compiled
first in --jobs parallel processes (default: CPUs, at most 16) into Triton's
cache, then timed as median of SEARCH_REPLAYS CUDA-graph replays with the
L2 cache flushed before each (weights from HBM, as in a forward pass); the
FINALISTS best again with REPLAYS replays, the best kept.  A candidate that
fails to compile or launch is left out and counted.

Budget: all eight tables in at most 8 minutes on one H100 (the phases'
times are printed; the tables record theirs).
"""
import argparse
import datetime
import itertools
import json
import math
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

# Before Triton is imported: the SM120 instruction set (no wgmma).
os.environ.setdefault("DISABLE_MMA_V3", "1")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle_moe  # noqa: E402
import moe_cases as sm  # noqa: E402
from bench_moe import Timer, _spec_key, tile_text  # noqa: E402  (Timer: median of CUDA-graph replays, L2 flushed before each)
from test_moe_reroute import make_weight  # noqa: E402

SM120_LIMIT = sm.SM120_SMEM_LIMIT           # 101376 B per block
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
SEARCH_REPLAYS, REPLAYS, FINALISTS = 3, 10, 3
SHIM_MODE = "diagnose"   # changes nothing but logs; the occupancy padding is the point
SEED = 20260919
TABLE_FORMAT = "sm120-moe-table/1"
SGLANG_RELEASE = "0.5.9"
KERNEL = f"SGLang {SGLANG_RELEASE} {oracle_moe.frameworks.sglang_moe_path(SGLANG_RELEASE)}"


class Shape:
    """One table: a MoE layer at one tensor-parallel size."""

    def __init__(self, name, model, routed, fused_shared, top_k, hidden, inter, tp, quant,
                 block=None, group=None):
        self.name, self.model, self.tp, self.quant = name, model, tp, quant
        self.routed, self.fused, self.top_k = routed, fused_shared, top_k
        self.hidden, self.inter = hidden, inter // tp
        self.block, self.group = block, group
        self.experts = routed + fused_shared          # E as SGLang launches it
        self.k_routed = top_k + fused_shared          # top-k as SGLang launches it

    def shape_json(self):
        """The "shape" that `sm120 patch configs` matches a model against."""
        s = {"quant": self.quant}
        if self.block:
            s["block_shape"] = list(self.block)
        if self.group:
            s["group_size"] = self.group
        s.update(n_routed_experts=self.routed, top_k=self.top_k, hidden_size=self.hidden,
                 intermediate_per_partition=self.inter)
        return s

    @property
    def weight_quant(self):
        """make_weight's and quantize_act's name of the format."""
        return {"fp8_block": "fp8_block", "fp8_channel": "fp8_channel", "bf16": "bf16",
                "int4_group": "int4"}[self.quant]


def kimi(quant, tp, **kw):
    # Kimi K2: 384 routed experts, top-8, hidden 7168, moe_intermediate_size 2048;
    # SGLang fuses no shared expert (deepseek_v2.py: only 256-expert DeepSeek-V3)
    what = {"fp8_block": "FP8 block 128x128", "int4_group": "INT4 W4A16 group 32"}[quant]
    name = {"fp8_block": "fp8-block", "int4_group": "int4-g32"}[quant]
    return Shape(f"kimi-k2-{name}-tp{tp}", f"Kimi K2 ({what})", 384, 0, 8, 7168, 2048, tp, quant,
                 **kw)


def glm(quant, tp):
    # GLM-4.7: 160 routed + 1 shared expert, top-8, hidden 5120, moe_intermediate_size 1536
    what = {"fp8_channel": "FP8 per channel", "bf16": "bf16"}[quant]
    name = {"fp8_channel": "fp8-channel", "bf16": "bf16"}[quant]
    return Shape(f"glm-4.7-{name}-tp{tp}", f"GLM-4.7 ({what})", 160, 1, 8, 5120, 1536, tp, quant)


TABLES = {s.name: s for s in (
    [kimi("fp8_block", tp, block=(128, 128)) for tp in (8, 4)]
    + [kimi("int4_group", tp, group=32) for tp in (8, 4)]
    + [glm("fp8_channel", tp) for tp in (8, 4)] + [glm("bf16", tp) for tp in (8, 4)])}


def shape_of_model(model_dir, tp, name):
    """The Shape of the MoE layer of the checkpoint at @model_dir at @tp, read as
    `sm120 patch configs` reads it (and SGLang's shared-expert fusion)."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    text = cfg.get("text_config", cfg)
    arch = (cfg.get("architectures") or [""])[0]
    routed = text.get("n_routed_experts", text.get("num_experts"))
    shared = text.get("n_shared_experts", 1 if text.get("model_type") in
                      ("deepseek_v3", "kimi_k2", "glm4_moe") else 0) or 0
    qc = cfg.get("quantization_config") or text.get("quantization_config")
    quant, kw = "bf16", {}
    if qc and qc.get("quant_method") == "fp8" and qc.get("weight_block_size"):
        quant, kw = "fp8_block", {"block": tuple(qc["weight_block_size"])}
    elif qc and qc.get("quant_method") == "compressed-tensors":
        w = next(iter(qc["config_groups"].values()))["weights"]
        if w["type"] == "float" and w["strategy"] == "channel":
            quant = "fp8_channel"
        elif w["type"] == "int" and w["num_bits"] == 4 and w["strategy"] == "group":
            quant, kw = "int4_group", {"group": w["group_size"]}
        else:
            sys.exit(f"tune_moe.py: {model_dir}: compressed-tensors {w['type']} "
                     f"{w['strategy']}: not a format this script tunes")
    elif qc:
        sys.exit(f"tune_moe.py: {model_dir}: quant_method {qc.get('quant_method')}: not a "
                 "format this script tunes")
    if quant == "fp8_block" and kw["block"] != (128, 128):
        sys.exit("tune_moe.py: only 128x128 FP8 blocks (the loader's quantizer is 128-wide)")
    if quant == "int4_group" and kw["group"] != sm.INT4_GROUP:
        sys.exit(f"tune_moe.py: only INT4 group {sm.INT4_GROUP} (make_weight's layout)")
    fused = shared if shared and (arch == "Glm4MoeForCausalLM" or (
        arch == "DeepseekV3ForCausalLM" and routed == 256 and shared == 1)) else 0
    if text["moe_intermediate_size"] % tp:
        sys.exit(f"tune_moe.py: moe_intermediate_size {text['moe_intermediate_size']} is not "
                 f"divisible by --tp {tp}")
    return Shape(name or f"{os.path.basename(os.path.normpath(model_dir))}-{quant}-tp{tp}",
                 f"{arch} ({quant})", routed, fused, text["num_experts_per_tok"],
                 text["hidden_size"], text["moe_intermediate_size"], tp, quant, **kw)


# -----------------------------------------------------------------------------
# SGLang's kernels
# -----------------------------------------------------------------------------

_SGLANG = None


def sglang():
    """SGLang 0.5.9's fused-MoE kernel module (oracle_moe.sglang_module), as on
    SM120: the dot is never swapped (should_enable_swap_ab asks for sm_90)."""
    global _SGLANG
    if _SGLANG is None:
        mod = oracle_moe.sglang_module(SGLANG_RELEASE)
        mod.is_sm90_supported = lambda: False
        mod.should_enable_swap_ab.cache_clear()
        _SGLANG = mod
    return _SGLANG


class Recorder:
    """Stands for a @triton.jit kernel of the module: fn[grid](...) records the
    launch (name, grid, encoded arguments) instead of running it."""

    def __init__(self, name, sink):
        self.name, self.sink = name, sink

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            g = grid(kwargs) if callable(grid) else grid
            enc = [("tensor", str(a.dtype).replace("torch.", "")) if torch.is_tensor(a)
                   else ("value", a) for a in args]
            kw = {k: (("tl", "bfloat16") if v is tl.bfloat16 else v) for k, v in kwargs.items()}
            self.sink.append((self.name, tuple(g), enc, kw))
        return launch


def compile_job(job):
    """In a worker: compile one recorded launch into Triton's cache (no launch).
    (True, shared bytes) or (False, why)."""
    name, grid, args, kwargs = job
    fn = getattr(sglang(), name)
    real = [torch.empty(64, dtype=getattr(torch, v), device="cuda") if t == "tensor" else v
            for t, v in args]
    kw = {k: (getattr(tl, v[1]) if isinstance(v, tuple) and v[:1] == ("tl",) else v)
          for k, v in kwargs.items()}
    try:
        return True, fn.warmup(*real, grid=grid, **kw).metadata.shared
    except Exception as e:  # noqa: BLE001  (a configuration Triton rejects: left out)
        return False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def job_key(job):
    """What Triton's cache key depends on (bench_moe._spec_key's rule)."""
    name, grid, args, kwargs = job
    return _spec_key((None, name, grid, args, kwargs))


# -----------------------------------------------------------------------------
# One batch size of one table: inputs, routing, the two GEMMs
# -----------------------------------------------------------------------------


class Case:
    """The two expert GEMMs of one layer at batch size @m.  @weights: (w13,
    w13 scale, w2, w2 scale), real or on the meta device (recording only)."""

    def __init__(self, shape, m, weights, device):
        self.shape, self.m, self.device = shape, m, device
        self.w13, self.s13, self.w2, self.s2 = weights
        e, k = shape.experts, shape.k_routed
        g = torch.Generator(device="cuda").manual_seed(SEED + m)
        logits = torch.randn(m, shape.routed, generator=g, device="cuda")
        ids = torch.topk(logits, shape.top_k, dim=1).indices.to(torch.int32)
        if shape.fused:
            fused = torch.arange(shape.routed, e, dtype=torch.int32, device="cuda")
            ids = torch.cat([ids, fused.expand(m, shape.fused)], dim=1)
        self.topk_ids = ids.contiguous()
        self.topk_weights = torch.softmax(torch.randn(m, k, generator=g, device="cuda"), 1)
        counts = torch.bincount(self.topk_ids.reshape(-1).long(), minlength=e)
        self.mean_rows = float(m * k) / max(1, int((counts > 0).sum()))
        quant = shape.weight_quant
        if device == "meta":
            self.up = self._meta_act(m, shape.hidden, quant)
            self.down = self._meta_act(m * k, shape.inter, quant)
        else:
            self.up = self._act(torch.randn(m, shape.hidden, generator=g, device="cuda"), quant)
            self.down = self._act(torch.randn(m * k, shape.inter, generator=g, device="cuda"),
                                  quant)
        self.c_up = torch.empty(m, k, 2 * shape.inter, dtype=torch.bfloat16, device=device)
        self.c_down = torch.empty(m, k, shape.hidden, dtype=torch.bfloat16, device=device)
        self.aligned = {}

    @staticmethod
    def _act(x, quant):
        """(A as passed, what SGLang's quantiser returns for it)."""
        a = x.to(torch.bfloat16)
        q = sm.quantize_act(a, quant)
        return a, q

    @staticmethod
    def _meta_act(rows, k, quant):
        a = torch.empty(rows, k, dtype=torch.bfloat16, device="meta")
        if quant in ("bf16", "int4"):
            return a, (a, None)
        scale = (rows, triton.cdiv(k, 128)) if quant == "fp8_block" else (rows, 1)
        return a, (torch.empty(rows, k, dtype=torch.float8_e4m3fn, device="meta"),
                   torch.empty(scale, dtype=torch.float32, device="meta"))

    def routing(self, bm):
        if bm not in self.aligned:
            self.aligned[bm] = sm.moe_align(self.topk_ids, bm, self.shape.experts)
        return self.aligned[bm]

    def run(self, config):
        """Both GEMMs through SGLang's invoke_fused_moe_kernel at @config."""
        mod, s = sglang(), self.shape
        quantized = {id(self.up[0]): self.up[1], id(self.down[0]): self.down[1]}
        mod.sglang_per_token_group_quant_fp8 = lambda a, *x, **k: quantized[id(a)]
        mod.scaled_fp8_quant = lambda a, *x, **k: quantized[id(a)]
        sorted_ids, expert_ids, post = self.routing(config["BLOCK_SIZE_M"])
        block = list(s.block) if s.block else ([0, s.group] if s.group else None)
        fp8 = s.quant.startswith("fp8")
        for a, w, scale, c, mul, top_k in ((self.up[0], self.w13, self.s13, self.c_up, False,
                                            s.k_routed),
                                           (self.down[0], self.w2, self.s2, self.c_down, True, 1)):
            mod.invoke_fused_moe_kernel(
                a, w, None, c, None, scale, None, self.topk_weights, self.topk_ids, sorted_ids,
                expert_ids, post, mul, top_k, dict(config), tl.bfloat16, fp8, False, False,
                s.quant == "int4_group", s.quant == "fp8_channel", block_shape=block)


def weights(shape, device):
    """(w13, its scale, w2, its scale) of @shape: make_weight's, or empty on meta."""
    q, e, h, i = shape.weight_quant, shape.experts, shape.hidden, shape.inter
    if device == "meta":
        def empty(n, k):
            if q == "int4":
                return (torch.empty(e, n, k // 2, dtype=torch.uint8, device="meta"),
                        torch.empty(e, n, k // sm.INT4_GROUP, dtype=torch.bfloat16, device="meta"))
            if q == "bf16":
                return torch.empty(e, n, k, dtype=torch.bfloat16, device="meta"), None
            s = (e, n // 128, k // 128) if q == "fp8_block" else (e, n, 1)
            return (torch.empty(e, n, k, dtype=torch.float8_e4m3fn, device="meta"),
                    torch.empty(s, dtype=torch.float32, device="meta"))
        return (*empty(2 * i, h), *empty(h, i))
    g = torch.Generator(device="cuda").manual_seed(SEED)
    return (*make_weight(e, 2 * i, h, q, g, "cuda"), *make_weight(e, h, i, q, g, "cuda"))


# -----------------------------------------------------------------------------
# Candidates
# -----------------------------------------------------------------------------


def sm120_bytes(shape, configs, sm120):
    """The sm_120 shared memory of each of @configs for @shape's kernel, by
    `sm120 configs --json --arch 120` (core/limits/triton_smem.c) on a file
    named as SGLang names this layer's configs."""
    dtype = {"fp8_block": ",dtype=fp8_w8a8,block_shape=[128, 128]",
             "fp8_channel": ",dtype=fp8_w8a8,per_channel_quant=True",
             "bf16": "", "int4_group": ",dtype=int4_w4a16"}[shape.quant]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"E={shape.experts},N={shape.inter},device_name=tune{dtype}.json")
        json.dump({str(i + 1): c for i, c in enumerate(configs)}, open(path, "w"))
        r = subprocess.run([sm120, "configs", "--json", "--arch", "120", path],
                           capture_output=True, text=True)
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    shared = {int(x["batch"]): x["shared"] for x in rows if x.get("type") == "bucket"}
    if len(shared) != len(configs):
        sys.exit(f"tune_moe.py: {sm120} configs answered {len(shared)} of {len(configs)} "
                 f"candidates (exit {r.returncode}): {r.stderr.strip()[:300]}")
    return [shared[i + 1] for i in range(len(configs))]


def candidates(shape, sm120):
    """The grid of the module docstring, each at its deepest fitting num_stages:
    [(config, sm_120 bytes)]."""
    bks = (64, 128) if shape.quant == "fp8_block" else (64, 128, 256)
    raw = []
    for bm, bn, bk, w in itertools.product((16, 32, 64, 128), (64, 128, 256), bks, (4, 8)):
        for gm in ((1,) if bm <= 32 else (1, 16)):
            for st in (2, 3, 4, 5):
                raw.append(sm._cfg(bm, bn, bk, gm, w, st))
    sizes = sm120_bytes(shape, raw, sm120)
    best = {}
    for cfg, size in zip(raw, sizes):
        if size <= SM120_LIMIT:
            key = tuple(cfg[k] for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K",
                                         "GROUP_SIZE_M", "num_warps"))
            if key not in best or cfg["num_stages"] > best[key][0]["num_stages"]:
                best[key] = (cfg, size)
    return list(best.values())


def row_blocks(mean_rows):
    """BLOCK_SIZE_M worth timing for experts of @mean_rows rows on average."""
    p = triton.next_power_of_2(max(1, math.ceil(mean_rows)))
    return {bm for bm in (16, 32, 64, 128) if max(16, p // 4) <= bm <= max(16, p)}


# -----------------------------------------------------------------------------
# Timing (bench_moe.Timer)
# -----------------------------------------------------------------------------


def tune_case(case, cands, failed, timer):
    """The best (ms, config, sm_120 bytes) of @cands for @case, and how many were timed."""
    allowed = row_blocks(case.mean_rows)
    scores = []
    for cfg, size in cands:
        if cfg["BLOCK_SIZE_M"] not in allowed or tile_text(cfg) in failed:
            continue
        try:
            ms = timer(lambda: case.run(cfg), SEARCH_REPLAYS)
        except Exception as e:  # noqa: BLE001  (does not run here: left out, counted)
            failed[tile_text(cfg)] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
            continue
        scores.append((ms, cfg, size))
    scores.sort(key=lambda s: s[0])
    final = sorted(((timer(lambda: case.run(c), REPLAYS), c, size) for _, c, size in
                    scores[:FINALISTS]), key=lambda s: s[0])
    return final[0], len(scores)


# -----------------------------------------------------------------------------


def under_shim():
    return "sm120shim" in os.environ.get("LD_PRELOAD", "")


def reexec_under_shim(sm120):
    """--occupancy: run this script again under the shim with SM120's occupancy."""
    env = dict(os.environ, SM120SHIM_EMULATE_OCCUPANCY="1")
    cmd = [sm120, "run", "--mode", SHIM_MODE, "--target", "sm120", "--", sys.executable,
           os.path.abspath(__file__)] + sys.argv[1:]
    print(f"# {' '.join(cmd)}  (SM120SHIM_EMULATE_OCCUPANCY=1)", flush=True)
    os.execvpe(cmd[0], cmd, env)


def parse(argv):
    p = argparse.ArgumentParser(description="tune SGLang's fused-MoE kernels under SM120 limits")
    p.add_argument("--out", default=os.environ.get("OUT") or "moe-tables")
    p.add_argument("--tables", default=",".join(TABLES))
    p.add_argument("--model")
    p.add_argument("--tp", type=int)
    p.add_argument("--name")
    p.add_argument("--occupancy", action="store_true")
    p.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1))
    o = p.parse_args(argv)
    if bool(o.model) != bool(o.tp):
        p.error("--model and --tp go together")
    unknown = [t for t in o.tables.split(",") if t not in TABLES]
    if not o.model and unknown:
        p.error(f"unknown table {', '.join(unknown)}; known: {', '.join(TABLES)}")
    return o


def main(argv):
    o = parse(argv)
    sm120 = os.path.join(os.environ.get("SM120_BUILD", "build"), "sm120")
    if not os.access(sm120, os.X_OK):
        sys.exit(f"tune_moe.py: {sm120} is missing: build it (make) or set SM120_BUILD")
    if o.occupancy and not under_shim():
        reexec_under_shim(sm120)
    shapes = [shape_of_model(o.model, o.tp, o.name)] if o.model else \
        [TABLES[t] for t in o.tables.split(",")]
    start = time.time()
    phases = {}

    # 1. candidates, and the launches they make, recorded on meta tensors
    sink, plan = [], []
    mod = sglang()
    real = (mod.fused_moe_kernel, mod.fused_moe_kernel_gptq_awq)
    mod.fused_moe_kernel = Recorder("fused_moe_kernel", sink)
    mod.fused_moe_kernel_gptq_awq = Recorder("fused_moe_kernel_gptq_awq", sink)
    for shape in shapes:
        cands = candidates(shape, sm120)
        meta = weights(shape, "meta")
        for m in BATCHES:
            case = Case(shape, m, meta, "meta")
            for cfg, _ in cands:
                if cfg["BLOCK_SIZE_M"] in row_blocks(case.mean_rows):
                    case.run(cfg)
        plan.append((shape, cands))
    mod.fused_moe_kernel, mod.fused_moe_kernel_gptq_awq = real
    distinct = {}
    for job in sink:
        distinct.setdefault(job_key(job), job)
    phases["candidates"] = time.time() - start
    print(f"# {len(distinct)} distinct kernels from the candidates in {phases['candidates']:.0f} s",
          flush=True)

    # 2. every distinct compile, in parallel
    t = time.time()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(o.jobs) as pool:
        results = pool.map(compile_job, list(distinct.values()), chunksize=1)
    bad = sum(1 for ok, _ in results if not ok)
    phases["compile"] = time.time() - t
    print(f"# {len(distinct)} kernels compiled in {phases['compile']:.0f} s ({o.jobs} processes, "
          f"{bad} rejected by Triton)", flush=True)

    # 3. timing, table by table
    os.makedirs(o.out, exist_ok=True)
    timer = Timer()
    gpu = torch.cuda.get_device_name()
    occupancy = under_shim() and os.environ.get("SM120SHIM_EMULATE_OCCUPANCY") == "1"
    for shape, cands in plan:
        t = time.time()
        w = weights(shape, "cuda")
        configs, detail, failed = {}, {}, {}
        for m in BATCHES:
            case = Case(shape, m, w, "cuda")
            (ms, cfg, size), n = tune_case(case, cands, failed, timer)
            configs[str(m)] = cfg
            detail[str(m)] = dict(ms=round(ms, 4), sm120_bytes=size, timed=n, tile=tile_text(cfg))
            del case
        del w
        torch.cuda.empty_cache()
        took = time.time() - t
        phases[shape.name] = took
        table = {
            "format": TABLE_FORMAT,
            "provenance": f"tuned on {gpu} under SM120 limits: <= {SM120_LIMIT} B per block by "
                          f"Triton's formula for sm_120, SM120 occupancy "
                          f"{'emulated' if occupancy else 'not emulated'}; retune on a card",
            "model": shape.model, "tp": shape.tp, "shape": shape.shape_json(),
            "tuning": {
                "kernel": KERNEL + (" fused_moe_kernel_gptq_awq" if shape.quant == "int4_group"
                                    else " fused_moe_kernel"),
                "gpu": gpu, "torch": torch.__version__, "triton": triton.__version__,
                "env": {"DISABLE_MMA_V3": os.environ.get("DISABLE_MMA_V3")},
                "occupancy_emulated": occupancy,
                "launch": f"E={shape.experts}, top_k={shape.k_routed}"
                          + (" (the shared expert fused, chosen by every token)" if shape.fused
                             else "") + "; gate/up then down GEMM, one configuration",
                "candidates": "BLOCK_SIZE_M 16-128 x BLOCK_SIZE_N 64-256 x BLOCK_SIZE_K "
                              f"{'64-128' if shape.quant == 'fp8_block' else '64-256'} x "
                              "num_warps 4, 8 x GROUP_SIZE_M 1 (BM <= 32) or 1, 16; the deepest "
                              "num_stages of 2-5 fitting; BM within a factor 4 below the next "
                              "power of two of the mean rows per expert",
                "timing": f"median of {SEARCH_REPLAYS} CUDA-graph replays per candidate, the "
                          f"{FINALISTS} best again over {REPLAYS}; L2 flushed before each",
                "batches": detail, "failed": failed, "seconds": round(took, 1),
                "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            },
            "configs": configs,
        }
        path = os.path.join(o.out, f"{shape.name}.json")
        with open(path, "w") as f:
            json.dump(table, f, indent=1)
            f.write("\n")
        print(f"ok - {shape.name}: {len(BATCHES)} batch sizes in {took:.0f} s, "
              f"{sum(d['timed'] for d in detail.values())} timings, {len(failed)} candidates "
              f"failed -> {path}", flush=True)
    total = time.time() - start
    print(f"# phases (s): " + ", ".join(f"{k} {v:.0f}" for k, v in phases.items())
          + f"; total {total:.0f} s ({total / 60:.1f} min, budget 8 min for all eight)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

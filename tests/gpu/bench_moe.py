"""bench_moe.py - one configuration of the fused-MoE benchmark (GPU).

Times the two GEMMs of a fused-MoE layer: gate/up (A = hidden states
[M, hidden], B = w1 [E, 2*I, hidden], top_k 8) and down (A = the SwiGLU
output [8M, I], one row per routed row, B = w2 [E, hidden, I], top_k 1,
the routed weights applied), uniform random routing with distinct experts
per token, aligned by moe_cases.moe_align, for the Kimi K2 and GLM-4.7
shapes at TP8 (moe_cases.MODELS).  The kernels are SGLang 0.5.9's own
`fused_moe_kernel` and, for int4, `fused_moe_kernel_gptq_awq` (rules
sglang-moe-2026-03 and sglang-moe-gptq-awq), from its released package in
$SM120_ORACLE (default $SM120_BUILD/oracle; tests/oracle/fetch.sh), each
launch made by SGLang's own invoke_fused_moe_kernel (as
test_moe_reroute.py makes it): its FP8 quantisers return the activations
quantised beforehand (moe_cases.quantize_act, not timed), and
should_enable_swap_ab is answered as on SM120 (no swap; on sm_90 SGLang
swaps FP8 tiles below 64 rows, which the Hopper configurations are not).

Run as: python3 bench_moe.py CONFIG [--quant fp8_tensor,bf16[,int4]]
            [--models kimi,glm] [--halves gateup,down]
            [--batches 1,16,512,4096] [--grid full|quick] [--jobs N]
            [--retime FILE]
  hopper      the over-limit configuration of moe_cases.CONFIGS (what the
              shim reroutes), run natively on the Hopper GPU
  sm120       the best configuration that fits SM120, per case: every point of
              BLOCK_SIZE_M {16,32,64,128} x BLOCK_SIZE_N {64,128,256} x
              BLOCK_SIZE_K {64,128,256} x GROUP_SIZE_M {1,16,32} x warps {4,8}
              x stages {2,3,4,5} whose sm_120 shared memory by the measured
              formula (num_stages-1)*(BM*BK + BK*BN)*element bytes is at most
              101376 - 1024 B (int4, not measured: A bf16 and the packed B
              tile pipelined, plus one dequantised bf16 B tile), and with
              BLOCK_SIZE_M at most max(16, next_pow2(most rows of one expert))
              (a larger row block only adds padding rows); each timed with 5
              CUDA-graph replays, the 3 best again with 20, the best kept.
              Compiled first in --jobs parallel processes (default: CPUs, at
              most 16) into the Triton cache.  Runs with DISABLE_MMA_V3=1 (set
              here unless set) so Triton keeps to the instructions SM120 has
              (mma.sync, no wgmma).  --grid quick (what `make bench-gpu`
              runs, to fit one 10-minute GPU call), by the case's most rows
              of one expert R: R <= 16 (decode): BLOCK_SIZE_M 16 x
              BLOCK_SIZE_N {64,128} x BLOCK_SIZE_K {128,256} x warps 4 x
              stages {2,3,4}; R <= 128: BLOCK_SIZE_M {16,32,64} x
              BLOCK_SIZE_N {64,128} x BLOCK_SIZE_K {64,128} x warps {4,8} x
              stages 3; larger: BLOCK_SIZE_M {64,128} x BLOCK_SIZE_N
              {128,256} x BLOCK_SIZE_K {64,128} x warps 8 x stages {2,3};
              GROUP_SIZE_M 1 below 64 rows a block, else 16; the same
              shared-memory and BLOCK_SIZE_M filters.  Both grids keep
              fp8_block to a BLOCK_SIZE_K that divides 128 (SGLang's kernel
              reads one block scale per K tile, so a 256-wide tile would
              apply its first 128 columns' scale to all of them; SGLang's
              own configurations use 128).  Each record lists
              the TOP_KEEP fastest configurations of the search ("top").
              --retime FILE (a previous sm120 run's output): no search; per
              case, the configurations FILE lists under "top" are timed again
              (20 replays each) and the best kept.  Run so under the shim with
              SM120SHIM_EMULATE_OCCUPANCY=1 and --target sm120, it gives the
              search's result with SM120's blocks per SM (bench_moe.sh).
  rerouted    the hopper configuration under `sm120 run --mode reroute
              --target sm120 --set top_k=8 --set hidden_size=<hidden>`: the
              launches run on the bundled kernels.  One model per process
              (the shim is told one hidden size): when SM120SHIM_HIDDEN_SIZE
              is set, only the model of that hidden size runs.
  grouped_mm  torch._grouped_mm (bf16 only): the rows of A permuted by expert
              beforehand (not timed), one GEMM per expert over its rows
  limit       no GEMM: bench_peaks.cu's stream_rw (from the cubin at
              $SM120_PEAKS_CUBIN, default $SM120_BUILD/test/bench_peaks.cubin
              under the repository root; SM count x 16 blocks of 256
              threads), timed as the kernels are, reading as many bytes as
              the case must read once (weight_bytes plus A and its scale)
              and writing as many as it writes (C, M*8*N bf16), in scratch
              buffers of its own: the traffic alone, what memory allows the
              case at best on this GPU at this size (launch, ramp and tail
              included)
SM120_BENCH_SMS=S: every launch on a CUDA green context of S SMs of this GPU
(green_stream; records add "sms", the count the driver gave), for the weight
bytes a kernel streams per SM and second against an SM120 SM's share of its
DRAM (bench_moe.sh's last table).
Cases: each model x half x batch M x quantisation (default fp8_tensor and
bf16; int4 = W4A16 through fused_moe_kernel_gptq_awq, groups of 32).

Prints one JSON object per case: kernel (moe_gate_up or moe_down), half
(gateup or down), model, quant, batch, config, tile,
ms (median of 20 CUDA-graph replays, with the L2 cache flushed before each
replay, so the weights come from HBM as in a real forward pass; launch costs
on the CPU not counted), flop (2 * M*8 * N * K, the routed rows only),
weight_bytes (the weights and weight scales of the experts the routing
touches: what must be read at least once), experts (touched), tflops, gbps
(weight_bytes / time), smem (the compiled kernel's shared memory on this
GPU); limit records add probe_bytes ([read, written]).  Ratios between
configurations and fractions of the ceilings
(bench_peaks) are left to the caller.
"""
import ctypes
import itertools
import json
import multiprocessing
import os
import sys

if len(sys.argv) > 1 and sys.argv[1] == "sm120":
    # Before Triton is imported: the SM120 instruction set (no wgmma).
    os.environ.setdefault("DISABLE_MMA_V3", "1")

from typing import NamedTuple  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import moe_cases as mc  # noqa: E402
import oracle_moe  # noqa: E402
from test_moe_reroute import make_weight  # noqa: E402

RELEASE = "0.5.9"   # the SGLang release whose kernels are timed
TOP_K = mc.TOP_K
CONFIGS = ("hopper", "sm120", "rerouted", "grouped_mm", "limit")
SMEM_BUDGET = mc.SM120_SMEM_LIMIT - 1024
SEED = 20260911
REPLAYS, SEARCH_REPLAYS, FINALISTS = 20, 5, 3
TOP_KEEP = 5   # configurations an sm120 record lists for --retime
FLUSH_BYTES = 256 << 20   # larger than the H200's L2 (50 MB)


# -----------------------------------------------------------------------------
# Timing
# -----------------------------------------------------------------------------


class Timer:
    """Median milliseconds of CUDA-graph replays of a function, L2 flushed before each;
    on `stream` (a green context's: green_stream) when given, else on torch's own."""

    def __init__(self, stream=None):
        self.flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
        self.stream = stream

    def __call__(self, fn, replays=REPLAYS):
        """Two eager calls first (compile, load; under the shim: load the bundled
        kernels, never during capture), then one capture and `replays` replays, all on
        the one stream (captured there, a green context's launches keep to its SMs)."""
        for _ in range(2):
            fn()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        stream = self.stream or torch.cuda.Stream()
        times = []
        with torch.cuda.stream(stream):
            with torch.cuda.graph(graph, stream=stream):
                fn()
            for _ in range(replays):
                self.flush.zero_()
                a = torch.cuda.Event(enable_timing=True)
                b = torch.cuda.Event(enable_timing=True)
                a.record()
                graph.replay()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b))
        del graph
        return sorted(times)[len(times) // 2]


def green_stream(want):
    """(a torch stream of a CUDA green context of `want` SMs of the current device, the
    SM count the driver gave), through the driver API (CUDA 12.4 and later): the same
    split as gpu_bench_moe_decode's MOE_DECODE_SMS, so that the two measure alike.  The
    CUdevResource buffers are larger than any release's struct (144 bytes in CUDA 13);
    its SM count is the union's first word, after the type and 92 bytes of padding."""
    cu = ctypes.CDLL("libcuda.so.1")
    torch.cuda.init()
    torch.empty(1, device="cuda")   # torch's primary context exists and is current

    def check(name, result):
        if result != 0:
            raise RuntimeError(f"{name} failed: CUresult {result} (green contexts need CUDA 12.4+)")
    dev, n = ctypes.c_int(), ctypes.c_uint(1)
    every, part = ctypes.create_string_buffer(1024), ctypes.create_string_buffer(1024)
    desc, ctx, stream = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    check("cuDeviceGet", cu.cuDeviceGet(ctypes.byref(dev), torch.cuda.current_device()))
    check("cuDeviceGetDevResource", cu.cuDeviceGetDevResource(dev, every, 1))   # CU_DEV_RESOURCE_TYPE_SM
    check("cuDevSmResourceSplitByCount", cu.cuDevSmResourceSplitByCount(
        part, ctypes.byref(n), every, None, ctypes.c_uint(0), ctypes.c_uint(want)))
    check("cuDevResourceGenerateDesc", cu.cuDevResourceGenerateDesc(ctypes.byref(desc), part, 1))
    check("cuGreenCtxCreate", cu.cuGreenCtxCreate(ctypes.byref(ctx), desc, dev, 1))   # DEFAULT_STREAM
    check("cuGreenCtxStreamCreate", cu.cuGreenCtxStreamCreate(ctypes.byref(stream), ctx, 1, 0))   # NON_BLOCKING
    return torch.cuda.ExternalStream(stream.value), ctypes.c_uint.from_buffer(part, 96).value


class Probe:
    """bench_peaks.cu's stream_rw, loaded from its cubin through the driver API
    and launched on torch's current stream (so that Timer's graph captures it):
    a launch that only moves a case's bytes, in scratch buffers of its own."""

    def __init__(self):
        root = os.path.join(HERE, "..", "..")
        path = os.environ.get("SM120_PEAKS_CUBIN") or os.path.join(
            root, os.environ.get("SM120_BUILD", "build"), "test", "bench_peaks.cubin")
        torch.cuda.init()
        # a first allocation: torch's primary context exists and is current here
        self.src = self.dst = torch.empty(16, dtype=torch.uint8, device="cuda")
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self.grid = props.multi_processor_count * 16   # blocks of 256, as for read_bw
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.cu.cuModuleLoad.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
        self.cu.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                                ctypes.c_char_p]
        self.cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
            ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
        self.check("cuInit", self.cu.cuInit(0))
        self.module, self.fn = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(f"cuModuleLoad({path})",
                   self.cu.cuModuleLoad(ctypes.byref(self.module), path.encode()))
        self.check("cuModuleGetFunction",
                   self.cu.cuModuleGetFunction(ctypes.byref(self.fn), self.module, b"stream_rw"))

    @staticmethod
    def check(name, result):
        """Raise unless the driver call `name` returned CUDA_SUCCESS."""
        if result != 0:
            raise RuntimeError(f"{name} failed: CUresult {result}")

    def launcher(self, read_bytes, written_bytes):
        """A function that launches stream_rw once over ceil(read_bytes / 16) and
        ceil(written_bytes / 16) 16-byte elements (scratch grown to fit, never shrunk:
        the buffers of one launcher stay valid until the next call)."""
        n, m = -(-read_bytes // 16), -(-written_bytes // 16)
        if self.src.numel() < n * 16:
            self.src = torch.empty(n * 16, dtype=torch.uint8, device="cuda")
        if self.dst.numel() < m * 16:
            self.dst = torch.empty(m * 16, dtype=torch.uint8, device="cuda")
        src, dst = self.src.data_ptr(), self.dst.data_ptr()

        def launch():
            args = (ctypes.c_void_p(src), ctypes.c_size_t(n), ctypes.c_void_p(dst),
                    ctypes.c_size_t(m))
            params = (ctypes.c_void_p * 4)(*(ctypes.addressof(a) for a in args))
            stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
            self.check("cuLaunchKernel", self.cu.cuLaunchKernel(
                self.fn, self.grid, 1, 1, 256, 1, 1, 0, stream, params, None))
        return launch


# -----------------------------------------------------------------------------
# SGLang's kernels, launched by its own host function
# -----------------------------------------------------------------------------


class Recorder:
    """Stands for one of SGLang's @triton.jit kernels, so that its host function
    launches through it: records the launch it makes (`made`: grid, arguments,
    keywords) and makes it, or, while `dry`, only records it."""

    def __init__(self, fn):
        self.fn, self.dry, self.made = fn, False, None

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.made = (tuple(grid(kwargs) if callable(grid) else grid), args, kwargs)
            return None if self.dry else self.fn[grid](*args, **kwargs)
        return launch

    def __getattr__(self, name):
        return getattr(self.fn, name)


def sglang_module():
    """SGLang RELEASE's fused_moe_triton_kernels (oracle_moe's loader, its FP8
    quantisers oracle_moe's), both kernels recorded, swap_ab as on SM120."""
    mod = oracle_moe.sglang_module(RELEASE)
    if not isinstance(mod.fused_moe_kernel, Recorder):
        mod.is_sm90_supported = lambda: False
        mod.should_enable_swap_ab.cache_clear()
        for name in ("fused_moe_kernel", "fused_moe_kernel_gptq_awq"):
            setattr(mod, name, Recorder(getattr(mod, name)))
    return mod


class Launch(NamedTuple):
    """One launch SGLang's host function makes: the kernel (the @triton.jit
    function), the grid, arguments and keywords it passed, and the host call."""
    kernel: object
    grid: tuple
    args: tuple
    kwargs: dict
    host: object

    def run(self):
        """Launch, through SGLang's invoke_fused_moe_kernel."""
        return self.host()

    def warmup(self):
        """Compile (no launch); returns the compiled kernel."""
        return self.kernel.warmup(*self.args, grid=self.grid, **self.kwargs)


def sglang_launch(a, w, c, a_scale, w_scale, topk_weights, topk_ids, sorted_ids, expert_ids,
                  post, mul_routed, top_k, config, quant):
    """SGLang's invoke_fused_moe_kernel on A (quantised already: its quantisers
    return (a, a_scale)), B = w [E, N, K] (int4: uint8 [E, N, K / 2]) and its
    scale, C [M, 8, N], the routing from moe_align; @mul_routed and @top_k as
    the half launches them.  int4 goes to fused_moe_kernel_gptq_awq (block
    shape [0, INT4_GROUP], no zero points), FP8 block at 128x128.  The host
    function is called once here without launching, to learn the launch."""
    mod = sglang_module()
    kernel = getattr(mod, mc.kernel_name(quant))
    block = ([0, mc.INT4_GROUP] if quant == "int4" else
             list(mc.FP8_BLOCK_SHAPE) if quant == "fp8_block" else None)

    def host():
        mod.scaled_fp8_quant = lambda *args, **kwargs: (a, a_scale)
        mod.sglang_per_token_group_quant_fp8 = lambda *args, **kwargs: (a, a_scale)
        mod.invoke_fused_moe_kernel(
            a, w, None, c, None, w_scale, None, topk_weights, topk_ids, sorted_ids, expert_ids,
            post, mul_routed, top_k, dict(config), tl.bfloat16, quant.startswith("fp8"), False,
            False, quant == "int4", quant == "fp8_channel", block_shape=block)

    kernel.dry = True
    try:
        host()
    finally:
        kernel.dry = False
    grid, args, kwargs = kernel.made
    return Launch(kernel.fn, grid, args, kwargs, host)


# -----------------------------------------------------------------------------
# One case: weights, routing, the launch
# -----------------------------------------------------------------------------


HALVES = ("gateup", "down")


def half_shape(model, half):
    """(experts, N, K) of one GEMM of a model's layer."""
    e, hidden, inter = mc.MODELS[model]
    return (e, 2 * inter, hidden) if half == "gateup" else (e, hidden, inter)


class Case:
    """One GEMM (gate/up or down) of one model, quantisation and batch size."""

    def __init__(self, model, half, quant, batch, weights):
        self.model, self.half, self.quant, self.batch = model, half, quant, batch
        e, self.n, self.k = half_shape(model, half)
        self.experts = e
        self.w, self.w_scale = weights
        # gate/up: a token's row feeds its 8 routed rows; down: each routed row its own
        self.top_k, self.mul_routed = (TOP_K, False) if half == "gateup" else (1, True)
        g = torch.Generator(device="cuda").manual_seed(SEED + batch)
        rows = batch if half == "gateup" else batch * TOP_K
        x = torch.randn(rows, self.k, generator=g, device="cuda").to(torch.bfloat16)
        self.a, self.a_scale = mc.quantize_act(x, quant)
        logits = torch.randn(batch, e, generator=g, device="cuda")
        top, ids = torch.topk(logits, TOP_K, dim=1)
        self.topk_ids = ids.to(torch.int32).contiguous()
        self.topk_weights = torch.softmax(top, dim=1).contiguous()
        self.c = torch.empty(batch, TOP_K, self.n, dtype=torch.bfloat16, device="cuda")
        counts = torch.bincount(self.topk_ids.reshape(-1).long(), minlength=e)
        self.touched = int((counts > 0).sum())
        self.most_rows = int(counts.max())
        self.aligned = {}   # BLOCK_SIZE_M -> moe_align result

    def launch(self, config):
        bm = config["BLOCK_SIZE_M"]
        if bm not in self.aligned:
            self.aligned[bm] = mc.moe_align(self.topk_ids, bm, self.experts)
        return sglang_launch(self.a, self.w, self.c, self.a_scale, self.w_scale,
                             self.topk_weights, self.topk_ids, *self.aligned[bm],
                             self.mul_routed, self.top_k, config, self.quant)

    def work(self):
        """(flop, weight bytes read at least once) of the routed rows and touched experts."""
        flop = 2 * self.batch * TOP_K * self.n * self.k
        per_expert = {"bf16": 2 * self.n * self.k, "int4": self.n * self.k // 2}.get(
            self.quant, self.n * self.k)
        if self.w_scale is not None and self.w_scale.ndim > 1:
            per_expert += self.w_scale[0].numel() * self.w_scale.element_size()
        elif self.w_scale is not None:
            per_expert += self.w_scale.element_size()
        return flop, self.touched * per_expert

    def traffic(self):
        """(bytes read at least once: the weights and weight scales of work(), A and
        its scale; bytes written: C)."""
        read = self.work()[1] + self.a.numel() * self.a.element_size()
        if self.a_scale is not None:
            read += self.a_scale.numel() * self.a_scale.element_size()
        return read, self.c.numel() * self.c.element_size()

    def record(self, config_name, ms, **extra):
        flop, nbytes = self.work()
        rec = dict(kernel="moe_gate_up" if self.half == "gateup" else "moe_down", half=self.half,
                   model=self.model, quant=self.quant, batch=self.batch,
                   config=config_name, ms=ms, flop=flop, weight_bytes=nbytes,
                   experts=self.touched, tflops=flop / ms / 1e9 if ms else None,
                   gbps=nbytes / ms / 1e6 if ms else None)
        rec.update(extra)
        return rec


def tile_text(config):
    return "{BLOCK_SIZE_M}x{BLOCK_SIZE_N}x{BLOCK_SIZE_K} g{GROUP_SIZE_M} w{num_warps} " \
           "s{num_stages}".format(**config)


# -----------------------------------------------------------------------------
# The SM120 search
# -----------------------------------------------------------------------------


def sm120_smem(config, quant):
    """sm_120 shared memory of a configuration: the measured formula; int4 (not
    measured) counted as A bf16 + packed B bytes per stage plus one bf16 B tile."""
    bm, bn, bk = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]
    if quant == "int4":
        return (config["num_stages"] - 1) * (bm * bk * 2 + bk * bn) + bk * bn * 2
    return mc.smem_formula(config, quant)


# --grid quick, by the most rows of one expert: (up to that many rows, BLOCK_SIZE_M,
# BLOCK_SIZE_N, BLOCK_SIZE_K, warps, stages); GROUP_SIZE_M 1 below 64 rows, else 16
QUICK = ((16, (16,), (64, 128), (128, 256), (4,), (2, 3, 4)),
         (128, (16, 32, 64), (64, 128), (64, 128), (4, 8), (3,)),
         (None, (64, 128), (128, 256), (64, 128), (8,), (2, 3)))


def candidates(quant, grid, most_rows):
    """The configurations searched for a case whose busiest expert has `most_rows`
    rows: the full grid, or the quick one."""
    if grid == "quick":
        _, bms, bns, bks, ws, sts = next(q for q in QUICK if q[0] is None or most_rows <= q[0])
        space = ((bm, bn, bk, 1 if bm < 64 else 16, w, st)
                 for bm, bn, bk, w, st in itertools.product(bms, bns, bks, ws, sts))
    else:
        space = itertools.product((16, 32, 64, 128), (64, 128, 256), (64, 128, 256), (1, 16, 32),
                                  (4, 8), (2, 3, 4, 5))
    out = []
    for bm, bn, bk, gm, w, s in space:
        cfg = mc._cfg(bm, bn, bk, gm, w, s)
        if quant == "fp8_block" and mc.FP8_BLOCK_SHAPE[1] % bk:
            continue   # a K tile must lie in one scale group
        if sm120_smem(cfg, quant) <= SMEM_BUDGET:
            out.append(cfg)
    return out


def _encode(launch):
    """A picklable description of a launch for a compile worker: the kernel by
    name (SGLang RELEASE's), tensors by dtype (the JIT specialises on dtype and
    16-byte alignment only), other arguments by value, compute_type by name."""
    args = [("tensor", str(a.dtype).replace("torch.", "")) if torch.is_tensor(a) else ("value", a)
            for a in launch.args]
    kwargs = dict(launch.kwargs)
    assert kwargs["compute_type"] == tl.bfloat16, "the launches here compute in bf16"
    kwargs["compute_type"] = ("tl", "bfloat16")
    return (RELEASE, launch.kernel.__name__, launch.grid, args, kwargs)


def _spec_key(job):
    """What the JIT's cache key depends on: ints by (== 1, % 16 == 0), the rest as is."""
    release, name, _, args, kwargs = job
    sig = tuple((t, v) if t == "tensor" or not isinstance(v, int) or isinstance(v, bool)
                else ("int", v == 1, v % 16 == 0) for t, v in args)
    return (release, name, sig, tuple(sorted((k, str(v)) for k, v in kwargs.items())))


def _compile_worker(job):
    """In a worker process: compile one launch (no launch) into the Triton cache."""
    release, name, grid, args, kwargs = job
    kernel = getattr(oracle_moe.sglang_module(release), name)
    real = [torch.empty(64, dtype=getattr(torch, v), device="cuda") if t == "tensor" else v
            for t, v in args]
    kw = dict(kwargs)
    kw["compute_type"] = getattr(tl, kw["compute_type"][1])
    try:
        return True, kernel.warmup(*real, grid=grid, **kw).metadata.shared
    except Exception as e:  # noqa: BLE001  (a configuration Triton rejects: skipped)
        return False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def precompile(jobs, n_procs):
    """Compile the distinct launches of `jobs` in parallel; {spec key: (ok, smem or error)}."""
    distinct = {}
    for job in jobs:
        distinct.setdefault(_spec_key(job), job)
    keys = list(distinct)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(n_procs) as pool:
        results = pool.map(_compile_worker, [distinct[k] for k in keys], chunksize=1)
    return dict(zip(keys, results))


def search(case, cands, compiled, timer):
    """Time every candidate that compiled; the best (ms, config, smem, timed count, the
    TOP_KEEP fastest configurations)."""
    limit = max(16, triton.next_power_of_2(case.most_rows))
    scores = []
    for cfg in cands:
        if cfg["BLOCK_SIZE_M"] > limit:
            continue
        launch = case.launch(cfg)
        ok, smem = compiled.get(_spec_key(_encode(launch)), (True, None))
        if not ok:
            continue
        try:
            ms = timer(launch.run, SEARCH_REPLAYS)
        except Exception as e:  # noqa: BLE001  (does not run here: skipped)
            print(f"# {case.model} {case.quant} M={case.batch} {tile_text(cfg)}: "
                  f"{type(e).__name__}", file=sys.stderr)
            continue
        scores.append((ms, cfg, smem))
    scores.sort(key=lambda s: s[0])
    final = [(timer(case.launch(cfg).run, REPLAYS), cfg, smem) for _, cfg, smem in
             scores[:FINALISTS]]
    final.sort(key=lambda s: s[0])
    top = [cfg for _, cfg, _ in final] + [cfg for _, cfg, _ in scores[FINALISTS:TOP_KEEP]]
    return (*final[0], len(scores), top) if final else (None, None, None, len(scores), [])


def retime(case, configs, timer):
    """Time each of `configs` again; the best (ms, config), (None, None) if none runs."""
    best = (None, None)
    for cfg in configs:
        try:
            ms = timer(case.launch(cfg).run, REPLAYS)
        except Exception as e:  # noqa: BLE001  (does not run here: skipped)
            print(f"# {case.model} {case.quant} M={case.batch} {tile_text(cfg)}: "
                  f"{type(e).__name__}", file=sys.stderr)
            continue
        if best[0] is None or ms < best[0]:
            best = (ms, cfg)
    return best


# -----------------------------------------------------------------------------


def grouped_mm_ms(case, timer):
    """torch._grouped_mm over the rows permuted by expert (bf16 only)."""
    flat = case.topk_ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    a = case.a[order // case.top_k].contiguous()                # [M*8, K], grouped by expert
    offs = torch.cumsum(torch.bincount(flat, minlength=case.experts), 0).to(torch.int32)
    b = case.w.transpose(1, 2)                                  # [E, K, N] (column-major)
    return timer(lambda: torch._grouped_mm(a, b, offs=offs))


def parse(argv):
    opts = {"--quant": "fp8_tensor,bf16", "--models": ",".join(mc.MODELS),
            "--halves": ",".join(HALVES),
            "--batches": "1,16,512,4096", "--grid": "full",
            "--jobs": str(min(16, os.cpu_count() or 1)), "--retime": ""}
    rest = list(argv)
    for opt in list(opts):
        if opt in rest:
            i = rest.index(opt)
            opts[opt] = rest[i + 1]
            del rest[i:i + 2]
    if len(rest) != 1 or rest[0] not in CONFIGS:
        return None
    split = lambda s: [x for x in s.replace(" ", ",").split(",") if x]  # noqa: E731
    return dict(config=rest[0], quants=split(opts["--quant"]), models=split(opts["--models"]),
                halves=split(opts["--halves"]),
                batches=[int(b) for b in split(opts["--batches"])], grid=opts["--grid"],
                jobs=int(opts["--jobs"]), retime=opts["--retime"])


def main(argv):
    o = parse(argv)
    if not o or any(q not in mc.QUANTS for q in o["quants"]) or \
            any(m not in mc.MODELS for m in o["models"]) or \
            any(h not in HALVES for h in o["halves"]) or \
            (o["retime"] and o["config"] != "sm120"):
        print(__doc__)
        return 2
    config = o["config"]
    tops = {}
    if o["retime"]:
        for line in open(o["retime"]):
            r = json.loads(line)
            tops[(r["model"], r["half"], r["quant"], r["batch"])] = r.get("top") or []
    models = o["models"]
    hidden = os.environ.get("SM120SHIM_HIDDEN_SIZE")
    if config == "rerouted" and hidden:
        models = [m for m in models if str(mc.MODELS[m][1]) == hidden]
    searching = config == "sm120" and not o["retime"]
    green = None
    if os.environ.get("SM120_BENCH_SMS"):
        green, sms = green_stream(int(os.environ["SM120_BENCH_SMS"]))
    timer = Timer(green)
    probe = Probe() if config == "limit" else None

    def groups():
        """Per model, half and quantisation (one weight tensor): its cases."""
        for model in models:
            for half in o["halves"]:
                for quant in o["quants"]:
                    if config == "grouped_mm" and quant != "bf16":
                        continue
                    e, n, k = half_shape(model, half)
                    g = torch.Generator(device="cuda").manual_seed(SEED)
                    weights = make_weight(e, n, k, quant, g, "cuda")
                    yield [Case(model, half, quant, m, weights) for m in o["batches"]]

    def emit(rec):
        if green:
            rec["sms"] = sms
        print(json.dumps(rec), flush=True)

    def measure(case, compiled):
        if config in ("hopper", "rerouted"):
            cfg = mc.CONFIGS[case.quant]
            launch = case.launch(cfg)
            try:
                smem = launch.warmup().metadata.shared
                return case.record(config, timer(launch.run), tile=tile_text(cfg), smem=smem)
            except Exception as e:  # noqa: BLE001  (e.g. over this GPU's limit)
                return case.record(config, None, tile=tile_text(cfg), error=f"{type(e).__name__}: {e}")
        if config == "sm120" and o["retime"]:
            top = tops.get((case.model, case.half, case.quant, case.batch), [])
            ms, cfg = retime(case, top, timer)
            return case.record(config, ms, tile=tile_text(cfg) if cfg else None, retimed=len(top))
        if config == "sm120":
            ms, cfg, smem, n, top = search(case, candidates(case.quant, o["grid"], case.most_rows),
                                           compiled, timer)
            return case.record(config, ms, tile=tile_text(cfg) if cfg else None, smem=smem,
                               candidates=n, top=top)
        if config == "limit":
            read, written = case.traffic()
            return case.record(config, timer(probe.launcher(read, written)),
                               probe_bytes=[read, written], tile=None)
        try:
            return case.record(config, grouped_mm_ms(case, timer), tile=None)
        except Exception as e:  # noqa: BLE001  (not available in this torch)
            return case.record(config, None, error=f"{type(e).__name__}: {e}")

    if searching:
        # every case's weights at once (about 20 GB), so that one pool compiles all candidates
        every = [c for group in groups() for c in group]
        jobs = [_encode(c.launch(cfg)) for c in every
                for cfg in candidates(c.quant, o["grid"], c.most_rows)
                if cfg["BLOCK_SIZE_M"] <= max(16, triton.next_power_of_2(c.most_rows))]
        compiled = precompile(jobs, o["jobs"])
        for case in every:
            emit(measure(case, compiled))
        return 0
    for cases in groups():
        for case in cases:
            emit(measure(case, {}))
        del cases
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

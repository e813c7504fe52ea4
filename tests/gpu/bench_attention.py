"""bench_attention.py - one configuration of the attention benchmark (GPU).

The kernels are the frameworks' own, from their released packages in
$SM120_ORACLE (default $SM120_BUILD/oracle; tests/oracle/fetch.sh), each
launched by the framework's own host function (as test_reroute.py launches
them): SGLang 0.5.14's extend_attention_fwd -> `_fwd_kernel` (rule
sglang-extend-2026-03) and vLLM 0.33.0's decode_attention_fwd ->
`_fwd_grouped_kernel_stage1` (vllm-mla-decode-2026-06) and
`_fwd_kernel_stage2`.

Run as: python3 bench_attention.py CONFIG [KV]
  hopper    the Hopper configuration the shim reroutes (SGLang extend MLA
            32x64, its tiles for compute capability 9; vLLM FP8 decode, 2
            stages), run natively on the Hopper GPU
  sm120     the configuration a user would pick instead on SM120 (SGLang's
            own SM120 branch, its tiles for compute capability 12: extend
            32x32; vLLM FP8 decode with 1 stage, set in the launch vLLM's
            host function makes, which fixes 2); run it with
            DISABLE_MMA_V3=1 so that Triton keeps to the instructions SM120
            has (no wgmma)
  rerouted  the Hopper configuration under `sm120 run --mode reroute
            --target sm120`: the launches run on the bundled kernels
KV (bf16 or fp8_e4m3) limits the run to the extend cases of that KV cache
dtype (and runs the decode cases, which are FP8, only for fp8_e4m3): under
the shim, SM120SHIM_KV_CACHE_DTYPE must match the cache of every extend launch.
Prints one JSON object per case: name, config, milliseconds (median of 10
CUDA graph replays, so launch costs on the CPU are not counted), the work done (FLOP for extend: the causal score
and value products actually needed; bytes of KV cache read for decode).
tests/gpu/bench.sh runs every configuration and prints the table.
"""
import json
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import frameworks  # noqa: E402

HEADS = 8            # Kimi K2 at TP8: 8 local q heads, one 576-wide MLA kv head
PAGE = 64
EXTEND_RELEASE = "0.5.14"   # SGLang (sglang-extend-2026-03: k/v scales, no LSE)
DECODE_RELEASE = "0.33.0"   # vLLM (vllm-mla-decode-2026-06: page strides)
DECODE_FILE = "vllm/v1/attention/ops/triton_decode_attention.py"
# the compute capability SGLang picks its extend tiles by, per configuration
CAPABILITY = {"hopper": (9, 0), "rerouted": (9, 0), "sm120": (12, 0)}
KV_DTYPES = {"bf16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn}

EXTEND_CASES = [      # (sequences, prefix tokens, extend tokens)
    (4, 8192, 2048),
    (16, 4096, 512),
    (64, 2048, 256),
    (4, 16384, 4096),
]
DECODE_CASES = [      # (sequences, context tokens)
    (1, 32768),
    (32, 8192),
    (256, 4096),
]


def timed(fn):
    """Median milliseconds of 10 replays of @fn captured in a CUDA graph.

    The graph keeps the CPU cost of launching (Python, Triton's launcher, the
    shim) out of the figure, which at decode sizes would otherwise dominate:
    this times the kernels.  Three eager calls first compile and, under the
    shim, load the bundled kernels (never during capture).
    """
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            fn()
    times = []
    for _ in range(10):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def eager(fn):
    """Milliseconds per call of 20 back-to-back eager calls: launch costs included."""
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(20):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / 20


class Stages:
    """Stands for a framework's @triton.jit kernel, so that its host function
    launches through it with num_stages replaced by @stages."""

    def __init__(self, fn, stages):
        self.fn, self.stages = fn, stages

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            return self.fn[grid](*args, **dict(kwargs, num_stages=self.stages))
        return launch

    def __getattr__(self, name):
        return getattr(self.fn, name)


def extend_module(config):
    """SGLang EXTEND_RELEASE's extend_attention module, choosing its tiles as on
    the configuration's compute capability."""
    mod = frameworks.load_sglang_extend(EXTEND_RELEASE)
    mod.CUDA_CAPABILITY = CAPABILITY[config]
    return mod


def decode_module(stages):
    """vLLM DECODE_RELEASE's triton_decode_attention module; stage 1 with
    @stages pipeline stages (None: vLLM's own choice)."""
    mod = frameworks.load("vllm", DECODE_RELEASE, DECODE_FILE)
    if stages:
        mod._fwd_grouped_kernel_stage1 = Stages(mod._fwd_grouped_kernel_stage1, stages)
    return mod


def num_kv_splits_for(max_seq_len, sm_count):
    """vLLM TRITON_MLA's split count: next_pow2(max(1, len // 512)), at most 2 per SM."""
    return min(triton.next_power_of_2(max(1, max_seq_len // 512)), 2 * sm_count)


def extend_case(mod, batch, prefix, extend, kv, gen):
    dev = "cuda"
    slots = batch * prefix + 1
    tokens = batch * extend
    kbuf = (torch.randn(slots, 1, 576, generator=gen, device=dev) * 0.5).to(KV_DTYPES[kv])
    q = torch.randn(tokens, HEADS, 576, generator=gen, device=dev).to(torch.bfloat16)
    k = torch.randn(tokens, 1, 576, generator=gen, device=dev).to(torch.bfloat16)
    o = torch.empty(tokens, HEADS, 512, dtype=torch.bfloat16, device=dev)
    qo = torch.arange(0, tokens + 1, extend, dtype=torch.int32, device=dev)
    kvp = torch.arange(0, batch * prefix + 1, prefix, dtype=torch.int32, device=dev)
    idx = torch.randperm(slots - 1, generator=gen, device=dev) + 1
    args = dict(q_extend=q, k_extend=k, v_extend=k[..., :512], o_extend=o, k_buffer=kbuf,
                v_buffer=kbuf[..., :512], qo_indptr=qo, kv_indptr=kvp, kv_indices=idx,
                custom_mask=None, is_causal=True, mask_indptr=None, max_len_extend=extend,
                k_scale=1.0, v_scale=1.0, sm_scale=192**-0.5)
    ms = timed(lambda: mod.extend_attention_fwd(**args))
    rows = batch * HEADS * extend
    keys = prefix + (extend + 1) / 2                    # causal: row i sees prefix + i + 1
    return ms, rows * keys * (576 + 512) * 2


def decode_case(mod, batch, ctx, gen):
    dev = "cuda"
    pages_per = triton.cdiv(ctx, PAGE)
    pages = batch * pages_per + 1
    cache = (torch.randn(pages, PAGE, 1, 576, generator=gen, device=dev) * 0.5).to(
        torch.float8_e4m3fn)
    table = (torch.randperm(pages - 1, generator=gen, device=dev) + 1).to(torch.int32)
    table = table.reshape(batch, pages_per)
    splits = num_kv_splits_for(ctx, torch.cuda.get_device_properties(0).multi_processor_count)
    args = dict(q=torch.randn(batch, HEADS, 576, generator=gen, device=dev).to(torch.bfloat16),
                k_buffer=cache, v_buffer=cache[..., :512],
                o=torch.empty(batch, HEADS, 512, dtype=torch.bfloat16, device=dev),
                lse=torch.empty(batch, HEADS, dtype=torch.bfloat16, device=dev),
                req_to_token=table,
                b_seq_len=torch.full((batch,), ctx, dtype=torch.int32, device=dev),
                attn_logits=torch.empty(batch, HEADS, splits, 513, dtype=torch.float32,
                                        device=dev),
                num_kv_splits=splits, sm_scale=192**-0.5, page_size=PAGE,
                k_scale=torch.tensor(0.05, device=dev), v_scale=torch.tensor(0.05, device=dev),
                is_mla=True)
    ms = timed(lambda: mod.decode_attention_fwd(**args))
    return ms, eager(lambda: mod.decode_attention_fwd(**args)), batch * ctx * 576  # FP8 bytes


def main(config, only_kv=None):
    gen = torch.Generator(device="cuda").manual_seed(1)
    extend_mod = extend_module(config)
    decode_mod = decode_module(1 if config == "sm120" else None)
    for kv in (only_kv,) if only_kv else ("bf16", "fp8_e4m3"):
        for batch, prefix, extend in EXTEND_CASES:
            ms, flop = extend_case(extend_mod, batch, prefix, extend, kv, gen)
            print(json.dumps(dict(kernel="extend", kv=kv, case=f"{batch}x{prefix}+{extend}",
                                  config=config, ms=ms, tflops=flop / ms / 1e9)), flush=True)
    for batch, ctx in DECODE_CASES if only_kv in (None, "fp8_e4m3") else ():
        ms, eager_ms, nbytes = decode_case(decode_mod, batch, ctx, gen)
        print(json.dumps(dict(kernel="decode", kv="fp8_e4m3", case=f"{batch}x{ctx}", config=config,
                              ms=ms, eager_ms=eager_ms, gbps=nbytes / ms / 1e6)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)

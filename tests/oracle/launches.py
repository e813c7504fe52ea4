"""launches.py - the frameworks' own kernels, compiled by Triton without a GPU,
as the launch events the shim would log, so that `sm120 route` can say what
the shim decides for each (tests/scripts/test_oracle_cli.sh).

    python3 tests/oracle/launches.py OUT_DIR

For each case below, the framework's own host function (from its released
package, tests/oracle/fetch.sh) runs on stand-in tensors: shapes, strides,
dtypes and distinct addresses, no data.  Its kernel launches are caught at
Triton's JIT: each is compiled by Triton's own specialisation for the
target architecture named by $SM120_ORACLE_ARCH (120 or 90; a stub driver
answers the target, nothing touches a GPU), and written out as
  OUT_DIR/<case>.<kernel>.cubin       the cubin Triton built
  OUT_DIR/<case>.jsonl                one "launch" event per launch: the
                                      kernel name, its dynamic shared memory
                                      (Triton's metadata), grid, block, the
                                      runtime arguments' bytes ("args", in
                                      Triton's order, its two scratch
                                      pointers last), the settings the case
                                      deploys with, what Triton compiled into
                                      the kernel ("compiled": the Python
                                      hook's describe() of the CompiledKernel,
                                      as the shim logs it), mode reroute,
                                      target sm120
  OUT_DIR/expect.tsv                  case, kernel, rule, bundled kernel the
                                      shim must choose ("-": the launch fits
                                      and must pass; "!": it must be refused),
                                      a text the reason must contain (may be
                                      empty), and 1 when the decision depends
                                      on the compiled facts (0: the same
                                      without them)
The parameter sizes are not written: the test takes them from the cubin with
`sm120 scan`, so Triton's own dropping of parameters is what is matched.
"""
import json
import os
import struct
import sys
import types

import functools

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "shim", "python"))
import frameworks  # noqa: E402
from sm120shim_hook import describe  # noqa: E402  (the shim's own, not a copy)


# ---------------------------------------------------------------- stand-in torch

class DType:
    def __init__(self, name, size):
        self.name, self.itemsize = name, size

    def __str__(self):
        return "torch." + self.name

    __repr__ = __str__


DTYPES = {n: DType(n, s) for n, s in [("float8_e4m3fn", 1), ("uint8", 1), ("bfloat16", 2),
                                     ("float16", 2),
                                     ("float32", 4), ("int32", 4), ("int64", 8)]}
_next_address = [0x7f0000000000]


class Tensor:
    """What the frameworks' host code and Triton's specialisation read of a
    tensor: shape, strides, dtype, device, and an address (256-aligned,
    distinct per allocation, as the caching allocator gives)."""

    def __init__(self, shape, dtype, strides=None, ptr=None):
        self.shape = tuple(shape)
        self.dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
        if strides is None:
            strides, acc = [], 1
            for d in reversed(self.shape):
                strides.insert(0, acc)
                acc *= d
        self._strides = tuple(strides)
        if ptr is None:
            ptr = _next_address[0]
            size = 1 + sum((d - 1) * s for d, s in zip(self.shape, self._strides))
            _next_address[0] += (size * self.dtype.itemsize + 0xFFFF) & ~0xFF
        self._ptr = ptr
        self.device = "cuda"

    @property
    def ndim(self):
        return len(self.shape)

    def stride(self, i=None):
        return self._strides if i is None else self._strides[i]

    def data_ptr(self):
        return self._ptr

    def size(self, i=None):
        return self.shape if i is None else self.shape[i]

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def element_size(self):
        return self.dtype.itemsize

    def narrow_last(self, n):
        """t[..., :n], a view."""
        return Tensor(self.shape[:-1] + (n,), self.dtype, self._strides, self._ptr)

    def unsqueeze(self, dim):
        shape, strides = list(self.shape), list(self._strides)
        dim = dim if dim >= 0 else len(shape) + dim + 1
        shape.insert(dim, 1)
        strides.insert(dim, strides[dim] * shape[dim + 1] if dim < len(strides) else 1)
        return Tensor(shape, self.dtype, strides, self._ptr)


def stub_torch(capability):
    """A torch module with what the frameworks' host code reads; the device
    reports compute capability @capability (SGLang picks its tiles by it)."""
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(get_device_capability=lambda *a: capability,
                                       is_available=lambda: True)
    torch.__dict__.update(DTYPES)
    torch.Tensor = Tensor
    torch.dtype = DType
    torch.tensor = lambda v, dtype=None, device=None: Tensor((), dtype or DTYPES["float32"])
    torch.empty = lambda *shape, dtype=None, device=None: Tensor(
        shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape,
        dtype or DTYPES["float32"])
    sys.modules.setdefault("torch", torch)
    packaging = types.ModuleType("packaging")
    version = types.ModuleType("packaging.version")

    def parse(s):
        return tuple(int(x) for x in s.split("+")[0].split(".")[:3] if x.isdigit())
    version.parse = parse
    packaging.version = version
    sys.modules.setdefault("packaging", packaging)
    sys.modules.setdefault("packaging.version", version)


# ---------------------------------------------------------------- stub driver

def install_stub_driver(arch):
    """Triton's active driver answers target cuda:@arch, device 0, stream 0."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    class StubDriver:
        def get_current_target(self):
            return GPUTarget("cuda", arch, 32)

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

        def get_active_torch_device(self):
            return "cuda"

        def get_device_interface(self):
            raise RuntimeError("no GPU: stub driver")

    driver.set_active(StubDriver())


class Catch:
    """Stands for a @triton.jit kernel: fn[grid](...) compiles (warmup) and records."""

    def __init__(self, fn, sink):
        self.fn, self.sink = fn, sink

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            kernel = self.fn.run(*args, grid=grid, warmup=True, **kwargs)
            _, _, _, _, binder = self.fn.device_caches[0]
            bound, spec, _ = binder(*args, **kwargs)
            self.sink.append((self.fn.__name__, grid(bound) if callable(grid) else grid, bound,
                              spec, kernel))
        return launch

    def __getattr__(self, name):
        return getattr(self.fn, name)


PACK = {"i1": "<b", "i8": "<b", "i16": "<h", "i32": "<i", "i64": "<q", "u1": "<B", "u8": "<B",
        "u16": "<H", "u32": "<I", "u64": "<Q", "fp16": "<e", "fp32": "<f", "fp64": "<d"}


def arg_bytes(ty, value):
    """A runtime argument's bytes as the launcher packs them."""
    if ty.startswith("*"):
        return struct.pack("<Q", value.data_ptr() if hasattr(value, "data_ptr") else 0)
    if ty == "bf16":
        return struct.pack("<f", float(value))[2:]
    return struct.pack(PACK[ty], float(value) if ty.startswith("fp") else int(value))


def event(name, grid, bound, spec, kernel, settings):
    args = [arg_bytes(ty, v).hex() for (ty, _), v in zip(spec, bound.values())
            if ty != "constexpr"]
    args += [struct.pack("<Q", 0).hex()] * 2  # global_scratch, profile_scratch
    grid = tuple(grid) + (1,) * (3 - len(grid))
    return {"event": "launch", "kernel": name, "mode": "reroute", "target": "sm120",
            "static_smem": 0, "dynamic_smem": kernel.metadata.shared,
            "grid": list(grid), "block": [kernel.metadata.num_warps * 32, 1, 1],
            "args": args, "settings": settings, "compiled": describe(kernel)}


# ---------------------------------------------------------------- cases

def vllm_mla_decode(release, batch, heads, page, splits, lens_max, act="bfloat16", settings=None,
                    logit_cap=0.0):
    """vLLM TRITON_MLA decode as TritonMLAImpl.forward_mqa calls it: FP8 cache
    [pages, page, 1, 576], V its first 512 channels, IS_MLA; q and o of dtype
    @act.  @settings replaces the deployment's (page_size = vLLM's --block-size).
    0.23.0 (vllm-mla-decode-2026-03) passes no page strides, 0.33.0 does."""
    mod = frameworks.load("vllm", release, "vllm/v1/attention/ops/triton_decode_attention.py")
    sink = []
    mod._fwd_grouped_kernel_stage1 = Catch(mod._fwd_grouped_kernel_stage1, sink)
    mod._fwd_kernel_stage2 = Catch(mod._fwd_kernel_stage2, sink)
    pages = batch * ((lens_max + page - 1) // page) + 1
    cache = Tensor((pages, page, 576), "float8_e4m3fn").unsqueeze(2)
    q = Tensor((batch, heads, 576), act)
    o = Tensor((batch, heads, 512), act)
    lse = Tensor((batch, heads), "float32")
    table = Tensor((batch, (lens_max + page - 1) // page), "int32")
    lens = Tensor((batch,), "int32")
    logits = Tensor((batch, heads, splits, 513), "float32")
    ks, vs = Tensor((), "float32"), Tensor((), "float32")
    mod.decode_attention_fwd(q, cache, cache.narrow_last(512), o, lse, table, lens, logits, splits,
                             0.1171, page, logit_cap=logit_cap, k_scale=ks, v_scale=vs,
                             is_mla=True)
    return sink, {"page_size": str(page)} if settings is None else settings


def sglang_extend(release, kv, batch, heads, prefix, extend, act="bfloat16", qo="int32",
                  settings=None, **variant):
    """SGLang's MLA absorbed extend attention as its Triton backend calls it:
    q [tokens, heads, 576]; k the [tokens, 1, 576] latent, v its first 512
    channels; the cache [slots, 1, 576] with V its first 512 channels.  @kv:
    bf16, fp16 or fp8_e4m3; q, k, v and o of dtype @act; qo_indptr of dtype
    @qo (int64 as SGLang 0.5.23's host builds it).  @settings replaces the
    deployment's (kv_cache_dtype = @kv).  @variant: extend_attention_fwd's
    logit_cap, sliding_window_size, is_causal or sinks (True: a [heads]
    fp32 tensor); 0.5.23 also takes k_scale and v_scale (0.73, 1.37)."""
    mod = frameworks.load_sglang_extend(release)
    sink = []
    mod._fwd_kernel = Catch(mod._fwd_kernel, sink)
    tokens, slots = batch * extend, batch * (prefix + extend) + 7
    cache_dtype = {"fp8_e4m3": "float8_e4m3fn", "bf16": "bfloat16", "fp16": "float16"}[kv]
    k = Tensor((tokens, 1, 576), act)
    buf = Tensor((slots, 1, 576), cache_dtype)
    causal = variant.pop("is_causal", True)
    if variant.pop("sinks", False):
        variant["sinks"] = Tensor((heads,), "float32")
    scales = () if release in ("0.5.8", "0.5.9") else (0.73, 1.37)
    mod.extend_attention_fwd(
        Tensor((tokens, heads, 576), act), k, k.narrow_last(512),
        Tensor((tokens, heads, 512), act), buf, buf.narrow_last(512),
        Tensor((batch + 1,), qo), Tensor((batch + 1,), "int32"),
        Tensor((batch * prefix,), "int64"), None, causal, None, extend, *scales, sm_scale=0.1171,
        **variant)
    return sink, {"kv_cache_dtype": kv} if settings is None else settings


# SGLang's default FP8 configuration: the one every release before 2026-06-23
# picks when no tuned file names the GPU.
SGLANG_FP8_DEFAULT = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, GROUP_SIZE_M=32,
                          num_warps=8, num_stages=4)


def tuned(bm, bn, bk, gm, warps, stages):
    """A tuned config file's bucket, as the frameworks read it."""
    return dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=gm,
                num_warps=warps, num_stages=stages)


def arch():
    """The architecture Triton compiles for ($SM120_ORACLE_ARCH)."""
    return int(os.environ.get("SM120_ORACLE_ARCH", "120"))


def moe_weights(quant, experts, n, k):
    """B, B's scale and the routing of a fused-MoE launch: B [E, N, K] in FP8
    (bf16 for "bf16"), its scale per tensor [E], per channel [E, N, 1] or per
    128x128 block [E, N/128, K/128]; "int4"/"int4_zp": gptq/awq INT4."""
    if quant in ("int4", "int4_zp"):
        # gptq/awq INT4 W4A16, group 32: two weights a byte [E, N, K/2], bf16
        # scales [E, N, K/32]
        return Tensor((experts, n, k // 2), "uint8"), Tensor((experts, n, k // 32), "bfloat16")
    b = Tensor((experts, n, k), "bfloat16" if quant == "bf16" else "float8_e4m3fn")
    b_scale = {"bf16": None,
               "fp8_tensor": Tensor((experts,), "float32"),
               "fp8_channel": Tensor((experts, n, 1), "float32"),
               "fp8_block": Tensor((experts, (n + 127) // 128, (k + 127) // 128), "float32")}[quant]
    return b, b_scale


def sglang_moe(release, quant, tokens, experts, top_k, n, k, down=False, act="bfloat16",
               settings=None, config=None):
    """SGLang's invoke_fused_moe_kernel at @config (a tuned bucket; default
    SGLANG_FP8_DEFAULT: 128x256x128, GROUP_SIZE_M 32, 8 warps, 4 stages), on
    the routing buffers moe_align_block_size gives (EM = tokens x top_k +
    experts x (BLOCK_SIZE_M - 1)).  @quant: "fp8_block" (128x128 block
    scales), "fp8_channel" (per-channel weights, per-token activations:
    per_channel_quant), "fp8_tensor", "bf16", or "int4" / "int4_zp"
    (fused_moe_kernel_gptq_awq, group 32, without / with zero points).
    @down: the down projection
    as fused_experts launches it (one row per routed token, top_k 1 compiled
    in, the routed weight applied), N then being the hidden size.  @act: the
    model's dtype (hidden states and output; SGLang's compute_type follows
    it).  @settings replaces the deployment's (top_k, hidden_size as sm120
    run --model sets them).  On sm_90 SGLang swaps the dot of small FP8
    tiles (is_sm90_supported).  The activation quantizers are host
    functions: stand-ins return FP8 activations and their scales in
    SGLang's shapes."""
    frameworks.STUBS["sglang"]()
    group = lambda a, block_k: (Tensor(a.shape, "float8_e4m3fn"),
                                Tensor((a.shape[0], (a.shape[1] + block_k - 1) // block_k),
                                       "float32"))
    for pkg in ("sglang.srt.layers.quantization", "sglang.kernels.ops.quantization"):
        quant_mod = sys.modules[pkg + ".fp8_kernel"]
        quant_mod.scaled_fp8_quant = lambda a, scale=None, use_per_token_if_dynamic=False: (
            Tensor(a.shape, "float8_e4m3fn"),
            Tensor((a.shape[0], 1) if use_per_token_if_dynamic else (1,), "float32"))
        quant_mod.sglang_per_token_group_quant_fp8 = quant_mod.per_token_group_quant_fp8 = group
        int8 = sys.modules[pkg + ".int8_kernel"]
        int8.per_token_group_quant_int8 = int8.per_token_quant_int8 = None
        int8.sglang_per_token_group_quant_int8 = None
    mod = frameworks.load("sglang", release, frameworks.sglang_moe_path(release))
    sink = []
    mod.fused_moe_kernel = Catch(mod.fused_moe_kernel, sink)
    mod.fused_moe_kernel_gptq_awq = Catch(mod.fused_moe_kernel_gptq_awq, sink)
    mod.is_sm90_supported = lambda: arch() == 90
    config = dict(config or SGLANG_FP8_DEFAULT)
    em = tokens * top_k + experts * (config["BLOCK_SIZE_M"] - 1)
    int4 = quant.startswith("int4")
    block = [0, 32] if int4 else [128, 128] if quant == "fp8_block" else None
    rows = tokens * top_k if down else tokens
    b, b_scale = moe_weights(quant, experts, n, k)
    zp = Tensor((experts, n // 2, k // 32), "uint8") if quant == "int4_zp" else None
    mod.invoke_fused_moe_kernel(
        Tensor((rows, k), act), b, None,
        Tensor((tokens, top_k, n), act), None, b_scale, zp,
        Tensor((tokens, top_k), "float32"), Tensor((tokens, top_k), "int32"),
        Tensor((em,), "int32"), Tensor((em // config["BLOCK_SIZE_M"],), "int32"),
        Tensor((1,), "int32"), down, 1 if down else top_k, config, tl_dtype(act),
        quant.startswith("fp8"), False, False, int4, quant == "fp8_channel", block_shape=block)
    return sink, ({"top_k": str(top_k), "hidden_size": str(n if down else k)}
                  if settings is None else settings)


def vllm_moe(release, quant, tokens, experts, top_k, n, k, config, naive=False, settings=None,
             down=False, modular=False):
    """vLLM's invoke_fused_moe_triton_kernel (fused_moe.py) at @config, a
    tuned bucket, as fused_experts_impl launches gate/up: bf16 activations
    quantized to FP8 by a stand-in (per 128-group scales [M, K/128] for
    "fp8_block", per token [M, 1] for "fp8_channel", one [1] for
    "fp8_tensor"), top_k @top_k, no routed weight; with @modular as the
    modular TritonExperts does (topk_weights None); with @down the down
    launch (one row per routed token, top_k 1, the routed weight applied).
    The routing is
    moe_align_block_size's (EM = tokens x top_k + experts x (BLOCK_SIZE_M -
    1)), or with @naive vLLM's small-batch assignment (sorted_token_ids None,
    expert_ids the flat topk_ids, taken when tokens x top_k x 4 <= experts)."""
    mod = frameworks.load_vllm_moe(release)
    sink = []
    mod.fused_moe_kernel = Catch(mod.fused_moe_kernel, sink)
    bm = config["BLOCK_SIZE_M"]
    em = tokens * top_k + experts * (bm - 1)
    block = [128, 128] if quant == "fp8_block" else None
    rows = tokens * top_k if down else tokens
    b, b_scale = moe_weights(quant, experts, n, k)
    a_scale = {"bf16": None, "fp8_tensor": Tensor((1,), "float32"),
               "fp8_channel": Tensor((rows, 1), "float32"),
               "fp8_block": Tensor((rows, (k + 127) // 128), "float32")}[quant]
    sorted_ids = None if naive else Tensor((em,), "int32")
    expert_ids = Tensor((tokens * top_k,), "int32") if naive else Tensor((em // bm,), "int32")
    import triton.language as tl
    mod.invoke_fused_moe_triton_kernel(
        Tensor((rows, k), "bfloat16" if quant == "bf16" else "float8_e4m3fn"), b,
        Tensor((tokens, top_k, n), "bfloat16"), a_scale, b_scale,
        None if modular and not down else Tensor((tokens, top_k), "float32"),
        sorted_ids, expert_ids, Tensor((1,), "int32"), down, 1 if down else top_k, dict(config),
        tl.bfloat16, quant != "bf16", False, False, False, quant == "fp8_channel",
        block_shape=block)
    return sink, ({"top_k": str(top_k), "hidden_size": str(n if down else k)}
                  if settings is None else settings)


def tl_dtype(name):
    """The Triton dtype SGLang passes as compute_type for a model of dtype @name."""
    import triton.language as tl
    return {"bfloat16": tl.bfloat16, "float16": tl.float16}[name]


# name: (function, arguments, {kernel: (rule, bundled kernel[, text of the
# reason]), or one such tuple per architecture}); rule "-": the launch must
# pass (it fits); "!": it must be refused.  Every launch carries the compiled
# facts, as under the shim with the Python hook.
with_ = functools.partial
CASES = {
    "vllm-0.33.0-decode-kimi-tp8": (vllm_mla_decode, ("0.33.0", 5, 8, 16, 16, 4099),
                                    {"_fwd_grouped_kernel_stage1": ("vllm-mla-decode-2026-06",
                                                                    "attn_decode_mla_fp8"),
                                     "_fwd_kernel_stage2": ("-", "-")}),
    "vllm-0.33.0-decode-dsv3-tp8-page64": (vllm_mla_decode, ("0.33.0", 3, 16, 64, 8, 1000),
                                           {"_fwd_grouped_kernel_stage1": ("vllm-mla-decode-2026-06",
                                                                           "attn_decode_mla_fp8"),
                                            "_fwd_kernel_stage2": ("-", "-")}),
    # vLLM 0.23.0, the last release of vllm-mla-decode-2026-03's line: k_scale /
    # v_scale, IS_MLA (102400 B on sm_120 and sm_90), no page strides.
    "vllm-0.23.0-decode-kimi-tp8": (vllm_mla_decode, ("0.23.0", 5, 8, 16, 16, 4099),
                                    {"_fwd_grouped_kernel_stage1": ("vllm-mla-decode-2026-03",
                                                                    "attn_decode_mla_fp8"),
                                     "_fwd_kernel_stage2": ("-", "-")}),
    "vllm-0.23.0-decode-dsv3-tp8-page64": (vllm_mla_decode, ("0.23.0", 3, 16, 64, 8, 1000),
                                           {"_fwd_grouped_kernel_stage1": ("vllm-mla-decode-2026-03",
                                                                           "attn_decode_mla_fp8"),
                                            "_fwd_kernel_stage2": ("-", "-")}),
    # Before 2026-01-29 SGLang picks 32x64 for MLA on capability >= 9, SM120's
    # 12.0 included: 106496 B, the crash users reported.
    "sglang-0.5.8-extend-kimi-tp8-bf16": (sglang_extend, ("0.5.8", "bf16", 3, 8, 300, 1000),
                                          {"_fwd_kernel": ("sglang-extend-2025-08",
                                                           "attn_extend_mla576_bf16")}),
    # 0.5.9 has SGLang's SM120 tiles (capability 12: 71680 B, fits): only the
    # emulation on Hopper (capability 9) launches 106496 B.
    "sglang-0.5.9-extend-kimi-tp8-bf16": (sglang_extend, ("0.5.9", "bf16", 2, 8, 77, 333),
                                          {"_fwd_kernel": {120: ("-", "-"),
                                                           90: ("sglang-extend-2025-08",
                                                                "attn_extend_mla576_bf16")}}),
    # Kimi K2 at TP8: 384 experts, top_k 8, hidden 7168, gate/up N = 2 x 2048 / 8.
    "sglang-0.5.9-moe-kimi-tp8-gateup-fp8block-m512": (
        sglang_moe, ("0.5.9", "fp8_block", 512, 384, 8, 512, 7168),
        {"fused_moe_kernel": ("sglang-moe-2026-03", "moe_gemm_fp8_m16")}),
    "sglang-0.5.9-moe-kimi-tp8-down-fp8block-m512": (
        sglang_moe, ("0.5.9", "fp8_block", 512, 384, 8, 7168, 256, True),
        {"fused_moe_kernel": ("sglang-moe-2026-03", "moe_gemm_fp8_m16")}),
    # GLM-4.7 at TP8: 160 routed experts, top_k 8, hidden 5120, gate/up N = 2 x
    # 1536 / 8; SGLang fuses the shared expert in (161 experts, top_k 9, as
    # sm120 run --model then sets).
    "sglang-0.5.9-moe-glm-tp8-gateup-fp8tensor-m2048": (
        sglang_moe, ("0.5.9", "fp8_tensor", 2048, 161, 9, 384, 5120),
        {"fused_moe_kernel": ("sglang-moe-2026-03", "moe_gemm_fp8_m64")}),
    # These releases read an FP8 cache without k_scale/v_scale: not verified, refused.
    "sglang-0.5.9-extend-kimi-tp8-fp8": (sglang_extend, ("0.5.9", "fp8_e4m3", 2, 8, 77, 333),
                                         {"_fwd_kernel": {120: ("-", "-"), 90: ("!", "-")}}),
    # SGLang 0.5.23 (sglang-extend-main: + LSE, k/v scales, page strides,
    # compact_batch_size, Aux0): 32x32 on capability 12 (fits), 32x64 under
    # the emulation; an FP8 cache with k_scale 0.73, v_scale 1.37.
    "sglang-0.5.23-extend-kimi-tp8-fp8": (sglang_extend, ("0.5.23", "fp8_e4m3", 2, 8, 77, 333),
                                          {"_fwd_kernel": {120: ("-", "-"),
                                                           90: ("sglang-extend-main",
                                                                "attn_extend_mla576_fp8")}}),
    # One release of each signature between: 0.5.14 (sglang-extend-2026-03:
    # + k_scale, v_scale), 0.5.15 (-2026-06-29: + LSE, page strides), 0.5.17
    # (-2026-07-10: + Aux0) and 0.5.18 (-main: + compact_batch_size).
    "sglang-0.5.14-extend-kimi-tp8-fp8": (sglang_extend, ("0.5.14", "fp8_e4m3", 2, 8, 77, 333),
                                          {"_fwd_kernel": {120: ("-", "-"),
                                                           90: ("sglang-extend-2026-03",
                                                                "attn_extend_mla576_fp8")}}),
    "sglang-0.5.15-extend-kimi-tp8-bf16": (sglang_extend, ("0.5.15", "bf16", 2, 8, 77, 333),
                                           {"_fwd_kernel": {120: ("-", "-"),
                                                            90: ("sglang-extend-2026-06-29",
                                                                 "attn_extend_mla576_bf16")}}),
    "sglang-0.5.17-extend-kimi-tp8-fp8": (sglang_extend, ("0.5.17", "fp8_e4m3", 2, 8, 77, 333),
                                          {"_fwd_kernel": {120: ("-", "-"),
                                                           90: ("sglang-extend-2026-07-10",
                                                                "attn_extend_mla576_fp8")}}),
    "sglang-0.5.18-extend-kimi-tp8-bf16": (sglang_extend, ("0.5.18", "bf16", 2, 8, 77, 333),
                                           {"_fwd_kernel": {120: ("-", "-"),
                                                            90: ("sglang-extend-main",
                                                                 "attn_extend_mla576_bf16")}}),
    # 0.5.23 at batch 1 compiles compact_batch_size (1) in, so its runtime
    # list is also -2026-07-10's; the facts name it among the arguments
    # Triton compiled in (compiled_args), which that rule does not list.
    "sglang-0.5.23-extend-kimi-tp8-fp8-batch1": (sglang_extend, ("0.5.23", "fp8_e4m3", 1, 8, 77, 333),
                                                 {"_fwd_kernel": {120: ("-", "-"),
                                                                  90: ("sglang-extend-main",
                                                                       "attn_extend_mla576_fp8")}}),
    # SGLang's fused_moe_kernel_gptq_awq, INT4 W4A16 group 32, at the default
    # tile 128x256x128, 8 warps, 4 stages (163840 B on sm_120, 196608 B on sm_90);
    # with zero points it is refused: Triton then compiles stride_bzk (1) in,
    # and the rule's signature, which passes the zero-point strides, does not apply.
    "sglang-0.5.9-moe-kimi-tp8-gateup-int4-m512": (
        sglang_moe, ("0.5.9", "int4", 512, 384, 8, 512, 7168),
        {"fused_moe_kernel_gptq_awq": ("sglang-moe-gptq-awq", "moe_gemm_w4a16_d128_r16_sl")}),
    "sglang-0.5.9-moe-kimi-tp8-gateup-int4zp-m512": (
        sglang_moe, ("0.5.9", "int4_zp", 512, 384, 8, 512, 7168),
        {"fused_moe_kernel_gptq_awq": ("!", "-", "stride_bzk")}),
    # SGLang 0.5.23's fused_moe_kernel (+ add_mask_ptr; PDL on sm_90 and
    # later), block FP8 at the default tile.  add_mask_ptr is None here (as in
    # every launch the rules can take), so the runtime list is also
    # sglang-moe-2026-03's; the facts name add_mask_ptr among the arguments
    # Triton compiled in, which that rule does not list, so sglang-moe-main
    # takes it and its values (FUSE_SWIGLU, MASK_OUTPUT, ...) are checked.
    "sglang-0.5.23-moe-kimi-tp8-gateup-fp8block-m512": (
        sglang_moe, ("0.5.23", "fp8_block", 512, 384, 8, 512, 7168),
        {"fused_moe_kernel": ("sglang-moe-main", "moe_gemm_fp8_m16")}),
    # vLLM's down launch at the bf16 tile 128x256x64, 8 warps, 4 stages
    # (147456 B on sm_120, 196608 B on sm_90), GLM-4.7 at TP8 (hidden 5120).
    "vllm-0.33.0-moe-glm-tp8-down-bf16-m2048": (
        with_(vllm_moe, down=True),
        ("0.33.0", "bf16", 2048, 160, 8, 5120, 192, tuned(128, 256, 64, 32, 8, 4)),
        {"fused_moe_kernel": ("vllm-moe-main", "moe_gemm_bf16_m64")}),
    # ... and at the FP8 tile 128x256x128 per channel (per-token activation
    # scales [rows, 1], weight scales [E, N, 1]); SGLang 0.5.9 at the bf16 tile.
    "vllm-0.33.0-moe-glm-tp8-down-fp8chan-m2048": (
        with_(vllm_moe, down=True),
        ("0.33.0", "fp8_channel", 2048, 160, 8, 5120, 192, tuned(128, 256, 128, 32, 8, 4)),
        {"fused_moe_kernel": ("vllm-moe-main", "moe_gemm_fp8_m32")}),
    "sglang-0.5.9-moe-kimi-tp8-gateup-bf16-m512": (
        with_(sglang_moe, config=tuned(128, 256, 64, 32, 8, 4)),
        ("0.5.9", "bf16", 512, 384, 8, 512, 7168),
        {"fused_moe_kernel": ("sglang-moe-2026-03", "moe_gemm_bf16_m32")}),
    # --- what the compiled facts change (rules/AUDIT.md F1-F3): each case from
    # here on decides otherwise without them (FACTS_DECIDE) ---
    # F1: GLM-4.7 with SGLang's fused shared expert compiles top_k 9; with the
    # facts no SM120SHIM_TOP_K is needed, and the model's num_experts_per_tok
    # (8) set by hand is refused, naming both (2048 tokens: read with 8, every
    # routed row would take another token's activations).
    "sglang-0.5.9-moe-glm-tp8-gateup-fp8tensor-m2048-no-settings": (
        with_(sglang_moe, settings={}), ("0.5.9", "fp8_tensor", 2048, 161, 9, 384, 5120),
        {"fused_moe_kernel": ("sglang-moe-2026-03", "moe_gemm_fp8_m64")}),
    "sglang-0.5.9-moe-glm-tp8-gateup-fp8tensor-m2048-topk8": (
        with_(sglang_moe, settings={"top_k": "8", "hidden_size": "5120"}),
        ("0.5.9", "fp8_tensor", 2048, 161, 9, 384, 5120),
        {"fused_moe_kernel": ("!", "-", "compiled with top_k 9 but SM120SHIM_TOP_K=8")}),
    # ... and its down launch (top_k 1 compiled in) needs neither setting
    "sglang-0.5.9-moe-glm-tp8-down-fp8tensor-m2048-no-settings": (
        with_(sglang_moe, down=True, settings={}),
        ("0.5.9", "fp8_tensor", 2048, 161, 9, 5120, 192),
        {"fused_moe_kernel": ("sglang-moe-2026-03", "moe_gemm_fp8_m32")}),
    # F3: an fp16 model (compute_type fp16, fp16 output) is refused, not
    # written as bf16 bits; the same for fp16 attention.
    "sglang-0.5.9-moe-kimi-tp8-gateup-fp8block-m512-fp16": (
        with_(sglang_moe, act="float16"), ("0.5.9", "fp8_block", 512, 384, 8, 512, 7168),
        {"fused_moe_kernel": ("!", "-", "compute_type fp16")}),
    "sglang-0.5.8-extend-kimi-tp8-fp16": (
        with_(sglang_extend, act="float16", settings={}), ("0.5.8", "fp16", 3, 8, 300, 1000),
        {"_fwd_kernel": ("!", "-", "Q_Extend is *fp16")}),
    "vllm-0.33.0-decode-kimi-tp8-fp16": (
        with_(vllm_mla_decode, act="float16"), ("0.33.0", 5, 8, 16, 16, 4099),
        {"_fwd_grouped_kernel_stage1": ("!", "-", "Q is *fp16"),
         "_fwd_kernel_stage2": ("-", "-")}),
    # F3: the KV cache dtype is the kernel's; no setting is needed, and a
    # setting that disagrees is refused.
    "sglang-0.5.8-extend-kimi-tp8-bf16-no-settings": (
        with_(sglang_extend, settings={}), ("0.5.8", "bf16", 3, 8, 300, 1000),
        {"_fwd_kernel": ("sglang-extend-2025-08", "attn_extend_mla576_bf16")}),
    "sglang-0.5.8-extend-kimi-tp8-bf16-setting-fp8": (
        with_(sglang_extend, settings={"kv_cache_dtype": "fp8_e4m3"}),
        ("0.5.8", "bf16", 3, 8, 300, 1000),
        {"_fwd_kernel": ("!", "-", "SM120SHIM_KV_CACHE_DTYPE=fp8_e4m3")}),
    # F2: qo_indptr as SGLang's Triton backend builds it from 0.5.10 on (int64),
    # through the real 0.5.9 kernel (which loads whatever width it is given):
    # the facts type it *i64 and attn_extend reads it so (ATTN_EXTEND_QO_I64).
    "sglang-0.5.9-extend-kimi-tp8-bf16-qo-int64": (
        with_(sglang_extend, qo="int64"), ("0.5.9", "bf16", 2, 8, 77, 333),
        {"_fwd_kernel": {120: ("-", "-"), 90: ("sglang-extend-2025-08",
                                               "attn_extend_mla576_bf16")}}),
    # PAGE_SIZE is the kernel's: no setting needed, a disagreeing one refused.
    "vllm-0.33.0-decode-kimi-tp8-no-settings": (
        with_(vllm_mla_decode, settings={}), ("0.33.0", 5, 8, 16, 16, 4099),
        {"_fwd_grouped_kernel_stage1": ("vllm-mla-decode-2026-06", "attn_decode_mla_fp8"),
         "_fwd_kernel_stage2": ("-", "-")}),
    "vllm-0.33.0-decode-kimi-tp8-page-setting-64": (
        with_(vllm_mla_decode, settings={"page_size": "64"}), ("0.33.0", 5, 8, 16, 16, 4099),
        {"_fwd_grouped_kernel_stage1": ("!", "-", "compiled with PAGE_SIZE 16 but "
                                        "SM120SHIM_PAGE_SIZE=64"),
         "_fwd_kernel_stage2": ("-", "-")}),
    # --- tile-generic rules: tuned buckets of real config files, rerouted at their
    # own configuration because the compiled facts give it (rules/fused_moe.json
    # "generic"); without the facts only the exact tiles are rerouted ---
    # SGLang 0.5.9 triton_3_5_1/E=161,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8,
    # per_channel_quant=True.json, bucket 4096: 64x256x128, 4 warps, 4 stages
    # (163840 B on sm_90: the refusal; 122880 B on sm_120), GLM-4.7 at TP8.
    "sglang-0.5.9-moe-glm-tp8-gateup-fp8chan-m4096-64x256x128": (
        with_(sglang_moe, config=tuned(64, 256, 128, 16, 4, 4)),
        ("0.5.9", "fp8_channel", 4096, 161, 9, 384, 5120),
        {"fused_moe_kernel": ("sglang-moe-2026-03", "moe_gemm_fp8_m64")}),
    # E=256,N=256,device_name=NVIDIA_B200,dtype=fp8_w8a8,block_shape=[128, 128].json,
    # bucket 8: BLOCK_SIZE_M 16 (105472 B on sm_120; swapped on sm_90: 140288 B),
    # DeepSeek-V3 at TP8 (256 experts, top_k 8, hidden 7168, gate/up N 512):
    # 64 routed rows, FP8's 16-row tile (the decode kernels take fewer than 48).
    "sglang-0.5.9-moe-dsv3-tp8-gateup-fp8block-m8-bm16": (
        with_(sglang_moe, config=tuned(16, 256, 128, 32, 8, 4)),
        ("0.5.9", "fp8_block", 8, 256, 8, 512, 7168),
        {"fused_moe_kernel": ("sglang-moe-2026-03", "moe_gemm_fp8_m16")}),
    # E=160,N=384,device_name=NVIDIA_B200,dtype=fp8_w8a8.json, bucket 3072:
    # BLOCK_SIZE_M 256, 256x64, 5 stages (131072 B on sm_120, 163840 B on sm_90).
    "sglang-0.5.9-moe-glm-tp8-gateup-fp8tensor-m3072-bm256": (
        with_(sglang_moe, config=tuned(256, 256, 64, 16, 8, 5)),
        ("0.5.9", "fp8_tensor", 3072, 160, 8, 384, 5120),
        {"fused_moe_kernel": ("sglang-moe-2026-03", "moe_gemm_fp8_m64")}),
    # vLLM 0.33 E=256,N=256,device_name=NVIDIA_B200,dtype=fp8_w8a8,block_shape=[128,128].json,
    # bucket 8 (16x256x128, 8 warps, 4 stages), DeepSeek-V3 at TP8 with 10 tokens
    # (10 x 8 x 4 > 256 experts: the aligned routing), through vLLM's own kernel:
    # 80 routed rows, FP8's 16-row tile.
    "vllm-0.33.0-moe-dsv3-tp8-gateup-fp8block-m10-bm16": (
        vllm_moe, ("0.33.0", "fp8_block", 10, 256, 8, 512, 7168, tuned(16, 256, 128, 32, 8, 4)),
        {"fused_moe_kernel": ("vllm-moe-main", "moe_gemm_fp8_m16")}),
    # ... with 4 tokens vLLM takes its naive small-batch assignment (sorted_token_ids
    # None, naive_block_assignment 1: 4 x 8 x 4 <= 256 experts): moe_gemm's row
    # mode, one routed row per block, with the facts only (rules/AUDIT.md).
    "vllm-0.33.0-moe-dsv3-tp8-gateup-fp8block-m4-naive": (
        with_(vllm_moe, naive=True),
        ("0.33.0", "fp8_block", 4, 256, 8, 512, 7168, tuned(16, 256, 128, 64, 8, 4)),
        {"fused_moe_kernel": ("vllm-moe-main", "moe_gemm_fp8_d16")}),
    # ... its down launch (top_k 1, the routed weight) and the modular gate/up
    # (topk_weights None as well)
    "vllm-0.33.0-moe-dsv3-tp8-down-fp8block-m4-naive": (
        with_(vllm_moe, naive=True, down=True),
        ("0.33.0", "fp8_block", 4, 256, 8, 7168, 256, tuned(16, 256, 128, 64, 8, 4)),
        {"fused_moe_kernel": ("vllm-moe-main", "moe_gemm_fp8_d128")}),
    "vllm-0.33.0-moe-dsv3-tp8-gateup-fp8block-m4-naive-modular": (
        with_(vllm_moe, naive=True, modular=True),
        ("0.33.0", "fp8_block", 4, 256, 8, 512, 7168, tuned(16, 256, 128, 64, 8, 4)),
        {"fused_moe_kernel": ("vllm-moe-main", "moe_gemm_fp8_d16")}),
    # Kimi K2 at TP8 decoding 12 tokens (12 x 8 x 4 <= 384 experts), bf16, at
    # E=512,N=1344 B200's bucket 4 (16x128x128, 4 warps, 4 stages: 110592 B on
    # sm_120, 147456 B on sm_90)
    "vllm-0.33.0-moe-kimi-tp8-gateup-bf16-m12-naive": (
        with_(vllm_moe, naive=True),
        ("0.33.0", "bf16", 12, 384, 8, 512, 7168, tuned(16, 128, 128, 1, 4, 4)),
        {"fused_moe_kernel": ("vllm-moe-main", "moe_gemm_bf16_d16")}),
    # BLOCK_SIZE_M 64: E=64,N=2560 H200 FP8 bucket 2 (64x256x128, 4 warps, 5
    # stages: 163840 B on sm_120, 204800 B on sm_90), per tensor and per channel
    "vllm-0.33.0-moe-e64-gateup-fp8tensor-m2-naive-bm64": (
        with_(vllm_moe, naive=True),
        ("0.33.0", "fp8_tensor", 2, 64, 8, 2560, 2048, tuned(64, 256, 128, 1, 4, 5)),
        {"fused_moe_kernel": ("vllm-moe-main", "moe_gemm_fp8_d32")}),
    "vllm-0.33.0-moe-e64-down-fp8chan-m2-naive-bm64": (
        with_(vllm_moe, naive=True, down=True),
        ("0.33.0", "fp8_channel", 2, 64, 8, 2048, 1280, tuned(64, 256, 128, 1, 4, 5)),
        {"fused_moe_kernel": ("vllm-moe-main", "moe_gemm_fp8_d64")}),
    # vLLM's modular gate/up (topk_weights None, F6a) with per-tensor FP8
    # (stride_bse 1, F6b) at the tile 128x256x128: rerouted only with the facts.
    "vllm-0.33.0-moe-glm-tp8-gateup-fp8tensor-m2048-modular": (
        with_(vllm_moe, modular=True),
        ("0.33.0", "fp8_tensor", 2048, 160, 8, 384, 5120, tuned(128, 256, 128, 32, 8, 4)),
        {"fused_moe_kernel": ("vllm-moe-main", "moe_gemm_fp8_m64")}),
    # A logit cap compiled in (rule value logit_cap 0): refused at load and at
    # launch with the facts; without them it is invisible to the launch.
    "sglang-0.5.9-extend-kimi-tp8-bf16-logit-cap": (
        with_(sglang_extend, logit_cap=30.0), ("0.5.9", "bf16", 2, 8, 77, 333),
        {"_fwd_kernel": {120: ("-", "-"), 90: ("!", "-", "logit_cap 30")}}),
    # ... and in vLLM 0.23.0's decode (102400 B either way): refused with the
    # facts; without them the launch looks like the rerouted one.
    "vllm-0.23.0-decode-kimi-tp8-logit-cap": (
        with_(vllm_mla_decode, logit_cap=30.0), ("0.23.0", 5, 8, 16, 16, 4099),
        {"_fwd_grouped_kernel_stage1": ("!", "-", "logit_cap 30"),
         "_fwd_kernel_stage2": ("-", "-")}),
}


# The cases whose decision depends on the compiled facts: every other case
# must decide the same when its events are replayed without them.  SGLang's
# extend rules from -2026-03 (0.5.10) on reroute only with the facts
# (needs_compiled_facts, rules/AUDIT.md F2): without them these sm_90
# launches are refused.  Without the facts SGLang 0.5.23's MoE launch is
# read as sglang-moe-2026-03's (add_mask_ptr dropped): the same plan under
# the older rule's name.
FACTS_DECIDE = set(list(CASES)[list(CASES).index(
    "sglang-0.5.9-moe-glm-tp8-gateup-fp8tensor-m2048-no-settings"):]) | {
    "sglang-0.5.23-extend-kimi-tp8-fp8", "sglang-0.5.14-extend-kimi-tp8-fp8",
    "sglang-0.5.15-extend-kimi-tp8-bf16", "sglang-0.5.17-extend-kimi-tp8-fp8",
    "sglang-0.5.18-extend-kimi-tp8-bf16", "sglang-0.5.23-extend-kimi-tp8-fp8-batch1",
    "sglang-0.5.23-moe-kimi-tp8-gateup-fp8block-m512"}


def main(out):
    arch = int(os.environ.get("SM120_ORACLE_ARCH", "120"))
    stub_torch((arch // 10, arch % 10))
    install_stub_driver(arch)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "expect.tsv"), "w") as expect:
        for case, (fn, args, want) in CASES.items():
            sink, settings = fn(*args)
            with open(os.path.join(out, case + ".jsonl"), "w") as log:
                for name, grid, bound, spec, kernel in sink:
                    with open(os.path.join(out, f"{case}.{name}.cubin"), "wb") as f:
                        f.write(kernel.asm["cubin"])
                    log.write(json.dumps(event(name, grid, bound, spec, kernel, settings)) + "\n")
            for name, outcome in want.items():
                rule, bundled, *reason = outcome.get(arch) if isinstance(outcome, dict) else outcome
                expect.write(f"{case}\t{name}\t{rule}\t{bundled}\t{''.join(reason)}\t"
                             f"{int(case in FACTS_DECIDE)}\n")
            print(f"# {case}: " + ", ".join(f"{n} {k.metadata.shared} B" for n, _, _, _, k in sink))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])

"""patch_kernels.py - the kernels that `sm120 patch` changes, compiled by
Triton for one architecture without a GPU, so that a patch is judged by the
shared memory Triton really gives the patched kernel, not by arithmetic.

    python3 tests/oracle/patch_kernels.py SITE_PACKAGES ARCH SITE...

SITE_PACKAGES holds an unpacked SGLang or vLLM release (its files only, not
installed); ARCH is 120 or 90: the stand-in torch reports that compute
capability (SGLang and vLLM pick their tiles by it) and a stub Triton driver
answers target cuda:ARCH (tests/oracle/launches.py), so nothing touches a GPU.
SITE is a patch site as patches/<framework>/<release line>/ names them, e.g.
sglang/extend-attention.  For each site the framework's own host function
runs on stand-in tensors at the shape that overflows SM120, its launches are
caught at Triton's JIT and compiled, and one line is printed per launch:

    SITE <tab> KERNEL <tab> SHARED_BYTES <tab> num_warps=W num_stages=S

Exit 0; 1 with a message naming the site or the file when one is unknown
or missing (a traceback when the framework's own code fails).
"""
import importlib.util
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import frameworks  # noqa: E402
import launches  # noqa: E402
from launches import Tensor  # noqa: E402


# ------------------------------------------------------- more stand-in torch

def _broadcast(a, b):
    """The shape of a elementwise-op b (either may be a plain number)."""
    sa = a.shape if isinstance(a, Tensor) else ()
    sb = b.shape if isinstance(b, Tensor) else ()
    n = max(len(sa), len(sb))
    sa, sb = (1,) * (n - len(sa)) + sa, (1,) * (n - len(sb)) + sb
    return tuple(max(x, y) for x, y in zip(sa, sb))


class Array(Tensor):
    """A stand-in tensor that also takes the elementwise arithmetic, views
    and copies of the host code of lightning attention: every result is a
    new allocation of the broadcast shape (only shapes and addresses matter)."""

    def _new(self, other=None, dtype=None):
        return Array(_broadcast(self, other), dtype or self.dtype)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _new

    def __neg__(self):
        return self._new()

    def contiguous(self):
        return self

    def is_contiguous(self):
        return True

    @property
    def nbytes(self):
        return self.numel() * self.dtype.itemsize

    def clone(self):
        return self._new()

    def dim(self):
        return self.ndim

    def reshape(self, *shape):
        shape = list(shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape)
        if -1 in shape:
            known = 1
            for d in shape:
                known *= d if d != -1 else 1
            shape[shape.index(-1)] = self.numel() // known
        return Array(shape, self.dtype, ptr=self.data_ptr())

    view = reshape

    def unsqueeze(self, dim):
        t = Tensor.unsqueeze(self, dim)
        return Array(t.shape, t.dtype, t.stride(), t.data_ptr())

    def __getitem__(self, key):
        """t[..., a:b]: a view of the last dimension."""
        if not (isinstance(key, tuple) and len(key) == 2 and key[0] is Ellipsis
                and isinstance(key[1], slice)):
            raise TypeError(f"stand-in tensor: index {key!r} not supported")
        start, stop, _ = key[1].indices(self.shape[-1])
        return Array(self.shape[:-1] + (stop - start,), self.dtype, self.stride(),
                     self.data_ptr() + start * self.dtype.itemsize)


def _shape(args):
    return args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args


def more_torch():
    """What the host code of the patched sites reads beyond launches.stub_torch."""
    torch = sys.modules["torch"]
    torch.empty = lambda *s, dtype=None, device=None: Array(_shape(s), dtype or torch.float32)
    torch.zeros = torch.empty
    torch.arange = lambda start, end=None, device=None, dtype=None: Array(
        (end - start if end is not None else start,), dtype or torch.int64)
    torch.exp = lambda t: t._new()
    torch.cat = lambda ts, dim=0: Array(
        ts[0].shape[:dim] + (sum(t.shape[dim] for t in ts),) + ts[0].shape[dim + 1:],
        ts[0].dtype)

    class Function:
        @classmethod
        def apply(cls, *args):
            return cls.forward(types.SimpleNamespace(save_for_backward=lambda *a: None), *args)
    torch.autograd = types.SimpleNamespace(Function=Function)
    torch.profiler = types.SimpleNamespace(record_function=lambda name: _Nothing())
    torch.Size = tuple
    torch.version = types.SimpleNamespace(cuda="13.0", hip=None)
    torch.dtype = launches.DType


class Skip:
    """Stands for a kernel that is not compiled: fn[grid](...) does nothing."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def stub(name, **attrs):
    """sys.modules[@name], created empty if missing, with @attrs set."""
    mod = sys.modules.setdefault(name, types.ModuleType(name))
    mod.__dict__.update(attrs)
    return mod


class Platform:
    """vllm.platforms.current_platform on an NVIDIA GPU of @capability."""

    def __init__(self, capability):
        self.capability = capability

    def is_cuda(self):
        return True

    def is_rocm(self):
        return False

    def is_device_capability_family(self, capability, device_id=0):
        return self.capability[0] == capability // 10


def stub_frameworks(capability):
    """The framework modules the patched files import, as on an NVIDIA GPU of
    @capability (frameworks.py's stubs, and what they lack)."""
    frameworks.STUBS["sglang"]()
    frameworks.STUBS["vllm"]()
    sm = lambda cap: (lambda: capability == cap)
    stub("vllm.platforms", current_platform=Platform(capability))
    stub("sglang.srt.utils", get_device_name=lambda *a: "NVIDIA RTX PRO 6000 Blackwell "
         "Server Edition" if capability[0] == 12 else "NVIDIA H200")
    stub("sglang.srt.utils.common", is_sm120=sm((12, 0)), is_sm121=sm((12, 1)))
    stub("sglang.srt.server_args", get_global_server_args=lambda: types.SimpleNamespace(
        enable_deterministic_inference=False))
    stub("sglang.kernels")
    stub("sglang.kernels.jit")
    stub("sglang.kernels.jit.utils", is_arch_support_pdl=lambda: False)
    stub("vllm.v1")
    stub("vllm.v1.attention")
    stub("vllm.v1.attention.backends")
    stub("vllm.v1.attention.backends.utils", PAD_SLOT_ID=-1)
    stub("einops", rearrange=lambda *a, **k: None)


# ------------------------------------------------------------------- loading

def load(root, paths):
    """The first of @paths (relative to @root) that exists, imported under a
    name of its own; exit 1 naming them all when none does."""
    for path in paths:
        file = os.path.join(root, path)
        if os.path.isfile(file):
            name = "patched_" + path.replace("/", "_").replace(".", "_")
            spec = importlib.util.spec_from_file_location(name, file)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
    sys.exit(f"patch_kernels.py: none of {', '.join(paths)} under {root}: "
             "unpack the release there first")


class Compile:
    """Stands for a @triton.jit kernel: fn[grid](...) compiles it for the
    stub driver's target (Triton's own specialisation, no launch) and
    records (kernel name, CompiledKernel) in @sink."""

    def __init__(self, fn, sink):
        self.fn, self.sink = fn, sink

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.sink.append((self.fn.__name__,
                              self.fn.run(*args, grid=grid, warmup=True, **kwargs)))
        return launch


def catch(mod, *names):
    """Replace kernels @names of @mod by Compile; returns their sink."""
    sink = []
    for name in names:
        setattr(mod, name, Compile(getattr(mod, name), sink))
    return sink


# --------------------------------------------------------------------- sites

SGL_ATTN = ["sglang/srt/layers/attention/triton_ops/", "sglang/kernels/ops/attention/"]


def sglang_extend_attention(root):
    """MLA absorbed extend (Kimi K2 at TP8, 8 local heads, a cached prefix):
    Lq 576, Lv 512, the case that needs 106496 B at 32x64."""
    mod = load(root, ["sglang/srt/layers/attention/triton_ops/extend_attention.py"])
    sink = catch(mod, "_fwd_kernel")
    batch, heads, prefix, extend = 2, 8, 77, 333
    tokens, slots = batch * extend, batch * (prefix + extend) + 7
    k = Tensor((tokens, 1, 576), "bfloat16")
    buf = Tensor((slots, 1, 576), "bfloat16")
    mod.extend_attention_fwd(
        Tensor((tokens, heads, 576), "bfloat16"), k, k.narrow_last(512),
        Tensor((tokens, heads, 512), "bfloat16"), buf, buf.narrow_last(512),
        Tensor((batch + 1,), "int32"), Tensor((batch + 1,), "int32"),
        Tensor((batch * prefix,), "int64"), None, True, None, extend, sm_scale=0.1171)
    return sink


def sglang_prefill_attention(root):
    """context_attention_fwd (vision towers, encoder prefill) at head size
    256 (192-256 need the most), 16 heads, GQA 2."""
    mod = load(root, [d + "prefill_attention.py" for d in SGL_ATTN])
    sink = catch(mod, "_fwd_kernel")
    for dim in (256,):
        tokens, heads, batch = 1000, 16, 3
        mod.context_attention_fwd(
            Tensor((tokens, heads, dim), "bfloat16"), Tensor((tokens, heads // 2, dim), "bfloat16"),
            Tensor((tokens, heads // 2, dim), "bfloat16"), Tensor((tokens, heads, dim), "bfloat16"),
            Tensor((batch,), "int32"), Tensor((batch,), "int32"), 512)
    return sink


def sglang_fused_moe_default_config(root):
    """The default FP8 per-tensor config get_default_config picks when no tuned
    file names the GPU (GLM-4.7 at TP8: 161 experts, top_k 9, N 384, hidden
    5120; 2048 tokens, so M > E: the case the patch changes), compiled into
    SGLang's fused_moe_kernel."""
    d = "sglang/srt/layers/moe/fused_moe_triton/"
    cfg = load(root, [d + "fused_moe_triton_config.py"])
    stub("sglang.srt.layers.quantization.fp8_kernel", per_token_group_quant_fp8=None,
         sglang_per_token_group_quant_fp8=None,
         scaled_fp8_quant=lambda a, scale=None, use_per_token_if_dynamic=False: (
             Tensor(a.shape, "float8_e4m3fn"), Tensor((1,), "float32")))
    stub("sglang.srt.layers.quantization.int8_kernel", per_token_group_quant_int8=None,
         per_token_quant_int8=None, sglang_per_token_group_quant_int8=None)
    kernels = load(root, [d + "fused_moe_triton_kernels.py"])
    sink = catch(kernels, "fused_moe_kernel")
    import triton.language as tl
    tokens, experts, top_k, n, k = 2048, 161, 9, 384, 5120
    for m in (tokens,):
        config = cfg.get_default_config(m, experts, n, k, top_k, "fp8_w8a8", False, None)
        em = m * top_k + experts * (config["BLOCK_SIZE_M"] - 1)
        kernels.invoke_fused_moe_kernel(
            Tensor((m, k), "bfloat16"), Tensor((experts, n, k), "float8_e4m3fn"), None,
            Tensor((m, top_k, n), "bfloat16"), None, Tensor((experts,), "float32"), None,
            Tensor((m, top_k), "float32"), Tensor((m, top_k), "int32"), Tensor((em,), "int32"),
            Tensor((em // config["BLOCK_SIZE_M"],), "int32"), Tensor((1,), "int32"), False,
            top_k, config, tl.bfloat16, True, False, False, False, False,
            block_shape=None)
    return sink


def sglang_inkling_moe_stages(root):
    """grouped_gemm_triton at its decode row block (16, the one the patch
    changes), bf16, 64 experts, N 1536, K 2048."""
    mod = load(root, ["sglang/kernels/ops/moe/inkling_moe.py"])
    sink = catch(mod, "_grouped_gemm_kernel")
    experts, n, k = 64, 1536, 2048
    for block_m, rows in ((mod.SMALL_M_BLOCK_SIZE_M, 64),):
        blocks = rows // block_m + experts
        mod.grouped_gemm_triton(
            Array((rows, k), "bfloat16"), Array((experts, n, k), "bfloat16"), experts,
            Tensor((experts,), "int32"), Tensor((experts + 1,), "int32"),
            Tensor((experts + 1,), "int32"), Array((blocks,), "int32"), block_size_m=block_m)
    return sink


def lightning_attention(paths):
    """The lightning attention site of the file at the first of @paths that exists."""
    def run(root):
        """lightning_attention (MiniMax-Text-01: 64 heads / TP8, head 128),
        a 1000-token prefill: the two kernels CBLOCK is given to."""
        mod = load(root, paths)
        mod._fwd_diag_kernel = mod._fwd_kv_reduce = Skip()
        sink = catch(mod, "_fwd_kv_parallel", "_fwd_none_diag_kernel")
        b, h, n, d = 1, 8, 1000, 128
        q, k, v = (Array((b, h, n, d), "float32") for _ in range(3))
        mod.lightning_attention(q, k, v, Array((h,), "float32"),
                                kv_history=Array((b, h, d, d), "float32"))
        return sink
    return run


def vllm_mla_decode_fp8_stages(root):
    """TRITON_MLA decode as TritonMLAImpl.forward_mqa calls it (Kimi K2 at TP8:
    8 heads, page 16), with an FP8 latent cache."""
    mod = load(root, ["vllm/v1/attention/ops/triton_decode_attention.py"])
    sink = catch(mod, "_fwd_grouped_kernel_stage1")
    mod._fwd_kernel_stage2 = Skip()  # unchanged by the patch: not compiled
    batch, heads, page, splits, lens_max = 5, 8, 16, 16, 4099
    for dtype in ("float8_e4m3fn",):
        pages = batch * ((lens_max + page - 1) // page) + 1
        cache = Tensor((pages, page, 576), dtype).unsqueeze(2)
        mod.decode_attention_fwd(
            Tensor((batch, heads, 576), "bfloat16"), cache, cache.narrow_last(512),
            Tensor((batch, heads, 512), "bfloat16"), Tensor((batch, heads), "float32"),
            Tensor((batch, (lens_max + page - 1) // page), "int32"), Tensor((batch,), "int32"),
            Tensor((batch, heads, splits, 513), "float32"), splits, 0.1171, page,
            k_scale=Tensor((), "float32"), v_scale=Tensor((), "float32"), is_mla=True)
    return sink


# One row per patch site: the function that launches its kernels.
SITES = {
    "sglang/extend-attention": sglang_extend_attention,
    "sglang/prefill-attention": sglang_prefill_attention,
    "sglang/fused-moe-default-config": sglang_fused_moe_default_config,
    "sglang/inkling-moe-stages": sglang_inkling_moe_stages,
    "sglang/lightning-attn": lightning_attention(
        ["sglang/srt/layers/attention/linear/lightning_attn.py",
         "sglang/kernels/ops/attention/linear/lightning_attn.py"]),
    "vllm/mla-decode-fp8-stages": vllm_mla_decode_fp8_stages,
    "vllm/lightning-attn": lightning_attention(["vllm/model_executor/layers/lightning_attn.py"]),
}


def main(argv):
    if len(argv) < 4 or argv[2] not in ("120", "90"):
        sys.exit(__doc__)
    root, arch, sites = argv[1], int(argv[2]), argv[3:]
    for site in sites:
        if site not in SITES:
            sys.exit(f"patch_kernels.py: unknown site {site}; known: {', '.join(SITES)}")
    launches.stub_torch((arch // 10, arch % 10))
    more_torch()
    launches.install_stub_driver(arch)
    stub_frameworks((arch // 10, arch % 10))
    for site in sites:
        for name, kernel in SITES[site](root):
            md = kernel.metadata
            print(f"{site}\t{name}\t{md.shared}\tnum_warps={md.num_warps} "
                  f"num_stages={md.num_stages}")


if __name__ == "__main__":
    main(sys.argv)

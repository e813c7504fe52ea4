"""frameworks.py - import one of the frameworks' own Triton kernel files from a
released package unpacked by tests/oracle/fetch.sh, without installing the
framework: the few framework modules such a file imports are stubbed with what
its kernels need (a CUDA platform, triton and triton.language).  The
caller provides torch (the real one on a GPU machine; tests/oracle/launches.py
a stand-in).

    mod = frameworks.load("vllm", "0.33.0", "vllm/v1/attention/ops/triton_decode_attention.py")

The oracle directory is $SM120_ORACLE (default $SM120_BUILD/oracle, build/oracle).  A missing
release raises FileNotFoundError naming the command that fetches it.
"""
import importlib.util
import os
import sys
import types


def oracle_dir():
    """$SM120_ORACLE, else the build directory's oracle/ ($SM120_BUILD or build)."""
    return os.environ.get("SM120_ORACLE",
                          os.path.join(os.environ.get("SM120_BUILD", "build"), "oracle"))


class _CudaPlatform:
    """vllm.platforms.current_platform as on an NVIDIA GPU."""

    def is_rocm(self):
        return False

    def is_cuda(self):
        return True


def _stub(name, **attrs):
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    sys.modules.setdefault(name, mod)
    return sys.modules[name]


def _stub_vllm():
    import triton
    import triton.language as tl

    _stub("vllm")
    _stub("vllm.platforms", current_platform=_CudaPlatform())
    _stub("vllm.triton_utils", tl=tl, triton=triton)


def _stub_sglang():
    """What SGLang's Triton attention and MoE files import: the CUDA checks,
    the prefill kernel (another file, not loaded) and the activation
    quantizers (host functions: a caller that runs on stand-in tensors sets
    them, see tests/oracle/launches.py)."""
    _stub("sglang")
    _stub("sglang.srt")
    _stub("sglang.srt.utils", is_cuda=lambda: True, is_hip=lambda: False, is_cpu=lambda: False,
          cpu_has_amx_support=lambda: False, get_bool_env_var=lambda *a, **k: False,
          is_sm90_supported=lambda: False)
    _stub("sglang.srt.batch_invariant_ops", is_batch_invariant_mode_enabled=lambda: False)
    _stub("sglang.srt.layers.quantization")
    for name in ("fp8_kernel", "int8_kernel"):
        _stub(f"sglang.srt.layers.quantization.{name}")
    _stub("sglang.srt.layers.moe")
    _stub("sglang.srt.layers.moe.fused_moe_triton")
    _stub("sglang.srt.layers")
    _stub("sglang.srt.layers.attention")
    _stub("sglang.srt.layers.attention.triton_ops")
    _stub("sglang.srt.layers.attention.triton_ops.prefill_attention",
          context_attention_fwd=None)


STUBS = {"vllm": _stub_vllm, "sglang": _stub_sglang}


def load(name, version, path):
    """The module at @path inside release @name @version, imported under a
    name of its own (two releases can be loaded side by side)."""
    file = os.path.join(oracle_dir(), f"{name}-{version}", path)
    if not os.path.isfile(file):
        raise FileNotFoundError(f"{file} is missing: run `sh tests/oracle/fetch.sh "
                                f"{oracle_dir()}` where the package registry is reachable")
    STUBS[name]()
    modname = f"oracle_{name}_{version}_{os.path.splitext(os.path.basename(path))[0]}"
    modname = modname.replace(".", "_").replace("-", "_")
    spec = importlib.util.spec_from_file_location(modname, file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

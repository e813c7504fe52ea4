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


class _EnvUnset:
    """An entry of sglang.srt.environ.envs that is not set: .get() gives False."""

    def get(self):
        return False


class _Envs:
    def __getattr__(self, name):
        return _EnvUnset()


def _capability_major():
    import torch
    return torch.cuda.get_device_capability()[0]


def _stub_sglang():
    """What SGLang's Triton attention and MoE files import: the CUDA checks,
    the prefill kernel (another file, not loaded), the environment (every
    SGLANG_* variable unset), PDL on Hopper and later (0.5.23's
    is_arch_support_pdl) and the activation quantizers (host functions: a
    caller that runs on stand-in tensors sets them, see
    tests/oracle/launches.py).  0.5.23 moved the kernels to sglang.kernels."""
    _stub("sglang")
    _stub("sglang.srt")
    _stub("sglang.srt.utils", is_cuda=lambda: True, is_hip=lambda: False, is_cpu=lambda: False,
          cpu_has_amx_support=lambda: False, get_bool_env_var=lambda *a, **k: False,
          is_sm90_supported=lambda: False, is_gfx95_supported=lambda: False,
          is_gfx1250_supported=lambda: False, get_device_core_count=lambda *a: 132)
    _stub("sglang.srt.environ", envs=_Envs())
    _stub("sglang.srt.batch_invariant_ops", is_batch_invariant_mode_enabled=lambda: False)
    _stub("sglang.srt.layers.quantization")
    for name in ("fp8_kernel", "int8_kernel"):
        _stub(f"sglang.srt.layers.quantization.{name}")
    _stub("sglang.srt.layers.moe.utils", get_moe_padding_size=lambda aiter: 0)
    _stub("sglang.kernels")
    _stub("sglang.kernels.jit")
    _stub("sglang.kernels.jit.utils", is_arch_support_pdl=lambda: _capability_major() >= 9)
    _stub("sglang.kernels.ops")
    _stub("sglang.kernels.ops.attention")
    _stub("sglang.kernels.ops.moe")
    _stub("sglang.kernels.ops.quantization")
    for name in ("fp8_kernel", "int8_kernel"):
        _stub(f"sglang.kernels.ops.quantization.{name}")
    _stub("sglang.srt.layers.moe")
    _stub("sglang.srt.layers.moe.fused_moe_triton")
    _stub("sglang.srt.layers")
    _stub("sglang.srt.layers.attention")
    _stub("sglang.srt.layers.attention.triton_ops")
    _stub("sglang.srt.layers.attention.triton_ops.prefill_attention",
          context_attention_fwd=None)
    _stub("sglang.kernels.ops.attention.prefill_attention", context_attention_fwd=None)


STUBS = {"vllm": _stub_vllm, "sglang": _stub_sglang}


def load_vllm_moe(version):
    """vLLM @version's fused_moe.py, with the host helpers it imports that
    invoke_fused_moe_triton_kernel does not reach stubbed; the swap of small
    FP8 tiles is vLLM's own rule (capability 9.0, enable_swap_ab), the
    tensor-descriptor path off (VLLM_TRITON_USE_TD unset, not XPU)."""
    import logging
    _stub_vllm()
    env = types.SimpleNamespace(VLLM_BATCH_INVARIANT=False, VLLM_TUNED_CONFIG_FOLDER=None,
                                VLLM_TRITON_USE_TD=None)

    def enable_swap_ab(bm, bn):
        import torch
        return tuple(torch.cuda.get_device_capability()) == (9, 0) and bm < 64 and bn >= 64
    mods = {
        "vllm.envs": vars(env),
        "vllm._custom_ops": {},
        "vllm.logger": {"init_logger": logging.getLogger},
        "vllm.model_executor": {}, "vllm.model_executor.layers": {},
        "vllm.model_executor.layers.fused_moe": {},
        "vllm.model_executor.layers.fused_moe.modular_kernel": {},
        "vllm.model_executor.layers.fused_moe.activation": {
            "MoEActivation": types.SimpleNamespace(SILU="silu"), "apply_moe_activation": None},
        "vllm.model_executor.layers.fused_moe.config": {
            "FUSED_MOE_UNQUANTIZED_CONFIG": None, "FusedMoEQuantConfig": object,
            "_get_config_dtype_str": None},
        "vllm.model_executor.layers.fused_moe.moe_align_block_size": {"moe_align_block_size": None},
        "vllm.model_executor.layers.fused_moe.utils": {
            "enable_swap_ab": enable_swap_ab, "moe_kernel_quantize_input": None,
            "resolve_moe_use_td": lambda: False,
            "warn_if_moe_use_td_ineffective": lambda *a, **k: None},
        "vllm.triton_utils.allocation": {"set_triton_allocator": None},
        "vllm.utils": {}, "vllm.utils.math_utils": {"next_power_of_2": None},
        "vllm.utils.platform_utils": {"get_device_name_as_file_name": None},
        "vllm.utils.torch_utils": {"direct_register_custom_op": lambda **k: None},
    }
    for name, attrs in mods.items():
        mod = sys.modules.setdefault(name, types.ModuleType(name))
        mod.__dict__.update(attrs)
        parent, _, child = name.rpartition(".")
        setattr(sys.modules[parent], child, mod)
    return load("vllm", version, "vllm/model_executor/layers/fused_moe/fused_moe.py")


def load(name, version, path, package=False):
    """The module at @path inside release @name @version, imported under a
    name of its own (two releases can be loaded side by side); with
    @package also under its package name (sglang.kernels.ops.attention.
    decode_attention), for a file of the same release that imports it."""
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
    if package:
        sys.modules[os.path.splitext(path)[0].replace("/", ".")] = mod
    return mod


# Where SGLang keeps its Triton attention files: srt/layers/attention/triton_ops/
# up to 0.5.15, kernels/ops/attention/ from 0.5.16.
SGLANG_ATTENTION_DIRS = ("sglang/srt/layers/attention/triton_ops/", "sglang/kernels/ops/attention/")


def load_sglang_extend(version):
    """SGLang @version's extend_attention module, with the files of the same
    release it imports from, where it has them (decode_attention from 0.5.15,
    score_mod from 0.5.16), loaded first under their package names."""
    for base in SGLANG_ATTENTION_DIRS:
        if os.path.isfile(os.path.join(oracle_dir(), f"sglang-{version}", base,
                                       "extend_attention.py")):
            break
    for dep in ("score_mod.py", "decode_attention.py"):
        if os.path.isfile(os.path.join(oracle_dir(), f"sglang-{version}", base, dep)):
            load("sglang", version, base + dep, package=True)
    return load("sglang", version, base + "extend_attention.py")


def sglang_moe_path(version):
    """Where SGLang @version keeps fused_moe_triton_kernels.py (moved in 0.5.23)."""
    if version in ("0.5.8", "0.5.9"):
        return "sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_kernels.py"
    return "sglang/kernels/ops/moe/fused_moe_triton_kernels.py"

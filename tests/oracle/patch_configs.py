"""patch_configs.py - the frameworks' own fused-MoE config lookup, run on a
site-packages tree without a GPU, to check what `sm120 patch configs` wrote.

    python3 tests/oracle/patch_configs.py FRAMEWORK SITE_PACKAGES MODEL_DIR TP
        [--no-fusion] --device NAME [--device NAME...] M...

FRAMEWORK is sglang or vllm; SITE_PACKAGES holds its release unpacked (the
files tests/oracle/packages.txt lists).  For each batch size M the
framework's try_get_optimal_moe_config runs on the expert weight shapes its
fused-MoE layer has for the model at MODEL_DIR (config.json) and tensor
parallel size TP, on a GPU that names itself NAME (each --device in turn),
and one line is printed:

    NAME <tab> M <tab> the config file it opened, or "default" <tab> the configuration (JSON)

What runs is the framework's code: SGLang's config module is imported
whole (fused_moe_triton_config.py: the file name, the triton_X_Y_Z directory
of the installed Triton, SGLANG_MOE_CONFIG_DIR, the fallback over other
Triton versions) with its get_device_name taken from sglang/srt/utils/
common.py; vLLM's fused_moe.py imports half of vLLM, so its
get_config_file_name, get_moe_configs and try_get_optimal_moe_config are
taken out of the file (ast) and run with vLLM's own envs.py (for
VLLM_TUNED_CONFIG_FOLDER), get_device_name_as_file_name
(vllm/utils/platform_utils.py) and _get_config_dtype_str (fused_moe/config.py).
Stubbed: torch (a device named DEVICE_NAME), the framework's server
arguments (defaults), the runtime override get_config (none), and the
default configuration used when no file is found (reported as "default").
The lookups' caches (lru_cache on get_moe_configs and vLLM's device name)
are cleared before each question.

The weight shapes are the layers' as the frameworks build them, from
config.json (moe_intermediate_size I, hidden_size H, TP):
  w13 [E, 2 I / TP, H], w2 [E, H, I / TP]; INT4 W4A16 (Triton layout, two
  values a byte along K): w13 [E, 2 I / TP, H / 2], w2 [E, H, I / (2 TP)];
  E = n_routed_experts (or num_experts), plus for SGLang the shared experts
  it fuses into the routed MoE (GLM-4.x; DeepSeek-V3 with 256 experts and
  one shared) unless --no-fusion (--disable-shared-experts-fusion).
The dtype string comes from the framework's own get_config_dtype_str /
_get_config_dtype_str; the block shape is [n, k] for FP8 block scales and
[0, group_size] for INT4 (both frameworks' W4A16 quant info); SGLang also
passes per_channel_quant for FP8 per channel.

Exit 0; 1 with a message when the model or a file is missing.
"""
import ast
import importlib.util
import json
import os
import sys
import types


class _DType:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"


def stub_torch(device):
    """torch as the lookups use it: dtypes, a CUDA device named device["name"]."""
    torch = types.ModuleType("torch")
    torch.float = torch.float32 = _DType("float32")
    torch.bfloat16 = _DType("bfloat16")
    torch.float16 = _DType("float16")
    torch.dtype = _DType
    torch.cuda = types.SimpleNamespace(is_available=lambda: True,
                                       get_device_name=lambda device_id=0: device["name"],
                                       current_device=lambda: 0)
    torch.version = types.SimpleNamespace(cuda="13.0", hip=None)
    sys.modules["torch"] = torch
    return torch


def stub(name, **attrs):
    """sys.modules[@name], created empty if missing, with @attrs set."""
    mod = sys.modules.setdefault(name, types.ModuleType(name))
    mod.__dict__.update(attrs)
    return mod


def functions(path, names, namespace):
    """The top-level functions @names of the Python file @path, defined (with
    their decorators) in @namespace; exit 1 naming one that is missing."""
    tree = ast.parse(open(path).read(), path)
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    missing = set(names) - {n.name for n in found}
    if missing:
        sys.exit(f"patch_configs.py: {path} has no {', '.join(sorted(missing))}")
    exec(compile(ast.Module(body=found, type_ignores=[]), path, "exec"), namespace)
    return namespace


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


class Opened:
    """open() for a module's globals that records the files opened; the
    lookup's lru_caches (caches) are cleared with the record, so that each
    batch size reads its file again."""

    def __init__(self):
        self.paths = []
        self.caches = []

    def clear(self):
        self.paths.clear()
        for c in self.caches:
            c.cache_clear()

    def __call__(self, path, *args, **kwargs):
        self.paths.append(path)
        return open(path, *args, **kwargs)


def first(root, paths):
    for p in paths:
        if os.path.isfile(os.path.join(root, p)):
            return os.path.join(root, p)
    sys.exit(f"patch_configs.py: none of {', '.join(paths)} under {root}: unpack the release "
             "there first (tests/oracle/fetch.sh)")


# ------------------------------------------------------------------ SGLang

SGLANG_CONFIG = ["sglang/srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py",
                 "sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_config.py"]


def sglang_lookup(root, torch):
    """(try_get_optimal_moe_config, get_config_dtype_str, opened) of the SGLang at @root."""
    utils = functions(first(root, ["sglang/srt/utils/common.py"]), ["get_device_name"],
                      {"torch": torch, "is_musa": lambda: False,
                       "lru_cache": __import__("functools").lru_cache})
    no = types.SimpleNamespace(enable_deterministic_inference=False)
    stub("sglang")
    stub("sglang.srt")
    stub("sglang.srt.utils", get_device_name=utils["get_device_name"], is_hip=lambda: False)
    stub("sglang.srt.server_args", get_global_server_args=lambda: no)
    stub("sglang.srt.runtime_context",
         get_exec=lambda: types.SimpleNamespace(deterministic=no))
    # the runtime override of the tuned configs (--moe... json / tests): none
    for pkg in ("sglang.srt.layers", "sglang.srt.layers.moe",
                "sglang.srt.layers.moe.fused_moe_triton", "sglang.srt.layers.moe.moe_runner",
                "sglang.srt.layers.moe.moe_runner.triton_utils"):
        stub(pkg, get_config=lambda: None)
    mod = load_module("oracle_sglang_moe_config", first(root, SGLANG_CONFIG))
    mod.get_default_config = lambda *a, **k: "default"
    opened = Opened()
    mod.open = opened
    opened.caches.append(mod.get_moe_configs)
    return mod.try_get_optimal_moe_config, mod.get_config_dtype_str, opened


def sglang_run(lookup, dtype_str, torch, q, shapes, top_k, m):
    w1, w2 = shapes
    dtype = dtype_str(torch.bfloat16, use_fp8_w8a8=q["fp8"], use_int4_w4a16=q["int4"])
    return lookup(w1, w2, top_k, dtype, m, block_shape=q["block"],
                  per_channel_quant=q["per_channel"])


# -------------------------------------------------------------------- vLLM

def vllm_lookup(root, torch, device):
    """(try_get_optimal_moe_config, _get_config_dtype_str, opened) of the vLLM at @root."""
    import functools
    import re
    from typing import Any

    platform = types.SimpleNamespace(get_device_name=lambda device_id=0: device["name"])
    utils = functions(first(root, ["vllm/utils/platform_utils.py"]),
                      ["get_device_name_as_file_name"], {"re": re, "cache": functools.cache})
    stub("vllm.platforms", current_platform=platform)
    envs = load_module("vllm.envs", first(root, ["vllm/envs.py"]))
    cfg = functions(first(root, ["vllm/model_executor/layers/fused_moe/config.py"]),
                    ["_get_config_dtype_str"], {"torch": torch})
    for pkg in ("vllm", "vllm.model_executor", "vllm.model_executor.layers"):
        stub(pkg)
    stub("vllm.model_executor.layers.fused_moe", get_config=lambda: None)
    opened = Opened()
    logger = types.SimpleNamespace(info_once=lambda *a, **k: None,
                                   warning_once=lambda *a, **k: None,
                                   info=lambda *a, **k: None, warning=lambda *a, **k: None)
    path = first(root, ["vllm/model_executor/layers/fused_moe/fused_moe.py"])
    ns = functions(path, ["get_config_file_name", "get_moe_configs",
                          "try_get_optimal_moe_config"],
                   {"functools": functools, "json": json, "os": os, "Any": Any, "envs": envs,
                    "logger": logger, "open": opened, "__file__": path,
                    "get_device_name_as_file_name": utils["get_device_name_as_file_name"],
                    "get_default_config": lambda *a, **k: "default"})
    opened.caches += [ns["get_moe_configs"], utils["get_device_name_as_file_name"]]
    return ns["try_get_optimal_moe_config"], cfg["_get_config_dtype_str"], opened


def vllm_run(lookup, dtype_str, torch, q, shapes, top_k, m):
    w1, w2 = shapes
    dtype = dtype_str(torch.bfloat16, use_fp8_w8a8=q["fp8"], use_int4_w4a16=q["int4"])
    return lookup(w1, w2, top_k, dtype, m, block_shape=q["block"])


# ------------------------------------------------------------------- model

def model_layer(model_dir, tp, framework, no_fusion):
    """(quant flags, (w1 shape, w2 shape), top_k) of the model's MoE layer."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    text = cfg.get("text_config", cfg)
    arch = (cfg.get("architectures") or [""])[0]
    routed = text.get("n_routed_experts", text.get("num_experts"))
    shared = text.get("n_shared_experts") or 0
    hidden, inter, top_k = text["hidden_size"], text["moe_intermediate_size"], \
        text["num_experts_per_tok"]
    qc = cfg.get("quantization_config") or text.get("quantization_config") or {}
    q = dict(fp8=False, int4=False, block=None, per_channel=False)
    if qc.get("quant_method") == "fp8":
        q.update(fp8=True, block=qc.get("weight_block_size"))
    elif qc.get("quant_method") == "compressed-tensors":
        group = next(iter(qc["config_groups"].values()))
        w = group["weights"]
        if w["type"] == "float":
            q.update(fp8=True, per_channel=w["strategy"] == "channel",
                     block=w.get("block_structure") if w["strategy"] == "block" else None)
        else:
            q.update(int4=True, block=[0, w["group_size"]])
    fused = 0
    if framework == "sglang" and not no_fusion and shared:
        if arch == "Glm4MoeForCausalLM" or (arch == "DeepseekV3ForCausalLM" and routed == 256
                                            and shared == 1):
            fused = shared
    e = routed + fused
    pack = 2 if q["int4"] else 1
    shapes = ((e, 2 * inter // tp, hidden // pack), (e, hidden, inter // tp // pack))
    return q, shapes, top_k + fused


def main(argv):
    args, devices, no_fusion = [], [], False
    it = iter(argv[1:])
    for a in it:
        if a == "--no-fusion":
            no_fusion = True
        elif a == "--device":
            devices.append(next(it, ""))
        else:
            args.append(a)
    if len(args) < 5 or args[0] not in ("sglang", "vllm") or not devices or "" in devices:
        sys.exit(__doc__)
    framework, root, model_dir, tp = args[:4]
    batches = [int(m) for m in args[4:]]
    device = {"name": devices[0]}
    torch = stub_torch(device)
    q, shapes, top_k = model_layer(model_dir, int(tp), framework, no_fusion)
    if framework == "sglang":
        lookup, dtype_str, opened = sglang_lookup(root, torch)
        run = sglang_run
    else:
        lookup, dtype_str, opened = vllm_lookup(root, torch, device)
        run = vllm_run
    for name in devices:
        device["name"] = name
        for m in batches:
            opened.clear()
            config = run(lookup, dtype_str, torch, q, shapes, top_k, m)
            where = opened.paths[-1] if opened.paths and config != "default" else "default"
            print(f"{name}\t{m}\t{where}\t{json.dumps(config, sort_keys=True)}")


if __name__ == "__main__":
    main(sys.argv)

#!/usr/bin/env python3
"""engine_hf.py - `sm120 ref` against Hugging Face transformers (needs torch, transformers,
safetensors; no network).

  python3 tests/gpu/engine_hf.py --build build [--backends cpu,gpu] [--work DIR] [--steps 32] check
  python3 tests/gpu/engine_hf.py --build build golden --out tests/engine/golden

check, for kimi-k2 (DeepseekV3ForCausalLM) and glm4-moe (Glm4MoeForCausalLM):
  (a) hf-native: a tiny model built by transformers' own config and model classes, random
      weights at a realistic scale, saved in bfloat16 with one tensor per expert (fused 3-D
      expert tensors, as transformers 5 may keep them, are split into the on-disk names);
  (b) bf16, fp8, int4, nvfp4: `sm120 ref make-model --tiny --seed 1`, dequantized by
      engine_formats.py (torch code written from the reference doc, not our C code) into a
      float32 checkpoint that transformers loads.
  For each checkpoint and each engine run (`sm120 ref run --backend B --steps N --json`; the
  CPU backend also with --mla naive and --mla absorbed for kimi-k2) it prints one TAP line:
  max|ours - ref64| over every logits row against its tolerance, the engine's greedy tokens
  against the float64 reference (teacher-forced on our tokens) and against transformers' own
  greedy decode.  Before the runs, per checkpoint: one line for preparing/loading it and one
  for "transformers reads the config as the reference doc's math" (rope, softmax scale, ...).
  The reference is transformers with unquantized activations (float64 for ref64, bfloat16 for
  the GPU rows' tolerance), except for the GPU rows of the fp8 checkpoint: the GPU backend serves
  FP8 weights w8a8, as SGLang, vLLM and DeepSeek's own inference code do, so those rows are
  judged against the model as served, both in float64 and in bfloat16: the input of every Linear
  whose stored weight is FP8 is fake-quantized before its GEMM to FP8 E4M3, dynamically per token
  and per group of 128 along K (the last group partial; per-channel weights: one group per
  token), scale = max(amax, 1e-10) / 448, q = round-to-nearest-even e4m3(x / scale) saturated
  to +-448, GEMM input q * scale.  kv_b_proj is the exception: the GPU backend runs MLA absorbed,
  kv_b_proj split into bf16 W_UK / W_UV batched GEMMs, so nothing quantizes its input.  Those
  TAP lines say "[ref: w8a8 activations]"; CPU rows (fp32 activations) keep the unquantized
  reference.  Routing is discrete, so both the tolerance and the check look at it
  (routing_view): the tolerance comes from the rows the lower-precision copy routes exactly
  as float64; a row the engine (its --json "routes") routes differently from float64 is left
  out of the logits check and reported when float64's choice there is a near tie (a gap to
  the first expert or group left out within twice the score error the tolerance allows),
  and is a failure when it is not.  At most a quarter of the rows may be left out.
golden: for each arch, make-model --quant bf16 --tiny --seed 1, transformers' float64 greedy
  decode of 8 tokens and its float64 logits, written to OUT/<arch>.json for the C tests.
Exit status 1 when any line is `not ok`.
"""
import argparse
import contextlib
import copy
import inspect
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback

import torch
import transformers
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engine_formats as fmt  # noqa: E402

PROMPT = [5, 17, 42, 99, 128, 200, 3]
SEED = 20240607          # torch.manual_seed before building the hf-native model, and its re-init
ARCHS = ("kimi-k2", "glm4-moe")
QUANTS = ("bf16", "fp8", "int4", "nvfp4")
GOLDEN_STEPS = 8

# The tiny dimensions `make-model --tiny` writes, in Hugging Face config names.  The RoPE
# settings are kept apart (ROPE) because transformers 4.x and 5.x spell them differently.
TINY = {
    "kimi-k2": dict(
        vocab_size=256, hidden_size=192, intermediate_size=320, moe_intermediate_size=128,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
        q_lora_rank=96, kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
        n_routed_experts=16, n_shared_experts=1, num_experts_per_tok=4, first_k_dense_replace=1,
        n_group=4, topk_group=2, norm_topk_prob=True, routed_scaling_factor=2.827,
        rms_norm_eps=1e-6, hidden_act="silu", tie_word_embeddings=False, attention_bias=False),
    "glm4-moe": dict(
        vocab_size=256, hidden_size=192, intermediate_size=320, moe_intermediate_size=128,
        num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2, head_dim=32,
        n_routed_experts=16, n_shared_experts=1, num_experts_per_tok=4, first_k_dense_replace=1,
        n_group=1, topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.5,
        use_qk_norm=True, attention_bias=True, rms_norm_eps=1e-5, hidden_act="silu",
        tie_word_embeddings=False),
}
ROPE = {
    "kimi-k2": dict(theta=50000.0, dim=16, partial_rotary_factor=None,
                    yarn=dict(factor=32.0, original_max_position_embeddings=4096, beta_fast=32.0,
                              beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0)),
    "glm4-moe": dict(theta=1e6, dim=16, partial_rotary_factor=0.5, yarn=None),
}
# Only for the hf-native config.  transformers 4.5x derives the YaRN factor it uses for the
# frequencies from max_position_embeddings / original_max_position_embeddings (K2-Instruct:
# 131072 / 4096 = 32, equal to rope_scaling.factor), so keep the two consistent.
NATIVE_EXTRA = {
    "kimi-k2": dict(max_position_embeddings=131072, rope_interleave=True),
    "glm4-moe": dict(max_position_embeddings=131072),
}
HF_CLASSES = {
    "kimi-k2": ("DeepseekV3Config", "DeepseekV3ForCausalLM"),
    "glm4-moe": ("Glm4MoeConfig", "Glm4MoeForCausalLM"),
}
EXPERT_3D = re.compile(r"^(.*\.mlp\.experts\.)(gate_up_proj|gate_proj|up_proj|down_proj)(\.weight)?$")


class Fail(Exception):
    """A step that could not be done; the message says what differed or what went wrong."""


class Tap:
    def __init__(self):
        self.count = 0
        self.failed = 0

    def line(self, good, desc, diag=()):
        self.count += 1
        self.failed += 0 if good else 1
        print(("ok - " if good else "not ok - ") + desc, flush=True)
        for d in diag:
            print("#   " + d, flush=True)

    def error(self, desc, exc):
        diag = [] if isinstance(exc, (Fail, fmt.FormatError)) else \
            traceback.format_exc().rstrip().splitlines()[-12:]
        self.line(False, f"{desc}: {type(exc).__name__ + ': ' if diag else ''}{exc}", diag)

    @staticmethod
    def note(msg):
        print("# " + msg, flush=True)

    def finish(self):
        print(f"1..{self.count}", flush=True)
        if self.failed:
            print(f"# {self.failed} of {self.count} not ok", flush=True)
        return 1 if self.failed else 0


def g(x):
    return f"{x:.3g}"


# ---------------------------------------------------------------------------------------
# The engine


def tail(text, n=15):
    lines = (text or "").strip().splitlines()
    return " | ".join(lines[-n:]) if lines else "(no output)"


def sm120(build, args, timeout=600):
    cmd = [os.path.join(build, "sm120"), "ref"] + [str(a) for a in args]
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout)
    except subprocess.CalledProcessError as e:
        raise Fail(f"`{' '.join(cmd)}` exited with status {e.returncode}: {tail(e.stderr or e.stdout)}")
    except subprocess.TimeoutExpired:
        raise Fail(f"`{' '.join(cmd)}` ran longer than {timeout} s")


def make_model_args(arch, quant):
    return ["--arch", arch, "--quant", quant, "--tiny", "--seed", "1"]


def make_model(build, arch, quant, out_dir):
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    sm120(build, ["make-model"] + make_model_args(arch, quant) + [out_dir])
    if not os.path.exists(os.path.join(out_dir, "config.json")):
        raise Fail(f"make-model wrote no config.json in {out_dir}")


def run_engine(build, model_dir, backend, mla, steps, json_path, vocab):
    """One `sm120 ref run --json`.  Returns (tokens, logits [rows, vocab] float64, routes: the
    engine's expert ids [rows, top_k] per MoE layer, in layer order)."""
    args = ["run", "--backend", backend]
    if mla:
        args += ["--mla", mla]
    args += ["--prompt", ",".join(str(t) for t in PROMPT), "--steps", steps, "--json", json_path, model_dir]
    sm120(build, args)
    try:
        with open(json_path) as f:
            out = json.load(f)
    except (OSError, ValueError) as e:
        raise Fail(f"cannot read the engine's --json output {json_path}: {e}")
    tokens, rows = out.get("tokens"), out.get("logits")
    if out.get("prompt") != PROMPT:
        raise Fail(f"engine JSON prompt is {out.get('prompt')}, expected {PROMPT}")
    if not isinstance(tokens, list) or len(tokens) != steps:
        raise Fail(f"engine JSON has {len(tokens) if isinstance(tokens, list) else tokens!r} tokens, "
                   f"expected {steps}")
    if any(not isinstance(t, int) or not 0 <= t < vocab for t in tokens):
        raise Fail(f"engine JSON tokens outside [0, {vocab}): {tokens}")
    want = len(PROMPT) + steps - 1
    if not isinstance(rows, list) or len(rows) != want:
        raise Fail(f"engine JSON has {len(rows) if isinstance(rows, list) else rows!r} logits rows, "
                   f"expected {want} (prompt {len(PROMPT)} + steps {steps} - 1)")
    bad = [i for i, r in enumerate(rows) if not isinstance(r, list) or len(r) != vocab]
    if bad:
        raise Fail(f"engine JSON logits row {bad[0]} has {len(rows[bad[0]])} entries, expected vocab {vocab}")
    routes = out.get("routes")
    if not isinstance(routes, dict) or not routes:
        raise Fail("engine JSON has no \"routes\" (each MoE layer's expert ids per position)")
    layers = sorted(routes, key=int)
    if any(not isinstance(routes[k], list) or len(routes[k]) != want for k in layers):
        raise Fail(f"engine JSON routes: every MoE layer needs {want} rows")
    return tokens, torch.tensor(rows, dtype=torch.float64), [torch.tensor(routes[k]) for k in layers]


# ---------------------------------------------------------------------------------------
# Checkpoint layout


def expected_names(arch):
    """The tensor names of a real checkpoint (reference doc section 3) at the tiny dims."""
    t = TINY[arch]
    names = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
    if arch == "kimi-k2":
        attn = ["q_a_proj.weight", "q_a_layernorm.weight", "q_b_proj.weight", "kv_a_proj_with_mqa.weight",
                "kv_a_layernorm.weight", "kv_b_proj.weight", "o_proj.weight"]
    else:
        attn = ["q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias", "v_proj.weight",
                "v_proj.bias", "o_proj.weight", "q_norm.weight", "k_norm.weight"]
    mats = ("gate", "up", "down")
    for layer in range(t["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        names |= {p + "input_layernorm.weight", p + "post_attention_layernorm.weight"}
        names |= {p + "self_attn." + a for a in attn}
        if layer < t["first_k_dense_replace"]:
            names |= {p + f"mlp.{m}_proj.weight" for m in mats}
        else:
            names |= {p + "mlp.gate.weight", p + "mlp.gate.e_score_correction_bias"}
            names |= {p + f"mlp.shared_experts.{m}_proj.weight" for m in mats}
            names |= {p + f"mlp.experts.{e}.{m}_proj.weight"
                      for e in range(t["n_routed_experts"]) for m in mats}
    return names


def check_names(arch, names, what):
    want = expected_names(arch)
    missing, extra = sorted(want - set(names)), sorted(set(names) - want)
    if missing or extra:
        raise Fail(f"{what}: tensor names differ from the real {arch} layout: "
                   f"missing {missing[:6]}{' ...' if len(missing) > 6 else ''} ({len(missing)}), "
                   f"unexpected {extra[:6]}{' ...' if len(extra) > 6 else ''} ({len(extra)})")


def per_expert(tensors, arch):
    """{name: tensor} with any fused 3-D expert tensor (transformers 5 keeps routed experts as
    experts.gate_up_proj [E, 2I, H] and experts.down_proj [E, H, I]) split into the on-disk
    per-expert names experts.{e}.{gate,up,down}_proj.weight [out, in].  The layout is told
    apart by shape (unambiguous at the tiny dims: H 192, I 128).  Returns (dict, split?)."""
    t = TINY[arch]
    E, H, I = t["n_routed_experts"], t["hidden_size"], t["moe_intermediate_size"]
    assert len({H, I, 2 * I}) == 3
    out, split = {}, False
    for name, w in tensors.items():
        m = EXPERT_3D.match(name)
        if not m or w.dim() != 3:
            out[name] = w
            continue
        prefix, kind = m.group(1), m.group(2)
        if w.shape[0] != E:
            raise Fail(f"{name}: fused expert tensor of shape {list(w.shape)}, expected {E} experts first")
        split = True
        rows = {"gate_up_proj": 2 * I, "gate_proj": I, "up_proj": I, "down_proj": H}[kind]
        cols = I if kind == "down_proj" else H
        if tuple(w.shape[1:]) == (rows, cols):
            mats = w                       # [E, out, in]: used as F.linear(x, w[e])
        elif tuple(w.shape[1:]) == (cols, rows):
            mats = w.transpose(1, 2)       # [E, in, out]: used as x @ w[e]
        else:
            raise Fail(f"{name}: fused expert tensor of shape {list(w.shape)}, expected "
                       f"[{E}, {rows}, {cols}] or [{E}, {cols}, {rows}] (H {H}, moe_intermediate {I}); "
                       f"does this transformers version size experts by another field?")
        parts = {"gate_proj": mats[:, :I], "up_proj": mats[:, I:]} if kind == "gate_up_proj" else {kind: mats}
        for sub, m3 in parts.items():
            for e in range(E):
                out[f"{prefix}{e}.{sub}.weight"] = m3[e].contiguous().clone()
    return out, split


# ---------------------------------------------------------------------------------------
# transformers


def hf_classes(arch):
    names = HF_CLASSES[arch]
    try:
        return getattr(transformers, names[0]), getattr(transformers, names[1])
    except AttributeError:
        raise Fail(f"transformers {transformers.__version__} has no {names[0]} / {names[1]}")


def class_has(cls, field):
    if field in inspect.signature(cls.__init__).parameters:
        return True
    try:
        return hasattr(cls(), field)
    except Exception:
        return False


def make_hf_config(arch):
    """The tiny config built by transformers' own config class.  transformers 5 takes RoPE as
    rope_parameters={rope_type, rope_theta, ...}; 4.x as rope_theta + rope_scaling."""
    cfg_cls, _ = hf_classes(arch)
    params = inspect.signature(cfg_cls.__init__).parameters
    fields = dict(TINY[arch])
    fields.update(NATIVE_EXTRA[arch])
    if class_has(cfg_cls, "num_nextn_predict_layers"):
        fields["num_nextn_predict_layers"] = 0
    r = ROPE[arch]
    if "rope_parameters" in params:
        rp = {"rope_type": "yarn" if r["yarn"] else "default", "rope_theta": r["theta"]}
        rp.update(r["yarn"] or {})
        if r["partial_rotary_factor"] is not None:
            rp["partial_rotary_factor"] = r["partial_rotary_factor"]
        fields["rope_parameters"] = rp
    else:
        fields["rope_theta"] = r["theta"]
        if r["yarn"]:
            fields["rope_scaling"] = dict(rope_type="yarn", **r["yarn"])
    if r["partial_rotary_factor"] is not None:
        fields["partial_rotary_factor"] = r["partial_rotary_factor"]
    try:
        cfg = cfg_cls(**fields)
    except TypeError:  # a config class that refuses unknown keywords: set the rest afterwards
        known = {k: v for k, v in fields.items() if k in params}
        cfg = cfg_cls(**known)
        for k, v in fields.items():
            if k not in known:
                setattr(cfg, k, v)
    wrong = {k: getattr(cfg, k, None) for k, v in TINY[arch].items() if getattr(cfg, k, None) != v}
    if wrong:
        raise Fail(f"{cfg_cls.__name__} did not keep these fields: {wrong}")
    for attr in ("_attn_implementation", "_experts_implementation"):
        try:
            if attr == "_attn_implementation" or hasattr(cfg, attr):
                setattr(cfg, attr, "eager")
        except Exception:
            pass
    return cfg


def reinit_(model, seed):
    """Every parameter at a realistic scale (the default initializer_range 0.02 makes the
    model nearly constant): 2-D/3-D weights normal with std 1/sqrt(fan_in), embeddings std 1,
    norm weights 1+U(-0.1,0.1), biases U(-0.1,0.1), e_score_correction_bias U(-0.05,0.05)
    (a buffer in most versions)."""
    gen = torch.Generator().manual_seed(seed)
    H, I = model.config.hidden_size, model.config.moe_intermediate_size

    def uniform(shape, a):
        return (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * a

    def normal(shape, std):
        return torch.randn(shape, generator=gen, dtype=torch.float64) * std

    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            shape = tuple(p.shape)
            if name.endswith("e_score_correction_bias"):
                v = uniform(shape, 0.05)
            elif len(shape) == 1 and name.endswith("bias"):
                v = uniform(shape, 0.1)
            elif len(shape) == 1 and name.endswith("weight"):
                v = 1 + uniform(shape, 0.1)
            elif "embed_tokens" in name:
                v = normal(shape, 1.0)
            elif len(shape) == 2:
                v = normal(shape, shape[1] ** -0.5)
            elif len(shape) == 3 and EXPERT_3D.match(name):
                v = normal(shape, (I if EXPERT_3D.match(name).group(2) == "down_proj" else H) ** -0.5)
            else:
                raise Fail(f"re-init: no rule for parameter {name} {list(shape)}")
            p.copy_(v.to(p.dtype))
        for name, b in sorted(model.named_buffers(), key=lambda kv: kv[0]):
            if name.endswith("e_score_correction_bias"):
                b.copy_(uniform(tuple(b.shape), 0.05).to(b.dtype))


def _to_f64(x):
    if isinstance(x, torch.Tensor):
        return x.to(torch.float64) if x.is_floating_point() else x
    if isinstance(x, (tuple, list)):
        return type(x)(_to_f64(v) for v in x)
    return x


def routers(model):
    """The model's MoE router modules (.mlp.gate), in layer order; at least one."""
    found = [mod for name, mod in model.named_modules() if name.endswith(".mlp.gate")]
    if not found:
        raise Fail("found no .mlp.gate router modules in the transformers model")
    return found


def upcast_router_outputs(model):
    """HF computes the MoE router in fp32 even in a float64 model (mlp.gate casts hidden
    states and weight with .type(torch.float32)), so the "float64" reference's expert scores
    carry fp32 rounding: this is one reason the greedy checks need the near-tie rule.  The
    hook below casts the router's outputs to float64 (a value-preserving cast) so what comes
    after it (sigmoid/top-k in 5.x, the weighted expert sum in 4.5x, whose index_add_ would
    otherwise mix float32 and float64) runs in float64."""
    for mod in routers(model):
        mod.register_forward_hook(lambda m, args, out: _to_f64(out))


def cast(model, device, dtype):
    """model.to(device, dtype), but the rotary inv_freq buffers stay float32, as in a model
    loaded in that dtype (a plain .to(bfloat16) would round the RoPE frequencies to bf16)."""
    keep = {}
    for mname, mod in model.named_modules():
        for bname, buf in mod._buffers.items():
            if buf is not None and "inv_freq" in bname:
                keep[(mname, bname)] = buf.detach().to(torch.float32).clone()
    model.to(device=device, dtype=dtype)
    mods = dict(model.named_modules())
    for (mname, bname), buf in keep.items():
        mods[mname]._buffers[bname] = buf.to(device)
    return model


def load_hf(arch, model_dir, dtype, device):
    """transformers' model from @model_dir, eager attention (and eager experts where the
    version has that switch), eval mode, cast to @dtype.  Loads in the stored dtype (4.x:
    float32, 5.x: "auto") and casts afterwards, which is exact for bf16/f32 checkpoints."""
    _, model_cls = hf_classes(arch)
    kwargs = dict(attn_implementation="eager")
    try:
        model = model_cls.from_pretrained(model_dir, experts_implementation="eager", **kwargs)
    except (TypeError, ValueError):  # versions without experts_implementation
        model = model_cls.from_pretrained(model_dir, **kwargs)
    model.eval()
    cast(model, device, dtype)
    if dtype == torch.float64:
        upcast_router_outputs(model)
    return model


def verify_loaded(arch, model, tensors):
    """Every tensor transformers holds equals the stored one, and nothing is missing or extra
    (a missing tensor would be silently re-initialized)."""
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    sd, _ = per_expert(sd, arch)
    missing, extra = sorted(set(tensors) - set(sd)), sorted(set(sd) - set(tensors))
    if missing or extra:
        raise Fail(f"transformers' model and the checkpoint hold different tensors: not in the model "
                   f"{missing[:6]} ({len(missing)}), not in the checkpoint {extra[:6]} ({len(extra)})")
    for name in sorted(tensors):
        a, b = sd[name].to(torch.float64), tensors[name].to(torch.float64)
        if a.shape != b.shape or not torch.equal(a, b):
            diff = "shape " + str(list(a.shape)) + " vs " + str(list(b.shape)) if a.shape != b.shape \
                else "max diff " + g(float((a - b).abs().max()))
            raise Fail(f"transformers loaded {name} differently from the checkpoint ({diff})")


# ---------------------------------------------------------------------------------------
# FP8 checkpoints as served: w8a8 activations


FP8_E4M3_MAX = 448.0
FP8_AMAX_FLOOR = 1e-10
# The activation group along K for each FP8 weight kind engine_formats.dequantize reports:
# block scales -> groups of 128 (the GPU backend's and DeepSeek's), per-channel -> the whole row.
FP8_ACT_GROUP = {"fp8-block": 128, "fp8-channel": None}
# FP8 weights whose input the GPU backend never quantizes: it runs MLA absorbed only, with
# kv_b_proj split into bf16 W_UK / W_UV batched GEMMs (engine/gpu/gpu.c, put_absorbed).
W8A8_EXEMPT = re.compile(r"\.kv_b_proj\.weight$")
W8A8_TAG = "[ref: w8a8 activations]"
PER_EXPERT_LINEAR = re.compile(r"\.mlp\.experts\.\d+\.")


def fake_quant_fp8(x, group):
    """@x [..., K] as an FP8 w8a8 GEMM sees it: quantized dynamically to FP8 E4M3 per token and
    per group of @group along K (the last group partial; None: one group per token), scale =
    max(amax, 1e-10) / 448, q = e4m3(x / scale) saturated to +-448 (the clamp: torch's cast
    gives NaN past 448) and rounded to nearest even (torch's float8_e4m3fn cast), and returned
    as q * scale in x's dtype.  The math is float64 for a float64 x (q * scale exact), else
    float32 from x's values, as the GPU backend's eng_quant_fp8 does from its bf16 activations."""
    if not hasattr(torch, "float8_e4m3fn"):
        raise Fail(f"torch {torch.__version__} has no float8_e4m3fn: cannot build the w8a8 reference")
    K = x.shape[-1]
    g = K if group is None else group
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    v = x.reshape(-1, K).to(work)
    if K % g:
        v = torch.nn.functional.pad(v, (0, g - K % g))  # zeros: no effect on any group's amax
    v = v.reshape(v.shape[0], -1, g)
    scale = v.abs().amax(dim=-1, keepdim=True).clamp_min(FP8_AMAX_FLOOR) / FP8_E4M3_MAX
    q = (v / scale).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn).to(work)
    return (q * scale).reshape(v.shape[0], -1)[:, :K].reshape(x.shape).to(x.dtype)


def _quantizing_pre_hook(name, group, fired):
    """nn.Linear forward pre-hook (with_kwargs): its input through fake_quant_fp8."""
    def hook(module, args, kwargs):
        fired[name] += 1
        if args:
            return (fake_quant_fp8(args[0], group),) + tuple(args[1:]), kwargs
        return args, dict(kwargs, input=fake_quant_fp8(kwargs["input"], group))
    return hook


def _quantizing_experts_forward(mod, name, group, fired):
    """A forward for a fused routed-experts module (transformers 5: 3-D gate_up_proj [E, 2I, H]
    and down_proj [E, H, I], the eager forward applying each hit expert's slice with
    torch.nn.functional.linear): the original one, with torch.nn.functional.linear replaced
    while it runs by one that quantizes its input first.  Checks afterwards that every hit
    expert's gate/up and down projection went through it."""
    orig = mod.forward

    def forward(*args, **kwargs):
        params = dict(mod.named_parameters(recurse=False))
        down_ptr = params["down_proj"].untyped_storage().data_ptr()
        in_ptrs = {params[p].untyped_storage().data_ptr() for p in ("gate_up_proj", "gate_proj", "up_proj")
                   if p in params}
        calls = {"in": 0, "down": 0}
        base = torch.nn.functional.linear

        def linear(input, weight, bias=None):
            ptr = weight.untyped_storage().data_ptr()
            which = "down" if ptr == down_ptr else "in" if ptr in in_ptrs else None
            if which is None:
                raise Fail(f"w8a8 reference: {name}'s forward applies a linear whose weight is none of "
                           f"its expert tensors {sorted(params)}")
            if input.numel():
                calls[which] += 1
            return base(fake_quant_fp8(input, group), weight, bias)

        torch.nn.functional.linear = linear
        try:
            out = orig(*args, **kwargs)
        finally:
            torch.nn.functional.linear = base
        idx = args[1] if len(args) > 1 else kwargs.get("top_k_index")
        E = params["down_proj"].shape[0]
        if isinstance(idx, torch.Tensor):
            hits = int(torch.unique(idx[(idx >= 0) & (idx < E)]).numel())
            ok = calls["down"] == hits and calls["in"] >= hits
        else:
            hits = None
            ok = calls["down"] >= 1 and calls["in"] >= 1
        if not ok:
            impl = getattr(getattr(mod, "config", None), "_experts_implementation", "?")
            raise Fail(f"w8a8 reference: transformers {transformers.__version__}'s routed experts {name} "
                       f"(experts implementation {impl!r}) applied {calls['in']} gate/up and {calls['down']} down "
                       f"projections through torch.nn.functional.linear for {'?' if hits is None else hits} "
                       f"experts hit: their inputs cannot be fake-quantized this way")
        fired[name] += 1
        return out
    return forward


@contextlib.contextmanager
def w8a8_activations(model, fp8):
    """Inside the with block, @model runs an FP8 checkpoint as served: w8a8, the input of every
    Linear whose stored weight is FP8 (@fp8: {safetensors weight name: engine_formats kind})
    through fake_quant_fp8 before its GEMM.  Why: w8a8 with dynamic per-token(-group) FP8
    activations is how SGLang and vLLM, and DeepSeek's own inference code, run FP8 checkpoints,
    and our GPU backend does the same, so transformers with unquantized activations is not the
    model it serves (the gap exceeds bf16's).  kv_b_proj is exempt (W8A8_EXEMPT).
    Modules are matched by name, the safetensors name less ".weight": an nn.Linear gets a forward
    pre-hook; a fused routed-experts module (3-D gate_up_proj / down_proj, whose per-expert names
    are <module>.<e>.{gate,up,down}_proj.weight as per_expert splits them) gets its forward
    wrapped (_quantizing_experts_forward).  Fails if an FP8 weight has no such module, and, on
    leaving the block, if a hooked module other than one routed expert never ran."""
    want = {n: k for n, k in fp8.items() if not W8A8_EXEMPT.search(n)}
    unknown = sorted(f"{n} ({k})" for n, k in want.items() if k not in FP8_ACT_GROUP)
    if unknown:
        raise Fail(f"w8a8 reference: no activation group for the weight kind of {unknown[:3]}")
    covered, fired, handles, wrapped = set(), {}, [], []
    try:
        for name, mod in model.named_modules():
            if isinstance(mod, torch.nn.Linear):
                if name + ".weight" in want:
                    fired[name] = 0
                    handles.append(mod.register_forward_pre_hook(
                        _quantizing_pre_hook(name, FP8_ACT_GROUP[want[name + ".weight"]], fired), with_kwargs=True))
                    covered.add(name + ".weight")
                continue
            fused = {p: t for p, t in mod.named_parameters(recurse=False)
                     if t.dim() == 3 and EXPERT_3D.match(f"{name}.{p}")}
            if not fused:
                continue
            E = next(iter(fused.values())).shape[0]
            names = {f"{name}.{e}.{m}_proj.weight" for e in range(E) for m in ("gate", "up", "down")}
            kinds = {want[n] for n in names if n in want}
            if not kinds:
                continue
            if len(kinds) != 1 or not names <= set(want):
                raise Fail(f"w8a8 reference: the fused experts {name} hold weights stored differently "
                           f"({sorted(kinds)}, {len(names & set(want))} of {len(names)} FP8)")
            if "down_proj" not in fused or not {"gate_up_proj", "gate_proj", "up_proj"} & set(fused):
                raise Fail(f"w8a8 reference: fused experts {name} with parameters {sorted(fused)} "
                           f"(expected gate_up_proj or gate_proj/up_proj, and down_proj)")
            if "forward" in mod.__dict__:
                raise Fail(f"w8a8 reference: the forward of {name} is already replaced")
            fired[name] = 0
            mod.forward = _quantizing_experts_forward(mod, name, FP8_ACT_GROUP[kinds.pop()], fired)
            wrapped.append(mod)
            covered |= names
        missing = sorted(set(want) - covered)
        if missing:
            raise Fail(f"w8a8 reference: no nn.Linear or fused experts module in transformers' model for "
                       f"FP8 weights {missing[:5]} ({len(missing)})")
        yield
        idle = sorted(n for n, c in fired.items() if not c and not PER_EXPERT_LINEAR.search(n))
        per_expert = [c for n, c in fired.items() if PER_EXPERT_LINEAR.search(n)]
        if idle or (per_expert and not sum(per_expert)):
            raise Fail(f"w8a8 reference: quantizing hooks that never ran: {idle[:5] or 'every routed expert'}")
    finally:
        for h in handles:
            h.remove()
        for mod in wrapped:
            del mod.forward


@torch.no_grad()
def hf_logits(model, ids):
    dev = next(model.parameters()).device
    out = model(input_ids=torch.tensor([ids], dtype=torch.long, device=dev), use_cache=False)
    return out.logits[0].detach().to("cpu", torch.float64)


@torch.no_grad()
def hf_greedy(model, prompt, steps):
    """transformers' own greedy decode by a plain argmax loop over full forwards (no
    generation config, no cache).  Returns (tokens, the logits row each was picked from)."""
    ids, tokens, rows = list(prompt), [], []
    for _ in range(steps):
        row = hf_logits(model, ids)[-1]
        t = int(torch.argmax(row))
        tokens.append(t)
        rows.append(row)
        ids.append(t)
    return tokens, rows


def margin(row):
    top = torch.topk(row, 2).values
    return float(top[0] - top[1])


def yarn_inv_freq(r):
    """The reference doc's YaRN frequencies (section 2.2), float64."""
    R, theta, y = r["dim"], r["theta"], r["yarn"]
    i = torch.arange(R // 2, dtype=torch.float64)
    inv = theta ** (-2 * i / R)
    if not y:
        return inv

    def corr(n):
        return R * math.log(y["original_max_position_embeddings"] / (n * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(corr(y["beta_fast"])), 0)
    high = min(math.ceil(corr(y["beta_slow"])), R - 1)
    if low == high:
        high += 0.001
    mask = 1 - ((i - low) / (high - low)).clamp(0, 1)
    return inv / y["factor"] * (1 - mask) + inv * mask


def hf_math_problems(arch, model):
    """Where transformers' reading of the config differs from the reference doc's math at the
    tiny dims (RoPE frequencies and dims, cos/sin scaling, softmax scale, fields); [] if none."""
    problems = []
    cfg, r = model.config, ROPE[arch]
    for k, v in TINY[arch].items():
        if getattr(cfg, k, None) != v:
            problems.append(f"config {k} = {getattr(cfg, k, None)!r}, expected {v!r}")
    inner = getattr(model, "model", None)
    rot = getattr(inner, "rotary_emb", None)
    if rot is None or not hasattr(rot, "inv_freq"):
        problems.append("cannot find model.model.rotary_emb.inv_freq")
    else:
        got, want = rot.inv_freq.detach().cpu().to(torch.float64), yarn_inv_freq(r)
        if got.shape != want.shape:
            problems.append(f"rotary inv_freq has {got.numel()} frequencies, the doc's math {want.numel()} "
                            f"(rotary dim {r['dim']})")
        elif float(((got - want).abs() / want).max()) > 1e-5:
            problems.append(f"rotary inv_freq differs from the doc's formula: ours {want.tolist()} "
                            f"transformers {got.tolist()}"
                            + (" (transformers 4.5x takes the YaRN factor from max_position_embeddings / "
                               "original_max_position_embeddings)" if r["yarn"] else ""))
        att = float(getattr(rot, "attention_scaling", 1.0))
        if abs(att - 1.0) > 1e-12:
            problems.append(f"rotary cos/sin scaled by {att!r}, the doc's math by 1 (mscale = mscale_all_dim)")
    t = TINY[arch]
    if arch == "kimi-k2":
        y = r["yarn"]
        m = 0.1 * y["mscale_all_dim"] * math.log(y["factor"]) + 1
        want_scale = (t["qk_nope_head_dim"] + t["qk_rope_head_dim"]) ** -0.5 * m * m
        if not getattr(cfg, "rope_interleave", True):
            problems.append("config rope_interleave is false; the checkpoints store rope dims interleaved")
    else:
        want_scale = t["head_dim"] ** -0.5
    try:
        attn = inner.layers[0].self_attn
        if abs(float(attn.scaling) - want_scale) > 1e-12 * want_scale:
            problems.append(f"softmax scale {attn.scaling!r}, the doc's math {want_scale!r}")
        if arch == "glm4-moe":
            if getattr(attn, "q_norm", None) is None or getattr(attn.q_proj, "bias", None) is None:
                problems.append("attention without q_norm or q/k/v bias")
            if getattr(attn.o_proj, "bias", None) is not None:
                problems.append("o_proj has a bias")
    except AttributeError as e:
        problems.append(f"cannot inspect layer 0 attention: {e}")
    return problems


# ---------------------------------------------------------------------------------------
# Checkpoints


def build_native(arch, out_dir, device):
    """(a): transformers' own tiny model, saved in bfloat16 with per-expert tensors.
    Returns (stored tensors, note)."""
    _, model_cls = hf_classes(arch)
    cfg = make_hf_config(arch)
    torch.manual_seed(SEED)
    model = model_cls(cfg)
    reinit_(model, SEED)
    model.eval()
    fused = any(EXPERT_3D.match(k) and v.dim() == 3 for k, v in model.state_dict().items())
    cast(model, "cpu", torch.bfloat16)
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    kwargs = {}
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:
        kwargs["safe_serialization"] = True
    model.save_pretrained(out_dir, **kwargs)
    tensors = fmt.load_tensors(out_dir)
    tensors, split = per_expert(tensors, arch)
    if split or len([f for f in os.listdir(out_dir) if f.endswith(".safetensors")]) != 1:
        for f in os.listdir(out_dir):
            if f.endswith(".safetensors") or f == "model.safetensors.index.json":
                os.remove(os.path.join(out_dir, f))
        save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    check_names(arch, tensors, "hf-native checkpoint")
    # The reloaded model must be the one in memory (catches a wrong split of fused experts).
    mem = cast(copy.deepcopy(model), device, torch.float32)
    disk = load_hf(arch, out_dir, torch.float32, device)
    verify_loaded(arch, disk, tensors)
    a, b = hf_logits(mem, PROMPT), hf_logits(disk, PROMPT)
    diff = float((a - b).abs().max())
    if not diff <= 1e-4 * max(1.0, float(a.abs().max())):
        raise Fail(f"the reloaded hf-native model differs from the one saved: max logits diff {g(diff)}")
    note = (f"transformers {transformers.__version__} keeps routed experts "
            f"{'fused in 3-D tensors' if fused else 'per expert'} in memory and saved them "
            f"{'fused (split here into per-expert tensors)' if split else 'per expert'}; "
            f"the reloaded model equals the saved one (max logits diff {g(diff)})")
    return tensors, note


def build_synthetic(build, arch, quant, work):
    """(b): make-model, then our own dequantization into a float32 HF checkpoint.
    Returns (engine dir, hf dir, float32 tensors, note, {FP8 weight name: kind})."""
    src = os.path.join(work, arch, quant)
    make_model(build, arch, quant, src)
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    tensors, kinds = fmt.dequantize(fmt.load_tensors(src), config, src, quant)
    quantized = sorted(n for n, k in kinds.items() if k in ("fp8-block", "int4", "nvfp4"))
    if quant == "fp8":
        want = re.compile(r"\.(q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj|o_proj|q_proj|k_proj|v_proj|"
                          r"gate_proj|up_proj|down_proj)\.weight$")
        what = "every attention/MLP Linear weight"
    else:
        want = re.compile(r"\.mlp\.experts\.\d+\.(gate|up|down)_proj\.weight$")
        what = "exactly the routed experts"
    if quant != "bf16":
        expect = sorted(n for n in tensors if want.search(n))
        if quantized != expect:
            raise Fail(f"{quant} checkpoint should quantize {what}: not quantized "
                       f"{sorted(set(expect) - set(quantized))[:5]}, quantized but should not be "
                       f"{sorted(set(quantized) - set(expect))[:5]}")
    check_names(arch, tensors, f"make-model {quant} checkpoint (dequantized)")
    dst = src + "-f32"
    cfg_cls, _ = hf_classes(arch)
    fmt.write_f32_checkpoint(dst, config, tensors, cfg_cls.model_type)
    note = (f"make-model checkpoint converted to float32 ({len(quantized)} {quant} weights dequantized, "
            f"{len(tensors) - len(quantized)} tensors as stored)")
    fp8 = {n: k for n, k in kinds.items() if k.startswith("fp8")}
    return src, dst, tensors, note, fp8


# ---------------------------------------------------------------------------------------
# Comparison


@contextlib.contextmanager
def router_inputs(model):
    """Within the block, every forward of a MoE router (.mlp.gate) appends (module, its input
    hidden states) to the yielded list, one entry per MoE layer in order."""
    seen = []
    handles = [mod.register_forward_hook(lambda m, a, out: seen.append((m, a[0].detach())))
               for mod in routers(model)]
    try:
        yield seen
    finally:
        for h in handles:
            h.remove()


def route(mod, x, cfg):
    """One router's decision in float64 from its input @x (noaux_tc): s = sigmoid(x W^T) + bias
    per expert, group scores = the sum of each group's two best s, the topk_group best groups
    kept, the top_k best s among them chosen.  Returns per token (s, group scores, group gap,
    expert gap, chosen [T, E] bool), a gap being the last kept/chosen score minus the first
    left out: the smaller it is, the closer that token's expert set is to changing."""
    h = x.reshape(-1, x.shape[-1]).to("cpu", torch.float64)
    s = torch.sigmoid(h @ mod.weight.detach().to("cpu", torch.float64).T)
    s = s + mod.e_score_correction_bias.detach().to("cpu", torch.float64)
    T, E = s.shape
    G, TG, K = cfg.n_group, cfg.topk_group, cfg.num_experts_per_tok
    gs = s.view(T, G, E // G).topk(2, dim=-1).values.sum(-1)
    if G > TG:
        top = gs.topk(TG + 1, dim=-1).values
        ggap = top[:, TG - 1] - top[:, TG]
        keep = torch.zeros_like(gs, dtype=torch.bool).scatter_(1, gs.topk(TG, dim=-1).indices, True)
        masked = s.masked_fill(~keep.repeat_interleave(E // G, dim=1), -math.inf)
    else:
        ggap, masked = torch.full((T,), math.inf, dtype=torch.float64), s
    top = masked.topk(K + 1, dim=-1)
    chosen = torch.zeros_like(s, dtype=torch.bool).scatter_(1, top.indices[:, :K], True)
    return s, gs, ggap, top.values[:, K - 1] - top.values[:, K], chosen


def routing_view(ref_routers, low_routers, engine_routes, l64, llow, cfg, mult):
    """The tolerance, and the rows the engine routed differently from float64.
    @ref_routers / @low_routers: router_inputs of the float64 model and of the lower-precision
    copy that sets the tolerance, on the same sequence; @l64 / @llow their logits;
    @engine_routes: the engine's expert ids [rows, top_k] per MoE layer (run_engine).
    A router's choice is discrete: where another expert is picked the row differs by a
    different computation, not by rounding.  So:
      - err_low: the copy's largest logits error over the rows it routes exactly as float64;
        the engine's rows may differ from float64 by @mult * err_low (the tolerance).
      - per MoE layer, err: the copy's largest score error (expert scores and group scores
        apart) over tokens it has routed as float64 in every earlier layer; the engine's scores
        may be off by mult * err each, so its choice may legitimately differ where the
        float64 gap to the first expert or group left out is below limit = 2 * mult * err.
      - a row the engine first routes differently at a layer where the float64 gaps are below
        their limits is a near tie: reported, not judged (its later layers follow from it);
        one where they are not is a routing error.
    Returns (err_low, rows the copy routes differently, {near-tie row: why}, [routing errors])."""
    if not len(ref_routers) == len(low_routers) == len(engine_routes) or not ref_routers:
        raise Fail(f"MoE layers differ: {len(ref_routers)} float64 routers, {len(low_routers)} low "
                   f"precision, {len(engine_routes)} in the engine's routes")
    T = l64.shape[0]
    low_first = torch.full((T,), len(ref_routers))
    ties, errors = {}, []
    for layer, ((m64, x64), (mlow, xlow), ids) in enumerate(zip(ref_routers, low_routers, engine_routes)):
        s64, gs64, ggap, egap, c64 = route(m64, x64, cfg)
        slow, gslow, _, _, clow = route(mlow, xlow, cfg)
        if ids.shape != (T, cfg.num_experts_per_tok) or int(ids.min()) < 0 or int(ids.max()) >= s64.shape[1]:
            raise Fail(f"engine routes of MoE layer {layer}: shape {tuple(ids.shape)}, ids {int(ids.min())}.."
                       f"{int(ids.max())}; expected ({T}, {cfg.num_experts_per_tok}) in 0..{s64.shape[1] - 1}")
        clean = low_first >= layer
        glim = 2 * mult * float((gslow - gs64).abs()[clean].max())
        elim = 2 * mult * float((slow - s64).abs()[clean].max())
        ceng = torch.zeros_like(c64).scatter_(1, ids, True)
        for row in (ceng != c64).any(dim=1).nonzero().flatten().tolist():
            if row in ties:
                continue
            why = (f"MoE layer {layer}: engine experts {sorted(ids[row].tolist())}, float64 "
                   f"{c64[row].nonzero().flatten().tolist()}; float64 group gap {g(float(ggap[row]))} "
                   f"(limit {g(glim)}), expert gap {g(float(egap[row]))} (limit {g(elim)})")
            if ggap[row] < glim or egap[row] < elim:
                ties[row] = why
            else:
                errors.append(f"row {row} routed differently where float64's choice is clear: {why}")
        flipped = (c64 != clow).any(dim=1)
        low_first = torch.where(flipped & (low_first > layer), torch.tensor(layer), low_first)
    same = low_first == len(ref_routers)
    if not same.any():
        raise Fail("the low-precision copy routes every row differently from float64: no tolerance")
    err_low = float((llow - l64).abs()[same].max())
    return err_low, (~same).nonzero().flatten().tolist(), ties, errors


def greedy_cmp(ours, ref_tokens, ref_rows, threshold, tie_steps):
    """Compare greedy tokens; a difference where the reference row's top-2 margin is below
    @threshold, or at a step in @tie_steps (a routing near tie, routing_view), is a near tie:
    reported, not a failure, and the comparison stops there.  Returns (summary, problem or
    None)."""
    for j, t in enumerate(ours):
        if j >= len(ref_tokens):
            break
        if t == ref_tokens[j]:
            continue
        if j in tie_steps:
            return (f"routing near tie at step {j} (ours {t}, ref {ref_tokens[j]}), not compared further", None)
        m = margin(ref_rows[j])
        if m < threshold:
            return (f"near tie at step {j} (ours {t}, ref {ref_tokens[j]}, ref margin {g(m)} < {g(threshold)}), "
                    f"not compared further", None)
        return (f"differs at step {j}",
                f"step {j}: ours {t}, reference {ref_tokens[j]} (reference top-2 margin {g(m)} >= {g(threshold)})")
    return f"{len(ours)}/{len(ours)} match", None


def judge(tokens, ours, l64, tol, tol_desc, hf_tokens, hf_rows, ties, route_errors):
    """The TAP verdict of one engine run against the float64 reference on the same sequence.
    @ties: rows the engine routed differently at a near tie {row: why} (routing_view); those
    rows are left out of the logits check and reported, and at most a quarter of the rows may
    be left out.  @route_errors: rows routed differently where the choice was clear."""
    P = len(PROMPT)
    problems = list(route_errors)
    judged = torch.tensor([r not in ties for r in range(ours.shape[0])])
    if len(ties) * 4 > ours.shape[0]:
        problems.append(f"{len(ties)} of {ours.shape[0]} rows routed differently at near ties: too many to "
                        f"judge the rest")
    finite = torch.isfinite(ours)
    if not finite.all():
        bad_row = int((~finite).any(dim=1).nonzero()[0])
        problems.append(f"engine logits have NaN/Inf, first in row {bad_row}")
        err, r, c = math.inf, bad_row, int((~finite[bad_row]).nonzero()[0])
    else:
        d = (ours - l64).abs() * judged[:, None]
        err = float(d.max())
        r, c = divmod(int(d.argmax()), d.shape[1])
    ratio = err / tol if tol > 0 else math.inf
    head = f"max|ours-ref64| {g(err)} {'<=' if err <= tol else '>'} tol {g(tol)} [{tol_desc}], ratio {g(ratio)}"
    if ties:
        excused = (ours - l64).abs().max(dim=1).values
        head += "; routed differently at a near tie, not judged: " + ", ".join(
            f"row {row} ({why}; its err {g(float(excused[row]))})" for row, why in sorted(ties.items()))
    if not err <= tol:
        where = "prompt" if r < P else f"after generated token {r - P}"
        problems.append(f"largest difference at row {r} ({where}), vocab {c}: ours {float(ours[r, c])!r}, "
                        f"ref64 {float(l64[r, c])!r}")
        per_row = (ours - l64).abs().max(dim=1).values
        over = [f"{i}:{g(float(v))}" for i, v in enumerate(per_row) if judged[i] and not v <= tol]
        problems.append(f"rows over tol ({len(over)} of {len(per_row)}), row:err: {' '.join(over[:12])}")
    for j, t in enumerate(tokens):
        row = ours[P - 1 + j]
        if row[t] < row.max():
            problems.append(f"engine token {j} = {t} is not the argmax of its own logits row {P - 1 + j} "
                            f"(argmax {int(row.argmax())}, {g(float(row.max() - row[t]))} higher)")
            break
    # A token can flip only if two entries move by the margin in total, each by at most tol
    # when the logits check passes: near-tie threshold 2*tol keeps the two checks consistent.
    threshold = 2 * tol
    ref_rows = [l64[P - 1 + j] for j in range(len(tokens))]
    tie_steps = {row - (P - 1) for row in ties}
    tf, tf_problem = greedy_cmp(tokens, [int(torch.argmax(x)) for x in ref_rows], ref_rows, threshold, tie_steps)
    hg, hg_problem = greedy_cmp(tokens, hf_tokens, hf_rows, threshold, tie_steps)
    if tf_problem:
        problems.append("greedy vs ref64 (teacher-forced on our tokens): " + tf_problem)
    if hg_problem:
        problems.append("greedy vs transformers' own float64 greedy decode: " + hg_problem)
        problems.append(f"ours {tokens}")
        problems.append(f"hf   {hf_tokens}")
    return not problems, f"{head}; greedy vs ref64 {tf}; vs hf greedy {hg}", problems


def check_checkpoint(tap, args, arch, label, engine_dir, hf_dir, tensors, work, fp8=None):
    """The TAP lines of one checkpoint.  @fp8 ({weight name: kind}, the FP8 weights): GPU rows
    are judged against the model as served, w8a8 (w8a8_activations); otherwise, and for CPU
    rows, against transformers with unquantized activations."""
    dev, vocab = args.hf_device, TINY[arch]["vocab_size"]
    try:
        m64 = load_hf(arch, hf_dir, torch.float64, dev)
        verify_loaded(arch, m64, tensors)
    except Exception as e:
        tap.error(f"{arch} {label}: transformers cannot load the checkpoint as stored", e)
        return
    problems = hf_math_problems(arch, m64)
    tap.line(not problems, f"{arch} {label}: transformers reads the config as the reference doc's math "
                           f"(rope, softmax scale, dims)", problems)
    try:
        m32 = load_hf(arch, hf_dir, torch.float32, dev)
        m16 = load_hf(arch, hf_dir, torch.bfloat16, dev) if "gpu" in args.backends else None
        hf_tokens, hf_rows = hf_greedy(m64, PROMPT, args.steps)
    except Exception as e:
        tap.error(f"{arch} {label}: transformers float32/bfloat16 copies or greedy decode", e)
        return
    for backend in args.backends:
        mlas = ["", "naive", "absorbed"] if backend == "cpu" and arch == "kimi-k2" else [""]
        w8a8 = backend == "gpu" and bool(fp8)
        for mla in mlas:
            name = f"{arch} {label} / {backend}" + (f" --mla {mla}" if mla else "")
            name += f" {W8A8_TAG}" if w8a8 else ""
            try:
                out = os.path.join(work, "runs", f"{arch}-{label}-{backend}{'-' + mla if mla else ''}.json")
                tokens, ours, engine_routes = run_engine(args.build, engine_dir, backend, mla, args.steps, out,
                                                         vocab)
                seq = PROMPT + tokens[:-1]
                with contextlib.ExitStack() as served:
                    ref_tokens, ref_rows = hf_tokens, hf_rows
                    if w8a8:
                        # The model as served: the float64 reference, its greedy decode and the
                        # bfloat16 copy that sets the tolerance, all with w8a8 activations.
                        served.enter_context(w8a8_activations(m64, fp8))
                        served.enter_context(w8a8_activations(m16, fp8))
                        ref_tokens, ref_rows = hf_greedy(m64, PROMPT, args.steps)
                    with router_inputs(m64) as r64:
                        l64 = hf_logits(m64, seq)
                    if backend == "cpu":
                        # fp32 engine: an fp32 implementation of the same math lands within a small
                        # multiple of another fp32 implementation's (transformers in float32)
                        # distance to float64; the relative term covers summation-order noise where
                        # err32 happens to be tiny.
                        mult, low, low_name, rel = 4, m32, "err32", 1e-5
                    else:
                        # bf16 activations: within twice transformers-in-bfloat16's distance to float64.
                        mult, low, low_name, rel = 2, m16, "err_bf16", 0.0
                    with router_inputs(low) as rlow:
                        llow = hf_logits(low, seq)
                    err_low, low_flips, ties, route_errors = routing_view(r64, rlow, engine_routes, l64, llow,
                                                                          m64.config, mult)
                    tol = mult * err_low + rel * float(l64.abs().max())
                    tol_desc = f"{mult}*{low_name} {g(err_low)}"
                    if low_flips:
                        tol_desc += f" on the {len(l64) - len(low_flips)} rows it routes as float64"
                    if rel:
                        tol_desc += f" + {rel:g}*max|ref64|"
                good, msg, diag = judge(tokens, ours, l64, tol, tol_desc, ref_tokens, ref_rows, ties,
                                        route_errors)
                tap.line(good, f"{name}: {msg}", diag)
            except Exception as e:
                tap.error(name, e)


def cmd_check(args, tap):
    for arch in args.archs:
        try:
            native_dir = os.path.join(args.work, arch, "hf-native")
            tensors, note = build_native(arch, native_dir, args.hf_device)
            tap.line(True, f"{arch} hf-native: {note}")
        except Exception as e:
            tap.error(f"{arch} hf-native: building the transformers-native checkpoint", e)
        else:
            check_checkpoint(tap, args, arch, "hf-native", native_dir, native_dir, tensors, args.work)
        for quant in args.quants:
            try:
                src, dst, tensors, note, fp8 = build_synthetic(args.build, arch, quant, args.work)
                tap.line(True, f"{arch} {quant}: {note}")
            except Exception as e:
                tap.error(f"{arch} {quant}: preparing the make-model checkpoint", e)
                continue
            check_checkpoint(tap, args, arch, quant, src, dst, tensors, args.work, fp8)


def write_golden(path, obj):
    parts = []
    for k, v in obj.items():
        if k == "logits64":
            body = "[\n" + ",\n".join("  " + json.dumps(row) for row in v) + "\n ]"
        else:
            body = json.dumps(v)
        parts.append(f" {json.dumps(k)}: {body}")
    text = "{\n" + ",\n".join(parts) + "\n}\n"
    if json.loads(text) != obj:
        raise Fail(f"{path}: the JSON written does not read back equal")
    with open(path, "w") as f:
        f.write(text)


def cmd_golden(args, tap):
    os.makedirs(args.out, exist_ok=True)
    P = len(PROMPT)
    for arch in args.archs:
        try:
            src, dst, tensors, _, _ = build_synthetic(args.build, arch, "bf16", args.work)
            m64 = load_hf(arch, dst, torch.float64, args.hf_device)
            verify_loaded(arch, m64, tensors)
            problems = hf_math_problems(arch, m64)
            if problems:
                raise Fail("transformers does not read the config as the reference doc's math: "
                           + "; ".join(problems))
            m32 = load_hf(arch, dst, torch.float32, args.hf_device)
            tokens, rows = hf_greedy(m64, PROMPT, GOLDEN_STEPS)
            seq = PROMPT + tokens[:-1]
            l64, l32 = hf_logits(m64, seq), hf_logits(m32, seq)
            if not torch.isfinite(l64).all():
                raise Fail("float64 logits have NaN/Inf")
            # The full-sequence rows must pick the step-by-step tokens (they can differ from the
            # step-by-step rows at the level of the fp32 pieces inside the float64 model).
            drift = max(float((l64[P - 1 + j] - rows[j]).abs().max()) for j in range(GOLDEN_STEPS))
            for j in range(GOLDEN_STEPS):
                if int(torch.argmax(l64[P - 1 + j])) != tokens[j]:
                    raise Fail(f"step {j}: the full-sequence float64 row picks {int(torch.argmax(l64[P - 1 + j]))}, "
                               f"the step-by-step decode {tokens[j]} (margin {g(margin(rows[j]))}): a near "
                               f"tie, choose another prompt")
            margins = [margin(l64[P - 1 + j]) for j in range(GOLDEN_STEPS)]
            obj = {
                "make_model": make_model_args(arch, "bf16"),
                "prompt": PROMPT,
                "tokens": tokens,
                "logits64": l64.tolist(),
                "err32": float((l32 - l64).abs().max()),
                "margins": margins,
                "transformers": transformers.__version__,
                "torch": torch.__version__,
            }
            path = os.path.join(args.out, f"{arch}.json")
            write_golden(path, obj)
            tap.line(True, f"golden {arch}: wrote {path} ({len(seq)} rows, tokens {tokens}, "
                           f"err32 {g(obj['err32'])}, smallest margin {g(min(margins))}, "
                           f"full-sequence vs step-by-step rows {g(drift)})")
        except Exception as e:
            tap.error(f"golden {arch}", e)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["check", "golden"])
    p.add_argument("--build", default="build", help="build directory holding the sm120 binary")
    p.add_argument("--backends", default="cpu,gpu", help="engine backends to check (cpu, gpu)")
    p.add_argument("--work", help="work directory (default: a new one under /tmp, removed if all ok)")
    p.add_argument("--steps", type=int, default=32, help="greedy steps per engine run")
    p.add_argument("--out", default="tests/engine/golden", help="golden: output directory")
    p.add_argument("--archs", default=",".join(ARCHS), help="architectures (default: all)")
    p.add_argument("--quants", default=",".join(QUANTS), help="check: make-model formats (default: all)")
    p.add_argument("--hf-device", default="cpu", help="device for the transformers references")
    args = p.parse_args()
    args.backends = [b for b in args.backends.split(",") if b]
    args.archs = [a for a in args.archs.split(",") if a]
    args.quants = [q for q in args.quants.split(",") if q]
    for what, got, allowed in (("backend", args.backends, ("cpu", "gpu")), ("arch", args.archs, ARCHS),
                               ("format", args.quants, QUANTS)):
        for x in got:
            if x not in allowed:
                p.error(f"unknown {what} {x!r} (known: {', '.join(allowed)})")
    if args.steps < 1:
        p.error("--steps must be at least 1")
    args.build = os.path.abspath(args.build)
    exe = os.path.join(args.build, "sm120")
    if not os.access(exe, os.X_OK):
        print(f"Bail out! no executable {exe} (build it first, or pass --build)", flush=True)
        return 1
    temp_work = args.work is None
    args.work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="engine_hf."))
    os.makedirs(os.path.join(args.work, "runs"), exist_ok=True)
    args.out = os.path.abspath(args.out)

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
    except Exception:
        pass
    import safetensors
    tap = Tap()
    tap.note(f"transformers {transformers.__version__}, torch {torch.__version__}, "
             f"safetensors {getattr(safetensors, '__version__', '?')}; work dir {args.work}; "
             f"references on {args.hf_device}")
    if args.mode == "check":
        cmd_check(args, tap)
    else:
        cmd_golden(args, tap)
    status = tap.finish()
    if temp_work and status == 0:
        shutil.rmtree(args.work, ignore_errors=True)
    elif temp_work:
        tap.note(f"kept the work dir {args.work}")
    return status


if __name__ == "__main__":
    sys.exit(main())

"""engine_formats.py - reading and dequantizing `sm120 ref make-model` checkpoints
with torch alone, for tests/gpu/engine_hf.py.

Written from the formats' own definitions (DeepSeek FP8 block-128,
compressed-tensors pack-quantized INT4, ModelOpt NVFP4), independently of the engine's C code, so that a bug in one
does not hide the same bug in the other.  Every decoder works from the raw
bits:
  FP8 E4M3 (float8_e4m3fn)  sign, 4 exponent bits (bias 7), 3 mantissa bits;
                            e = 0 is subnormal (m/8 * 2^-6); 0x7f/0xff NaN
  DeepSeek FP8 block        W[r,c] = fp8(w[r,c]) * weight_scale_inv[r/128][c/128]
  compressed-tensors INT4   word weight_packed[r, c/8] holds element c in bits
  pack-quantized            4*(c%8) .. 4*(c%8)+3 as u = q + 8;
                            W[r,c] = (u - 8) * weight_scale[r, c/32]
  ModelOpt NVFP4            low nibble = even element, high nibble = odd;
                            W[r,c] = e2m1(nib) * fp8(weight_scale[r, c/16]) * weight_scale_2
The dequantized weights are exact in float64 and rounded once to float32
(the products need at most 30 significant bits, so this is the same value a
float32 multiply gives).
"""
import glob
import json
import math
import os

import torch
from safetensors import safe_open
from safetensors.torch import save_file

# E2M1 code -> value; bit 3 is the sign (code 8 is -0).
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
        -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)

# Names a quantized Linear's companions may have; none may be left over.
COMPANIONS = ("weight_scale_inv", "weight_scale_2", "weight_scale", "weight_packed", "weight_shape",
              "weight_zero_point", "weight_g_idx", "weight_global_scale", "input_global_scale",
              "input_scale")


class FormatError(Exception):
    """A checkpoint that does not follow the format definitions; the message says what differed."""


def e4m3_to_f64(t):
    """float8_e4m3fn tensor (or its bytes as uint8) -> float64, decoded from the bits."""
    b = (t if t.dtype == torch.uint8 else t.view(torch.uint8)).to(torch.int64)
    e = (b >> 3) & 0xF
    m = (b & 7).to(torch.float64)
    normal = (1.0 + m / 8.0) * torch.pow(2.0, (e - 7).to(torch.float64))
    subnormal = (m / 8.0) * 2.0 ** -6
    v = torch.where(e == 0, subnormal, normal)
    v = torch.where((b & 0x80) != 0, -v, v)
    return torch.where((b & 0x7F) == 0x7F, torch.full_like(v, float("nan")), v)


def selftest():
    """Check the bit decoder against torch's own float8_e4m3fn conversion on all 256 codes."""
    codes = torch.arange(256, dtype=torch.int64).to(torch.uint8)
    mine = e4m3_to_f64(codes)
    if hasattr(torch, "float8_e4m3fn"):
        theirs = codes.view(torch.float8_e4m3fn).to(torch.float64)
        both_nan = torch.isnan(mine) & torch.isnan(theirs)
        same = (mine == theirs) & (torch.signbit(mine) == torch.signbit(theirs))
        bad = ~(both_nan | same)
        if bad.any():
            c = int(bad.nonzero()[0])
            raise FormatError(f"FP8 E4M3 decoder self-test: code 0x{c:02x} decodes to {float(mine[c])!r}, "
                              f"torch says {float(theirs[c])!r}")
    if float(mine[0x7E]) != 448.0 or float(mine[0x01]) != 2.0 ** -9 or not math.isnan(float(mine[0xFF])):
        raise FormatError("FP8 E4M3 decoder self-test: 0x7e != 448, 0x01 != 2^-9 or 0xff not NaN")


def load_tensors(model_dir):
    """All tensors of a checkpoint directory: through model.safetensors.index.json's
    weight_map when there is one, else every *.safetensors file.  Returns {name: tensor}."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        files = sorted(set(weight_map.values()))
    else:
        weight_map = None
        files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(model_dir, "*.safetensors")))
    if not files:
        raise FormatError(f"{model_dir}: no *.safetensors files")
    tensors = {}
    for fname in files:
        with safe_open(os.path.join(model_dir, fname), framework="pt") as h:
            for name in h.keys():
                if name in tensors:
                    raise FormatError(f"{model_dir}: tensor {name} is stored twice (second time in {fname})")
                if weight_map is not None and weight_map.get(name) != fname:
                    raise FormatError(f"{model_dir}: tensor {name} is in {fname} but the index maps it "
                                      f"to {weight_map.get(name)}")
                tensors[name] = h.get_tensor(name)
    if weight_map is not None:
        missing = sorted(set(weight_map) - set(tensors))
        if missing:
            raise FormatError(f"{model_dir}: the index lists tensors no shard holds: {missing[:5]}")
    return tensors


def _need(cond, msg):
    if not cond:
        raise FormatError(msg)


def _expand(scale, rows, cols, block_rows, block_cols):
    """Per-block scales [ceil(rows/br), ceil(cols/bc)] -> one per element [rows, cols]."""
    return scale.repeat_interleave(block_rows, dim=0)[:rows].repeat_interleave(block_cols, dim=1)[:, :cols]


def dequant_fp8_block(name, w, scale_inv, block):
    """DeepSeek FP8 block: F8_E4M3 [o, i] times F32 weight_scale_inv [ceil(o/bo), ceil(i/bi)]."""
    _need(w.dtype == getattr(torch, "float8_e4m3fn", None),
          f"{name}: FP8 block weight is {w.dtype}, expected F8_E4M3 (torch.float8_e4m3fn)")
    _need(w.dim() == 2, f"{name}: FP8 block weight has shape {list(w.shape)}, expected 2-D")
    o, i = w.shape
    bo, bi = block
    want = [math.ceil(o / bo), math.ceil(i / bi)]
    _need(scale_inv.dtype == torch.float32, f"{name}_scale_inv is {scale_inv.dtype}, expected F32")
    _need(list(scale_inv.shape) == want,
          f"{name}_scale_inv has shape {list(scale_inv.shape)}, expected {want} for weight [{o}, {i}] "
          f"and blocks {bo}x{bi}")
    return e4m3_to_f64(w) * _expand(scale_inv.to(torch.float64), o, i, bo, bi)


def dequant_int4(prefix, packed, scale, shape, group):
    """compressed-tensors pack-quantized INT4, symmetric, group quantization along the input dim."""
    _need(packed.dtype == torch.int32, f"{prefix}weight_packed is {packed.dtype}, expected I32")
    _need(shape.dtype in (torch.int32, torch.int64) and shape.numel() == 2,
          f"{prefix}weight_shape is {shape.dtype} {list(shape.shape)}, expected I32 or I64 with 2 elements")
    o, i = (int(v) for v in shape.reshape(-1).tolist())
    _need(list(packed.shape) == [o, math.ceil(i / 8)],
          f"{prefix}weight_packed has shape {list(packed.shape)}, expected [{o}, {math.ceil(i / 8)}] "
          f"for weight_shape [{o}, {i}]")
    _need(scale.dtype == torch.bfloat16, f"{prefix}weight_scale is {scale.dtype}, expected BF16")
    _need(list(scale.shape) == [o, math.ceil(i / group)],
          f"{prefix}weight_scale has shape {list(scale.shape)}, expected [{o}, {math.ceil(i / group)}] "
          f"(group size {group})")
    words = packed.to(torch.int64) & 0xFFFFFFFF
    # nibble k of word j is element 8*j + k
    nib = torch.stack([(words >> (4 * k)) & 0xF for k in range(8)], dim=-1).reshape(o, -1)[:, :i]
    q = (nib - 8).to(torch.float64)
    return q * scale.to(torch.float64).repeat_interleave(group, dim=1)[:, :i]


def dequant_nvfp4(name, w, ws, ws2, group):
    """ModelOpt NVFP4: U8 [o, i/2] (low nibble = even element), F8_E4M3 weight_scale [o, i/16],
    F32 scalar weight_scale_2."""
    _need(w.dtype == torch.uint8, f"{name}: NVFP4 weight is {w.dtype}, expected U8")
    _need(w.dim() == 2, f"{name}: NVFP4 weight has shape {list(w.shape)}, expected 2-D")
    o, i = w.shape[0], 2 * w.shape[1]
    _need(ws.dtype == getattr(torch, "float8_e4m3fn", None), f"{name}_scale is {ws.dtype}, expected F8_E4M3")
    _need(list(ws.shape) == [o, math.ceil(i / group)],
          f"{name}_scale has shape {list(ws.shape)}, expected [{o}, {math.ceil(i / group)}] (group {group})")
    _need(ws2.dtype == torch.float32 and ws2.numel() == 1,
          f"{name}_scale_2 is {ws2.dtype} {list(ws2.shape)}, expected an F32 scalar")
    b = w.to(torch.int64)
    codes = torch.stack([b & 0xF, b >> 4], dim=-1).reshape(o, i)  # element 2j low, 2j+1 high
    v = torch.tensor(E2M1, dtype=torch.float64)[codes]
    sf = e4m3_to_f64(ws).repeat_interleave(group, dim=1)[:, :i]
    return v * sf * float(ws2.reshape(()).item())


def quant_settings(config, model_dir, expect):
    """Check config.json's quantization block against @expect (bf16|fp8|int4|nvfp4) and
    return the block / group size it names."""
    if "text_config" in config:
        raise FormatError("config.json nests the model in text_config (K2.5 layout): not handled here")
    q = config.get("quantization_config")
    legacy = os.path.join(model_dir, "hf_quant_config.json")
    if expect == "bf16":
        _need(q is None, f"bf16 checkpoint has a quantization_config: {q}")
        return None
    if expect == "nvfp4" and q is None and os.path.exists(legacy):
        with open(legacy) as f:
            lq = json.load(f).get("quantization", {})
        _need(lq.get("quant_algo") == "NVFP4", f"hf_quant_config.json quant_algo is {lq.get('quant_algo')}")
        return int(lq.get("group_size", 16))
    _need(isinstance(q, dict), f"{expect} checkpoint: config.json has no quantization_config")
    method = q.get("quant_method")
    if expect == "fp8":
        _need(method == "fp8", f"fp8 checkpoint: quant_method is {method!r}, expected 'fp8'")
        block = q.get("weight_block_size", [128, 128])
        _need(isinstance(block, list) and len(block) == 2, f"fp8 weight_block_size is {block!r}")
        return [int(block[0]), int(block[1])]
    groups = q.get("config_groups") or {}
    weights = [g.get("weights") or {} for g in groups.values()]
    if expect == "int4":
        _need(method == "compressed-tensors" and q.get("format") == "pack-quantized",
              f"int4 checkpoint: quant_method {method!r} format {q.get('format')!r}, "
              f"expected 'compressed-tensors' / 'pack-quantized'")
        _need(len(weights) == 1, f"int4 checkpoint: {len(weights)} config_groups, expected 1")
        wq = weights[0]
        _need(wq.get("num_bits") == 4 and wq.get("type") == "int" and wq.get("symmetric") is True
              and wq.get("strategy") == "group",
              f"int4 checkpoint: weights scheme {wq}, expected 4-bit symmetric int, strategy group")
        return int(wq.get("group_size", 32))
    if expect == "nvfp4":
        _need(method == "modelopt" and q.get("quant_algo") == "NVFP4",
              f"nvfp4 checkpoint: quant_method {method!r} quant_algo {q.get('quant_algo')!r}, "
              f"expected 'modelopt' / 'NVFP4'")
        sizes = {int(w.get("group_size", 16)) for w in weights} or {16}
        _need(len(sizes) == 1, f"nvfp4 checkpoint: group sizes {sorted(sizes)}")
        return sizes.pop()
    raise FormatError(f"unknown format {expect!r}")


def dequantize(tensors, config, model_dir, expect):
    """Every tensor of a make-model checkpoint as float32, quantized Linears dequantized.
    Returns (tensors, {weight name: format}) ."""
    selftest()
    setting = quant_settings(config, model_dir, expect)
    out, kinds, used = {}, {}, set()

    def put(name, value, kind, *consumed):
        _need(name not in out, f"{name}: produced twice")
        _need(bool(torch.isfinite(value).all()), f"{name}: dequantized weight has NaN/Inf")
        out[name] = value.to(torch.float32).contiguous()
        kinds[name] = kind
        used.update(consumed)

    for name in sorted(tensors):
        if name.endswith(".weight_scale_inv"):
            _need(expect == "fp8", f"{name}: an FP8 block scale in a {expect} checkpoint")
            base = name[: -len("_scale_inv")]
            _need(base in tensors, f"{name} has no {base}")
            put(base, dequant_fp8_block(base, tensors[base], tensors[name], setting), "fp8-block", base, name)
        elif name.endswith(".weight_packed"):
            _need(expect == "int4", f"{name}: an INT4 packed weight in a {expect} checkpoint")
            prefix = name[: -len("weight_packed")]
            for extra in ("weight_zero_point", "weight_g_idx"):
                _need(prefix + extra not in tensors,
                      f"{prefix}{extra} present: only symmetric INT4 without g_idx is expected")
            for need in ("weight_scale", "weight_shape"):
                _need(prefix + need in tensors, f"{name} has no {prefix}{need}")
            _need(prefix + "weight" not in tensors, f"{prefix}weight stored next to {name}")
            w = dequant_int4(prefix, tensors[name], tensors[prefix + "weight_scale"],
                             tensors[prefix + "weight_shape"], setting)
            put(prefix + "weight", w, "int4", name, prefix + "weight_scale", prefix + "weight_shape")
        elif name.endswith(".weight_scale_2"):
            _need(expect == "nvfp4", f"{name}: an NVFP4 scale in a {expect} checkpoint")
            base = name[: -len("_scale_2")]
            prefix = base[: -len("weight")]
            for need in (base, base + "_scale"):
                _need(need in tensors, f"{name} has no {need}")
            consumed = [base, base + "_scale", name]
            if prefix + "input_scale" in tensors:  # the activation scale: unused by W4A16 emulation
                s = tensors[prefix + "input_scale"]
                _need(s.dtype == torch.float32 and s.numel() == 1,
                      f"{prefix}input_scale is {s.dtype} {list(s.shape)}, expected an F32 scalar")
                consumed.append(prefix + "input_scale")
            w = dequant_nvfp4(base, tensors[base], tensors[base + "_scale"], tensors[name], setting)
            put(base, w, "nvfp4", *consumed)
    for name in sorted(tensors):
        if name in used:
            continue
        t = tensors[name]
        suffix = name.rsplit(".", 1)[-1]
        _need(suffix not in COMPANIONS, f"{name}: a quantization companion that belongs to no weight")
        _need(t.dtype in (torch.bfloat16, torch.float16, torch.float32),
              f"{name}: {t.dtype} tensor outside any recognised quantized Linear")
        put(name, t.to(torch.float64), str(t.dtype).replace("torch.", ""))
    return out, kinds


def write_f32_checkpoint(out_dir, config, tensors, model_type):
    """A plain float32 Hugging Face checkpoint: config.json without quantization_config
    (model_type set to the transformers class's) and one model.safetensors."""
    os.makedirs(out_dir, exist_ok=True)
    for old in glob.glob(os.path.join(out_dir, "*.safetensors")) + \
            glob.glob(os.path.join(out_dir, "*.json")):
        os.remove(old)
    cfg = dict(config)
    cfg.pop("quantization_config", None)
    cfg.pop("auto_map", None)  # remote-code classes: the explicit transformers class is used
    cfg["model_type"] = model_type
    cfg["torch_dtype"] = "float32"
    if "dtype" in cfg:
        cfg["dtype"] = "float32"
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(out_dir, "model.safetensors"),
              metadata={"format": "pt"})

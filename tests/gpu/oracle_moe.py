"""oracle_moe.py - the frameworks' own fused-MoE kernels, from their released
packages (tests/oracle/fetch.sh), as the oracle for the shim's fused-MoE rules
(GPU; tests/gpu/oracle_common.py says how a case runs and is judged):
SGLang 0.5.9's `fused_moe_kernel` (sglang-moe-2026-03), SGLang 0.5.23's
(sglang-moe-main, PDL on), vLLM 0.33.0's (vllm-moe-main) and SGLang's
`fused_moe_kernel_gptq_awq` at 0.5.9 and 0.5.23 (sglang-moe-gptq-awq).

Each runs through the framework's own host function (SGLang's
invoke_fused_moe_kernel, vLLM's invoke_fused_moe_triton_kernel) at
configurations over SM120's limit that the rules claim: the rules' exact
tile 128x256 with 8 warps and 4 stages (BK 128 for FP8 and INT4, 64 for
bf16; SGLang's default FP8 configuration) and buckets of the frameworks'
tuned files (TUNED), which the tile-generic rules take with the Python
hook's facts.  Formats: bf16; FP8 per tensor (static activation scale
0.0173, per-expert weight scales 0.011 .. 0.018), per channel (per-token
activation scales amax / 448, per-(expert, column) weight scales in
[0.5, 2] x 1e-2), 128x128 blocks (per-(token, 128-group) activation scales,
per-(expert, 128x128) weight scales in [0.5, 2] x 1e-2); INT4 W4A16 group 32
(two weights a byte, low nibble the even k, bf16 scales in [0.5, 2] x 1e-2,
no zero point: 8).  Each as the gate/up launch (top_k of the model, no routed
weight; vLLM's modular TritonExperts passes topk_weights None) and the down
launch (one row per routed token, top_k 1, routed weights in [0.1, 0.9]).
Shapes (odd token counts): SGLang 97 tokens (0.5.23: 389), 8 experts, top_k
3, hidden 1024, gate/up N 512; gptq 45 tokens (0.5.23: 301), 5 experts, top_k
3, hidden 768, N 384; vLLM 61 tokens, 6 experts, top_k 2, hidden 768, N 384:
the bundled kernel's 16-, 64- and 128-row tiles in turn.  The routing buffers are
moe_align_block_size's (per expert, the flat (token, slot) indices in order,
padded to BLOCK_SIZE_M with the sentinel numel; numel + (E + 1) x
(BLOCK_SIZE_M - 1) long), built here in torch; the activation quantizers
(sgl-kernel's / vLLM's CUDA ops, not in the wheels) are torch functions of
the same definition, and what they return is what the reference uses.
Zero points (has_zp) are not claimed: SGLang's gptq kernel with them must
be refused.  Nothing of the frameworks is committed.

  python3 tests/gpu/oracle_moe.py run OUT.pt GROUP...   (groups: sglang, gptq, main, vllm)
  python3 tests/gpu/oracle_moe.py check PLAIN.pt SHIM.pt
"""
import os
import sys

import torch
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import frameworks  # noqa: E402
from oracle_common import Case, main  # noqa: E402

A_SCALE = 0.0173
FP8_MAX = 448.0
# The bundled kernel takes its row tile from the rows per expert: vLLM's ~20
# get moe_gemm_*_m16 (its down GEMM, K 384: the decode kernel moe_gemm_*_d*),
# SGLang 0.5.9's ~36 m64, SGLang 0.5.23's ~145 m128.
SG = dict(tokens=97, experts=8, top_k=3, hidden=1024, inter=512)
SG23 = dict(tokens=389, experts=8, top_k=3, hidden=1024, inter=512)
GQ = dict(tokens=45, experts=5, top_k=3, hidden=768, inter=384)
GQ23 = dict(tokens=301, experts=5, top_k=3, hidden=768, inter=384)
VL = dict(tokens=61, experts=6, top_k=2, hidden=768, inter=384)


def tuned(bm, bn, bk, gm, warps, stages):
    """A bucket of a tuned config file, or a rule's tile."""
    return dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=gm,
                num_warps=warps, num_stages=stages)


FP8_TILE = tuned(128, 256, 128, 32, 8, 4)    # SGLang's default FP8 configuration
BF16_TILE = tuned(128, 256, 64, 32, 8, 4)
INT4_TILE = tuned(128, 256, 128, 32, 8, 4)


# ------------------------------------------------------------ quantizers

def group_quant(a, group):
    """Per (row, group of @group columns) e4m3 quantisation: scale = amax / 448."""
    g = a.float().view(a.shape[0], -1, group)
    scale = (g.abs().amax(-1, keepdim=True) / FP8_MAX).clamp(min=1e-10)
    q = (g / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.view(a.shape), scale.squeeze(-1).contiguous()


def tensor_quant(a, scale):
    """Static per-tensor e4m3 quantisation with @scale (a one-element tensor)."""
    return (a.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def token_quant(a):
    """Dynamic per-token e4m3 quantisation: scale [rows, 1] = row amax / 448."""
    scale = (a.float().abs().amax(-1, keepdim=True) / FP8_MAX).clamp(min=1e-10)
    return (a.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def scaled_fp8_quant(a, scale=None, use_per_token_if_dynamic=False):
    """sgl-kernel's scaled_fp8_quant: static per tensor, or dynamic per token."""
    return token_quant(a) if scale is None and use_per_token_if_dynamic else tensor_quant(a, scale)


QUANTIZE = {"tensor": lambda a: tensor_quant(a, torch.tensor([A_SCALE], device=a.device)),
            "channel": token_quant, "block": lambda a: group_quant(a, 128)}


# ------------------------------------------------------------ frameworks

_mods = {}


def sglang_module(release):
    """SGLang @release's fused_moe_triton_kernels with the quantizers above."""
    if release not in _mods:
        frameworks.STUBS["sglang"]()
        for pkg in ("sglang.srt.layers.quantization", "sglang.kernels.ops.quantization"):
            quant = sys.modules[pkg + ".fp8_kernel"]
            quant.sglang_per_token_group_quant_fp8 = quant.per_token_group_quant_fp8 = group_quant
            quant.scaled_fp8_quant = scaled_fp8_quant
            int8 = sys.modules[pkg + ".int8_kernel"]
            int8.per_token_group_quant_int8 = int8.per_token_quant_int8 = None
            int8.sglang_per_token_group_quant_int8 = None
        mod = frameworks.load("sglang", release, frameworks.sglang_moe_path(release))
        # SGLang swaps the dot of small FP8 tiles on Hopper (should_enable_swap_ab)
        mod.is_sm90_supported = lambda: torch.cuda.get_device_capability() == (9, 0)
        _mods[release] = mod
    return _mods[release]


def vllm_module(release):
    if release not in _mods:
        _mods[release] = frameworks.load_vllm_moe(release)
    return _mods[release]


# ------------------------------------------------------------ inputs

def routing(topk_ids, experts, block_m):
    """moe_align_block_size's buffers for @topk_ids."""
    flat = topk_ids.flatten().cpu()
    numel = flat.numel()
    size = numel + (experts + 1) * (block_m - 1)
    sorted_ids = torch.full((size,), numel, dtype=torch.int32)
    expert_ids = torch.zeros((size + block_m - 1) // block_m, dtype=torch.int32)
    pos = 0
    for e in range(experts):
        idx = (flat == e).nonzero().flatten().to(torch.int32)
        n = (idx.numel() + block_m - 1) // block_m * block_m
        sorted_ids[pos:pos + idx.numel()] = idx
        expert_ids[pos // block_m:(pos + n) // block_m] = e
        pos += n
    dev = topk_ids.device
    return sorted_ids.to(dev), expert_ids.to(dev), torch.tensor([pos], dtype=torch.int32,
                                                                device=dev)


def make_inputs(quant, down, dims, block_m, vllm, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    tokens, experts, top_k = dims["tokens"], dims["experts"], dims["top_k"]
    rows, k, n = ((tokens * top_k, dims["inter"], dims["hidden"]) if down
                  else (tokens, dims["hidden"], dims["inter"]))
    rand = lambda *shape: torch.rand(*shape, generator=g, device="cuda")
    inp = dict(a=torch.randn(rows, k, generator=g, device="cuda").to(torch.bfloat16))
    if quant == "bf16":
        inp["b"] = (torch.randn(experts, n, k, generator=g, device="cuda") * 0.05).to(torch.bfloat16)
    elif quant.startswith("int4"):
        inp["b"] = torch.randint(0, 256, (experts, n, k // 2), generator=g, device="cuda",
                                 dtype=torch.uint8)
        inp["b_scale"] = ((rand(experts, n, k // 32) * 1.5 + 0.5) * 1e-2).to(torch.bfloat16)
        if quant == "int4_zp":
            inp["zp"] = torch.randint(0, 256, (experts, n // 2, k // 32), generator=g,
                                      device="cuda", dtype=torch.uint8)
    else:
        inp["b"] = (torch.randn(experts, n, k, generator=g, device="cuda") * 100) \
            .clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        inp["b_scale"] = {
            "block": lambda: (rand(experts, n // 128, k // 128) * 1.5 + 0.5) * 1e-2,
            "channel": lambda: (rand(experts, n, 1) * 1.5 + 0.5) * 1e-2,
            "tensor": lambda: torch.linspace(0.011, 0.018, experts, device="cuda")}[quant]()
    inp["topk_ids"] = rand(tokens, experts).topk(top_k, dim=1).indices.to(torch.int32)
    inp["topk_weights"] = rand(tokens, top_k) * 0.8 + 0.1
    inp["sorted_ids"], inp["expert_ids"], inp["ntpp"] = routing(inp["topk_ids"], experts, block_m)
    if vllm and quant in QUANTIZE:
        # vLLM's caller quantizes the activations before the launch
        inp["aq"], inp["a_scale"] = QUANTIZE[quant](inp["a"])
    elif quant == "tensor":
        # SGLang's static activation scale (a tensor made outside any graph capture)
        inp["a_scale_in"] = torch.tensor([A_SCALE], device="cuda")
    return inp


class Bound:
    """One framework launch on static inputs @inp."""

    def __init__(self, fw, release, quant, down, dims, config, inp):
        self.fw, self.release, self.quant, self.down = fw, release, quant, down
        self.dims, self.config, self.inp = dims, config, inp
        n = inp["b"].shape[1]
        self.out = torch.full((dims["tokens"], dims["top_k"], n), float("nan"),
                              dtype=torch.bfloat16, device="cuda")
        self.seen = {}

    def __call__(self):
        i, q, top_k = self.inp, self.quant, 1 if self.down else self.dims["top_k"]
        if self.fw == "vllm":
            fp8 = q in QUANTIZE
            vllm_module(self.release).invoke_fused_moe_triton_kernel(
                i["aq"] if fp8 else i["a"], i["b"], self.out, i.get("a_scale"), i.get("b_scale"),
                i["topk_weights"] if self.down else None, i["sorted_ids"], i["expert_ids"],
                i["ntpp"], self.down, top_k, dict(self.config), tl.bfloat16, fp8, False,
                False, False, q == "channel", block_shape=[128, 128] if q == "block" else None)
            return
        mod = sglang_module(self.release)

        def keep(fn):
            def wrapped(*args, **kw):
                self.seen["aq"], self.seen["a_scale"] = fn(*args, **kw)
                return self.seen["aq"], self.seen["a_scale"]
            return wrapped
        mod.sglang_per_token_group_quant_fp8 = keep(group_quant)
        mod.scaled_fp8_quant = keep(scaled_fp8_quant)
        int4 = q.startswith("int4")
        mod.invoke_fused_moe_kernel(
            i["a"], i["b"], None, self.out,
            i.get("a_scale_in"),
            i.get("b_scale"), i.get("zp"), i["topk_weights"], i["topk_ids"], i["sorted_ids"],
            i["expert_ids"], i["ntpp"], self.down, top_k, dict(self.config), tl.bfloat16,
            q in QUANTIZE, False, False, int4, q == "channel",
            block_shape=[0, 32] if int4 else [128, 128] if q == "block" else None)

    def poison(self):
        self.out.fill_(float("nan"))

    def inputs(self):
        saved = {k: v.cpu().clone() for k, v in self.inp.items() if k != "a" or
                 self.quant not in QUANTIZE}
        if self.fw == "sglang" and self.quant in QUANTIZE:
            saved["aq"], saved["a_scale"] = self.seen["aq"].cpu().clone(), \
                self.seen["a_scale"].cpu().clone()
        return saved

    def outputs(self):
        return {"out": self.out.cpu().clone()}


def case(fw, release, quant, down, dims, config, rule, name, expect="reroute", reason=""):
    def make(seed):
        return make_inputs(quant, down, dims, config["BLOCK_SIZE_M"], fw == "vllm", seed)

    def bind(inp):
        return Bound(fw, release, quant, down, dims, config, inp)

    kernel = "fused_moe_kernel_gptq_awq" if quant.startswith("int4") else "fused_moe_kernel"
    label = {"bf16": "bf16", "tensor": "FP8 per tensor", "channel": "FP8 per channel",
             "block": "FP8 128x128 blocks", "int4": "INT4 W4A16 g32",
             "int4_zp": "INT4 W4A16 g32 zero points"}[quant]
    half = "down" if down else "gate/up"
    m, k, n = ((dims["tokens"] * dims["top_k"], dims["inter"], dims["hidden"]) if down
               else (dims["tokens"], dims["hidden"], dims["inter"]))
    tile = "x".join(str(config[x]) for x in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"))
    return Case(make, bind, name=f"{fw}-{release}-{name}", rule=rule, expect=expect,
                reason=reason, kernel=f"{kernel}@{fw}-{release}", dtype=label,
                shape=f"{half} M {m} K {k} N {n} E {dims['experts']} top_k {dims['top_k']}, "
                      f"{tile} {config['num_warps']}w {config['num_stages']}s",
                quant=quant, down=down, top_k=dims["top_k"], tokens=dims["tokens"])


def sglang_059():
    """SGLang 0.5.9's fused_moe_kernel: the default FP8 configuration and the
    bf16 tile, gate/up and down, then buckets of its tuned files
    (fused_moe_triton/configs/triton_3_5_1/ and triton_3_4_0/), each over
    101376 B on sm_90."""
    r = "sglang-moe-2026-03"
    cases = [case("sglang", "0.5.9", q, d, SG, tile, r, f"{q}-{'down' if d else 'gateup'}")
             for q, tile in (("block", FP8_TILE), ("tensor", FP8_TILE), ("bf16", BF16_TILE))
             for d in (False, True)]
    return cases + [
        # E=161,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8,per_channel_quant=True.json
        # bucket 4096: 163840 B on sm_90 (the refusal)
        case("sglang", "0.5.9", "channel", False, SG, tuned(64, 256, 128, 16, 4, 4), r,
             "channel-gateup-64x256x128"),
        case("sglang", "0.5.9", "channel", True, SG, tuned(64, 256, 128, 16, 4, 4), r,
             "channel-down-64x256x128"),
        # E=256,N=256,device_name=NVIDIA_B200,dtype=fp8_w8a8,block_shape=[128, 128].json
        # bucket 8: BLOCK_SIZE_M 16 (140288 B on sm_90 with the swapped dot)
        case("sglang", "0.5.9", "block", False, SG, tuned(16, 256, 128, 32, 8, 4), r,
             "block-gateup-bm16"),
        # E=160,N=384,device_name=NVIDIA_B200,dtype=fp8_w8a8.json bucket 3072:
        # BLOCK_SIZE_M 256 (163840 B on sm_90)
        case("sglang", "0.5.9", "tensor", False, SG, tuned(256, 256, 64, 16, 8, 5), r,
             "tensor-gateup-bm256"),
    ]


def gptq():
    """SGLang's fused_moe_kernel_gptq_awq at the rule's tile (196608 B on
    sm_90): 0.5.9 gate/up and down, 0.5.23 gate/up; zero points refused (with
    them Triton compiles stride_bzk, 1, in, and the rule's signature, which
    passes the three zero-point strides as 0, does not apply)."""
    r = "sglang-moe-gptq-awq"
    return [case("sglang", "0.5.9", "int4", False, GQ, INT4_TILE, r, "int4-gateup"),
            case("sglang", "0.5.9", "int4", True, GQ, INT4_TILE, r, "int4-down"),
            case("sglang", "0.5.23", "int4", False, GQ23, INT4_TILE, r, "int4-gateup"),
            case("sglang", "0.5.9", "int4_zp", False, GQ, INT4_TILE, r, "int4zp-gateup",
                 expect="refuse", reason="stride_bzk")]


def sglang_0523():
    """SGLang 0.5.23's fused_moe_kernel (add_mask_ptr, PDL on sm_90).  With
    add_mask_ptr None its runtime list is also sglang-moe-2026-03's; the
    compiled facts name add_mask_ptr among the arguments Triton compiled in,
    which that rule does not list, so sglang-moe-main reroutes it
    (tests/oracle/launches.py shows the same on the CPU)."""
    r = "sglang-moe-main"
    return [case("sglang", "0.5.23", "block", False, SG23, FP8_TILE, r, "block-gateup"),
            case("sglang", "0.5.23", "tensor", True, SG23, FP8_TILE, r, "tensor-down"),
            case("sglang", "0.5.23", "bf16", False, SG23, BF16_TILE, r, "bf16-gateup"),
            case("sglang", "0.5.23", "channel", False, SG23, tuned(64, 256, 128, 16, 4, 4), r,
                 "channel-gateup-64x256x128")]


def vllm_033():
    """vLLM 0.33.0's fused_moe_kernel at the rule's tiles, every format, the
    modular gate/up (topk_weights None) and the down launch; then the
    E=256,N=256,device_name=NVIDIA_B200,dtype=fp8_w8a8,block_shape=[128,128].json
    bucket 8 (BLOCK_SIZE_M 16, SWAP_AB on sm_90: 140288 B)."""
    r = "vllm-moe-main"
    return [case("vllm", "0.33.0", q, d, VL, BF16_TILE if q == "bf16" else FP8_TILE, r,
                 f"{q}-{'down' if d else 'gateup'}")
            for q in ("bf16", "tensor", "channel", "block") for d in (False, True)] + [
        case("vllm", "0.33.0", "block", False, VL, tuned(16, 256, 128, 32, 8, 4), r,
             "block-gateup-bm16")]


GROUPS = {"sglang": sglang_059, "gptq": gptq, "main": sglang_0523, "vllm": vllm_033}


def reference(meta, inp):
    """float64 of the frameworks' definition on the quantised operands."""
    quant, down, top_k, tokens = meta["quant"], meta["down"], meta["top_k"], meta["tokens"]
    if quant in QUANTIZE:
        a_scale = inp["a_scale"].double()
        a = inp["aq"].double() * (a_scale.repeat_interleave(128, 1) if quant == "block"
                                  else a_scale)
    else:
        a = inp["a"].double()
    b = inp["b"]
    if quant.startswith("int4"):
        nib = torch.stack([b & 0xF, b >> 4], dim=-1).flatten(-2).double() - 8
        b = nib * inp["b_scale"].double().repeat_interleave(32, 2)
    elif quant == "block":
        b = b.double() * inp["b_scale"].double().repeat_interleave(128, 1).repeat_interleave(128, 2)
    elif quant == "channel":
        b = b.double() * inp["b_scale"].double()
    elif quant == "tensor":
        b = b.double() * inp["b_scale"].double()[:, None, None]
    else:
        b = b.double()
    ids = inp["topk_ids"].long()
    out = torch.full((tokens, ids.shape[1], b.shape[1]), float("nan"), dtype=torch.float64)
    for e in range(b.shape[0]):
        t, s = (ids == e).nonzero(as_tuple=True)
        y = (a[t * top_k + s] if down else a[t]) @ b[e].T
        if down:
            y *= inp["topk_weights"][t, s].double()[:, None]
        out[t, s] = y
    return {"out": out}


if __name__ == "__main__":
    main(sys.argv, GROUPS, reference, "the framework", seed_base=300)

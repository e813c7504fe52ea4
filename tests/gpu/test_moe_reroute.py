"""test_moe_reroute.py - the shim's reroute mode on SGLang's and vLLM's own fused-MoE kernels (GPU).

The launches are the frameworks' own Triton kernels, from their released
packages (tests/oracle/fetch.sh; loaded as tests/gpu/oracle_moe.py loads
them), through their own host functions, at the Hopper configurations that
overflow SM120 (moe_cases.CONFIGS), on weights shaped like Kimi K2 or
GLM-4.7 at TP8 (moe_cases.MODELS).  The signatures (SIGS):

  sglang       SGLang 0.5.9's invoke_fused_moe_kernel: fused_moe_kernel
               (rule sglang-moe-2026-03) and, for int4,
               fused_moe_kernel_gptq_awq (sglang-moe-gptq-awq)
  sglang_main  SGLang 0.5.23's (add_mask_ptr, PDL): fused_moe_kernel
               (sglang-moe-main) and fused_moe_kernel_gptq_awq
  vllm         vLLM 0.33.0's invoke_fused_moe_triton_kernel: fused_moe_kernel
               (vllm-moe-main); its caller quantises the activations

driven as the frameworks' fused_experts drives them:

  router     random logits [M, E] -> top-8 experts (distinct) and their
             softmax weights (fp32); fixed seeds
  align      moe_cases.moe_align with the configuration's BLOCK_SIZE_M (the
             framework's buffer sizes); the experts e with e % 16 == 15 are
             treated as on another rank (their blocks get expert id -1, as
             with an EP expert map: the kernel writes zeros for their rows)
  gate/up    A = hidden [M, hidden] (FP8: quantised by the host function,
             SGLang's quantisers being moe_cases.quantize_act: dynamic
             per-tensor / per-token / per-token-group-of-128 scales), B = w1
             [E, 2*I, hidden], C [M, 8, 2*I], top_k 8, no routed weight
  act        silu(x[:, :I]) * x[:, I:] in torch (fp32, rounded to bf16)
  down       A = that [M*8, I] (requantised the same way), B = w2
             [E, hidden, I], C [M, 8, hidden], top_k 1, routed weight
  combine    sum over the 8 experts (fp32, rounded to bf16)

Weights are random with realistic scale (std ~ 1/sqrt(K), per-expert and
per-output-channel spread; outputs O(1)): FP8 E4M3 with fp32 scales per
expert (fp8_tensor), per output channel (fp8_channel) or per 128x128 block
(fp8_block); bf16; int4 (random nibbles, stored u = q + 8, low nibble = even
k) with bf16 scales per 32 along K, launched through fused_moe_kernel_gptq_awq.
The same script runs in a plain process and in one started under the shim
(sm120 run --mode reroute --target sm120 --set top_k=8 --set
hidden_size=<hidden>); `check` compares the two against a float64 reference.

Run as: python3 tests/gpu/test_moe_reroute.py MODE ...
  run OUTDIR --model kimi|glm --quant fp8_tensor|fp8_channel|fp8_block|bf16|int4
      [--sig sglang|sglang_main|vllm] [--batches 1,7,64,512,4096]
      [--block-m 32|64]
      every batch size M (default: $MOE_BATCHES, else "1 7 64 512 4096") in
      this one process, on fixed-seed inputs, at the quantisation's
      configuration (moe_cases.CONFIGS) or, with --block-m, its variant of
      that BLOCK_SIZE_M (moe_cases.BLOCK_M_CONFIGS: int4, bf16, block FP8); saves inputs and
      outputs to OUTDIR/run_<sig>_<model>_<quant>_m<M>[_bm<BLOCK_SIZE_M>].pt
      (CPU tensors; weights by
      checksum only, `check` regenerates them).  For M > 512 the rows of 512
      evenly spaced tokens are saved (the rest by checksum).  --sig defaults
      to sglang (int4: SGLang's gptq/awq kernel, sglang or sglang_main).
      Prints, per batch and half, the compiled kernel's cubin parameter
      count against PARAMS (ok / not ok).
  graph OUTDIR (the same options)
      per batch: a warm-up outside capture, then the gate/up launch, the
      activation and requantisation, the down launch and the combine
      captured in one CUDA graph and replayed on new inputs (hidden states
      and routing, copied into the static buffers); prints whether the
      replay equals an eager launch on those inputs bit for bit and differs
      from the warm-up's, and saves the replay's results like `run`
      (graph_<...>.pt).
  check PLAIN_DIR SHIM_DIR
      for every file of PLAIN_DIR: weights regenerated and matching both
      runs' checksums; gate/up inputs identical; nothing written past the
      routed rows (a guard token of C stays NaN); then per half (gate_up,
      down): the framework's kernel within 8 bf16 ulps of a float64
      reference on the GPU (dequantised weights, per-expert matmul; a sanity
      check of the test: a wrong reference or layout is off by far more),
      and the shim's result within 2 x the framework kernel's own error + 1
      bf16 ulp (the ulp at the largest |reference|), as test_reroute.py
      checks.  The
      down inputs come from each run's own gate/up result, so when they
      differ each run's down result is checked against a reference on its
      own inputs.
  enforce
      launch each over-limit configuration once (small example, Kimi
      shapes: every quantisation with SGLang 0.5.9's kernels, FP8 per-tensor
      with 0.5.23's and vLLM 0.33.0's) and report whether Triton raised
      OutOfResources with a requirement over 101376 B and that limit (run
      it under sm120 run --mode enforce --target sm120); a configuration
      that fits (SGLang's FP8 default for M <= E: 64x128x128, 4 stages) must
      run.
  refuse
      one gate/up launch (SGLang 0.5.9, FP8 per-tensor, Kimi shapes, top_k
      8 compiled in) for sm120 run --mode reroute --target sm120 --set
      top_k=9: the setting disagrees with what the Python hook saw Triton
      compile, so the shim must refuse the launch (a CUDA error from
      Triton's launcher, the context still usable).  The log check (the
      refusal naming SM120SHIM_TOP_K=9 and top_k 8) is moe_reroute_gpu.sh's.

Prints "ok - ..." / "not ok - ..." lines (and "# ..." comments).
"""
import glob
import math
import os
import re
import sys

import torch
import torch.nn.functional as F

import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import moe_cases as mc  # noqa: E402  (after the path is set)
import oracle_moe  # noqa: E402
from reroute_tap import (Tap, bf16_ulp, bits, cubin_param_count, expect_refused,  # noqa: E402
                         same_bits, shim_label)

TOP_K = mc.TOP_K
SEED, SEED_GRAPH, SEED_WEIGHTS = 20260901, 20260902, 20260903
DEFAULT_BATCHES = "1 7 64 512 4096"
SAVE_TOKENS = 512     # tokens whose rows are saved per batch (all when M <= this)
GUARD = 1             # tokens of C past the last one: must stay NaN
REMOTE_EVERY = 16     # experts e with e % 16 == 15 are "on another rank"
OOR_LIMIT = mc.SM120_SMEM_LIMIT

# signature -> (framework, release, quantisations launched, {kernel: the rule
# that must reroute it}).  SGLang 0.5.23's fused_moe_kernel with add_mask_ptr
# None has sglang-moe-2026-03's runtime list too: the Python hook's facts name
# add_mask_ptr among the compiled-in arguments, which sends it to
# sglang-moe-main (tests/oracle/launches.py).
SIGS = {
    "sglang": ("sglang", "0.5.9", mc.QUANTS,
               {"fused_moe_kernel": {"sglang-moe-2026-03"},
                "fused_moe_kernel_gptq_awq": {"sglang-moe-gptq-awq"}}),
    "sglang_main": ("sglang", "0.5.23", mc.QUANTS,
                    {"fused_moe_kernel": {"sglang-moe-main"},
                     "fused_moe_kernel_gptq_awq": {"sglang-moe-gptq-awq"}}),
    "vllm": ("vllm", "0.33.0", tuple(q for q in mc.QUANTS if q != "int4"),
             {"fused_moe_kernel": {"vllm-moe-main"}}),
}
# (framework, quant) -> cubin parameters of the compiled kernel: the real
# kernels as Triton 3.6 compiles them for sm_90 at CONFIGS (runtime arguments
# less constexprs, Nones and ints equal to 1, plus two scratch pointers; the
# same for both halves, every batch size and both models).  Per channel the
# scale strides equal to 1 drop; vLLM's per-tensor launch keeps one argument
# fewer than SGLang's.
PARAMS = {("sglang", "fp8_tensor"): 26, ("sglang", "fp8_channel"): 22,
          ("sglang", "fp8_block"): 24, ("sglang", "bf16"): 24, ("sglang", "int4"): 21,
          ("vllm", "fp8_tensor"): 25, ("vllm", "fp8_channel"): 22,
          ("vllm", "fp8_block"): 24, ("vllm", "bf16"): 24}


def framework_module(sig):
    """The framework module of @sig (oracle_moe's loaders), its kernels tapped."""
    fw, release = SIGS[sig][:2]
    mod = oracle_moe.sglang_module(release) if fw == "sglang" else oracle_moe.vllm_module(release)
    for name in SIGS[sig][3]:
        if not isinstance(getattr(mod, name), Tap):
            setattr(mod, name, Tap(getattr(mod, name)))
    return mod


def launch_framework(sig, quant, x, b, c, b_scale, topk_weights, topk_ids, sorted_ids,
                     expert_ids, post, down, config):
    """One fused-MoE launch through @sig's own host function: x [rows, K]
    bf16 activations (SGLang quantises them inside, through
    moe_cases.quantize_act; vLLM's caller quantises them first, here), B
    [E, N, K] (int4: uint8 [E, N, K / 2]) and its scale, C [M, 8, N], the
    routing from moe_align; @down: the down launch (top_k 1, routed weight).
    Returns (compiled kernel, A, A_scale): the operands the kernel read."""
    fw = SIGS[sig][0]
    mod = framework_module(sig)
    fp8 = quant.startswith("fp8")
    top_k = 1 if down else TOP_K
    block = ([0, mc.INT4_GROUP] if quant == "int4" else
             list(mc.FP8_BLOCK_SHAPE) if quant == "fp8_block" else None)
    seen = {}

    def quantizer(kind):
        def q(a, *args, **kwargs):
            if kind == "tensor" and kwargs.get("use_per_token_if_dynamic"):
                kind_now = "fp8_channel"
            else:
                kind_now = {"tensor": "fp8_tensor", "group": "fp8_block"}[kind]
            seen["a"] = mc.quantize_act(a, kind_now)
            return seen["a"]
        return q
    if fw == "sglang":
        mod.scaled_fp8_quant = quantizer("tensor")
        mod.sglang_per_token_group_quant_fp8 = quantizer("group")
        mod.invoke_fused_moe_kernel(
            x, b, None, c, None, b_scale, None, topk_weights, topk_ids, sorted_ids, expert_ids,
            post, down, top_k, dict(config), tl.bfloat16, fp8, False, False, quant == "int4",
            quant == "fp8_channel", block_shape=block)
        a, a_scale = seen.get("a", (x, None))
    else:
        a, a_scale = mc.quantize_act(x, quant)
        mod.invoke_fused_moe_triton_kernel(
            a, b, c, a_scale, b_scale, topk_weights, sorted_ids, expert_ids, post, down, top_k,
            dict(config), tl.bfloat16, fp8, False, False, False, quant == "fp8_channel",
            block_shape=block)
    return getattr(mod, mc.kernel_name(quant)).last, a, a_scale








def take_rows(t, idx):
    """t[idx] along dim 0 (through the raw bits: indexing FP8 directly is not
    supported by every torch); None stays None; a 1-element per-tensor scale
    is returned whole."""
    if t is None:
        return None
    if t.ndim == 1 and t.numel() == 1:
        return t.clone()
    return bits(t)[idx].view(t.dtype)


def checksum(t):
    """(dtype, shape, order-sensitive checksum of t's raw bits), in slices of
    2^26 elements (the weights run to 1.4e9 elements); None for None."""
    if t is None:
        return None
    flat = bits(t).reshape(-1)
    total, step = 0, 1 << 26
    for i in range(0, flat.numel(), step):
        part = flat[i:i + step].to(torch.int64)
        pos = torch.arange(i, i + part.numel(), device=part.device, dtype=torch.int64)
        total = (total + int((part * (pos % 1000003 + 1)).sum().item())) % (1 << 61)
    return (str(t.dtype), tuple(t.shape), total)


def parse_batches(text):
    return [int(x) for x in re.split(r"[,\s]+", text.strip()) if x]


# -----------------------------------------------------------------------------
# Weights
# -----------------------------------------------------------------------------


class Weights:
    """w1 [E, 2I, hidden] and w2 [E, hidden, I] of one (model, quant) with their
    scales (None for bf16), on the GPU, from a fixed seed."""

    def __init__(self, model, quant, dev="cuda"):
        self.model, self.quant = model, quant
        e, hidden, inter = mc.MODELS[model]
        seed = SEED_WEIGHTS + 100 * sorted(mc.MODELS).index(model) + mc.QUANTS.index(quant)
        g = torch.Generator(device=dev).manual_seed(seed)
        self.w1, self.w1_scale = make_weight(e, 2 * inter, hidden, quant, g, dev)
        self.w2, self.w2_scale = make_weight(e, hidden, inter, quant, g, dev)
        self.checksums = {k: checksum(getattr(self, k))
                          for k in ("w1", "w1_scale", "w2", "w2_scale")}

    def half(self, half):
        return (self.w1, self.w1_scale) if half == "gate_up" else (self.w2, self.w2_scale)


def make_weight(e, n, k, quant, g, dev, chunk=16):
    """One expert weight [e, n, k] in `quant` and its scales, generated `chunk`
    experts at a time (never the whole fp32 tensor: 5.6 GB for Kimi's w1).

    Values ~ N(0, 1/k) times a per-expert and a per-output-channel factor in
    [0.5, 1.5).  FP8: E4M3 of value / scale, scale = amax / 448 per expert
    ([e]), per output channel ([e, n, 1]) or per 128x128 block ([e, cdiv(n,
    128), cdiv(k, 128)]), fp32.  int4: random nibbles packed two per byte
    (low nibble = even k) [e, n, k / 2] uint8, bf16 scales [e, n, k / 32]
    with the same spread.  bf16: the values rounded.
    """
    bs = mc.FP8_BLOCK_SHAPE
    if quant == "int4":
        w = torch.empty(e, n, k // 2, dtype=torch.uint8, device=dev)
        s = torch.empty(e, n, k // mc.INT4_GROUP, dtype=torch.bfloat16, device=dev)
    elif quant == "bf16":
        w, s = torch.empty(e, n, k, dtype=torch.bfloat16, device=dev), None
    else:
        w = torch.empty(e, n, k, dtype=torch.float8_e4m3fn, device=dev)
        shape = {"fp8_tensor": (e,), "fp8_channel": (e, n, 1),
                 "fp8_block": (e, -(-n // bs[0]), -(-k // bs[1]))}[quant]
        s = torch.empty(shape, dtype=torch.float32, device=dev)
    for e0 in range(0, e, chunk):
        c = min(chunk, e - e0)
        spread = ((0.5 + torch.rand(c, 1, 1, generator=g, device=dev))
                  * (0.5 + torch.rand(c, n, 1, generator=g, device=dev)))
        if quant == "int4":
            # (u - 8) has std ~4.61 for u uniform in 0..15
            u = torch.randint(0, 16, (c, n, k), generator=g, device=dev, dtype=torch.uint8)
            w[e0:e0 + c] = u[..., 0::2] | (u[..., 1::2] << 4)
            gs = torch.rand(c, n, k // mc.INT4_GROUP, generator=g, device=dev) + 0.5
            s[e0:e0 + c] = (gs * spread / (4.61 * math.sqrt(k))).to(torch.bfloat16)
            continue
        x = torch.randn(c, n, k, generator=g, device=dev) * spread / math.sqrt(k)
        if quant == "bf16":
            w[e0:e0 + c] = x.to(torch.bfloat16)
            continue
        if quant == "fp8_tensor":
            sc = x.abs().amax(dim=(1, 2)).clamp(min=1e-12) / mc.FP8_MAX
            full = sc[:, None, None]
        elif quant == "fp8_channel":
            sc = x.abs().amax(dim=2, keepdim=True).clamp(min=1e-12) / mc.FP8_MAX
            full = sc
        else:
            nb, kb = s.shape[1], s.shape[2]
            xp = F.pad(x, (0, kb * bs[1] - k, 0, nb * bs[0] - n))
            sc = xp.view(c, nb, bs[0], kb, bs[1]).abs().amax(dim=(2, 4)).clamp(min=1e-12)
            sc = sc / mc.FP8_MAX
            full = sc.repeat_interleave(bs[0], 1)[:, :n].repeat_interleave(bs[1], 2)[:, :, :k]
        w[e0:e0 + c] = (x / full).clamp(-mc.FP8_MAX, mc.FP8_MAX).to(torch.float8_e4m3fn)
        s[e0:e0 + c] = sc
    return w, s


def dequantize_weight(w, s, quant, chunk=16):
    """float64 [E, N, K] of what the kernel multiplies: the FP8 value times its
    scale, bf16 as is, int4 bf16((u - 8) * scale) as the kernel rounds it."""
    e, n = w.shape[0], w.shape[1]
    k = w.shape[2] * 2 if quant == "int4" else w.shape[2]
    out = torch.empty(e, n, k, dtype=torch.float64, device=w.device)
    bs = mc.FP8_BLOCK_SHAPE
    for e0 in range(0, e, chunk):
        sl = slice(e0, min(e0 + chunk, e))
        if quant == "int4":
            p = w[sl]
            u = torch.stack([p & 15, p >> 4], dim=-1).reshape(p.shape[0], n, k)
            sc = s[sl].float().repeat_interleave(mc.INT4_GROUP, dim=2)
            out[sl] = ((u.float() - 8.0) * sc).to(torch.bfloat16).double()
        elif quant == "bf16":
            out[sl] = w[sl].double()
        else:
            v = w[sl].float().double()
            sc = s[sl].double()
            if quant == "fp8_tensor":
                v *= sc[:, None, None]
            elif quant == "fp8_channel":
                v *= sc
            else:
                v *= sc.repeat_interleave(bs[0], 1)[:, :n].repeat_interleave(bs[1], 2)[:, :, :k]
            out[sl] = v
    return out


# -----------------------------------------------------------------------------
# One batch: inputs, the two launches, what is saved
# -----------------------------------------------------------------------------


class MoECase:
    """One fused_experts pass at batch size M: static device inputs and outputs."""

    def __init__(self, model, quant, sig, batch, weights, seed, dev="cuda", block_m=None):
        assert quant in SIGS[sig][2], (sig, quant)
        self.model, self.quant, self.sig, self.batch = model, quant, sig, batch
        self.dev = dev
        self.experts, self.hidden_size, self.inter = mc.MODELS[model]
        self.config = mc.config_of(quant, block_m)
        self.w = weights
        self.inputs = self.make_inputs(seed)
        m = batch
        self.c1 = torch.empty(m + GUARD, TOP_K, 2 * self.inter, dtype=torch.bfloat16, device=dev)
        self.c3 = torch.empty(m + GUARD, TOP_K, self.hidden_size, dtype=torch.bfloat16, device=dev)
        self.reset_outputs()
        if m <= SAVE_TOKENS:
            self.tokens = torch.arange(m, device=dev)
        else:
            self.tokens = torch.arange(SAVE_TOKENS, device=dev) * m // SAVE_TOKENS
        self.rows = (self.tokens[:, None] * TOP_K + torch.arange(TOP_K, device=dev)).reshape(-1)
        self.name = f"{sig}_{model}_{quant}_m{m}" + (f"_bm{block_m}" if block_m else "")

    def make_inputs(self, seed):
        """Hidden states, routing and its alignment from `seed`."""
        dev, m, e = self.dev, self.batch, self.experts
        g = torch.Generator(device=dev).manual_seed(seed)
        hidden = torch.randn(m, self.hidden_size, generator=g, device=dev).to(torch.bfloat16)
        logits = torch.randn(m, e, generator=g, device=dev)
        top, ids = torch.topk(logits, TOP_K, dim=1)
        topk_weights = torch.softmax(top, dim=1).contiguous()
        ids = ids.to(torch.int32).contiguous()
        bm = self.config["BLOCK_SIZE_M"]
        sorted_ids, expert_ids, post = mc.moe_align(ids, bm, e, SIGS[self.sig][0])
        # Experts on another rank: their blocks get expert id -1 (EP expert map).
        remote = torch.arange(e, device=dev) % REMOTE_EVERY == REMOTE_EVERY - 1
        used = int(post.item()) // bm
        blk = expert_ids[:used].long()
        expert_ids[:used] = torch.where(remote[blk], -1, blk).to(torch.int32)
        return dict(hidden=hidden, topk_ids=ids, topk_weights=topk_weights,
                    sorted_ids=sorted_ids, expert_ids=expert_ids, post=post, remote=remote)

    def copy_inputs_from(self, fresh):
        """Put new inputs (make_inputs' dict, same shapes) into the static tensors."""
        for key, t in self.inputs.items():
            assert t.shape == fresh[key].shape, (key, t.shape, fresh[key].shape)
            t.copy_(fresh[key])

    def reset_outputs(self):
        """NaN everywhere: whatever a kernel does not write stays visible."""
        self.c1.fill_(float("nan"))
        self.c3.fill_(float("nan"))

    def launch(self):
        """The whole pass; returns the two compiled kernels (gate/up, down)."""
        d, q, m = self.inputs, self.quant, self.batch
        c1, c3 = self.c1[:m], self.c3[:m]
        routing = (d["topk_weights"], d["topk_ids"], d["sorted_ids"], d["expert_ids"], d["post"])
        k1, self.a1, self.a1_scale = launch_framework(
            self.sig, q, d["hidden"], self.w.w1, c1, self.w.w1_scale, *routing, False, self.config)
        x = c1.reshape(m * TOP_K, 2 * self.inter).float()
        self.act = (F.silu(x[:, :self.inter]) * x[:, self.inter:]).to(torch.bfloat16)
        k2, self.a2, self.a2_scale = launch_framework(
            self.sig, q, self.act, self.w.w2, c3, self.w.w2_scale, *routing, True, self.config)
        self.out = c3.float().sum(dim=1).to(torch.bfloat16)
        return [k1, k2]

    def snapshot(self):
        """What `check` needs, for the saved tokens (CPU): inputs and outputs per half."""
        d, t, r, m = self.inputs, self.tokens, self.rows, self.batch
        cpu = lambda x: None if x is None else x.cpu()  # noqa: E731
        gate_up = dict(
            hidden=cpu(d["hidden"][t]), a=cpu(take_rows(self.a1, t)),
            a_scale=cpu(take_rows(self.a1_scale, t)),
            topk_ids=cpu(d["topk_ids"][t]), topk_weights=cpu(d["topk_weights"][t]),
            sorted_ids=cpu(d["sorted_ids"]), expert_ids=cpu(d["expert_ids"]), post=cpu(d["post"]),
            remote=cpu(d["remote"]),
            checksums={k: checksum(v) for k, v in (
                ("hidden", d["hidden"]), ("topk_ids", d["topk_ids"]),
                ("topk_weights", d["topk_weights"]), ("a", self.a1), ("a_scale", self.a1_scale))})
        down = dict(
            act=cpu(self.act[r]), a=cpu(take_rows(self.a2, r)),
            a_scale=cpu(take_rows(self.a2_scale, r)),
            checksums={"a": checksum(self.a2), "a_scale": checksum(self.a2_scale)})
        return dict(
            tokens=cpu(t),
            halves={"gate_up": dict(inputs=gate_up, output=cpu(self.c1[t])),
                    "down": dict(inputs=down, output=cpu(self.c3[t]))},
            out=cpu(self.out[t]),
            guard={"gate_up": bool(torch.isnan(self.c1[m:]).all()),
                   "down": bool(torch.isnan(self.c3[m:]).all())})

    def save(self, outdir, mode, snap=None):
        rec = dict(name=self.name, mode=mode, sig=self.sig, model=self.model, quant=self.quant,
                   batch=self.batch, config=dict(self.config), weights=self.w.checksums,
                   kernels=getattr(self, "described", []))
        rec.update(snap if snap is not None else self.snapshot())
        torch.save(rec, os.path.join(outdir, f"{mode}_{self.name}.pt"))


def describe(case, kernels):
    case.described = []
    for half, k in zip(("gate_up", "down"), kernels):
        fig = (k.metadata.name, k.metadata.shared, cubin_param_count(k))
        case.described.append(fig)
        want = PARAMS[(SIGS[case.sig][0], case.quant)]
        good = fig[0] == mc.kernel_name(case.quant) and fig[2] == want and fig[1] > OOR_LIMIT
        print(f"{'ok' if good else 'not ok'} - {case.name} {half} ({SIGS[case.sig][0]} "
              f"{SIGS[case.sig][1]}): {fig[0]}: {fig[1]} B shared memory (over {OOR_LIMIT}), "
              f"{fig[2]} cubin parameters (expected {want}), {k.metadata.num_warps} warps, "
              f"{k.metadata.num_stages} stages")


# -----------------------------------------------------------------------------
# run / graph / enforce / refuse
# -----------------------------------------------------------------------------


def run_mode(outdir, model, quant, sig, batches, block_m=None):
    os.makedirs(outdir, exist_ok=True)
    weights = Weights(model, quant)
    for m in batches:
        case = MoECase(model, quant, sig, m, weights, SEED + m, block_m=block_m)
        kernels = case.launch()
        torch.cuda.synchronize()
        describe(case, kernels)
        case.save(outdir, "run")
        del case
    print(f"# run ({shim_label()}): {sig} {model} {quant} BLOCK_SIZE_M "
          f"{mc.config_of(quant, block_m)['BLOCK_SIZE_M']}, batches {batches}: saved to {outdir}")


def graph_mode(outdir, model, quant, sig, batches, block_m=None):
    os.makedirs(outdir, exist_ok=True)
    who = shim_label()
    weights = Weights(model, quant)
    for m in batches:
        case = MoECase(model, quant, sig, m, weights, SEED + m, block_m=block_m)
        fresh = case.make_inputs(SEED_GRAPH + m)
        label = f"graph ({who}) {case.name}"
        # Warm-up outside capture: Triton compiles and loads its modules here.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            kernels = case.launch()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        describe(case, kernels)
        warm = case.snapshot()

        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            case.launch()
        case.copy_inputs_from(fresh)
        case.reset_outputs()
        graph.replay()
        torch.cuda.synchronize()
        replayed = case.snapshot()

        case.reset_outputs()  # the same inputs, launched eagerly
        case.launch()
        torch.cuda.synchronize()
        eager = case.snapshot()
        for half in ("gate_up", "down"):
            r = replayed["halves"][half]["output"]
            same = same_bits(r, eager["halves"][half]["output"])
            print(f"{'ok' if same else 'not ok'} - {label} {half}: the replay on new inputs "
                  f"equals an eager launch on them, bit for bit")
            moved = not same_bits(r, warm["halves"][half]["output"])
            print(f"{'ok' if moved else 'not ok'} - {label} {half}: the replay read the new "
                  f"inputs (its results differ from the warm-up's)")
        case.save(outdir, "graph", replayed)
        del graph, case
    print(f"# graph ({who}): {sig} {model} {quant}, batches {batches}: saved to {outdir}")


def config_text(config):
    return "{BLOCK_SIZE_M}x{BLOCK_SIZE_N}x{BLOCK_SIZE_K}, GROUP_SIZE_M {GROUP_SIZE_M}, " \
           "{num_warps} warps, {num_stages} stages".format(**config)


def example_launch(sig, quant, model, half, config=None, dev="cuda", experts=8, tokens=4):
    """A small launch through @sig's host function with the test's layout and
    the model's real N and K: "gate_up" A = hidden [tokens, hidden], B = w1
    [experts, 2*I, hidden], top_k 8, no routed weight; "down" A = [tokens * 8,
    I], B = w2 [experts, hidden, I], top_k 1, routed weight.  Every token
    routed to experts 0..7.  Zero data: for compiling and launching, not
    results.  Returns the compiled kernel."""
    _, hidden, inter = mc.MODELS[model]
    config = config or mc.CONFIGS[quant]
    n, k = (2 * inter, hidden) if half == "gate_up" else (hidden, inter)
    rows = tokens if half == "gate_up" else tokens * TOP_K
    x = torch.zeros(rows, k, dtype=torch.bfloat16, device=dev)
    if quant == "int4":
        b = torch.zeros(experts, n, k // 2, dtype=torch.uint8, device=dev)
        b_scale = torch.ones(experts, n, k // mc.INT4_GROUP, dtype=torch.bfloat16, device=dev)
    elif quant == "bf16":
        b, b_scale = torch.zeros(experts, n, k, dtype=torch.bfloat16, device=dev), None
    else:
        b = torch.zeros(experts, n, k, dtype=torch.uint8, device=dev).view(torch.float8_e4m3fn)
        b_scale = {"fp8_tensor": lambda: torch.ones(experts, device=dev),
                   "fp8_channel": lambda: torch.ones(experts, n, 1, device=dev),
                   "fp8_block": lambda: torch.ones(experts, -(-n // 128), -(-k // 128),
                                                   device=dev)}[quant]()
    topk_ids = torch.arange(TOP_K, dtype=torch.int32, device=dev).repeat(tokens, 1)
    topk_w = torch.full((tokens, TOP_K), 1.0 / TOP_K, device=dev)
    c = torch.empty(tokens, TOP_K, n, dtype=torch.bfloat16, device=dev)
    routing = mc.moe_align(topk_ids, config["BLOCK_SIZE_M"], experts, SIGS[sig][0])
    return launch_framework(sig, quant, x, b, c, b_scale, topk_w, topk_ids, *routing,
                            half == "down", config)[0]


def enforce_mode():
    """Each over-limit configuration once; Triton must refuse it as an SM120 card would."""
    from triton.runtime.errors import OutOfResources

    who = shim_label()
    over = [("sglang", q) for q in mc.QUANTS] + [("sglang_main", "fp8_tensor"),
                                                  ("vllm", "fp8_tensor")]
    for sig, quant in over:
        what = (f"{mc.kernel_name(quant)} ({SIGS[sig][0]} {SIGS[sig][1]}, {quant}, "
                f"{config_text(mc.CONFIGS[quant])})")
        try:
            example_launch(sig, quant, "kimi", "gate_up")
            torch.cuda.synchronize()
            print(f"not ok - enforce ({who}): {what} ran: no OutOfResources (is the shim "
                  f"preloaded in enforce mode, target sm120?)")
        except OutOfResources as e:
            msg = str(e).splitlines()[0] if str(e) else repr(e)
            fig = re.search(r"Required: (\d+), Hardware limit: (\d+)", msg)
            good = bool(fig) and int(fig[2]) == OOR_LIMIT and int(fig[1]) > OOR_LIMIT
            print(f"{'ok' if good else 'not ok'} - enforce ({who}): {what}: OutOfResources: {msg}")
    # SGLang's FP8 default for M <= E: 73728 B on sm_120, 98304 B on sm_90.
    fit = mc._cfg(64, 128, 128, 1, 4, 4)
    what = f"fused_moe_kernel (sglang 0.5.9, fp8_tensor, {config_text(fit)})"
    try:
        example_launch("sglang", "fp8_tensor", "kimi", "gate_up", config=fit)
        torch.cuda.synchronize()
        print(f"ok - enforce ({who}): {what} fits and runs")
    except Exception as e:  # noqa: BLE001  (any failure is the finding)
        print(f"not ok - enforce ({who}): {what} failed: {type(e).__name__}: {e}")


def refuse_mode():
    """One gate/up launch (top_k 8 compiled in) under SM120SHIM_TOP_K=9: it must refuse it."""
    expect_refused("fused_moe_kernel gate/up launch (SGLang 0.5.9, fp8_tensor) with "
                   "SM120SHIM_TOP_K 9 against the compiled 8",
                   lambda: example_launch("sglang", "fp8_tensor", "kimi", "gate_up"),
                   "in reroute mode, target sm120, with top_k=9")


# -----------------------------------------------------------------------------
# check: float64 references and the tolerance
# -----------------------------------------------------------------------------


def dequantize_act(a, scale, quant, dev):
    """float64 activations the kernel multiplies: FP8 value times its scale."""
    a = a.to(dev)
    if quant in ("bf16", "int4"):
        return a.double()
    v = a.float().double()
    s = scale.to(dev).double()
    if quant == "fp8_tensor":
        return v * s[0]
    if quant == "fp8_channel":
        return v * s
    g = mc.FP8_BLOCK_SHAPE[1]
    return v * s.repeat_interleave(g, dim=1)[:, :v.shape[1]]


def reference(rec, half, w_deq, dev):
    """float64 [tokens, 8, N] for the saved tokens: routed row (t, j) is
    A_row . W[topk_ids[t, j]] (zero for an expert on another rank), times
    topk_weights[t, j] for the down half; A_row is token t's (gate/up) or
    routed row t*8+j's (down) dequantised activations."""
    g = rec["halves"]["gate_up"]["inputs"]
    quant = rec["quant"]
    ids = g["topk_ids"].to(dev).long()
    t = ids.shape[0]
    if half == "gate_up":
        a = dequantize_act(g["a"], g["a_scale"], quant, dev)
        a = a[:, None, :].expand(t, TOP_K, a.shape[1]).reshape(t * TOP_K, a.shape[1])
    else:
        inp = rec["halves"]["down"]["inputs"]
        a = dequantize_act(inp["a"], inp["a_scale"], quant, dev)
    flat = ids.reshape(-1)
    remote = g["remote"].to(dev)[flat]
    out = torch.zeros(t * TOP_K, w_deq.shape[1], dtype=torch.float64, device=dev)
    for e in torch.unique(flat[~remote]).tolist():
        sel = torch.nonzero(flat == e).squeeze(1)
        out[sel] = a[sel] @ w_deq[e].T
    if half == "down":
        out *= g["topk_weights"].to(dev).double().reshape(-1, 1)
    return out.view(t, TOP_K, -1)




def max_err(x, ref):
    """max |x - ref|; inf if x has a NaN or an infinity."""
    d = (x.to(ref.device).double() - ref).abs()
    if d.numel() == 0:
        return 0.0
    return d.max().item() if torch.isfinite(d).all() else math.inf


def same_inputs(a, b):
    """Are two inputs dicts (tensors, checksums) identical, tensors bit for bit?"""
    if a.keys() != b.keys():
        return False
    for k, v in a.items():
        w = b[k]
        if torch.is_tensor(v) and torch.is_tensor(w):
            if not same_bits(v, w):
                return False
        elif torch.is_tensor(v) or torch.is_tensor(w) or v != w:
            return False
    return True


NAME_RE = re.compile(r"^(run|graph)_(?P<sig>sglang_main|sglang|vllm)_(?P<model>[a-z0-9]+)_"
                     r"(?P<quant>\w+?)_m(?P<batch>\d+)(_bm\d+)?\.pt$")


def check_mode(plain_dir, shim_dir):
    dev = "cuda"
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(plain_dir, "*.pt")))
    if not names:
        print(f"not ok - check: no results in {plain_dir}")
        return
    recs = []
    for n in names:
        # <mode>_<sig>_<model>_<quant>_m<M>[_bm<BLOCK_SIZE_M>].pt (MoECase.save): grouped by
        # (model, quant) so that each set of weights is regenerated once
        parts = NAME_RE.match(n)
        if not parts:
            print(f"not ok - check: {n}: not a result file of this test")
            continue
        recs.append((parts["model"], parts["quant"], n))
    key, deq = None, None
    for model, quant, n in sorted(recs):
        a = torch.load(os.path.join(plain_dir, n), weights_only=False)
        label = f"{a['mode']} {a['sig']} {model} {quant} M={a['batch']}" \
            f" BLOCK_SIZE_M {a['config']['BLOCK_SIZE_M']}"
        path = os.path.join(shim_dir, n)
        if not os.path.exists(path):
            print(f"not ok - {label}: no result under the shim ({path})")
            continue
        b = torch.load(path, weights_only=False)
        if key != (model, quant):
            key, deq = (model, quant), None
            torch.cuda.empty_cache()
            weights = Weights(model, quant, dev)
            deq = {h: dequantize_weight(*weights.half(h), quant) for h in ("gate_up", "down")}
            w_sums = weights.checksums
            del weights
        if a["weights"] != w_sums or b["weights"] != w_sums:
            print(f"not ok - {label}: the weights differ from the regenerated ones "
                  f"(plain {a['weights'] == w_sums}, shim {b['weights'] == w_sums})")
            continue
        if not same_inputs(a["halves"]["gate_up"]["inputs"], b["halves"]["gate_up"]["inputs"]):
            print(f"not ok - {label}: the two runs had different inputs")
            continue
        guards = [r["guard"][h] for r in (a, b) for h in ("gate_up", "down")]
        print(f"{'ok' if all(guards) else 'not ok'} - {label}: nothing written past the routed "
              f"rows (the guard token of C stays NaN; plain gate/up, down, shim gate/up, down: "
              f"{guards})")

        same_down = same_inputs(a["halves"]["down"]["inputs"], b["halves"]["down"]["inputs"])
        if not same_down:
            print(f"# {label}: the down inputs differ (they come from each run's gate/up "
                  f"result): each down result is checked against a reference on its own inputs")
        for half in ("gate_up", "down"):
            ref_a = reference(a, half, deq[half], dev)
            own = half == "down" and not same_down   # the shim's down ran on its own inputs
            ref_b = reference(b, half, deq[half], dev) if own else ref_a
            plain, shim = a["halves"][half]["output"], b["halves"][half]["output"]
            ulp = bf16_ulp(ref_a.abs().max().item())
            e_p, e_s = max_err(plain, ref_a), max_err(shim, ref_b)
            sane = e_p <= 8 * ulp
            print(f"{'ok' if sane else 'not ok'} - {label} {half}: the framework's kernel agrees "
                  f"with float64: max|err| {e_p:.2e} ({'<=' if sane else '>'} 8 ulp {8 * ulp:.2e})")
            fits = e_s <= 2 * e_p + ulp
            print(f"{'ok' if fits else 'not ok'} - {label} {half}: rerouted result within 2x the "
                  f"framework kernel's error + 1 bf16 ulp of float64: max|err| {e_s:.2e} "
                  f"{'<=' if fits else '>'} 2*{e_p:.2e}+{ulp:.2e}")
            differ = int((bits(plain) != bits(shim)).sum())
            print(f"# {label} {half}: {differ} of {plain.numel()} values differ from the run "
                  f"without the shim")
        d_out = max_err(b["out"], a["out"].to(dev).double())
        print(f"# {label}: combined output (sum over the experts): max|shim - plain| {d_out:.2e}")


# -----------------------------------------------------------------------------


USAGE = ("usage: test_moe_reroute.py run|graph OUTDIR --model kimi|glm --quant "
         f"{'|'.join(mc.QUANTS)} [--sig {'|'.join(SIGS)}] [--batches 1,7,...]\n"
         "       [--block-m 32|64]\n"
         "       test_moe_reroute.py check PLAIN_DIR SHIM_DIR\n"
         "       test_moe_reroute.py enforce | refuse")


def main(argv):
    if len(argv) < 2 or argv[1] not in ("run", "graph", "check", "enforce", "refuse"):
        print(__doc__)
        return 2
    mode = argv[1]
    if mode == "check":
        if len(argv) != 4:
            print(USAGE)
            return 2
        check_mode(argv[2], argv[3])
        return 0
    if mode == "enforce":
        enforce_mode()
        return 0
    if mode == "refuse":
        refuse_mode()
        return 0
    rest = argv[2:]
    opts = {"--model": None, "--quant": None, "--sig": "sglang",
            "--batches": os.environ.get("MOE_BATCHES") or DEFAULT_BATCHES, "--block-m": None}
    for opt in list(opts):
        if opt in rest:
            i = rest.index(opt)
            if i + 1 >= len(rest):
                print(USAGE)
                return 2
            opts[opt] = rest[i + 1]
            del rest[i:i + 2]
    model, quant, sig = opts["--model"], opts["--quant"], opts["--sig"]
    if len(rest) != 1 or model not in mc.MODELS or quant not in mc.QUANTS or sig not in SIGS:
        print(USAGE)
        return 2
    if quant not in SIGS[sig][2]:
        print(f"--quant {quant} is not launched with --sig {sig} (int4: SGLang only)")
        return 2
    block_m = opts["--block-m"]
    if block_m is not None:
        have = sorted(bm for q, bm in mc.BLOCK_M_CONFIGS if q == quant)
        if not block_m.isdigit() or int(block_m) not in have:
            print(f"--block-m {block_m}: --quant {quant} has a configuration at BLOCK_SIZE_M "
                  f"{have or 'none'} besides its own (moe_cases.BLOCK_M_CONFIGS)")
            return 2
        block_m = int(block_m)
    batches = parse_batches(opts["--batches"])
    (run_mode if mode == "run" else graph_mode)(rest[0], model, quant, sig, batches, block_m)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

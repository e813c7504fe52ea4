"""oracle_lightning.py - vLLM's (0.33.0) and SGLang's (0.5.9, 0.5.23) own
lightning attention (lightning_attn.py), from their released packages, as
the oracle for rule lightning-kv-parallel (GPU; run by
tests/gpu/oracle_lightning.sh).

The kernel files come from the wheels unpacked by tests/oracle/fetch.sh;
nothing of either framework is committed.  At d = e = 128 in fp32 (MiniMax's
and Bailing's head size) `_fwd_kv_parallel` takes 164352 B on an H100/H200
(131584 B on sm_120), over SM120's 101376 B: under
`sm120 run --mode reroute --target sm120` the shim reroutes it to
lightning_kv_d128_e128_fp32; the call's three other kernels fit and run as
they are.

Rerouted cases, every scalar distinct, q/k/v fp32 as MiniMax's linear
attention makes them (silu of an fp32 projection: here silu of a normal
sample), the decay slopes distinct per head (MiniMax's 2^(-8 (i + 1) / h),
scaled), a random fp32 kv history:
  call-*    the release's lightning_attention host function (_attention.
            forward: all four kernels), outputs o [b, h, n, e] and kv
            [b, h, NUM_BLOCK + 1, d, e] (each block's incoming state, then
            the final one); vLLM 0.33.0 MiniMax at TP 8 (8 heads, 1000
            tokens: the last block 232) and a 37-token prefill, SGLang 0.5.9
            16 heads of 513 tokens, SGLang 0.5.23 batch 2 of 777 tokens.
  kernel-*  `_fwd_kv_parallel` alone, launched with the arguments the host
            builds (K_decay = exp(-s (BLOCK - 1 - i)) by torch), its output
            kv [b, h, NUM_BLOCK, d, e] NaN before every launch: vLLM 0.33.0
            at 1000 tokens, SGLang 0.5.23 at 1 token (n and NUM_BLOCK
            compiled in) and at 511.
Refused: `_fwd_kv_parallel` launched with 8 warps (the same 164352 B; the
rule's tile runs 4): refused when Triton loads it, OutOfResources as on the
card.

Run as: python3 tests/gpu/oracle_lightning.py MODE ...
  run OUT.pt       oracle_common.run: each rerouted case eagerly, then
                   captured in a CUDA graph and replayed on new inputs;
                   the refused case once.
  check PLAIN.pt SHIM.pt
                   inputs identical; each output against float64 (call-*:
                   the composition of the four kernels' math, kernel-*:
                   _fwd_kv_parallel's): the shim's max |error| within 2 x
                   the framework's own + 1 fp32 ulp at the largest
                   |reference| (the framework's dots are TF32, the bundled
                   kernel's fp32); the framework's own error under 1% of
                   the largest |reference|, so the reference is its math.
  logcheck OUT.pt.json LOG...
                   oracle_common.logcheck: two rerouted launches per
                   rerouted launch of a case (eager and capture), one
                   refusal with its reason, nothing else refused.
Prints "ok - ..." / "not ok - ..." lines.
"""
import math
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
sys.path.insert(0, HERE)
import oracle_common  # noqa: E402
from oracle_common import Case  # noqa: E402

RULE, BUNDLED = "lightning-kv-parallel", "lightning_kv_d128_e128_fp32"
PATHS = {("vllm", "0.33.0"): "vllm/model_executor/layers/lightning_attn.py",
         ("sglang", "0.5.9"): "sglang/srt/layers/attention/linear/lightning_attn.py",
         ("sglang", "0.5.23"): "sglang/kernels/ops/attention/linear/lightning_attn.py"}
BLOCK, CBLOCK = 256, 64
_mods = {}


def module(framework, release):
    """The release's lightning_attn.py; einops and vLLM's PAD_SLOT_ID (imported,
    not used on this path) stubbed where the machine lacks them."""
    import frameworks
    try:
        import einops  # noqa: F401
    except ImportError:
        sys.modules["einops"] = types.SimpleNamespace(rearrange=None)
    for name in ("vllm.v1", "vllm.v1.attention", "vllm.v1.attention.backends"):
        sys.modules.setdefault(name, types.ModuleType(name))
    utils = sys.modules.setdefault("vllm.v1.attention.backends.utils",
                                   types.ModuleType("vllm.v1.attention.backends.utils"))
    utils.PAD_SLOT_ID = -1
    key = (framework, release)
    if key not in _mods:
        _mods[key] = frameworks.load(framework, release, PATHS[key])
    return _mods[key]


def slopes(h):
    """Distinct decay rates, MiniMax's 2^(-8 (i + 1) / h) scaled as a middle layer's."""
    import torch
    return torch.tensor([2.0 ** (-8.0 * (i + 1) / h) * (0.53 + 0.01 * i) for i in range(h)],
                        dtype=torch.float32, device="cuda")


def make_call(b, h, n, d, e):
    def make(seed):
        import torch
        g = torch.Generator(device="cuda").manual_seed(seed)
        silu = torch.nn.functional.silu
        return dict(q=silu(torch.randn(b, h, n, d, generator=g, device="cuda")),
                    k=silu(torch.randn(b, h, n, d, generator=g, device="cuda")),
                    v=silu(torch.randn(b, h, n, e, generator=g, device="cuda")),
                    s=slopes(h),
                    history=torch.randn(b, h, d, e, generator=g, device="cuda") * 0.5)
    return make


class CallBound:
    """lightning_attention of one release on @inp: outputs o and kv of the last call."""

    def __init__(self, mod, inp):
        self.mod, self.inp, self.out = mod, inp, {}

    def __call__(self):
        i = self.inp
        o, kv = self.mod.lightning_attention(i["q"], i["k"], i["v"], i["s"], 256, i["history"])
        self.out = dict(o=o, kv=kv)

    def poison(self):
        """The outputs are allocated by the call itself: nothing to poison."""

    def inputs(self):
        return {k: v.cpu().clone() for k, v in self.inp.items()}

    def outputs(self):
        return {k: v.cpu().clone() for k, v in self.out.items()}


def make_kernel(b, h, n, d, e):
    def make(seed):
        import torch
        inp = make_call(b, h, n, d, e)(seed)
        del inp["q"], inp["history"]
        s = inp["s"].view(1, -1, 1, 1)
        array = torch.arange(0, BLOCK, device="cuda") + 1
        inp["k_decay"] = torch.exp(-s * (BLOCK - array.reshape(1, -1)))
        inp["kv"] = torch.empty(b, h, (n + BLOCK - 1) // BLOCK, d, e, device="cuda")
        return inp
    return make


class KernelBound:
    """_fwd_kv_parallel of one release launched as _attention.forward does, @warps warps."""

    def __init__(self, mod, inp, warps):
        self.mod, self.inp, self.warps = mod, inp, warps

    def __call__(self):
        i = self.inp
        b, h, n, d = i["k"].shape
        e, blocks = i["v"].shape[-1], (n + BLOCK - 1) // BLOCK
        self.mod._fwd_kv_parallel[(b * h, blocks)](
            i["k"], i["v"], i["k_decay"], i["kv"], b, h, n, d, e, BLOCK=BLOCK, NUM_BLOCK=blocks,
            D_FBLOCK=d, E_FBLOCK=e, NUM_FBLOCK=1, CBLOCK=CBLOCK, NUM_CBLOCK=BLOCK // CBLOCK,
            num_warps=self.warps)

    def poison(self):
        self.inp["kv"].fill_(float("nan"))

    def inputs(self):
        return {k: v.cpu().clone() for k, v in self.inp.items() if k != "kv"}

    def outputs(self):
        return {"kv": self.inp["kv"].cpu().clone()}


def call_case(name, framework, release, b, h, n):
    return Case(make_call(b, h, n, 128, 128),
                lambda inp: CallBound(module(framework, release), inp),
                name=name, rule=RULE, kernel=f"_fwd_kv_parallel@{framework}-{release}",
                dtype="fp32", shape=f"lightning_attention b {b} h {h} n {n} d=e=128",
                expect="reroute", form="call", b=b, h=h, n=n)


def kernel_case(name, framework, release, b, h, n, warps=4, expect="reroute", reason=""):
    return Case(make_kernel(b, h, n, 128, 128),
                lambda inp: KernelBound(module(framework, release), inp, warps),
                name=name, rule=RULE, kernel=f"_fwd_kv_parallel@{framework}-{release}",
                dtype="fp32", shape=f"_fwd_kv_parallel b {b} h {h} n {n} d=e=128 {warps} warps",
                expect=expect, reason=reason, form="kernel", b=b, h=h, n=n)


def cases():
    return [
        call_case("call-vllm-minimax-tp8", "vllm", "0.33.0", 1, 8, 1000),
        call_case("call-vllm-short", "vllm", "0.33.0", 1, 8, 37),
        call_case("call-sglang-0.5.9-bailing", "sglang", "0.5.9", 1, 16, 513),
        call_case("call-sglang-0.5.23-batch2", "sglang", "0.5.23", 2, 8, 777),
        kernel_case("kernel-vllm-1000", "vllm", "0.33.0", 1, 8, 1000),
        kernel_case("kernel-sglang-0.5.23-one-token", "sglang", "0.5.23", 1, 4, 1),
        kernel_case("kernel-sglang-0.5.23-511", "sglang", "0.5.23", 2, 3, 511),
        kernel_case("kernel-vllm-8-warps", "vllm", "0.33.0", 1, 8, 300, warps=8, expect="refuse",
                    reason="tile runs 4 warps, the kernel 256 threads"),
    ]


# ---------------------------------------------------------------- float64

def kv_reference(k, v, dec, n):
    """_fwd_kv_parallel in float64 (kernels/linear/lightning_kv.h): block blk
    sums its split tokens, token i at the decay of window row shift + i,
    k_decay[h, BLOCK - split + i] (the window's zero rows add nothing)."""
    import torch
    b, h = k.shape[:2]
    k, v = k.reshape(b * h, n, -1).double(), v.reshape(b * h, n, -1).double()
    dec = dec.reshape(h, BLOCK).double()
    blocks = (n + BLOCK - 1) // BLOCK
    out = []
    for blk in range(blocks):
        split = n - (blocks - 1) * BLOCK if blk == blocks - 1 else BLOCK
        rows = slice(blk * BLOCK, blk * BLOCK + split)
        d = dec[:, BLOCK - split:].repeat(b, 1)  # row bh: head bh % h
        out.append(torch.einsum("bt,btd,bte->bde", d, k[:, rows], v[:, rows]))
    return torch.stack(out, 1).reshape(b, h, blocks, k.shape[-1], v.shape[-1])


def call_reference(q, k, v, s, history):
    """lightning_attention's four kernels composed, in float64: within a block
    query t sees keys j <= t at decay exp(-s (t - j)); across blocks it sees
    the state at the block's start at exp(-s p) (p its place in the block);
    the state after a block of L tokens is exp(-s L) times the one before
    plus its keys at exp(-s (L - 1 - j)).  kv holds each block's incoming
    state, then the final one."""
    import torch
    b, h, n, d = q.shape
    q, k, v = q.double(), k.double(), v.double()
    s = s.double().view(1, h, 1, 1)
    state = history.double().clone()
    o = torch.empty(b, h, n, v.shape[-1], dtype=torch.float64, device=q.device)
    states = []
    for start in range(0, n, BLOCK):
        L = min(BLOCK, n - start)
        qb, kb, vb = (t[:, :, start:start + L] for t in (q, k, v))
        p = torch.arange(L, dtype=torch.float64, device=q.device)
        diff = p.view(-1, 1) - p.view(1, -1)
        mask = torch.exp(-s * diff.clamp(min=0)) * (diff >= 0)
        o[:, :, start:start + L] = ((qb @ kb.transpose(-1, -2)) * mask) @ vb + \
            torch.exp(-s * p.view(-1, 1)) * (qb @ state)
        states.append(state)
        kdec = torch.exp(-s * (L - 1 - p).view(-1, 1))
        state = torch.exp(-s * L) * state + (kb * kdec).transpose(-1, -2) @ vb
    states.append(state)
    return dict(o=o, kv=torch.stack(states, 2))


def reference(meta, inp):
    import torch
    cuda = {k: t.cuda() for k, t in inp.items() if torch.is_tensor(t)}
    if meta["form"] == "call":
        return {k: t.cpu() for k, t in call_reference(cuda["q"], cuda["k"], cuda["v"], cuda["s"],
                                                      cuda["history"]).items()}
    return {"kv": kv_reference(cuda["k"], cuda["v"], cuda["k_decay"], meta["n"]).cpu()}


def f32_ulp(x):
    """The spacing of fp32 numbers at magnitude x (24 significant bits)."""
    if not (x > 0 and math.isfinite(x)):
        return 2.0 ** -149
    return 2.0 ** (math.floor(math.log2(x)) - 23)


def check(plain_path, shim_path):
    """Each rerouted output of @shim_path against float64, next to the
    framework's own error (its TF32 dots), on inputs identical to the plain run's."""
    import json
    import torch
    plain, shim = torch.load(plain_path), torch.load(shim_path)
    metas = {m["name"]: m for m in json.load(open(shim_path + ".json"))}
    bad = 0
    for key in sorted(set(plain) | set(shim)):
        if key not in plain or key not in shim:
            print(f"not ok - {key}: saved by one run only")
            bad += 1
            continue
        name, mode = key.rsplit("/", 1)
        meta = metas[name]
        (pin, pout), (sin, sout) = plain[key], shim[key]
        same = set(pin) == set(sin) and all(oracle_common._same(pin[k], sin[k]) for k in pin)
        ref = reference(meta, pin)
        for out in ref:
            big = ref[out].abs().max().item()
            fw = (pout[out].double() - ref[out]).abs().max().item()
            ours = (sout[out].double() - ref[out]).abs().max().item()
            tol = 2 * fw + f32_ulp(big)
            # the reference is the framework's math: its own (TF32) error is small against it
            agrees = fw <= 1e-2 * big
            good = same and agrees and math.isfinite(ours) and math.isfinite(fw) and ours <= tol
            bad += not good
            ratio = ours / fw if fw else float("inf")
            print(f"{'ok' if good else 'not ok'} - {meta['kernel']} {name} {mode} {out}: rerouted "
                  f"by {RULE}, max |err| {ours:.3g} vs float64 (max |ref| {big:.3g}), the "
                  f"framework's own {fw:.3g} (ratio {ratio:.3f}), passes under 2 x framework + "
                  f"1 fp32 ulp = {tol:.3g}" + ("" if same else "; the inputs differ")
                  + ("" if agrees else "; the framework itself is over 1% off the reference"))
            print(f"# table | {meta['kernel']} | {meta['shape']} | {out} | {mode} | {ours:.3g} | "
                  f"{fw:.3g} | {ratio:.3f}")
    return bad


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        sys.exit(1 if oracle_common.run(cases(), sys.argv[2], 700) else 0)
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(1 if check(sys.argv[2], sys.argv[3]) else 0)
    elif len(sys.argv) >= 4 and sys.argv[1] == "logcheck":
        sys.exit(1 if oracle_common.logcheck(sys.argv[2], sys.argv[3:]) else 0)
    else:
        sys.exit(__doc__)

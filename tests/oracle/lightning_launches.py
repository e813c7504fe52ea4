"""lightning_launches.py - vLLM's and SGLang's own lightning_attention
(lightning_attn.py), compiled by Triton without a GPU, as the launch events
the shim would log: the cases of rule lightning-kv-parallel, in
tests/oracle/launches.py's format (its stand-in torch, stub driver, event
writer and main), so that tests/scripts/test_lightning_cli.sh can run them
through test_oracle_cli.sh.

    python3 tests/oracle/lightning_launches.py OUT_DIR

Each case runs the release's lightning_attention host function (the head
dimension cut into chunks of 128, or of 64 below 128; _attention.forward
launching _fwd_diag_kernel, _fwd_kv_parallel, _fwd_kv_reduce and
_fwd_none_diag_kernel) on stand-in tensors as MiniMax's and Bailing's
linear attention build them: q, k, v [batch, heads, tokens, head size],
the decay slopes [heads], a kv history [batch, heads, d, e].  The stand-in
torch of launches.py is given the few operations the host code does on
them (slices, contiguous, arange, exp, broadcasting arithmetic, cat,
autograd.Function): shapes, dtypes and fresh addresses, no data.  What each
kernel costs is printed (the "# case: ..." lines) and is the rule's
evidence.
"""
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import frameworks  # noqa: E402
import launches  # noqa: E402
from launches import Catch, Tensor  # noqa: E402

PATHS = {("vllm", "0.33.0"): "vllm/model_executor/layers/lightning_attn.py",
         ("sglang", "0.5.9"): "sglang/srt/layers/attention/linear/lightning_attn.py",
         ("sglang", "0.5.23"): "sglang/kernels/ops/attention/linear/lightning_attn.py"}
KERNELS = ("_fwd_diag_kernel", "_fwd_kv_parallel", "_fwd_kv_reduce", "_fwd_none_diag_kernel")


class Array(Tensor):
    """A stand-in tensor with the operations lightning_attention's host code
    applies: a result has the broadcast shape, the floating dtype of its
    operands (else the first one's) and, when it is new data, a fresh
    address."""

    def _like(self, shape, dtype=None, ptr=None):
        return Array(shape, dtype or self.dtype, None if ptr is None else self._strides, ptr)

    def _contiguous_strides(self):
        return Tensor(self.shape, self.dtype).stride()

    def contiguous(self):
        if self.stride() == self._contiguous_strides():
            return self
        return self._like(self.shape)

    def clone(self):
        return self._like(self.shape)

    def dim(self):
        return len(self.shape)

    def view(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        known = 1
        for s in shape:
            known *= s if s != -1 else 1
        shape = tuple(self.numel() // known if s == -1 else s for s in shape)
        return Array(shape, self.dtype, None, self._ptr)

    reshape = view

    def unsqueeze(self, dim):
        t = Tensor.unsqueeze(self, dim)
        return Array(t.shape, t.dtype, t.stride(), t.data_ptr())

    def __getitem__(self, key):
        """q[..., s:e]: a view of channels s..e-1."""
        assert key[0] is Ellipsis and isinstance(key[1], slice)
        start, stop, _ = key[1].indices(self.shape[-1])
        return Array(self.shape[:-1] + (stop - start,), self.dtype, self._strides,
                     self._ptr + start * self.dtype.itemsize)

    def _binary(self, other):
        if not isinstance(other, Tensor):
            return self._like(self.shape)
        a, b = self.shape, other.shape
        n = max(len(a), len(b))
        a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
        shape = tuple(max(x, y) for x, y in zip(a, b))
        floating = [t.dtype for t in (self, other) if t.dtype.name.startswith(("float", "bfloat"))]
        return self._like(shape, floating[0] if floating else self.dtype)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _binary

    def __neg__(self):
        return self._like(self.shape)


def extend_torch():
    """The stand-in torch (launches.stub_torch, already installed) given what
    the host code calls, and the two modules the files import without using
    them on this path (einops, vLLM's PAD_SLOT_ID)."""
    torch = sys.modules["torch"]
    torch.arange = lambda lo, hi, device=None: Array((hi - lo,), "int64")
    torch.exp = lambda t: t._like(t.shape)
    torch.zeros = lambda shape, dtype=None, device=None: Array(shape, dtype or "float32")
    torch.empty = lambda shape, dtype=None, device=None: Array(shape, dtype or "float32")

    def cat(ts, dim):
        shape = list(ts[0].shape)
        shape[dim] = sum(t.shape[dim] for t in ts)
        return Array(shape, ts[0].dtype)
    torch.cat = cat

    class Function:
        @classmethod
        def apply(cls, *args):
            ctx = types.SimpleNamespace(save_for_backward=lambda *a: None)
            return cls.forward(ctx, *args)
    torch.autograd = types.SimpleNamespace(Function=Function)
    sys.modules.setdefault("einops", types.ModuleType("einops")).rearrange = None
    for name in ("vllm.v1", "vllm.v1.attention", "vllm.v1.attention.backends"):
        sys.modules.setdefault(name, types.ModuleType(name))
    utils = sys.modules.setdefault("vllm.v1.attention.backends.utils",
                                   types.ModuleType("vllm.v1.attention.backends.utils"))
    utils.PAD_SLOT_ID = -1


def lightning(framework, release, batch, heads, tokens, d, e, act="float32", history=True):
    """lightning_attention of @framework @release on q, k [batch, heads,
    tokens, d], v [batch, heads, tokens, e] of dtype @act, fp32 slopes
    [heads] (both callers cast them) and, with @history, an fp32 kv history
    [batch, heads, d, e] (MiniMax's and Bailing's prefill pass the cache's)."""
    extend_torch()
    mod = frameworks.load(framework, release, PATHS[(framework, release)])
    sink = []
    for name in KERNELS:
        setattr(mod, name, Catch(getattr(mod, name), sink))
    mod.lightning_attention(
        Array((batch, heads, tokens, d), act), Array((batch, heads, tokens, d), act),
        Array((batch, heads, tokens, e), act), Array((heads,), "float32"), 256,
        Array((batch, heads, d, e), "float32") if history else None)
    return sink, {}


RULE = ("lightning-kv-parallel", "lightning_kv_d128_e128_fp32")
FIT = ("-", "-")


def fits_but(kv_parallel):
    """The four kernels of one chunk: all but _fwd_kv_parallel fit."""
    return {"_fwd_diag_kernel": FIT, "_fwd_kv_parallel": kv_parallel, "_fwd_kv_reduce": FIT,
            "_fwd_none_diag_kernel": FIT}


# name: (function, arguments, {kernel: outcome}) as in launches.py; "-": fits
# and must pass, "!": refused (with a text the reason must contain).
CASES = {
    # MiniMax-Text-01 / M1 at TP 8 (64 heads of 128: 8 a rank), one prefill of
    # 1000 tokens (three full blocks and a last one of 232), with the cache.
    "vllm-0.33.0-lightning-minimax-tp8": (lightning, ("vllm", "0.33.0", 1, 8, 1000, 128, 128),
                                          fits_but(RULE)),
    # 37 tokens: one block, shorter than a sub-block; n and NUM_BLOCK still passed.
    "vllm-0.33.0-lightning-minimax-short": (lightning, ("vllm", "0.33.0", 1, 8, 37, 128, 128),
                                            fits_but(RULE)),
    # One token: Triton compiles n = 1 and NUM_BLOCK = 1 in and drops them.
    "vllm-0.33.0-lightning-one-token": (lightning, ("vllm", "0.33.0", 1, 4, 1, 128, 128, "float32",
                                                    False), fits_but(RULE)),
    # Head size 256 (two chunks of 128): two launches of the same kernel.
    "vllm-0.33.0-lightning-d256": (lightning, ("vllm", "0.33.0", 2, 2, 300, 256, 128),
                                   fits_but(RULE)),
    "sglang-0.5.9-lightning-bailing": (lightning, ("sglang", "0.5.9", 1, 16, 513, 128, 128),
                                       fits_but(RULE)),
    "sglang-0.5.23-lightning-minimax": (lightning, ("sglang", "0.5.23", 1, 8, 777, 128, 128),
                                        fits_but(RULE)),
    # Head size 64: 66048 B on sm_120, 82432 B on sm_90: fits.
    "vllm-0.33.0-lightning-d64": (lightning, ("vllm", "0.33.0", 1, 8, 1000, 64, 64),
                                  fits_but(FIT)),
    # Value head 256: 197120 B on sm_120, 262656 B on sm_90 (over Hopper's own
    # limit too); no tile (its diag and none-diag kernels are over as well).
    "vllm-0.33.0-lightning-e256": (lightning, ("vllm", "0.33.0", 1, 8, 1000, 128, 256),
                                   {"_fwd_kv_parallel": {
                                       120: ("!", "-", "tiles, not 197120 B"),
                                       90: ("!", "-", "tiles, not 262656 B")}}),
}
# Rerouted only with the compiled facts (without them: refused, b, h, d, e and
# the blocking being constexprs); every other case decides the same.
FACTS_DECIDE = {case for case, (_, _, want) in CASES.items()
                if want.get("_fwd_kv_parallel") == RULE}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    launches.CASES, launches.FACTS_DECIDE = CASES, FACTS_DECIDE
    launches.main(sys.argv[1])

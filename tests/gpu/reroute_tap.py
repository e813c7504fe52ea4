"""reroute_tap.py - what the reroute suites (test_reroute.py, test_moe_reroute.py)
share: which process prints a TAP line, bit-exact tensor comparison, bf16
spacing, the check that the shim refuses one launch and leaves the context
usable, and what Triton compiled for a framework's kernel (Tap: the kernel a
framework's host function launched; its cubin parameter count)."""
import math
import os
import re

import torch


def shim_label():
    """Which process this is, for the TAP lines: plain, or under the shim in some mode."""
    if "sm120shim" in os.environ.get("LD_PRELOAD", ""):
        return "shim " + os.environ.get("SM120SHIM_MODE", "reroute")
    return "no shim"


def bits(t):
    """t's raw bits as an integer tensor (compares NaNs and FP8 exactly)."""
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return t.contiguous().view(ints[t.element_size()])


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(bits(a), bits(b))


def bf16_ulp(x):
    """The spacing of bf16 numbers at magnitude x (8 significant bits)."""
    if not (x > 0 and math.isfinite(x)):
        return 2.0 ** -133
    return 2.0 ** (math.floor(math.log2(x)) - 7)


def expect_refused(what, launch, hint):
    """Print the TAP lines of a launch the shim must refuse: @launch() (Triton
    compiles and loads the kernel, then launches it) must fail with a CUDA error
    from the launcher, not run and not raise OutOfResources before launching;
    then the context must still work.  @hint says what the process should have
    been started with, for the line that reports the launch ran."""
    from triton.runtime.errors import OutOfResources

    who = shim_label()
    try:
        launch()
        torch.cuda.synchronize()
        print(f"not ok - refuse ({who}): {what} ran (expected the launch to be refused; is "
              f"the shim preloaded {hint}?)")
    except OutOfResources as e:
        print(f"not ok - refuse ({who}): {what}: OutOfResources before any launch ({e}); "
              f"reroute mode must let Triton load it and refuse the launch")
    except Exception as e:  # noqa: BLE001  (the launcher's error is the expected outcome)
        msg = str(e).splitlines()[0] if str(e) else repr(e)
        good = isinstance(e, RuntimeError) and "CUDA" in msg
        print(f"{'ok' if good else 'not ok'} - refuse ({who}): {what}: the launch failed: "
              f"{type(e).__name__}: {msg}")
    try:
        total = torch.ones(1024, device="cuda").sum().item()
        torch.cuda.synchronize()
        print(f"{'ok' if total == 1024 else 'not ok'} - refuse ({who}): the context still "
              f"works after the refused launch (the error is not sticky)")
    except Exception as e:  # noqa: BLE001
        print(f"not ok - refuse ({who}): the context is broken after the refused launch: "
              f"{type(e).__name__}: {e}")


class Tap:
    """Stands for a framework module's @triton.jit kernel, so that its host
    function launches through it: module._fwd_kernel = Tap(module._fwd_kernel).
    `last` is the CompiledKernel of the latest launch (None before any)."""

    def __init__(self, fn):
        self.fn, self.last = fn, None

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.last = self.fn[grid](*args, **kwargs)
            return self.last
        return launch

    def __getattr__(self, name):
        return getattr(self.fn, name)


def cubin_param_count(compiled):
    """Parameters of a compiled kernel's PTX entry: the runtime arguments
    Triton keeps (no constexprs, no None, no int equal to 1) + 2 scratch
    pointers, as the shim's log counts them (param_sizes)."""
    m = re.search(r"\.entry\s+\w+\s*\((.*?)\)", compiled.asm["ptx"], re.S)
    return len(re.findall(r"\.param\b", m.group(1))) if m else -1

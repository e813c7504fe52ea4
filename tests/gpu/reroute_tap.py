"""reroute_tap.py - what the reroute suites (test_reroute.py, test_moe_reroute.py)
share: which process prints a TAP line, bit-exact tensor comparison, bf16
spacing, and the check that the shim refuses one launch and leaves the context
usable."""
import math
import os

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

"""sm120shim_hook - the shim's hook in a Python process: Triton kernel loads.

Triton compares a kernel's shared memory with the device's opt-in per block
before it loads the kernel, and raises OutOfResources when it is over (its
autotuner then tries the next configuration).  The preloaded shim reports the
target's own opt-in, so every kernel it will not reroute meets Triton's own
check, exactly as on an SM120 card.  This hook wraps Triton's
CompiledKernel._init_handles so that the shim sees each load first
(sm120shim_triton_begin: a kernel a rule reroutes is shown its own need while
it loads) and learns what Triton compiled into the kernel (its constexprs,
launch options and argument types), which a launch does not show and the
rules check (sm120shim_triton_end).

It does nothing unless the shim is preloaded and speaks the same calls
(sm120shim_triton_abi), and it never raises: an error of its own leaves
Triton's code to run unchanged.
"""
import importlib.abc
import importlib.machinery
import sys

ABI = 1
TARGET = "triton.compiler.compiler"
_SEPARATORS = (";", "=", ":")


def _calls():
    """The shim's (begin, end) through ctypes, or None when it is not preloaded."""
    import ctypes

    try:
        process = ctypes.CDLL(None)
        abi = process.sm120shim_triton_abi
        begin = process.sm120shim_triton_begin
        end = process.sm120shim_triton_end
    except (OSError, AttributeError):
        return None
    abi.restype = ctypes.c_int
    abi.argtypes = []
    if abi() != ABI:
        return None
    begin.restype = ctypes.c_ulonglong
    begin.argtypes = [ctypes.c_char_p, ctypes.c_ulonglong, ctypes.c_uint, ctypes.c_char_p]
    end.restype = ctypes.c_int
    end.argtypes = [ctypes.c_ulonglong]
    return begin, end


def _text(value):
    """A constexpr's value as the shim reads it: bools 1/0, numbers, dtype names."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return repr(value)
    return str(getattr(value, "value", value))


def mma_v3(metadata):
    """Whether Triton was free to use MMA v3 (Hopper wgmma) for this compile:
    "0" when DISABLE_MMA_V3 was on, else "1".  Triton 3.6 reads the variable
    in AccelerateMatmul (C++ getBoolEnv: "1", "true" or "on", any case) and
    records it, as a cache-invalidating variable, in the kernel's metadata
    ("true" for those values, absent when unset), so a kernel loaded from
    Triton's cache still says how it was compiled."""
    value = str(getattr(metadata, "DISABLE_MMA_V3", "")).lower()
    return "0" if value in ("1", "true", "on") else "1"


def describe(kernel):
    """The compiled text of a Triton CompiledKernel (core/rules/compiled.h):
    "name=value" for launch options and constexprs, "name:type" for the
    runtime arguments, mma_v3 (mma_v3(), which decides the shared memory
    Triton gives a dot on sm_90), and compiled_args: the arguments the
    kernel does not declare constexpr that Triton compiled in all the same
    (passed as None, or an int equal to 1), comma-separated, when the
    function says which it declares.  Entries that would not parse are left
    out."""
    metadata, src = kernel.metadata, kernel.src
    entries = [("num_warps", "=", str(metadata.num_warps))]
    if getattr(metadata, "num_stages", None) is not None:
        entries.append(("num_stages", "=", str(metadata.num_stages)))
    entries.append(("mma_v3", "=", mma_v3(metadata)))
    fn = getattr(src, "fn", None)
    names = list(getattr(fn, "arg_names", None) or [])
    declared = getattr(fn, "constexprs", None)
    specialised = []
    for path, value in sorted(getattr(src, "constants", {}).items()):
        if isinstance(path, tuple) and len(path) == 1 and path[0] < len(names):
            entries.append((names[path[0]], "=", _text(value)))
            if declared is not None and path[0] not in declared:
                specialised.append(names[path[0]])
    if declared is not None:
        entries.append(("compiled_args", "=", ",".join(specialised)))
    for name, kind in getattr(src, "signature", {}).items():
        if kind != "constexpr" and isinstance(kind, str):
            entries.append((name, ":", kind))
    return ";".join(n + s + v for n, s, v in entries
                    if not any(c in n + v for c in _SEPARATORS))


def _uncached(module):
    """Triton's max_shared_mem(device), asked of the device at each load.

    Triton 3.6 caches the first answer per device (functools.lru_cache), and
    the answer differs while a rule-covered kernel loads; a load is rare, the
    question is a few driver calls."""
    def max_shared_mem(device):
        return module.driver.active.utils.get_device_properties(device)["max_shared_mem"]
    return max_shared_mem


def patch(module, calls):
    """Wrap module.CompiledKernel._init_handles (once) with the shim's calls."""
    compiled_kernel = module.CompiledKernel
    original = compiled_kernel._init_handles
    if getattr(original, "sm120shim", False):
        return
    begin, end = calls
    if callable(getattr(module, "max_shared_mem", None)) and hasattr(module, "driver"):
        module.max_shared_mem = _uncached(module)

    def _init_handles(self):
        if self.module is not None:
            return original(self)
        try:
            metadata = self.metadata
            name = str(metadata.name).encode()
            shared = int(metadata.shared)
            threads = int(metadata.num_warps) * 32
            text = describe(self).encode()
        except Exception:
            return original(self)
        begin(name, shared, threads, text)
        function = 0
        try:
            original(self)
            function = int(self.function or 0)
        finally:
            end(function)

    _init_handles.sm120shim = True
    compiled_kernel._init_handles = _init_handles


class _Loader(importlib.abc.Loader):
    """The real loader of triton.compiler.compiler, then the patch."""

    def __init__(self, loader, calls):
        self.loader, self.calls = loader, calls

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        try:
            patch(module, self.calls)
        except Exception:
            pass


class _Finder(importlib.abc.MetaPathFinder):
    """Finds triton.compiler.compiler as the other finders do, and loads it patched."""

    def __init__(self, calls):
        self.calls = calls

    def find_spec(self, fullname, path, target=None):
        if fullname != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _Loader(spec.loader, self.calls)
        return spec


def install():
    """Patch Triton when it is imported (now, if it already is).  True if the
    shim is preloaded and the hook is in place."""
    calls = _calls()
    if calls is None:
        return False
    if TARGET in sys.modules:
        patch(sys.modules[TARGET], calls)
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(calls))
    return True

"""hook_check.py - the Python hook (shim/python) with Triton's own
CompiledKernel._init_handles, under the shim and the fake driver, no GPU.

    python3 tests/oracle/hook_check.py [vllm-naive | sglang-nov3 | sglang-nov3-unsaid]

Run it under LD_PRELOAD=libsm120shim.so with the fake libcuda (an H200,
232448 B) and SM120SHIM_TARGET=sm120.  Triton compiles SGLang 0.5.9's real
fused_moe_kernel (from the released package, tests/oracle/fetch.sh) and a
kernel of this file for sm_90 with a stub target; its driver utilities are
the calls Triton's driver.c makes, through ctypes into the process's libcuda
entry points (the shim's).  Each case prints one line:

    CASE loaded                     _init_handles returned
    CASE OutOfResources NEED LIMIT  Triton raised it (shared memory)
    CASE error TEXT                 anything else

With the argument vllm-naive (or $HOOK_CHECK_CASES=vllm-naive), the one case is vLLM 0.33.0's fused_moe_kernel
in its naive small-batch assignment, alone (the fake driver gives every
function one handle, so the compiled facts of the first kernel loaded would
stand for all), and when it loads, its launch as vLLM makes it:

    vllm-naive launch RC            cuLaunchKernel's answer

With sglang-nov3, the one case is the MoE kernel below compiled as in a
process run with DISABLE_MMA_V3=1 (Triton keeps sm_90 on mma.sync, whose
shared memory differs from wgmma's), alone, and its launch as SGLang makes it:

    sglang-nov3 launch RC           cuLaunchKernel's answer

sglang-nov3-unsaid is the same with the hook's mma_v3 entry left out of the
compiled facts, as a hook without it would describe the kernel (the control:
the shim then expects wgmma's size on sm_90).

"hook installed" or "hook absent" first, and last the hook's compiled text
of the MoE kernel ("describe moe-rule-tile TEXT") when the hook is there.
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launches  # noqa: E402

OPTIN = 97                # CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
MAX_DYNAMIC = 8           # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
STATIC = 1                # CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
cuda = ctypes.CDLL(None)  # the process's entry points: the shim's hooks


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"Triton Error [CUDA]: {what} returned {rc}")


def device_attr(attr):
    v = ctypes.c_int()
    check(cuda.cuDeviceGetAttribute(ctypes.byref(v), attr, 0), "cuDeviceGetAttribute")
    return v.value


class Utils:
    """Triton 3.6 driver.c's get_device_properties and loadBinary, call for call."""

    def get_device_properties(self, device):
        return {"max_shared_mem": device_attr(OPTIN), "multiprocessor_count": 132,
                "max_num_regs": 65536, "warpSize": 32, "sm_clock_rate": 0, "mem_clock_rate": 0,
                "mem_bus_width": 0}

    def load_binary(self, name, kernel, shared, device):
        mod, fun, v = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()
        check(cuda.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(kernel)), "cuModuleLoadData")
        check(cuda.cuModuleGetFunction(ctypes.byref(fun), mod, name.encode()), "cuModuleGetFunction")
        optin = device_attr(OPTIN)
        if shared > 49152 and optin > 49152:
            check(cuda.cuFuncGetAttribute(ctypes.byref(v), STATIC, fun), "cuFuncGetAttribute")
            check(cuda.cuFuncSetAttribute(fun, MAX_DYNAMIC, optin - v.value), "cuFuncSetAttribute")
        return mod.value, fun.value, 32, 0, 1024


def install_driver():
    """launches.py's stub driver for sm_90, with the utilities above."""
    from triton.runtime.driver import driver

    launches.install_stub_driver(90)
    driver.active.utils = Utils()
    driver.active.launcher_cls = lambda src, metadata: None


def plain_kernel():
    """A kernel no rule names: a pipelined bf16 matmul tile, whose shared
    memory grows with BLOCK_N and num_stages."""
    import triton
    import triton.language as tl

    @triton.jit
    def sm120_test_matmul(a, b, c, K, BLOCK_N: tl.constexpr):
        m = tl.arange(0, 128)
        n = tl.arange(0, BLOCK_N)
        k = tl.arange(0, 64)
        acc = tl.zeros((128, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, 64):
            x = tl.load(a + m[:, None] * K + (k0 + k)[None, :])
            y = tl.load(b + (k0 + k)[:, None] * BLOCK_N + n[None, :])
            acc += tl.dot(x, y)
        tl.store(c + m[:, None] * BLOCK_N + n[None, :], acc.to(tl.bfloat16))
    return sm120_test_matmul


def compiled(fn, *args, **kw):
    """Triton's CompiledKernel for fn(*args) (compiled, not loaded)."""
    return fn.run(*args, grid=(1,), warmup=True, **kw)


def moe_kernel():
    """SGLang 0.5.9's fused_moe_kernel, Kimi K2 TP8 gate/up, block FP8, at the
    default configuration a rule reroutes (197632 B on sm_90)."""
    sink, _ = launches.sglang_moe("0.5.9", "fp8_block", 512, 384, 8, 512, 7168)
    return sink[0][4]


def sglang_nov3():
    """moe_kernel() compiled with DISABLE_MMA_V3=1 (148480 B on sm_90: three
    buffers, not wgmma's four), and the launch event SGLang's host code makes
    of it."""
    os.environ["DISABLE_MMA_V3"] = "1"
    sink, settings = launches.sglang_moe("0.5.9", "fp8_block", 512, 384, 8, 512, 7168)
    name, grid, bound, spec, kernel = sink[0]
    return kernel, launches.event(name, grid, bound, spec, kernel, settings)


def vllm_naive():
    """vLLM 0.33.0's fused_moe_kernel in its naive small-batch assignment
    (sorted_token_ids None), DeepSeek-V3 TP8 gate/up of 4 tokens, block FP8,
    at E=256,N=256 B200's bucket 4 (16x256x128, swapped on sm_90: 140288 B),
    and the launch event vLLM's host code makes of it (grid, block, bytes)."""
    sink, _ = launches.vllm_moe("0.33.0", "fp8_block", 4, 256, 8, 512, 7168,
                                launches.tuned(16, 256, 128, 64, 8, 4), naive=True)
    name, grid, bound, spec, kernel = sink[0]
    return kernel, launches.event(name, grid, bound, spec, kernel, {})


def unsaid(describe):
    """@describe without its mma_v3 entry."""
    return lambda kernel: ";".join(e for e in describe(kernel).split(";")
                                   if not e.startswith("mma_v3="))


def launch(kernel, ev):
    """cuLaunchKernel of a loaded @kernel with @ev's grid, block, shared memory
    and argument bytes (Triton's two scratch pointers last), on stream 0."""
    bufs = [ctypes.create_string_buffer(bytes.fromhex(a), len(a) // 2) for a in ev["args"]]
    params = (ctypes.c_void_p * len(bufs))(*[ctypes.cast(b, ctypes.c_void_p) for b in bufs])
    g, b = ev["grid"], ev["block"]
    return cuda.cuLaunchKernel(ctypes.c_void_p(kernel.function), g[0], g[1], g[2], b[0], b[1],
                               b[2], ev["dynamic_smem"], None, params, None)


def main(mode):
    try:
        import sm120shim_hook  # noqa: F401  (on sys.path only through the shim's constructor)
    except ImportError:
        pass
    from triton.runtime.errors import OutOfResources

    print("hook installed" if getattr(__import__("triton.compiler.compiler").compiler.compiler
                                      .CompiledKernel._init_handles, "sm120shim", False)
          else "hook absent")
    launches.stub_torch((9, 0))
    install_driver()
    cases, launches_of = {}, {}
    if mode == "vllm-naive":
        cases["vllm-naive"], launches_of["vllm-naive"] = vllm_naive()
    elif mode in ("sglang-nov3", "sglang-nov3-unsaid"):
        if mode.endswith("-unsaid") and "sm120shim_hook" in sys.modules:
            hook = sys.modules["sm120shim_hook"]
            hook.describe = unsaid(hook.describe)
        cases["sglang-nov3"], launches_of["sglang-nov3"] = sglang_nov3()
    else:
        matmul = plain_kernel()
        x = launches.Tensor((1 << 20,), "bfloat16")
        # Triton caches the device's opt-in: loads before and after the admitted one.
        cases["plain-fits"] = compiled(matmul, x, x, x, 4096, BLOCK_N=32, num_warps=4,
                                       num_stages=2)
        cases["plain-over"] = compiled(matmul, x, x, x, 4096, BLOCK_N=256, num_warps=8,
                                       num_stages=4)
        cases["moe-rule-tile"] = moe_kernel()
        cases["plain-over-after"] = compiled(matmul, x, x, x, 4096, BLOCK_N=128, num_warps=8,
                                             num_stages=5)
    loaded = set()
    for case, kernel in cases.items():
        try:
            kernel._init_handles()
            loaded.add(case)
            print(f"{case} loaded {kernel.metadata.shared}")
        except OutOfResources as e:
            print(f"{case} OutOfResources {e.required} {e.limit}")
        except Exception as e:  # noqa: BLE001
            print(f"{case} error {e!r}")
    for case in loaded & set(launches_of):
        print(f"{case} launch {launch(cases[case], launches_of[case])}", flush=True)
    for case in ("moe-rule-tile", "sglang-nov3"):
        if "sm120shim_hook" in sys.modules and case in cases:
            print(f"describe {case} " + sys.modules["sm120shim_hook"].describe(cases[case]))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HOOK_CHECK_CASES", ""))

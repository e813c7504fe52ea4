"""hook_gpu.py - a PyTorch + Triton process on the GPU, run once without the
shim and once under `sm120 run --mode reroute --target sm120` (and enforce):
what Triton, its autotuner, PyTorch, cuBLAS and SGLang's configuration choice
see, and one rerouted framework kernel in the same process.

    python3 tests/gpu/hook_gpu.py run OUT.pt
    python3 tests/gpu/hook_gpu.py check PLAIN.pt SHIM.pt ENFORCE.pt

run saves, for the process it is in:
  autotune   a @triton.autotune matmul with a 196608 B configuration (sm_90:
             BLOCK_N 256, 4 stages) and a 24576 B one: its result and the
             configuration the autotuner kept (on an SM120 card the big one
             raises OutOfResources and is skipped);
  fixed      the big configuration alone: Triton's exception text, or "ran";
  matmuls    torch.matmul in bf16 (1031 x 997 x 1009) and fp64 (257 x 263 x 269)
             on seeded random inputs (cuBLAS);
  optin      torch's shared_memory_per_block_optin, and the fused-MoE
             configuration SGLang 0.5.23's get_default_config picks from it
             (FP8 per tensor, GLM-4.7 at TP8: E 161, N 384, K 5120, top_k 9;
             M 512 and 16), from the released package;
  decode     vLLM 0.33's TRITON_MLA decode with an FP8 cache (stage 1 needs
             102400 B: the shim reroutes it; tests/gpu/oracle_decode.py), one
             case, against float64.
check prints "ok - ..." / "not ok - ..." per comparison.
"""
import os
import sys
import types

import torch
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
sys.path.insert(0, HERE)
from reroute_tap import bf16_ulp  # noqa: E402  (the spacing of bf16 at a magnitude)

BIG = dict(BLOCK_N=256, num_warps=8, num_stages=4)     # 196608 B on sm_90
SMALL = dict(BLOCK_N=32, num_warps=4, num_stages=2)    # 24576 B


def mm_kernel(a, b, c, M, N, K, BLOCK_N: tl.constexpr):
    """c[128 x BLOCK_N tile] = a @ b, bf16 in, fp32 accumulate, bf16 out."""
    pm, pn = tl.program_id(0), tl.program_id(1)
    m = pm * 128 + tl.arange(0, 128)
    n = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    k = tl.arange(0, 64)
    acc = tl.zeros((128, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, 64):
        x = tl.load(a + m[:, None] * K + (k0 + k)[None, :], mask=m[:, None] < M, other=0.0)
        y = tl.load(b + (k0 + k)[:, None] * N + n[None, :], mask=n[None, :] < N, other=0.0)
        acc += tl.dot(x, y)
    tl.store(c + m[:, None] * N + n[None, :], acc.to(tl.bfloat16),
             mask=(m[:, None] < M) & (n[None, :] < N))


def configs():
    return [triton.Config({"BLOCK_N": c["BLOCK_N"]}, num_warps=c["num_warps"],
                          num_stages=c["num_stages"]) for c in (BIG, SMALL)]


autotuned = triton.autotune(configs=configs(), key=["M", "N", "K"])(triton.jit(mm_kernel))
fixed = triton.jit(mm_kernel)


def inputs(seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(1000, 4096, generator=g, device="cuda").to(torch.bfloat16)
    b = torch.randn(4096, 768, generator=g, device="cuda").to(torch.bfloat16)
    return a, b


def sglang_choice():
    """SGLang 0.5.23's get_default_config, from the released file, under this
    process's torch."""
    import frameworks
    frameworks.STUBS["sglang"]()
    exec_ = types.SimpleNamespace(deterministic=types.SimpleNamespace(
        enable_deterministic_inference=False))
    frameworks._stub("sglang.srt.runtime_context", get_exec=lambda: exec_)
    sys.modules["sglang.srt.utils"].get_device_name = lambda *a: torch.cuda.get_device_name()
    mod = frameworks.load("sglang", "0.5.23",
                          "sglang/srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py")
    return {m: mod.get_default_config(m, 161, 384, 5120, 9, "fp8_w8a8", False, None)
            for m in (512, 16)}


def run(out):
    from triton.runtime.errors import OutOfResources
    saved = {}
    a, b = inputs(7)
    c = torch.empty(1000, 768, dtype=torch.bfloat16, device="cuda")
    grid = lambda meta: (triton.cdiv(1000, 128), triton.cdiv(768, meta["BLOCK_N"]))
    autotuned[grid](a, b, c, 1000, 768, 4096)
    torch.cuda.synchronize()
    saved["autotune"] = c.cpu()
    saved["autotune_in"] = (a.cpu(), b.cpu())
    saved["autotune_config"] = str(autotuned.best_config)
    try:
        c2 = torch.empty_like(c)
        fixed[(8, 3)](a, b, c2, 1000, 768, 4096, **BIG)
        torch.cuda.synchronize()
        saved["fixed"] = "ran"
    except OutOfResources as e:
        saved["fixed"] = "OutOfResources: " + str(e)
    g = torch.Generator(device="cuda").manual_seed(11)
    x = torch.randn(1031, 1009, generator=g, device="cuda").to(torch.bfloat16)
    y = torch.randn(1009, 997, generator=g, device="cuda").to(torch.bfloat16)
    saved["bf16_in"] = (x.cpu(), y.cpu())
    saved["bf16"] = (x @ y).cpu()
    p = torch.randn(257, 269, generator=g, device="cuda", dtype=torch.float64)
    q = torch.randn(269, 263, generator=g, device="cuda", dtype=torch.float64)
    saved["fp64_in"] = (p.cpu(), q.cpu())
    saved["fp64"] = (p @ q).cpu()
    saved["optin"] = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    saved["sglang"] = sglang_choice()
    import oracle_decode as od
    # vLLM 0.33.0's decode at oracle_decode.py's Kimi K2 TP8 case (8 heads, 8 splits)
    inp = od.make_inputs(8, [1, 17, 333, 4099], 8, seed=100)
    launch = od.Bound("0.33.0", inp, 8, 0.0)
    try:
        launch()
        torch.cuda.synchronize()
        saved["decode"] = (launch.inputs(), launch.outputs())
    except OutOfResources as e:
        saved["decode"] = "OutOfResources: " + str(e)
    torch.save(saved, out)
    print(f"ok - run: saved {len(saved)} results")


def close(name, got, want, tol):
    err = (got.double() - want.double()).abs().max().item()
    good = err <= tol
    print(f"{'ok' if good else 'not ok'} - {name}: max |difference| {err:.3g} (bound {tol:.3g})")
    return good


def check(plain_path, shim_path, enforce_path):
    import oracle_decode as od
    plain, shim, enf = (torch.load(p, weights_only=False) for p in
                        (plain_path, shim_path, enforce_path))
    bad = 0
    ref = plain["bf16_in"][0].double() @ plain["bf16_in"][1].double()
    for who, r in (("plain", plain), ("reroute", shim), ("enforce", enf)):
        if who == "plain":
            ref_mm = r["autotune_in"][0].double() @ r["autotune_in"][1].double()
            bad += not close("without the shim: autotuned Triton matmul against float64",
                             r["autotune"], ref_mm, ref_mm.abs().max().item() * 2 ** -7)
            continue
        print(f"# {who}: autotuner kept {r['autotune_config']}; fixed big config: {r['fixed'][:90]}")
        bad += not ("BLOCK_N: 32" in r["autotune_config"])
        print(("ok" if "BLOCK_N: 32" in r["autotune_config"] else "not ok")
              + f" - {who}: the autotuner skipped the 196608 B configuration, as on SM120")
        want = "Required: 196608, Hardware limit: 101376"
        good = r["fixed"].startswith("OutOfResources") and want in r["fixed"]
        bad += not good
        print(f"{'ok' if good else 'not ok'} - {who}: a fixed over-limit configuration no rule "
              f"reroutes raises Triton's own OutOfResources ({want})")
        # fp32 accumulation rounded once to bf16: within one bf16 ulp of the largest
        ref_mm = r["autotune_in"][0].double() @ r["autotune_in"][1].double()
        bad += not close(f"{who}: autotuned Triton matmul against float64 (one bf16 ulp of the "
                         "largest)", r["autotune"], ref_mm, ref_mm.abs().max().item() * 2 ** -7)
        ulp = ref.abs().max().item() * 2 ** -7
        bad += not close(f"{who}: cuBLAS bf16 matmul against float64 (one bf16 ulp of the "
                         "largest)", r["bf16"], ref, ulp)
        ref64 = r["fp64_in"][0] @ r["fp64_in"][1]
        bad += not close(f"{who}: cuBLAS fp64 matmul against the CPU", r["fp64"], ref64, 1e-11)
        good = r["optin"] == 101376
        bad += not good
        print(f"{'ok' if good else 'not ok'} - {who}: torch reports opt-in {r['optin']} B "
              f"(SM120's 101376; without the shim {plain['optin']})")
        print(f"# {who}: SGLang 0.5.23 default FP8 config, M 512: {r['sglang'][512]}; "
              f"M 16: {r['sglang'][16]}")
        good = r["sglang"][512]["BLOCK_SIZE_K"] == 256 and r["sglang"][512]["num_stages"] == 2
        bad += not good
        print(f"{'ok' if good else 'not ok'} - {who}: SGLang 0.5.23 picks its low-shared-memory "
              f"FP8 default, as on an SM120 card (without the shim: {plain['sglang'][512]})")
    good = plain["optin"] > 101376 and plain["sglang"][512]["BLOCK_SIZE_N"] == 256
    bad += not good
    print(f"{'ok' if good else 'not ok'} - without the shim the H200 reports {plain['optin']} B "
          "and SGLang picks its 128x256x128 default")
    want = "Required: 102400, Hardware limit: 101376"
    good = isinstance(enf["decode"], str) and want in enf["decode"]
    bad += not good
    print(f"{'ok' if good else 'not ok'} - enforce: vLLM's decode raises Triton's OutOfResources "
          f"({want}), as on an SM120 card")
    (pin, pout), (sin, sout) = plain["decode"], shim["decode"]
    ref = od.reference(None, pin)
    for key in ("o", "lse"):
        fw = (pout[key].double() - ref[key]).abs().max().item()
        tol = 2 * fw + bf16_ulp(ref[key].abs().max().item())
        bad += not close(f"reroute: vLLM decode {key} (rerouted) against float64, within 2 x "
                         f"vLLM's own error {fw:.3g} + 1 bf16 ulp", sout[key], ref[key], tol)
    return bad


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        run(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "check":
        sys.exit(1 if check(*sys.argv[2:5]) else 0)
    else:
        sys.exit(__doc__)

"""torchrun_gpu.py - one rank of a 2-GPU job: NCCL collectives around SGLang's
own fused MoE layer (tests/gpu/oracle_moe.py), which the shim reroutes.

    torchrun --nproc_per_node 2 tests/gpu/torchrun_gpu.py OUT_DIR

Each rank: an all-reduce and an all-gather of known values (NCCL's own
kernels), the four FP8 fused-MoE cases of oracle_moe.py's "sglang" group
(SGLang 0.5.9's default configuration, 128x128 block and per-tensor scales,
gate/up and down) on inputs seeded by the rank, then an all-reduce of the
block-scaled gate/up output; saves
OUT_DIR/rank<r>.pt.  `python3 tests/gpu/torchrun_gpu.py check PLAIN_DIR
SHIM_DIR` compares a run under the shim with one without: collectives exact,
each MoE output within oracle_moe's bound, the reduced sum against the
sum of the float64 references.
"""
import math
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_moe  # noqa: E402
from oracle_common import bf16_ulp  # noqa: E402

NAMES = ("block-gateup", "block-down", "tensor-gateup", "tensor-down")


def moe_cases():
    """oracle_moe's SGLang 0.5.9 cases named in NAMES, by name."""
    return {c.name: c for c in oracle_moe.GROUPS["sglang"]()
            if c.name.split("sglang-0.5.9-")[-1] in NAMES}


def run_moe(seed_base):
    """Each case once: name -> (inputs, output), CPU copies."""
    saved = {}
    for i, (name, case) in enumerate(sorted(moe_cases().items())):
        bound = case.bind(case.make(seed_base + i))
        bound.poison()
        bound()
        torch.cuda.synchronize()
        saved[name] = (bound.inputs(), bound.outputs()["out"])
    return saved


def run(out):
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    x = torch.full((1 << 20,), float(rank + 1), device="cuda")
    dist.all_reduce(x)
    parts = [torch.empty(4097, device="cuda") for _ in range(world)]
    dist.all_gather(parts, torch.arange(4097, device="cuda", dtype=torch.float32) * (rank + 2))
    saved = {"world": world, "all_reduce": x[:8].cpu(), "all_gather": [p.cpu() for p in parts]}
    saved["moe"] = run_moe(seed_base=300 + 10 * rank)
    gateup = saved["moe"]["sglang-0.5.9-block-gateup"][1].cuda().float()
    dist.all_reduce(gateup)
    saved["reduced"] = gateup.cpu()
    torch.save(saved, os.path.join(out, f"rank{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()
    print(f"ok - rank {rank} of {world}: collectives and {len(saved['moe'])} MoE launches saved")


def check(plain_dir, shim_dir):
    bad = 0
    runs = {}
    for tag, d in (("plain", plain_dir), ("shim", shim_dir)):
        runs[tag] = [torch.load(os.path.join(d, f"rank{r}.pt")) for r in range(2)]
    world = runs["shim"][0]["world"]
    for r in range(world):
        s = runs["shim"][r]
        good = torch.equal(s["all_reduce"], torch.full((8,), world * (world + 1) / 2)) and all(
            torch.equal(p, torch.arange(4097, dtype=torch.float32) * (i + 2))
            for i, p in enumerate(s["all_gather"]))
        bad += not good
        print(f"{'ok' if good else 'not ok'} - rank {r} under the shim: NCCL all-reduce and "
              "all-gather exact")
        for name, case in sorted(moe_cases().items()):
            (pin, pout), (sin, sout) = runs["plain"][r]["moe"][name], s["moe"][name]
            ref = oracle_moe.reference(case.meta, sin)["out"]
            fw = (pout.double() - oracle_moe.reference(case.meta, pin)["out"]).abs().max().item()
            ours = (sout.double() - ref).abs().max().item()
            tol = 2 * fw + bf16_ulp(ref.abs().max().item())
            good = math.isfinite(ours) and ours <= tol
            bad += not good
            print(f"{'ok' if good else 'not ok'} - rank {r} {name}: rerouted max |err| {ours:.3g}"
                  f", SGLang's own {fw:.3g}, bound {tol:.3g}")
    block = moe_cases()["sglang-0.5.9-block-gateup"].meta
    key = "sglang-0.5.9-block-gateup"
    refs = [oracle_moe.reference(block, runs["shim"][r]["moe"][key][0])["out"]
            for r in range(world)]
    total = sum(refs)
    fw = max((runs["plain"][r]["moe"][key][1].double()
              - oracle_moe.reference(block, runs["plain"][r]["moe"][key][0])["out"])
             .abs().max().item() for r in range(world))
    err = (runs["shim"][0]["reduced"].double() - total).abs().max().item()
    tol = world * (2 * fw + bf16_ulp(total.abs().max().item()))
    good = math.isfinite(err) and err <= tol
    bad += not good
    print(f"{'ok' if good else 'not ok'} - the all-reduced rerouted MoE output against the sum of "
          f"the float64 references: {err:.3g} (bound {tol:.3g})")
    return bad


if __name__ == "__main__":
    if len(sys.argv) == 2:
        run(sys.argv[1])
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(1 if check(sys.argv[2], sys.argv[3]) else 0)
    else:
        sys.exit(__doc__)

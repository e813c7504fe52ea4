#!/bin/sh
# torchrun_gpu.sh - a 2-GPU torchrun job (tests/gpu/torchrun_gpu.py: NCCL
# collectives around SGLang's own fused MoE layer) without the shim and under
# `sm120 run --mode reroute --target sm120`: the same results, NCCL's kernels
# passed as library kernels, every MoE launch rerouted, nothing refused.
# Needs two GPUs (make test-gpu2); prints "ok - ..." / "not ok - ..." lines.
. tests/gpu/env.sh   # $B, $sm120, $SM120_ORACLE, $work (one Triton cache)
. tests/gpu/step.sh   # step NAME OUT CMD...

if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -lt 2 ]; then
	echo "ok - 2-GPU torchrun job # SKIP fewer than two GPUs"
	exit 0
fi
tr="python3 -m torch.distributed.run --nproc_per_node 2 --master_port 29517 tests/gpu/torchrun_gpu.py"
mkdir -p "$work/plain" "$work/shim"
step "2-rank job without the shim" "$work/plain.out" $tr "$work/plain"
step "2-rank job under sm120 run --mode reroute --target sm120" "$work/shim.out" \
	"$sm120" run --mode reroute --target sm120 --set top_k=3 --set hidden_size=1024 \
	--log "$work/rr.%p.jsonl" -- $tr "$work/shim"
step "compare" "$work/check.out" python3 tests/gpu/torchrun_gpu.py check "$work/plain" "$work/shim"
python3 - "$work" <<'PY'
import collections, glob, json, sys
ev = [json.loads(l) for f in glob.glob(sys.argv[1] + "/rr.*.jsonl") for l in open(f)]
count = collections.Counter((e["event"], e.get("action")) for e in ev if e["event"] != "load")
print("# log:", dict(count))
nccl = {e["kernel"] for e in ev if e.get("action") == "library" and "nccl" in e.get("kernel", "").lower()}
print(f"# NCCL kernels over the limit passed as library kernels: {sorted(nccl)[:4]}")
moe = [e for e in ev if e["event"] == "launch" and e.get("kernel") == "fused_moe_kernel"]
refused = [e for e in ev if e.get("action") == "refuse" and e["event"] != "triton_load"]
for e in refused[:3]:
    print(f"#   refused: {e.get('kernel')} {e.get('dynamic_smem')} B: {e.get('reason')}")
ranks = {e["pid"] for e in moe}
ok = len(moe) == 8 and all(e["action"] == "reroute" for e in moe) and len(ranks) == 2
print(("ok" if ok else "not ok") + f" - every fused-MoE launch of both ranks rerouted ({len(moe)})")
print(("ok" if not refused else "not ok") + f" - nothing refused ({len(refused)}): NCCL and cuBLAS ran")
PY

#!/bin/sh
# hook_gpu.sh - never worse than the card, on the GPU (tests/gpu/hook_gpu.py):
# one PyTorch + Triton process without the shim, under
# `sm120 run --mode reroute --target sm120` and under enforce; Triton's
# autotuner and OutOfResources, cuBLAS, torch's reported opt-in, SGLang's
# configuration choice and a rerouted vLLM kernel, compared; the log of the
# reroute run must show the load decisions and nothing refused.
# Prints "ok - ..." / "not ok - ..." lines.
. tests/gpu/env.sh   # $B, $sm120, $SM120_ORACLE, $work (one Triton cache)
. tests/gpu/step.sh   # step NAME OUT CMD...

py=tests/gpu/hook_gpu.py
step "without the shim" "$work/plain.out" python3 $py run "$work/plain.pt"
step "under sm120 run --mode reroute --target sm120" "$work/rr.out" \
	"$sm120" run --mode reroute --target sm120 --set page_size=16 --log "$work/rr.%p.jsonl" \
	-- python3 $py run "$work/rr.pt"
step "under sm120 run --mode enforce --target sm120" "$work/enf.out" \
	"$sm120" run --mode enforce --target sm120 --log "$work/enf.%p.jsonl" \
	-- python3 $py run "$work/enf.pt"
step "compare" "$work/check.out" python3 $py check "$work/plain.pt" "$work/rr.pt" "$work/enf.pt"
python3 - "$work" <<'PY'
import collections, glob, json, sys
ev = [json.loads(l) for f in glob.glob(sys.argv[1] + "/rr.*.jsonl") for l in open(f)]
count = collections.Counter((e["event"], e.get("action")) for e in ev if e["event"] != "load")
print("# reroute log:", dict(count))
loads = [e for e in ev if e["event"] == "triton_load"]
admitted = {e["kernel"] for e in loads if e["action"] == "admit"}
refused = {(e["kernel"], e["dynamic_smem"]) for e in loads if e["action"] == "refuse"}
ok = admitted == {"_fwd_grouped_kernel_stage1"} and ("mm_kernel", 196608) in refused
print(("ok" if ok else "not ok") + f" - reroute: Triton loaded only the kernel a rule reroutes "
      f"past the limit ({sorted(admitted)}); refused as on the card: {sorted(refused)}")
bad = [e for e in ev if e["event"] in ("launch", "set_attribute") and e.get("action") == "refuse"]
for e in bad[:3]:
    print(f"#   refused: {e.get('kernel')} {e.get('dynamic_smem')} B: {e.get('reason')}")
print(("ok" if not bad else "not ok") + f" - reroute: no launch or attribute set refused "
      f"({len(bad)}); cuBLAS and the rest ran")
rer = [e for e in ev if e["event"] == "launch" and e.get("action") == "reroute"]
print(("ok" if rer else "not ok") + f" - reroute: {len(rer)} launches rerouted "
      f"({sorted({e.get('rule') for e in rer})})")
PY

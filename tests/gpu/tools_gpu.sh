#!/bin/sh
# tools_gpu.sh - the shim inside NVIDIA's tools (GPU): vLLM's real TRITON_MLA
# decode (tests/gpu/oracle_decode.py), rerouted under
# `sm120 run --mode reroute --target sm120`, inside
# `ncu --target-processes all` and `compute-sanitizer --target-processes all`.
# Nsight Compute answers dlopen("libcuda.so.1") with its libcuda-injection.so;
# the shim sits in front of it, so the rerouted launches happen, the bundled
# kernel is profiled, and the sanitizer checks it.  Skipped (one "ok # SKIP"
# line each) where a tool is missing.  Prints "ok - ..." / "not ok - ..." lines.
. tests/gpu/env.sh   # $B, $sm120, $SM120_ORACLE, $work (one Triton cache)
run="$sm120 run --mode reroute --target sm120 --set page_size=16"

# rerouted NAME: the reroute events of NAME's logs, and whether nothing was refused
rerouted() {
	python3 - "$work" "$1" <<'PY'
import glob, json, sys
ev = [json.loads(l) for f in glob.glob(f"{sys.argv[1]}/{sys.argv[2]}.*.jsonl") for l in open(f)]
rr = [e for e in ev if e.get("event") == "launch" and e.get("action") == "reroute"]
refused = [e for e in ev if e.get("action") == "refuse" and e.get("event") != "triton_load"]
print(len(rr) if rr and not refused else 0)
PY
}

if command -v ncu >/dev/null; then
	ncu --target-processes all --clock-control none -k regex:attn_decode_mla -c 2 \
		$run --log "$work/ncu.%p.jsonl" -- python3 tests/gpu/oracle_decode.py run "$work/ncu.pt" vllm \
		>"$work/ncu.out" 2>&1
	rc=$?
	n=$(rerouted ncu)
	[ "$rc" = 0 ] && [ "$n" -gt 0 ] &&
		echo "ok - ncu --target-processes all: vLLM's decode ran, $n launches rerouted, none refused" ||
		{ echo "not ok - under ncu (exit $rc, $n rerouted)"; grep -v '^==PROF==' "$work/ncu.out" | tail -n 8 | sed 's/^/#   /'; }
	grep -q '==PROF== Profiling "attn_decode_mla' "$work/ncu.out" &&
		echo "ok - ncu profiled the bundled kernel the shim launched instead" ||
		{ echo "not ok - ncu did not profile attn_decode_mla"; grep '==PROF==' "$work/ncu.out" | head -n 5 | sed 's/^/#   /'; }
else
	echo "ok - ncu under the shim # SKIP no ncu"
	echo "ok - ncu profiles the bundled kernel # SKIP no ncu"
fi

san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$san" ]; then
	"$san" --target-processes all --tool memcheck --print-limit 5 \
		$run --log "$work/san.%p.jsonl" -- python3 tests/gpu/oracle_decode.py run "$work/san.pt" vllm \
		>"$work/san.out" 2>&1
	rc=$?
	n=$(rerouted san)
	[ "$rc" = 0 ] && [ "$n" -gt 0 ] && grep -q "ERROR SUMMARY: 0 errors" "$work/san.out" &&
		echo "ok - compute-sanitizer memcheck: $n rerouted launches checked, 0 errors" ||
		{ echo "not ok - under compute-sanitizer (exit $rc, $n rerouted)"; grep '=====' "$work/san.out" | head -n 12 | sed 's/^/#   /'; }
else
	echo "ok - compute-sanitizer under the shim # SKIP no compute-sanitizer"
fi

#!/bin/sh
# scan_gpu.sh - `sm120 scan` on what a GPU server really has: PyTorch's
# libtorch_cuda.so (hundreds of zstd-compressed fatbins) and a Triton cache
# written by Triton itself, with --target auto read from the device.
set -u
B=${SM120_BUILD:-build}
sm120=$(pwd)/$B/sm120
out=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$out" "$work"' EXIT

torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so"))' 2>/dev/null)
if [ -f "$torch_lib" ]; then
	start=$(date +%s%N)
	"$sm120" scan --json --target auto "$torch_lib" >"$out" 2>"$work/err"
	rc=$?
	ms=$(( ($(date +%s%N) - start) / 1000000 ))
	secs=$(( ms / 1000 )).$(( ms % 1000 / 100 ))
	tail -n 1 "$work/err"
	if [ "$rc" -le 1 ] && python3 - "$out" "$secs" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
s = [r for r in rows if r["type"] == "summary"][0]
k = [r for r in rows if r["type"] == "kernel"]
archs = sorted({r["arch"] for r in k})
print(f"# libtorch_cuda.so: {s['kernels']} kernels in {s['cubins']} cubins, archs {archs}, "
      f"{s['errors']} errors, {float(sys.argv[2]):.1f} s, target {s['target']} {s['target_optin']} B")
assert s["errors"] == 0 and s["kernels"] > 10000 and "sm_120" in archs and "sm_90" in archs
assert s["target_optin"] == 232448, s
assert float(sys.argv[2]) < 60
PY
	then echo "ok - libtorch_cuda.so scanned in ${secs} s with no error (target auto = H200)"
	else echo "not ok - libtorch_cuda.so scan (exit $rc)"; cat "$work/err"; fi
else
	echo "not ok - no libtorch_cuda.so found through python3 -c 'import torch'"
fi

# A real Triton cache: tests/gpu/shim_torch.py's matmul with tiles that need
# 131072 B of shared memory, compiled and run by Triton itself.
if TRITON_CACHE_DIR=$work/cache python3 tests/gpu/shim_torch.py big | grep -qx OK; then
	want=$(python3 -c "import json,glob; print(json.load(open(glob.glob('$work/cache/*/mm.json')[0]))['shared'])")
	"$sm120" scan --target sm120 "$work/cache" >"$out" 2>&1
	rc=$?
	cat "$out"
	if [ "$want" -gt 101376 ] && [ "$rc" -eq 1 ] && grep -q "^NO .* $want .*mm " "$out"; then
		echo "ok - real Triton cache: mm needs $want B, does not fit sm120"
	else echo "not ok - real Triton cache vs sm120 (exit $rc, shared $want)"; fi
	"$sm120" scan --target auto "$work/cache" >"$out" 2>&1 && grep -q "^yes .*mm " "$out" &&
		echo "ok - the same kernel fits the H200 it was compiled on (--target auto)" ||
		{ echo "not ok - --target auto on the Triton cache"; cat "$out"; }
	if [ -n "${OUT:-}" ]; then
		d=$(dirname "$(ls "$work"/cache/*/mm.cubin)")
		cp "$d/mm.cubin" "$d/mm.json" "$OUT/" 2>/dev/null
	fi
else
	echo "not ok - Triton could not compile and run the matmul"
fi

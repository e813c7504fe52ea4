#!/bin/sh
# run.sh GPU_TEST... - `make test-gpu`: the GPU test programs, then the GPU
# scan checks; prints "N passed, N failed" last.  Needs an NVIDIA GPU.
set -u
log=$(mktemp)
trap 'rm -f "$log"' EXIT
passed=0
failed=0
count() {
	cat "$log"
	passed=$((passed + $(grep -c '^ok ' "$log")))
	failed=$((failed + $(grep -c '^not ok' "$log")))
}
for t in "$@"; do
	"$t" >"$log" 2>&1 || echo "not ok - $t exited $?" >>"$log"
	count
done
sh tests/gpu/scan_gpu.sh >"$log" 2>&1
count
sh tests/gpu/shim_gpu.sh >"$log" 2>&1
count
sh tests/gpu/reroute_gpu.sh >"$log" 2>&1
count
echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

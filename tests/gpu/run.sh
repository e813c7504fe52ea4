#!/bin/sh
# run.sh GPU_TEST... - `make test-gpu`: the GPU test programs, the bundled
# kernels under compute-sanitizer, the GPU scan checks, the shim under
# PyTorch + Triton (shim_gpu.sh) and the reroute suite (reroute_gpu.sh);
# prints "N passed, N failed" last.  Needs an NVIDIA GPU.
set -u
log=$(mktemp)
trap 'rm -f "$log" "$log.tail"' EXIT
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
# The bundled kernels under compute-sanitizer memcheck (when the toolkit has
# it): no out-of-bounds or misaligned access in any decode case or in one
# extend case of each head size.
san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$san" ]; then
	for c in decode_attn extend_attn:0 extend_attn:5 extend_attn:9; do
		t=${c%%:*} case=${c#*:}
		[ "$case" = "$c" ] && case=
		if EXTEND_ATTN_CASE=$case "$san" --tool memcheck --print-limit 5 \
			"${SM120_BUILD:-build}/test/gpu_$t" >"$log" 2>&1 &&
			grep -q "ERROR SUMMARY: 0 errors" "$log"; then
			echo "ok - memcheck: gpu_$t ${case:+case $case }has no memory error" >"$log"
		else
			sed 's/^/# /' "$log" | tail -8 >"$log.tail"
			{ echo "not ok - memcheck: gpu_$t ${case:+case $case}"; cat "$log.tail"; } >"$log"
		fi
		count
	done
fi
sh tests/gpu/scan_gpu.sh >"$log" 2>&1
count
sh tests/gpu/shim_gpu.sh >"$log" 2>&1
count
sh tests/gpu/reroute_gpu.sh >"$log" 2>&1
count
echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

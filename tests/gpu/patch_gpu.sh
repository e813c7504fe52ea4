#!/bin/sh
# patch_gpu.sh - the kernels `sm120 patch` changes, on the GPU: copies of the
# released packages (tests/oracle/fetch.sh, in $SM120_ORACLE, default
# $SM120_BUILD/oracle) patched by `sm120 patch apply --site-packages`; each
# patch site run through the framework's own host function (tests/gpu/
# bench_patch.py, which says what the inputs are and how outputs are judged)
# three times on the same inputs:
#   1. the unpatched kernels, plainly (no shim): the outputs to match;
#   2. the patched kernels under `sm120 run --mode enforce --target sm120`:
#      they must run (no OutOfResources) and match (1) against float64;
#   3. the unpatched kernels under the same: refused (OutOfResources), which
#      shows the emulation judges what the patches fix.
# The three runs share one Triton cache.  Prints "ok - ..." / "not ok - ...".
# Under 3 minutes on an H100.
. tests/gpu/env.sh   # $B, $sm120, $SM120_ORACLE, $work (one Triton cache)
py="python3 tests/gpu/bench_patch.py"

if ! $py prepare "$work/sites"; then
	echo "not ok - the patched copies could not be made (above); nothing run"
	exit 0
fi
orig='' patched=''
for d in "$work"/sites/*/; do
	rel=$(basename "$d")
	orig="$orig $rel=$d""orig"
	patched="$patched $rel=$d""patched"
done

# The RELEASE=DIR words of $orig and $patched are split on purpose (SC2086).
step() { # step NAME LOG COMMAND...: one run; a failing one prints its tail
	name=$1 log=$2
	shift 2
	if ! "$@" >"$log" 2>&1; then
		echo "not ok - $name exited $?"
		tail -n 15 "$log" | sed 's/^/# /'
	fi
}
# shellcheck disable=SC2086
step "the unpatched kernels, no shim" "$work/plain.log" $py run "$work/plain.pt" $orig
# shellcheck disable=SC2086
step "the patched kernels under enforce" "$work/patched.log" \
	"$sm120" run --mode enforce --target sm120 -- $py run "$work/patched.pt" $patched
# shellcheck disable=SC2086
step "the unpatched kernels under enforce" "$work/refused.log" \
	"$sm120" run --mode enforce --target sm120 -- $py run "$work/refused.pt" $orig
grep -h '^# ' "$work/plain.log" "$work/patched.log" "$work/refused.log" 2>/dev/null
if [ -f "$work/plain.pt" ] && [ -f "$work/patched.pt" ] && [ -f "$work/refused.pt" ]; then
	$py check "$work/plain.pt" "$work/patched.pt" "$work/refused.pt"
else
	echo "not ok - a run saved nothing: no comparison"
fi

#!/bin/sh
# bench.sh - `make bench-gpu`: shim overhead per launch.  Runs the empty-kernel
# launch loop with no shim and with the shim in each mode, three rounds
# interleaved (so drift hits all alike), best of each, and prints one table of
# launches/s and the ratio to no shim.  Target emulated as sm120.
set -u
B=${SM120_BUILD:-build}
SHIM=$(pwd)/$B/libsm120shim.so
bin=$B/test/gpu_bench_launch
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for round in 1 2 3; do
	for mode in none off diagnose enforce; do
		if [ $mode = none ]; then "$bin" >>"$out.$mode" || exit 1
		else LD_PRELOAD=$SHIM SM120SHIM_MODE=$mode SM120SHIM_TARGET=sm120 "$bin" >>"$out.$mode" || exit 1; fi
	done
done
python3 - "$out" <<'PY'
import sys
best = {}
for mode in ["none", "off", "diagnose", "enforce"]:
    for line in open(f"{sys.argv[1]}.{mode}"):
        api, rate = line.split()
        best[(mode, api)] = max(best.get((mode, api), 0), float(rate))
print(f"{'shim mode':<10} {'cuLaunchKernel/s':>17} {'ratio':>6} {'cuLaunchKernelEx/s':>19} {'ratio':>6}")
for mode in ["none", "off", "diagnose", "enforce"]:
    k, e = best[(mode, "cuLaunchKernel")], best[(mode, "cuLaunchKernelEx")]
    print(f"{mode:<10} {k:>17.0f} {k / best[('none', 'cuLaunchKernel')]:>6.3f} "
          f"{e:>19.0f} {e / best[('none', 'cuLaunchKernelEx')]:>6.3f}")
PY
rm -f "$out".*

#!/bin/sh
# test_doctor.sh - `sm120 doctor` against the fake driver, without any
# driver, and with a library that is not the shim.  Prints "ok - ..." lines.
set -u
echo 1..18 # plan: the number of checks below
B=${SM120_BUILD:-build}
T=$B/test
sm120=$B/sm120
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fake="$(pwd)/$T/fakecuda"

out=$work/out
. tests/scripts/lib.sh

check "with a driver, a device and the shim, doctor exits 0" 0 \
	env LD_LIBRARY_PATH="$fake" FAKECUDA_DEVICES=2 FAKECUDA_OPTIN_1=101376 "$sm120" doctor --target sm120
expect "it names the driver and its CUDA version" "^driver  *.*fakecuda/libcuda.so.1, CUDA 13.0$"
expect "every device with its limits" \
	"^device 1  *Fake H200 1, sm_90, 132 SMs: opt-in 101376 B per block, 102400 B per SM"
expect "the target" "^target  *sm120: opt-in 101376 B per block, 102400 B per SM, 1024 B reserved"
expect "the default mode" "^mode  *reroute (default)$"
hooks=$(nm -D --defined-only "$B/libsm120shim.so" | grep -c ' T cu')
expect "the shim and that it exports all $hooks hooks and dlsym" \
	"^shim  *.*libsm120shim.so: exports $hooks of $hooks hooked entry points and dlsym$"
rows=$(grep -c '^cu[A-Za-z_0-9]*  *[0-9]*  [yN][eO]' "$out")
[ "$rows" = "$hooks" ] && echo "ok - one hook row per exported hook ($rows)" ||
	{ echo "not ok - $rows hook rows for $hooks hooks"; sed 's/^/#   /' "$out"; }
expect "a _ptsz hook is asked of cuGetProcAddress with the per-thread flag" \
	"^cuLaunchKernel_ptsz  *7000  yes  *yes$"
expect "what the fake driver lacks is named, with what the shim does then" \
	"^cuModuleLoad  *2000  NO  *NO$"
expect "and counted" "not in this driver (calls to those get CUDA_ERROR_NOT_FOUND"

check "a bad mode in the environment is named" 0 \
	env LD_LIBRARY_PATH="$fake" SM120SHIM_MODE=fast "$sm120" doctor
expect "with what the shim does instead" "^mode  *fast (NOT VALID: the shim uses diagnose)$"

check "without a driver doctor exits 1" 1 env LD_LIBRARY_PATH=/nonexistent "$sm120" doctor
expect "saying the driver is missing" "^driver  *NOT USABLE: the NVIDIA driver (libcuda.so.1) is not installed"

check "a library that is not the shim exits 1" 1 \
	env LD_LIBRARY_PATH="$fake" SM120SHIM_LIB="$fake/libcuda.so.1" "$sm120" doctor --target sm120
expect "naming what it lacks" "^shim  *.*libcuda.so.1: exports [0-9]* of $hooks hooked entry points, but NOT dlsym$"

check "doctor --help exits 0" 0 "$sm120" doctor --help
check "doctor with a stray argument exits 2" 2 "$sm120" doctor extra

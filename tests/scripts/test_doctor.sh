#!/bin/sh
# test_doctor.sh - `sm120 doctor` against the fake driver, without any
# driver, and with a library that is not the shim; the settings it prints
# are the shim's own after its fallbacks (the same parser: a bad value is
# worded as the shim's stderr line).  Prints "ok - ..." lines.
set -u
echo 1..51 # plan: the number of checks below
unset SM120SHIM_MODE SM120SHIM_TARGET SM120SHIM_LOG SM120SHIM_ADVERTISE SM120SHIM_TRACE \
	SM120SHIM_LIB SM120SHIM_KV_CACHE_DTYPE SM120SHIM_PAGE_SIZE SM120SHIM_TOP_K \
	SM120SHIM_HIDDEN_SIZE
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
expect "the default advertise: per kernel, through the Python hook" \
	"^advertise  *kernel: frameworks see the target's own limit; Triton, through the Python hook, sees a kernel's need while it loads a kernel a rule reroutes (default)$"
expect "trace off by default" "^trace  *off (default)$"
expect "no log by default" "^log  *none (default)$"
for name in kv_cache_dtype page_size top_k hidden_size; do
	expect "the rule setting $name, unset" "^setting  *$name unset (default)$"
done
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

check "a bad mode in the environment exits 1" 1 \
	env LD_LIBRARY_PATH="$fake" SM120SHIM_MODE=fast "$sm120" doctor
expect "showing the mode the shim uses instead" "^mode  *diagnose (SM120SHIM_MODE is NOT VALID, see below)$"
expect "and why, as the shim words it" \
	"^NOT VALID  *SM120SHIM_MODE='fast' is not off, diagnose, enforce or reroute; using diagnose (changes nothing)$"

check "given settings are shown as the shim will use them" 0 env LD_LIBRARY_PATH="$fake" \
	SM120SHIM_MODE=enforce SM120SHIM_TARGET=232448 SM120SHIM_ADVERTISE=off SM120SHIM_TRACE=Yes \
	SM120SHIM_LOG="$work/x.%p.jsonl" SM120SHIM_KV_CACHE_DTYPE=fp8_e4m3 SM120SHIM_PAGE_SIZE=16 \
	"$sm120" doctor
expect "mode" "^mode  *enforce$"
expect "target" "^target  *232448 B: opt-in 232448 B per block"
expect "advertise" "^advertise  *off: frameworks see the target's own limit$"
expect "trace (a boolean in any case)" "^trace  *on$"
expect "the log, writable" "^log  *$work/x.%p.jsonl (one file per process: %p is the pid)$"
expect "kv_cache_dtype" "^setting  *kv_cache_dtype=fp8_e4m3$"
expect "page_size" "^setting  *page_size=16$"
[ -z "$(ls "$work")" ] || [ "$(ls "$work")" = out ] && echo "ok - checking the log leaves no file" ||
	{ echo "not ok - doctor left files"; ls "$work" | sed 's/^/#   /'; }

# A bad target: auto (the card's own limits), and diagnose rather than
# reroute, so that a typo never refuses what runs without the shim.
check "a bad target exits 1" 1 env LD_LIBRARY_PATH="$fake" SM120SHIM_TARGET=sm_90 "$sm120" doctor
expect "showing the card's own limits the shim falls back to" \
	"^target  *auto (sm_90): opt-in 232448 B per block, .* (SM120SHIM_TARGET is NOT VALID, see below)$"
expect "and the mode it lowers to" "^mode  *diagnose (not reroute: SM120SHIM_TARGET is NOT VALID, see below)$"
expect "with the shim's line" \
	"^NOT VALID  *SM120SHIM_TARGET='sm_90' is not auto, sm120, .* (did you mean sm90?); using auto (each GPU's own limits) and mode diagnose (changes nothing) instead of reroute$"
check "--target stands for SM120SHIM_TARGET" 1 env LD_LIBRARY_PATH="$fake" SM120SHIM_MODE=off \
	"$sm120" doctor --target sm99
expect "off stays off" "^mode  *off$"

check "bad trace, advertise, rule settings and an unwritable log exit 1" 1 env LD_LIBRARY_PATH="$fake" \
	SM120SHIM_TRACE=maybe SM120SHIM_ADVERTISE=lots SM120SHIM_TOP_K=abc \
	SM120SHIM_LOG="$work/nodir/x.jsonl" "$sm120" doctor --target sm120
expect "trace is off" "^trace  *off (SM120SHIM_TRACE is NOT VALID, see below)$"
expect "advertise is off" "^advertise  *off: frameworks see the target's own limit (SM120SHIM_ADVERTISE is NOT VALID, see below)$"
expect "top_k is unset" "^setting  *top_k unset (SM120SHIM_TOP_K is NOT VALID, see below)$"
expect "what top_k takes and what follows" \
	"^NOT VALID  *SM120SHIM_TOP_K='abc' is not a number of experts per token, 1..1048576 (config.json num_experts_per_tok); taken as unset: launches that need top_k are refused, not rerouted$"
expect "the log cannot be written" \
	"^log  *$work/nodir/x.jsonl CANNOT BE WRITTEN ($work/nodir/x.jsonl: No such file or directory (its directory does not exist)): the shim will log to stderr only$"

# The same parser: doctor's NOT VALID lines are the shim's stderr lines.
bad="SM120SHIM_MODE=enforce SM120SHIM_TARGET=sm_90 SM120SHIM_TRACE=maybe SM120SHIM_ADVERTISE=x SM120SHIM_PAGE_SIZE=0 SM120SHIM_KV_CACHE_DTYPE=fp8"
env LD_LIBRARY_PATH="$fake" $bad "$sm120" doctor | sed -n 's/^NOT VALID  *//p' >"$work/doctor.bad"
env LD_LIBRARY_PATH="$fake" FAKECUDA_LOG=/dev/null LD_PRELOAD="$(pwd)/$B/libsm120shim.so" $bad \
	"$T/shim_limits" 2>&1 >/dev/null | sed -n 's/^sm120shim: //p' | grep -v "^kernel \|^summary" >"$work/shim.bad"
[ "$(grep -c . "$work/doctor.bad")" = 5 ] && cmp -s "$work/doctor.bad" "$work/shim.bad" &&
	echo "ok - doctor names each bad value exactly as the shim does" ||
	{ echo "not ok - doctor and shim differ"; diff "$work/doctor.bad" "$work/shim.bad" | sed 's/^/#   /'; }

check "without a driver doctor exits 1" 1 env LD_LIBRARY_PATH=/nonexistent "$sm120" doctor
expect "saying the driver is missing" "^driver  *NOT USABLE: the NVIDIA driver (libcuda.so.1) is not installed"

check "a library that is not the shim exits 1" 1 \
	env LD_LIBRARY_PATH="$fake" SM120SHIM_LIB="$fake/libcuda.so.1" "$sm120" doctor --target sm120
expect "naming what it lacks" "^shim  *.*libcuda.so.1: exports [0-9]* of $hooks hooked entry points, but NOT dlsym$"

# The Python hook beside the shim: named when there, a failure when missing.
expect_in() { grep -q "$2" "$1" && echo "ok - $3" || { echo "not ok - $3"; sed 's/^/#   /' "$1"; }; }
env LD_LIBRARY_PATH="$fake" "$sm120" doctor --target sm120 >"$work/hook.out" 2>&1
expect_in "$work/hook.out" "^python hook .*/python: put first on PYTHONPATH by the shim" \
	"doctor names the Python hook beside the shim"
mkdir -p "$work/nohook"
cp "$B/libsm120shim.so" "$work/nohook/"
check "a shim without its python/ directory exits 1" 1 \
	env LD_LIBRARY_PATH="$fake" SM120SHIM_LIB="$work/nohook/libsm120shim.so" "$sm120" doctor --target sm120
expect "saying what to copy" "^python hook MISSING: .*/nohook/python/sitecustomize.py: copy build/python/ beside the shim"

check "doctor --help exits 0" 0 "$sm120" doctor --help
check "doctor with a stray argument exits 2" 2 "$sm120" doctor extra

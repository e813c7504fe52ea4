#!/bin/sh
# test_intercept.sh - the shim under processes that reach a (fake) driver
# every way a real one does.  Each program runs without and with the shim
# in mode off: the driver must record exactly the same calls (pass-through
# is exact, _ptsz twins included), and the shim's trace must show it saw
# every launch on the same entry point.  Prints "ok - ..." / "not ok - ...".
set -u
echo 1..10 # plan: the number of checks below
B=${SM120_BUILD:-build}
T=$B/test
SHIM=$(pwd)/$B/libsm120shim.so
export LD_LIBRARY_PATH="$(pwd)/$T/fakecuda:$(pwd)/$T${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; shift; for f in "$@"; do sed 's/^/#   /' "$f"; done; }

# run NAME PROGRAM ARGS: once plain (NAME.plain.*), once preloaded with trace (NAME.shim.*)
run() {
	name=$1
	shift
	FAKECUDA_LOG=$work/$name.plain.drv "$@" >"$work/$name.plain.out" 2>"$work/$name.plain.err"
	echo $? >"$work/$name.plain.rc"
	FAKECUDA_LOG=$work/$name.shim.drv LD_PRELOAD=$SHIM SM120SHIM_MODE=off SM120SHIM_TRACE=1 "$@" \
		>"$work/$name.shim.out" 2>"$work/$name.shim.err"
	echo $? >"$work/$name.shim.rc"
}

# same_calls NAME DESC: identical driver records, exit 0 both, and every
# cuLaunch* the driver saw was traced by the shim on the same symbol.
same_calls() {
	name=$1 desc=$2
	d=$work/$name
	touch "$d.plain.drv" "$d.shim.drv"
	if [ "$(cat "$d.plain.rc")" != 0 ] || [ "$(cat "$d.shim.rc")" != 0 ]; then
		nok "$desc: exit $(cat "$d.plain.rc") plain, $(cat "$d.shim.rc") with the shim" \
			"$d.plain.err" "$d.shim.err"
		return
	fi
	if ! cmp -s "$d.plain.drv" "$d.shim.drv"; then
		nok "$desc: the driver saw different calls with the shim" "$d.plain.drv" "$d.shim.drv"
		return
	fi
	grep '^cuLaunch' "$d.shim.drv" | sort >"$d.want"
	sed -n 's/^sm120shim: trace \(cuLaunch.*\)/\1/p' "$d.shim.err" | sort >"$d.got"
	if [ ! -s "$d.want" ] || ! cmp -s "$d.want" "$d.got"; then
		nok "$desc: launches traced by the shim differ from those the driver saw" "$d.want" "$d.got"
		return
	fi
	ok "$desc ($(wc -l <"$d.want") launches)"
}

run paths $T/shim_paths paths
same_calls paths "direct, dlsym(handle), dlsym(RTLD_DEFAULT), cuGetProcAddress v2 flags 0/2, legacy cuGetProcAddress"
if grep -qx cuLaunchKernel_ptsz "$work/paths.shim.drv" && grep -qx cuLaunchKernelEx_ptsz "$work/paths.shim.drv"; then
	ok "flag 2 reaches the _ptsz twins through the shim"
else nok "_ptsz twins" "$work/paths.shim.drv"; fi

# Nsight Compute answers dlopen("libcuda.so.1") with its libcuda-injection.so,
# which forwards to the driver: launches through it reach the shim, and go on
# through the tool.
mkdir -p "$work/tool"
cp "$T/fakecuda/libcuda.so.1" "$work/tool/libcuda-injection.so"
LD_LIBRARY_PATH="$work/tool:$LD_LIBRARY_PATH" run standin $T/shim_paths standin
same_calls standin "a tool's libcuda-injection.so (ncu): launches through its entry points reach the shim, then the tool"

run ctor $T/shim_ctor
same_calls ctor "launches from another library's constructor (direct and dlsym)"

run threads $T/shim_paths threads
d=$work/threads
if [ "$(cat $d.shim.rc)" = 0 ] && [ "$(grep -c '^cuLaunchKernel_ptsz$' $d.shim.drv)" = 32000 ] &&
	[ "$(grep -c 'trace cuLaunchKernel_ptsz' $d.shim.err)" = 32000 ]; then
	ok "32 threads x 1000 launches: all 32000 traced and passed on"
else nok "32 threads (exit $(cat $d.shim.rc))" "$d.shim.err"; fi

run fork $T/shim_paths fork
same_calls fork "a launch before and one in a forked child"
[ "$(grep -c 'trace cuLaunchKernel$' "$work/fork.shim.err")" = 2 ] &&
	ok "the forked child's launch went through the shim" ||
	nok "fork: child's launch not traced" "$work/fork.shim.err"

run library $T/shim_paths library
same_calls library "cuLibraryLoadData + cuLibraryGetKernel + launch by CUkernel handle"

run next $T/shim_next
if grep -qx "next: next_b" "$work/next.plain.out" && grep -qx "next: next_b" "$work/next.shim.out"; then
	ok "dlsym(RTLD_NEXT) from another library still finds the next definition"
else nok "dlsym(RTLD_NEXT)" "$work/next.plain.out" "$work/next.shim.out" "$work/next.shim.err"; fi

# No driver at all: hooks fail cleanly, nothing calls through NULL.
FAKECUDA_LOG=/dev/null LD_LIBRARY_PATH=/nonexistent LD_PRELOAD=$SHIM $T/shim_paths paths \
	>"$work/nodrv.out" 2>&1
rc=$?
if [ "$rc" = 127 ] || grep -q "FAIL" "$work/nodrv.out"; then
	ok "without a driver the program fails as it would without the shim (exit $rc), no crash"
else nok "no-driver run (exit $rc)" "$work/nodrv.out"; fi

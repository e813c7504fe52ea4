#!/bin/sh
# test_occupancy.sh - SM120SHIM_EMULATE_OCCUPANCY against the fake driver
# (an H200 that keeps and enforces MAX_DYNAMIC_SHARED_SIZE_BYTES:
# FAKECUDA_OCCUPANCY).  tests/shim/occupancy.c sets, reads and launches one
# module kernel and one CUkernel through cuLaunchKernel, cuLaunchKernelEx and
# cuLaunchCooperativeKernel.  Padded, the driver must see the padded sizes
# and the attribute raises, and the process must see exactly what it sees
# without the shim (return codes, attribute values, occupancy answers);
# unset, invalid, off, with target auto or in mode off nothing may change.
# Prints "ok - ..." lines.
set -u
echo 1..23 # plan: the number of checks below
unset SM120SHIM_MODE SM120SHIM_TARGET SM120SHIM_LOG SM120SHIM_ADVERTISE SM120SHIM_TRACE \
	SM120SHIM_EMULATE_OCCUPANCY
B=${SM120_BUILD:-build}
T=$B/test
SHIM=$(pwd)/$B/libsm120shim.so
export LD_LIBRARY_PATH="$(pwd)/$T/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SM120_FIXTURES=${SM120_FIXTURES:-$T/fixtures} FAKECUDA_OCCUPANCY=1 FAKECUDA_VALUES=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; shift; for f in "$@"; do sed 's/^/#   /' "$f"; done; }

# run NAME [VAR=VALUE...]: the program, preloaded with the shim unless NAME is plain;
# NAME.out (what the process saw), NAME.err, NAME.drv (what the driver saw: attribute
# values set and launches with their dynamic bytes), NAME.jsonl
run() {
	name=$1
	shift
	if [ "$name" = plain ]; then
		env FAKECUDA_LOG="$work/$name.log" "$T/shim_occupancy" >"$work/$name.out" 2>"$work/$name.err"
	else
		env FAKECUDA_LOG="$work/$name.log" LD_PRELOAD="$SHIM" SM120SHIM_LOG="$work/$name.jsonl" \
			"$@" "$T/shim_occupancy" >"$work/$name.out" 2>"$work/$name.err"
	fi
	echo $? >"$work/$name.rc"
	awk '/^cuLaunch/ { l = $0 } /^smem / { print l " " $0 } /^MAX_DYNAMIC/' \
		"$work/$name.log" >"$work/$name.drv"
}

# unchanged NAME DESC: the process saw and the driver got exactly what they do without the shim
unchanged() {
	if [ "$(cat "$work/$1.rc")" = 0 ] && cmp -s "$work/plain.out" "$work/$1.out" &&
		cmp -s "$work/plain.drv" "$work/$1.drv" && ! grep -qs occupancy_pad "$work/$1.jsonl"; then
		ok "$2"
	else
		nok "$2" "$work/$1.out" "$work/$1.drv" "$work/$1.err"
	fi
}

run plain
if [ "$(cat "$work/plain.rc")" = 0 ] && grep -qx 'launch 101377 -> 1' "$work/plain.out" &&
	grep -qx 'launch 65536 -> 1' "$work/plain.out" && grep -qx 'get -> 0 60000' "$work/plain.out"; then
	ok "without the shim the fake driver enforces the attribute (launches over it fail)"
else nok "the program without the shim" "$work/plain.out" "$work/plain.err"; fi

run unset SM120SHIM_MODE=diagnose SM120SHIM_TARGET=sm120
unchanged unset "unset: the launches and the attribute are untouched"
run zero SM120SHIM_MODE=diagnose SM120SHIM_TARGET=sm120 SM120SHIM_EMULATE_OCCUPANCY=0
unchanged zero "0: untouched"
run bad SM120SHIM_MODE=diagnose SM120SHIM_TARGET=sm120 SM120SHIM_EMULATE_OCCUPANCY=maybe
unchanged bad "an invalid value: untouched"
if [ "$(grep -c EMULATE_OCCUPANCY "$work/bad.err")" = 1 ] &&
	grep -q "SM120SHIM_EMULATE_OCCUPANCY='maybe' is not 1, 0, true, false, yes, no, on or off; using off" \
		"$work/bad.err"; then
	ok "an invalid value is named once on stderr with the accepted values and the fallback"
else nok "the warning for an invalid value" "$work/bad.err"; fi
run auto SM120SHIM_MODE=diagnose SM120SHIM_EMULATE_OCCUPANCY=1
unchanged auto "target auto: nothing is emulated, nothing padded"
run off SM120SHIM_MODE=off SM120SHIM_TARGET=sm120 SM120SHIM_EMULATE_OCCUPANCY=1
unchanged off "mode off: nothing padded"

# What the driver must see, padded to SM120's occupancy (256 threads; 1 KiB reserved and
# 128 B units): 98304 B and 59904 B keep 1 block per SM on SM120 and 2 or 3 on the H200:
# padded to 115713 B (a block of 116864 B, 2 do not fit in 233472 B); 49152 B keeps 2 on
# SM120, 4 on the H200: 76801 B.  The attribute is raised to what a padded launch needs.
cat >"$work/want.drv" <<'EOF'
MAX_DYNAMIC_SHARED_SIZE_BYTES 101376
MAX_DYNAMIC_SHARED_SIZE_BYTES 115713
cuLaunchKernel smem 115713
cuLaunchKernelEx smem 76801
MAX_DYNAMIC_SHARED_SIZE_BYTES 115713
cuLaunchKernel smem 115713
MAX_DYNAMIC_SHARED_SIZE_BYTES 101376
cuLaunchKernel smem 98304
MAX_DYNAMIC_SHARED_SIZE_BYTES 115713
cuLaunchKernel smem 115713
cuLaunchCooperativeKernel smem 76801
cuLaunchCooperativeKernel smem 49152
cuLaunchCooperativeKernel smem 49152
EOF
for mode in diagnose enforce; do
	run $mode SM120SHIM_MODE=$mode SM120SHIM_TARGET=sm120 SM120SHIM_EMULATE_OCCUPANCY=1
	if cmp -s "$work/want.drv" "$work/$mode.drv"; then
		ok "$mode: the driver gets the padded sizes and the raised attribute, on every launch entry point"
	else nok "$mode: what the driver got (want, got)" "$work/want.drv" "$work/$mode.drv"; fi
	if [ "$(cat "$work/$mode.rc")" = 0 ] && cmp -s "$work/plain.out" "$work/$mode.out"; then
		ok "$mode: the process sees what it sees without the shim (codes, attribute values, occupancy)"
	else nok "$mode: what the process saw (plain, padded)" "$work/plain.out" "$work/$mode.out"; fi
done
d=$work/diagnose
grep -q '^cuLaunchKernel smem 101377$' "$work/plain.drv" && ! grep -q 'smem 101377' "$d.drv" &&
	ok "a launch over what the process allowed is refused by the shim, as the driver refuses it" ||
	nok "the launch over the attribute" "$d.drv"
sed -n 's/^kernel launch 98304, capturing -> //p' "$d.out" | grep -qx 0 &&
	sed -n '8p' "$d.drv" | grep -qx 'cuLaunchKernel smem 98304' &&
	ok "no attribute is raised while the stream is captured: that launch runs unpadded" ||
	nok "the launch during capture" "$d.drv"

pads=$(grep -c '"event":"occupancy","level":"info","action":"pad"' "$d.jsonl")
[ "$pads" = 2 ] && ok "the padding is logged once per kernel (the module's and the library's): $pads" ||
	nok "$pads pad events, not 2" "$d.jsonl"
grep -q '"kernel":"_fwd_kernel","via":"cuLaunchKernel".*"occupancy_pad":{"from":98304,"to":115713,"blocks":1,"target_blocks":1,"device_blocks":2}' \
	"$d.jsonl" && ok "the event has the sizes and the blocks per SM (target, device, padded)" ||
	nok "the occupancy_pad event" "$d.jsonl"
grep -q '"action":"failed".*"via":"cuLaunchCooperativeKernel".*CUresult 720' "$d.jsonl" &&
	[ "$(grep -c 'not padded again' "$d.err")" = 1 ] &&
	ok "a padded cooperative launch the driver refuses runs unpadded, said once" ||
	nok "the refused cooperative launch" "$d.jsonl" "$d.err"
[ "$(grep -c 'EMULATE_OCCUPANCY: launches are padded' "$d.err")" = 1 ] &&
	ok "one stderr line says padding is on" || nok "the stderr line" "$d.err"

# Registers count: 128 a thread hold a block of 256 threads to 2 per SM on the H200 as on
# SM120, so its 49152 B launches are not padded (their padding would only shrink L1); the
# 98304 B ones keep 1 block per SM on SM120 and 2 here: padded as before.
run regs SM120SHIM_MODE=diagnose SM120SHIM_TARGET=sm120 SM120SHIM_EMULATE_OCCUPANCY=1 FAKECUDA_REGS=128
sed -e '/^cuLaunchCooperativeKernel smem 76801$/d' -e 's/^cuLaunchKernelEx smem 76801$/cuLaunchKernelEx smem 49152/' \
	"$work/want.drv" >"$work/want_regs.drv"
if cmp -s "$work/want_regs.drv" "$work/regs.drv" && [ "$(cat "$work/regs.rc")" = 0 ] &&
	cmp -s "$work/plain.out" "$work/regs.out"; then
	ok "a kernel its registers hold to SM120's blocks per SM is not padded; the others are"
else nok "registers: what the driver got (want, got)" "$work/want_regs.drv" "$work/regs.drv" "$work/regs.out"; fi
# ... asked of the driver once per kernel (the module's and the library's), not per launch
asked=$(grep -c '^NUM_REGS$' "$work/regs.log")
launched=$(grep -c '^cuLaunch' "$work/regs.log")
[ "$asked" = 2 ] && [ "$launched" -gt 2 ] &&
	ok "the registers are asked once per kernel: $asked times over $launched launches" ||
	nok "NUM_REGS asked $asked times over $launched launches, not 2" "$work/regs.log"

# sm120 report ranks limit problems: the occupancy events change none of its figures.
"$B/sm120" report "$d.jsonl" >"$work/report.with" 2>&1
grep -v '"event":"occupancy"' "$d.jsonl" >"$work/without.jsonl"
"$B/sm120" report "$work/without.jsonl" >"$work/report.without" 2>&1
cmp -s "$work/report.with" "$work/report.without" &&
	ok "sm120 report is the same with and without the occupancy events" ||
	nok "sm120 report" "$work/report.with" "$work/report.without"

# 8 threads launch padded while another sets the attribute lower and back: the driver
# keeps what the padded launches need, none fails or falls back to unpadded.
env FAKECUDA_LOG=/dev/null LD_PRELOAD="$SHIM" SM120SHIM_MODE=diagnose SM120SHIM_TARGET=sm120 \
	SM120SHIM_EMULATE_OCCUPANCY=1 "$T/shim_occupancy" threads >"$work/threads.out" 2>"$work/threads.err"
grep -qx 'threads: 0 failed' "$work/threads.out" && ! grep -q 'not padded again' "$work/threads.err" &&
	ok "8 threads launching padded against attribute sets in another: none fails" ||
	nok "threads" "$work/threads.out" "$work/threads.err"

# The tool checks the variable as the shim reads it.
SM120SHIM_EMULATE_OCCUPANCY=1 "$B/sm120" doctor --target sm120 >"$work/doctor" 2>&1
grep -q '^occupancy  *on: dynamic shared memory is padded' "$work/doctor" &&
	ok "sm120 doctor shows the setting" || nok "doctor" "$work/doctor"
SM120SHIM_EMULATE_OCCUPANCY=maybe "$B/sm120" run --target sm120 -- true >"$work/run" 2>&1
[ $? = 2 ] && grep -q "SM120SHIM_EMULATE_OCCUPANCY='maybe'" "$work/run" &&
	ok "sm120 run refuses an invalid value before the command starts" || nok "sm120 run" "$work/run"

#!/bin/sh
# test_modes.sh - SM120SHIM_MODE and SM120SHIM_TARGET against the fake
# driver (an H200): what the process sees and what reaches the driver.
# Prints "ok - ..." / "not ok - ...".
set -u
B=${SM120_BUILD:-build}
T=$B/test
SHIM=$(pwd)/$B/libsm120shim.so
export LD_LIBRARY_PATH="$(pwd)/$T/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run NAME ENV...: the limits program with the shim and ENV
run() {
	name=$1
	shift
	env FAKECUDA_LOG="$work/$name.drv" LD_PRELOAD="$SHIM" SM120SHIM_LOG="$work/$name.%p.jsonl" "$@" \
		"$T/shim_limits" >"$work/$name.out" 2>"$work/$name.err"
	touch "$work/$name.drv"
}
# expect NAME DESCRIPTION LINE...: every LINE is in NAME's output
expect() {
	name=$1 desc=$2
	shift 2
	for line in "$@"; do
		if ! grep -qxF "$line" "$work/$name.out"; then
			echo "not ok - $desc: no '$line'"
			sed 's/^/#   /' "$work/$name.out" "$work/$name.err"
			return
		fi
	done
	echo "ok - $desc"
}
launches() { grep -c '^cuLaunch' "$work/$1.drv"; }

run enforce SM120SHIM_MODE=enforce SM120SHIM_TARGET=sm120
expect enforce "enforce sm120 on an H200 reports SM120's limits, other attributes unchanged" \
	"optin 101376" "per_sm 102400" "other 1"
expect enforce "enforce refuses what SM120 refuses, with the driver's error, and passes the rest" \
	"set 232448 -> 1" "set 101376 -> 0" "launch 106496 -> 1" "launch 101376 -> 0" \
	"launchex 106496 -> 1" "launchex 4096 -> 0"
[ "$(launches enforce)" = 2 ] && echo "ok - refused launches never reach the driver" ||
	{ echo "not ok - enforce: $(launches enforce) launches reached the driver"; cat "$work/enforce.drv"; }
n=$(grep -c "kernel _fwd_kernel: " "$work/enforce.err")
[ "$n" = 1 ] && grep -q "asks to be allowed 232448 B .*through cuFuncSetAttribute); sm120 allows 101376 B: refused" "$work/enforce.err" &&
	echo "ok - one stderr line per problem kernel (not per launch), naming kernel, bytes and limit" ||
	{ echo "not ok - enforce stderr ($n lines)"; sed 's/^/#   /' "$work/enforce.err"; }
grep -q "summary: 3 launches or attribute sets over the sm120" "$work/enforce.err" &&
	echo "ok - a summary at exit" || { echo "not ok - summary"; sed 's/^/#   /' "$work/enforce.err"; }
if python3 - "$work"/enforce.*.jsonl <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
kinds = sorted((e["event"], e["action"], e["via"]) for e in ev)
assert kinds == [("launch", "refuse", "cuLaunchKernel"), ("launch", "refuse", "cuLaunchKernelEx"),
                 ("set_attribute", "refuse", "cuFuncSetAttribute")], kinds
l = [e for e in ev if e["via"] == "cuLaunchKernelEx"][0]
assert l["kernel"] == "_fwd_kernel" and l["dynamic_smem"] == 106496 and l["limit"] == 101376
assert l["grid"] == [3, 8, 1] and l["block"] == [256, 1, 1] and l["target"] == "sm120", l
PY
then echo "ok - the JSON log has one event per refusal with kernel, entry point, grid and bytes"
else echo "not ok - JSON log"; cat "$work"/enforce.*.jsonl; fi

run diagnose SM120SHIM_MODE=diagnose SM120SHIM_TARGET=sm120
expect diagnose "diagnose changes nothing the process sees" "optin 232448" "set 232448 -> 0" \
	"launch 106496 -> 0" "launchex 106496 -> 0"
[ "$(launches diagnose)" = 4 ] && grep -q "that GPU would refuse it (launched unchanged: diagnose)" \
	"$work/diagnose.err" && echo "ok - diagnose launches everything and says what sm120 would refuse" ||
	{ echo "not ok - diagnose"; sed 's/^/#   /' "$work/diagnose.err"; }

run static SM120SHIM_MODE=enforce SM120SHIM_TARGET=sm120 FAKECUDA_STATIC=48000
expect static "static smem counts: 48000 static + 101376 dynamic is refused" "launch 101376 -> 1" \
	"set 101376 -> 1"

run off SM120SHIM_MODE=off SM120SHIM_TARGET=sm120
expect off "mode off: nothing emulated, nothing refused" "optin 232448" "launch 106496 -> 0"
[ ! -s "$work/off.err" ] && echo "ok - mode off prints nothing" || { echo "not ok - off printed"; cat "$work/off.err"; }

run auto SM120SHIM_MODE=enforce
expect auto "target auto on the H200: its own limits, 106496 B passes" "optin 232448" "launch 106496 -> 0"

run default SM120SHIM_TARGET=sm120
expect default "the default mode (reroute) with no rule refuses like enforce, advertises nothing" \
	"optin 101376" "launch 106496 -> 1"

run badmode SM120SHIM_MODE=enforcee SM120SHIM_TARGET=sm99
expect badmode "a bad mode falls back to diagnose (changes nothing)" "optin 232448" "launch 106496 -> 0"
grep -q "SM120SHIM_MODE='enforcee' is not off, diagnose, enforce or reroute; using diagnose" "$work/badmode.err" &&
	grep -q "SM120SHIM_TARGET: unknown target 'sm99'" "$work/badmode.err" &&
	echo "ok - bad settings are named once on stderr with what was done instead" ||
	{ echo "not ok - bad settings message"; sed 's/^/#   /' "$work/badmode.err"; }

ln -s /etc/passwd "$work/link.jsonl"
env FAKECUDA_LOG=/dev/null LD_PRELOAD="$SHIM" SM120SHIM_MODE=enforce SM120SHIM_TARGET=sm120 \
	SM120SHIM_LOG="$work/link.jsonl" "$T/shim_limits" >/dev/null 2>"$work/link.err"
grep -q "cannot open SM120SHIM_LOG" "$work/link.err" && ! grep -q fwd /etc/passwd &&
	echo "ok - the log is never written through a symlink" ||
	{ echo "not ok - symlinked log"; cat "$work/link.err"; }

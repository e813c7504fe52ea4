#!/bin/sh
# test_modes.sh - SM120SHIM_MODE and SM120SHIM_TARGET against the fake
# driver (an H200): what the process sees and what reaches the driver; bad
# values of every setting (the safe fallback, one stderr line each), and the
# exit summary when the log cannot be written.
# Prints "ok - ..." / "not ok - ...".
set -u
echo 1..41 # plan: the number of checks below
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
	"optin 101376" "per_sm 102400" "other 132"
expect enforce "enforce refuses what SM120 refuses, with the driver's error, and passes the rest" \
	"set 232448 -> 1" "set 101376 -> 0" "launch 106496 -> 1" "launch 101376 -> 0" \
	"launchex 106496 -> 1" "launchex 4096 -> 0"
expect enforce "enforce: occupancy answers are the target's (blocks per SM, dynamic bytes, potential block size)" \
	"occupancy 256 threads 51200 B -> 1 blocks" "occupancy flags 256 threads 51200 B -> 1 blocks" \
	"available dynamic at 2 blocks -> 50176" "potential 200 B per thread -> block 480 grid 132" \
	"potential 60000 B -> block 1024 grid 132"
expect enforce "enforce: a CUkernel (cudart's handle) is refused like a CUfunction" \
	"kernel set 232448 -> 1" "kernel launch 106496 -> 1"
[ "$(launches enforce)" = 2 ] && echo "ok - refused launches never reach the driver" ||
	{ echo "not ok - enforce: $(launches enforce) launches reached the driver"; cat "$work/enforce.drv"; }
n=$(grep -c "kernel _fwd_kernel (from memory 0x" "$work/enforce.err")
[ "$n" = 2 ] && grep -q "asks to be allowed 232448 B .*through cuFuncSetAttribute); sm120 allows 101376 B: refused" "$work/enforce.err" &&
	grep -q "a launch needs 106496 B .*refused, as that GPU would (CUDA_ERROR_INVALID_VALUE). SM120SHIM_MODE=reroute runs" "$work/enforce.err" &&
	echo "ok - one stderr line per problem (the attribute set, the launches: not one per launch), naming kernel, image, bytes and limit" ||
	{ echo "not ok - enforce stderr ($n lines)"; sed 's/^/#   /' "$work/enforce.err"; }
grep -q "summary: 5 launches or attribute sets over the sm120 shared-memory limit (mode enforce): 0 rerouted, 5 refused, 0 only logged, 0 attribute sets accepted for rerouting" "$work/enforce.err" &&
	echo "ok - a summary at exit" || { echo "not ok - summary"; sed 's/^/#   /' "$work/enforce.err"; }
if python3 - "$work"/enforce.*.jsonl <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
load = [e for e in ev if e["event"] == "load"]
assert [e["via"] for e in load] == ["cuModuleLoadData", "cuLibraryLoadData"], load
for e in load:
    assert (e["action"], e["image"], e["arch"], e["kernels"]) == ("parsed", "cubin", "sm_90a", 1), e
ev = [e for e in ev if e["event"] != "load"]
kinds = sorted((e["event"], e["action"], e["via"]) for e in ev)
assert kinds == [("launch", "refuse", "cuLaunchKernel"), ("launch", "refuse", "cuLaunchKernel"),
                 ("launch", "refuse", "cuLaunchKernelEx"),
                 ("set_attribute", "refuse", "cuFuncSetAttribute"),
                 ("set_attribute", "refuse", "cuKernelSetAttribute")], kinds
l = [e for e in ev if e["via"] == "cuLaunchKernelEx"][0]
assert l["kernel"] == "_fwd_kernel" and l["dynamic_smem"] == 106496 and l["limit"] == 101376
assert l["grid"] == [3, 8, 1] and l["block"] == [256, 1, 1] and l["target"] == "sm120", l
# The facts come from the cubin the process loaded, copied before it freed it.
assert l["origin"] == load[0]["origin"] and l["origin"].startswith("memory 0x"), l
assert l["param_sizes"] == [8, 8, 4, 8, 8] and l["param_bytes"] == 40, l
PY
then echo "ok - the JSON log: the load, and one event per refusal with kernel, image, parameters, grid and bytes"
else echo "not ok - JSON log"; cat "$work"/enforce.*.jsonl; fi

run diagnose SM120SHIM_MODE=diagnose SM120SHIM_TARGET=sm120
expect diagnose "diagnose changes nothing the process sees" "optin 232448" "set 232448 -> 0" \
	"launch 106496 -> 0" "launchex 106496 -> 0" "occupancy 256 threads 51200 B -> 4 blocks" \
	"available dynamic at 2 blocks -> 115712" "potential 200 B per thread -> block 576 grid 264" \
	"potential 60000 B -> block 1024 grid 264" "kernel set 232448 -> 0" "kernel launch 106496 -> 0"
[ "$(launches diagnose)" = 5 ] && grep -q "that GPU would refuse it (launched unchanged: diagnose)" \
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

# Target auto with two different GPUs: each launch is judged by its own device.
run mixed0 SM120SHIM_MODE=diagnose FAKECUDA_DEVICES=2 FAKECUDA_OPTIN_1=101376 FAKECUDA_CURRENT=0
run mixed1 SM120SHIM_MODE=diagnose FAKECUDA_DEVICES=2 FAKECUDA_OPTIN_1=101376 FAKECUDA_CURRENT=1
! grep -q '"event":"launch"' "$work"/mixed0.*.jsonl &&
	[ "$(grep -c '"event":"launch".*"limit":101376' "$work"/mixed1.*.jsonl)" = 3 ] &&
	echo "ok - target auto on two GPUs: launches are judged by the current device's limits" ||
	{ echo "not ok - mixed devices"; cat "$work"/mixed*.jsonl; }

run default SM120SHIM_TARGET=sm120
expect default "the default (reroute, advertise kernel) reports the target's own opt-in: only the Python hook is shown more, per kernel" \
	"optin 101376" "per_sm 102400" "set 232448 -> 1"
expect default "... and refuses a _fwd_kernel whose parameters are not SGLang's extend kernel" \
	"launch 106496 -> 1" "launchex 106496 -> 1"
grep -q "kernel _fwd_kernel (from memory 0x.*refused, as that GPU would (CUDA_ERROR_INVALID_VALUE); not rerouted: _fwd_kernel has 5 parameters (8,8,4,8,8 bytes), which fit no reading of rule sglang-extend-" "$work/default.err" &&
	grep -q '"action":"refuse".*"reason":"_fwd_kernel has 5 parameters' "$work"/default.*.jsonl &&
	echo "ok - the refusal says why no rule took it, on stderr and in the log" ||
	{ echo "not ok - reroute refusal reason"; sed 's/^/#   /' "$work/default.err"; }

run advertise SM120SHIM_MODE=reroute SM120SHIM_TARGET=sm120 SM120SHIM_ADVERTISE=232448
expect advertise "reroute with SM120SHIM_ADVERTISE: the advertised opt-in, the over-limit set accepted" \
	"optin 232448" "per_sm 102400" "set 232448 -> 0" "kernel set 232448 -> 0"
expect advertise "... and, with no rule to reroute them, over-limit launches refused" \
	"launch 106496 -> 1" "launchex 106496 -> 1" "kernel launch 106496 -> 1"
grep -q '"event":"set_attribute","action":"accept"' "$work"/advertise.*.jsonl &&
	grep -q "accepted for rerouting (the driver is given 101376 B" "$work/advertise.err" &&
	echo "ok - an accepted attribute is logged, and the driver is given what the target allows" ||
	{ echo "not ok - advertise: accept"; sed 's/^/#   /' "$work/advertise.err"; }

# A real SM120 card (the fake with 101376 B), target auto, reroute: Triton is
# told 232448, and its attribute set is lowered so the real driver accepts it.
run realsm120 SM120SHIM_MODE=reroute SM120SHIM_ADVERTISE=232448 FAKECUDA_OPTIN=101376
expect realsm120 "on a real SM120 the advertised opt-in is reported, above what the card has" \
	"optin 232448" "kernel set 232448 -> 0" "set 101376 -> 0"
expect realsm120 "... and launches over the card's limit are refused (no rule for this kernel)" \
	"launch 106496 -> 1" "kernel launch 106496 -> 1"

run badmode SM120SHIM_MODE=enforcee SM120SHIM_TARGET=sm99
expect badmode "a bad mode falls back to diagnose (changes nothing)" "optin 232448" "launch 106496 -> 0"
grep -q "SM120SHIM_MODE='enforcee' is not off, diagnose, enforce or reroute; using diagnose" "$work/badmode.err" &&
	grep -q "SM120SHIM_TARGET='sm99' is not auto, sm120, .*; using auto (each GPU's own limits)$" "$work/badmode.err" &&
	echo "ok - bad settings are named once on stderr with what was done instead" ||
	{ echo "not ok - bad settings message"; sed 's/^/#   /' "$work/badmode.err"; }

# warned NAME PATTERN: NAME's stderr has exactly one line, matching PATTERN
warned() {
	[ "$(grep -c . "$work/$1.err")" = 1 ] && grep -q -- "$2" "$work/$1.err"
}

# A bad target must not make a process fail that runs without the shim: a
# typo for sm90 on this Hopper card falls back to the card's own limits and,
# as the mode would then still reroute or enforce, to diagnose.
for m in reroute enforce; do
	run badtarget_$m SM120SHIM_MODE=$m SM120SHIM_TARGET=sm_90
	expect badtarget_$m "a bad target under $m: the card's own limits, nothing refused" \
		"optin 232448" "per_sm 233472" "set 232448 -> 0" "launch 106496 -> 0" \
		"launchex 106496 -> 0" "kernel set 232448 -> 0" "kernel launch 106496 -> 0"
done
[ "$(launches badtarget_reroute)" = 5 ] &&
	warned badtarget_reroute "^sm120shim: SM120SHIM_TARGET='sm_90' is not auto, sm120, sm121, sm89, sm86, sm80, sm90, sm100, or a byte count 1024..16777216 (did you mean sm90?); using auto (each GPU's own limits) and mode diagnose (changes nothing) instead of reroute$" &&
	echo "ok - every launch reaches the driver; one stderr line names the variable, the value, what is accepted and the fallback" ||
	{ echo "not ok - bad target: $(launches badtarget_reroute) launches"; sed 's/^/#   /' "$work/badtarget_reroute.err"; }
run badtarget_diag SM120SHIM_MODE=diagnose SM120SHIM_TARGET=sm_90
grep -q '"event":"load"' "$work"/badtarget_diag.*.jsonl &&
	! grep -q '"event":"launch"\|"event":"set_attribute"' "$work"/badtarget_diag.*.jsonl &&
	echo "ok - diagnose with a bad target judges by the card's own limits (nothing over them), not sm120's" ||
	{ echo "not ok - bad target under diagnose"; cat "$work"/badtarget_diag.*.jsonl; }
run badtarget_off SM120SHIM_MODE=off SM120SHIM_TARGET=sm_90
warned badtarget_off "SM120SHIM_TARGET='sm_90' .*; using auto (each GPU's own limits)$" &&
	expect badtarget_off "mode off stays off with a bad target" "optin 232448" "launch 106496 -> 0" ||
	{ echo "not ok - bad target under off"; sed 's/^/#   /' "$work/badtarget_off.err"; }

# Booleans: 1/0, true/false, yes/no, on/off in any case; anything else is off.
for v in false no off OFF 0; do
	run trace_$v SM120SHIM_MODE=off SM120SHIM_TRACE=$v
done
[ ! -s "$work/trace_false.err" ] && [ ! -s "$work/trace_no.err" ] && [ ! -s "$work/trace_off.err" ] &&
	[ ! -s "$work/trace_OFF.err" ] && [ ! -s "$work/trace_0.err" ] &&
	echo "ok - SM120SHIM_TRACE=false, no, off, OFF and 0 trace nothing" ||
	{ echo "not ok - trace off values"; sed 's/^/#   /' "$work"/trace_*.err; }
for v in true Yes ON 1; do
	run trace_$v SM120SHIM_MODE=off SM120SHIM_TRACE=$v
done
untraced=
for v in true Yes ON 1; do
	grep -q "^sm120shim: trace cuLaunchKernel$" "$work/trace_$v.err" || untraced="$untraced $v"
done
[ -z "$untraced" ] && echo "ok - SM120SHIM_TRACE=true, Yes, ON and 1 trace every call" ||
	{ echo "not ok - no trace with SM120SHIM_TRACE=$untraced"; sed 's/^/#   /' "$work"/trace_*.err; }
run trace_bad SM120SHIM_MODE=off SM120SHIM_TRACE=maybe
warned trace_bad "^sm120shim: SM120SHIM_TRACE='maybe' is not 1, 0, true, false, yes, no, on or off; using off (no trace)$" &&
	echo "ok - any other SM120SHIM_TRACE is off, with one line saying so" ||
	{ echo "not ok - SM120SHIM_TRACE=maybe"; sed 's/^/#   /' "$work/trace_bad.err"; }

run advertise_bad SM120SHIM_MODE=reroute SM120SHIM_TARGET=sm120 SM120SHIM_ADVERTISE=lots
expect advertise_bad "a bad SM120SHIM_ADVERTISE advertises nothing: the target's own opt-in" \
	"optin 101376" "set 232448 -> 1"
grep -q "^sm120shim: SM120SHIM_ADVERTISE='lots' is not kernel, auto, off or a byte count up to 16777216; using off (frameworks are told the target's own limit)$" \
	"$work/advertise_bad.err" && echo "ok - and one line says so" ||
	{ echo "not ok - SM120SHIM_ADVERTISE=lots"; sed 's/^/#   /' "$work/advertise_bad.err"; }

# Rule settings are checked when read: a bad value is unset (launches that
# need it are refused as the target refuses them, never rerouted on it).
run rulebad SM120SHIM_MODE=enforce SM120SHIM_TARGET=sm120 SM120SHIM_PAGE_SIZE=0 \
	SM120SHIM_KV_CACHE_DTYPE=fp8 SM120SHIM_TOP_K=abc SM120SHIM_HIDDEN_SIZE=-1
n=$(grep -c "is not .*; taken as unset: launches that need [a-z_]* are refused, not rerouted$" "$work/rulebad.err")
[ "$n" = 4 ] && grep -q "^sm120shim: SM120SHIM_PAGE_SIZE='0' is not a page size in tokens, 1..65536 (vLLM's --block-size); taken as unset" "$work/rulebad.err" &&
	grep -q "^sm120shim: SM120SHIM_KV_CACHE_DTYPE='fp8' is not bf16 or fp8_e4m3 (SGLang's --kv-cache-dtype); taken as unset" "$work/rulebad.err" &&
	echo "ok - each bad rule setting is named once, with what it accepts and what follows" ||
	{ echo "not ok - bad rule settings ($n lines)"; sed 's/^/#   /' "$work/rulebad.err"; }
grep -q '"event":"launch"' "$work"/rulebad.*.jsonl && ! grep -q '"settings"' "$work"/rulebad.*.jsonl &&
	echo "ok - and they are unset: the logged launches carry no settings" ||
	{ echo "not ok - bad rule settings in the log"; cat "$work"/rulebad.*.jsonl; }
env FAKECUDA_LOG=/dev/null LD_PRELOAD="$SHIM" SM120SHIM_MODE=reroute SM120SHIM_TARGET=sm120 \
	SM120SHIM_KV_CACHE_DTYPE=fp16 "$T/shim_reroute" >"$work/rulebad2.out" 2>"$work/rulebad2.err"
grep -qxF "launch 106496 -> 1" "$work/rulebad2.out" &&
	grep -q "not rerouted: the KV cache dtype is compiled into _fwd_kernel .*set SM120SHIM_KV_CACHE_DTYPE=bf16 or fp8_e4m3" "$work/rulebad2.err" &&
	echo "ok - SGLang's extend launch with SM120SHIM_KV_CACHE_DTYPE=fp16 is refused as without the setting" ||
	{ echo "not ok - kv_cache_dtype=fp16"; sed 's/^/#   /' "$work/rulebad2.out" "$work/rulebad2.err"; }

# The exit summary points at the log only when the log could be written.
env FAKECUDA_LOG=/dev/null LD_PRELOAD="$SHIM" SM120SHIM_MODE=enforce SM120SHIM_TARGET=sm120 \
	SM120SHIM_LOG="$work/nodir/x.jsonl" "$T/shim_limits" >/dev/null 2>"$work/nolog.err"
grep -q "summary: .*; the log $work/nodir/x.jsonl could not be written (No such file or directory), so the details are only in the lines above$" "$work/nolog.err" &&
	! grep -q "details in" "$work/nolog.err" &&
	echo "ok - with a log that cannot be written the summary says so, not 'details in'" ||
	{ echo "not ok - summary with an unwritable log"; sed 's/^/#   /' "$work/nolog.err"; }
grep -q "summary: .*; details in $work/enforce\.[0-9]*\.jsonl$" "$work/enforce.err" &&
	echo "ok - with a log the summary names the file it wrote" ||
	{ echo "not ok - summary with a log"; sed 's/^/#   /' "$work/enforce.err"; }

ln -s /etc/passwd "$work/link.jsonl"
env FAKECUDA_LOG=/dev/null LD_PRELOAD="$SHIM" SM120SHIM_MODE=enforce SM120SHIM_TARGET=sm120 \
	SM120SHIM_LOG="$work/link.jsonl" "$T/shim_limits" >/dev/null 2>"$work/link.err"
grep -q "cannot open SM120SHIM_LOG" "$work/link.err" && ! grep -q fwd /etc/passwd &&
	echo "ok - the log is never written through a symlink" ||
	{ echo "not ok - symlinked log"; cat "$work/link.err"; }

#!/bin/sh
# test_library.sh - the library class against the fake driver, one case per
# decision class: a kernel a shipped library chose for the device's
# architecture is passed unchanged under an emulated target (sm120 on the
# fake H200) and logged as "library" with its evidence; everything else is
# judged as the card judges it, and the log says why.  Cases: a cudart fatbin
# with sm_120 code (library) or without (judged); a raw cubin loaded by a
# library whose .nv_fatbin has sm_120 code (library) or sm_90 code only
# (judged); a Triton-style raw cubin (judged); the same library under a
# Triton cache (judged); a kernel a rule names (judged); a real SM120 card
# (nothing changes).  (A cubin loaded from a file, judged, needs cuModuleLoad,
# which the fake driver lacks: tests/unit/test_evidence.c.)  Prints "ok - ...".
set -u
echo 1..29 # plan: the number of checks below
B=${SM120_BUILD:-build}
T=$B/test
FX=${SM120_FIXTURES:-$B/test/fixtures}
SHIM=$(pwd)/$B/libsm120shim.so
export LD_LIBRARY_PATH="$(pwd)/$T/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lib120=$(pwd)/$T/libloader120.so
lib90=$(pwd)/$T/libloader90.so
mkdir -p "$work/.triton/cache/ab12"
cp "$lib120" "$work/.triton/cache/ab12/libloader120.so"

# run NAME MODE ARGS...: shim_library ARGS under the shim in MODE, target sm120 unless
# $TARGET says otherwise; output, stderr, driver calls and log in $work/NAME.*
run() {
	name=$1 mode=$2
	shift 2
	env FAKECUDA_LOG="$work/$name.drv" FAKECUDA_VALUES=1 LD_PRELOAD="$SHIM" \
		SM120SHIM_MODE="$mode" SM120SHIM_TARGET="${TARGET:-sm120}" \
		SM120SHIM_LOG="$work/$name.jsonl" "$T/shim_library" "$@" \
		>"$work/$name.out" 2>"$work/$name.err"
	touch "$work/$name.drv" "$work/$name.jsonl"
}
# outcome NAME DESCRIPTION SET LAUNCH: what the program saw
outcome() {
	if [ "$(cat "$work/$1.out")" = "load -> 0
set 213268 -> $3
launch 163840 -> $4" ]; then
		echo "ok - $2"
	else
		echo "not ok - $2"
		sed 's/^/#   /' "$work/$1.out" "$work/$1.err"
	fi
}
# logged NAME DESCRIPTION ACTION EVIDENCE: both events have ACTION and an evidence
# containing EVIDENCE ("-": no evidence key at all)
logged() {
	if python3 - "$work/$1.jsonl" "$3" "$4" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if '"event":"load"' not in l]
assert sorted(e["event"] for e in ev) == ["launch", "set_attribute"], ev
for e in ev:
    assert e["action"] == sys.argv[2] and e["decision"] == sys.argv[2], e
    if sys.argv[3] == "-":
        assert "evidence" not in e, e
    else:
        assert sys.argv[3] in e["evidence"], e["evidence"]
PY
	then echo "ok - $2"
	else echo "not ok - $2"; sed 's/^/#   /' "$work/$1.jsonl"; fi
}

# 1. cudart's way: a fatbin wrapper whose container also holds sm_120 code.
run fat enforce wrapper "$FX/params.fatbin"
outcome fat "enforce sm120: a library fatbin with sm_120 code: the set and the launch pass" 0 0
grep -qx "MAX_DYNAMIC_SHARED_SIZE_BYTES 213268" "$work/fat.drv" &&
	[ "$(grep -c '^cuLaunchKernel$' "$work/fat.drv")" = 1 ] &&
	echo "ok - the driver gets the attribute unchanged (213268, as cuBLAS sets it) and the launch" ||
	{ echo "not ok - fat: driver calls"; sed 's/^/#   /' "$work/fat.drv"; }
logged fat "both logged as class library, with the evidence" library \
	"library: its image memory 0x"
if python3 - "$work/fat.jsonl" <<'PY'
import json, sys
e = [json.loads(l) for l in open(sys.argv[1]) if '"event":"launch"' in l][0]
assert (e["image"], e["device"], e["image_codes"]) == ("fatbin", "sm_90", "sm_90 sm_120 compute_120"), e
assert "is a fatbin that also holds sm_120 compute_120" in e["evidence"], e
assert e["dynamic_smem"] == 163840 and e["limit"] == 101376, e
PY
then echo "ok - the log carries what was weighed: image kind, device, the fatbin's codes"
else echo "not ok - fat: evidence fields"; sed 's/^/#   /' "$work/fat.jsonl"; fi
[ "$(grep -c 'sm120shim: kernel' "$work/fat.err")" = 1 ] &&
	grep -q "passed unchanged, not counted as an sm120 failure (library: its image" "$work/fat.err" &&
	grep -q "summary: .*2 passed unchanged as library kernels chosen for this GPU's architecture (not sm120 failures)" "$work/fat.err" &&
	echo "ok - one stderr line for the library, and the summary counts them apart" ||
	{ echo "not ok - fat: stderr"; sed 's/^/#   /' "$work/fat.err"; }
run fat_rr reroute wrapper "$FX/params.fatbin"
outcome fat_rr "reroute sm120: the same passes" 0 0
grep -qx "MAX_DYNAMIC_SHARED_SIZE_BYTES 213268" "$work/fat_rr.drv" &&
	echo "ok - reroute gives the driver the library's own value, not the target's" ||
	{ echo "not ok - fat_rr: driver calls"; sed 's/^/#   /' "$work/fat_rr.drv"; }
run fat_diag diagnose wrapper "$FX/params.fatbin"
outcome fat_diag "diagnose sm120: nothing changes" 0 0
logged fat_diag "diagnose logs them as library, not as what sm120 would refuse" library \
	"a real sm120 card runs that code"

# 2. The same kernel in a fatbin with sm_90 code only: judged.
run fat90 enforce wrapper "$FX/params90.fatbin"
outcome fat90 "a fatbin without sm_120 code: refused as the card refuses it" 1 1
logged fat90 "... and the log says why it was judged" refuse \
	"judged: its image memory 0x"
grep -q '"evidence":"judged: .* is a fatbin with no code for sm_120 (it holds sm_90)' "$work/fat90.jsonl" &&
	echo "ok - the reason names what the fatbin holds" ||
	{ echo "not ok - fat90: reason"; sed 's/^/#   /' "$work/fat90.jsonl"; }

# 3. A raw cubin handed over by a library (cuBLASLt's way).
run raw120 enforce raw "$FX/params.sm_90.cubin" k_huge "$lib120"
outcome raw120 "a raw cubin loaded by a library whose fatbin has sm_120 code: passed" 0 0
logged raw120 "... logged as library, naming the loader" library \
	"raw cubin loaded by $lib120, whose own fatbin holds sm_120 compute_120"
grep -q "\"loader\":\"$lib120\",\"loader_codes\":\"sm_90 sm_120 compute_120\"" "$work/raw120.jsonl" &&
	echo "ok - the log carries the loader and its fatbin's codes" ||
	{ echo "not ok - raw120: loader fields"; sed 's/^/#   /' "$work/raw120.jsonl"; }
run raw90 enforce raw "$FX/params.sm_90.cubin" k_huge "$lib90"
outcome raw90 "the same from a library with sm_90 code only: refused" 1 1
logged raw90 "... judged: its fatbin holds no sm_120 code" refuse \
	"whose fatbin holds no code for sm_120 (it holds sm_90)"

# 4. Compiled at run time: Triton's way, and a library under a Triton cache.
run triton enforce raw "$FX/params.sm_90.cubin"
outcome triton "a raw cubin loaded by a program without a fatbin (Triton-style): refused" 1 1
logged triton "... judged: no sign its loader ships sm_120 code" refuse \
	"which has no readable .nv_fatbin section"
run cache enforce raw "$FX/params.sm_90.cubin" k_huge "$work/.triton/cache/ab12/libloader120.so"
outcome cache "a loader under a Triton cache, even with sm_120 code: refused" 1 1
logged cache "... judged: compiled at run time" refuse "in a Triton or Inductor cache"

# 5. A kernel a rule names is never a library kernel: it is rerouted or refused.
run rule enforce raw "$FX/sglang_extend.sm_90.cubin" _fwd_kernel "$lib120"
outcome rule "_fwd_kernel from a library with sm_120 code: refused, as a rule names it" 1 1
logged rule "... and the log says so" refuse "judged: a reroute rule names _fwd_kernel"

# 5b. Device queries: a library that ships sm_120 code is told the device's
# own opt-in and occupancy under emulation (NCCL refuses to start when its
# sm_90 kernels do not fit what it is told; cuBLAS given SM120's bytes per
# block runs its sm_90 kernels with too little and computes garbage); the
# program and a library without sm_120 code are told SM120's.
run optin120 enforce optin "$lib120"
run optin90 enforce optin "$lib90"
run optinrr reroute optin "$lib120"
[ "$(cat "$work/optin120.out")" = "optin program 101376
optin loader 232448
available program 101376
available loader 231424" ] && [ "$(cat "$work/optinrr.out")" = "$(cat "$work/optin120.out")" ] &&
	echo "ok - a library with sm_120 code asks the opt-in and the bytes a block may use: the device's own (232448, 231424), the program SM120's (enforce, reroute)" ||
	{ echo "not ok - optin, library with sm_120 code"; sed 's/^/#   /' "$work/optin120.out" "$work/optin120.err" "$work/optinrr.out"; }
[ "$(cat "$work/optin90.out")" = "optin program 101376
optin loader 101376
available program 101376
available loader 101376" ] &&
	echo "ok - a library with sm_90 code only is told SM120's opt-in and occupancy" ||
	{ echo "not ok - optin, library with sm_90 only"; sed 's/^/#   /' "$work/optin90.out" "$work/optin90.err"; }
grep -q "libloader120.so ships code sm120 runs: it is told the device's own shared-memory limits" "$work/optin120.err" &&
	echo "ok - and stderr says so once, naming the library" ||
	{ echo "not ok - optin stderr"; sed 's/^/#   /' "$work/optin120.err"; }

# 6. A real SM120 card: nothing is emulated, nothing changes.
export FAKECUDA_SM=120 FAKECUDA_OPTIN=101376
TARGET=auto
run real enforce wrapper "$FX/params.fatbin"
TARGET=sm120
run real2 enforce wrapper "$FX/params.fatbin"
unset FAKECUDA_SM FAKECUDA_OPTIN TARGET
outcome real "on an SM120 card (target auto) the library's over-limit calls are refused as before" 1 1
logged real "... with no evidence weighed" refuse -
outcome real2 "and the same with target sm120 named on that card" 1 1

#!/bin/sh
# test_route_cli.sh - `sm120 route` replays real shim logs through the same
# decision the shim made: logs written by the shim under the fake driver
# (an SGLang extend launch at 106496 B, in reroute, enforce and diagnose
# modes, with and without the setting it needs; each launch event names the
# device's multiprocessors, which the replay reads) replay to the logged
# decisions; options change the decision; a changed, broken or incomplete
# log is reported; a library kernel under emulation replays as one from the
# evidence in its log, and a judged one as judged.  Prints "ok - ...".
set -u
echo 1..22 # plan: the number of checks below
B=${SM120_BUILD:-build}
T=$B/test
SHIM=$(pwd)/$B/libsm120shim.so
export LD_LIBRARY_PATH="$(pwd)/$T/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
work=$(mktemp -d)
out=$work/out
trap 'rm -rf "$work"' EXIT
. tests/scripts/lib.sh

# log NAME ENV...: the reroute program under the shim (target sm120), its log in $work/NAME.jsonl
log() {
	name=$1
	shift
	env LD_PRELOAD="$SHIM" SM120SHIM_TARGET=sm120 SM120SHIM_LOG="$work/$name.jsonl" "$@" \
		"$T/shim_reroute" >/dev/null 2>&1
}
log reroute SM120SHIM_MODE=reroute SM120SHIM_KV_CACHE_DTYPE=bf16
log nosetting SM120SHIM_MODE=reroute
log enforce SM120SHIM_MODE=enforce
log diagnose SM120SHIM_MODE=diagnose

for name in reroute nosetting enforce diagnose; do
	check "$name: every logged launch and attribute set replays to the logged decision" 0 \
		"$B/sm120" route "$work/$name.jsonl"
done
grep '"event":"launch"' "$work/reroute.jsonl" >"$out"
expect "a launch event logs the device's multiprocessors (the fake driver's 132), which a plan may weigh" \
	'"sms":132'
"$B/sm120" route "$work/reroute.jsonl" >"$out" 2>&1
expect "the launch replays as rerouted by its rule to the bundled kernel" \
	"launch _fwd_kernel: reroute by sglang-extend-2025-08 to attn_extend_mla576_bf16 (logged: reroute)"
"$B/sm120" route "$work/nosetting.jsonl" >"$out" 2>&1
expect "without the setting the replay is refused, with the shim's reason" \
	"why: the KV cache dtype is compiled into _fwd_kernel"
check "--set gives the decision the setting would have given" 0 \
	"$B/sm120" route --json --set kv_cache_dtype=fp8_e4m3 "$work/nosetting.jsonl"
expect "(an FP8 cache, which that release reads without k/v scales: refused)" \
	'"decision":"refuse","reason":"rule sglang-extend-2025-08 (no k_scale/v_scale) with an FP8 KV cache'
check "--mode enforce replays the reroute log as the card would" 0 \
	"$B/sm120" route --mode enforce "$work/reroute.jsonl"
expect "(refused, not compared with the log)" "launch _fwd_kernel: refuse (logged: not compared)"

sed 's/"decision":"reroute"/"decision":"log"/' "$work/reroute.jsonl" >"$work/changed.jsonl"
check "a log whose decision differs from the replay: exit 1" 1 "$B/sm120" route "$work/changed.jsonl"
sed 's/,"args":\[[^]]*\]//' "$work/reroute.jsonl" >"$work/noargs.jsonl"
check "a launch logged without argument values cannot be replayed: exit 1" 1 \
	"$B/sm120" route "$work/noargs.jsonl"
{ cat "$work/reroute.jsonl"; echo '{"event":"launch",'; } >"$work/broken.jsonl"
check "a line that is not JSON: exit 2" 2 "$B/sm120" route "$work/broken.jsonl"
expect "(named by file and line)" "broken.jsonl:4: not a shim log line"

# The library class: a raw cubin loaded by a library whose fatbin has sm_120
# code (passed as "library"), and a fatbin with sm_90 code only (judged).
FX=${SM120_FIXTURES:-$B/test/fixtures}
env LD_PRELOAD="$SHIM" SM120SHIM_TARGET=sm120 SM120SHIM_MODE=enforce SM120SHIM_LOG="$work/lib.jsonl" \
	"$T/shim_library" raw "$FX/params.sm_90.cubin" k_huge "$(pwd)/$T/libloader120.so" >/dev/null 2>&1
env LD_PRELOAD="$SHIM" SM120SHIM_TARGET=sm120 SM120SHIM_MODE=enforce SM120SHIM_LOG="$work/lib90.jsonl" \
	"$T/shim_library" wrapper "$FX/params90.fatbin" >/dev/null 2>&1
check "library kernels and judged ones replay to the logged decisions" 0 \
	"$B/sm120" route "$work/lib.jsonl" "$work/lib90.jsonl"
expect "a library's kernel replays as library" "launch k_huge: library (logged: library)"
expect "... with the evidence weighed again" \
	"evidence: library: its image is a raw cubin loaded by .*libloader120.so, whose own fatbin holds sm_120"
expect "a fatbin without sm_120 code replays as refused, saying why it was judged" \
	"evidence: judged: its image memory 0x.* is a fatbin with no code for sm_120 (it holds sm_90)"
check "--target as a byte count names no architecture: judged" 0 \
	"$B/sm120" route --target 101376 "$work/lib.jsonl"
expect "(refused)" "launch k_huge: refuse (logged: not compared)"
sed 's/,"loader_codes":"[^"]*"//' "$work/lib.jsonl" >"$work/nocodes.jsonl"
check "without the loader's codes in the log the replay judges it, and differs: exit 1" 1 \
	"$B/sm120" route "$work/nocodes.jsonl"

#!/bin/sh
# test_reroute_cli.sh - the shim's reroute decision inside a process, on a
# real image, against the fake driver (which cannot run the bundled kernels):
# a launch with SGLang's extend parameter list at the Hopper tiles is matched
# to its rule, the adapter reads the setting it needs from the environment
# and checks the strides, and every refusal says why.  Prints "ok - ...".
set -u
echo 1..16 # plan: the number of checks below
B=${SM120_BUILD:-build}
T=$B/test
SHIM=$(pwd)/$B/libsm120shim.so
export LD_LIBRARY_PATH="$(pwd)/$T/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
work=$(mktemp -d)
out=$work/out
trap 'rm -rf "$work"' EXIT
. tests/scripts/lib.sh

# run NAME ENV...: the reroute program under the shim (target sm120) with ENV
run() {
	name=$1
	shift
	check "$name: the program runs" 0 env LD_PRELOAD="$SHIM" SM120SHIM_TARGET=sm120 \
		SM120SHIM_LOG="$work/$name.jsonl" "$@" "$T/shim_reroute"
}

run nosetting SM120SHIM_MODE=reroute
expect "the over-limit attribute is accepted for rerouting" "^set 106496 -> 0$"
expect "without SM120SHIM_KV_CACHE_DTYPE the launch is refused as SM120 would" "^launch 106496 -> 1$"
expect "naming the setting to give" \
	"not rerouted: the KV cache dtype is compiled into _fwd_kernel .*set SM120SHIM_KV_CACHE_DTYPE=bf16 or fp8_e4m3"
grep -q '"action":"refuse".*"reason":"the KV cache dtype' "$work/nosetting.jsonl" &&
	echo "ok - the JSON log has the refusal and its reason" ||
	{ echo "not ok - log of the refusal"; sed 's/^/#   /' "$work/nosetting.jsonl"; }

run setting SM120SHIM_MODE=reroute SM120SHIM_KV_CACHE_DTYPE=bf16
expect "with the setting, the rule and adapter plan attn_extend_mla576_bf16 (the fake driver cannot run it)" \
	"not rerouted: no current CUDA context to launch attn_extend_mla576_bf16 in"
expect "and the launch is still refused, not run as it was" "^launch 106496 -> 1$"

run fp8 SM120SHIM_MODE=reroute SM120SHIM_KV_CACHE_DTYPE=fp8_e4m3
expect "SM120SHIM_KV_CACHE_DTYPE=fp8_e4m3 is refused: SGLang 0.5.8/0.5.9 read an FP8 cache without k/v scales" \
	"not rerouted: rule sglang-extend-2025-08 (no k_scale/v_scale) with an FP8 KV cache"

run badstride SM120SHIM_MODE=reroute SM120SHIM_KV_CACHE_DTYPE=bf16 REROUTE_BAD_STRIDE=1
expect "a q head stride the MLA layout cannot have is refused with the values" \
	"not rerouted: q strides (4608, 520) or o strides (4096, 512) do not fit 8 heads of Lq 576 / Lv 512"

run enforce SM120SHIM_MODE=enforce SM120SHIM_KV_CACHE_DTYPE=bf16
expect "enforce refuses the attribute (nothing is advertised) ..." "^set 106496 -> 1$"
expect "... and the launch, without trying a reroute" "^launch 106496 -> 1$"
if grep -q "not rerouted" "$out"; then
	echo "not ok - enforce tried a reroute"; sed 's/^/#   /' "$out"
else
	echo "ok - enforce never consults the rules"
fi

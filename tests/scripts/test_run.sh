#!/bin/sh
# test_run.sh - `sm120 run`: what the command's environment holds, bad options,
# where the shim is found, and end to end: the limits program under
# `sm120 run --mode enforce` behaves as under explicit LD_PRELOAD/SM120SHIM_*
# variables, and its log feeds `sm120 report`.  Every value is checked before
# the command starts: --set values, whether the log can be written, and the
# SM120SHIM_* values already in the environment.
# Prints "ok - ..." / "not ok - ...".
set -u
echo 1..87 # plan: the number of checks below
unset LD_PRELOAD SM120SHIM_MODE SM120SHIM_TARGET SM120SHIM_LOG SM120SHIM_ADVERTISE \
	SM120SHIM_TRACE SM120SHIM_LIB SM120SHIM_KV_CACHE_DTYPE SM120SHIM_PAGE_SIZE \
	SM120SHIM_TOP_K SM120SHIM_HIDDEN_SIZE
B=${SM120_BUILD:-build}
T=$B/test
sm120=$(pwd)/$B/sm120
SHIM=$(pwd)/$B/libsm120shim.so
work=$(mktemp -d)
out=$work/out
trap 'rm -rf "$work"' EXIT

. tests/scripts/lib.sh
showenv='echo "LD_PRELOAD=$LD_PRELOAD"; env | grep "^SM120SHIM_" | sort'

check "the command runs with every option given" 0 "$sm120" run --mode diagnose --target sm120 \
	--log "$work/x.%p.jsonl" --advertise 131072 --trace -- sh -c "$showenv"
expect "LD_PRELOAD holds the shim's absolute path" "^LD_PRELOAD=$SHIM$"
expect "SM120SHIM_MODE from --mode" "^SM120SHIM_MODE=diagnose$"
expect "SM120SHIM_TARGET from --target" "^SM120SHIM_TARGET=sm120$"
expect "SM120SHIM_LOG from --log, %p kept for the shim to expand" "^SM120SHIM_LOG=$work/x.%p.jsonl$"
expect "SM120SHIM_ADVERTISE from --advertise" "^SM120SHIM_ADVERTISE=131072$"
expect "SM120SHIM_TRACE from --trace" "^SM120SHIM_TRACE=1$"
check "options not given set nothing" 0 "$sm120" run -- sh -c "$showenv"
if grep -q '^SM120SHIM_' "$out"; then echo "not ok - unset options leaked"; sed 's/^/#   /' "$out"
else echo "ok - without options only LD_PRELOAD is set"; fi
check "an existing LD_PRELOAD is kept after the shim" 0 \
	env LD_PRELOAD=libm.so.6 "$sm120" run --mode off -- sh -c "$showenv"
expect "the shim comes first, then the old value" "^LD_PRELOAD=$SHIM:libm.so.6$"
check "a relative --log is made absolute (the command may change directory)" 0 \
	"$sm120" run --log rel.jsonl -- sh -c "$showenv"
expect "against the current directory" "^SM120SHIM_LOG=$(pwd)/rel.jsonl$"
check "the command's exit status is passed on" 7 "$sm120" run --mode off -- sh -c 'exit 7'
check "options after the command are the command's" 0 "$sm120" run --mode off -- echo --mode x
expect "echo got them" "^--mode x$"

check "a bad --mode exits 2" 2 "$sm120" run --mode enforcee -- true
expect "and names the accepted modes" \
	"--mode takes off, diagnose, enforce or reroute, not 'enforcee'"
check "a bad --target exits 2" 2 "$sm120" run --target sm42 -- true
expect "and names the accepted targets" "unknown target 'sm42': use one of auto, sm120, sm121"
check "--target auto and byte counts are accepted" 0 "$sm120" run --target auto -- \
	"$sm120" run --target 232448 -- true
check "a bad --advertise exits 2" 2 "$sm120" run --advertise lots -- true
expect "and says what it takes" "--advertise takes kernel, auto, off or a byte count"
check "no command exits 2" 2 "$sm120" run --mode enforce
expect "and says so" "no command given"
check "a command that does not exist exits 127" 127 "$sm120" run -- "$work/no-such-program"
expect "and names it" "cannot run '$work/no-such-program': No such file"

cp "$SHIM" "$work/libalt.so"
check "SM120SHIM_LIB names another shim" 0 env SM120SHIM_LIB="$work/libalt.so" \
	"$sm120" run -- sh -c "$showenv"
expect "which is preloaded instead" "^LD_PRELOAD=$work/libalt.so$"
check "a SM120SHIM_LIB that does not exist exits 2" 2 env SM120SHIM_LIB="$work/nope.so" \
	"$sm120" run -- true
expect "and names it" "SM120SHIM_LIB=$work/nope.so: No such file"
cp "$sm120" "$work/sm120"
check "with no shim next to the sm120 program, run exits 2" 2 "$work/sm120" run -- true
expect "saying where it looked and how to fix it" \
	"no shim at $work/libsm120shim.so .*set SM120SHIM_LIB=.*or build it with 'make'"

# End to end: the fake driver (an H200) under enforce sm120, two ways.
export LD_LIBRARY_PATH="$(pwd)/$T/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
env FAKECUDA_LOG="$work/plain.drv" LD_PRELOAD="$SHIM" SM120SHIM_MODE=enforce \
	SM120SHIM_TARGET=sm120 SM120SHIM_LOG="$work/plain.jsonl" "$T/shim_limits" \
	>"$work/plain.out" 2>"$work/plain.err"
FAKECUDA_LOG="$work/run.drv" "$sm120" run --mode enforce --target sm120 \
	--log "$work/run.jsonl" -- "$T/shim_limits" >"$work/run.out" 2>"$work/run.err"
if grep -qxF "launch 106496 -> 1" "$work/run.out" && grep -qxF "optin 101376" "$work/run.out" &&
	cmp -s "$work/plain.out" "$work/run.out" && cmp -s "$work/plain.drv" "$work/run.drv"; then
	echo "ok - sm120 run --mode enforce refuses what sm120 refuses, as explicit variables do"
else
	echo "not ok - sm120 run differs from explicit LD_PRELOAD/SM120SHIM_*"
	diff "$work/plain.out" "$work/run.out" | sed 's/^/#   /'
	sed 's/^/#   /' "$work/run.out" "$work/run.err"
fi
# The same events in both logs (pids and image addresses differ), and the
# same report of them.
events() { sed -e 's/"pid":[0-9]*//' -e 's/"origin":"[^"]*"//' "$1"; }
refusals=$(grep -c '"action":"refuse"' "$work/run.jsonl" 2>/dev/null)
[ "${refusals:-0}" -ge 3 ] && [ "$(events "$work/run.jsonl")" = "$(events "$work/plain.jsonl")" ] &&
	echo "ok - --log gets the events SM120SHIM_LOG gets, $refusals refusals" ||
	{ echo "not ok - JSON log"; sed 's/^/#   /' "$work"/*.jsonl; }
"$sm120" report "$work/plain.jsonl" >"$work/plain.report" 2>&1
check "sm120 report on that log exits 1 (a kernel over the limit)" 1 \
	"$sm120" report "$work/run.jsonl"
cmp -s "$out" "$work/plain.report" && echo "ok - and reports what the explicit run's log reports" ||
	{ echo "not ok - reports differ"; diff "$work/plain.report" "$out" | sed 's/^/#   /'; }
launches=$(grep -c '"event":"launch".*"kernel":"_fwd_kernel"' "$work/run.jsonl")
expect "one row: 106496 B a launch needs against 101376, 5120 over, every launch counted, 1 process" \
	"^ *106496 *101376 *5120 *$launches .* 1  sm120 *_fwd_kernel$"
expect "and the closing line" "^1 kernel over the sm120 limit in 1 process (1 log file)$"

check "--set passes a rule setting as SM120SHIM_<NAME>" 0 "$sm120" run --set kv_cache_dtype=fp8_e4m3 \
	--set page_size=64 -- sh -c "$showenv"
expect "kv_cache_dtype" "^SM120SHIM_KV_CACHE_DTYPE=fp8_e4m3$"
expect "page_size" "^SM120SHIM_PAGE_SIZE=64$"
check "--set with an unknown name exits 2" 2 "$sm120" run --set kv_dtype=bf16 -- true
expect "naming the settings" "--set takes NAME=VALUE with NAME one of kv_cache_dtype page_size top_k hidden_size"
check "--set top_k=abc exits 2" 2 "$sm120" run --set top_k=abc -- true
expect "saying what top_k takes" \
	"^sm120 run: --set top_k takes a number of experts per token, 1..1048576 (config.json num_experts_per_tok), not 'abc'$"
check "--set page_size=0 exits 2" 2 "$sm120" run --set page_size=0 -- true
expect "saying what page_size takes" \
	"^sm120 run: --set page_size takes a page size in tokens, 1..65536 (vLLM's --block-size), not '0'$"
check "--set kv_cache_dtype=fp8 exits 2" 2 "$sm120" run --set kv_cache_dtype=fp8 -- true
expect "saying what kv_cache_dtype takes" \
	"^sm120 run: --set kv_cache_dtype takes bf16 or fp8_e4m3 (SGLang's --kv-cache-dtype), not 'fp8'$"
check "--set hidden_size=7168x exits 2" 2 "$sm120" run --set hidden_size=7168x -- true
check "the largest values the adapters take are accepted" 0 "$sm120" run --set page_size=65536 \
	--set top_k=1048576 --set hidden_size=1048576 --set kv_cache_dtype=bf16 -- true

# The log: checked as the shim opens it, leaving nothing behind.
check "a --log in a directory that does not exist exits 2" 2 "$sm120" run --log "$work/nodir/x.jsonl" -- true
expect "naming the file and why" \
	"^sm120 run: --log cannot be written: $work/nodir/x.jsonl: No such file or directory (its directory does not exist)$"
ln -s "$work/target" "$work/link.jsonl"
check "a --log that is a symbolic link exits 2" 2 "$sm120" run --log "$work/link.jsonl" -- true
expect "saying the shim never writes through one" "link.jsonl is a symbolic link, which the shim never writes through"
mkdir "$work/logs"
check "a --log with %p in a writable directory is accepted" 0 "$sm120" run --log "$work/logs/x.%p.jsonl" -- true
[ -z "$(ls "$work/logs")" ] && echo "ok - and the check leaves no file behind" ||
	{ echo "not ok - the log check left files"; ls "$work/logs" | sed 's/^/#   /'; }

# What the environment already holds is checked as the shim will read it.
check "a bad SM120SHIM_TRACE in the environment exits 2" 2 env SM120SHIM_TRACE=maybe "$sm120" run -- true
expect "naming it, what it takes and what the shim would do" \
	"^sm120 run: SM120SHIM_TRACE='maybe' is not 1, 0, true, false, yes, no, on or off; correct or unset it (the shim would only warn, using off (no trace))$"
check "SM120SHIM_TRACE=false is accepted" 0 env SM120SHIM_TRACE=false "$sm120" run -- true
check "a bad SM120SHIM_TARGET in the environment exits 2" 2 env SM120SHIM_TARGET=sm_90 "$sm120" run -- true
expect "with a hint" "SM120SHIM_TARGET='sm_90' is not auto, sm120, .* (did you mean sm90?); correct or unset it"
check "--target overrides it" 0 env SM120SHIM_TARGET=sm_90 "$sm120" run --target sm90 -- true
check "a bad SM120SHIM_PAGE_SIZE in the environment exits 2" 2 env SM120SHIM_PAGE_SIZE=0 "$sm120" run -- true
check "an unwritable SM120SHIM_LOG in the environment exits 2" 2 \
	env SM120SHIM_LOG="$work/nodir/y.jsonl" "$sm120" run -- true
expect "naming the variable" "^sm120 run: SM120SHIM_LOG cannot be written: $work/nodir/y.jsonl: No such file"

# --model: top_k and hidden_size from config.json (Kimi K2.5 nests them in
# text_config); --set wins over it; a config without them exits 2 naming it.
mkdir -p "$work/k25" "$work/dense"
printf '{"architectures": ["KimiK25ForConditionalGeneration"], "text_config": {"hidden_size": 7168, "num_experts_per_tok": 8}}\n' >"$work/k25/config.json"
printf '{"hidden_size": 4096}\n' >"$work/dense/config.json"
check "--model DIR sets top_k and hidden_size from config.json's text_config" 0 \
	"$sm120" run --model "$work/k25" -- sh -c "$showenv"
expect "top_k" "^SM120SHIM_TOP_K=8$"
expect "hidden_size" "^SM120SHIM_HIDDEN_SIZE=7168$"
check "--set wins over --model" 0 "$sm120" run --set top_k=6 --model "$work/k25/config.json" -- sh -c "$showenv"
expect "top_k from --set" "^SM120SHIM_TOP_K=6$"
# SGLang fuses GLM-4.x's shared expert into the routed ones (top_k 8 + 1 in
# the gate/up launch) unless told not to or under expert parallelism; DeepSeek
# V3/R1 (256 routed, 1 shared) too, Kimi K2 (384 routed) not.
mkdir -p "$work/glm" "$work/dsv3"
printf '{"architectures": ["Glm4MoeForCausalLM"], "hidden_size": 5120, "num_experts_per_tok": 8, "n_routed_experts": 160, "n_shared_experts": 1}\n' >"$work/glm/config.json"
printf '{"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168, "num_experts_per_tok": 8, "n_routed_experts": 256, "n_shared_experts": 1}\n' >"$work/dsv3/config.json"
check "--model GLM-4.x under SGLang: top_k counts the fused shared expert" 0 \
	"$sm120" run --model "$work/glm" -- sh -c "$showenv" python3 -m sglang.launch_server
expect "(top_k 9, and why)" "^SM120SHIM_TOP_K=9$"
expect "(said on stderr)" "SGLang fuses 1 shared expert into the routed ones of this model, so its gate/up launch has top_k 9"
check "--model DeepSeek-V3 under SGLang: top_k 9 as well" 0 \
	"$sm120" run --model "$work/dsv3" -- sh -c "$showenv" sglang
expect "(top_k 9)" "^SM120SHIM_TOP_K=9$"
check "--disable-shared-experts-fusion keeps top_k 8" 0 \
	"$sm120" run --model "$work/glm" -- sh -c "$showenv" sglang --disable-shared-experts-fusion
expect "(top_k 8)" "^SM120SHIM_TOP_K=8$"
check "expert parallelism keeps top_k 8 (SGLang does not fuse then)" 0 \
	"$sm120" run --model "$work/glm" -- sh -c "$showenv" sglang --ep-size=8
expect "(top_k 8 with --ep-size)" "^SM120SHIM_TOP_K=8$"
check "a command that is not SGLang keeps top_k 8" 0 \
	"$sm120" run --model "$work/glm" -- sh -c "$showenv" vllm serve
expect "(top_k 8 under vLLM)" "^SM120SHIM_TOP_K=8$"
check "--model without num_experts_per_tok exits 2" 2 "$sm120" run --model "$work/dense" -- true
expect "naming the file and the field" "dense/config.json has no num_experts_per_tok (nor text_config.num_experts_per_tok); give it with --set top_k=N"
check "--enable-fused-moe-sum-all-reduce is refused in reroute mode" 2 \
	"$sm120" run -- true --enable-fused-moe-sum-all-reduce
expect "naming the flag" "passes --enable-fused-moe-sum-all-reduce: SGLang then compiles an atomic sum"

#!/bin/sh
# moe_reroute_gpu.sh - the shim's reroute mode on the frameworks' own fused-MoE
# kernels (GPU), from their released packages (tests/oracle/fetch.sh, in
# $SM120_ORACLE, default $SM120_BUILD/oracle), through their own host
# functions (tests/gpu/test_moe_reroute.py SIGS): SGLang 0.5.9's
# `fused_moe_kernel` and `fused_moe_kernel_gptq_awq` (sig sglang), SGLang
# 0.5.23's (sglang_main) and vLLM 0.33.0's `fused_moe_kernel` (vllm), at the
# Hopper configurations that overflow SM120 (moe_cases.CONFIGS; for int4 also
# the overflowing ones of BLOCK_SIZE_M 64 and 32, moe_cases.BLOCK_M_CONFIGS,
# whose blocks leave the plan only the smaller row tiles or the decode
# kernels, and for bf16 and FP8 those of BLOCK_SIZE_M 16 and 32, the
# four-warp row tiles), on Kimi K2 and GLM-4.7 shapes at TP8, SM120 emulated on a bigger
# GPU.  For each model and case (signature:quantisation[:BLOCK_SIZE_M]) every
# batch size runs in one process,
# plainly and under `sm120 run --mode reroute --target sm120 --set top_k=8
# --set hidden_size=<hidden>`; the results are compared with a float64
# reference next to the framework kernel's own error (test_moe_reroute.py
# check); the JSON log must show every fused-MoE launch rerouted by the rule
# of its release, with the cubin parameter count of its framework and
# quantisation, and nothing refused.  One case per model also runs inside a
# CUDA graph.  With a top_k that disagrees with the compiled one the gate/up
# launch must be refused with a reason naming SM120SHIM_TOP_K, and `--mode
# enforce` must reproduce Triton's OutOfResources.  Prints "ok - ..." /
# "not ok - ...".
#
# Environment (to keep GPU time small):
#   MOE_BATCHES       batch sizes M          (default "1 7 64 512 4096")
#   MOE_MODELS        models                 (default "kimi glm")
#   MOE_CASES         signature:quantisation[:BLOCK_SIZE_M] (default: SGLang
#                     0.5.9 with every quantisation (int4: the gptq/awq
#                     kernel, also at BLOCK_SIZE_M 64 and 32; bf16 at 16
#                     and 32, block FP8 at 16), SGLang 0.5.23
#                     and vLLM with FP8 per-tensor)
#   MOE_GRAPH_CASES   cases also run in a CUDA graph (default "sglang:fp8_tensor";
#                     empty: none)
#   MOE_GRAPH_BATCHES batch sizes of the graph runs (default "7 512")
. tests/gpu/env.sh   # $B, $sm120, $SM120_ORACLE, $work (one Triton cache)
py=tests/gpu/test_moe_reroute.py
export MOE_BATCHES="${MOE_BATCHES:-1 7 64 512 4096}"
models=${MOE_MODELS:-kimi glm}
cases=${MOE_CASES:-sglang:fp8_tensor sglang:fp8_channel sglang:fp8_block sglang:bf16 sglang:int4 sglang:int4:64 sglang:int4:32 sglang:bf16:16 sglang:bf16:32 sglang:fp8_block:16 sglang_main:fp8_tensor vllm:fp8_tensor}
graph_cases=${MOE_GRAPH_CASES-sglang:fp8_tensor}
graph_batches=${MOE_GRAPH_BATCHES:-7 512}

. tests/gpu/step.sh   # step NAME OUT CMD...

# hidden_of MODEL - the model's hidden size (moe_cases.MODELS): what the shim
# is told so it can tell the gate/up launch (K = hidden) from the down one.
hidden_of() {
	case $1 in
	kimi) echo 7168 ;;
	glm) echo 5120 ;;
	*) echo 0 ;;
	esac
}

# logcheck TAG SIG QUANT BATCHES BLOCK_M - every fused-MoE launch in the JSON
# logs $work/rr-TAG.*.jsonl rerouted (rerouted_to set) by the rule of SIG's
# release, with the kernel name and cubin parameter count of SIG/QUANT, at
# exactly two per batch (gate/up and down) in a run, six in a graph run
# (warm-up, capture and the eager launch; a replay passes no hook), to a
# decode kernel or a row tile that divides the framework's BLOCK_M (a block
# of the framework is whole blocks of ours), and no refusal anywhere.
logcheck() {
	python3 - "$work" "$@" <<'PY'
import glob, json, sys
import re
work, tag, sig, quant, batches, block_m = sys.argv[1:7]
# Cubin parameters of the real kernels (test_moe_reroute.py PARAMS, which its
# run checks against the compiled kernels): SGLang 0.5.9 and 0.5.23 FP8
# per-tensor 26, per-channel 22 (the scale strides equal to 1 dropped), block
# 24, bf16 24, the gptq/awq kernel (int4) 21; vLLM 0.33.0 the same but FP8
# per-tensor 25.
fw = "vllm" if sig == "vllm" else "sglang"
params = {"fp8_tensor": 25 if fw == "vllm" else 26, "fp8_channel": 22, "fp8_block": 24,
          "bf16": 24, "int4": 21}
# The rules (test_moe_reroute.py SIGS): SGLang 0.5.23's fused_moe_kernel is
# sglang-moe-main's (the hook's facts tell it from sglang-moe-2026-03's).
rules = {"sglang": {"sglang-moe-2026-03"}, "sglang_main": {"sglang-moe-main"},
         "vllm": {"vllm-moe-main"}}[sig]
if quant == "int4":
    rules = {"sglang-moe-gptq-awq"}
kernel = "fused_moe_kernel_gptq_awq" if quant == "int4" else "fused_moe_kernel"
names = ("fused_moe_kernel", "fused_moe_kernel_gptq_awq")
ev = [json.loads(l) for f in glob.glob(f"{work}/rr-{tag}.*.jsonl") for l in open(f)]
moe = [e for e in ev if e.get("event") == "launch" and e.get("kernel") in names]
rr = [e for e in moe if e.get("action") == "reroute"]
other = [e for e in moe if e.get("action") != "reroute"]
refused = [e for e in ev if e.get("action") == "refuse"]
n_batches = len(batches.split())
sizes = sorted({len(e.get("param_sizes") or []) for e in moe})
print(f"# {tag}: {len(ev)} events, {len(moe)} fused-MoE launches, {len(rr)} rerouted by "
      f"{sorted({str(e.get('rule')) for e in rr})} to "
      f"{sorted({str(e.get('rerouted_to')) for e in rr})}; cubin parameters {sizes}, "
      f"dynamic smem {sorted({e.get('dynamic_smem') for e in moe}, key=str)}")
for e in other[:3]:
    print(f"# not rerouted: {e.get('kernel')}: {e.get('action')}: {e.get('reason')}")
for e in refused[:3]:
    print(f"# refused: {e.get('event')} {e.get('kernel')}: {e.get('reason')}")
wrong = [e for e in moe if e.get("kernel") != kernel
         or len(e.get("param_sizes") or []) != params[quant]]
for e in wrong[:3]:
    print(f"# unexpected launch: {e.get('kernel')} with {len(e.get('param_sizes') or [])} "
          f"parameters (expected {kernel} with {params[quant]})")
wrong_rule = [e for e in rr if e.get("rule") not in rules]
for e in wrong_rule[:3]:
    print(f"# rerouted by {e.get('rule')}, expected {sorted(rules)}")
tiles = [e for e in rr if re.search(r"_m(\d+)$", e.get("rerouted_to") or "")]
split = [e for e in tiles if int(block_m) % int(re.search(r"_m(\d+)$", e["rerouted_to"]).group(1))]
for e in split[:3]:
    print(f"# rerouted to {e['rerouted_to']}, whose rows do not divide BLOCK_SIZE_M {block_m}")
want = (6 if tag.startswith("graph") else 2) * n_batches
if len(moe) != want:
    print(f"# {len(moe)} fused-MoE launches logged, {want} made")
ok = len(moe) == want and len(rr) == want and not other and not refused and not wrong and not wrong_rule
ok &= not split
ok &= all(e.get("rerouted_to") for e in rr)
sys.exit(0 if ok else 1)
PY
}

if [ ! -x "$sm120" ]; then
	echo "not ok - $sm120 is missing: build first"
	exit 0
fi

if [ ! -f "$SM120_ORACLE/sglang-0.5.23/sglang/kernels/ops/moe/fused_moe_triton_kernels.py" ]; then
	echo "not ok - $SM120_ORACLE lacks the frameworks' packages: run sh tests/oracle/fetch.sh $SM120_ORACLE"
	exit 0
fi

# run_case MODE MODEL CASE BATCHES - plain and under the shim, then the log
# check; CASE is signature:quantisation[:BLOCK_SIZE_M].
run_case() {
	mode=$1 model=$2 batches=$4
	sig=${3%%:*} quant=${3#*:} bm=
	case $quant in *:*) bm=${quant#*:} quant=${quant%%:*} ;; esac
	hidden=$(hidden_of "$model")
	tag=$mode-$model-$sig-$quant${bm:+-bm$bm}
	what="$mode $model --sig $sig --quant $quant${bm:+ --block-m $bm}"
	step "$what without the shim" "$work/$tag-plain.out" \
		env MOE_BATCHES="$batches" python3 $py "$mode" "$work/$mode-plain-$model" \
		--model "$model" --quant "$quant" --sig "$sig" ${bm:+--block-m "$bm"}
	step "$what under sm120 run --mode reroute --target sm120" "$work/$tag-shim.out" \
		env MOE_BATCHES="$batches" "$sm120" run --mode reroute --target sm120 \
		--set top_k=8 --set hidden_size="$hidden" --log "$work/rr-$tag.%p.jsonl" -- \
		python3 $py "$mode" "$work/$mode-shim-$model" --model "$model" --quant "$quant" --sig "$sig" \
		${bm:+--block-m "$bm"}
	# (BLOCK_SIZE_M 128 without :BM: moe_cases.CONFIGS, every quantisation)
	if logcheck "$tag" "$sig" "$quant" "$batches" "${bm:-128}"; then
		echo "ok - $what: the log shows every $( [ "$quant" = int4 ] && echo fused_moe_kernel_gptq_awq || echo fused_moe_kernel) launch rerouted by the rule of its release, nothing refused"
	else
		echo "not ok - $what: reroute events in the JSON log"
	fi
}

for model in $models; do
	for c in $cases; do
		run_case run "$model" "$c" "$MOE_BATCHES"
	done
	step "check run $model" "$work/check-run-$model.out" \
		python3 $py check "$work/run-plain-$model" "$work/run-shim-$model"
	for c in $graph_cases; do
		run_case graph "$model" "$c" "$graph_batches"
	done
	if [ -n "$graph_cases" ]; then
		step "check graph $model" "$work/check-graph-$model.out" \
			python3 $py check "$work/graph-plain-$model" "$work/graph-shim-$model"
	fi
	rm -rf "$work/run-plain-$model" "$work/run-shim-$model" \
		"$work/graph-plain-$model" "$work/graph-shim-$model"   # disk: the saved outputs
done

# The Python hook tells the shim the top_k compiled into the gate/up launch
# (8); a SM120SHIM_TOP_K that disagrees (9, as if SGLang had fused a shared
# expert) must not be believed either way: the launch is refused, and the log
# says why, naming the variable and both values.
step "refuse under sm120 run --mode reroute --target sm120 (top_k 9 against the compiled 8)" \
	"$work/refuse.out" "$sm120" run --mode reroute --target sm120 --set top_k=9 \
	--set hidden_size=7168 \
	--log "$work/refuse.%p.jsonl" -- python3 $py refuse
grep -qE '^(ok|not ok) - refuse' "$work/refuse.out" || echo "not ok - refuse printed no result"
if python3 - "$work" <<'PY'
import glob, json, sys
ev = [json.loads(l) for f in glob.glob(f"{sys.argv[1]}/refuse.*.jsonl") for l in open(f)]
launch = [e for e in ev if e.get("event") == "launch" and e.get("kernel") == "fused_moe_kernel"]
for e in launch[:3]:
    print(f"# refuse: launch {e.get('action')}, {len(e.get('param_sizes') or [])} parameters: "
          f"{e.get('reason')}")
ok = bool(launch)
for e in launch:
    ok &= e.get("action") == "refuse" and "SM120SHIM_TOP_K=9" in (e.get("reason") or "") \
        and "top_k 8" in (e.get("reason") or "")
sys.exit(0 if ok else 1)
PY
then echo "ok - refuse: the log shows the gate/up fused_moe_kernel launch refused, the reason naming SM120SHIM_TOP_K=9 and the compiled top_k 8"
else echo "not ok - refuse: no refused fused_moe_kernel launch whose reason names SM120SHIM_TOP_K=9 and top_k 8 in the JSON log"; fi

# enforce: the launches must fail exactly as on an SM120 card.
step "enforce under sm120 run --mode enforce --target sm120" "$work/enforce.out" \
	"$sm120" run --mode enforce --target sm120 -- python3 $py enforce
grep -qE '^(ok|not ok) - enforce' "$work/enforce.out" || echo "not ok - enforce printed no result"

#!/bin/sh
# oracle_lightning.sh - vLLM's (0.33.0) and SGLang's (0.5.9, 0.5.23) own
# lightning attention (tests/gpu/oracle_lightning.py) against the shim's
# reroute (GPU): one process launched plainly, then under `sm120 run --mode
# reroute --target sm120` (one Triton cache, so each kernel compiles once);
# the whole lightning_attention call and `_fwd_kv_parallel` alone run
# eagerly and in a CUDA graph and are judged against float64 next to the
# framework's own error, the 8-warp launch must be refused, and the JSON log
# must hold exactly those reroutes and that refusal.  The packages come from
# tests/oracle/fetch.sh (into $SM120_ORACLE, default $SM120_BUILD/oracle);
# without them this prints one "not ok" naming the command.  Prints
# "ok - ..." / "not ok - ..." lines.
set -u
B=${SM120_BUILD:-build}
sm120=$(pwd)/$B/sm120
export SM120_ORACLE="${SM120_ORACLE:-$B/oracle}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TRITON_CACHE_DIR="$work/triton"

. tests/gpu/step.sh   # step NAME OUT CMD...

for f in vllm-0.33.0/vllm/model_executor/layers/lightning_attn.py \
	sglang-0.5.9/sglang/srt/layers/attention/linear/lightning_attn.py \
	sglang-0.5.23/sglang/kernels/ops/attention/linear/lightning_attn.py; do
	if [ ! -f "$SM120_ORACLE/$f" ]; then
		echo "not ok - $SM120_ORACLE/$f is missing: run sh tests/oracle/fetch.sh $SM120_ORACLE"
		exit 0
	fi
done
py=tests/gpu/oracle_lightning.py
step "lightning attention without the shim" "$work/plain.out" \
	python3 $py run "$work/plain.pt"
step "lightning attention under sm120 run --mode reroute --target sm120" \
	"$work/shim.out" "$sm120" run --mode reroute --target sm120 \
	--log "$work/light.%p.jsonl" -- python3 $py run "$work/shim.pt"
step "check lightning attention" "$work/check.out" \
	python3 $py check "$work/plain.pt" "$work/shim.pt"
step "the shim's log of lightning attention" "$work/log.out" \
	python3 $py logcheck "$work/shim.pt.json" "$work"/light.*.jsonl

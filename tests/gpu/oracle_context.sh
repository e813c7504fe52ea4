#!/bin/sh
# oracle_context.sh - SGLang's own context_attention_fwd (0.5.8, 0.5.9,
# 0.5.23; tests/gpu/oracle_context.py) against the shim's reroute (GPU): one
# process launched plainly, then under `sm120 run --mode reroute --target
# sm120` (one Triton cache, so each kernel compiles once); its head-size-256
# bf16 cases run eagerly and in a CUDA graph and are judged against float64
# next to SGLang's own error, its head-size-192 and fp16 cases must be
# refused, and the JSON log must hold exactly those reroutes and refusals.
# The packages come from tests/oracle/fetch.sh (into $SM120_ORACLE, default
# $SM120_BUILD/oracle); without them this prints one "not ok" naming the
# command.  Prints "ok - ..." / "not ok - ..." lines.
set -u
B=${SM120_BUILD:-build}
sm120=$(pwd)/$B/sm120
export SM120_ORACLE="${SM120_ORACLE:-$B/oracle}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TRITON_CACHE_DIR="$work/triton"

. tests/gpu/step.sh   # step NAME OUT CMD...

for f in sglang-0.5.8/sglang/srt/layers/attention/triton_ops/prefill_attention.py \
	sglang-0.5.9/sglang/srt/layers/attention/triton_ops/prefill_attention.py \
	sglang-0.5.23/sglang/kernels/ops/attention/prefill_attention.py; do
	if [ ! -f "$SM120_ORACLE/$f" ]; then
		echo "not ok - $SM120_ORACLE/$f is missing: run sh tests/oracle/fetch.sh $SM120_ORACLE"
		exit 0
	fi
done
py=tests/gpu/oracle_context.py
step "SGLang context_attention_fwd without the shim" "$work/plain.out" \
	python3 $py run "$work/plain.pt"
step "SGLang context_attention_fwd under sm120 run --mode reroute --target sm120" \
	"$work/shim.out" "$sm120" run --mode reroute --target sm120 \
	--log "$work/ctx.%p.jsonl" -- python3 $py run "$work/shim.pt"
step "check SGLang context_attention_fwd" "$work/check.out" \
	python3 $py check "$work/plain.pt" "$work/shim.pt"
step "the shim's log of SGLang context_attention_fwd" "$work/log.out" \
	python3 $py logcheck "$work/shim.pt.json" "$work"/ctx.*.jsonl

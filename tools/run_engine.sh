#!/bin/sh
# run_engine.sh BUILD MODEL_DIR - `make run`'s engine part: write the default
# model (tiny Kimi K2 shape, compressed-tensors INT4 experts, seed 1) unless
# it is there, then run it: prefill 7 tokens, greedy decode 32.
#   - always on the CPU backend with every core (tokens, logits checksum, tok/s);
#   - where an NVIDIA GPU answers, also on the GPU backend under the shim with
#     the target emulated as SM120 (sm120 run --mode reroute --target sm120):
#     its tokens and difference against the CPU backend, then the shim's
#     report of what it rerouted, one row per kernel.
set -eu
build=$1
model=$2
if [ ! -f "$model/config.json" ]; then
	echo "== sm120 ref make-model --arch kimi-k2 --quant int4 --tiny --seed 1 $model"
	"$build/sm120" ref make-model --arch kimi-k2 --quant int4 --tiny --seed 1 "$model"
fi
echo "== sm120 ref run --backend cpu --steps 32 $model"
"$build/sm120" ref run --backend cpu --steps 32 "$model"
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "== no NVIDIA GPU here (nvidia-smi -L): the GPU backend under the shim is skipped"
	exit 0
fi
log=$(dirname "$model")/engine-gpu.jsonl
rm -f "$log"
echo "== sm120 run --mode reroute --target sm120 --model $model --set kv_cache_dtype=bf16 --log $log -- \\"
echo "       sm120 ref run --backend gpu --steps 32 --check-cpu $model"
"$build/sm120" run --mode reroute --target sm120 --model "$model" --set kv_cache_dtype=bf16 --log "$log" -- \
	"$build/sm120" ref run --backend gpu --steps 32 --check-cpu "$model"
echo "== sm120 report $log   (REROUTED: launches the shim sent to the bundled SM120 kernels)"
"$build/sm120" report "$log" || true

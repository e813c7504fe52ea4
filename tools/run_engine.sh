#!/bin/sh
# run_engine.sh BUILD MODEL_DIR - `make run`'s engine part: write the default
# model (tiny Kimi K2 shape, compressed-tensors INT4 experts, seed 1) unless
# it is there, then run it: prefill 7 tokens, greedy decode 32, on the CPU
# backend with every core.  Prints the tokens, a logits checksum and tokens/s.
set -eu
build=$1
model=$2
if [ ! -f "$model/config.json" ]; then
	echo "== sm120 ref make-model --arch kimi-k2 --quant int4 --tiny --seed 1 $model"
	"$build/sm120" ref make-model --arch kimi-k2 --quant int4 --tiny --seed 1 "$model"
fi
echo "== sm120 ref run --backend cpu --steps 32 $model"
"$build/sm120" ref run --backend cpu --steps 32 "$model"

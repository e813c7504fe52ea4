#!/bin/sh
# make_seeds.sh SM120 OUT - the generated seeds of fuzz_config and
# fuzz_safetensors: small valid inputs in the real layout, from the tiny
# checkpoints that `SM120 ref make-model` writes (tests/fuzz/fuzz.mk runs it
# at build time; hand-written seeds are in tests/fuzz/seeds/TARGET/).
#   OUT/config/ARCH-QUANT.json    each family's config.json in each weight
#                                 format (the legacy NVFP4 one followed by
#                                 FUZZ_SEP and its hf_quant_config.json)
#   OUT/safetensors/*.header      the 8-byte length and JSON header of a
#                                 model.safetensors (its data is megabytes:
#                                 too large for a seed)
#   OUT/safetensors/sharded.index an index, then after each FUZZ_SEP one
#                                 shard's header (fuzz_safetensors.c's input)
set -eu
sm120=${1:?usage: make_seeds.sh SM120 OUT}
out=${2:?usage: make_seeds.sh SM120 OUT}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# sep: FUZZ_SEP of tests/fuzz/fuzz_util.h
sep() { printf '\n--8<--\n'; }
# header FILE: the first 8 + N bytes of safetensors FILE, N its u64 little-endian header length
header() {
	n=$(od -An -tu1 -N8 "$1" | awk '{ n = 0; for (i = NF; i >= 1; i--) n = n * 256 + $i; print n }')
	head -c $((8 + n)) "$1"
}
# model NAME ARGS...: a tiny checkpoint in $work/NAME
model() {
	name=$1
	shift
	"$sm120" ref make-model --tiny "$@" "$work/$name" >/dev/null
}

rm -rf "$out"
mkdir -p "$out/config" "$out/safetensors"
for arch in kimi-k2 glm4-moe; do
	for quant in bf16 fp8 int4 nvfp4; do
		model "$arch-$quant" --arch "$arch" --quant "$quant"
		cp "$work/$arch-$quant/config.json" "$out/config/$arch-$quant.json"
	done
done
model kimi-k25-int4 --arch kimi-k2 --quant int4 --k25
cp "$work/kimi-k25-int4/config.json" "$out/config/kimi-k25-int4.json"
model kimi-k2-nvfp4-legacy --arch kimi-k2 --quant nvfp4 --legacy-quant-config
{ cat "$work/kimi-k2-nvfp4-legacy/config.json"; sep
  cat "$work/kimi-k2-nvfp4-legacy/hf_quant_config.json"; } >"$out/config/kimi-k2-nvfp4-legacy.json"

# One layer, two experts: every kind of tensor in a few kilobytes of header.
for m in kimi-k2-int4 glm4-moe-fp8 glm4-moe-nvfp4; do
	model "small-$m" --arch "${m%-*}" --quant "${m##*-}" --layers 1 --experts 2
	header "$work/small-$m/model.safetensors" >"$out/safetensors/$m.header"
done
model sharded --arch kimi-k2 --layers 1 --experts 2 --shards 2
{ cat "$work/sharded/model.safetensors.index.json"
  for s in "$work"/sharded/model-0000?-of-00002.safetensors; do sep; header "$s"; done
} >"$out/safetensors/sharded.index"

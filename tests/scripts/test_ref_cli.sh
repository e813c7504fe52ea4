#!/bin/sh
# test_ref_cli.sh - `sm120 ref run --json` as the transformers check reads it:
# the logits rows, the tokens, and "routes" (each MoE layer's experts per
# position, dense layers absent); then the command's options and bad inputs:
# --help on every subcommand, numeric options range-checked, exclusive options
# refused, and a make-model checkpoint edited to hold a bad config value, an
# unknown architecture, a NaN router weight or a FIFO - each one refused with
# one message that names it.  Prints "ok - ..." / "not ok - ..." per check.
set -u
set -- kimi-k2 glm4-moe
echo "1..$(($# * 3 + 45))" # plan: 3 checks per architecture, 45 on options, bad inputs and --check-cpu
B=${SM120_BUILD:-build}
sm120=$B/sm120
out=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$out" "$work"' EXIT

. tests/scripts/lib.sh

for arch in "$@"; do
	check "make-model --arch $arch --tiny" 0 "$sm120" ref make-model --arch "$arch" --quant bf16 \
		--tiny --seed 3 "$work/$arch"
	check "ref run --json on $arch" 0 "$sm120" ref run --steps 5 --prompt 4,8,15,16,23,42 \
		--json "$work/$arch.json" "$work/$arch"
	if python3 - "$work/$arch.json" "$work/$arch/config.json" <<'PY' >"$out" 2>&1
import json, sys
d, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
c = c.get("text_config", c)
rows = len(d["prompt"]) + len(d["tokens"]) - 1
assert len(d["logits"]) == rows, (len(d["logits"]), rows)
moe = [str(l) for l in range(c["first_k_dense_replace"], c["num_hidden_layers"])]
assert sorted(d["routes"], key=int) == moe, (list(d["routes"]), moe)
for layer, per_pos in d["routes"].items():
    assert len(per_pos) == rows, (layer, len(per_pos))
    for ids in per_pos:
        assert len(ids) == c["num_experts_per_tok"] == len(set(ids)), (layer, ids)
        assert all(0 <= e < c["n_routed_experts"] for e in ids), (layer, ids)
PY
	then echo "ok - $arch: routes name every MoE layer, top_k distinct experts per logits row"; else
		echo "not ok - $arch: --json routes"; sed 's/^/#   /' "$out"; fi
done

# expect_not DESCRIPTION PATTERN: the last checked command's output lacks PATTERN
expect_not() {
	if grep -q -- "$2" "$out"; then
		echo "not ok - $1 ('$2' in output)"
		sed 's/^/#   /' "$out"
	else echo "ok - $1"; fi
}

# describes DESCRIPTION WORD...: the last output names every WORD and says "default"
describes() {
	desc=$1 missing=
	shift
	for w in "$@" default; do grep -q -- "$w" "$out" || missing="$missing $w"; done
	if [ -z "$missing" ]; then echo "ok - $desc"; else
		echo "not ok - $desc (missing:$missing)"; sed 's/^/#   /' "$out"; fi
}

# --help on every subcommand: each option and its default
check "ref info --help" 0 "$sm120" ref info --help
expect "ref info --help describes the command" "usage: sm120 ref info DIR"
check "ref make-model --help" 0 "$sm120" ref make-model --help
describes "make-model --help describes every option and its default" --arch --quant --tiny \
	--real-dims --layers --experts --shards --seed --k25 --legacy-quant-config
check "ref run --help" 0 "$sm120" ref run --help
describes "run --help describes every option and its default" --backend --mla --prompt --steps \
	--threads --max-seq --chunk --json --check-cpu --last-logits

# numeric options: one parser, range-checked, no trailing garbage, no overflow
m=$work/kimi-k2
check "run --check-cpu (cpu against cpu) runs" 0 "$sm120" ref run --steps 3 --check-cpu "$m"
expect "it says which rows it compares and what it found" \
	"against the cpu backend, on the [0-9]* of [0-9]* logits rows computed from the same tokens: max |logit difference| 0, .*tokens equal"
# --last-logits: prefill forms the prompt's last row only; the same tokens
check "run --last-logits runs" 0 "$sm120" ref run --steps 3 --prompt 4,8,15,16 --last-logits "$m"
expect "its checksum covers the prompt's last row and the generated ones" "over 3 rows"
grep '^prompt:' "$out" >"$work/last.tokens"
check "the same run without it" 0 "$sm120" ref run --steps 3 --prompt 4,8,15,16 "$m"
expect "covers every prompt row" "over 6 rows"
if grep '^prompt:' "$out" | cmp -s - "$work/last.tokens"; then echo "ok - --last-logits generates the same tokens"
else echo "not ok - --last-logits generates other tokens"; sed 's/^/#   /' "$work/last.tokens" "$out"; fi
check "run --last-logits --json is refused" 2 "$sm120" ref run --last-logits --json "$work/x.json" "$m"
expect "--last-logits and --json: the message names both" "--last-logits and --json exclude each other"
check "run --steps 99999999999 is refused" 2 "$sm120" ref run --steps 99999999999 "$m"
expect "--steps names its range" "--steps '99999999999' is out of range: give a whole number in 1..1000000"
check "run --steps 5x is refused" 2 "$sm120" ref run --steps 5x "$m"
expect "--steps 5x: not a whole number" "--steps '5x' is not a whole number"
check "run --chunk 0 is refused" 2 "$sm120" ref run --chunk 0 "$m"
expect "--chunk names its range" "--chunk '0' is out of range: give a whole number in 1.."
check "run --threads -1 is refused" 2 "$sm120" ref run --threads -1 "$m"
expect "--threads names its range" "--threads '-1' is not a whole number: give a whole number in 1.."
check "make-model --seed abc is refused" 2 "$sm120" ref make-model --arch kimi-k2 --seed abc "$work/never"
expect "--seed abc: not a whole number" "--seed 'abc' is not a whole number"
check "make-model --layers beyond 64 bits is refused" 2 "$sm120" ref make-model --arch kimi-k2 \
	--layers 99999999999999999999999 "$work/never"
expect "--layers names its range" "--layers '99999999999999999999999' is out of range: give a whole number in 1..1000"

# options that exclude each other; messages with one prefix naming the option as spelled
check "make-model --tiny --real-dims is refused" 2 "$sm120" ref make-model --arch kimi-k2 --tiny \
	--real-dims "$work/never"
expect "--tiny and --real-dims: the message names both" "--tiny and --real-dims exclude each other"
check "make-model --k25 with --arch glm4-moe is refused" 1 "$sm120" ref make-model --arch glm4-moe \
	--k25 "$work/never"
expect "the message names --k25 as the command spells it" "--k25 is for --arch kimi-k2"
expect_not "the message has one prefix" "make-model: make-model"

# K2.5's layout (its architectures value) still loads; a tiny write shows no progress
check "make-model --k25" 0 "$sm120" ref make-model --arch kimi-k2 --quant int4 --k25 "$work/k25"
expect_not "a tiny write shows no progress line" "GB of tensors"
check "ref info on the K2.5 layout" 0 "$sm120" ref info "$work/k25"

# a config value out of range: one message naming the key, no NaN printed
cp -r "$m" "$work/eps"
sed -i 's/"rms_norm_eps":[^,]*/"rms_norm_eps": -1/' "$work/eps/config.json"
check "rms_norm_eps -1 is refused" 1 "$sm120" ref run --steps 2 "$work/eps"
expect "the message names rms_norm_eps and its range" '"rms_norm_eps" = -1 is out of range'
expect_not "no NaN checksum is printed" "nan"

# an architecture the engine does not run
cp -r "$m" "$work/arch"
sed -i 's/DeepseekV3ForCausalLM/LlamaForCausalLM/' "$work/arch/config.json"
check "an unknown architectures value is refused" 1 "$sm120" ref info "$work/arch"
expect "the message names the value" '"LlamaForCausalLM", which the engine does not run'
expect "the message names the supported ones" "DeepseekV3ForCausalLM, KimiK25ForConditionalGeneration (with text_config), Glm4MoeForCausalLM"

# NaN in the router weight of layer 1, expert 5's row (hidden 192): the step is refused
cp -r "$m" "$work/router"
python3 - "$work/router/model.safetensors" model.layers.1.mlp.gate.weight 960 192 <<'PY'
import json, struct, sys
path, name, first, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    begin, end = json.loads(f.read(n))[name]["data_offsets"]
    assert begin + 2 * (first + count) <= end
    f.seek(8 + n + begin + 2 * first)
    f.write(struct.pack("<H", 0x7fc0) * count)  # BF16 NaN
PY
check "a NaN router weight is refused" 1 "$sm120" ref run --steps 2 "$work/router"
expect "the message names the layer, the position and the expert" \
	"layer 1, position 0: the router score of expert 5 is NaN"

# a FIFO in place of the safetensors file: refused at once, by name
cp -r "$m" "$work/fifo"
rm "$work/fifo/model.safetensors" && mkfifo "$work/fifo/model.safetensors"
check "a FIFO as the shard is refused" 1 timeout 60 "$sm120" ref info "$work/fifo"
expect "the message names the FIFO" "fifo/model.safetensors: not a regular file but a FIFO"

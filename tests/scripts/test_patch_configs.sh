#!/bin/sh
# test_patch_configs.sh - `sm120 patch configs` against the real released
# packages' own config lookup: for SGLang 0.5.8, 0.5.9, 0.5.23 and vLLM
# 0.33.0 (unpacked by tests/oracle/fetch.sh, with a Triton dist-info of the
# venv's Triton beside them), the files written for Kimi K2 (FP8 block,
# INT4 W4A16 group 32) and GLM-4.7 (FP8 per channel, bf16) at TP 8 must be
# the ones the framework's try_get_optimal_moe_config opens, under each of
# the five SM120 device names, and give the table's configuration of the
# nearest batch size (tests/oracle/patch_configs.py runs the frameworks'
# code); before writing, the lookup must fall back to its default.  Also:
# --out with SGLANG_MOE_CONFIG_DIR / VLLM_TUNED_CONFIG_FOLDER, SGLang's
# fused shared expert (E=161, E=160 with --disable-shared-experts-fusion),
# a second run, --dry-run, a file of other contents in the way, every
# refusal (no table, --tp not dividing, an unknown quantization, a broken
# table, bad usage), every written file judged by `sm120 configs` (its
# names parse there too), and the eight tables shipped in patches/configs
# (each one written, labelled and fitting 101376 B on sm_120).  The tables here are test
# fixtures, not tuned ones.  Needs the venv and packages of make test's
# oracle step.
set -u
B=${SM120_BUILD:-build}
sm120=$B/sm120
py=$B/oracle-venv/bin/python3
work=$(mktemp -d)
out=$work/out
trap 'rm -rf "$work"' EXIT
. tests/scripts/lib.sh

releases="sglang-0.5.8 sglang-0.5.9 sglang-0.5.23 vllm-0.33.0"
models="kimi-fp8 kimi-int4 glm-fp8 glm-bf16"
per_release=$((2 + 4 * 3))
echo "1..$((4 * per_release + 30))" # plan: the checks below

devices="NVIDIA RTX PRO 6000 Blackwell Server Edition
NVIDIA RTX PRO 6000 Blackwell Workstation Edition
NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition
NVIDIA GeForce RTX 5090
NVIDIA GB10"
triton=$("$py" -c 'import triton; print(triton.__version__)')

# verdict DESCRIPTION STATUS: one check line from a status
verdict() {
	if [ "$2" -eq 0 ]; then echo "ok - $1"; else
		echo "not ok - $1"
		sed 's/^/#   /' "$out"
	fi
}

# ------------------------------------------------------------ the models
# config.json as the checkpoints publish it, the fields the frameworks read
# (sizes: /work/shared/reference/models-and-formats.md §1, §4)
model() { # model NAME ARCH MODEL_TYPE ROUTED SHARED HIDDEN INTER QUANT_JSON
	mkdir -p "$work/models/$1"
	cat >"$work/models/$1/config.json" <<EOF
{"architectures": ["$2"], "model_type": "$3", "n_routed_experts": $4, "n_shared_experts": $5,
 "num_experts_per_tok": 8, "hidden_size": $6, "moe_intermediate_size": $7,
 "torch_dtype": "bfloat16"$8}
EOF
}
FP8_BLOCK=', "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}'
INT4=', "quantization_config": {"config_groups": {"group_0": {"input_activations": null, "output_activations": null, "targets": ["Linear"], "weights": {"actorder": null, "block_structure": null, "dynamic": false, "group_size": 32, "num_bits": 4, "observer": "minmax", "observer_kwargs": {}, "strategy": "group", "symmetric": true, "type": "int"}}}, "format": "pack-quantized", "ignore": ["lm_head"], "kv_cache_scheme": null, "quant_method": "compressed-tensors", "quantization_status": "compressed"}'
FP8_CHANNEL=', "quantization_config": {"config_groups": {"group_0": {"input_activations": {"dynamic": true, "num_bits": 8, "strategy": "token", "symmetric": true, "type": "float"}, "targets": ["Linear"], "weights": {"dynamic": false, "num_bits": 8, "strategy": "channel", "symmetric": true, "type": "float"}}}, "format": "float-quantized", "ignore": ["lm_head"], "quant_method": "compressed-tensors", "quantization_status": "compressed"}'
model kimi-fp8 DeepseekV3ForCausalLM kimi_k2 384 1 7168 2048 "$FP8_BLOCK"
model kimi-int4 DeepseekV3ForCausalLM kimi_k2 384 1 7168 2048 "$INT4"
model glm-fp8 Glm4MoeForCausalLM glm4_moe 160 1 5120 1536 "$FP8_CHANNEL"
model glm-bf16 Glm4MoeForCausalLM glm4_moe 160 1 5120 1536 ""
# GLM-4.5-Air's sizes: a shape no table holds
model air Glm4MoeForCausalLM glm4_moe 128 1 4096 1408 ""
model nvfp4 DeepseekV3ForCausalLM kimi_k2 384 1 7168 2048 ', "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}'

# ------------------------------------------------------- fixture tables
# (not tuned: small tiles that fit; GROUP_SIZE_M of batch 1 tells them apart)
pdir=$work/patches
mkdir -p "$pdir/configs"
table() { # table FILE GM QUANT_SHAPE ROUTED HIDDEN INTER
	cat >"$pdir/configs/$1" <<EOF
{"format": "sm120-moe-table/1", "provenance": "test fixture, not tuned",
 "shape": {$3, "n_routed_experts": $4, "top_k": 8, "hidden_size": $5, "intermediate_per_partition": $6},
 "configs": {
  "4096": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 16, "num_warps": 4, "num_stages": 3},
  "1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": $2, "num_warps": 4, "num_stages": 3},
  "16": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 2},
  "256": {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 3}}}
EOF
}
table kimi-fp8.json 11 '"quant": "fp8_block", "block_shape": [128, 128]' 384 7168 256
table kimi-int4.json 12 '"quant": "int4_group", "group_size": 32' 384 7168 256
table glm-fp8.json 13 '"quant": "fp8_channel"' 160 5120 192
table glm-bf16.json 14 '"quant": "bf16"' 160 5120 192

# expected NAME: the fixture's configuration for batch sizes 1 12 300 5000
# (nearest key: 1, 16, 256, 4096), one JSON line each as the oracle prints it
expected() {
	python3 - "$pdir/configs/$1.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["configs"]
for m in (1, 12, 300, 5000):
    print(json.dumps(c[str(min((int(k) for k in c), key=lambda k: abs(k - m)))], sort_keys=True))
PY
}

# lookup FRAMEWORK SITE MODEL [--no-fusion]: the oracle's lines for every
# device name and batch sizes 1 12 300 5000
lookup() {
	fw=$1 site=$2 m=$3
	shift 3
	set -- "$@" --device "$(echo "$devices" | sed -n 1p)" --device "$(echo "$devices" | sed -n 2p)" \
		--device "$(echo "$devices" | sed -n 3p)" --device "$(echo "$devices" | sed -n 4p)" \
		--device "$(echo "$devices" | sed -n 5p)"
	"$py" tests/oracle/patch_configs.py "$fw" "$site" "$work/models/$m" 8 "$@" 1 12 300 5000 \
		2>"$work/lookup.err"
}

# found_all LINES_FILE WHERE MODEL: each of the 20 lines opened a file under
# WHERE and returned the fixture's configuration of its batch size
found_all() {
	expected "$3" >"$work/want"
	python3 - "$1" "$2" "$work/want" <<'PY' >"$out" 2>&1
import sys
lines = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
want = [l.strip() for l in open(sys.argv[3])]
bad = 0
if len(lines) != 20:
    print(f"{len(lines)} lines, expected 5 devices x 4 batch sizes"); bad = 1
for i, (dev, m, where, cfg) in enumerate(lines):
    if not where.startswith(sys.argv[2] + "/") or cfg != want[i % 4]:
        print(f"{dev} M={m}: opened {where}, got {cfg}, want {want[i % 4]}"); bad = 1
sys.exit(bad)
PY
}

fw_of() { echo "${1%%-*}"; }

# ------------------------------------------------------------ each release
for rel in $releases; do
	fw=$(fw_of "$rel")
	site=$work/$rel
	mkdir -p "$site/triton" "$site/triton-$triton.dist-info"
	cp -R "$B/oracle/$rel/." "$site/"
	printf 'Metadata-Version: 2.1\nName: triton\nVersion: %s\n' "$triton" \
		>"$site/triton-$triton.dist-info/METADATA"
	# the configs/ directory the wheels ship beside the lookup (SGLang 0.5.23 lists it)
	for d in "$site"/sglang/srt/layers/moe/moe_runner/triton_utils \
		"$site"/sglang/srt/layers/moe/fused_moe_triton "$site"/vllm/model_executor/layers/fused_moe; do
		[ -d "$d" ] && mkdir -p "$d/configs"
	done
	lookup "$fw" "$site" kimi-fp8 >"$work/lines"
	! grep -qv "	default	" "$work/lines" && [ "$(wc -l <"$work/lines")" -eq 20 ]
	st=$?
	cp "$work/lines" "$out"
	verdict "$rel: before writing, the lookup falls back to its default for every SM120 name" $st
	for m in $models; do
		check "$rel $m: written" 0 env SM120_PATCHES="$pdir" "$sm120" patch configs \
			--model "$work/models/$m" --tp 8 --framework "$fw" --site-packages "$site"
		n=$(grep -c "^  wrote E=" "$out")
		[ "$n" -eq 5 ]
		verdict "$rel $m: one file per SM120 device name ($n of 5)" $?
		lookup "$fw" "$site" "$m" >"$work/lines"
		found_all "$work/lines" "$site/$fw" "$m"
		verdict "$rel $m: $fw's own lookup opens them and gives the table's configuration" $?
	done
	check "$rel: every written file is read by sm120 configs, and fits sm_120" 0 \
		"$sm120" configs --arch 120 "$site/$fw"
done

# -------------------------------------------------------- the names printed
s9=$work/sglang-0.5.9 v=$work/vllm-0.33.0
check "SGLang GLM-4.7 FP8, second run: exit 0" 0 env SM120_PATCHES="$pdir" "$sm120" patch configs \
	--model "$work/models/glm-fp8" --tp 8 --framework sglang --site-packages "$s9"
expect "(every file already there)" "^  already there E=161,N=192,device_name=NVIDIA_GB10,dtype=fp8_w8a8,per_channel_quant=True.json"
expect "(SGLang fuses the shared expert: E=161, and says so)" \
	"^sglang 0.5.9 in $s9: E=161 N=192 dtype=fp8_w8a8 per_channel_quant=True -> .*/fused_moe_triton/configs/triton_$(echo "$triton" | tr . _)\$"
expect "(and how to match --disable-shared-experts-fusion)" "note: SGLang fuses the 1 shared expert into the routed MoE (E=161)"
env SM120_PATCHES="$pdir" "$sm120" patch configs --model "$work/models/kimi-int4" --tp 8 \
	--site-packages "$v" --framework vllm >"$out" 2>&1
expect "vLLM INT4: N is the unpacked intermediate size, E the routed experts" "^vllm 0.33.0 in $v: E=384 N=256 dtype=int4_w4a16 -> "
expect "(with when vLLM reads it)" "note: vLLM reads it when it runs W4A16 experts on Triton: --moe-backend triton"
env SM120_PATCHES="$pdir" "$sm120" patch configs --model "$work/models/kimi-int4" --tp 8 \
	--site-packages "$s9" --framework sglang >"$out" 2>&1
expect "SGLang INT4: N is w2's packed last dimension" "^sglang 0.5.9 in $s9: E=384 N=128 dtype=int4_w4a16 -> "
expect "(with when SGLang reads it: never on CUDA before 0.5.23)" "0.5.8 and 0.5.9 run compressed-tensors W4A16 with Marlin on CUDA"

check "--disable-shared-experts-fusion: GLM written as E=160 for SGLang" 0 env SM120_PATCHES="$pdir" \
	"$sm120" patch configs --model "$work/models/glm-bf16" --tp 8 --framework sglang \
	--site-packages "$s9" --disable-shared-experts-fusion
lookup sglang "$s9" glm-bf16 --no-fusion >"$work/lines"
found_all "$work/lines" "$s9/sglang" glm-bf16 && grep -q "/E=160,N=192,device_name=NVIDIA_GB10.json	" "$work/lines"
verdict "(SGLang run with that flag opens the E=160 files)" $?

# ------------------------------------------------------------ --out DIR
o=$work/outdir
check "--out DIR: both frameworks' layouts" 0 env SM120_PATCHES="$pdir" "$sm120" patch configs \
	--model "$work/models/kimi-fp8" --tp 8 --out "$o" --triton-version "$triton"
expect "(naming the variable to set)" "read with: export SGLANG_MOE_CONFIG_DIR=$o"
# (the installs' own copies removed: what is found comes from DIR)
rm -rf "$s9/sglang/srt/layers/moe/fused_moe_triton/configs" "$v/vllm/model_executor/layers/fused_moe/configs"
SGLANG_MOE_CONFIG_DIR=$o lookup sglang "$s9" kimi-fp8 >"$work/lines.s" &&
	VLLM_TUNED_CONFIG_FOLDER=$o lookup vllm "$v" kimi-fp8 >"$work/lines.v" &&
	found_all "$work/lines.s" "$o/configs/triton_$(echo "$triton" | tr . _)" kimi-fp8 &&
	found_all "$work/lines.v" "$o" kimi-fp8
verdict "SGLANG_MOE_CONFIG_DIR and VLLM_TUNED_CONFIG_FOLDER: the frameworks find them in DIR" $?

# ---------------------------------------------------- what it keeps and refuses
check "--dry-run: exit 0" 0 env SM120_PATCHES="$pdir" "$sm120" patch configs \
	--model "$work/models/glm-fp8" --tp 8 --out "$work/dry" --triton-version "$triton" --dry-run
[ "$(grep -c "^  would write E=" "$out")" -eq 10 ] && [ ! -e "$work/dry" ]
verdict "(says the 10 files it would write, writes nothing)" $?

f="$o/E=384,N=256,device_name=NVIDIA_GB10,dtype=fp8_w8a8,block_shape=[128,128].json"
echo '{"1": {"BLOCK_SIZE_M": 64}}' >"$f"
check "a file of other contents in the way: exit 1" 1 env SM120_PATCHES="$pdir" "$sm120" patch \
	configs --model "$work/models/kimi-fp8" --tp 8 --out "$o" --framework vllm
expect "(kept, and named with what to do)" "kept: E=384,N=256,device_name=NVIDIA_GB10,.*delete it to use "
grep -q '"BLOCK_SIZE_M": 64}}' "$f"
verdict "(and left as it was)" $?

check "no table for the shape: exit 1" 1 env SM120_PATCHES="$pdir" "$sm120" patch configs \
	--model "$work/models/air" --tp 8 --out "$o" --framework vllm
expect "(saying how to tune one)" "no table in $pdir/configs for this layer at --tp 8 (intermediate 176 per partition, bf16): tune one on a GPU with 'python3 tests/gpu/tune_moe.py --model $work/models/air --tp 8"
check "--tp that does not divide moe_intermediate_size: exit 1" 1 env SM120_PATCHES="$pdir" \
	"$sm120" patch configs --model "$work/models/glm-bf16" --tp 7 --out "$o"
check "an NVFP4 checkpoint (no Triton config file): exit 2" 2 env SM120_PATCHES="$pdir" \
	"$sm120" patch configs --model "$work/models/nvfp4" --tp 8 --out "$o"
expect "(naming the quant_method)" "quant_method \"modelopt\": sm120 patch configs knows fp8 and compressed-tensors"
check "a directory without config.json: exit 2" 2 env SM120_PATCHES="$pdir" "$sm120" patch configs \
	--model "$work" --tp 8 --out "$o"
mkdir -p "$work/bad/configs"
sed 's/"top_k": 8, //' "$pdir/configs/glm-bf16.json" >"$work/bad/configs/t.json"
check "a table without its shape: exit 2" 2 env SM120_PATCHES="$work/bad" "$sm120" patch configs \
	--model "$work/models/glm-bf16" --tp 8 --out "$o"
expect "(naming the file and the field)" "bad/configs/t.json: \"shape\" needs n_routed_experts, top_k"
check "--site-packages with --out: exit 2" 2 "$sm120" patch configs --model "$work/models/glm-bf16" \
	--tp 8 --out "$o" --site-packages "$v"
check "no --tp: exit 2" 2 "$sm120" patch configs --model "$work/models/glm-bf16"
check "a directory without SGLang or vLLM: exit 2" 2 env SM120_PATCHES="$pdir" "$sm120" patch configs \
	--model "$work/models/glm-bf16" --tp 8 --site-packages "$work/models"

# ------------------------------------------------- the tables patches/ ships
# (each of the eight shapes: written, labelled and fitting)
shipped=0 ok_all=0
: >"$work/shipped"
for m in $models; do
	for tp in 8 4; do
		env -u SM120_PATCHES "$sm120" patch configs --model "$work/models/$m" --tp "$tp" \
			--out "$work/shipped-$m-$tp" --triton-version "$triton" >"$out" 2>&1
		st=$?
		if [ "$st" -eq 0 ]; then
			shipped=$((shipped + 1))
			"$sm120" configs --arch 120 "$work/shipped-$m-$tp" >>"$work/shipped" 2>&1 ||
				{ ok_all=1; echo "$m tp$tp: a bucket does not fit" >>"$work/shipped"; }
			grep -q "^table .*: tuned on .* under SM120 limits: .*retune on a card" "$out" ||
				{ ok_all=1; echo "$m tp$tp: no provenance line" >>"$work/shipped"; }
		elif ! grep -q "no table in .*tests/gpu/tune_moe.py" "$out"; then
			ok_all=1
			cat "$out" >>"$work/shipped"
		fi
	done
done
[ "$shipped" -eq 8 ] || { ok_all=1; echo "$shipped of the 8 tables ship" >>"$work/shipped"; }
cp "$work/shipped" "$out"
verdict "patches/configs: all 8 shipped tables ($shipped) written, labelled and fitting 101376 B" $ok_all

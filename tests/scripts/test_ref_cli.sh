#!/bin/sh
# test_ref_cli.sh - `sm120 ref run --json` as the transformers check reads it:
# the logits rows, the tokens, and "routes" (each MoE layer's experts per
# position, dense layers absent).  Prints "ok - ..." / "not ok - ..." per check.
set -u
B=${SM120_BUILD:-build}
sm120=$B/sm120
out=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$out" "$work"' EXIT

. tests/scripts/lib.sh

for arch in kimi-k2 glm4-moe; do
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

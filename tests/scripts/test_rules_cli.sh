#!/bin/sh
# test_rules_cli.sh - `sm120 rules check|compile`: the shipped rules are
# valid, and every kind of mistake in a rules file is named with its file,
# line, rule and field: unknown keys (with the nearest valid name), keys
# given twice, numbers out of range, misspelt tile names, and the generic
# entries of tile-generic rules (model, bounds, their names).  Prints
# "ok - ..." / "not ok - ...".
set -u
echo 1..91 # plan: the number of checks below
B=${SM120_BUILD:-build}
sm120=$B/sm120
work=$(mktemp -d)
out=$work/out
trap 'rm -rf "$work"' EXIT
. tests/scripts/lib.sh

check "the shipped rules are valid" 0 "$sm120" rules check rules/*.json
expect "and counted" "rules in [0-9]* files: no errors"

# good RULE_BODY: a valid rule with id "r1"; variants below break one field each.
good='{"id": "r1", "kernel": "k", "adapter": "sglang_extend", "source": "test",
  "params": [{"name": "a", "type": "ptr"}, {"name": "n", "type": "i32", "dropped_when": "one"}],
  "tiles": [{"dynamic_smem": 106496, "BLOCK_M": 32}], "values": {"IS_CAUSAL": true}}'
printf '{"schema": 1, "rules": [\n%s\n]}\n' "$good" >"$work/good.json"
check "a minimal valid rule passes" 0 "$sm120" rules check "$work/good.json"

# bad NAME SED-EXPRESSION: good.json with one change
bad() { sed "$2" "$work/good.json" >"$work/$1.json"; }
bad type 's/"type": "ptr"/"type": "pointer"/'
check "an unknown parameter type is an error" 1 "$sm120" rules check "$work/type.json"
expect "naming file, line, rule, field and the accepted types" \
	"type.json:3: rule 'r1': params\[0\].type: 'pointer' is not ptr, i64, i32, fp32 or u1"
bad adapter 's/"sglang_extend"/"magic"/; s/"r1"/"r2"/'
check "an unknown adapter is an error" 1 "$sm120" rules check "$work/adapter.json"
expect "listing the shim's adapters" "adapter: 'magic' is not one of the shim's adapters (sglang_extend"
bad dropfp 's/"type": "i32", "dropped_when": "one"/"type": "fp32", "dropped_when": "one"/'
check "only ints are dropped when 1" 1 "$sm120" rules check "$work/dropfp.json"
expect "said so" "params\[1\]: only an i32 or i64 is dropped when it is 1"
bad unsup 's/"type": "ptr"}/"type": "ptr", "supported": false}/'
check "supported: false on a parameter that is always there is an error" 1 "$sm120" rules check "$work/unsup.json"
expect "explained" "params\[0\].supported: false needs dropped_when"
bad dupname 's/"name": "n"/"name": "a"/'
check "a parameter named twice is an error" 1 "$sm120" rules check "$work/dupname.json"
expect "naming both" "params\[1\].name: 'a' is also params\[0\]"
bad notiles 's/"tiles": \[[^]]*\]/"tiles": []/'
check "a rule without tiles is an error" 1 "$sm120" rules check "$work/notiles.json"
expect "said so" "tiles: must be a non-empty array"
bad smem 's/"dynamic_smem": 106496/"dynamic_smem": "big"/'
check "a tile without a byte count is an error" 1 "$sm120" rules check "$work/smem.json"
expect "said so" "tiles\[0\].dynamic_smem: must be a whole number from 101377 to 232448, not 'big'"
bad setting 's/"values"/"settings": ["kv_dtype"], "values"/'
check "an unknown setting is an error" 1 "$sm120" rules check "$work/setting.json"
expect "listing the known settings" "settings\[0\]: 'kv_dtype' is not one of the settings (kv_cache_dtype"
bad facts 's/"values"/"needs_compiled_facts": "yes", "values"/'
check "needs_compiled_facts must be a boolean" 1 "$sm120" rules check "$work/facts.json"
expect "said so" "needs_compiled_facts: must be true or false"
bad schema 's/"schema": 1/"schema": 2/'
check "another schema version is an error" 1 "$sm120" rules check "$work/schema.json"
expect "naming the version" "schema: must be 1"

# Unknown keys: rejected, with the nearest valid name.
bad suported 's/"type": "ptr"}/"type": "ptr", "suported": false}/'
check "a misspelt parameter key is an error" 1 "$sm120" rules check "$work/suported.json"
expect "with the key's line and the nearest name" \
	"suported.json:3: rule 'r1': params\[0\].suported: unknown key in a parameter (did you mean 'supported'?)"
bad setings 's/"values"/"setings": ["kv_cache_dtype"], "values"/'
check "a misspelt rule key is an error" 1 "$sm120" rules check "$work/setings.json"
expect "naming the nearest name" "rule 'r1': setings: unknown key in a rule (did you mean 'settings'?)"
bad rulez 's/"schema": 1/"schema": 1, "rulez": []/'
check "an unknown top-level key is an error" 1 "$sm120" rules check "$work/rulez.json"
expect "naming the accepted keys" \
	"rulez.json:1: rulez: unknown key in a rules file (did you mean 'rules'?); accepted: schema, description or rules"
bad smme 's/"dynamic_smem"/"dynamic_smme"/'
check "a misspelt dynamic_smem is an error, not a compiled-in name" 1 "$sm120" rules check "$work/smme.json"
expect "naming it" "tiles\[0\].dynamic_smme: unknown key in a tile (did you mean 'dynamic_smem'?)"
# Tile names are free-form; one that no other tile of the adapter gives but
# that misspells a name they give is an error.
bad blokc 's/"BLOCK_M"/"BLOKC_M"/'
check "a misspelt tile name is an error" 1 "$sm120" rules check rules/sglang_extend.json "$work/blokc.json"
expect "naming the name the adapter's other tiles give" \
	"blokc.json:4: rule 'r1': tiles\[0\].BLOKC_M: did you mean 'BLOCK_M'? No other sglang_extend tile names BLOKC_M"

# Numbers: every one range-checked, whole where whole numbers are meant.
bad huge 's/"dynamic_smem": 106496/"dynamic_smem": 1e300/'
check "dynamic_smem 1e300 is an error" 1 "$sm120" rules check "$work/huge.json"
expect "naming the range" "tiles\[0\].dynamic_smem: must be a whole number from 101377 to 232448, not 1e+300"
check "compile refuses it too" 1 "$sm120" rules compile -o "$work/huge.c" "$work/huge.json"
[ ! -e "$work/huge.c" ] && echo "ok - and writes no C" || echo "not ok - wrote a table with dynamic_smem 1e300"
bad fits 's/"dynamic_smem": 106496/"dynamic_smem": 90000/'
check "a tile under the limit is an error" 1 "$sm120" rules check "$work/fits.json"
expect "naming the limit" "dynamic_smem: must be a whole number from 101377 to 232448, not 90000 (bytes: over sm120's opt-in limit of 101376"
bad blocks 's/"BLOCK_M": 32/"BLOCK_M": -32, "BLOCK_N": 100000, "num_warps": 8.5/'
check "negative, huge and fractional block sizes are errors" 1 "$sm120" rules check "$work/blocks.json"
expect "negative" "tiles\[0\].BLOCK_M: must be a whole number from 0 to 65536 (or true/false for 1/0), not -32"
expect "huge" "tiles\[0\].BLOCK_N: must be a whole number from 0 to 65536 (or true/false for 1/0), not 100000"
expect "fractional" "tiles\[0\].num_warps: must be a whole number from 0 to 65536 (or true/false for 1/0), not 8.5"
bad bigvalue 's/"IS_CAUSAL": true/"IS_CAUSAL": 1e12/'
check "a value out of range is an error" 1 "$sm120" rules check "$work/bigvalue.json"
expect "naming the range" "values.IS_CAUSAL: must be a number from -2147483648 to 2147483647"

# Each once: settings, JSON keys.
bad twice 's/"values"/"settings": ["kv_cache_dtype", "kv_cache_dtype"], "values"/'
check "a setting listed twice is an error" 1 "$sm120" rules check "$work/twice.json"
expect "naming both" "settings\[1\]: 'kv_cache_dtype' is also settings\[0\]"
bad dupkey 's/"BLOCK_M": 32/"BLOCK_M": 32, "BLOCK_M": 64/'
check "a JSON key given twice is an error" 1 "$sm120" rules check "$work/dupkey.json"
expect "said so" "dupkey.json:4: rule 'r1': tiles\[0\].BLOCK_M: given twice (first on line 4)"

# A generic entry (tile-generic rules): a shared-memory model and the bounds
# of the compiled-in values; each mistake named with its field.
sed 's/"values": {"IS_CAUSAL": true}/"values": {"IS_CAUSAL": true}, "generic": {"shared_memory": "triton_fused_moe_sglang",\
  "compiled": {"BLOCK_M": {"min": 16, "max": 128, "multiple_of": 16, "why": "rows"},\
  "BLOCK_K": {"min": 16, "max": 256, "divides": "group_k"}, "group_k": {"one_of": [0, 128]}}}/' \
	"$work/good.json" >"$work/gen.json"
check "a rule with a generic entry passes" 0 "$sm120" rules check "$work/gen.json"
check "and compiles" 0 "$sm120" rules compile -o "$work/gen.c" "$work/gen.json"
grep -q 'static const struct rule_generic generic_0 = { "triton_fused_moe_sglang", bounds_0, 3 };' "$work/gen.c" &&
	grep -q '{ "BLOCK_K", 16, 256, 1, NULL, 0, "group_k", NULL },' "$work/gen.c" &&
	grep -q 'values_0, VALUES_0, settings_0, 0, GENERIC_0, 0 }' "$work/gen.c" &&
	cc -std=gnu11 -Wall -Wextra -Werror -Icore -c "$work/gen.c" -o "$work/gen.o" &&
	echo "ok - into a struct rule_generic that compiles cleanly" ||
	{ echo "not ok - compiled generic entry"; sed 's/^/#   /' "$work/gen.c"; }
gbad() { sed "$2" "$work/gen.json" >"$work/$1.json"; }
gbad model 's/"triton_fused_moe_sglang"/"triton_moe_sglang"/'
check "an unknown shared-memory model is an error" 1 "$sm120" rules check "$work/model.json"
expect "naming the models" "generic.shared_memory: 'triton_moe_sglang' is not one of the shim's shared-memory models (triton_fused_moe_sglang, triton_fused_moe_vllm or triton_fused_moe_gptq_awq) (did you mean 'triton_fused_moe_sglang'?)"
gbad memroy 's/"shared_memory"/"shared_memroy"/'
check "a misspelt generic key is an error" 1 "$sm120" rules check "$work/memroy.json"
expect "naming the nearest key" "generic.shared_memroy: unknown key in a generic entry (did you mean 'shared_memory'?)"
gbad multiple 's/"multiple_of": 16/"multiple": 16/'
check "a misspelt bound key is an error" 1 "$sm120" rules check "$work/multiple.json"
expect "naming the nearest key" "generic.compiled.BLOCK_M.multiple: unknown key in a bound (did you mean 'multiple_of'?)"
gbad both 's/"one_of": \[0, 128\]/"one_of": [0, 128], "min": 0/'
check "a list and a range in one bound is an error" 1 "$sm120" rules check "$work/both.json"
expect "said so" "generic.compiled.group_k: give one_of or min/max (and multiple_of), not both"
gbad nomax 's/"min": 16, "max": 256, /"min": 16, /'
check "a range without max is an error" 1 "$sm120" rules check "$work/nomax.json"
expect "said so" "generic.compiled.BLOCK_K: needs min and max"
gbad minmax 's/"min": 16, "max": 128/"min": 200, "max": 128/'
check "min above max is an error" 1 "$sm120" rules check "$work/minmax.json"
expect "naming both" "generic.compiled.BLOCK_M.min: 200 is above max 128"
gbad huge 's/"max": 256/"max": 100000/'
check "a bound out of range is an error" 1 "$sm120" rules check "$work/huge.json"
expect "naming the range" "generic.compiled.BLOCK_K.max: must be a whole number from 0 to 65536, not 100000"
gbad twice 's/"one_of": \[0, 128\]/"one_of": [0, 128, 0]/'
check "a value listed twice is an error" 1 "$sm120" rules check "$work/twice.json"
expect "naming both" "generic.compiled.group_k.one_of\[2\]: 0 is also one_of\[0\]"
gbad self 's/"divides": "group_k"/"divides": "BLOCK_K"/'
check "a bound dividing itself is an error" 1 "$sm120" rules check "$work/self.json"
expect "said so" "generic.compiled.BLOCK_K.divides: names the bound itself"
gbad blokc 's/"BLOCK_M": {"min"/"BLOKC_M": {"min"/'
check "a bound name that misspells a tile's is an error" 1 "$sm120" rules check "$work/blokc.json"
expect "naming the tile's" "generic.compiled.BLOKC_M: did you mean 'BLOCK_M'? The rule's tiles give BLOCK_M, none gives BLOKC_M"
gbad empty 's/"compiled": {.*$/"compiled": {}}}/; /"BLOCK_K": {"min"/d'
check "no bounds is an error" 1 "$sm120" rules check "$work/empty.json"
expect "said so" "generic.compiled: 0 names; give 1 to 16"
gbad notobj 's/"group_k": {"one_of": \[0, 128\]}/"group_k": 128/'
check "a bound that is not an object is an error" 1 "$sm120" rules check "$work/notobj.json"
expect "said so" "generic.compiled.group_k: must be an object (a bound), not 128"
gbad nomodel 's/"shared_memory": "triton_fused_moe_sglang",//'
check "a generic entry without a model is an error" 1 "$sm120" rules check "$work/nomodel.json"
expect "said so" "generic: no \"shared_memory\" (required: one of the shim's shared-memory models"

printf '{"schema": 1,\n "rules": [\n  {"id": "r1",, }\n]}\n' >"$work/syntax.json"
check "broken JSON is an error" 1 "$sm120" rules check "$work/syntax.json"
expect "with its line" "syntax.json:3: not valid JSON"
check "the same id in two files is an error" 1 "$sm120" rules check "$work/good.json" "$work/good.json"
expect "said so" "rule 'r1': id: used by another rule"
check "several mistakes are all listed" 1 "$sm120" rules check "$work/type.json" "$work/adapter.json"
[ "$(grep -c '^sm120 rules: ' "$out")" = 2 ] && echo "ok - one line each" ||
	{ echo "not ok - several mistakes"; sed 's/^/#   /' "$out"; }

check "compile writes the C table" 0 "$sm120" rules compile -o "$work/t.c" "$work/good.json"
grep -q '{ "r1", "k", "sglang_extend", "test", params_0, 2, tiles_0, 1, values_0, VALUES_0' "$work/t.c" &&
	cc -std=gnu11 -Wall -Wextra -Werror -Icore -c "$work/t.c" -o "$work/t.o" &&
	echo "ok - and it compiles cleanly" || { echo "not ok - compiled table"; sed 's/^/#   /' "$work/t.c"; }
check "compile refuses invalid rules" 1 "$sm120" rules compile -o "$work/u.c" "$work/type.json"
[ ! -e "$work/u.c" ] && echo "ok - and writes nothing" || echo "not ok - wrote a table from invalid rules"
check "no files is a usage error" 2 "$sm120" rules check
for sub in check compile; do
	"$sm120" rules $sub --help >"$out" 2>"$work/err"
	got=$?
	if [ "$got" -eq 0 ] && grep -q '^usage: sm120 rules check FILE' "$out" && [ ! -s "$work/err" ]; then
		echo "ok - rules $sub --help prints the usage on stdout"
	else
		echo "not ok - rules $sub --help (exit $got)"
		sed 's/^/#   /' "$out" "$work/err"
	fi
done

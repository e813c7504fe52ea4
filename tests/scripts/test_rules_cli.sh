#!/bin/sh
# test_rules_cli.sh - `sm120 rules check|compile`: the shipped rules are
# valid, and every kind of mistake in a rules file is named with its file,
# line, rule and field.  Prints "ok - ..." / "not ok - ...".
set -u
echo 1..32 # plan: the number of checks below
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
	"type.json:2: rule 'r1': params\[0\].type: 'pointer' is not ptr, i64, i32, fp32 or u1"
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
expect "said so" "tiles\[0\].dynamic_smem: must be a positive whole number of bytes"
bad setting 's/"values"/"settings": ["kv_dtype"], "values"/'
check "an unknown setting is an error" 1 "$sm120" rules check "$work/setting.json"
expect "listing the known settings" "settings: 'kv_dtype' is not one of kv_cache_dtype"
bad schema 's/"schema": 1/"schema": 2/'
check "another schema version is an error" 1 "$sm120" rules check "$work/schema.json"
expect "naming the version" "schema: must be 1"
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

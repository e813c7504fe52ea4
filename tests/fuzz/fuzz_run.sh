#!/bin/sh
# fuzz_run.sh TARGET BIN OUT SECONDS MAX_LEN FLAGS SEED... - fuzz one target
# (tests/fuzz/fuzz.mk runs it for each) and print its verdict, one line that
# tests/run.sh counts:
#   ok - fuzz_TARGET: N runs, no crash
#   not ok - fuzz_TARGET: exit RC after N runs; input FILE, log LOG
# the second followed by up to five lines of the report, as comments.
# BIN runs for SECONDS on a temporary copy of the SEEDs (each a file, or a
# folder whose files are taken; one that is not there is skipped), so the
# tree is never written; libFuzzer runs every seed once before it mutates,
# so a regression among them fails at once.  FLAGS: more libFuzzer flags, one
# word.  The log is OUT/fuzz_TARGET.log, a failing input
# OUT/TARGET-{crash,leak,oom,timeout}-<sha1>.  Exit 1 on "not ok".
set -u
target=$1 bin=$2 out=$3 seconds=$4 max_len=$5 flags=$6
shift 6
mkdir -p "$out" || exit 1
corpus=$(mktemp -d) || exit 1
trap 'rm -rf "$corpus"' EXIT
for s in "$@"; do
	if [ -d "$s" ]; then
		find "$s" -maxdepth 1 -type f ! -name '.*' -exec cp {} "$corpus"/ \;
	elif [ -f "$s" ]; then
		cp "$s" "$corpus"/
	fi
done
log=$out/fuzz_$target.log
# FLAGS unquoted: several words.
# shellcheck disable=SC2086
"$bin" -max_total_time="$seconds" -max_len="$max_len" -timeout=25 -print_final_stats=1 \
	-artifact_prefix="$out/$target-" $flags "$corpus" >"$log" 2>&1
rc=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
[ -n "$runs" ] || runs=$(sed -n 's/^#\([0-9]*\).*/\1/p' "$log" | tail -n 1)
if [ "$rc" -eq 0 ]; then
	echo "ok - fuzz_$target: ${runs:-0} runs, no crash"
	exit 0
fi
input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
echo "not ok - fuzz_$target: exit $rc after ${runs:-?} runs;" \
	"input ${input:-(none kept)}, log $log"
grep -E "^(==[0-9]+== ?ERROR|SUMMARY|fuzz_$target:|.*runtime error)" "$log" | head -n 5 | sed 's/^/#   /'
exit 1

#!/bin/sh
# run.sh UNIT_TEST... - run the cmocka programs and the command-line checks,
# then print one closing line "N passed, N failed".  Exit 1 if anything failed.
set -u
passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

for t in "$@"; do
	CMOCKA_MESSAGE_OUTPUT=stdout "$t" >"$log" 2>&1
	rc=$?
	cat "$log"
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
	if [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
		echo "FAILED: $t exited $rc without a cmocka verdict (crash or sanitizer report above)"
		failed=$((failed + 1))
	fi
done

for s in tests/scripts/test_*.sh; do
	sh "$s" >"$log" 2>&1
	cat "$log"
	passed=$((passed + $(grep -c '^ok ' "$log")))
	failed=$((failed + $(grep -c '^not ok ' "$log")))
done

if [ -n "${SM120_FUZZ:-}" ]; then
	$SM120_FUZZ >"$log" 2>&1
	cat "$log"
	passed=$((passed + $(grep -c '^ok ' "$log")))
	failed=$((failed + $(grep -c '^not ok' "$log")))
	grep -qE '^(ok|not ok) ' "$log" || { echo "not ok - fuzz smoke printed no verdict"; failed=$((failed + 1)); }
fi

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

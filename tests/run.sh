#!/bin/sh
# run.sh UNIT_TEST... - run the cmocka programs, every test_*.sh in
# $SM120_TEST_SCRIPTS (default tests/scripts) and the fuzz smoke command in
# $SM120_FUZZ (if set), then print one closing line "N passed, N failed".
# Checks are the "ok"/"not ok" lines; each script also prints a TAP plan
# "1..N".  A script that exits non-zero, prints no plan or runs another
# number of checks than planned is a failure, as is a cmocka program without
# its "[==========] N test(s) run." line: a suite that stops early never
# passes silently.  Exit 1 if anything failed.
set -u
scripts=${SM120_TEST_SCRIPTS:-tests/scripts}
passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# fail NAME PROBLEM: one failure that no check line reported
fail() {
	echo "FAILED: $1: $2"
	failed=$((failed + 1))
}
# tally: add the log's "ok"/"not ok" lines; sets $ran to their number
tally() {
	ok=$(grep -cE '^ok( |$)' "$log")
	nok=$(grep -cE '^not ok( |$)' "$log")
	passed=$((passed + ok))
	failed=$((failed + nok))
	ran=$((ok + nok))
}

for t in "$@"; do
	CMOCKA_MESSAGE_OUTPUT=stdout "$t" >"$log" 2>&1
	rc=$?
	cat "$log"
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
	if ! grep -q '^\[==========\] [0-9][0-9]* test(s) run\.' "$log"; then
		fail "$t" "exited $rc without cmocka's \"[==========] N test(s) run.\" line"
	elif [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
		fail "$t" "exited $rc without a cmocka verdict (crash or sanitizer report above)"
	fi
done

found=0
for s in "$scripts"/test_*.sh; do
	[ -f "$s" ] || continue
	found=1
	sh "$s" >"$log" 2>&1
	rc=$?
	cat "$log"
	tally
	plans=$(grep -c '^1\.\.[0-9]' "$log")
	plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\).*/\1/p' "$log" | head -n 1)
	why=
	[ "$rc" -eq 0 ] || why="exited $rc; "
	if [ "$plans" -eq 0 ]; then
		why="${why}printed no plan (1..N), ran $ran"
	elif [ "$plans" -gt 1 ]; then
		why="${why}printed $plans plans"
	elif [ "$plan" -ne "$ran" ]; then
		why="${why}planned $plan, ran $ran"
	fi
	[ -z "$why" ] || fail "${s##*/}" "${why%; }"
done
[ "$found" -eq 1 ] || fail "$scripts" "no test_*.sh scripts found"

# The fuzz smoke is tests/fuzz/fuzz.mk's: one verdict line, exit 1 with "not ok".
if [ -n "${SM120_FUZZ:-}" ]; then
	$SM120_FUZZ >"$log" 2>&1
	rc=$?
	cat "$log"
	tally
	if [ "$ran" -eq 0 ]; then
		fail "fuzz smoke" "exited $rc and printed no verdict"
	elif [ "$rc" -ne 0 ] && [ "$nok" -eq 0 ]; then
		fail "fuzz smoke" "exited $rc without a failing verdict"
	fi
fi

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

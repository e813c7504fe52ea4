#!/bin/sh
# test_runner.sh - tests/run.sh itself, on directories of fake test scripts:
# a script that exits early, one without a plan, one that runs more checks
# than it planned, a cmocka program that stops before its summary, one with a
# sanitizer report after it, a fuzz smoke without a verdict and an empty
# directory are each a failure naming the culprit; a clean set passes.
# Prints "ok - ..." / "not ok - ...".
set -u
# The fake directories never hold this script; a nested run refuses anyway.
if [ -n "${SM120_RUNNER_SELFTEST:-}" ]; then
	echo "test_runner.sh: run inside its own self-test; not recursing" >&2
	exit 2
fi
echo 1..14 # plan: the number of checks below
work=$(mktemp -d)
out=$work/out
trap 'rm -rf "$work"' EXIT
. tests/scripts/lib.sh

# runner SCRIPTS_DIR FUZZ_SCRIPT UNIT...: tests/run.sh on fakes only
runner() {
	dir=$1 fuzz=$2
	shift 2
	env SM120_RUNNER_SELFTEST=1 SM120_TEST_SCRIPTS="$dir" SM120_FUZZ="${fuzz:+sh $fuzz}" \
		sh tests/run.sh "$@"
}
# fake FILE LINE...: a shell script made of LINEs
fake() {
	f=$1
	shift
	printf '%s\n' "$@" >"$f"
	chmod +x "$f"
}

mkdir "$work/bad" "$work/good" "$work/empty"
fake "$work/bad/test_early.sh" 'echo 1..3' 'echo "ok - one"' 'exit 3' 'echo "ok - two"' 'echo "ok - three"'
fake "$work/bad/test_noplan.sh" 'echo "ok - one"' 'echo "ok - two"'
fake "$work/bad/test_count.sh" 'echo 1..2' 'echo "ok - one"' 'echo "not ok - two"' 'echo "ok - three"'
fake "$work/bad/test_good.sh" 'echo "ok - one"' 'echo "ok - two"' 'echo 1..2'
cp "$work/bad/test_good.sh" "$work/good/test_last.sh"
fake "$work/good/test_first.sh" 'echo 1..1' 'echo "ok - one"'
fake "$work/unit_cut" '#!/bin/sh' 'echo "[==========] Running 2 test(s)."' 'echo "[       OK ] a"'
fake "$work/unit_leak" '#!/bin/sh' 'echo "[==========] 1 test(s) run."' 'echo "[  PASSED  ] 1 test(s)."' \
	'echo "ERROR: LeakSanitizer: detected memory leaks"' 'exit 23'
fake "$work/unit_ok" '#!/bin/sh' 'echo "[==========] 2 test(s) run."' 'echo "[  PASSED  ] 2 test(s)."'
fake "$work/fuzz_silent.sh" 'echo "fuzz: clang not found"' 'exit 2'
fake "$work/fuzz_ok.sh" 'echo "ok - fuzz_image: 5 runs, no crash"'

check "run.sh exits 1 when a script stops early, lacks a plan or miscounts" 1 \
	runner "$work/bad" "$work/fuzz_silent.sh" "$work/unit_cut" "$work/unit_leak" "$work/unit_ok"
expect "a script that exits after 1 of 3 planned checks is named" \
	"^FAILED: test_early.sh: exited 3; planned 3, ran 1$"
expect "a script without a plan is named" "^FAILED: test_noplan.sh: printed no plan (1\.\.N), ran 2$"
expect "a script that runs 3 checks of 2 planned is named" "^FAILED: test_count.sh: planned 2, ran 3$"
grep -q 'test_good' "$out" && { echo "not ok - a good script (plan last) was named"; sed 's/^/#   /' "$out"; } ||
	echo "ok - a good script with its plan last is not named"
expect "a cmocka program without its summary is named" \
	"^FAILED: $work/unit_cut: exited 0 without cmocka's \"\[==========\] N test(s) run.\" line$"
expect "a cmocka program that exits non-zero after its summary is named" \
	"^FAILED: $work/unit_leak: exited 23 without a cmocka verdict"
expect "a fuzz smoke without a verdict is named" "^FAILED: fuzz smoke: exited 2 and printed no verdict$"
last=$(tail -n 1 "$out")
[ "$last" = "10 passed, 7 failed" ] && echo "ok - the closing line counts every check and problem" ||
	{ echo "not ok - closing line: $last"; sed 's/^/#   /' "$out"; }

check "run.sh exits 0 when every script runs its plan" 0 runner "$work/good" "$work/fuzz_ok.sh" "$work/unit_ok"
last=$(tail -n 1 "$out")
[ "$last" = "6 passed, 0 failed" ] && echo "ok - and closes with \"6 passed, 0 failed\"" ||
	{ echo "not ok - closing line: $last"; sed 's/^/#   /' "$out"; }

check "a scripts directory without test_*.sh fails" 1 runner "$work/empty" ""
expect "naming the directory" "^FAILED: $work/empty: no test_\*.sh scripts found$"

check "the self-test refuses to run inside itself" 2 env SM120_RUNNER_SELFTEST=1 sh "$0"

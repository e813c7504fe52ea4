#!/bin/sh
# test_version.sh - `sm120 --version` and `sm120 version`: one line, the
# tool's version.  Prints "ok - ..." / "not ok - ...".
set -u
echo 1..7 # plan: the number of checks below
B=${SM120_BUILD:-build}
sm120=$B/sm120
work=$(mktemp -d)
out=$work/out
trap 'rm -rf "$work"' EXIT
. tests/scripts/lib.sh

check "sm120 --version exits 0" 0 "$sm120" --version
expect "and prints the version" '^sm120 [0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*'
[ "$(grep -c . "$out")" = 1 ] && echo "ok - on one line" || { echo "not ok - more than one line"; sed 's/^/#   /' "$out"; }
cp "$out" "$work/dashed"
check "sm120 version exits 0" 0 "$sm120" version
cmp -s "$out" "$work/dashed" && echo "ok - and prints the same" ||
	{ echo "not ok - sm120 version differs from sm120 --version"; sed 's/^/#   /' "$out" "$work/dashed"; }
check "sm120 version with an argument exits 2" 2 "$sm120" version extra
check "sm120 help lists it" 0 sh -c "'$sm120' help | grep -q '^  version  '"

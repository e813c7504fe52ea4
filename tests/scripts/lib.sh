# lib.sh - helpers the command-line test scripts source (not a test itself).
# The sourcing script sets $out: the file each checked command's output goes to.
# Each test_*.sh also prints its TAP plan "1..N", N being the number of
# ok/not ok lines it prints; tests/run.sh fails a script whose count differs.

# check DESCRIPTION EXPECTED_EXIT COMMAND...: run COMMAND, compare its exit status
check() {
	desc=$1 want=$2
	shift 2
	"$@" >"$out" 2>&1
	got=$?
	if [ "$got" -eq "$want" ]; then
		echo "ok - $desc"
	else
		echo "not ok - $desc (exit $got, expected $want)"
		sed 's/^/#   /' "$out"
	fi
}

# expect DESCRIPTION PATTERN: the last checked command's output matches PATTERN (grep BRE)
expect() {
	if grep -q -- "$2" "$out"; then echo "ok - $1"; else
		echo "not ok - $1 (no '$2' in output)"
		sed 's/^/#   /' "$out"
	fi
}

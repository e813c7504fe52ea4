# step.sh - sourced by the GPU reroute suites (reroute_gpu.sh, moe_reroute_gpu.sh).
#
# step NAME OUT CMD... - run CMD with its output in OUT; pass its TAP and
# comment lines through, and the shim's stderr lines as comments; a nonzero
# exit is a failure of its own, shown with the end of the output.
step() {
	name=$1 out=$2
	shift 2
	"$@" >"$out" 2>&1
	rc=$?
	grep -E '^(ok |not ok|# )' "$out"
	grep '^sm120shim:' "$out" | sort -u | head -n 4 | sed 's/^/# /'
	if [ "$rc" != 0 ]; then
		echo "not ok - $name exited $rc"
		grep -vE '^(ok |not ok|# )' "$out" | tail -n 15 | sed 's/^/#   /'
	fi
	return "$rc"
}

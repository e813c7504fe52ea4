# parted.awk - whether two `sm120 ref run --check-cpu` outputs (the files
# PLAIN and RR: awk -f parted.awk PLAIN RR) generated the same tokens, or
# tokens that part only at or after the step (1-based) where one of them left
# the CPU backend's tokens at a near tie: a CPU top-2 margin there under that
# run's own largest logit difference against the CPU (its rounding may pick
# either token, and the rows after it are compared with nothing).  Reads the
# "generated:" line and the "against the cpu backend" line that cmd_ref.c's
# check prints.  Prints why; exits 0 for yes, 1 for no (or a run without
# tokens).  Used by engine_gpu.sh, tested by tests/scripts/test_parted.sh.
function cpu_tie(line,   i, n, f, s, m, d) {
	n = split(line, f, " ")
	s = -1
	for (i = 1; i < n; i++) {
		if (f[i] == "difference|") d = f[i + 1] + 0
		if (f[i] == "step") s = f[i + 1] + 0
		if (f[i] == "there") m = f[i + 1] + 0
	}
	return s > 0 && m < d ? s : -1
}
FNR == 1 { file++ }
/generated:/ { sub(/.*generated: */, ""); tok[file] = $0 }
/against the cpu backend/ { tie[file] = cpu_tie($0) }
END {
	if (tok[1] == "" || tok[2] == "") { print "no tokens"; exit 1 }
	if (tok[1] == tok[2]) { print "equal"; exit 0 }
	n = split(tok[1], a, " "); split(tok[2], b, " ")
	for (d = 1; d <= n && a[d] == b[d]; d++)
		;
	for (r = 1; r <= 2; r++)
		if (tie[r] > 0 && d >= tie[r]) {
			printf "part at step %d, after a near tie with the cpu at step %d\n", d, tie[r]
			exit 0
		}
	printf "part at step %d, not after a near tie with the cpu\n", d
	exit 1
}

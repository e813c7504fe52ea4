# oracle_suite.sh - sourced by the single-kernel oracle suites
# (oracle_context.sh, oracle_lightning.sh, oracle_inkling.sh): their
# common setup (env.sh) and their one shape, oracle_suite.
. tests/gpu/env.sh   # $B, $sm120, $SM120_ORACLE, $work (one Triton cache)
. tests/gpu/step.sh   # step NAME OUT CMD...

# oracle_suite WHAT PY LOGPY RUNARGS FILE... - each package FILE (relative to
# $SM120_ORACLE) present, else one "not ok" naming the fetch command and
# return 0; then `PY run OUT RUNARGS` without the shim and under `sm120 run
# --mode reroute --target sm120` (its JSON log in the work directory), `PY
# check` of the two outputs and `LOGPY logcheck` of the shim's log, each a
# step (step.sh) named after WHAT.  RUNARGS is split on spaces ("" for none).
oracle_suite() {
	what=$1 py=$2 logpy=$3 runargs=$4
	shift 4
	for f in "$@"; do
		if [ ! -f "$SM120_ORACLE/$f" ]; then
			echo "not ok - $SM120_ORACLE/$f is missing: run sh tests/oracle/fetch.sh $SM120_ORACLE"
			return 0
		fi
	done
	step "$what without the shim" "$work/plain.out" python3 "$py" run "$work/plain.pt" $runargs
	step "$what under sm120 run --mode reroute --target sm120" "$work/shim.out" \
		"$sm120" run --mode reroute --target sm120 --log "$work/shim.%p.jsonl" -- \
		python3 "$py" run "$work/shim.pt" $runargs
	step "check $what" "$work/check.out" python3 "$py" check "$work/plain.pt" "$work/shim.pt"
	step "the shim's log of $what" "$work/log.out" \
		python3 "$logpy" logcheck "$work/shim.pt.json" "$work"/shim.*.jsonl
}

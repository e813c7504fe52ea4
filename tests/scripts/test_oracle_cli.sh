#!/bin/sh
# test_oracle_cli.sh - the frameworks' own kernels, compiled by Triton for
# sm_120 and sm_90 without a GPU, through the shim's decision: for every
# case of tests/oracle/launches.py (the framework's host code run on stand-in
# tensors, its launches caught at Triton's JIT), the cubin's parameter list
# (read by sm120 scan), its shared memory, grid, block and argument values go
# to `sm120 route` as the shim would log them, and the rule and bundled
# kernel chosen must be the expected ones (a launch that fits must pass),
# and a refusal must give the expected reason.  Each event carries what
# Triton compiled into the kernel ("compiled", the Python hook's describe()),
# as the shim's log does under the hook; replayed without it (a process
# without the hook), every case that does not depend on it must decide the
# same.
# A framework release that changes a signature then fails here, not in a
# user's process.  $SM120_ORACLE_GEN names another generator of cases in
# launches.py's format (tests/scripts/test_context_cli.sh).  Needs the packages `make oracle` fetches and the Triton
# venv make test installs; without them every check fails, naming the step.
set -u
B=${SM120_BUILD:-build}
py=$B/oracle-venv/bin/python3
gen=${SM120_ORACLE_GEN:-tests/oracle/launches.py}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
planned=0

for arch in 120 90; do
	mkdir -p "$work/$arch"
	planned=$((planned + 1))
	if SM120_ORACLE="$B/oracle" SM120_ORACLE_ARCH=$arch "$py" "$gen" \
		"$work/$arch" >"$work/$arch.gen" 2>&1; then
		echo "ok - sm_$arch: Triton compiled the frameworks' kernels from their released packages"
		sed 's/^# /# sm_'$arch': /' "$work/$arch.gen" | grep '^#'
	else
		echo "not ok - sm_$arch: $gen failed (make oracle fetches the packages)"
		tail -n 5 "$work/$arch.gen" | sed 's/^/#   /'
		continue
	fi
	# The cubins' parameter sizes into the events, then the shim's decision.
	for log in "$work/$arch"/*.jsonl; do
		case=$(basename "$log" .jsonl)
		python3 - "$B/sm120" "$work/$arch" "$case" <<'PY' >>"$work/$arch/all.jsonl"
import json, subprocess, sys
sm120, d, case = sys.argv[1:4]
for line in open(f"{d}/{case}.jsonl"):
    e = json.loads(line)
    scan = subprocess.run([sm120, "scan", "--json", f"{d}/{case}.{e['kernel']}.cubin"],
                          capture_output=True, text=True).stdout
    k = [json.loads(l) for l in scan.splitlines() if '"type":"kernel"' in l][0]
    e["param_sizes"] = [p["size"] for p in k["params"]]
    e["static_smem"] = k["static_smem"]
    e["case"] = case
    print(json.dumps(e))
PY
	done
	"$B/sm120" route --json --target sm120 "$work/$arch/all.jsonl" >"$work/$arch/route" 2>&1
	# The same events as a process without the Python hook logs them.
	python3 -c 'import json, sys
for l in sys.stdin:
    e = json.loads(l); e.pop("compiled", None); print(json.dumps(e))' \
		<"$work/$arch/all.jsonl" >"$work/$arch/bare.jsonl"
	"$B/sm120" route --json --target sm120 "$work/$arch/bare.jsonl" >"$work/$arch/bare" 2>&1
	n=$(wc -l <"$work/$arch/expect.tsv")
	planned=$((planned + n + 1))
	python3 - "$work/$arch" "$arch" <<'PY'
import json, sys
d, arch = sys.argv[1:3]
events = [json.loads(l) for l in open(f"{d}/all.jsonl")]
out = [l for l in open(f"{d}/route")]
decisions = [json.loads(l) for l in out if l.startswith("{")]
bare = [json.loads(l) for l in open(f"{d}/bare") if l.startswith("{")]
facts_decide = set()
for line in open(f"{d}/expect.tsv"):
    case, kernel, rule, bundled, text, facts = (line.rstrip("\n").split("\t") + ["", "0"])[:6]
    if facts == "1":
        facts_decide.add(case)
    got = [(e, r) for e, r in zip(events, decisions) if e["case"] == case and e["kernel"] == kernel]
    want = {"-": "pass", "!": "refuse"}.get(rule, f"reroute by {rule} to {bundled}")
    seen = sorted({r["decision"] + (f" by {r['rule']} to {r['rerouted_to']}" if "rule" in r else "")
                   for _, r in got})
    why = sorted({r["reason"] for _, r in got if "reason" in r})
    good = (len(decisions) == len(events) and bool(got) and seen == [want] and
            all(text in r.get("reason", "") for _, r in got))
    smem = sorted({e["dynamic_smem"] for e, _ in got})
    print(f"{'ok' if good else 'not ok'} - sm_{arch} {case}: {kernel} ({smem} B, {len(got)} launches): "
          f"{want}" + (f" ({why[0]})" if why and good else "") + ("" if good else f"; got {seen} {why}"))
key = lambda r: (r["decision"], r.get("rule"), r.get("rerouted_to"))
differ = sorted({e["case"] for e, r, b in zip(events, decisions, bare)
                 if e["case"] not in facts_decide and key(r) != key(b)})
kept = len({e["case"] for e in events} - facts_decide)
print(f"{'ok' if len(bare) == len(events) and not differ else 'not ok'} - sm_{arch}: the {kept} "
      f"cases that do not depend on the compiled facts decide the same without them"
      + (f"; differ: {differ}" if differ else ""))
PY
done
echo "1..$planned"

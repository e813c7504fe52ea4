#!/bin/sh
# test_report.sh - `sm120 report` on hand-written shim logs of two processes:
# row order, counts, the load and summary lines, bad lines, exit codes 0/1/2
# and --json.  Prints "ok - ..." / "not ok - ..." per check.
set -u
echo 1..22 # plan: the number of checks below
B=${SM120_BUILD:-build}
sm120=$B/sm120
work=$(mktemp -d)
out=$work/out
trap 'rm -rf "$work"' EXIT

. tests/scripts/lib.sh

# A C++ kernel name of 5000 bytes: longer than any fixed line buffer.
long="_ZN7cutlass13device_kernelINS_4gemm6kernel$(printf '%05000d' 0 | tr 0 X)_tail_of_it"
ev() { # ev PID EVENT ACTION KERNEL STATIC DYNAMIC: one log line as the shim writes it
	printf '{"pid":%s,"event":"%s","action":"%s","kernel":"%s",' "$1" "$2" "$3" "$4"
	printf '"via":"cuLaunchKernel","target":"sm120","mode":"enforce",'
	printf '"static_smem":%s,"dynamic_smem":%s,"limit":101376}\n' "$5" "$6"
}
{
	echo '{"pid":101,"event":"load","action":"pass","kernels":3,"origin":"/opt/lib/libattn.so"}'
	ev 101 set_attribute refuse _fwd_kernel 0 232448
	ev 101 launch refuse _fwd_kernel 0 106496
	ev 101 launch pass small_kernel 1024 4096
	echo '{"pid":101,"event":"launch","kernel":"truncated_by_a_crash",'
	ev 101 launch log "$long" 48000 60000
	ev 101 launch refuse tie_a 0 120000
} >"$work/rank0.jsonl"
{
	ev 202 launch refuse _fwd_kernel 0 106496
	ev 202 launch refuse "$long" 48000 60000
	ev 202 launch refuse tie_b 0 120000
	ev 202 launch refuse tie_b 0 120000
	echo '{"pid":202,"action":"refuse","kernel":"no_event_key"}'
} >"$work/rank1.jsonl"
grep -v -e truncated_by_a_crash -e no_event_key "$work/rank0.jsonl" "$work/rank1.jsonl" -h \
	>"$work/clean.jsonl"
ev 303 launch pass small_kernel 1024 4096 >"$work/fits.jsonl"

check "two rank logs with bad lines and kernels over the limit exit 2 (input error wins)" 2 \
	"$sm120" report "$work/rank0.jsonl" "$work/rank1.jsonl"
expect "a truncated line is named by file and line" \
	"sm120 report: $work/rank0.jsonl:5: not a shim log line (invalid JSON"
expect "a line without an event is named by file and line" \
	"sm120 report: $work/rank1.jsonl:5: not a shim log line (no \"event\" string)"
rows=$(awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ {print $NF}' "$out" | tr '\n' ' ')
case $rows in
"_fwd_kernel tie_b tie_a _ZN7cutlass"*"...XXX"*"_tail_of_it small_kernel ")
	echo "ok - rows worst first: most bytes, then most events (tie_b before tie_a)" ;;
*) echo "not ok - row order: $rows"; sed 's/^/#   /' "$out" ;; esac
expect "_fwd_kernel: 232448 B, 131072 over 101376, 2 launches, 3 events, 3 refused, 2 procs" \
	"^ *232448 *101376 *131072 *2 *3 *3 *0 *0 *0 *2  sm120 *_fwd_kernel$"
expect "the long kernel: 108000 B (static + dynamic), 1 refused and 1 logged, 2 processes" \
	"^ *108000 *101376 *6624 *2 *2 *1 *1 *0 *0 *2  sm120 *_ZN7cutlass"
expect "a kernel under the limit is listed with nothing over" \
	"^ *5120 *101376 *0 *1 *1 *0 *0 *0 *0 *1  sm120 *small_kernel$"
width=$(grep '_ZN7cutlass' "$out" | awk '{print length($NF)}')
[ "$width" -le 72 ] && echo "ok - the 5 KB kernel name is cut to $width columns in the table" ||
	{ echo "not ok - long name is $width columns wide"; }
expect "module loads are counted apart" "^1 module load (3 kernels) in 1 process$"
expect "the closing line counts kernels over the limit, processes and files" \
	"^4 kernels over the sm120 limit in 2 processes (2 log files)$"

check "the same events without the bad lines exit 1 (kernels over the limit)" 1 \
	"$sm120" report "$work/clean.jsonl"
expect "one file holding two processes" \
	"^4 kernels over the sm120 limit in 2 processes (1 log file)$"
check "a log whose kernels all fit exits 0" 0 "$sm120" report "$work/fits.jsonl"
expect "and says none is over" "^0 kernels over the sm120 limit in 0 processes (1 log file)$"
check "an unreadable file exits 2 and the rest is still read" 2 \
	"$sm120" report "$work/fits.jsonl" "$work/missing.jsonl"
expect "the error names the file" "sm120 report: cannot read $work/missing.jsonl: No such file"
expect "the readable file is summarised" "small_kernel$"
check "no log file is a usage error" 2 "$sm120" report
expect "usage is printed" "usage: sm120 report"
check "standard input as -" 1 sh -c "\"$sm120\" report - <\"$work/clean.jsonl\""

"$sm120" report --json "$work/rank0.jsonl" "$work/rank1.jsonl" >"$out" 2>"$work/err"
rc=$?
if [ "$rc" -eq 2 ] && python3 - "$out" "$long" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
k = [r for r in rows if r["type"] == "kernel"]
s = [r for r in rows if r["type"] == "summary"]
assert [r["kernel"] for r in k] == ["_fwd_kernel", "tie_b", "tie_a", sys.argv[2], "small_kernel"], \
    [r["kernel"][:40] for r in k]
f = k[0]
assert (f["bytes"], f["limit"], f["over"], f["launches"], f["set_attribute"], f["refused"],
        f["processes"], f["over_limit"]) == (232448, 101376, 131072, 2, 1, 3, 2, True), f
assert f["via"] == "cuLaunchKernel" and f["target"] == "sm120", f
assert k[3]["logged"] == 1 and k[3]["refused"] == 1 and k[3]["static_smem"] == 48000, k[3]
assert k[4]["over_limit"] is False and k[4]["over"] == 0 and k[4]["passed"] == 1, k[4]
assert len(s) == 1 and rows[-1] is s[0], s
s = s[0]
assert (s["kernels"], s["kernels_over"], s["processes"], s["processes_over"], s["loads"],
        s["loaded_kernels"], s["load_processes"], s["files"], s["bad_lines"]) == \
       (5, 4, 2, 2, 1, 3, 1, 2, 2), s
PY
then echo "ok - --json: rows worst first with the full 5 KB name and counts, then a summary"
else echo "not ok - --json output (exit $rc)"; sed 's/^/#   /' "$out" "$work/err"; fi
grep -q "^4 kernels over the sm120 limit" "$work/err" &&
	echo "ok - --json keeps stdout for JSON: the text summary goes to stderr" ||
	{ echo "not ok - --json summary on stderr"; sed 's/^/#   /' "$work/err"; }

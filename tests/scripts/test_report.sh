#!/bin/sh
# test_report.sh - `sm120 report` on hand-written shim logs of two processes:
# row order by what launches need (not what attribute sets allowed), counts,
# the load and summary lines, bad lines, exit codes 0/1/2 and --json; then
# kernels only allowed over the limit and library kernels, listed apart and
# not counted as failures.  Prints "ok - ..." / "not ok - ..." per check.
set -u
echo 1..35 # plan: the number of checks below
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
"tie_b tie_a _ZN7cutlass"*"...XXX"*"_tail_of_it _fwd_kernel small_kernel ")
	echo "ok - rows worst first: most bytes a launch needed, then most events (tie_b before tie_a)" ;;
*) echo "not ok - row order: $rows"; sed 's/^/#   /' "$out" ;; esac
expect "_fwd_kernel: its launches need 106496 B (its attribute set of 232448 is no need), 5120 over, 2 launches, 3 events, 3 refused, 2 procs" \
	"^ *106496 *101376 *5120 *2 *3 *3 *0 *0 *0 *2  sm120 *_fwd_kernel$"
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
assert [r["kernel"] for r in k] == ["tie_b", "tie_a", sys.argv[2], "_fwd_kernel", "small_kernel"], \
    [r["kernel"][:40] for r in k]
f = k[3]
assert (f["bytes"], f["allowed"], f["limit"], f["over"], f["launches"], f["set_attribute"],
        f["refused"], f["processes"], f["over_limit"]) == \
       (106496, 232448, 101376, 5120, 2, 1, 3, 2, True), f
assert f["via"] == "cuLaunchKernel" and f["target"] == "sm120", f
assert k[2]["logged"] == 1 and k[2]["refused"] == 1 and k[2]["static_smem"] == 48000, k[2]
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

# What a kernel needs, not what it was allowed: Triton sets the whole opt-in
# (232448 on an H200, under diagnose) for fused_moe_kernel, whose launches
# need 163840.
evx() { # evx PID EVENT ACTION KERNEL BYTES [EVIDENCE]: a diagnose-mode line
	printf '{"pid":%s,"event":"%s","action":"%s","kernel":"%s","via":"cuLaunchKernel",' "$1" "$2" "$3" "$4"
	[ -n "${6:-}" ] && printf '"evidence":"%s","device":"sm_90","image":"fatbin",' "$6"
	printf '"target":"sm120","mode":"diagnose","static_smem":0,"dynamic_smem":%s,"limit":101376}\n' "$5"
}
{
	evx 11 set_attribute log fused_moe_kernel 232448
	evx 11 launch log fused_moe_kernel 163840
	evx 11 launch log fused_moe_kernel 147456
} >"$work/need.jsonl"
check "a kernel launched over the limit exits 1" 1 "$sm120" report "$work/need.jsonl"
expect "fused_moe_kernel is ranked by the 163840 B its launches need, not the 232448 B it was allowed" \
	"^ *163840 *101376 *62464 *2 *3 *0 *3 *0 *0 *1  sm120 *fused_moe_kernel$"
! grep -q 232448 "$out" && echo "ok - the whole opt-in it was allowed appears nowhere in the table" ||
	{ echo "not ok - 232448 in the report"; sed 's/^/#   /' "$out"; }
lib="library: its image libcublasLt.so.13+0x10 is a fatbin that also holds sm_120"
{
	evx 12 set_attribute library nvjet_kernel 213268 "$lib"
	evx 12 launch library nvjet_kernel 213268 "$lib"
	evx 12 set_attribute log triton_kernel 232448
	evx 13 set_attribute log triton_kernel 200000
	evx 12 launch log fits_kernel 0
} >"$work/apart.jsonl"
check "kernels only allowed over the limit and library kernels are no failure: exit 0" 0 \
	"$sm120" report "$work/apart.jsonl"
expect "the allowed-only kernels have their own table" \
	"^Allowed more than the limit by an attribute set, never launched over it"
expect "triton_kernel: allowed 232448 at most, 2 sets logged, 2 processes" \
	"^ *232448 *101376 *2 *0 *2 *0 *2  sm120 *triton_kernel$"
expect "the library kernels have theirs" "^Library kernels, chosen by a library for the device's architecture"
expect "nvjet_kernel: needs 213268 (a launch), allowed 213268, 1 launch of 2 events" \
	"^ *213268 *213268 *101376 *1 *2 *1  sm120 *nvjet_kernel$"
expect "with the evidence the shim logged" "^ *evidence: $lib$"
expect "the closing lines: nothing over the limit" "^0 kernels over the sm120 limit in 0 processes (1 log file)$"
expect "... one kernel only allowed over it" \
	"^1 kernel allowed more than the sm120 limit by an attribute set, never launched over it (not failures)$"
expect "... and one library kernel" \
	"^1 library kernel chosen for the device's architecture, passed unchanged (not failures)$"
"$sm120" report --json "$work/apart.jsonl" >"$out" 2>"$work/err"
rc=$?
if [ "$rc" -eq 0 ] && python3 - "$out" "$lib" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {(r["type"], r.get("kernel")): r for r in rows}
assert [r["type"] for r in rows] == ["kernel", "allowed", "library", "summary"], rows
a = by["allowed", "triton_kernel"]
assert (a["allowed"], a["set_attribute"], a["logged"], a["processes"]) == (232448, 2, 2, 2), a
l = by["library", "nvjet_kernel"]
assert (l["needs"], l["allowed"], l["launches"], l["events"], l["limit"]) == \
       (213268, 213268, 1, 2, 101376), l
assert l["evidence"] == sys.argv[2], l
s = rows[-1]
assert (s["kernels"], s["kernels_over"], s["kernels_allowed_only"], s["library_kernels"],
        s["processes_over"]) == (3, 0, 1, 1, 0), s
PY
then echo "ok - --json: rows of type allowed and library, and their counts in the summary"
else echo "not ok - --json apart (exit $rc)"; sed 's/^/#   /' "$out" "$work/err"; fi

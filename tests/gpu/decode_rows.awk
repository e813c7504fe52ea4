# decode_rows.awk - what bench_proxy.awk and bench_own.awk share, read before either
# (awk -f decode_rows.awk -f bench_own.awk): gpu_bench_moe_decode's columns by name from its
# header line (col[name] = field), and of a case line whether it is one (case_line), the plan's
# kernel (plan_kernel: "d" and its decode tile, or "rows" where it keeps the row tile) and that
# kernel's fraction of the floor (plan_fraction: new, or old_pad, the row tile padded).
$1 == "model" {
	for (i = 1; i <= NF; i++)
		col[$i] = i
	next
}
function case_line() { return $1 == "kimi" || $1 == "glm" }
function plan_kernel() { return $(col["tn"]) ? "d" $(col["tn"]) : "rows" }
function plan_fraction() { return $(col["tn"]) ? $(col["new"]) : $(col["old_pad"]) }

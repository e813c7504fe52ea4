# bench_own.awk - bench.sh's "what holds each row" table, from the output of
# gpu_bench_moe_decode: for each row the plan's kernel (its decode tile, or "rows": the row
# tile kept, timed padded), its fraction of the floor with the weights gathered from DRAM (new,
# or old_pad for a row tile), the same kernel with every expert's weights and scales in the L2
# (own: what its own work allows), the traffic limit (limit), and which of own and limit is
# lower: "kernel" (on this GPU the kernel's own work holds the row below what the memory
# allows) or "memory".  Then, per quantization, how many rows each holds.  The columns are
# found by name in the header line (decode_rows.awk, read first); output without an own column
# prints no row and exits 1.
BEGIN {
	print "What holds each row on this GPU, fractions of the floor: the plan's kernel with its " \
	      "weights gathered from DRAM, the same with every expert's weights in the L2 (own: its " \
	      "own work), the traffic limit, and the lower of those two"
	printf "%-5s %-6s %-11s %4s %-8s %8s %6s %6s  %s\n", "model", "half", "quant", "M", "kernel",
	       "gathered", "own", "limit", "held by"
}
/^# .* SMs; streaming read / {
	for (i = 1; i < NF; i++) {
		if ($(i + 1) ~ /^SMs/)
			sms = $i
		if ($(i + 1) == "GB/s")
			gbs = $i
	}
}
case_line() && ("own" in col) {
	own = $(col["own"])
	lim = $(col["limit"])
	held = own < lim ? "kernel" : "memory"
	printf "%-5s %-6s %-11s %4d %-8s %8.2f %6.2f %6.2f  %s\n", $1, $2, $3, $(col["M"]), plan_kernel(),
	       plan_fraction(), own, lim, held
	if (!($3 in seen))
		order[++nq] = $3
	seen[$3]++
	if (held == "kernel")
		kernel[$3]++
	rows++
}
END {
	if (!rows) {
		print "bench_own.awk: no row with an own column: run a gpu_bench_moe_decode that times it"
		exit 1
	}
	for (i = 1; i <= nq; i++)
		printf "%s: %d of %d rows held by the kernel\n", order[i], kernel[order[i]], seen[order[i]]
	print "kernel: with its weights in the L2 the kernel is still below the traffic limit, so its " \
	      "instructions, not the DRAM, hold the row here (FP8's on sm_90 emulate the FP8 MMA: the " \
	      "proxy above)."
	if (sms > 0 && gbs > 0)
		printf "This GPU streams %.1f GB/s an SM (%d SMs, %d GB/s); an RTX PRO 6000 9.5 (188 SMs, " \
		       "1792 GB/s), so there each SM has %.1f times the time per weight byte: a row held by " \
		       "the kernel here need not be there.\n", gbs / sms, sms, gbs, gbs / sms / 9.5
}

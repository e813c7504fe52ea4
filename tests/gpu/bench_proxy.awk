# bench_proxy.awk - FP8 rows at SM120's MMA count (bench.sh prints its decode rows;
# bench_moe.sh's table reads every row's pair: bench_moe_table.py), from the output of
# gpu_bench_moe_decode run with fp8_mma_proxy.fatbin as its ALT: for each row the plan's
# kernel (its decode tile, or "rows": the row tile kept, timed padded), its fraction of the
# floor as built for sm_90 (new, or old_pad for a row tile), the proxy's (alt) and their
# ratio.  The columns are found by name in the header line (decode_rows.awk, read first);
# output without an alt column (no ALT given) prints no row and exits 1.
BEGIN {
	print "FP8 decode rows, fraction of the floor: the plan's kernel as built for sm_90 " \
	      "(emulated FP8 MMA), and with one MMA per FP8 MMA (SM120's count; its sums are wrong)"
	printf "%-5s %-6s %-11s %4s %-8s %8s %6s %6s\n", "model", "half", "quant", "M", "kernel",
	       "emulated", "proxy", "ratio"
}
case_line() && ("alt" in col) {
	emu = plan_fraction()
	px = $(col["alt"])
	printf "%-5s %-6s %-11s %4d %-8s %8.2f %6.2f %6.2f\n", $1, $2, $3, $(col["M"]), plan_kernel(), emu,
	       px, (emu > 0 ? px / emu : 0)
	rows++
}
END {
	if (!rows) {
		print "bench_proxy.awk: no row with an alt column: run gpu_bench_moe_decode with " \
		      "build/test/fp8_mma_proxy.fatbin as its second argument"
		exit 1
	}
	print "The proxy stands for SM120 where a row is bound by its weight reads (these " \
	      "batches): it keeps sm_90's instruction count but for the MMA, not its MMA rate."
}

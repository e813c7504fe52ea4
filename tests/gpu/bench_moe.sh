#!/bin/sh
# bench_moe.sh - the fused-MoE part of `make bench-gpu` (tests/gpu/bench.sh
# runs it after the attention part), one GPU, one run: the gate/up and the
# down GEMM of Kimi K2 and GLM-4.7 at TP8 (tests/gpu/bench_moe.py: SGLang
# 0.5.9's own Triton kernels, from its package in $SM120_ORACLE), batches
# 1, 16, 512 and 4096, bf16, FP8 (per tensor, per channel, 128x128 block)
# and INT4 W4A16 g32, on the bundled kernels (the Hopper configuration
# rerouted under `sm120 run --mode reroute --target sm120`), the best
# SM120-fitting Triton configuration (searched without wgmma: the quick grid
# of bench_moe.py unless MOE_BENCH_GRID=full), the Hopper configuration
# itself (Triton with wgmma, over SM120's limit) and torch._grouped_mm
# (bf16), printed as the table: each as a fraction of the floor,
# max(flop / mma.sync rate, weight bytes read once / read bandwidth), both
# measured here (bench_peaks).  Column "limit", measured in the same run,
# is the most of the floor this GPU allows a row: floor / max(the time of
# bench_peaks.cu's stream_rw moving the row's traffic alone (its weights and
# activations read once, its output written once: bench_moe.py limit, timed
# as the kernels are), flop / mma.sync rate of the dtype); a row whose goal
# (a fraction of the floor) is above it reports "limit x < goal" (issue
# 18: met, or the limit that stops the row; read on the plain figures, the
# rows whose padded figures meet other parts listed after the table).  The
# bundled kernels and the
# SM120 Triton configurations are timed twice: plain, and padded
# (SM120SHIM_EMULATE_OCCUPANCY=1, target sm120: this GPU keeps no more
# blocks of a launch per SM than SM120 would; the padded SM120 figure times
# the plain search's fastest configurations again rather than searching
# twice); a row whose plain time is over 1.25 times its padded one (padding
# only takes blocks away) is listed as a disturbed measurement to run again
# (H200: one GLM-4.7 row at one token once read 0.041 ms plain, 0.015 in
# the runs before and after).  Every figure is this GPU's (named in the
# output); FP8 rows do not stand for SM120 on sm_90, which has no FP8
# mma.sync: the rows bound by the MMA rate, and those whose kernel runs
# 1.05 times as fast or more with one MMA per FP8 MMA (fp8_mma_proxy.fatbin,
# timed in the same run), are marked.  MOE_BENCH_QUANT (default all five), MOE_BENCH_HALVES
# (gateup,down), MOE_BENCH_BATCHES (1,16,512,4096), MOE_BENCH_GRID
# (quick|full) narrow or widen the run; the defaults fit one 10-minute
# call on an H100 (with the Triton cache empty); MOE_BENCH_SMS (32; 0: none)
# the green context's SMs of the last table.  SM120_BUILD (default
# build) may be absolute: another build's shim, timed beside this one's.
set -u
B=${SM120_BUILD:-build}
case $B in /*) ;; *) B=$(pwd)/$B ;; esac
sm120=$B/sm120
q=${MOE_BENCH_QUANT:-bf16,fp8_tensor,fp8_channel,fp8_block,int4}
halves=${MOE_BENCH_HALVES:-gateup,down}
batches=${MOE_BENCH_BATCHES:-1,16,512,4096}
grid=${MOE_BENCH_GRID:-quick}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$work/triton}
# The frameworks' packages (tests/oracle/fetch.sh), whose kernels the
# benchmarks launch: an absolute path, as they run in tests/gpu.
oracle=${SM120_ORACLE:-$B/oracle}
case $oracle in /*) ;; *) oracle=$(pwd)/$oracle ;; esac
export SM120_ORACLE=$oracle
# The ceilings' kernels (bench_peaks.cu), also launched by bench_moe.py limit.
peaks=${SM120_PEAKS_CUBIN:-$B/test/bench_peaks.cubin}
case $peaks in /*) ;; *) peaks=$(pwd)/$peaks ;; esac
export SM120_PEAKS_CUBIN=$peaks
"$B/test/gpu_bench_peaks" "$peaks" >"$work/peaks" || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader -i 0 >"$work/device" 2>/dev/null || echo "this GPU" >"$work/device"
cd tests/gpu || exit 1
sel="--quant $q --halves $halves --batches $batches"
python3 bench_moe.py hopper $sel >"$work/hopper" || exit 1
python3 bench_moe.py sm120 $sel --grid "$grid" >"$work/sm120" || exit 1
SM120SHIM_EMULATE_OCCUPANCY=1 "$sm120" run --mode diagnose --target sm120 \
	--log "$work/pad_sm120.%p.jsonl" -- python3 bench_moe.py sm120 $sel \
	--retime "$work/sm120" >"$work/sm120_padded" 2>>"$work/padded.err" || exit 1
python3 bench_moe.py grouped_mm $sel >"$work/grouped_mm" || exit 1
python3 bench_moe.py limit $sel >"$work/limit" || exit 1
# FP8 rows at SM120's MMA count: sm_90 has no FP8 mma.sync, and the bundle's sm_90 code
# converts each FP8 MMA's operands and issues two f16 MMAs (primitives.cuh's mma_e4m3).  The
# plan's kernel of each FP8 row (gpu_bench_moe_decode, BLOCK_SIZE_M 128) beside the same
# kernel with one f16 MMA per FP8 MMA (fp8_mma_proxy.fatbin as its ALT: wrong sums, timed
# only), each row's pair as bench_proxy.awk gives it; the table's fp8px and its * mark come
# from their ratio.
fq=$(echo "$q" | tr ',' '\n' | grep '^fp8' | paste -sd, -)
if [ -n "$fq" ]; then
	case $halves in gateup | down) half=MOE_DECODE_HALF=$halves ;; *) half= ;; esac
	env MOE_DECODE_QUANT="$fq" MOE_DECODE_M="$batches" $half "$B/test/gpu_bench_moe_decode" "$peaks" \
		"$B/test/fp8_mma_proxy.fatbin" >"$work/proxy_run" || exit 1
	awk -f decode_rows.awk -f bench_proxy.awk "$work/proxy_run" >"$work/proxy" || exit 1
fi
for m in kimi:7168 glm:5120; do
	for pad in 0 1; do
		out=rerouted log=rr
		[ $pad = 1 ] && out=rerouted_padded log=rrpad
		SM120SHIM_EMULATE_OCCUPANCY=$pad "$sm120" run --mode reroute --target sm120 \
			--set top_k=8 --set hidden_size=${m#*:} --log "$work/$log.%p.jsonl" -- \
			python3 bench_moe.py rerouted $sel --models ${m%%:*} \
			>>"$work/$out" 2>>"$work/$out.err" || exit 1
	done
done
# Per SM against SM120's DRAM share: the rows up to 512 tokens again on a green
# context of MOE_BENCH_SMS SMs (default 32; 0: none), padded to SM120's blocks per
# SM: the bundled kernels, the SM120 Triton configurations the search kept, and
# stream_rw moving each row's traffic (the last table below).
gsms=${MOE_BENCH_SMS:-32}
gb=$(echo "$batches" | tr ',' '\n' | awk '$1 <= 512' | paste -sd, -)
if [ "$gsms" -gt 0 ] && [ -n "$gb" ]; then
	gsel="--quant $q --halves $halves --batches $gb"
	SM120_BENCH_SMS=$gsms SM120SHIM_EMULATE_OCCUPANCY=1 "$sm120" run --mode diagnose --target sm120 \
		--log "$work/gpad.%p.jsonl" -- python3 bench_moe.py sm120 $gsel --retime "$work/sm120" \
		>"$work/green_sm120" 2>>"$work/green.err" || exit 1
	SM120_BENCH_SMS=$gsms python3 bench_moe.py limit $gsel >"$work/green_limit" || exit 1
	for m in kimi:7168 glm:5120; do
		SM120_BENCH_SMS=$gsms SM120SHIM_EMULATE_OCCUPANCY=1 "$sm120" run --mode reroute --target sm120 \
			--set top_k=8 --set hidden_size=${m#*:} --log "$work/grr.%p.jsonl" -- \
			python3 bench_moe.py rerouted $gsel --models ${m%%:*} \
			>>"$work/green_rerouted" 2>>"$work/green.err" || exit 1
	done
fi
python3 bench_moe_table.py "$work"
rc=$?
# What the shim said about the padding (refused paddings, kernels it could not pad).
grep -h "EMULATE_OCCUPANCY\|padded to" "$work/padded.err" "$work/rerouted_padded.err" 2>/dev/null |
	sort -u | sed 's/^/note: /'
exit $rc

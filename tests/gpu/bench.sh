#!/bin/sh
# bench.sh - `make bench-gpu`, one run, one GPU:
#  1. shim overhead per launch: the empty-kernel launch loop with no shim and
#     with the shim in each mode, seven rounds interleaved, pinned to one CPU,
#     the median of each;
#  2. the measured ceilings (mma.sync bf16 rate, streaming read bandwidth);
#  3. each bundled attention kernel at Kimi K2 TP8 sizes against the Hopper
#     configuration it replaces (Triton with wgmma, and without: the SM120
#     instruction set) and against the configuration a user would pick
#     instead on SM120 (without wgmma), as ratios and as a fraction of the
#     ceiling: SGLang 0.5.14's extend and vLLM 0.33.0's decode kernels,
#     from their packages in $SM120_ORACLE (bench_attention.py).  Target
#     emulated as sm120; every figure is an H200 figure;
#  4. the fused-MoE benchmark (bench_moe.sh: issue 18's table, gate/up and
#     down, every quantization, as fractions of the floor, padded and
#     plain), its decode rows on 32 SMs against SM120's DRAM share per SM
#     (gpu_bench_moe_decode), what holds those rows here (the kernel's own
#     work or the memory: bench_own.awk), its FP8 decode rows at SM120's MMA count
#     (fp8_mma_proxy.fatbin), the reference engine (bench_engine.sh) and
#     the patch-versus-shim table (bench_patch.py).
set -u
B=${SM120_BUILD:-build}
SHIM=$(pwd)/$B/libsm120shim.so
bin=$B/test/gpu_bench_launch
out=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$out" "$out".* "$work"' EXIT
export TRITON_CACHE_DIR=$work/triton
# The frameworks' packages (tests/oracle/fetch.sh), whose kernels the
# benchmarks launch: an absolute path, as they run in tests/gpu.
oracle=${SM120_ORACLE:-$B/oracle}
case $oracle in /*) ;; *) oracle=$(pwd)/$oracle ;; esac
export SM120_ORACLE=$oracle
# Pinned to one CPU (when taskset exists) so that scheduling noise between
# processes, which is larger than the overhead measured, hits all modes alike.
pin=
command -v taskset >/dev/null 2>&1 && pin="taskset -c 1"
for round in 1 2 3 4 5 6 7; do
	for mode in none off diagnose enforce; do
		if [ $mode = none ]; then $pin "$bin" >>"$out.$mode" || exit 1
		else LD_PRELOAD=$SHIM SM120SHIM_MODE=$mode SM120SHIM_TARGET=sm120 $pin "$bin" >>"$out.$mode" || exit 1; fi
	done
done
python3 - "$out" <<'PY'
import sys
import statistics
rates = {}
for mode in ["none", "off", "diagnose", "enforce"]:
    for line in open(f"{sys.argv[1]}.{mode}"):
        api, rate = line.split()
        rates.setdefault((mode, api), []).append(float(rate))
best = {k: statistics.median(v) for k, v in rates.items()}
print("shim overhead per launch (empty kernel, launches/s: median of 7 interleaved processes, "
      "ratio to no shim)")
print(f"{'shim mode':<10} {'cuLaunchKernel/s':>17} {'ratio':>6} {'cuLaunchKernelEx/s':>19} {'ratio':>6}")
for mode in ["none", "off", "diagnose", "enforce"]:
    k, e = best[(mode, "cuLaunchKernel")], best[(mode, "cuLaunchKernelEx")]
    print(f"{mode:<10} {k:>17.0f} {k / best[('none', 'cuLaunchKernel')]:>6.3f} "
          f"{e:>19.0f} {e / best[('none', 'cuLaunchKernelEx')]:>6.3f}")
PY

echo
"$B/test/gpu_bench_peaks" "$B/test/bench_peaks.cubin" >"$work/peaks" || exit 1
(cd tests/gpu && python3 bench_attention.py hopper) >"$work/hopper" || exit 1
(cd tests/gpu && DISABLE_MMA_V3=1 python3 bench_attention.py hopper) >"$work/hopper_nowgmma" || exit 1
(cd tests/gpu && DISABLE_MMA_V3=1 python3 bench_attention.py sm120) >"$work/sm120" || exit 1
(cd tests/gpu && "$(dirname "$SHIM")/sm120" run --mode reroute --target sm120 \
	--set kv_cache_dtype=bf16 --set page_size=64 --log "$work/rr.%p.jsonl" -- \
	python3 bench_attention.py rerouted bf16) \
	>"$work/rerouted_bf16" 2>"$work/rerouted_bf16.err" || exit 1
(cd tests/gpu && "$(dirname "$SHIM")/sm120" run --mode reroute --target sm120 \
	--set kv_cache_dtype=fp8_e4m3 --set page_size=64 --log "$work/rr.%p.jsonl" -- \
	python3 bench_attention.py rerouted fp8_e4m3) \
	>"$work/rerouted_fp8" 2>"$work/rerouted_fp8.err" || exit 1
python3 - "$work" <<'PY'
import collections, glob, json, sys
w = sys.argv[1]
events = [json.loads(l) for f in glob.glob(f"{w}/rr.*.jsonl") for l in open(f)]
acts = collections.Counter((e.get("kernel"), e["action"]) for e in events if e["event"] == "launch")
print("launches in the rerouted runs:", dict(acts))
if any(a != "reroute" for _, a in acts) or not acts:
    print("WARNING: not every over-limit launch was rerouted; the 'bundled' column is not "
          "the bundled kernels alone")
peaks = dict(l.split() for l in open(f"{w}/peaks"))
mma, bw = float(peaks["mma_sync_bf16_tflops"]), float(peaks["read_gbps"])
print(f"ceilings: mma.sync bf16 {mma:.0f} TFLOP/s, streaming read {bw:.0f} GB/s (H200)")
def load(name):
    return {(r["kernel"], r["kv"], r["case"]): r for r in map(json.loads, open(f"{w}/{name}"))}
hop, hopn, sm, = load("hopper"), load("hopper_nowgmma"), load("sm120")
rr = load("rerouted_bf16")
rr.update(load("rerouted_fp8"))
print()
print("bundled kernel vs Triton (ms; ratio = Triton time / bundled time, > 1: bundled faster)")
print(f"{'kernel':<7} {'kv':<9} {'case':<15} {'bundled':>8} {'hopper':>8} {'ratio':>6} "
      f"{'hop-nowg':>8} {'ratio':>6} {'sm120':>8} {'ratio':>6} {'of ceiling':>10}")
for key in hop:
    b = rr[key]["ms"]
    h, hn, s = hop[key]["ms"], hopn[key]["ms"], sm[key]["ms"]
    frac = (rr[key]["tflops"] / mma) if key[0] == "extend" else (rr[key]["gbps"] / bw)
    print(f"{key[0]:<7} {key[1]:<9} {key[2]:<15} {b:>8.3f} {h:>8.3f} {h / b:>6.2f} "
          f"{hn:>8.3f} {hn / b:>6.2f} {s:>8.3f} {s / b:>6.2f} {frac:>10.2f}")
print()
print("decode called eagerly (ms per call, CPU launch costs included: Triton's launcher, and "
      "for 'bundled' the shim's reroute decision)")
for key in hop:
    if key[0] == "decode":
        print(f"{key[2]:<15} bundled {rr[key]['eager_ms']:.3f}  hopper {hop[key]['eager_ms']:.3f}  "
              f"sm120 {sm[key]['eager_ms']:.3f}")
print()
print("hopper: the configuration rerouted, native with wgmma; hop-nowg: the same without "
      "wgmma (SM120's instructions); sm120: what a user picks on SM120 (extend 32x32, "
      "decode 1 stage), without wgmma.  'of ceiling': the bundled kernel's TFLOP/s over the "
      "mma.sync rate (extend) or its KV bytes/s over the read bandwidth (decode).")
PY

echo
sh tests/gpu/bench_moe.sh || exit 1

echo
# The decode rows against SM120's DRAM share per SM: the plan's kernels on 32 SMs
# (a green context), as the weight bytes they stream per SM and second over an
# RTX 5090 SM's share of its DRAM (gpu_bench_moe_decode MOE_DECODE_SMS).
MOE_DECODE_SMS=32 MOE_DECODE_M=1,16,512 "$B/test/gpu_bench_moe_decode" "$B/test/bench_peaks.cubin" >"$work/green" ||
	exit 1
grep -v '^ok' "$work/green"

echo
# What holds those rows on this GPU: the same run's plan kernels with every expert's weights
# in the L2 (its "own" column: the kernel's own work) against the traffic limit, printed by
# bench_own.awk.
awk -f tests/gpu/decode_rows.awk -f tests/gpu/bench_own.awk "$work/green" || exit 1

echo
# FP8 decode rows at SM120's MMA count: sm_90 has no FP8 mma.sync, and the bundle's sm_90
# code converts each FP8 MMA's operands and issues two f16 MMAs (primitives.cuh's
# mma_e4m3).  The plan's kernel of each row beside the same kernel with one f16 MMA instead
# (fp8_mma_proxy.fatbin as gpu_bench_moe_decode's ALT: wrong sums, timed only), printed by
# bench_proxy.awk.
MOE_DECODE_QUANT=fp8_tensor,fp8_channel,fp8_block MOE_DECODE_M=1,16,64 "$B/test/gpu_bench_moe_decode" \
	"$B/test/bench_peaks.cubin" "$B/test/fp8_mma_proxy.fatbin" >"$work/proxy" || exit 1
awk -f tests/gpu/decode_rows.awk -f tests/gpu/bench_proxy.awk "$work/proxy" || exit 1

echo
# The reference engine at real dimensions, with and without the shim rerouting.
sh tests/gpu/bench_engine.sh "$B" || exit 1

echo
# Patch or shim: each kernel `sm120 patch` changes, the patched framework kernel
# against the shim's reroute of the unpatched one, side by side in one process.
python3 tests/gpu/bench_patch.py bench "$work/patch" || exit 1

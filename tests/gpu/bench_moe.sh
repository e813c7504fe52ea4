#!/bin/sh
# bench_moe.sh - the fused-MoE part of `make bench-gpu` (tests/gpu/bench.sh
# runs it after the attention part), one GPU, one run: the gate/up GEMM of
# Kimi K2 and GLM-4.7 at TP8 (tests/gpu/bench_moe.py) on the bundled kernels
# (the Hopper configuration rerouted under `sm120 run --mode reroute
# --target sm120`) against the Hopper configuration it replaces (Triton with
# wgmma, and without: SM120's instruction set), the best SM120-fitting Triton
# configuration (searched, without wgmma) and torch._grouped_mm (bf16), as
# ratios and as a fraction of the measured ceilings (mma.sync rate at large
# batches, weight-read bandwidth at small ones), and a roofline table: how
# close each is to max(compute, weight read) and whether the issue's goal
# (1.3x the best SM120 Triton) lies under that floor.  Every figure is an H200
# figure.  The bundled kernels and the SM120 Triton configurations are timed
# twice: plain, and padded (SM120SHIM_EMULATE_OCCUPANCY=1, target sm120: the
# H200 keeps no more blocks of a launch per SM than SM120 would; the padded
# SM120 figure times the plain search's fastest configurations again rather
# than searching twice).  MOE_BENCH_QUANT (default fp8_tensor,bf16,int4),
# MOE_BENCH_GRID (quick|full, default quick) narrow the run.
set -u
B=${SM120_BUILD:-build}
sm120=$(pwd)/$B/sm120
q=${MOE_BENCH_QUANT:-fp8_tensor,bf16,int4}
grid=${MOE_BENCH_GRID:-quick}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$work/triton}
"$B/test/gpu_bench_peaks" "$B/test/bench_peaks.cubin" >"$work/peaks" || exit 1
cd tests/gpu || exit 1
python3 bench_moe.py hopper --quant "$q" >"$work/hopper" || exit 1
DISABLE_MMA_V3=1 python3 bench_moe.py hopper --quant "$q" >"$work/hopper_nowgmma" || exit 1
python3 bench_moe.py sm120 --quant "$q" --grid "$grid" >"$work/sm120" || exit 1
SM120SHIM_EMULATE_OCCUPANCY=1 "$sm120" run --mode diagnose --target sm120 \
	--log "$work/pad_sm120.%p.jsonl" -- python3 bench_moe.py sm120 --quant "$q" \
	--retime "$work/sm120" >"$work/sm120_padded" 2>>"$work/padded.err" || exit 1
python3 bench_moe.py grouped_mm >"$work/grouped_mm" || exit 1
for m in kimi:7168 glm:5120; do
	for pad in 0 1; do
		out=rerouted log=rr
		[ $pad = 1 ] && out=rerouted_padded log=rrpad
		SM120SHIM_EMULATE_OCCUPANCY=$pad "$sm120" run --mode reroute --target sm120 \
			--set top_k=8 --set hidden_size=${m#*:} --log "$work/$log.%p.jsonl" -- \
			python3 bench_moe.py rerouted --quant "$q" --models ${m%%:*} \
			>>"$work/$out" 2>>"$work/$out.err" || exit 1
	done
done
python3 - "$work" <<'PY'
import collections, glob, json, sys
w = sys.argv[1]
def events(prefix):
    return [json.loads(l) for f in glob.glob(f"{w}/{prefix}.*.jsonl") for l in open(f)]
for prefix, what in (("rr", "rerouted runs"), ("rrpad", "padded rerouted runs")):
    acts = collections.Counter((e.get("kernel"), e["action"]) for e in events(prefix)
                               if e["event"] == "launch")
    print(f"fused-MoE launches in the {what}:", dict(acts))
    if any(a != "reroute" for _, a in acts) or not acts:
        print("WARNING: not every over-limit launch was rerouted; 'bundled' is not the bundled "
              "kernels alone")
peaks = dict(l.split() for l in open(f"{w}/peaks"))
mma16, mma8, bw = (float(peaks[k]) for k in ("mma_sync_bf16_tflops", "mma_sync_fp8_tflops", "read_gbps"))
print(f"ceilings: mma.sync bf16 {mma16:.0f} TFLOP/s, mma.sync FP8 {mma8:.0f} TFLOP/s, "
      f"streaming read {bw:.0f} GB/s (H200)")
def load(name):
    out = {}
    for line in open(f"{w}/{name}"):
        r = json.loads(line)
        if "ms" in r:
            out[(r["model"], r["quant"], r["batch"])] = r
    return out
hop, hopn, sm, gm, rr, smp, rrp = (load(n) for n in (
    "hopper", "hopper_nowgmma", "sm120", "grouped_mm", "rerouted", "sm120_padded",
    "rerouted_padded"))
print()
print("gate/up GEMM: bundled kernel vs Triton (ms; ratio = other time / bundled time, > 1: bundled faster)")
print(f"{'model':<5} {'quant':<10} {'M':>5} {'bundled':>8} {'hopper':>8} {'ratio':>6} {'hop-nowg':>8} "
      f"{'ratio':>6} {'sm120':>8} {'ratio':>6} {'grp_mm':>8} {'ratio':>6} {'TFLOP/s':>8} {'GB/s':>6} {'of ceiling':>10}")
for key in sorted(rr, key=lambda k: (k[0], k[1], k[2])):
    b = rr[key]["ms"]
    def col(d):
        return (f"{d[key]['ms']:>8.3f} {d[key]['ms'] / b:>6.2f}" if key in d else f"{'-':>8} {'-':>6}")
    ceil = mma8 if key[1].startswith("fp8") else mma16
    small = key[2] <= 16
    frac = rr[key]["gbps"] / bw if small else rr[key]["tflops"] / ceil
    print(f"{key[0]:<5} {key[1]:<10} {key[2]:>5} {b:>8.3f} {col(hop)} {col(hopn)} {col(sm)} {col(gm)} "
          f"{rr[key]['tflops']:>8.1f} {rr[key]['gbps']:>6.0f} {frac:>9.2f}{'b' if small else 'c'}")
print()
print("hopper: the configuration rerouted (128x256, 4 stages), native with wgmma; hop-nowg: the same "
      "without wgmma; sm120: the best SM120-fitting Triton configuration found (no wgmma); grp_mm: "
      "torch._grouped_mm (bf16).  'of ceiling': b = weight bytes read / time over the read bandwidth "
      "(M <= 16), c = TFLOP/s over the mma.sync rate of the dtype (larger M).")
print()
print("roofline: floor = max(flop / mma.sync rate, weight bytes read once / read bandwidth), the time no "
      "kernel can beat; each column is floor / time (1.00 = at the roofline).  'goal' = the issue's "
      "target time, best SM120 Triton / 1.3; 'needs' = floor / goal: above 1.00 the goal is beyond the roofline")
print(f"{'model':<5} {'quant':<10} {'M':>5} {'floor ms':>8} {'bound':>5} {'bundled':>7} {'sm120':>6} "
      f"{'hopper':>6} {'goal ms':>8} {'needs':>6}")
for key in sorted(rr, key=lambda k: (k[0], k[1], k[2])):
    r = rr[key]
    ceil = mma8 if key[1].startswith("fp8") else mma16
    t_mma, t_bw = r["flop"] / (ceil * 1e9), r["weight_bytes"] / (bw * 1e6)
    floor = max(t_mma, t_bw)
    def frac(d):
        return f"{floor / d[key]['ms']:>6.2f}" if key in d else f"{'-':>6}"
    goal = sm[key]["ms"] / 1.3 if key in sm else None
    print(f"{key[0]:<5} {key[1]:<10} {key[2]:>5} {floor:>8.3f} {'mma' if t_mma > t_bw else 'read':>5} "
          f"{floor / r['ms']:>7.2f} {frac(sm)} {frac(hop)} "
          + (f"{goal:>8.3f} {floor / goal:>6.2f}" if goal else f"{'-':>8} {'-':>6}"))
print()
print("padded to SM120's blocks per SM (SM120SHIM_EMULATE_OCCUPANCY=1, target sm120: dynamic shared "
      "memory padded so that the H200 keeps no more blocks of a launch per SM than SM120, whose SM "
      "has 100 KiB, 1536 threads and 24 blocks); ms, 'x' = padded / plain time, ratio = sm120 time / "
      "bundled time (> 1: bundled faster).  sm120 padded: the plain search's 5 fastest "
      "configurations timed again padded")
print(f"{'model':<5} {'quant':<10} {'M':>5} {'bundled':>8} {'padded':>8} {'x':>5} {'sm120':>8} "
      f"{'padded':>8} {'x':>5} {'ratio':>6} {'padded':>6}")
def ms(d, key):
    return d[key]["ms"] if key in d and d[key].get("ms") else None
def num(v, width, fmt):
    return f"{v:>{width}{fmt}}" if v is not None else f"{'-':>{width}}"
def div(a, b):
    return a / b if a is not None and b else None
for key in sorted(rr, key=lambda k: (k[0], k[1], k[2])):
    b, bp, s, sp = ms(rr, key), ms(rrp, key), ms(sm, key), ms(smp, key)
    print(f"{key[0]:<5} {key[1]:<10} {key[2]:>5} {num(b, 8, '.3f')} {num(bp, 8, '.3f')} "
          f"{num(div(bp, b), 5, '.2f')} {num(s, 8, '.3f')} {num(sp, 8, '.3f')} "
          f"{num(div(sp, s), 5, '.2f')} {num(div(s, b), 6, '.2f')} {num(div(sp, bp), 6, '.2f')}")
pads = collections.Counter()
for prefix in ("rrpad", "pad_sm120"):
    for e in events(prefix):
        p = e.get("occupancy_pad")
        if e.get("event") == "occupancy" and p and e.get("action") == "pad" and \
                str(e.get("kernel", "")).startswith(("moe_gemm", "fused_moe")):
            pads[(e["kernel"], p["from"], p["to"], p["device_blocks"], p["blocks"])] += 1
print("padding applied (kernel: dynamic bytes, H200 blocks per SM unpadded -> padded = SM120's; "
      "count of compiled kernels):")
for (k, f, t, d, b), n in sorted(pads.items()):
    print(f"  {k}: {f} -> {t} B, {d} -> {b} blocks per SM ({n})")
if not pads:
    print("  none: every launch already ran at SM120's blocks per SM")
PY
rc=$?
# What the shim said about the padding (refused paddings, kernels it could not pad).
grep -h "EMULATE_OCCUPANCY\|padded to" "$work/padded.err" "$work/rerouted_padded.err" 2>/dev/null |
	sort -u | sed 's/^/note: /'
exit $rc

"""bench_moe_table.py - the tables tests/gpu/bench_moe.sh prints from its run's
records (the files bench_moe.py and bench_peaks wrote into one work folder):
each case as a fraction of the floor, plain and padded to SM120's blocks per
SM, against the issue's goals (met, or each unmet part, or the measured limit
that stops it; on the plain figures, and listed where the padded ones meet
other parts), the FP8 rows that do not stand for SM120 marked (sm_90
emulates FP8 mma.sync) with their proxies, the milliseconds, the padding the
shim applied, and the per-SM table of the green-context runs where there
were any.  Rows whose
plain time is over 1.25 times their padded one are listed as disturbed
measurements.  No GPU: tests/scripts/test_bench_table.sh runs it on records
of its own.

Run as: python3 bench_moe_table.py WORK
"""
import collections, glob, json, os, sys
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
device = open(f"{w}/device").read().strip()
mma16, mma8, bw = (float(peaks[k]) for k in ("mma_sync_bf16_tflops", "mma_sync_fp8_tflops", "read_gbps"))
print(f"{device}, one run.  Measured ceilings: mma.sync bf16 {mma16:.0f} TFLOP/s, mma.sync FP8 "
      f"{mma8:.0f} TFLOP/s, streaming read {bw:.0f} GB/s")
def load(name):
    out = {}
    for line in open(f"{w}/{name}"):
        r = json.loads(line)
        if "ms" in r:
            out[(r["half"], r["model"], r["quant"], r["batch"])] = r
    return out
hop, sm, smp, gm, rr, rrp, lim = (load(n) for n in (
    "hopper", "sm120", "sm120_padded", "grouped_mm", "rerouted", "rerouted_padded", "limit"))
def load_proxy():
    """bench_moe.sh's FP8 proxy rows (bench_proxy.awk's lines: the plan's kernel as built for
    sm_90 and with one MMA per FP8 MMA, as fractions of the floor): (half, model, quant, M) ->
    the second over the first; none where the run was not made"""
    out, col = {}, None
    if not os.path.exists(f"{w}/proxy"):
        return out
    for line in open(f"{w}/proxy"):
        f = line.split()
        if f and f[0] == "model":
            col = {name: i for i, name in enumerate(f)}
        elif col and f and f[0] in ("kimi", "glm"):
            emulated = float(f[col["emulated"]])
            out[(f[col["half"]], f[0], f[col["quant"]], int(f[col["M"]]))] = (
                float(f[col["proxy"]]) / emulated if emulated > 0 else None)
    return out
proxy_ratio = load_proxy()
QUANTS = ("bf16", "fp8_tensor", "fp8_channel", "fp8_block", "int4")
def order(k):
    return (k[0] != "gateup", k[1], QUANTS.index(k[2]) if k[2] in QUANTS else 9, k[3])
def ms(d, key):
    return d[key]["ms"] if key in d and d[key].get("ms") else None
def num(v, width, fmt=".2f"):
    return f"{v:>{width}{fmt}}" if v is not None else f"{'-':>{width}}"
def div(a, b):
    return a / b if a is not None and b else None
def frac(v, below):
    """0 <= v < below as .xx, or cut to .xxx where two digits would round it up to `below`."""
    t = f"{v:.2f}" if round(v, 2) < below else f"{int(v * 1000) / 1000:.3f}"
    return t.lstrip("0")
print()
print("fraction of the floor (floor / time; 1.00 = at the floor); floor = max(flop / mma.sync rate of "
      "the dtype, weight bytes read once / read bandwidth), bound = which; pad = padded to SM120's "
      "blocks per SM; x s120 = best SM120 Triton time / bundled time (> 1: bundled faster); "
      "limit = the best fraction this GPU's traffic and MMA ceilings allow the row (below)")
print(f"{'half':<6} {'model':<5} {'quant':<11} {'M':>5} {'floor us':>9} {'bound':>5} {'limit':>5} | "
      f"{'bundled':>7} {'pad':>5} | {'sm120':>6} {'pad':>5} | {'hopper':>6} {'grp_mm':>6} | "
      f"{'x s120':>6} {'pad':>5} | {'bf16px':>6} {'fp8px':>5} | goal")
fp8_mma = 0
# padding only takes blocks per SM away, so a plain time well over the padded one of the
# same kernels (1.25x) is a measurement something disturbed: such rows are listed below
disturbed = []
padded_goals = []   # rows whose goal reads otherwise on the padded figures
for key in sorted(rr, key=order):
    r = rr[key]
    fp8 = key[2].startswith("fp8")
    t_mma = r["flop"] / ((mma8 if fp8 else mma16) * 1e9)
    t_bw = r["weight_bytes"] / (bw * 1e6)
    floor = max(t_mma, t_bw)
    mma_bound = t_mma > t_bw
    b, bp, s, sp = ms(rr, key), ms(rrp, key), ms(sm, key), ms(smp, key)
    # the traffic alone or the MMA ceiling, whichever is slower, as a fraction of the floor
    limit = div(floor, max(ms(lim, key), t_mma)) if ms(lim, key) else None
    # the issue's goals, on the plain figures: each unmet part named, a fraction of the
    # floor above the row's limit as that limit (it cannot be met on this GPU at this size)
    m = key[3]
    def short_of(value, lim, want, text, value_text):
        """None where value meets want; else the measured limit where that is below want,
        else the value, each against the goal's text"""
        if value >= want:
            return None
        if lim is not None and lim < want:
            return f"limit {frac(lim, want)} < {text}"
        return f"0{frac(value, want)} < {value_text}"
    def goal_of(b, s):
        """the row's goal on bundled time b and SM120 Triton time s: its text (met, or each
        unmet part) and the names of the unmet parts"""
        def floor_part(want, text):
            return short_of(floor / b, limit, want, text, f"{text} floor")
        def s120_part(want):
            return None if s is not None and s / b >= want else f"{num(div(s, b), 0)}x < {want}x s120"
        if b is None:
            return "-", ("-",)
        if m <= 16:
            parts = [("floor", floor_part(0.85, ".85"))]
        elif m <= 512:
            parts = [("floor", floor_part(0.9, ".9")), ("s120", s120_part(1.0))]
        else:
            # bf16's share of the mma.sync ceiling; its limit, the most the row's traffic alone
            # leaves it (the flop over the longer of that traffic's time and the ceiling's)
            mma_limit = t_mma / max(ms(lim, key), t_mma) if ms(lim, key) else None
            mma_part = None if key[2] != "bf16" else short_of(
                r["flop"] / (b * 1e9) / mma16, mma_limit, 0.6, ".6 mma", ".6 mma")
            parts = [("s120", s120_part(1.3)), ("mma", mma_part)]
        unmet = [(name, text) for name, text in parts if text]
        return ("met" if not unmet else "no: " + "; ".join(text for _, text in unmet),
                tuple(name for name, _ in unmet))
    goal, unmet = goal_of(b, s)
    # the same goal on the padded figures (both sides at SM120's blocks per SM), listed where
    # other parts of it are met
    if bp is not None:
        padded_goal, padded_unmet = goal_of(bp, sp)
        if padded_unmet != unmet:
            padded_goals.append(f"{' '.join(map(str, key))}: {padded_goal} (plain: {goal})")
    mark = ""
    for what, plain, padded in (("bundled", b, bp), ("sm120", s, sp)):
        if plain is not None and padded is not None and plain > 1.25 * padded:
            disturbed.append(f"{' '.join(map(str, key))} {what}: plain {plain:.3f} ms, padded {padded:.3f} ms")
    # FP8 rows: the plan's kernel with one MMA per FP8 MMA over the same as built here
    emulation = proxy_ratio.get(key) if fp8 else None
    if fp8 and (mma_bound or r["flop"] / (mma16 * 1e9) > t_bw or (emulation or 0) >= 1.05):
        mark, fp8_mma = " *", fp8_mma + 1
    # FP8 rows: the bundled bf16 kernel's time on the same row (its tiles with bf16 mma.sync,
    # twice the weight bytes), as a fraction of this row's floor: what SM120's FP8 kernel,
    # with native FP8 mma.sync and half the bytes, is not slower than
    proxy = div(floor, ms(rr, (key[0], key[1], "bf16", m))) if fp8 else None
    print(f"{key[0]:<6} {key[1]:<5} {key[2]:<11} {m:>5} {floor * 1e3:>9.1f} "
          f"{'mma' if mma_bound else 'read':>5} {num(limit, 5)} | {num(div(floor, b), 7)} "
          f"{num(div(floor, bp), 5)} | {num(div(floor, s), 6)} {num(div(floor, sp), 5)} | "
          f"{num(div(floor, ms(hop, key)), 6)} {num(div(floor, ms(gm, key)), 6)} | "
          f"{num(div(s, b), 6)} {num(div(sp, bp), 5)} | {num(proxy, 6)} "
          f"{num(div(floor, b) * emulation if b and emulation else None, 5)} | {goal}{mark}")
print()
print("bundled: the Hopper configuration rerouted to the bundled kernels; sm120: the best "
      "SM120-fitting Triton configuration the search found (no wgmma); hopper: the Hopper "
      "configuration run natively (wgmma, over SM120's limit: not runnable there); grp_mm: "
      "torch._grouped_mm (bf16).  Goals (issue 18): M <= 16 >= 0.85 of the floor; M 512 >= 0.9 "
      "of the floor and >= 1.0x the best SM120 Triton; M 4096 >= 1.3x the best SM120 Triton and, "
      "bf16, >= 0.6 of the mma.sync ceiling.")
print("limit: floor / max(the time of bench_peaks.cu's stream_rw moving only the row's traffic "
      "(its weights and activations read once, its output written once; timed as the kernels are: "
      "CUDA-graph replay, L2 flushed), flop / mma.sync rate of the dtype): the most of the floor "
      "this GPU allows the row at this size, measured in this run; a goal above it (M <= 16: .85, "
      "M 512: .9) reads \"limit x < goal\"; at M 4096 the same traffic's time bounds the fraction "
      "of the mma.sync ceiling (flop / mma.sync rate over the longer of the two), read likewise "
      "(\"limit x < .6 mma\").  goal: met, or each unmet part of it.")
print("bf16px (FP8 rows): this row's floor / the bundled bf16 kernel's time on the same half, "
      "model and M (the same tiles with bf16 mma.sync, twice the weight bytes): sm_90 has no native "
      "FP8 mma.sync, so the bundled FP8 kernels here emulate it (primitives.cuh's mma_e4m3 on "
      "sm_90: the operands converted to f16, two f16 MMAs: more instructions and registers than "
      "their sm_120 code, which runs QMMA); on SM120, whose FP8 mma.sync is native, the FP8 row is "
      "expected to be no slower than this proxy.")
print("fp8px (FP8 rows): the bundled row's fraction times the plan's kernel's speed-up with one "
      "f16 MMA per FP8 MMA, SM120's MMA count (fp8_mma_proxy.fatbin: the same kernels, wrong sums, "
      "timed only), both timed in this run by gpu_bench_moe_decode at BLOCK_SIZE_M 128: the row "
      "with sm_90's emulation taken out, an estimate for SM120's instruction count.")
if fp8_mma:
    print(f"* {fp8_mma} FP8 rows are bound by the MMA rate at the FP8 or at the bf16 mma.sync "
          "rate, or their kernel runs 1.05 times as fast or more at SM120's MMA count (fp8px): "
          "sm_90 has no native FP8 mma.sync (ptxas emulates it with f16 MMAs: the FP8 ceiling "
          "above is that emulation's, about the bf16 rate), so these rows do not stand for SM120; "
          "the stated proxies are the bf16 row of the same half, model and M (the same tiles with "
          "bf16 mma.sync), column bf16px, and fp8px.")
if padded_goals:
    print("goal on the padded figures (bundled and SM120 Triton both at SM120's blocks per SM), where "
          "other parts of it are met than on the plain ones:")
    for g in padded_goals:
        print(f"  {g}")
if disturbed:
    print("! plain times over 1.25x their padded ones, which padding (fewer blocks per SM) does not "
          "cause: disturbed measurements, to be run again (their goal column reads the plain figure):")
    for d in disturbed:
        print(f"  {d}")
print()
print("milliseconds (plain):")
print(f"{'half':<6} {'model':<5} {'quant':<11} {'M':>5} {'bundled':>8} {'sm120':>8} {'hopper':>8} "
      f"{'grp_mm':>8}  sm120 tile")
for key in sorted(rr, key=order):
    print(f"{key[0]:<6} {key[1]:<5} {key[2]:<11} {key[3]:>5} {num(ms(rr, key), 8, '.3f')} "
          f"{num(ms(sm, key), 8, '.3f')} {num(ms(hop, key), 8, '.3f')} {num(ms(gm, key), 8, '.3f')}  "
          f"{sm[key].get('tile') if key in sm else '-'}")
pads = collections.Counter()
for prefix in ("rrpad", "pad_sm120"):
    for e in events(prefix):
        p = e.get("occupancy_pad")
        if e.get("event") == "occupancy" and p and e.get("action") == "pad" and \
                str(e.get("kernel", "")).startswith(("moe_gemm", "fused_moe")):
            pads[(e["kernel"], p["from"], p["to"], p["device_blocks"], p["blocks"])] += 1
print("padding applied (kernel: dynamic bytes, blocks per SM here unpadded -> padded = SM120's; "
      "count of compiled kernels):")
for (k, f, t, d, b), n in sorted(pads.items()):
    print(f"  {k}: {f} -> {t} B, {d} -> {b} blocks per SM ({n})")
if not pads:
    print("  none: every launch already ran at SM120's blocks per SM")
if os.path.exists(f"{w}/green_rerouted"):
    # An SM120 SM's share of its DRAM: the RTX 5090's 1792 GB/s over 170 SMs, the most
    # per SM of the SM120 cards (RTX PRO 6000: 9.5, DGX Spark: 5.7).
    share = 1792 / 170
    grr, gsm, glim = (load(n) for n in ("green_rerouted", "green_sm120", "green_limit"))
    def x5090(d, key):
        r = d.get(key)
        return r["weight_bytes"] / (r["ms"] * 1e6) / r["sms"] / share if r and r.get("ms") else None
    sms = next(iter(grr.values()))["sms"] if grr else 0
    print()
    print(f"per SM, on {sms} SMs of this GPU (a CUDA green context), padded to SM120's blocks per SM: "
          f"the weight bytes each streams per SM and second over {share:.1f} GB/s, an RTX 5090 SM's "
          "share of its DRAM (x5090 >= 1: on SM120 the DRAM, not the kernel, is the row's limit); "
          "read = stream_rw moving the row's traffic alone on the same SMs (what launch, ramp and "
          "tail leave); time ratio = sm120 / bundled on those SMs (> 1: bundled faster).  Measured "
          "on an otherwise idle GPU, whose DRAM answers sooner than one under full load.")
    print(f"{'half':<6} {'model':<5} {'quant':<11} {'M':>5} | {'bundled':>7} {'sm120':>6} {'read':>6} | "
          f"{'ratio':>6}")
    for key in sorted(grr, key=order):
        print(f"{key[0]:<6} {key[1]:<5} {key[2]:<11} {key[3]:>5} | {num(x5090(grr, key), 7)} "
              f"{num(x5090(gsm, key), 6)} {num(x5090(glim, key), 6)} | {num(div(ms(gsm, key), ms(grr, key)), 6)}")

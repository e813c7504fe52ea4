#!/bin/sh
# test_bench_table.sh - tests/gpu/bench_moe_table.py, the table `make
# bench-gpu` prints for the fused-MoE GEMMs (tests/gpu/bench_moe.sh), on
# records written here in bench_moe.py's and bench_peaks' formats: the
# goal column (met; a fraction of the floor below the goal; the measured
# limit that stops a row; the speed against the best SM120 Triton; bf16's
# share of the mma.sync ceiling at 4096 tokens), the FP8 rows bound by the
# MMA rate or by sm_90's emulated FP8 MMAs marked with their bf16 and FP8
# proxies, the rows whose goal reads otherwise on the padded figures, the disturbed measurements listed
# (a plain time over 1.25 times its padded one) and the warning when a
# fused-MoE launch was not rerouted; and tests/gpu/bench_proxy.awk, bench.sh's
# FP8 decode rows at SM120's MMA count, and tests/gpu/bench_own.awk, what
# holds each row (the kernel's own work or the memory), on gpu_bench_moe_decode
# lines written here.  No GPU.  Prints "ok - ..." lines.
set -u
echo "1..22"
out=$(mktemp)
w=$(mktemp -d)
trap 'rm -rf "$out" "$w"' EXIT

. tests/scripts/lib.sh

# Ceilings 500 TFLOP/s (bf16), 600 (FP8), 4000 GB/s.  Rows (half model quant M:
# bundled plain and padded, best SM120 Triton, stream_rw ms; weight bytes 400 MB: a
# 0.1 ms floor where read-bound, 40 MB 0.01 ms; 5e11 flop: 1.0 ms at the bf16 rate,
# 0.833 at FP8's).
python3 - "$w" <<'PY'
import json, sys
w = sys.argv[1]
open(f"{w}/peaks", "w").write("mma_sync_bf16_tflops 500\nmma_sync_fp8_tflops 600\nread_gbps 4000\n")
open(f"{w}/device", "w").write("a test GPU\n")
rows = [  # half, model, quant, M, flop, weight bytes, bundled, bundled padded, sm120, sm120 padded, limit
    ("gateup", "kimi", "bf16", 16, 1e9, 4e8, 0.1 / 0.86, 0.1 / 0.86, 0.1 / 0.9, 0.1 / 0.9, 0.1 / 0.95),
    ("gateup", "kimi", "bf16", 512, 1e9, 4e8, 0.1 / 0.95, 0.1 / 0.95, 0.1, 0.1, 0.1 / 0.95),
    ("gateup", "kimi", "bf16", 1, 1e9, 4e8, 0.25, 0.25, 0.3, 0.3, 0.2),
    ("gateup", "kimi", "bf16", 4096, 5e11, 4e8, 2.0, 2.0, 2.0, 2.0, 0.1),
    ("gateup", "kimi", "fp8_tensor", 4096, 5e11, 4e8, 2.5, 2.5, 2.0, 2.0, 0.1),
    ("down", "glm", "bf16", 1, 1e7, 4e7, 0.041, 0.017, 0.02, 0.02, 0.013),
    ("down", "kimi", "bf16", 4096, 5e11, 6e9, 2.5, 2.5, 2.5, 2.5, 2.0),
    ("down", "glm", "fp8_tensor", 512, 1e9, 4e8, 0.2, 0.2, 0.2, 0.2, 0.1),
    ("down", "kimi", "fp8_channel", 512, 1e9, 4e8, 0.2, 0.2, 0.2, 0.2, 0.1),
    ("down", "kimi", "bf16", 512, 1e9, 4e8, 0.1 / 0.95, 0.1 / 0.91, 0.1, 0.1 / 0.8, 0.1 / 0.95),
    ("gateup", "glm", "bf16", 16, 1e9, 4e8, 0.1 / 0.8495, 0.1 / 0.8495, 0.1, 0.1, 0.1 / 0.95),
]
# The FP8 proxy run (gpu_bench_moe_decode, fp8_mma_proxy.fatbin as ALT): the plan's kernel as
# built for sm_90 (old_pad where it keeps the row tile, tn 0; new on a decode kernel) against
# alt: 0.59 / 0.37 at 4096 tokens, 0.40 / 0.36 (1.11) and 0.51 / 0.50 (1.02) at 512.
hdr = ("model half   quant          M  exp floor_us  limit    old_us    old  old_pad   tn  rp    new_us    new"
       "    d16    d32    d64   d128  eq    alt    wiring")
open(f"{w}/proxy_run", "w").write(f"""ok - bundled fatbin (100 bytes) loaded
# a test GPU, 100 SMs
{hdr}
kimi  gateup fp8_tensor  4096  384  620.1 1.00  895.0 0.35 0.37    0   0  895.0 0.35 0.08 0.08 0.08 0.08 -1 0.59 4.5e-03  (new = old: row tile kept)
glm   down   fp8_tensor   512  160   69.2 0.90  128.7 0.34 0.36    0   0  128.7 0.34 0.14 0.24 0.23 0.22 -1 0.40 0.0e+00  (new = old: row tile kept)
kimi  down   fp8_channel  512  384  310.1 0.98  361.6 0.49 0.50    0   0  361.6 0.49 0.34 0.56 0.51 0.51 -1 0.51 0.0e+00  (new = old: row tile kept)
glm   down   fp8_block     16   94   41.7 0.87   69.4 0.30 0.31  128   8   50.0 0.40 0.13 0.24 0.36 0.40 -1 0.44 1.1e-03
""")
files = {n: open(f"{w}/{n}", "w") for n in ("rerouted", "rerouted_padded", "sm120", "sm120_padded",
                                           "limit", "hopper", "grouped_mm")}
for half, model, quant, m, flop, wb, b, bp, s, sp, lim in rows:
    base = dict(half=half, model=model, quant=quant, batch=m, flop=flop, weight_bytes=wb)
    for name, ms in (("rerouted", b), ("rerouted_padded", bp), ("sm120", s), ("sm120_padded", sp),
                     ("limit", lim)):
        files[name].write(json.dumps(dict(base, ms=ms)) + "\n")
for f in files.values():
    f.close()
for prefix, action in (("rr", "reroute"), ("rrpad", "reroute")):
    open(f"{w}/{prefix}.1.jsonl", "w").write(json.dumps(
        dict(event="launch", kernel="fused_moe_kernel", action=action)) + "\n")
PY
table() { (cd tests/gpu && python3 bench_moe_table.py "$w"); }
# the proxy pairs as bench_moe.sh makes them
awk -f tests/gpu/decode_rows.awk -f tests/gpu/bench_proxy.awk "$w/proxy_run" >"$w/proxy"

check "the table is written from the records" 0 table
expect "a row at 0.86 of the floor at 16 tokens meets its goal" "^gateup kimi  bf16 *16 .*| met$"
expect "at 512 tokens, slower than the SM120 Triton: named" "^gateup kimi  bf16 *512 .*no: 0.95x < 1.0x s120$"
expect "0.8495 of the floor, under a limit above the goal: cut to three digits, not rounded up to the goal" \
	"^gateup glm   bf16 *16 .*no: 0.849 < .85 floor$"
expect "at one token, below a limit under the goal: the limit is named" \
	"^gateup kimi  bf16 *1 .*0.50 |.*no: limit .50 < .85$"
expect "bf16 at 4096 tokens: the Triton ratio and the mma.sync share" \
	"^gateup kimi  bf16 *4096 .*no: 1.00x < 1.3x s120; 0.50 < .6 mma$"
expect "bf16 at 4096 tokens whose traffic alone (2.0 ms) leaves 0.50 of the mma.sync ceiling: that limit" \
	"^down   kimi  bf16 *4096 .*no: 1.00x < 1.3x s120; limit .50 < .6 mma$"
expect "an MMA-bound FP8 row is marked, with its bf16 proxy (0.833 / 2.0 ms) and fp8px (0.333 x 0.59 / 0.37)" \
	"^gateup kimi  fp8_tensor *4096 .*|   0.42  0.53 | no: 0.80x < 1.3x s120 \*$"
expect "a read-bound FP8 row whose kernel runs 1.11 times as fast at SM120's MMA count: marked, fp8px 0.56 (0.50 x 1.11)" \
	"^down   glm   fp8_tensor *512 .*|      -  0.56 | no: 0.50 < .9 floor \*$"
expect "one at 1.02: fp8px 0.51, not marked (its bf16px: the bf16 row of the same half, model and M, 0.95)" \
	"^down   kimi  fp8_channel *512 .*|   0.95  0.51 | no: 0.50 < .9 floor$"
expect "a row short of SM120 Triton plain (0.95x) but not padded (0.1 / 0.8 over 0.1 / 0.91 ms): its padded goal listed" \
	"^  down kimi bf16 512: met (plain: no: 0.95x < 1.0x s120)$"
if [ "$(grep -c '(plain: ' "$out")" = 1 ]; then
	echo "ok - only that one: rows whose padded figures meet the same parts are not listed"
else echo "not ok - the padded goals"; sed 's/^/#   /' "$out"; fi
expect "a plain time over 1.25x its padded one (0.24 of the floor, 0.59 padded) is listed" \
	"^  down glm bf16 1 bundled: plain 0.041 ms, padded 0.017 ms$"
if [ "$(grep -c 'plain .* ms, padded' "$out")" = 1 ] && ! grep -q WARNING "$out"; then
	echo "ok - only that one; every launch rerouted: no warning"
else echo "not ok - the disturbed list or a warning"; sed 's/^/#   /' "$out"; fi
printf '%s\n' '{"event": "launch", "kernel": "fused_moe_kernel", "action": "refuse"}' >"$w/rr.2.jsonl"
table >"$out" 2>&1
expect "a launch not rerouted is warned of" "WARNING: not every over-limit launch was rerouted"
rm "$w/proxy"
table >"$out" 2>&1
expect "without the FP8 proxy run: no fp8px, and the read-bound FP8 row unmarked" \
	"^down   glm   fp8_tensor *512 .*|      -     - | no: 0.50 < .9 floor$"

# bench_proxy.awk: gpu_bench_moe_decode's header and rows with an ALT (the proxy) column: a row
# on a decode kernel (tn 128: new 0.46 against alt 0.51) and one that keeps the row tile (tn 0:
# old_pad 0.55, not new 0.54, against alt 0.60).
hdr="model half   quant          M  exp floor_us  limit    old_us    old  old_pad   tn  rp    new_us    new    d16    d32    d64   d128  eq"
dec="kimi  down   fp8_tensor    16   91     20.0   0.72      55.3   0.36     0.31  128   8      43.9   0.46   0.13   0.24   0.36   0.46  -1"
cat >"$w/proxy" <<EOF
# a comment line
$hdr    alt    wiring
$dec   0.51   9.4e-04
glm   gateup fp8_block     16   94     41.7   0.87      69.4   0.54     0.55    0   0      69.4   0.54   0.61   0.57   0.55   0.50  -1   0.60   1.1e-03  (new = old: row tile kept)
      rows:  m16 tiles 0.54 cols 0.54 (gx 8 of 8, parts 2) pad 0.55 same 1
EOF
check "the proxy rows are printed" 0 awk -f tests/gpu/decode_rows.awk -f tests/gpu/bench_proxy.awk "$w/proxy"
if grep -q "^kimi  down   fp8_tensor    16 d128         0.46   0.51   1.11$" "$out" &&
	grep -q "^glm   gateup fp8_block     16 rows         0.55   0.60   1.09$" "$out" &&
	[ "$(grep -c '^kimi\|^glm' "$out")" = 2 ]; then
	echo "ok - a decode row against new, a kept row tile against old_pad, each over the proxy"
else echo "not ok - the proxy rows"; sed 's/^/#   /' "$out"; fi
printf '%s\n%s\n' "$hdr    wiring" "$dec   9.4e-04" >"$w/noalt"
check "output run without the proxy (no alt column): refused" 1 awk -f tests/gpu/decode_rows.awk -f tests/gpu/bench_proxy.awk "$w/noalt"

# bench_own.awk: rows with an own column (the plan's kernel, every expert's weights in the L2):
# a decode row whose own (0.47) is under its limit (0.72): the kernel; a kept row tile (gathered:
# old_pad 0.55) whose own (0.95) is over its limit (0.87): the memory; the GPU's line gives 40
# GB/s an SM, 4.2 times an RTX PRO 6000's 9.5.
cat >"$w/own" <<EOF
ok - bundled fatbin (100 bytes) loaded
# a test GPU, 100 SMs; streaming read 4000 GB/s (read_bw, 4 GiB); BLOCK_SIZE_M 128
$hdr    own    wiring
$dec   0.47   9.4e-04
      green: 32 SMs 50.0 us 12.0 GB/s/SM x5090 1.14  read_bw 30.0 us x5090 1.90
glm   gateup fp8_block     16   94     41.7   0.87      69.4   0.54     0.55    0   0      69.4   0.54   0.61   0.57   0.55   0.50  -1   0.95   1.1e-03  (new = old: row tile kept)
EOF
check "what holds each row is printed" 0 awk -f tests/gpu/decode_rows.awk -f tests/gpu/bench_own.awk "$w/own"
if grep -q "^kimi  down   fp8_tensor    16 d128         0.46   0.47   0.72  kernel$" "$out" &&
	grep -q "^glm   gateup fp8_block     16 rows         0.55   0.95   0.87  memory$" "$out" &&
	grep -q "^fp8_tensor: 1 of 1 rows held by the kernel$" "$out" &&
	grep -q "^fp8_block: 0 of 1 rows held by the kernel$" "$out" &&
	grep -q "^This GPU streams 40.0 GB/s an SM (100 SMs, 4000 GB/s).* 4.2 times" "$out" &&
	[ "$(grep -c '^kimi\|^glm' "$out")" = 2 ]; then
	echo "ok - a decode row held by the kernel, a kept row tile by the memory, counted per quantization"
else echo "not ok - what holds each row"; sed 's/^/#   /' "$out"; fi
check "output without an own column: refused" 1 awk -f tests/gpu/decode_rows.awk -f tests/gpu/bench_own.awk "$w/noalt"

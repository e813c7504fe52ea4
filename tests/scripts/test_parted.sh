#!/bin/sh
# test_parted.sh - tests/gpu/parted.awk, engine_gpu.sh's judge of whether a
# rerouted run's tokens may part from the unshimmed run's: equal tokens, or
# parting at or after the step where a run left the CPU backend's tokens at
# a near tie (CPU top-2 margin under that run's largest logit difference).
# The first pair is real `sm120 ref run --check-cpu` output (CPU backend,
# 1 and 2 threads: the same tokens); the others are an H200's engine_gpu.sh
# lines for Kimi K2 INT4 (tokens parting at step 27 after a near tie at step
# 26, margin 0.01463 against a difference of 0.5707) and edits of them: an
# earlier parting, a wide margin, no CPU divergence, a run without tokens.
# Prints "ok - ..." / "not ok - ..." per check.
set -u
echo "1..15"
B=${SM120_BUILD:-build}
out=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$out" "$work"' EXIT

. tests/scripts/lib.sh

parted() { awk -f tests/gpu/parted.awk "$@"; }

check "make-model (tiny kimi-k2)" 0 "$B/sm120" ref make-model --arch kimi-k2 --quant bf16 --tiny --seed 5 "$work/m"
check "ref run --check-cpu, 1 thread" 0 sh -c "'$B/sm120' ref run --check-cpu --threads 1 --steps 6 '$work/m' >'$work/c1'"
check "ref run --check-cpu, 2 threads" 0 sh -c "'$B/sm120' ref run --check-cpu --threads 2 --steps 6 '$work/m' >'$work/c2'"
check "real outputs with the same tokens: yes" 0 parted "$work/c1" "$work/c2"
expect "  ... says equal" "^equal$"

plain="prompt: 7 tokens; generated: 245 26 13 63 176 185 65 216 151 241 93 126 189 222 25 247 130 153 184 246 121 134 44 92 206 71 88 60 85 250 241 93"
rr="prompt: 7 tokens; generated: 245 26 13 63 176 185 65 216 151 241 93 126 189 222 25 247 130 153 184 246 121 134 44 92 206 71 34 7 115 144 57 144"
early="prompt: 7 tokens; generated: 245 26 13 63 176 185 65 216 151 241 93 126 189 222 25 247 130 153 184 9 121 134 44 92 206 71 88 60 85 250 241 93"
cpu="against the cpu backend, on the 32 of 38 logits rows computed from the same tokens: max |logit difference| 0.5707, median row 0.01544 (largest logit 3.807);"
tie="$cpu tokens differ from step 26 (cpu top-2 margin there 0.01463; the 6 rows after it follow different tokens and are not compared)"
wide="$cpu tokens differ from step 26 (cpu top-2 margin there 0.9; the 6 rows after it follow different tokens and are not compared)"
# run NAME TOKENS CHECK-LINE: a run's output as ref run --check-cpu prints it
run() { printf '%s\nlogits checksum: 5.684855e+02 over 38 rows\n%s\n' "$2" "$3" >"$work/$1"; }
run plain "$plain" "$tie"
run rr "$rr" "$tie"
run early "$early" "$tie"
run wideplain "$plain" "$wide"
run widerr "$rr" "$wide"
run eqplain "$plain" "$cpu tokens equal"
run eqrr "$rr" "$cpu tokens equal"
printf 'sm120 ref run: gpu backend: CUDA error\n' >"$work/crashed"

check "parting at step 27 after a near tie at 26: yes" 0 parted "$work/plain" "$work/rr"
expect "  ... names both steps" "part at step 27, after a near tie with the cpu at step 26"
check "the same, runs swapped: yes" 0 parted "$work/rr" "$work/plain"
check "parting at step 20, before the near tie: no" 1 parted "$work/plain" "$work/early"
expect "  ... names the step" "part at step 20, not after a near tie"
check "parting after a wide cpu margin (0.9 > 0.5707): no" 1 parted "$work/wideplain" "$work/widerr"
check "parting where both runs kept the cpu's tokens: no" 1 parted "$work/eqplain" "$work/eqrr"
check "a run without tokens: no" 1 parted "$work/plain" "$work/crashed"
expect "  ... says so" "no tokens"
check "the same tokens, with a near tie: yes" 0 parted "$work/plain" "$work/plain"

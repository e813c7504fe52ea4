#!/bin/sh
# run.sh GPU_TEST... - `make test-gpu`: the GPU test programs, the bundled
# kernels under compute-sanitizer, the GPU scan checks, the shim under
# PyTorch + Triton (shim_gpu.sh), the attention reroute suite
# (reroute_gpu.sh), the fused-MoE one (moe_reroute_gpu.sh), the frameworks' own
# released kernels as the oracle (oracle_gpu.sh, oracle_context.sh,
# oracle_lightning.sh, oracle_inkling.sh), Triton,
# PyTorch and SGLang's choices as on the card under reroute (hook_gpu.sh),
# ncu and compute-sanitizer over a rerouted process (tools_gpu.sh), a 2-GPU
# torchrun job with NCCL and a
# rerouted MoE layer (torchrun_gpu.sh; skipped on one GPU) and the reference
# engine's GPU backend under the shim (engine_gpu.sh) and both backends against
# transformers (engine_hf.py); prints
# "N passed, N failed" last.  Needs an NVIDIA GPU.
set -u
log=$(mktemp)
trap 'rm -f "$log" "$log.tail"' EXIT
passed=0
failed=0
count() {
	cat "$log"
	passed=$((passed + $(grep -c '^ok ' "$log")))
	failed=$((failed + $(grep -c '^not ok' "$log")))
}
for t in "$@"; do
	"$t" >"$log" 2>&1 || echo "not ok - $t exited $?" >>"$log"
	count
done
# The bundled kernels under compute-sanitizer (when the toolkit has it):
# memcheck (no out-of-bounds or misaligned access), racecheck (no
# shared-memory hazard) and synccheck (barrier use) on every attention decode
# case (its two warp groups), one extend case of each head size, and MoE
# decode cases whose warps get unequal k steps (they reach a tile's meeting
# from different instructions).
san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$san" ]; then
	for c in memcheck:decode_attn racecheck:decode_attn synccheck:decode_attn memcheck:extend_attn:0 \
		memcheck:extend_attn:3 memcheck:extend_attn:6 memcheck:extend_attn:10 \
		racecheck:extend_attn:0 racecheck:extend_attn:6 racecheck:extend_attn:10 memcheck:moe_gemm:9 memcheck:moe_gemm:10 \
		memcheck:moe_gemm:27 memcheck:moe_gemm:36 racecheck:moe_gemm:2 racecheck:moe_gemm:14 \
		racecheck:moe_gemm:36 racecheck:moe_gemm:38 memcheck:moe_gemm:44 memcheck:moe_gemm:45 \
		memcheck:moe_gemm:53 racecheck:moe_gemm:44 racecheck:moe_gemm:47 memcheck:moe_gemm:59 \
		memcheck:moe_gemm:61 memcheck:moe_gemm:72 racecheck:moe_gemm:59 racecheck:moe_gemm:66 \
		racecheck:moe_gemm:72 synccheck:moe_gemm:66 synccheck:moe_gemm:70 synccheck:moe_gemm:88 synccheck:moe_gemm:91 \
		memcheck:moe_gemm:126 memcheck:moe_gemm:131 racecheck:moe_gemm:126 racecheck:moe_gemm:130 memcheck:moe_gemm:134 \
		racecheck:moe_gemm:134 memcheck:moe_gemm:128 racecheck:moe_gemm:128 memcheck:moe_gemm:136 memcheck:moe_gemm:137 \
		racecheck:moe_gemm:136 racecheck:moe_gemm:137 memcheck:moe_gemm:138 memcheck:moe_gemm:141 \
		memcheck:moe_gemm:146 racecheck:moe_gemm:139 racecheck:moe_gemm:141 racecheck:moe_gemm:144 \
		synccheck:moe_gemm:138 synccheck:moe_gemm:147 memcheck:lightning_kv racecheck:lightning_kv \
		memcheck:moe_gemm:s2 memcheck:moe_gemm:s5 memcheck:moe_gemm:s7 racecheck:moe_gemm:s5 \
		racecheck:moe_gemm:s7 memcheck:moe_gemm:73 memcheck:moe_gemm:76 racecheck:moe_gemm:76 \
		memcheck:moe_gemm:83 memcheck:moe_gemm:103 racecheck:moe_gemm:103 memcheck:moe_gemm:104 \
		memcheck:moe_gemm:105 racecheck:moe_gemm:105 memcheck:moe_gemm:111 racecheck:moe_gemm:111 \
		memcheck:moe_gemm:112 memcheck:moe_gemm:117 racecheck:moe_gemm:117 memcheck:moe_gemm:120 \
		memcheck:moe_gemm:122 memcheck:moe_gemm:124 racecheck:moe_gemm:124 memcheck:moe_gemm:125 \
		memcheck:moe_gemm:156 racecheck:moe_gemm:156 memcheck:moe_gemm:158 racecheck:moe_gemm:158 \
		memcheck:moe_gemm:165 racecheck:moe_gemm:165; do
		tool=${c%%:*} rest=${c#*:}
		t=${rest%%:*} case=${rest#*:}
		[ "$case" = "$rest" ] && case=
		if EXTEND_ATTN_CASE=$case MOE_GEMM_CASE=$case "$san" --tool "$tool" --print-limit 5 \
			"${SM120_BUILD:-build}/test/gpu_$t" >"$log" 2>&1 &&
			grep -qE "(ERROR|RACECHECK) SUMMARY: 0 (errors|hazards)" "$log"; then
			echo "ok - $tool: gpu_$t ${case:+case $case }is clean" >"$log"
		else
			sed 's/^/# /' "$log" | tail -8 >"$log.tail"
			{ echo "not ok - $tool: gpu_$t ${case:+case $case}"; cat "$log.tail"; } >"$log"
		fi
		count
	done
fi
sh tests/gpu/scan_gpu.sh >"$log" 2>&1
count
sh tests/gpu/shim_gpu.sh >"$log" 2>&1
count
sh tests/gpu/reroute_gpu.sh >"$log" 2>&1
count
sh tests/gpu/moe_reroute_gpu.sh >"$log" 2>&1
count
sh tests/gpu/oracle_gpu.sh >"$log" 2>&1
count
sh tests/gpu/oracle_context.sh >"$log" 2>&1
count
sh tests/gpu/oracle_lightning.sh >"$log" 2>&1
count
sh tests/gpu/oracle_inkling.sh >"$log" 2>&1
count
sh tests/gpu/hook_gpu.sh >"$log" 2>&1
count
sh tests/gpu/tools_gpu.sh >"$log" 2>&1
count
sh tests/gpu/torchrun_gpu.sh >"$log" 2>&1
count
# The reference engine: its GPU backend under the shim (stand-ins rerouted, enforce
# refused), then both backends against Hugging Face transformers (installed there).
sh tests/gpu/engine_gpu.sh "${SM120_BUILD:-build}" >"$log" 2>&1
count
python3 tests/gpu/engine_hf.py --build "${SM120_BUILD:-build}" --backends cpu,gpu check >"$log" 2>&1
count
echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

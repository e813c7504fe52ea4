#!/bin/sh
# oracle_inkling.sh - SGLang 0.5.23's own inkling grouped GEMM
# (grouped_gemm_triton, tests/gpu/oracle_inkling.py) against the shim's
# reroute (GPU): one process launched plainly, then under `sm120 run --mode
# reroute --target sm120` (one Triton cache, so each kernel compiles once);
# its bf16 cases (the decode branch, 110592 B, and the prefill branch,
# 147456 B as sm_90 compiles it) run eagerly and in a CUDA graph and are
# judged against float64 next to SGLang's own error, its fp16 case must be
# refused at launch, and the JSON log must hold exactly those reroutes and
# that refusal (tests/gpu/oracle_common.py logcheck).  The package comes
# from tests/oracle/fetch.sh (into $SM120_ORACLE, default $SM120_BUILD/oracle);
# without it this prints one "not ok" naming the command.  Prints
# "ok - ..." / "not ok - ..." lines.
set -u
B=${SM120_BUILD:-build}
sm120=$(pwd)/$B/sm120
export SM120_ORACLE="${SM120_ORACLE:-$B/oracle}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TRITON_CACHE_DIR="$work/triton"

. tests/gpu/step.sh   # step NAME OUT CMD...

f=sglang-0.5.23/sglang/kernels/ops/moe/inkling_moe.py
if [ ! -f "$SM120_ORACLE/$f" ]; then
	echo "not ok - $SM120_ORACLE/$f is missing: run sh tests/oracle/fetch.sh $SM120_ORACLE"
	exit 0
fi
py=tests/gpu/oracle_inkling.py
step "SGLang grouped_gemm_triton without the shim" "$work/plain.out" \
	python3 $py run "$work/plain.pt" inkling
step "SGLang grouped_gemm_triton under sm120 run --mode reroute --target sm120" \
	"$work/shim.out" "$sm120" run --mode reroute --target sm120 \
	--log "$work/ink.%p.jsonl" -- python3 $py run "$work/shim.pt" inkling
step "check SGLang grouped_gemm_triton" "$work/check.out" \
	python3 $py check "$work/plain.pt" "$work/shim.pt"
step "the shim's log of SGLang grouped_gemm_triton" "$work/log.out" \
	python3 tests/gpu/oracle_common.py logcheck "$work/shim.pt.json" "$work"/ink.*.jsonl

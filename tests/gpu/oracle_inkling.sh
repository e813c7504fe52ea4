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
. tests/gpu/oracle_suite.sh   # $B, $sm120, $work; oracle_suite

oracle_suite "SGLang grouped_gemm_triton" tests/gpu/oracle_inkling.py tests/gpu/oracle_common.py \
	inkling \
	sglang-0.5.23/sglang/kernels/ops/moe/inkling_moe.py

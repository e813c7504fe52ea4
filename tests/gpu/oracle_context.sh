#!/bin/sh
# oracle_context.sh - SGLang's own context_attention_fwd (0.5.8, 0.5.9,
# 0.5.23; tests/gpu/oracle_context.py) against the shim's reroute (GPU): one
# process launched plainly, then under `sm120 run --mode reroute --target
# sm120` (one Triton cache, so each kernel compiles once); its head-size-256
# bf16 cases run eagerly and in a CUDA graph and are judged against float64
# next to SGLang's own error, its head-size-192 and fp16 cases must be
# refused, and the JSON log must hold exactly those reroutes and refusals.
# The packages come from tests/oracle/fetch.sh (into $SM120_ORACLE, default
# $SM120_BUILD/oracle); without them this prints one "not ok" naming the
# command.  Prints "ok - ..." / "not ok - ..." lines.
. tests/gpu/oracle_suite.sh   # $B, $sm120, $work; oracle_suite

oracle_suite "SGLang context_attention_fwd" tests/gpu/oracle_context.py tests/gpu/oracle_context.py \
	"" \
	sglang-0.5.8/sglang/srt/layers/attention/triton_ops/prefill_attention.py \
	sglang-0.5.9/sglang/srt/layers/attention/triton_ops/prefill_attention.py \
	sglang-0.5.23/sglang/kernels/ops/attention/prefill_attention.py

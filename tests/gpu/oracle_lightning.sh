#!/bin/sh
# oracle_lightning.sh - vLLM's (0.33.0) and SGLang's (0.5.9, 0.5.23) own
# lightning attention (tests/gpu/oracle_lightning.py) against the shim's
# reroute (GPU): one process launched plainly, then under `sm120 run --mode
# reroute --target sm120` (one Triton cache, so each kernel compiles once);
# the whole lightning_attention call and `_fwd_kv_parallel` alone run
# eagerly and in a CUDA graph and are judged against float64 next to the
# framework's own error, the 8-warp launch must be refused, and the JSON log
# must hold exactly those reroutes and that refusal.  The packages come from
# tests/oracle/fetch.sh (into $SM120_ORACLE, default $SM120_BUILD/oracle);
# without them this prints one "not ok" naming the command.  Prints
# "ok - ..." / "not ok - ..." lines.
. tests/gpu/oracle_suite.sh   # $B, $sm120, $work; oracle_suite

oracle_suite "lightning attention" tests/gpu/oracle_lightning.py tests/gpu/oracle_lightning.py "" \
	vllm-0.33.0/vllm/model_executor/layers/lightning_attn.py \
	sglang-0.5.9/sglang/srt/layers/attention/linear/lightning_attn.py \
	sglang-0.5.23/sglang/kernels/ops/attention/linear/lightning_attn.py

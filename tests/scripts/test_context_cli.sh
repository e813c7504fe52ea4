#!/bin/sh
# test_context_cli.sh - SGLang's own context_attention_fwd (0.5.8, 0.5.9,
# 0.5.23), compiled by Triton for sm_120 and sm_90 without a GPU, through the
# shim's decision: the cases of tests/oracle/context_launches.py (vision-tower
# head sizes that fit, head size 256 rerouted by rule sglang-context-attention
# to attn_extend_256_bf16, every other over-limit launch refused with its
# reason), checked by test_oracle_cli.sh's machinery with and without the
# compiled facts.
SM120_ORACLE_GEN=tests/oracle/context_launches.py exec sh tests/scripts/test_oracle_cli.sh

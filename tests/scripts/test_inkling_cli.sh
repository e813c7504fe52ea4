#!/bin/sh
# test_inkling_cli.sh - SGLang's own inkling grouped GEMM (0.5.23
# inkling_moe.py grouped_gemm_triton), compiled by Triton for sm_120 and
# sm_90 without a GPU, through the shim's decision: the cases of
# tests/oracle/inkling_launches.py (the decode branch rerouted by rule
# sglang-inkling-moe to moe_gemm_bf16_m16 on both, the prefill branch fitting
# on sm_120 and rerouted to moe_gemm_bf16_m128 on sm_90, fp16, fp32 and K 1000
# refused with their reasons), checked by test_oracle_cli.sh's machinery with
# and without the compiled facts.
SM120_ORACLE_GEN=tests/oracle/inkling_launches.py exec sh tests/scripts/test_oracle_cli.sh

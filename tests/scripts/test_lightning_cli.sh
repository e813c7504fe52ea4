#!/bin/sh
# test_lightning_cli.sh - vLLM's (0.33.0) and SGLang's (0.5.9, 0.5.23) own
# lightning_attention, compiled by Triton for sm_120 and sm_90 without a
# GPU, through the shim's decision: the cases of
# tests/oracle/lightning_launches.py (_fwd_kv_parallel at d = e = 128
# rerouted by rule lightning-kv-parallel to lightning_kv_d128_e128_fp32,
# d = e = 64 and the call's three other kernels fitting, e = 256 refused
# with its reason), checked by test_oracle_cli.sh's machinery with and
# without the compiled facts.
SM120_ORACLE_GEN=tests/oracle/lightning_launches.py exec sh tests/scripts/test_oracle_cli.sh

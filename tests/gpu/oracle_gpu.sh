#!/bin/sh
# oracle_gpu.sh - the frameworks' own kernels, from their released packages,
# against the shim's reroute (GPU): vLLM 0.33.0's and 0.23.0's TRITON_MLA
# decode (tests/gpu/oracle_decode.py; vllm-mla-decode-2026-06 and -2026-03),
# SGLang 0.5.8 / 0.5.9 / 0.5.14 / 0.5.15 / 0.5.17 / 0.5.18 / 0.5.23's extend
# attention (oracle_extend.py: one release of every signature),
# SGLang 0.5.9 / 0.5.23's and vLLM 0.33.0's fused_moe_kernel and SGLang's
# fused_moe_kernel_gptq_awq (oracle_moe.py),
# vLLM 0.33.0's naive small-batch assignment (oracle_naive.py).
# Each run below is one process, launched plainly and then under
# `sm120 run --mode reroute --target sm120` (the runs of one phase side by
# side, sharing one Triton cache, so every kernel compiles once); its
# rerouted cases run eagerly and in a CUDA graph and are judged against
# float64 next to the framework's own error, its refused cases must be
# refused; the JSON log of each shim run must hold exactly the launches and
# refusals its cases call for (tests/gpu/oracle_common.py logcheck, counted
# from the cases run).  Every judged output prints a "# table | ..." line.
# The packages come from tests/oracle/fetch.sh (into $SM120_ORACLE, default
# $SM120_BUILD/oracle); a run whose package files are missing prints one
# "not ok" naming the command.  Prints "ok - ..." / "not ok - ..." lines.
. tests/gpu/env.sh   # $B, $sm120, $SM120_ORACLE, $work (one Triton cache)

. tests/gpu/step.sh   # step NAME OUT CMD...

O=$SM120_ORACLE
SG9=sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_kernels.py
SG23=sglang/kernels/ops/moe/fused_moe_triton_kernels.py
EX9=sglang/srt/layers/attention/triton_ops/extend_attention.py
EX23=sglang/kernels/ops/attention/extend_attention.py
# name|script|groups|shim settings|package files the run needs
RUNS="decode|oracle_decode.py|vllm|--set page_size=16|$O/vllm-0.33.0/vllm/v1/attention/ops/triton_decode_attention.py
decode23|oracle_decode.py|vllm23|--set page_size=16|$O/vllm-0.23.0/vllm/v1/attention/ops/triton_decode_attention.py
extend|oracle_extend.py|v058 v059||$O/sglang-0.5.8/$EX9 $O/sglang-0.5.9/$EX9
extend23|oracle_extend.py|v0523||$O/sglang-0.5.23/$EX23
extendmid|oracle_extend.py|v0514 v0515 v0517 v0518||$O/sglang-0.5.14/$EX9 $O/sglang-0.5.15/$EX9 $O/sglang-0.5.17/$EX23 $O/sglang-0.5.18/$EX23
moe|oracle_moe.py|sglang|--set top_k=3 --set hidden_size=1024|$O/sglang-0.5.9/$SG9
moe23|oracle_moe.py|gptq main||$O/sglang-0.5.9/$SG9 $O/sglang-0.5.23/$SG23
moevllm|oracle_moe.py|vllm||$O/vllm-0.33.0/vllm/model_executor/layers/fused_moe/fused_moe.py
naive|oracle_naive.py|||$O/vllm-0.33.0/vllm/model_executor/layers/fused_moe/fused_moe.py"

# each FUNCTION - FUNCTION NAME SCRIPT GROUPS SETTINGS for every run whose files
# exist, in this shell (so the jobs it starts in the background are this shell's)
each() {
	while IFS='|' read -r name script groups settings files; do
		missing=
		for f in $files; do
			[ -f "$f" ] || missing="$missing $f"
		done
		if [ -n "$missing" ]; then
			[ "$1" = plain ] && echo "not ok - $name: missing$missing: run sh tests/oracle/fetch.sh $O"
			continue
		fi
		"$1" "$name" "$script" "$groups" "$settings" </dev/null
	done <<EOF
$RUNS
EOF
}

# background NAME OUT CMD... - run CMD with its output in OUT and its status in OUT.rc
background() {
	out=$2
	shift 2
	("$@" >"$out" 2>&1; echo $? >"$out.rc") &
}

# collect NAME OUT - what step.sh's step prints, for a run that background started
collect() {
	name=$1 out=$2
	grep -E '^(ok |not ok|# )' "$out"
	grep '^sm120shim:' "$out" | sort -u | head -n 4 | sed 's/^/# /'
	rc=$(cat "$out.rc" 2>/dev/null || echo lost)
	if [ "$rc" != 0 ]; then
		echo "not ok - $name exited $rc"
		grep -vE '^(ok |not ok|# )' "$out" | tail -n 15 | sed 's/^/#   /'
	fi
}

plain() {
	# groups: one word each
	# shellcheck disable=SC2086
	background "$1" "$work/$1-plain.out" python3 "tests/gpu/$2" run "$work/$1-plain.pt" $3
}
shim() {
	# settings and groups: one word each
	# shellcheck disable=SC2086
	background "$1" "$work/$1-shim.out" "$sm120" run --mode reroute --target sm120 $4 \
		--log "$work/log-$1.%p.jsonl" -- python3 "tests/gpu/$2" run "$work/$1-shim.pt" $3
}
judge() {
	background "$1" "$work/$1-check.out" python3 "tests/gpu/$2" check "$work/$1-plain.pt" \
		"$work/$1-shim.pt"
}
report() {
	collect "$1: the framework's kernels without the shim" "$work/$1-plain.out"
	collect "$1: under sm120 run --mode reroute --target sm120" "$work/$1-shim.out"
	collect "$1: rerouted outputs against float64" "$work/$1-check.out"
	logs=$(ls "$work"/log-"$1".*.jsonl 2>/dev/null)
	# the log files: one word each
	# shellcheck disable=SC2086
	case $2 in
	oracle_naive.py)   # its own check of the log (vLLM's naive assignment, row mode)
		step "$1: the shim's JSON log" "$work/$1-log.out" python3 "tests/gpu/$2" log $logs ;;
	*)
		step "$1: the shim's JSON log against the cases run" "$work/$1-log.out" \
			python3 tests/gpu/oracle_common.py logcheck "$work/$1-shim.pt.json" $logs ;;
	esac
}

if [ ! -x "$sm120" ]; then
	echo "not ok - $sm120 is missing: build first"
	exit 0
fi
start=$(date +%s)
each plain
wait
each shim
wait
each judge
wait
each report
echo "# oracle_gpu.sh: $(($(date +%s) - start)) s"

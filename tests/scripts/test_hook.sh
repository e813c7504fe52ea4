#!/bin/sh
# test_hook.sh - the Python hook (shim/python) in a Python process under the
# shim and the fake driver (an H200), no GPU: Triton 3.6's own
# CompiledKernel._init_handles, with its driver utilities as the ctypes
# calls Triton's driver.c makes (tests/oracle/hook_check.py), on SGLang
# 0.5.9's real fused_moe_kernel, a kernel no rule names, and vLLM 0.33.0's
# fused_moe_kernel in its naive small-batch assignment, launched, and SGLang's
# compiled with DISABLE_MMA_V3=1 (mma.sync on sm_90), launched.  Per mode and
# advertise setting: which kernels Triton loads, which raise Triton's own
# OutOfResources with which limit, what the log says, and that the hook
# leaves PYTHONPATH and other sitecustomize files working.
# Prints "ok - ..." / "not ok - ...".
set -u
echo 1..21 # plan: the number of checks below
B=${SM120_BUILD:-build}
SHIM=$(pwd)/$B/libsm120shim.so
py=$B/oracle-venv/bin/python3
export LD_LIBRARY_PATH="$(pwd)/$B/test/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run NAME ENV...: hook_check.py under the shim with ENV (target sm120)
run() {
	name=$1
	shift
	env LD_PRELOAD="$SHIM" SM120SHIM_TARGET=sm120 SM120SHIM_LOG="$work/$name.jsonl" \
		SM120_ORACLE="$B/oracle" "$@" "$py" tests/oracle/hook_check.py \
		>"$work/$name.out" 2>"$work/$name.err"
	touch "$work/$name.jsonl"
}
# expect NAME DESCRIPTION LINE...: every LINE is in NAME's output
expect() {
	name=$1 desc=$2
	shift 2
	for line in "$@"; do
		if ! grep -qxF "$line" "$work/$name.out"; then
			echo "not ok - $desc: no '$line'"
			sed 's/^/#   /' "$work/$name.out" "$work/$name.err" | tail -n 20
			return
		fi
	done
	echo "ok - $desc"
}

run reroute SM120SHIM_MODE=reroute
expect reroute "reroute: the shim's constructor put the hook on PYTHONPATH and it wrapped Triton" \
	"hook installed"
expect reroute "reroute: Triton loads the kernel a rule reroutes past the limit (197632 B, SGLang's block-FP8 default)" \
	"moe-rule-tile loaded 197632"
expect reroute "reroute: kernels no rule reroutes get Triton's own OutOfResources with SM120's limit, before and after the admitted load" \
	"plain-over OutOfResources 196608 101376" "plain-over-after OutOfResources 163840 101376" \
	"plain-fits loaded 40960"
grep -q '"event":"triton_load","action":"admit".*"kernel":"fused_moe_kernel".*"rule":"sglang-moe-2026-03".*"dynamic_smem":197632' "$work/reroute.jsonl" &&
	grep -q '"event":"set_attribute","action":"accept".*"kernel":"fused_moe_kernel".*"dynamic_smem":197632' "$work/reroute.jsonl" &&
	grep -q '"event":"triton_load","action":"refuse".*"kernel":"sm120_test_matmul".*"dynamic_smem":196608' "$work/reroute.jsonl" &&
	grep -q "Triton kernel sm120_test_matmul needs 196608 B .*: Triton raises OutOfResources, as on that GPU" "$work/reroute.err" &&
	echo "ok - the log has each load's decision; Triton was allowed exactly the admitted kernel's need" ||
	{ echo "not ok - reroute log"; sed 's/^/#   /' "$work/reroute.jsonl" "$work/reroute.err"; }
grep -qx "describe moe-rule-tile .*BLOCK_SIZE_M=128;BLOCK_SIZE_N=256;BLOCK_SIZE_K=128;GROUP_SIZE_M=32;MUL_ROUTED_WEIGHT=0;top_k=8;compute_type=bf16;.*a_ptr:\*fp8e4nv;b_ptr:\*fp8e4nv;c_ptr:\*bf16;.*sorted_token_ids_ptr:\*i32;.*" "$work/reroute.out" &&
	echo "ok - the hook records the constexprs and argument types Triton compiled in (top_k, compute type, FP8 operands)" ||
	{ echo "not ok - describe"; grep describe "$work/reroute.out" | sed 's/^/#   /'; }

# vLLM 0.33.0's fused_moe_kernel in its naive small-batch assignment, alone
# (the fake gives every function one handle): loaded with the hook's facts
# for vllm-moe-main, its launch planned on moe_gemm's row mode (which the
# fake cannot run); without the facts (no hook) the launch is refused.
run naive SM120SHIM_MODE=reroute HOOK_CHECK_CASES=vllm-naive
expect naive "reroute: vLLM's naive-assignment fused_moe_kernel (140288 B on sm_90) loads for its rule" \
	"vllm-naive loaded 140288"
grep -q '"event":"triton_load","action":"admit".*"kernel":"fused_moe_kernel".*"rule":"vllm-moe-main".*"dynamic_smem":140288' "$work/naive.jsonl" &&
	grep -q '"event":"launch".*"decision":"reroute".*"kernel":"fused_moe_kernel".*"compiled":".*naive_block_assignment=1' "$work/naive.jsonl" &&
	grep -q "not rerouted: no current CUDA context to launch moe_gemm_fp8_d16 in" "$work/naive.err" &&
	"$B/sm120" route --json --target sm120 "$work/naive.jsonl" 2>&1 |
	grep -q '"event":"launch","kernel":"fused_moe_kernel","decision":"reroute","rule":"vllm-moe-main","rerouted_to":"moe_gemm_fp8_d16"' &&
	echo "ok - its launch, as vLLM makes it, is planned by vllm-moe-main on moe_gemm_fp8_d16 (the decode kernel's row mode; sm120 route agrees)" ||
	{ echo "not ok - naive launch"; sed 's/^/#   /' "$work/naive.jsonl" "$work/naive.err"; }
run naivebare SM120SHIM_MODE=reroute SM120SHIM_ADVERTISE=232448 HOOK_CHECK_CASES=vllm-naive
grep -q "vllm-naive launch [1-9]" "$work/naivebare.out" &&
	grep -q "not rerouted: .*only with the compiled facts of the Python hook" "$work/naivebare.err" &&
	echo "ok - without the hook's facts the naive launch is refused, saying so" ||
	{ echo "not ok - naive launch without facts"; sed 's/^/#   /' "$work/naivebare.out" "$work/naivebare.err"; }

# SGLang's kernel compiled with DISABLE_MMA_V3=1, alone: mma.sync's 148480 B
# on sm_90, not wgmma's 197632.  The hook's mma_v3=0 lets the shim check it
# against the mma.sync allocation: loaded for its rule, its launch planned;
# without the entry (a hook that does not say) the shim expects wgmma's size.
run nov3 SM120SHIM_MODE=reroute HOOK_CHECK_CASES=sglang-nov3
expect nov3 "reroute: SGLang's fused_moe_kernel compiled with DISABLE_MMA_V3=1 (148480 B on sm_90) loads for its rule" \
	"sglang-nov3 loaded 148480"
grep -q "^describe sglang-nov3 num_warps=8;num_stages=4;mma_v3=0;" "$work/nov3.out" &&
	grep -q "^describe moe-rule-tile num_warps=8;num_stages=4;mma_v3=1;" "$work/reroute.out" &&
	grep -q '"event":"triton_load","action":"admit".*"kernel":"fused_moe_kernel".*"rule":"sglang-moe-2026-03".*"dynamic_smem":148480' "$work/nov3.jsonl" &&
	grep -q '"event":"launch".*"decision":"reroute".*"kernel":"fused_moe_kernel".*"compiled":"[^"]*mma_v3=0' "$work/nov3.jsonl" &&
	grep -q "not rerouted: no current CUDA context to launch moe_gemm_fp8_[a-z0-9_]* in" "$work/nov3.err" &&
	"$B/sm120" route --json --target sm120 "$work/nov3.jsonl" 2>&1 |
	grep -q '"event":"launch","kernel":"fused_moe_kernel","decision":"reroute","rule":"sglang-moe-2026-03","rerouted_to":"moe_gemm_fp8_' &&
	echo "ok - the hook says mma_v3=0 (1 without DISABLE_MMA_V3), and the launch is planned by sglang-moe-2026-03 on a moe_gemm FP8 kernel (sm120 route agrees)" ||
	{ echo "not ok - DISABLE_MMA_V3 launch"; sed 's/^/#   /' "$work/nov3.out" "$work/nov3.jsonl" "$work/nov3.err"; }
run unsaid SM120SHIM_MODE=reroute HOOK_CHECK_CASES=sglang-nov3-unsaid
grep -qx "sglang-nov3 OutOfResources 148480 101376" "$work/unsaid.out" &&
	grep -q "has 148480 B of dynamic shared memory, but Triton compiles 197632 B on sm_90 .*disagree" "$work/unsaid.err" &&
	echo "ok - without the mma_v3 entry the shim expects wgmma's 197632 B on sm_90 and refuses it, saying so" ||
	{ echo "not ok - DISABLE_MMA_V3 without the fact"; sed 's/^/#   /' "$work/unsaid.out" "$work/unsaid.err"; }

# A real SM120 card (the fake reports 101376 B), target auto: the same.
run card SM120SHIM_MODE=reroute SM120SHIM_TARGET= FAKECUDA_OPTIN=101376
expect card "a real SM120 card, target auto: the rule's kernel loads past the card's limit, the others get OutOfResources at 101376" \
	"moe-rule-tile loaded 197632" "plain-over OutOfResources 196608 101376" \
	"plain-over-after OutOfResources 163840 101376" "plain-fits loaded 40960"

run enforce SM120SHIM_MODE=enforce
expect enforce "enforce: every over-limit kernel gets Triton's OutOfResources, as on the card" \
	"hook installed" "moe-rule-tile OutOfResources 197632 101376" \
	"plain-over OutOfResources 196608 101376" "plain-fits loaded 40960"

run diagnose SM120SHIM_MODE=diagnose
expect diagnose "diagnose: Triton sees the device's own limit and loads everything" \
	"moe-rule-tile loaded 197632" "plain-over loaded 196608" "plain-over-after loaded 163840"
! grep -q '"event":"triton_load"' "$work/diagnose.jsonl" &&
	echo "ok - diagnose logs no load decision (its launches are logged)" ||
	{ echo "not ok - diagnose logged a load decision"; sed 's/^/#   /' "$work/diagnose.jsonl"; }

run off SM120SHIM_MODE=off
expect off "mode off: no hook (PYTHONPATH untouched), Triton as without the shim" \
	"hook absent" "moe-rule-tile loaded 197632" "plain-over loaded 196608"

run advoff SM120SHIM_MODE=reroute SM120SHIM_ADVERTISE=off
expect advoff "advertise off: no hook, nothing shown above SM120's limit (nothing rerouted from Triton, nothing worse than the card)" \
	"hook absent" "moe-rule-tile OutOfResources 197632 101376" "plain-over OutOfResources 196608 101376"

run advall SM120SHIM_MODE=reroute SM120SHIM_ADVERTISE=232448
expect advall "advertise bytes: every caller is told them (the old behaviour, kernels no rule takes load too)" \
	"hook absent" "moe-rule-tile loaded 197632" "plain-over loaded 196608"

# Another sitecustomize on PYTHONPATH still runs, after the hook; the
# directory is not added twice by a child under the shim.
mkdir -p "$work/site"
echo 'import os; print("user sitecustomize ran", flush=True)' >"$work/site/sitecustomize.py"
env LD_PRELOAD="$SHIM" SM120SHIM_TARGET=sm120 PYTHONPATH="$work/site" "$py" -c '
import os, subprocess, sys
import sm120shim_hook
print("child", subprocess.run([sys.executable, "-c", "import os; print(os.environ[\"PYTHONPATH\"])"],
      capture_output=True, text=True).stdout.splitlines()[-1])
print("installed", any(type(f).__name__ == "_Finder" for f in sys.meta_path))' >"$work/chain.out" 2>&1
hook="$(pwd)/$B/python"
grep -qx "user sitecustomize ran" "$work/chain.out" && grep -qx "installed True" "$work/chain.out" &&
	echo "ok - a user's sitecustomize on PYTHONPATH still runs, and the hook is installed" ||
	{ echo "not ok - sitecustomize chain"; sed 's/^/#   /' "$work/chain.out"; }
grep -qxF "child $hook:$work/site" "$work/chain.out" &&
	echo "ok - PYTHONPATH keeps the user's entries after the hook's, once in a child" ||
	{ echo "not ok - PYTHONPATH"; sed 's/^/#   /' "$work/chain.out"; }

# The exported calls never fail: no name, an unknown handle, end without begin.
env LD_PRELOAD="$SHIM" SM120SHIM_TARGET=sm120 SM120SHIM_LOG="$work/abi.jsonl" "$py" -c '
import sm120shim_hook
begin, end = sm120shim_hook._calls()
print(begin(None, 1 << 30, 256, None), end(0), end(12345), begin(b"x", 0, 0, b";;=:"), end(0))' \
	>"$work/abi.out" 2>&1
grep -qx "0 0 0 0 0" "$work/abi.out" &&
	echo "ok - the hook's calls answer 0 to no name, an unknown handle and an end without a begin" ||
	{ echo "not ok - abi"; sed 's/^/#   /' "$work/abi.out"; }

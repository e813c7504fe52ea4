#!/bin/sh
# reroute_gpu.sh - the shim's reroute mode on the frameworks' own attention
# kernels (GPU), from their released packages (tests/oracle/fetch.sh, in
# $SM120_ORACLE, default $SM120_BUILD/oracle): SGLang's extend attention
# `_fwd_kernel` (106496 B) at one release of every signature the rules claim
# (0.5.8, 0.5.9, 0.5.14, 0.5.15, 0.5.17, 0.5.18, 0.5.23, and 0.5.23 with a
# batch of 1) and vLLM's TRITON_MLA decode `_fwd_grouped_kernel_stage1`
# (102400 B with an FP8 cache) at 0.33.0 and 0.23.0, through their own host
# functions (tests/gpu/test_reroute.py), SM120 emulated on a bigger GPU.  Each
# case runs plainly and under `sm120 run --mode reroute --target sm120`,
# eagerly and inside a CUDA graph; the results are compared with a float64
# reference next to the framework kernel's own error (test_reroute.py check);
# the JSON log must show each over-limit launch, in the order made, rerouted
# by the rule of its release with its cubin parameter count and nothing
# refused (test_reroute.py logcheck); SGLang 0.5.9 with an FP8 cache must be
# refused (its own process), and `--mode enforce` must reproduce Triton's
# OutOfResources.
# Prints "ok - ..." / "not ok - ...".
. tests/gpu/env.sh   # $B, $sm120, $SM120_ORACLE, $work (one Triton cache)
py=tests/gpu/test_reroute.py

. tests/gpu/step.sh   # step NAME OUT CMD...

if [ ! -x "$sm120" ]; then
	echo "not ok - $sm120 is missing: build first"
	exit 0
fi

if [ ! -f "$SM120_ORACLE/sglang-0.5.23/sglang/kernels/ops/attention/extend_attention.py" ]; then
	echo "not ok - $SM120_ORACLE lacks the frameworks' packages: run sh tests/oracle/fetch.sh $SM120_ORACLE"
	exit 0
fi

# SGLang compiles the KV cache dtype into the kernel, so the shim is told it
# (--set kv_cache_dtype: SM120SHIM_KV_CACHE_DTYPE) and each dtype runs in its
# own process.  vLLM compiles its page size in and a page stride cannot tell
# it, so the shim is told that too (--set page_size, vLLM's --block-size).
for kv in bf16 fp8_e4m3; do
	for mode in run graph; do
		plain=$work/$mode-plain-$kv
		shim=$work/$mode-shim-$kv
		step "$mode --kv $kv without the shim" "$plain.out" python3 $py $mode "$plain" --kv $kv
		step "$mode --kv $kv under sm120 run --mode reroute --target sm120" "$shim.out" \
			"$sm120" run --mode reroute --target sm120 --set kv_cache_dtype=$kv --set page_size=64 \
			--log "$work/rr-$mode-$kv.%p.jsonl" -- python3 $py $mode "$shim" --kv $kv
		step "check $mode $kv" "$work/check-$mode-$kv.out" python3 $py check "$plain" "$shim"
		step "log $mode $kv" "$work/log-$mode-$kv.out" \
			python3 $py logcheck "$shim" "$work"/rr-$mode-$kv.*.jsonl
	done
done

# SGLang 0.5.9 with an FP8 cache: the shim has its rule but must refuse the
# launch (that release reads FP8 keys without k/v scales: not verified) as an
# SM120 card would refuse it; in a process of its own, the failed launch being
# the point.  The log must say so: a refused _fwd_kernel launch with 0.5.9's
# layout (25 cubin parameters) whose reason names the rule and "not verified".
step "refuse under sm120 run --mode reroute --target sm120" "$work/refuse.out" \
	"$sm120" run --mode reroute --target sm120 --set kv_cache_dtype=fp8_e4m3 \
	--log "$work/refuse.%p.jsonl" -- python3 $py refuse
grep -qE '^(ok|not ok) - refuse' "$work/refuse.out" || echo "not ok - refuse printed no result"
if python3 - "$work" <<'PY'
import glob, json, sys
ev = [json.loads(l) for f in glob.glob(f"{sys.argv[1]}/refuse.*.jsonl") for l in open(f)]
launch = [e for e in ev if e.get("event") == "launch" and e.get("kernel") == "_fwd_kernel"]
for e in launch[:3]:
    print(f"# refuse: launch {e.get('action')}, {len(e.get('param_sizes') or [])} parameters: "
          f"{e.get('reason')}")
ok = bool(launch)
for e in launch:
    why = e.get("reason") or ""
    ok &= e.get("action") == "refuse" and len(e.get("param_sizes") or []) == 25
    ok &= "not verified" in why and "sglang-extend-2025-08" in why
sys.exit(0 if ok else 1)
PY
then echo "ok - refuse: the log shows SGLang 0.5.9's _fwd_kernel launch with an FP8 cache refused (rule sglang-extend-2025-08: not verified)"
else echo "not ok - refuse: no refused SGLang 0.5.9 _fwd_kernel launch whose reason says 'not verified' in the JSON log"; fi

# enforce: the launches must fail exactly as on an SM120 card.
step "several contexts in one process" "$work/contexts.out" \
	"$sm120" run --mode reroute --target sm120 --set page_size=64 -- \
	"$B/test/gpu_reroute_contexts" "$B/test/framework_stage1.cubin"

step "enforce under sm120 run --mode enforce --target sm120" "$work/enforce.out" \
	"$sm120" run --mode enforce --target sm120 -- python3 $py enforce
grep -qE '^(ok|not ok) - enforce' "$work/enforce.out" || echo "not ok - enforce printed no result"

#!/bin/sh
# reroute_gpu.sh - the shim's reroute mode on real Triton launches (GPU):
# stand-ins with the launch interfaces of SGLang's extend attention
# (`_fwd_kernel`, 106496 B, in its 2026-03, v0.5.9 and upstream-main
# signatures, main also with a batch of 1), SGLang's own released 0.5.8 and
# 0.5.9 extend kernels (tests/oracle/fetch.sh; their 25-parameter layout is
# the v0.5.9 one) and vLLM's TRITON_MLA decode
# (`_fwd_grouped_kernel_stage1`, 102400 B with an FP8 cache), SM120 emulated
# on a bigger GPU.  Each case runs plainly and under
# `sm120 run --mode reroute --target sm120`, eagerly and inside a CUDA graph;
# the results are compared with a float64 reference
# (tests/gpu/test_reroute.py check), the JSON log must show each launch
# rerouted by the rule of its signature and no refusal, the v0.5.9 signature
# with an FP8 cache must be refused (its own process), and `--mode enforce`
# must reproduce Triton's OutOfResources.  Prints "ok - ..." / "not ok - ...".
set -u
B=${SM120_BUILD:-build}
sm120=$(pwd)/$B/sm120
py=tests/gpu/test_reroute.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TRITON_CACHE_DIR="$work/triton"   # compiled once, shared by the runs below

. tests/gpu/step.sh   # step NAME OUT CMD...

if [ ! -x "$sm120" ]; then
	echo "not ok - $sm120 is missing: build first"
	exit 0
fi

# The stand-ins' shared memory and cubin parameters on this GPU, against the
# figures the shim's rules match (also fills the Triton cache).
step "standins.py smem" "$work/smem.out" python3 tests/gpu/standins.py smem

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
		if python3 - "$work" "$mode" "$kv" <<'PY'
import glob, json, sys
work, mode, kv = sys.argv[1:4]
# The rules each stand-in's interface is written to match (rules/*.json), told
# apart by the launch's cubin parameter count (standins.py smem checks them):
# SGLang extend 2026-03: 27, v0.5.9: 25, upstream main: 37, main with one
# sequence: 36 (compact_batch_size == 1 compiled in: the 2026-07-10 layout as
# well, which the shim reads identically, so either rule may take it); vLLM
# decode stage 1: 23.
rules = {("_fwd_kernel", 27): {"sglang-extend-2026-03"},
         ("_fwd_kernel", 25): {"sglang-extend-2025-08"},
         ("_fwd_kernel", 37): {"sglang-extend-main"},
         ("_fwd_kernel", 36): {"sglang-extend-main", "sglang-extend-2026-07-10"},
         ("_fwd_grouped_kernel_stage1", 23): {"vllm-mla-decode-2026-06"}}
# What each dtype launches (test_reroute.py make_cases): v0.5.9 and main with
# one sequence run with bf16 only; the bf16 decode (63488 B) fits.
want = {("_fwd_kernel", 27), ("_fwd_kernel", 37)}
want |= ({("_fwd_kernel", 25), ("_fwd_kernel", 36)} if kv == "bf16"
         else {("_fwd_grouped_kernel_stage1", 23)})
ev = [json.loads(l) for f in glob.glob(f"{work}/rr-{mode}-{kv}.*.jsonl") for l in open(f)]
launch = [e for e in ev if e.get("event") == "launch"]
rr = [e for e in launch if e.get("action") == "reroute"]
refused = [e for e in ev if e.get("action") == "refuse"]
got = {}
for e in rr:
    key = (e.get("kernel"), len(e.get("param_sizes") or []))
    got.setdefault(key, set()).add((e.get("rule"), e.get("rerouted_to")))
print(f"# {mode} {kv}: {len(ev)} events, {len(rr)} reroutes: "
      + "; ".join(f"{k}/{n} -> {sorted(v)}" for (k, n), v in sorted(got.items())))
for k, n in sorted(want - set(got)):
    print(f"# not rerouted: {k} with {n} parameters")
for k, n in sorted(set(got) - want):
    print(f"# rerouted, not launched by the cases: {k} with {n} parameters")
for (k, n), v in sorted(got.items()):
    for r in sorted({r for r, _ in v} - rules.get((k, n), set()), key=str):
        print(f"# {k} with {n} parameters rerouted by {r}, expected {sorted(rules.get((k, n), ()))}")
for e in refused[:3]:
    print(f"# refused: {e.get('kernel')}: {e.get('reason')}")
ok = not refused and set(got) == want
ok &= all(e.get("rerouted_to") for e in rr)
ok &= all(r in rules.get(k, ()) for k, v in got.items() for r, _ in v)
# the bf16 decode (63488 B) fits: the shim must not even log it
ok &= kv != "bf16" or not [e for e in launch if e.get("kernel") == "_fwd_grouped_kernel_stage1"]
sys.exit(0 if ok else 1)
PY
		then echo "ok - $mode $kv: the log shows $( [ $kv = bf16 ] && echo "_fwd_kernel in the 2026-03, v0.5.9, main and main batch-1 signatures" || echo "_fwd_kernel in the 2026-03 and main signatures and _fwd_grouped_kernel_stage1") rerouted by the rules of their signatures, nothing refused"
		else echo "not ok - $mode $kv: reroute events in the JSON log"; fi
	done
done

# The v0.5.9 signature with an FP8 cache: the shim has its rule but must refuse
# the launch (how that release scales FP8 keys is not verified) as an SM120
# card would refuse it; in a process of its own, the failed launch being the
# point.  The log must say so: a refused _fwd_kernel launch with the v0.5.9
# layout (25 parameters) whose reason names the rule and "not verified".
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
then echo "ok - refuse: the log shows the v0.5.9 _fwd_kernel launch with an FP8 cache refused (rule sglang-extend-2025-08: not verified)"
else echo "not ok - refuse: no refused v0.5.9 _fwd_kernel launch whose reason says 'not verified' in the JSON log"; fi

# enforce: the launches must fail exactly as on an SM120 card.
step "several contexts in one process" "$work/contexts.out" \
	"$sm120" run --mode reroute --target sm120 --set page_size=64 -- \
	"$B/test/gpu_reroute_contexts" "$B/test/framework_stage1.cubin"

step "enforce under sm120 run --mode enforce --target sm120" "$work/enforce.out" \
	"$sm120" run --mode enforce --target sm120 -- python3 $py enforce
grep -qE '^(ok|not ok) - enforce' "$work/enforce.out" || echo "not ok - enforce printed no result"

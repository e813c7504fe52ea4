#!/bin/sh
# reroute_gpu.sh - the shim's reroute mode on real Triton launches (GPU):
# stand-ins with the launch interfaces of SGLang's extend attention
# (`_fwd_kernel`, 106496 B) and vLLM's TRITON_MLA decode
# (`_fwd_grouped_kernel_stage1`, 102400 B with an FP8 cache), SM120 emulated
# on a bigger GPU.  Each case runs plainly and under
# `sm120 run --mode reroute --target sm120`, eagerly and inside a CUDA graph;
# the results are compared with a float64 reference
# (tests/gpu/test_reroute.py check), the JSON log must show the reroutes by
# the expected rules and no refusal, and `--mode enforce` must reproduce
# Triton's OutOfResources.  Prints "ok - ..." / "not ok - ...".
set -u
B=${SM120_BUILD:-build}
sm120=$(pwd)/$B/sm120
py=tests/gpu/test_reroute.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TRITON_CACHE_DIR="$work/triton"   # compiled once, shared by the runs below

# step NAME OUT CMD... - run CMD with its output in OUT; pass its TAP and
# comment lines through, and the shim's stderr lines as comments; a nonzero
# exit is a failure of its own, shown with the end of the output.
step() {
	name=$1 out=$2
	shift 2
	"$@" >"$out" 2>&1
	rc=$?
	grep -E '^(ok |not ok|# )' "$out"
	grep '^sm120shim:' "$out" | sort -u | head -n 4 | sed 's/^/# /'
	if [ "$rc" != 0 ]; then
		echo "not ok - $name exited $rc"
		grep -vE '^(ok |not ok|# )' "$out" | tail -n 15 | sed 's/^/#   /'
	fi
	return "$rc"
}

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
# The rule each stand-in's interface is written to match (rules/*.json).
rules = {"_fwd_kernel": "sglang-extend-2026-03",
         "_fwd_grouped_kernel_stage1": "vllm-mla-decode-2026-06"}
want = {"_fwd_kernel"} | ({"_fwd_grouped_kernel_stage1"} if kv == "fp8_e4m3" else set())
ev = [json.loads(l) for f in glob.glob(f"{work}/rr-{mode}-{kv}.*.jsonl") for l in open(f)]
launch = [e for e in ev if e.get("event") == "launch"]
rr = [e for e in launch if e.get("action") == "reroute"]
refused = [e for e in ev if e.get("action") == "refuse"]
got = {}
for e in rr:
    got.setdefault(e.get("kernel"), set()).add((e.get("rule"), e.get("rerouted_to")))
print(f"# {mode} {kv}: {len(ev)} events, {len(rr)} reroutes: "
      + "; ".join(f"{k} -> {sorted(v)}" for k, v in sorted(got.items())))
for e in refused[:3]:
    print(f"# refused: {e.get('kernel')}: {e.get('reason')}")
ok = not refused and set(got) == want
ok &= all(e.get("rerouted_to") for e in rr)
ok &= all(r == rules[k] for k, v in got.items() if k in rules for r, _ in v)
# the bf16 decode (63488 B) fits: the shim must not even log it
ok &= kv != "bf16" or not [e for e in launch if e.get("kernel") == "_fwd_grouped_kernel_stage1"]
sys.exit(0 if ok else 1)
PY
		then echo "ok - $mode $kv: the log shows $( [ $kv = bf16 ] && echo "_fwd_kernel" || echo "_fwd_kernel and _fwd_grouped_kernel_stage1") rerouted by the expected rules, nothing refused"
		else echo "not ok - $mode $kv: reroute events in the JSON log"; fi
	done
done

# enforce: the launches must fail exactly as on an SM120 card.
step "several contexts in one process" "$work/contexts.out" \
	"$sm120" run --mode reroute --target sm120 --set page_size=64 -- \
	"$B/test/gpu_reroute_contexts" "$B/test/framework_stage1.cubin"

step "enforce under sm120 run --mode enforce --target sm120" "$work/enforce.out" \
	"$sm120" run --mode enforce --target sm120 -- python3 $py enforce
grep -qE '^(ok|not ok) - enforce' "$work/enforce.out" || echo "not ok - enforce printed no result"

#!/bin/sh
# oracle_gpu.sh - the frameworks' own kernels, from their released packages,
# against the shim's reroute (GPU).  vLLM's TRITON_MLA decode with an FP8 cache
# (tests/gpu/oracle_decode.py) runs plainly and under
# `sm120 run --mode reroute --target sm120`, eagerly and in a CUDA graph; the
# rerouted results are judged against float64 next to vLLM's own error, and
# the JSON log must show every stage-1 launch rerouted and nothing refused.
# Then SGLang 0.5.9's fused_moe_kernel (tests/gpu/oracle_moe.py) the same way.
# The packages come from tests/oracle/fetch.sh (into $SM120_ORACLE, default
# build/oracle); without them this prints one "not ok" naming the command.
# Prints "ok - ..." / "not ok - ..." lines.
set -u
B=${SM120_BUILD:-build}
sm120=$(pwd)/$B/sm120
export SM120_ORACLE=${SM120_ORACLE:-$B/oracle}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TRITON_CACHE_DIR="$work/triton"

. tests/gpu/step.sh   # step NAME OUT CMD...

if [ ! -d "$SM120_ORACLE/vllm-0.33.0" ]; then
	echo "not ok - $SM120_ORACLE/vllm-0.33.0 is missing: run sh tests/oracle/fetch.sh $SM120_ORACLE"
	exit 0
fi
py=tests/gpu/oracle_decode.py
step "vLLM decode without the shim" "$work/plain.out" python3 $py run "$work/plain.pt"
step "vLLM decode under sm120 run --mode reroute --target sm120" "$work/shim.out" \
	"$sm120" run --mode reroute --target sm120 --set page_size=16 \
	--log "$work/rr.%p.jsonl" -- python3 $py run "$work/shim.pt"
step "check vLLM decode" "$work/check.out" python3 $py check "$work/plain.pt" "$work/shim.pt"
if python3 - "$work" <<'PY'
import glob, json, sys
ev = [json.loads(l) for f in glob.glob(f"{sys.argv[1]}/rr.*.jsonl") for l in open(f)]
stage1 = [e for e in ev if e.get("event") == "launch"
          and e.get("kernel") == "_fwd_grouped_kernel_stage1"]
refused = [e for e in ev if e.get("action") == "refuse"]
for e in refused[:3]:
    print(f"# refused: {e.get('kernel')}: {e.get('reason')}")
print(f"# {len(stage1)} stage-1 launches logged: "
      f"{sorted({(e.get('action'), e.get('rule')) for e in stage1}, key=str)}")
ok = bool(stage1) and not refused
ok &= all(e.get("action") == "reroute" and e.get("rule") == "vllm-mla-decode-2026-06"
          for e in stage1)
sys.exit(0 if ok else 1)
PY
then echo "ok - vLLM 0.33.0 _fwd_grouped_kernel_stage1 rerouted by vllm-mla-decode-2026-06 at every launch, nothing refused"
else echo "not ok - vLLM 0.33.0 decode: reroute events in the JSON log"; fi

# SGLang 0.5.9's own fused_moe_kernel (tests/gpu/oracle_moe.py) at its default
# FP8 configuration, block and per-tensor scales, gate/up and down.
if [ ! -d "$SM120_ORACLE/sglang-0.5.9" ]; then
	echo "not ok - $SM120_ORACLE/sglang-0.5.9 is missing: run sh tests/oracle/fetch.sh $SM120_ORACLE"
	exit 0
fi
py=tests/gpu/oracle_moe.py
step "SGLang fused MoE without the shim" "$work/moe_plain.out" python3 $py run "$work/moe_plain.pt"
step "SGLang fused MoE under sm120 run --mode reroute --target sm120" "$work/moe_shim.out" \
	"$sm120" run --mode reroute --target sm120 --set top_k=3 --set hidden_size=1024 \
	--log "$work/moe.%p.jsonl" -- python3 $py run "$work/moe_shim.pt"
step "check SGLang fused MoE" "$work/moe_check.out" python3 $py check "$work/moe_plain.pt" \
	"$work/moe_shim.pt"
if python3 - "$work" <<'PY'
import glob, json, sys
ev = [json.loads(l) for f in glob.glob(f"{sys.argv[1]}/moe.*.jsonl") for l in open(f)]
moe = [e for e in ev if e.get("event") == "launch" and e.get("kernel") == "fused_moe_kernel"]
refused = [e for e in ev if e.get("action") == "refuse" and e.get("event") != "triton_load"]
for e in refused[:3]:
    print(f"# refused: {e.get('kernel')}: {e.get('reason')}")
print(f"# {len(moe)} fused_moe_kernel launches logged: "
      f"{sorted({(e.get('action'), e.get('rule'), e.get('rerouted_to')) for e in moe}, key=str)}")
sys.exit(0 if len(moe) == 8 and not refused and all(e.get("action") == "reroute" for e in moe)
         else 1)
PY
then echo "ok - SGLang 0.5.9 fused_moe_kernel rerouted at every launch (8), nothing refused"
else echo "not ok - SGLang 0.5.9 fused MoE: reroute events in the JSON log"; fi

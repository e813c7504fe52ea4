#!/bin/sh
# shim_gpu.sh - the shim under real PyTorch + Triton processes on a GPU:
# diagnose is bit-identical to no shim and logs the big kernels by name,
# enforce + sm120 reproduces Triton's SM120 OutOfResources, CUDA graphs
# capture and replay under the shim.  Prints "ok - ..." / "not ok - ...".
set -u
B=${SM120_BUILD:-build}
SHIM=$(pwd)/$B/libsm120shim.so
py=tests/gpu/shim_torch.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TRITON_CACHE_DIR=$work/triton

python3 $py plain "$work" >"$work/plain.out" 2>&1 || { echo "not ok - the workload fails without the shim"; cat "$work/plain.out"; }
LD_PRELOAD=$SHIM SM120SHIM_MODE=diagnose SM120SHIM_TARGET=sm120 SM120SHIM_LOG="$work/diag.%p.jsonl" \
	python3 $py diagnose "$work" >"$work/diag.out" 2>"$work/diag.err"
rc=$?
if [ $rc = 0 ] && python3 - "$work" <<'PY'
import sys, torch
p = torch.load(sys.argv[1] + "/plain.pt"); d = torch.load(sys.argv[1] + "/diagnose.pt")
for k in p:
    assert torch.equal(p[k], d[k]), k
print("# compared:", ", ".join(sorted(p)))
PY
then echo "ok - diagnose: cuBLAS, elementwise, softmax, Triton and a CUDA graph replay are bit-identical to no shim"
else echo "not ok - diagnose run (exit $rc)"; tail -20 "$work/diag.err"; fi
if python3 - "$work" <<'PY'
import collections, glob, json, sys
ev = [json.loads(l) for f in glob.glob(sys.argv[1] + "/diag.*.jsonl") for l in open(f)]
loads = [e for e in ev if e["event"] == "load"]
launch = [e for e in ev if e["event"] == "launch"]
names = sorted({e["kernel"] for e in launch})
print("# diagnose logged", len(ev), "events; launch kernels over 101376 B:", names[:6])
print("# loads by entry point and outcome:",
      dict(collections.Counter((e["via"], e["action"]) for e in loads)))
print("# origins of the logged launches:", sorted({e.get("origin", "-") for e in launch})[:6])
assert launch and all(e["action"] == "log" for e in ev if e["event"] != "load"), ev[:3]
assert all(e["static_smem"] + e["dynamic_smem"] > 101376 for e in launch)
assert all(n != "?" for n in names), names
# Every image the process loaded was read (or kept for later), none unreadable.
assert loads and not [e for e in loads if e["action"] == "unreadable"], \
    [e for e in loads if e["action"] == "unreadable"][:3]
# cudart's registered fatbins are kept for later; Triton's cubins are read at load.
assert any(e["via"] == "cuLibraryLoadData" and e["action"] == "deferred" for e in loads)
assert any(e["via"] == "cuModuleLoadData" and e["image"] == "cubin" and e["action"] == "parsed"
           for e in loads)
# Each logged launch says which image it came from and its parameter layout.
assert all(e.get("origin") and e["origin"] != "driver" and e.get("param_sizes") for e in launch), \
    [e for e in launch if not e.get("param_sizes") or e.get("origin") in (None, "driver")][:3]
PY
then echo "ok - diagnose logs the kernels over 101376 B (cuBLAS's large tiles) by name, image and parameters, and every load"
else echo "not ok - diagnose log"; head -5 "$work"/diag.*.jsonl; fi
grep "sm120shim: kernel" "$work/diag.err" | head -3 | sed 's/^/# /'

LD_PRELOAD=$SHIM SM120SHIM_MODE=enforce SM120SHIM_TARGET=sm120 python3 $py big >"$work/enf.out" 2>&1
if grep -q "OutOfResources: out of resource: shared memory, Required: 131072, Hardware limit: 101376" "$work/enf.out"; then
	echo "ok - enforce sm120: Triton raises OutOfResources (Required: 131072, Hardware limit: 101376) as on an RTX PRO 6000"
else echo "not ok - enforce big kernel"; cat "$work/enf.out"; fi
python3 $py big >"$work/nosh.out" 2>&1
grep -qx OK "$work/nosh.out" && echo "ok - the same kernel runs on the H200 without the shim" ||
	{ echo "not ok - big kernel without shim"; cat "$work/nosh.out"; }

LD_PRELOAD=$SHIM SM120SHIM_MODE=enforce SM120SHIM_TARGET=sm120 python3 $py enforce "$work" >"$work/enfw.out" 2>"$work/enfw.err"
rc=$?
grep -q "refused" "$work/enfw.err"; refused=$?
echo "# enforce on the ordinary workload: exit $rc; $(grep -c 'sm120shim: kernel' "$work/enfw.err") kernels refused"
grep "sm120shim: kernel" "$work/enfw.err" | head -2 | sed 's/^/# /'

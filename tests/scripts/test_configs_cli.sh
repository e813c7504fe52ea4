#!/bin/sh
# test_configs_cli.sh - `sm120 configs` on tuned fused-MoE config files:
# the fixtures of tests/fixtures/configs (SGLang- and vLLM-style names
# written for this test: buckets that fit, buckets the rules reroute at
# their exact tiles and at other configurations (tile-generic rules, with
# the compiled facts the Python hook records), ones no rule takes and why
# (a tensor descriptor, int8 weights, a K step over the block-scale group),
# the INT4 kernel, a file no framework reads, bad names, bad JSON, a bad
# bucket, directories), every exit status, --json checked line by line,
# --arch 90 (a Hopper GPU under the shim's sm120 emulation); then, where
# they are at hand, the real config files of a cached framework wheel
# (~/.cache/sm120-oracle, tests/oracle/fetch.sh) and live Triton compiles
# (build/oracle-venv) of a few buckets against the shared memory the command
# computes.  Prints "ok - ...".
set -u
echo 1..37 # plan: the number of checks below
B=${SM120_BUILD:-build}
FX=tests/fixtures/configs
SG="$FX/good/sglang/triton_3_5_1/E=161,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8,per_channel_quant=True.json"
VL="$FX/good/vllm/E=384,N=128,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"
FITS="$FX/good/E=128,N=192,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Workstation_Edition.json"
W4="$FX/good/E=384,N=128,device_name=,dtype=int4_w4a16.json"
work=$(mktemp -d)
out=$work/out
trap 'rm -rf "$work"' EXIT
. tests/scripts/lib.sh

check "--help: exit 0" 0 "$B/sm120" configs --help
check "no PATH: usage, exit 2" 2 "$B/sm120" configs
check "a file whose every bucket fits: exit 0" 0 "$B/sm120" configs "$FITS"
expect "(Triton's defaults, 4 warps and 3 stages, where the bucket has none)" \
	"  *1    16    64   128     1   4   3    40960  fits"
check "SGLang per-channel FP8, every over-limit bucket rerouted: exit 0" 0 \
	"$B/sm120" configs "$SG"
expect "(the small bucket fits)" "  *1    16    64   128     1   4   4    30720  fits"
expect "(SGLang's default FP8 tile is rerouted by SGLang's rule)" \
	"2048   128   256   128    32   8   4   147456  rerouted by sglang-moe-2026-03"
expect "(64x256x128, 4 stages: rerouted at its own configuration by the generic rule)" \
	"4096    64   256   128    16   4   4   122880  rerouted by sglang-moe-2026-03"
"$B/sm120" configs "$VL" >"$out" 2>&1
expect "vLLM block FP8: BLOCK_SIZE_K clamped to the block shape, its scale scratch counted" \
	"  *1    16   128   128     1   4   3    37376  fits"
expect "(the 148480 B block-scale tile is rerouted, by vLLM's rule)" \
	"512   128   256   128    32   8   4   148480  rerouted by vllm-moe-main"
check "--arch 90: Hopper's compile of the same file under the sm120 emulation: exit 0" 0 \
	"$B/sm120" configs --arch 90 "$SG"
expect "(196608 B on sm_90, the rule's Hopper tile)" \
	"2048   128   256   128    32   8   4   196608  rerouted by sglang-moe-2026-03"
expect "(163840 B: the issue's 64x256x128 bucket, rerouted)" \
	"4096    64   256   128    16   4   4   163840  rerouted by sglang-moe-2026-03"
check "--target sm90: Hopper's own limit, everything fits: exit 0" 0 \
	"$B/sm120" configs --target sm90 "$SG" "$VL"
"$B/sm120" configs "$W4" >"$out" 2>&1
expect "INT4 w4a16 is fused_moe_kernel_gptq_awq, rerouted by its rule at 163840 B" \
	"4096   128   256   128    32   8   4   163840  rerouted by sglang-moe-gptq-awq"
check "a directory: searched recursively, exit 1 (a bucket is refused)" 1 \
	"$B/sm120" configs "$FX/good"
expect "(the summary counts files, buckets and verdicts)" \
	"7 files, 18 buckets compiled for sm_120 against sm120 (101376 B): 10 fit, 8 over (6 rerouted, 2 refused); 1 file skipped, 0 errors"
expect "(SGLang's TMA bucket: the tensor descriptor no rule takes)" \
	"4096   128   256    64     1   8   4   147480  refused: the kernel takes b_desc at run time, which rule sglang-moe-2026-03 cannot reroute"
expect "(int8 weights: the rules' value)" \
	"256   256    64   128     1   8   3   147456  refused: compiled with use_int8_w8a16 1; rule sglang-moe-2026-03 reroutes the kernel's 147456 B only with use_int8_w8a16 0"
expect "(SGLang block FP8 at BLOCK_SIZE_M 64, rerouted at its own configuration)" \
	"1024    64   256   128    16   4   4   123904  rerouted by sglang-moe-2026-03"
check "--arch 90 over the directory: exit 1" 1 "$B/sm120" configs --arch 90 "$FX/good"
expect "(a K step of 256 over 128-wide scale groups, refused with why)" \
	"64    16   128   256     1   4   3   110592  refused: the kernel was compiled with BLOCK_SIZE_K 256 and group_k 128; rule sglang-moe-2026-03 reroutes it only when BLOCK_SIZE_K divides group_k"
expect "(and counted)" \
	"7 files, 18 buckets compiled for sm_90 against sm120 (101376 B): 9 fit, 9 over (6 rerouted, 3 refused)"
expect "(a dtype no framework looks up is skipped, saying why)" \
	"skipped: dtype=float8: neither SGLang nor vLLM looks up"
expect "(other files in the tree are passed over and counted)" \
	"passed over in directories: 1 entry"

"$B/sm120" configs --json "$FX/good" >"$work/json" 2>/dev/null
if python3 - "$work/json" >"$out" 2>&1 <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
kinds = [l["type"] for l in lines]
assert kinds[-1] == "summary" and kinds.count("summary") == 1, kinds
buckets = [l for l in lines if l["type"] == "bucket"]
s = lines[-1]
assert len(buckets) == s["buckets"] == 18, s
for v in ("fits", "rerouted", "refused"):
    assert sum(b["verdict"] == v for b in buckets) == s[v], (v, s)
for b in buckets:
    assert isinstance(b["shared"], int) and b["arch"] == 120 and b["target_optin"] == 101376, b
    assert (b["verdict"] == "fits") == (b["shared"] <= 101376), b
    assert ("rule" in b) == (b["verdict"] == "rerouted") and ("why" in b) == (b["verdict"] == "refused"), b
vl = [b for b in buckets if b["framework"] == "vllm"]
assert vl and all(b["block_shape"] == [128, 128] and b["BLOCK_SIZE_K"] == 128 for b in vl), vl
assert sum(s["refused_by"].values()) == s["refused"] and kinds.count("skipped") == 1, s
PY
then echo "ok - --json: one valid object a line, buckets agree with the summary"; else
	echo "not ok - --json output does not check out"; sed 's/^/#   /' "$out"; fi
check "--json output passes python3 -m json.tool --json-lines" 0 \
	python3 -m json.tool --json-lines "$work/json"

check "bad inputs in a directory: exit 2, the good files still read" 2 \
	"$B/sm120" configs "$FX/bad"
expect "(a name that does not parse: file and expected form)" \
	"E=8,N=x,device_name=NVIDIA_H100.json: the name does not start with E=<experts>,N=<n>"
expect "(bad JSON: file and line)" \
	"E=8,N=128,device_name=NVIDIA_H100_80GB_HBM3.json:3: not JSON"
expect "(a bucket Triton cannot compile: file, bucket, field)" \
	'bucket "1" BLOCK_SIZE_N is not a whole number from 1 to 4096 that is a power of two'
check "a file named on the command line that is no config name: exit 2" 2 \
	"$B/sm120" configs "$FX/good/README.md"
check "a path that does not exist: exit 2" 2 "$B/sm120" configs "$work/none"
check "--arch 100 (not modelled): exit 2, naming what is" 2 \
	"$B/sm120" configs --arch 100 "$SG"

# The frameworks' own config files, from a release wheel fetch.sh cached.
cache=${SM120_ORACLE_CACHE:-$HOME/.cache/sm120-oracle}
wheel=$(ls "$cache"/sglang-0.5.9-*.whl 2>/dev/null | head -n 1)
if [ -n "$wheel" ] && unzip -q "$wheel" 'sglang/srt/layers/moe/fused_moe_triton/configs/*' \
	-d "$work/wheel" 2>/dev/null; then
	"$B/sm120" configs "$work/wheel" >"$out" 2>&1
	rc=$?
	if [ "$rc" -le 1 ] && grep -q ", 0 errors$" "$out" &&
		grep -q "279 files, 5104 buckets compiled for sm_120 against sm120 (101376 B): 4143 fit, 961 over (941 rerouted, 20 refused)" "$out"; then
		echo "ok - SGLang 0.5.9's 279 tuned files read without an error, 941 of the 961 over-limit buckets rerouted (exit $rc)"
	else
		echo "not ok - SGLang 0.5.9's tuned files (exit $rc)"
		grep '^sm120 configs' "$out" | head -n 5 | sed 's/^/#   /'
	fi
else
	echo "ok - # SKIP no sglang-0.5.9 wheel in $cache (tests/oracle/fetch.sh caches it)"
fi

# Live Triton compiles of a few buckets against what the command computes.
py=$B/oracle-venv/bin/python3
[ -x "$py" ] || py=build/oracle-venv/bin/python3
if [ -x "$py" ] && [ -n "$wheel" ]; then
	name='E=8,N=512,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json'
	mkdir -p "$work/live"
	cat >"$work/live/$name" <<'EOF'
{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 3},
 "64": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 16, "num_warps": 8, "num_stages": 3},
 "512": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 4, "num_stages": 2}}
EOF
	ok=1
	for arch in 120 90; do
		"$B/sm120" configs --json --arch "$arch" "$work/live" >"$work/live.$arch" 2>/dev/null
		cases=$(python3 - "$work/live.$arch" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    b = json.loads(l)
    if b["type"] == "bucket":
        f = ["block=128x128"] + (["swap"] if b["swap_ab"] else [])
        print(",".join([b["dtype"], f"{b['BLOCK_SIZE_M']}x{b['BLOCK_SIZE_N']}x{b['BLOCK_SIZE_K']}",
                        str(b["num_warps"]), str(b["num_stages"])] + f) + f"@{b['shared']}")
PY
)
		for c in $cases; do
			got=$(SM120_ORACLE="$B/oracle" "$py" tests/oracle/moe_smem.py --source sglang-0.5.9 \
				--arch "$arch" "${c%@*}" 2>"$work/live.err" | cut -f 11)
			if [ "$got" != "${c#*@}" ]; then
				ok=0
				echo "#   sm_$arch ${c%@*}: sm120 configs ${c#*@} B, Triton ${got:-no answer} B"
				tail -n 3 "$work/live.err" | sed 's/^/#   /'
			fi
		done
	done
	if [ "$ok" -eq 1 ]; then
		echo "ok - live Triton compiles of SGLang's kernel for sm_120 and sm_90 give the computed bytes"
	else
		echo "not ok - live Triton compiles differ from sm120 configs (above)"
	fi
else
	echo "ok - # SKIP no Triton venv ($B/oracle-venv) or SGLang wheel: live compiles not run"
fi

# moe_smem.py --check compiles several sources' kernels in one process, with
# and without MMA v3: SGLang's tile with wgmma, then vLLM's without, then
# SGLang's same tile without must give the mma.sync bytes, not the cached
# wgmma kernel's (the rows are the measured table's).
if [ -x "$py" ] && [ -n "$wheel" ]; then
	printf '%s\n' \
		"sglang-0.5.9	90	fused_moe_kernel	fp8_w8a8	block=128x128	128	128	128	4	2	66048" \
		"vllm-0.33.0	90	fused_moe_kernel	fp8_w8a8	block=128x128,nov3	128	128	64	8	2	16384" \
		"sglang-0.5.9	90	fused_moe_kernel	fp8_w8a8	block=128x128,nov3	128	128	128	4	2	33280" \
		>"$work/mixed.tsv"
	if SM120_ORACLE="$B/oracle" "$py" tests/oracle/moe_smem.py --check "$work/mixed.tsv" --arch 90 \
		>"$work/mixed.out" 2>&1 && [ "$(grep -c '^ok' "$work/mixed.out")" -eq 3 ]; then
		echo "ok - moe_smem.py --check: a source's tile compiled without MMA v3 after another source's change gives its own bytes"
	else
		echo "not ok - moe_smem.py --check on rows of two sources with and without MMA v3"
		sed 's/^/#   /' "$work/mixed.out" | tail -n 5
	fi
else
	echo "ok - # SKIP no Triton venv ($B/oracle-venv) or SGLang wheel: moe_smem.py --check not run"
fi

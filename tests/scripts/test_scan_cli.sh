#!/bin/sh
# test_scan_cli.sh - `sm120 scan` as a user runs it: exit codes, the table,
# JSON lines, targets, and the static check that every bundled sm_120 kernel
# fits 101376 bytes.  Prints "ok - ..." / "not ok - ..." per check.
set -u
echo 1..30 # plan: the number of checks below
B=${SM120_BUILD:-build}
FX=${SM120_FIXTURES:-$B/test/fixtures}
sm120=$B/sm120
out=$(mktemp)
trap 'rm -f "$out"' EXIT

. tests/scripts/lib.sh

check "Triton cache with a 106496-byte kernel does not fit sm120" 1 \
	"$sm120" scan --target sm120 "$FX/triton_cache"
expect "the row names the kernel, its dynamic smem and NO" "^NO .* 106496 .*_fwd_kernel"
expect "the summary counts it" "1 do not fit sm120 (101376 B opt-in per block)"
check "the same cache fits an H200 (--target 232448)" 0 \
	"$sm120" scan --target 232448 "$FX/triton_cache"
expect "the row says yes" "^yes .*_fwd_kernel"

check "a real Triton 3.6 cache entry (ABI V1 cubin, 131072 B) does not fit sm120" 1 \
	"$sm120" scan --target sm120 tests/fixtures/triton36
expect "it is read as sm_90a with its JSON's dynamic size" "^NO  *sm_90a .* 131072 .*mm_big"
check "and fits a Hopper target" 0 "$sm120" scan --target sm90 tests/fixtures/triton36

check "--json gives one object per line" 1 "$sm120" scan --json "$FX/triton_cache"
if python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
k = [r for r in rows if r["type"] == "kernel"]
s = [r for r in rows if r["type"] == "summary"]
assert len(k) == 1 and k[0]["name"] == "_fwd_kernel", k
assert k[0]["dynamic_smem"] == 106496 and k[0]["fits"] is False and k[0]["static_smem"] == 0
assert k[0]["arch"] == "sm_90a" and len(k[0]["params"]) == 5, k[0]
assert s and s[0]["too_large"] == 1 and s[0]["target_optin"] == 101376, s
PY
then echo "ok - JSON rows carry name, arch, smem, params and the verdict"; else
	echo "not ok - JSON rows"; sed 's/^/#   /' "$out"; fi

check "a cubin whose kernels all fit the target exits 0" 0 "$sm120" scan \
	--target sm90 "$FX/params.sm_90.cubin"
check "k_huge (106496 B declared) makes the fixture library fail sm120" 1 \
	"$sm120" scan --target sm120 "$FX/libparams.so"
expect "the declared dynamic size is reported" "^NO .*106496 .*k_huge"
check "--fails lists only the offenders" 1 "$sm120" scan --fails "$FX/libparams.so"
if [ "$(grep -c '^NO' "$out")" -eq 2 ] && ! grep -q '^yes' "$out"; then
	echo "ok - --fails shows k_huge for sm_90 and sm_120 and nothing else"
else echo "not ok - --fails output"; sed 's/^/#   /' "$out"; fi

check "an unreadable path exits 2" 2 "$sm120" scan /nonexistent/lib.so
expect "the error names the path" "/nonexistent/lib.so"
check "a file that is no image exits 2" 2 "$sm120" scan tests/run.sh
expect "the error says why" "not a CUDA image"
check "an unknown target exits 2" 2 "$sm120" scan --target sm42 "$FX/libparams.so"
expect "and lists the known targets" "sm120, sm121, sm89, sm86"
check "no path exits 2 with usage" 2 "$sm120" scan
check "unknown command exits 2" 2 "$sm120" frobnicate
expect "and points at help" "sm120 help"

# The static check: the project never ships an SM120 kernel that does not fit.
check "every bundled sm_120 kernel fits 101376 B (scan of the shim itself)" 0 \
	"$sm120" scan --target sm120 --arch 120 "$B/libsm120shim.so"
expect "the bundle holds the decode merge kernel" "^yes .*attn_decode_merge_bf16"
if grep -q '^static' "$out"; then
	echo "not ok - a bundled kernel does not declare its dynamic smem (SM120_DYNAMIC_SMEM)"
	sed 's/^/#   /' "$out"
else echo "ok - every bundled kernel declares its dynamic smem"; fi
check "the bundle also carries sm_90 code for emulation on Hopper" 0 \
	"$sm120" scan --target sm120 --arch 90 "$B/libsm120shim.so"
expect "sm_90 rows are present" "sm_90 .*attn_decode_merge_bf16"

check "the shim exports no symbol of its own libraries" 0 sh -c \
	"! nm -D --defined-only $B/libsm120shim.so | grep -E ' [TDBR] (elf_|ZSTD_|LZ4_|cJSON|img_|target_)'"

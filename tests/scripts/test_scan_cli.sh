#!/bin/sh
# test_scan_cli.sh - `sm120 scan` as a user runs it: exit codes, the table,
# JSON lines, targets, every bad input as an error that names the file and
# the defect (truncated files, archives, Triton JSON naming another kernel,
# in a directory too), and the static check that every bundled sm_120 kernel
# fits 101376 bytes.  Prints "ok - ..." / "not ok - ..." per check.
set -u
echo 1..56 # plan: the number of checks below
B=${SM120_BUILD:-build}
FX=${SM120_FIXTURES:-$B/test/fixtures}
sm120=$B/sm120
out=$(mktemp)
tmp=$(mktemp -d)
trap 'rm -f "$out"; rm -rf "$tmp"' EXIT

. tests/scripts/lib.sh

check "Triton cache with a 106496-byte kernel does not fit sm120" 1 \
	"$sm120" scan --target sm120 "$FX/triton_cache"
expect "the row names the kernel, its dynamic smem and NO" "^NO .* 106496 .*_fwd_kernel"
expect "the summary counts it, singular nouns for one" \
	"1 kernel in 1 cubin (0 PTX entries not compiled); 1 does not fit sm120 (101376 B opt-in per block); 0 errors$"
expect "and counts what the cache holds besides images in one line" \
	"passed over in directories: 3 files that are no CUDA image, 1 PTX file"
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
assert s[0]["skipped"] == {"not_image": 3, "ptx": 1, "links": 0, "special": 0}, s
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
# Every bad input is an error (exit 2) naming the file and the defect.
head -c -1 "$FX/libparams.so" >"$tmp/cut.so"
check "a host library cut by one byte exits 2 (not 0: no kernels)" 2 "$sm120" scan "$tmp/cut.so"
expect "the error names the file and the table past its end" \
	"cut.so: truncated ELF: the section header table (.*) runs past the end of its"
expect "one error is counted as \"1 error\"" "; 1 error$"
head -c -1 "$FX/params.o" >"$tmp/cut.o"
check "a host object cut by one byte exits 2" 2 "$sm120" scan "$tmp/cut.o"
expect "and is named truncated" "cut.o: truncated ELF"
head -c -1 "$FX/params.sm_120.cubin" >"$tmp/cut.cubin"
check "a cubin cut by one byte exits 2" 2 "$sm120" scan "$tmp/cut.cubin"
expect "it says truncated, not 'no symbol table'" "cut.cubin: truncated ELF: the program header table"
printf '\177ELF' >"$tmp/stub.so"
check "four bytes of ELF magic exit 2" 2 "$sm120" scan "$tmp/stub.so"
expect "as a truncated ELF header" "stub.so: truncated ELF: 4 bytes, shorter than its 64-byte ELF header"
python3 -c 'import sys; d = bytearray(open(sys.argv[1], "rb").read()); d[4] = 7; open(sys.argv[2], "wb").write(d)' \
	"$FX/params.o" "$tmp/class7.o"
check "an ELF with an unknown class exits 2" 2 "$sm120" scan "$tmp/class7.o"
if grep -q "class7.o: malformed ELF: class 7" "$out" && ! grep -q "no error" "$out"; then
	echo "ok - it names the byte, never libelf's 'no error'"
else echo "not ok - unknown ELF class message"; sed 's/^/#   /' "$out"; fi
len=$(wc -c <"$FX/params.lz4.fatbin")
head -c -1 "$FX/params.lz4.fatbin" >"$tmp/cut.fatbin"
check "a fatbin cut by one byte exits 2" 2 "$sm120" scan "$tmp/cut.fatbin"
expect "the message says what the container spans and what remains" \
	"cut short: it spans $len bytes (16 of header, $((len - 16)) of entries) but only $((len - 1)) remain"

# Archives: the members are scanned through libelf, named lib.a(member).
mkdir "$tmp/ar" && cp "$FX/params.o" "$FX/params_rdc.o" "$tmp/ar/" && echo text >"$tmp/ar/notes.txt"
(cd "$tmp/ar" && ar rc libparams.a notes.txt params.o params_rdc.o)
check "an ar archive of host objects is scanned (k_huge does not fit)" 1 \
	"$sm120" scan "$tmp/ar/libparams.a"
expect "rows name the archive and the member" "^NO .*k_huge .*libparams.a(params.o)#0.1"
expect "the relocatable member is read too" "k_params .*libparams.a(params_rdc.o)#0.0"
head -c -1 "$tmp/ar/libparams.a" >"$tmp/cut.a"
check "an archive cut by one byte exits 2" 2 "$sm120" scan "$tmp/cut.a"
expect "naming the archive and the cut member" \
	"cut.a: truncated archive: member params_rdc.o (.*) runs past the end"

# In a directory, bad images are errors too; what is no image is counted.
mkdir "$tmp/dir" && cp "$tmp/cut.so" "$tmp/ar/libparams.a" "$tmp/dir/" &&
	echo 'print(1)' >"$tmp/dir/setup.py" && echo notes >"$tmp/dir/notes.txt" &&
	ln -s /nonexistent "$tmp/dir/dangling"
check "a directory holding a cut library exits 2" 2 "$sm120" scan "$tmp/dir"
expect "the cut library is named" "dir/cut.so: truncated ELF"
expect "the archive in it is read" "k_huge .*dir/libparams.a(params.o)"
expect "what was passed over is counted in one line" \
	"passed over in directories: 2 files that are no CUDA image, 1 symbolic link (not followed)"
mkdir "$tmp/triton" && cp "$FX"/triton_cache/*/_fwd_kernel.cubin "$tmp/triton/" &&
	echo '{"name": "_bwd_kernel", "shared": 106496}' >"$tmp/triton/_fwd_kernel.json"
check "a Triton JSON naming another kernel exits 2" 2 "$sm120" scan "$tmp/triton"
expect "and says which names differ" \
	'_fwd_kernel.json: "name" is "_bwd_kernel", but .*_fwd_kernel.cubin defines "_fwd_kernel"'
expect "the cubin is still listed, its dynamic size unknown" "^static .* - .*_fwd_kernel"

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

#!/bin/sh
# test_patch_cli.sh - `sm120 patch check|apply|revert` on the real released
# packages: each release of tests/oracle/packages.txt that has a patch set in
# patches/ is unpacked (the files the patches change and the METADATA that
# names the version, from the wheels tests/oracle/fetch.sh caches) into a
# temporary site-packages and taken through check, apply, check, revert.
# The patched files must parse, and the patched kernels, compiled by Triton
# for sm_120 without a GPU (tests/oracle/patch_kernels.py), must fit 101376 B
# where the unpatched ones do not, while sm_90 gets exactly what it got
# before.  revert must give back the release's bytes; a file edited by hand,
# a version without a patch set, a file patched by hand and a file changed
# after apply must be refused, naming the file and the fix.  Needs the Triton
# venv and the packages that make test's oracle step fetches.
set -u
# "FRAMEWORK VERSION RELEASE-LINE": each release of packages.txt that has a
# patch set, with the set sm120 patch picks (the longest line that covers it)
releases=$(grep -v '^#' tests/oracle/packages.txt | while read -r fw ver _; do
	best=
	for d in patches/"$fw"/*/; do
		l=${d%/} && l=${l##*/}
		case "$ver" in "$l" | "$l".* | "$l"+*) [ ${#l} -gt ${#best} ] && best=$l ;; esac
	done
	[ -z "$best" ] || echo "$fw $ver $best"
done)
per_release=15
echo "1..$(($(echo "$releases" | grep -c .) * per_release + 13))" # plan: the checks below
B=${SM120_BUILD:-build}
sm120=$B/sm120
py=$B/oracle-venv/bin/python3
work=$(mktemp -d)
out=$work/out
trap 'rm -rf "$work"' EXIT
. tests/scripts/lib.sh
LIMIT=101376

# verdict DESCRIPTION CONDITION-STATUS: one check line from a status
verdict() {
	if [ "$2" -eq 0 ]; then echo "ok - $1"; else
		echo "not ok - $1"
		sed 's/^/#   /' "$out"
	fi
}

# count DESCRIPTION PATTERN N: the last output has PATTERN on exactly N lines
count() {
	n=$(grep -c -- "$2" "$out")
	[ "$n" -eq "$3" ]
	verdict "$1 ($n of $3)" $?
}

# edit_by_hand PATCH FILE: change, in FILE, every copy of the first line the
# patch removes (else its first context line), so the patch no longer applies
edit_by_hand() {
	python3 - "$1" "$2" <<'PY'
import re, sys
patch, target = sys.argv[1:3]
body = open(patch).read().split("\n")
hunk = body[next(i for i, l in enumerate(body) if l.startswith("@@")) + 1:]
lines = [l[1:] for l in hunk if l[:1] == "-"] + [l[1:] for l in hunk if l[:1] == " " and l.strip()]
src = open(target).read()
open(target, "w").write(re.sub("^" + re.escape(lines[0]) + "$", lines[0] + "  # local edit",
                               src, flags=re.M))
PY
}

# smem ROOT ARCH SITES...: the patched kernels' shared memory, one line per launch
smem() {
	root=$1 arch=$2
	shift 2
	"$py" tests/oracle/patch_kernels.py "$root" "$arch" "$@"
}

# release FRAMEWORK VERSION RELEASE-LINE: the checks of one release; $sites and
# $targets are lists of words (paths without spaces), split on purpose
# shellcheck disable=SC2086,SC2012
release() {
	fw=$1 ver=$2 line=$3
	r="$fw $ver"
	pset=patches/$fw/$line
	orig=$work/$fw-$ver/orig site=$work/$fw-$ver/site
	mkdir -p "$orig" "$site"
	cp -R "$B/oracle/$fw-$ver/." "$orig/" 2>/dev/null
	rm -f "$orig/.complete"
	cp -R "$orig/." "$site/"
	np=$(ls "$pset"/*.patch 2>/dev/null | wc -l)
	sites=$(for p in "$pset"/*.patch; do b=${p##*/}; echo "$fw/${b%.patch}"; done)
	targets=$(sed -n 's|^+++ b/\([^	]*\).*|\1|p' "$pset"/*.patch)

	check "$r: check exits 0" 0 "$sm120" patch check --site-packages "$site"
	count "$r: check lists each patch of $pset as a change" "^  .*: would change " "$np"
	check "$r: check wrote nothing" 0 diff -r "$orig" "$site"
	check "$r: apply" 0 "$sm120" patch apply --site-packages "$site"
	check "$r: check after apply exits 0" 0 "$sm120" patch check --site-packages "$site"
	count "$r: check says each patch is already applied" ": already applied to " "$np"

	(cd "$site" && python3 -c 'import ast, sys
for f in sys.argv[1:]:
    ast.parse(open(f).read(), f)' $targets) >"$out" 2>&1
	verdict "$r: the patched files parse ($(echo $targets | wc -w) files)" $?

	# The kernels, unpatched and patched, for sm_120 and sm_90.
	rm -f "$work"/[op]120 "$work"/[op]90
	# (sequential: sm_90's patched kernels are then found in Triton's cache)
	{ smem "$orig" 120 $sites >"$work/o120" && smem "$site" 120 $sites >"$work/p120" &&
		smem "$orig" 90 $sites >"$work/o90" && smem "$site" 90 $sites >"$work/p90"; } \
		2>"$work/compile.err"
	compiled=$?
	python3 - "$work" $LIMIT $sites <<'PY' >"$out" 2>&1
import sys
work, limit, sites = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(name):
    rows = {}
    for line in open(f"{work}/{name}"):
        site, kernel, shared = line.split("\t")[:3]
        rows.setdefault(site, []).append((kernel, int(shared)))
    return rows
o, p, h = load("o120"), load("p120"), load("o90")
bad = 0
for s in sites:
    over = [(k, b, a, n90) for (k, b), (_, a), (_, n90) in zip(o.get(s, []), p.get(s, []), h.get(s, []))
            if b > limit]
    fixed = over and len(o[s]) == len(p.get(s, [])) and max(n for _, n in p[s]) <= limit
    bad += not fixed
    print(f"{s}: " + ("; ".join(f"{k} sm_120 {b} -> {a} B (sm_90 {n90})" for k, b, a, n90 in over)
                      or "nothing over the limit unpatched") + ("" if fixed else ": NOT FIXED"))
sys.exit(bad)
PY
	st=$?
	[ "$compiled" -eq 0 ] || { echo "tests/oracle/patch_kernels.py failed:"; tail -n 5 "$work/compile.err"; } >>"$out"
	[ "$compiled" -eq 0 ] && [ "$st" -eq 0 ]
	verdict "$r: the patched kernels fit $LIMIT B on sm_120, the unpatched ones do not" $?
	[ "$compiled" -eq 0 ] && [ "$st" -eq 0 ] && sed 's/^/# /' "$out"
	cmp "$work/o90" "$work/p90" >"$out" 2>&1 && [ -s "$work/o90" ]
	verdict "$r: sm_90 compiles the patched kernels exactly as before" $?

	check "$r: revert" 0 "$sm120" patch revert --site-packages "$site"
	check "$r: the files are the release's own again, no backup left" 0 diff -r "$orig" "$site"

	first=$(ls "$pset"/*.patch | head -n 1)
	file=$site/$(echo "$targets" | head -n 1)
	edit_by_hand "$first" "$file"
	check "$r: a file edited by hand is refused" 1 "$sm120" patch apply --site-packages "$site"
	grep -q "$file does not match what the patch expects" "$out" &&
		[ -z "$(find "$site" -name '*.sm120-orig')" ] &&
		diff -r "$orig" "$site" | grep -q "^diff -r $orig/.* $file\$" &&
		[ "$(diff -rq "$orig" "$site" | wc -l)" -eq 1 ]
	verdict "$r: the refusal names the file, and nothing was written" $?
	cp "$orig/$(echo "$targets" | head -n 1)" "$file"

	meta=$(ls "$site"/*.dist-info/METADATA)
	sed -i 's/^Version: .*/Version: 0.0.1/' "$meta"
	check "$r: an unknown version is refused" 1 "$sm120" patch check --site-packages "$site"
	expect "$r: naming the version and the patch sets there are" \
		"$fw 0.0.1 .* is a version sm120 patch does not know: .* has patch sets for .*$line"
	cp "$orig/${meta#"$site"/}" "$meta"
}

echo "$releases" | while read -r fw ver line; do
	release "$fw" "$ver" "$line"
done

# ---------------------------------------------------------------- the rest
untested=$(for d in patches/*/*/; do
	d=${d%/} && fw=${d#patches/} && fw=${fw%%/*}
	echo "$releases" | grep -q "^$fw .* ${d##*/}\$" || echo "$d: no release of it is tested"
done)
echo "$untested" >"$out"
[ -z "$untested" ]
verdict "every patch set is tested on a release of tests/oracle/packages.txt" $?
v=$work/vllm-0.33.0/site
check "no action is a usage error" 2 "$sm120" patch
check "an unknown action is a usage error" 2 "$sm120" patch frobnicate --site-packages "$v"
check "an unknown --framework is a usage error" 2 "$sm120" patch check --framework trt --site-packages "$v"
mkdir -p "$work/empty"
check "a directory with no SGLang or vLLM is bad input" 2 "$sm120" patch check --site-packages "$work/empty"

# Without --site-packages, the directories $PYTHON reports.
printf '#!/bin/sh\necho %s\n' "$v" >"$work/python"
chmod +x "$work/python"
check "without --site-packages, the install \$PYTHON reports is found" 0 \
	env PYTHON="$work/python" "$sm120" patch check --framework vllm
expect "and named" "^vllm 0.33.0 in $v "

# A file that already holds the change, patched without sm120 patch.
p=patches/vllm/0.33/lightning-attn.patch
patch -s -p1 -d "$v" <"$p"
check "a file patched by hand is refused" 1 "$sm120" patch apply --site-packages "$v"
expect "as such" "already holds this change, but not from 'sm120 patch apply'"
patch -s -R -p1 -d "$v" <"$p"

# A patch set of ours that is broken ($SM120_PATCHES points at it).
mkdir -p "$work/bad/vllm/0.33"
sed '/^+++ /d' patches/vllm/0.33/lightning-attn.patch >"$work/bad/vllm/0.33/lightning-attn.patch"
check "a malformed patch is bad input" 2 \
	env SM120_PATCHES="$work/bad" "$sm120" patch check --site-packages "$v"
expect "naming the patch and what a patch must be" \
	"bad/vllm/0.33/lightning-attn.patch: malformed: .*exactly one file (0 found)"

# A file changed after apply: revert would lose the change.
"$sm120" patch apply --site-packages "$v" >/dev/null 2>&1
echo "# local edit" >>"$v/vllm/model_executor/layers/lightning_attn.py"
check "revert refuses a file changed after apply" 1 "$sm120" patch revert --site-packages "$v"
expect "naming the way back" "changed since 'sm120 patch apply'.*mv $v/vllm/model_executor/layers/lightning_attn.py.sm120-orig"

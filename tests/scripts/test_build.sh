#!/bin/sh
# test_build.sh - the build's dependency check as a user without root sees
# it: one line naming the exact apt-get command, a clear word about a
# missing CUDA toolkit, a CC of several words (make CC="ccache gcc"), and
# where the Makefile finds the toolkit (nvcc on PATH, else /usr/local/cuda).
# Prints "ok - ..." / "not ok - ...".
set -u
echo 1..7 # plan: the number of checks below
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
# A compiler that finds no header and an id that is not root.
printf '#!/bin/sh\nexit 1\n' > "$fake/nocc"
printf '#!/bin/sh\necho 1000\n' > "$fake/id"
printf '#!/bin/sh\nexit 1\n' > "$fake/clang"
chmod +x "$fake/nocc" "$fake/id" "$fake/clang"

msg=$(PATH="$fake:$PATH" sh tools/build/deps.sh /usr/local/cuda "$fake/nocc" 2>&1)
rc=$?
want="sm120-shim: missing packages; run: sudo apt-get install -y clang libcjson-dev libclang-rt-dev libcmocka-dev libelf-dev liblz4-dev libzstd-dev"
if [ "$rc" -eq 1 ] && [ "$msg" = "$want" ]; then
	echo "ok - without root, missing packages stop the build with one line naming the command"
else
	echo "not ok - deps message (exit $rc): $msg"
fi

msg=$(sh tools/build/deps.sh /nonexistent/cuda "${CC:-cc}" 2>&1)
rc=$?
case "$msg" in
*"no nvcc at /nonexistent/cuda/bin/nvcc; install the CUDA toolkit"*"CUDA_HOME="*)
	[ "$rc" -eq 1 ] && echo "ok - a missing CUDA toolkit is named with the fix" ||
		echo "not ok - exit $rc for a missing toolkit" ;;
*) echo "not ok - missing toolkit message: $msg" ;;
esac

# CC is a command line, as make's: "env cc" (like "ccache gcc") finds every
# header cc finds.  A fake toolkit and a non-root id: nothing is installed.
mkdir -p "$fake/tk/bin" "$fake/tk/include" "$fake/id-only" "$fake/empty" "$fake/link"
printf '#!/bin/sh\nexit 0\n' >"$fake/tk/bin/nvcc"
chmod +x "$fake/tk/bin/nvcc"
: >"$fake/tk/include/cuda.h"
cp "$fake/id" "$fake/id-only/id"
msg=$(PATH="$fake/id-only:$PATH" sh tools/build/deps.sh "$fake/tk" "env ${CC:-cc}" 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && [ -z "$msg" ]; then
	echo "ok - a CC of several words (\"env ${CC:-cc}\") finds the installed packages"
else
	echo "not ok - deps.sh with CC=\"env ${CC:-cc}\" (exit $rc): $msg"
fi

# cuda_home PATH [MAKE ARGS]: the CUDA_HOME the Makefile settles on, with
# nothing inherited from a calling make or the environment (the recipe is
# expanded after the Makefile is read, and runs no program).
make=$(command -v make)
cuda_home() {
	path=$1
	shift
	env -u CUDA_HOME -u MAKEFLAGS -u GNUMAKEFLAGS -u MFLAGS -u MAKELEVEL PATH="$path" \
		"$make" -s --no-print-directory -f Makefile "$@" \
		--eval 'print-cuda-home: ; $(info CUDA_HOME=$(CUDA_HOME))' \
		print-cuda-home 2>/dev/null | sed -n 's/^CUDA_HOME=//p'
}
got=$(cuda_home "$fake/tk/bin:$PATH")
[ "$got" = "$fake/tk" ] && echo "ok - without CUDA_HOME, the toolkit of the nvcc on PATH" ||
	echo "not ok - CUDA_HOME from nvcc on PATH: '$got', expected '$fake/tk'"
ln -s "$fake/tk/bin/nvcc" "$fake/link/nvcc"
got=$(cuda_home "$fake/link:$PATH")
[ "$got" = "$(cd "$fake/tk" && pwd -P)" ] &&
	echo "ok - an nvcc on PATH that links into a toolkit gives that toolkit" ||
	echo "not ok - CUDA_HOME through a linked nvcc: '$got'"
got=$(cuda_home "$fake/empty")
[ "$got" = /usr/local/cuda ] && echo "ok - no nvcc on PATH: /usr/local/cuda, as before" ||
	echo "not ok - CUDA_HOME without nvcc on PATH: '$got'"
got=$(cuda_home "$fake/tk/bin:$PATH" CUDA_HOME=/opt/given)
[ "$got" = /opt/given ] && echo "ok - CUDA_HOME given to make wins over PATH" ||
	echo "not ok - make CUDA_HOME=/opt/given: '$got'"

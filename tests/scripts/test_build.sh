#!/bin/sh
# test_build.sh - the build's dependency check as a user without root sees
# it: one line naming the exact apt-get command, and a clear word about a
# missing CUDA toolkit.  Prints "ok - ..." / "not ok - ...".
set -u
echo 1..2 # plan: the number of checks below
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

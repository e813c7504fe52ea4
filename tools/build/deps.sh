#!/bin/sh
# deps.sh - make sure the build's system packages and the CUDA toolkit are there.
#
# Missing Debian packages are installed with apt-get when running as root on
# Debian/Ubuntu; otherwise the script prints the one command to run and fails.
# Usage: deps.sh CUDA_HOME CC
# CC is a command line, as make's CC is: "ccache gcc" or "env gcc" run gcc.
set -u
cuda_home=$1
cc=$2

missing=""
check() { # check HEADER PACKAGE
	# $cc unquoted: split into the command and its words, as make runs $(CC)
	# shellcheck disable=SC2086
	printf '#include <%s>\n' "$1" | $cc -E -x c - >/dev/null 2>&1 || missing="$missing $2"
}
probe() {
	missing=""
	check libelf.h libelf-dev
	check gelf.h libelf-dev
	check cjson/cJSON.h libcjson-dev
	check zstd.h libzstd-dev
	check lz4.h liblz4-dev
	check "stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h" libcmocka-dev
	# GNU patch: sm120 patch applies patches/ with it
	command -v patch >/dev/null 2>&1 || missing="$missing patch"
	# libFuzzer (make test runs a short fuzz of the image readers)
	printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n; }\n' |
		clang -fsanitize=fuzzer -x c - -o /dev/null >/dev/null 2>&1 ||
		missing="$missing clang libclang-rt-dev"
	missing=$(printf '%s\n' $missing | sort -u | tr '\n' ' ' | sed 's/ *$//')
}

probe
if [ -n "$missing" ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "  DEPS     installing:$missing"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >/dev/null && apt-get install -y -qq $missing >/dev/null || {
			echo "sm120-shim: 'apt-get install -y $missing' failed; run it by hand and retry" >&2
			exit 1
		}
		probe
	fi
fi
if [ -n "$missing" ]; then
	echo "sm120-shim: missing packages; run: sudo apt-get install -y $missing" >&2
	exit 1
fi
if [ ! -x "$cuda_home/bin/nvcc" ]; then
	echo "sm120-shim: no nvcc at $cuda_home/bin/nvcc; install the CUDA toolkit (12.8 or newer) or run make CUDA_HOME=/path/to/cuda" >&2
	exit 1
fi
exit 0

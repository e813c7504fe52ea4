#!/bin/sh
# fetch.sh DEST - download the framework releases listed in
# tests/oracle/packages.txt from the Python package registry (the wheel only,
# no dependencies) and unpack the listed kernel files into DEST/NAME-VERSION/,
# keeping the package's own paths.  Wheels are cached in
# ${SM120_ORACLE_CACHE:-$HOME/.cache/sm120-oracle}; a release already unpacked
# with the same file list is skipped.  The GPU machines have no registry:
# fetch here, then carry DEST.
# Exit 1 (naming the release) when a download or a file is missing.
set -eu
dest=${1:?usage: fetch.sh DEST}
list=$(dirname "$0")/packages.txt
cache=${SM120_ORACLE_CACHE:-$HOME/.cache/sm120-oracle}
mkdir -p "$dest" "$cache"
grep -v '^#' "$list" | while read -r name version files; do
	[ -n "$name" ] || continue
	out=$dest/$name-$version
	# .complete holds the file list: a release whose list grew is unpacked again
	[ -f "$out/.complete" ] && [ "$(cat "$out/.complete")" = "$files" ] && continue
	wheel=$(ls "$cache/$name-$version"-*.whl 2>/dev/null | head -n 1 || true)
	if [ -z "$wheel" ]; then
		echo "fetch.sh: downloading $name $version" >&2
		pip download --quiet --no-deps --dest "$cache" "$name==$version" >&2 ||
			{ echo "fetch.sh: cannot download $name==$version: is the registry reachable?" >&2; exit 1; }
		wheel=$(ls "$cache/$name-$version"-*.whl | head -n 1)
	fi
	rm -rf "$out" && mkdir -p "$out"
	# shellcheck disable=SC2086  (files: one word each)
	unzip -q -o "$wheel" $files -d "$out" ||
		{ echo "fetch.sh: $wheel lacks one of: $files" >&2; exit 1; }
	printf '%s\n' "$files" >"$out/.complete"
done

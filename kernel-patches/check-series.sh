#!/bin/bash
# kernel-patches/check-series.sh: every patch of the series is clean under
# the tree's scripts/checkpatch.pl --strict, and the tree builds after each
# one (the kernel is built with the first 1, 2, ... N patches, incrementally:
# only what a patch touches is rebuilt).  Ends with the full series built.
#
# checkpatch ignores two message types, both checked by hand instead
# (docs/patches.md): UNKNOWN_COMMIT_ID, because the Debian tarball has no git
# history in which to look up the IDs of Fixes: tags; FILE_PATH_CHANGES
# ("does MAINTAINERS need updating?"), because the one new file,
# tools/testing/selftests/mm/map_shared_validate.c, is under a directory the
# MEMORY MANAGEMENT entry already lists.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$here/../build/kernel/src-stock/linux-source-6.12
[ -f "$src/scripts/checkpatch.pl" ] || { echo "check-series: run 'make stock-kernel' first (it unpacks the pristine tree)" >&2; exit 1; }
mapfile -t patches < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/series")
pass=0 fail=0
for ((n = 1; n <= ${#patches[@]}; n++)); do
	p=${patches[$((n - 1))]}
	out=$(cd "$src" && perl scripts/checkpatch.pl --strict --no-tree -q --ignore UNKNOWN_COMMIT_ID,FILE_PATH_CHANGES "$here/$p" 2>&1)
	if [ -z "$out" ]; then
		echo "ok - checkpatch $p"; pass=$((pass + 1))
	else
		echo "not ok - checkpatch $p"; echo "$out" | sed 's/^/#   /'; fail=$((fail + 1))
	fi
	if MAPSYNC_SERIES_LIMIT=$n "$here/build-kernel.sh" patched > /tmp/check-series.$$ 2>&1; then
		echo "ok - builds with patches 1-$n"; pass=$((pass + 1))
	else
		echo "not ok - builds with patches 1-$n"; tail -n 20 /tmp/check-series.$$ | sed 's/^/#   /'; fail=$((fail + 1))
	fi
done
rm -f /tmp/check-series.$$
"$here/build-kernel.sh" patched > /dev/null || { echo "check-series: rebuilding the full series failed" >&2; fail=$((fail + 1)); }
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]

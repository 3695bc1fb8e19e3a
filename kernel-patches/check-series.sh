#!/bin/bash
# kernel-patches/check-series.sh: every patch of the series is clean under
# the tree's scripts/checkpatch.pl --strict, and the tree builds after each
# one (the kernel is built with the first 1, 2, ... N patches, incrementally:
# only what a patch touches is rebuilt).  Ends with the full series built.
#
# checkpatch ignores three message types, both checked by hand instead
# (docs/patches.md): UNKNOWN_COMMIT_ID, because the Debian tarball has no git
# history in which to look up the IDs of Fixes: tags; FILE_PATH_CHANGES
# ("does MAINTAINERS need updating?"), because the one new file,
# tools/testing/selftests/mm/map_shared_validate.c, is under a directory the
# MEMORY MANAGEMENT entry already lists; and MISSING_FIXES_TAG (Cc: stable
# without Fixes:), checked here instead: such a Cc must name the releases it
# is for ("Cc: stable@vger.kernel.org # 6.12"), as 0005's does, because the
# commit that introduced its bug could not be looked up offline.
#
#   check-series.sh                       checkpatch and build, kernel-patches/series
#   check-series.sh --no-build [FILE...]  checkpatch only, of the series or of
#                                         the patch files given (package-series.sh)
#   MAPSYNC_CHECKPATCH_TREE=DIR           the tree whose scripts/checkpatch.pl runs
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${MAPSYNC_CHECKPATCH_TREE:-$here/../build/kernel/src-stock/linux-source-6.12}
[ -f "$src/scripts/checkpatch.pl" ] || { echo "check-series: run 'make stock-kernel' first (it unpacks the pristine tree)" >&2; exit 1; }
build=1
[ "${1:-}" = --no-build ] && { build=0; shift; }
if [ $# -gt 0 ]; then
	patches=()
	for f; do
		[ -f "$f" ] || { echo "check-series: no patch file $f" >&2; exit 1; }
		patches+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")")
	done
	build=0
else
	mapfile -t patches < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' -e "s|^|$here/|" "$here/series")
fi
pass=0 fail=0
for ((n = 1; n <= ${#patches[@]}; n++)); do
	p=${patches[$((n - 1))]}
	out=$(cd "$src" && perl scripts/checkpatch.pl --strict --no-tree -q --ignore UNKNOWN_COMMIT_ID,FILE_PATH_CHANGES,MISSING_FIXES_TAG "$p" 2>&1)
	if grep -q '^Cc: stable@' "$p" && ! grep -q '^Fixes: ' "$p" &&
	   ! grep -qE '^Cc: stable@vger\.kernel\.org # [0-9]' "$p"; then
		out+="${out:+$'\n'}Cc: stable without Fixes: and without the releases it is for (# 6.12)"
	fi
	if [ -z "$out" ]; then
		echo "ok - checkpatch ${p#"$here/"}"; pass=$((pass + 1))
	else
		echo "not ok - checkpatch ${p#"$here/"}"; echo "$out" | sed 's/^/#   /'; fail=$((fail + 1))
	fi
	[ "$build" = 1 ] || continue
	if MAPSYNC_SERIES_LIMIT=$n "$here/build-kernel.sh" patched > /tmp/check-series.$$ 2>&1; then
		echo "ok - builds with patches 1-$n"; pass=$((pass + 1))
	else
		echo "not ok - builds with patches 1-$n"; tail -n 20 /tmp/check-series.$$ | sed 's/^/#   /'; fail=$((fail + 1))
	fi
done
rm -f /tmp/check-series.$$
if [ "$build" = 1 ]; then
	"$here/build-kernel.sh" patched > /dev/null || { echo "check-series: rebuilding the full series failed" >&2; fail=$((fail + 1)); }
fi
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]

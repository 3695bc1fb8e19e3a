#!/bin/bash
# Build one flavour of the mapsync kernel out of tree.
#
#   kernel-patches/build-kernel.sh patched|stock|no-lookahead|twin|mutant|tree [default|debug|gdb]
#
# patched: Debian's linux-source-6.12 with kernel-patches/series applied.
# stock:   the same tree with no patches.
# no-lookahead: the series without 0011 and 0012 (the MAP_SYNC allocation
#          look-ahead), for bench/: what the look-ahead itself costs files
#          that did not ask for it.
# twin:    the series plus kernel-patches/twin.patch, which sends MAP_SYNC
#          write faults on ext4 to the code every other fault runs: nearly
#          the code of patched in another binary, for bench/'s "rebuild" verdict
#          (what a rebuild alone moves a cell by); built in the mutant tree.
# tree:    a kernel tree of your own, MAPSYNC_KSRC=<dir> (make test KSRC=...):
#          configured the same way, built out of tree into
#          build/kernel/tree-<its path>/obj; nothing is written into it.
# mutant:  the patched tree plus the one deliberate breakage named by
#          MAPSYNC_MUTANT=kernel-patches/mutants/NAME.patch (make mutants);
#          the bzImage goes to build/kernel/mutant-NAME/.
# Both use tinyconfig + kernel-patches/mapsync.config (+ debug.config for the
# debug flavour, gdb.config for the gdb one: debug info, and vmlinux plus the
# kernel's gdb scripts beside the bzImage), and every option of the fragments is checked after
# olddefconfig.  Rebuilds are incremental: the tarball is unpacked again only
# when it changed, patches are popped and pushed like quilt (only the part of
# the series that changed), and .config keeps its timestamp when its content
# did not change.
#
# Every tree is built by ccache (build/ccache), and every tree has the same
# shape: the object directory is a child of the source directory, so Kbuild
# uses the relative srctree "..", and the compiler sees the same command
# line in every tree.  A second flavour, check-series and each mutant then
# compile only the files their patches change; the rest are cache hits.
set -euo pipefail

flavour=${1:?usage: build-kernel.sh patched|stock|no-lookahead|twin|mutant [default|debug|gdb]}
kconfig=${2:-default}
top=$(cd "$(dirname "$0")/.." && pwd)
here=$top/kernel-patches
tarball=${MAPSYNC_TARBALL:-/usr/src/linux-source-6.12.tar.xz}
build=$top/build
logs=$build/logs

die() { echo "build-kernel: $*" >&2; exit 1; }
step() { printf '[%s] %s\n' "$(date +%T)" "$*"; }

case $flavour in
patched|stock|no-lookahead) ;;
tree)
	usrc=${MAPSYNC_KSRC:?tree: set MAPSYNC_KSRC to a kernel tree (make test KSRC=...)}
	[ -f "$usrc/Makefile" ] && [ -f "$usrc/Kconfig" ] || die "MAPSYNC_KSRC=$usrc: no kernel tree there"
	usrc=$(cd "$usrc" && pwd) ;;
twin) mutant=$here/twin.patch ;;
mutant)
	mutant=${MAPSYNC_MUTANT:?mutant: set MAPSYNC_MUTANT to a patch in kernel-patches/mutants/}
	[ -f "$mutant" ] || die "no mutant patch $mutant"
	mutant=$(cd "$(dirname "$mutant")" && pwd)/$(basename "$mutant") ;;
*) die "unknown flavour '$flavour' (patched, stock, no-lookahead, twin, mutant or tree)";;
esac
case $kconfig in
default) fragments=("$here/mapsync.config"); objname=$flavour ;;
debug) fragments=("$here/mapsync.config" "$here/debug.config"); objname=$flavour-debug ;;
gdb) fragments=("$here/mapsync.config" "$here/gdb.config"); objname=$flavour-gdb ;;
*) die "unknown KCONFIG '$kconfig' (default, debug or gdb)";;
esac
[ "$flavour" = tree ] || [ -r "$tarball" ] || die "missing $tarball: run 'make deps' (installs linux-source-6.12)"
command -v flex >/dev/null && command -v bison >/dev/null && command -v bc >/dev/null ||
	die "flex, bison or bc missing: run 'make deps'"

[ "$flavour" = mutant ] && objname=mutant-$(basename "$mutant" .patch)
if [ "$flavour" = tree ]; then
	# the same name as the Makefile's TREEOBJ: the tree's path, / as _
	name=tree-$(printf %s "${usrc#/}" | tr / _)
	objname=$name${objname#tree}
	obj=$build/kernel/$objname/obj
	mkdir -p "$obj" "$logs"
	exec 9> "$build/kernel/$objname.lock"
	flock 9 || die "could not lock $build/kernel/$objname.lock"
	[ ! -f "$usrc/.config" ] || die "$usrc has a .config: Kbuild builds out of tree only from a clean tree ('make mrproper' there, or copy the tree)"
	src=$usrc
	begun=$(date +%s)
fi
if [ "$flavour" != tree ]; then
tree=$flavour
[ "$flavour" = twin ] && tree=mutant	# one patch more than the series, as a mutant
srcroot=$build/kernel/src-$tree
src=$srcroot/linux-source-6.12
obj=$src/out-$kconfig	# a child of $src: Kbuild's srctree is ".."
link=$build/kernel/obj-${objname/#mutant-*/mutant}
[ "$flavour" != twin ] || link=$build/kernel/obj-mutant
mkdir -p "$srcroot" "$logs"
# one build at a time per tree (make mutants and a make test may overlap)
exec 9> "$srcroot.lock"
flock 9 || die "could not lock $srcroot.lock"
# the bzImage gets this time, not the end of the build: make then rebuilds
# when a patch or fragment changed while this build was running
begun=$(date +%s)

# --- 1. unpack (only when the tarball changed)
# The tarball is unpacked once, into build/kernel/pristine/, and every tree
# is a hard-linked copy of that (cp -al: seconds, not the half minute of
# xz and 1.5 GB of writes per tree).  Nothing writes into a tree in place:
# patch(1) writes a new file and renames it over the link, and the objects
# go to the object directory.
stamp="$(stat -c '%s %Y' "$tarball") $tarball"
if [ ! -f "$srcroot/.tarball" ] || [ "$(cat "$srcroot/.tarball")" != "$stamp" ]; then
	pristine=$build/kernel/pristine
	mkdir -p "$pristine"
	exec 8> "$pristine.lock"
	flock 8 || die "could not lock $pristine.lock"
	if [ ! -f "$pristine/.tarball" ] || [ "$(cat "$pristine/.tarball")" != "$stamp" ]; then
		step "unpacking $(basename "$tarball") (once for every tree)"
		rm -rf "$pristine/linux-source-6.12" "$pristine/.tarball"
		tar -C "$pristine" -xf "$tarball"
		[ -f "$pristine/linux-source-6.12/Makefile" ] || die "$tarball did not unpack to linux-source-6.12/"
		echo "$stamp" > "$pristine/.tarball"
	fi
	step "making the $flavour tree (hard links to the pristine one)"
	rm -rf "$src" "$srcroot/.applied" "$srcroot/.tarball"
	cp -al "$pristine/linux-source-6.12" "$src"
	exec 8>&-
	echo "$stamp" > "$srcroot/.tarball"
fi
mkdir -p "$obj"
ln -sfn "${obj#"$build"/kernel/}" "$link"

# --- 2. patches: pop what changed, push the rest (quilt semantics)
applied=$srcroot/.applied
mkdir -p "$applied"
want=()
if [ "$flavour" = patched ] || [ "$flavour" = no-lookahead ] && [ -f "$here/series" ]; then
	while read -r p _; do
		case $p in ''|'#'*) continue;; esac
		[ -f "$here/$p" ] || die "kernel-patches/series names $p, which does not exist"
		[ "$flavour" = no-lookahead ] && case $p in 0011-*|0012-*) continue;; esac
		want+=("$p")
	done < "$here/series"
	# MAPSYNC_SERIES_LIMIT=N: only the first N patches (check-series.sh)
	[ -z "${MAPSYNC_SERIES_LIMIT:-}" ] || want=("${want[@]:0:$MAPSYNC_SERIES_LIMIT}")
fi
if [ "$flavour" = mutant ] || [ "$flavour" = twin ]; then
	while read -r p _; do
		case $p in ''|'#'*) continue;; esac
		want+=("$p")
	done < "$here/series"
	want+=("${mutant#"$here"/}")
fi
mapfile -t have < <(cd "$applied" && ls | sort)
keep=0
while [ $keep -lt ${#have[@]} ] && [ $keep -lt ${#want[@]} ] &&
      [ "${have[$keep]}" = "$(printf '%03d-%s' $keep "${want[$keep]//\//:}")" ] &&
      cmp -s "$applied/${have[$keep]}" "$here/${want[$keep]}"; do
	keep=$((keep + 1))
done
for ((i = ${#have[@]} - 1; i >= keep; i--)); do
	step "popping ${have[$i]#???-}"
	patch -d "$src" -p1 -R -s -f < "$applied/${have[$i]}" >/dev/null ||
		die "could not reverse ${have[$i]#???-}; remove $srcroot to unpack afresh"
	rm -f "$applied/${have[$i]}"
done
for ((i = keep; i < ${#want[@]}; i++)); do
	p=${want[$i]}
	if ! out=$(patch -d "$src" -p1 -f --dry-run < "$here/$p" 2>&1); then
		echo "build-kernel: patch $p does not apply to $(basename "$tarball"):" >&2
		grep -E 'FAILED|can.t find file|patching file|checking file|malformed|Reversed' <<< "$out" | sed 's/^/    /' >&2
		echo "build-kernel: fix the hunk(s) above in kernel-patches/$p (the tree has the patches before it applied)" >&2
		exit 1
	fi
	step "applying $p"
	patch -d "$src" -p1 -f -s < "$here/$p" >/dev/null
	cp "$here/$p" "$applied/$(printf '%03d-%s' "$i" "${p//\//:}")"
done

fi

# --- ccache: one cache for every tree; paths are relative (see above)
export CCACHE_DIR=${CCACHE_DIR:-$build/ccache} CCACHE_BASEDIR=$build CCACHE_NOHASHDIR=1
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G} CCACHE_SLOPPINESS=time_macros
# depend mode: on a miss, ccache compiles once and keys the result on the
# headers the compiler's own -MMD list names (Kbuild passes -Wp,-MMD), instead
# of running the preprocessor a second time to hash its output.  Measured on
# fs/xfs/ (127 objects, -j2, cold cache): 173 s in the default mode, 110 s in
# depend mode, 107 s without ccache; warm hits as fast in both.
export CCACHE_DEPEND=1
# debug info names the directory it was compiled in: an object of another
# tree would send gdb to that tree's (differently patched) sources
[ "$kconfig" != gdb ] || unset CCACHE_NOHASHDIR
export KBUILD_BUILD_TIMESTAMP='2026-01-01' KBUILD_BUILD_USER=mapsync KBUILD_BUILD_HOST=mapsync
command -v ccache >/dev/null || die "ccache missing: run 'make deps'"
kmake() { make -C "$src" O="$obj" CC="ccache gcc" HOSTCC="ccache gcc" "$@"; }
ccstat() { ccache --print-stats 2>/dev/null | awk -v k="$1" '$1 == k { print $2 }'; }

# --- 3. config: tinyconfig + fragments, checked; keep .config's mtime if unchanged
step "configuring $objname (tinyconfig + $(for f in "${fragments[@]}"; do basename "$f"; done | paste -sd+))"
[ -f "$obj/.config" ] && cp -p "$obj/.config" "$obj/.config.prev"
kmake -s tinyconfig >/dev/null
(cd "$src" && scripts/kconfig/merge_config.sh -m -O "$obj" "$obj/.config" "${fragments[@]}" >/dev/null)
kmake -s olddefconfig >/dev/null
dropped=()
for f in "${fragments[@]}"; do
	while IFS= read -r line; do
		opt=${line%%=*} val=${line#*=}
		if [ "$val" = n ]; then
			grep -q "^$opt=" "$obj/.config" && dropped+=("$line (is $(grep "^$opt=" "$obj/.config"))")
		elif ! grep -qx "$line" "$obj/.config"; then
			now=$(grep -E "^$opt=|^# $opt is not set" "$obj/.config" || echo "absent")
			dropped+=("$line (now: $now)")
		fi
	done < <(grep -E '^CONFIG_[A-Za-z0-9_]+=' "$f")
done
if [ ${#dropped[@]} -gt 0 ]; then
	echo "build-kernel: olddefconfig dropped options of the fragment (a dependency is missing):" >&2
	printf '    %s\n' "${dropped[@]}" >&2
	echo "build-kernel: add the missing dependency to the fragment; 'make -C $src O=$obj menuconfig' shows it" >&2
	rm -f "$obj/.config.prev"
	exit 1
fi
if [ -f "$obj/.config.prev" ]; then
	if cmp -s "$obj/.config" "$obj/.config.prev"; then
		mv "$obj/.config.prev" "$obj/.config"
	else
		step "config changed: Kbuild rebuilds what depends on the changed options"
		rm -f "$obj/.config.prev"
	fi
fi

# --- 4. build
log=$logs/$(date +%Y%m%d-%H%M%S)-kernel-$objname.log
step "building bzImage ($objname, -j$(nproc)); log: ${log#"$top"/}"
t0=$(date +%s)
ccache -z >/dev/null
# vmlinux through ccache; then the boot image without it: piggy.S pulls the
# compressed vmlinux in with .incbin, which ccache's depend mode cannot see,
# so whenever the compressed size (the only number in piggy.S) repeats an
# earlier build's, a cached piggy.o would put that build's kernel into this
# bzImage (seen: a bzImage that booted the code of the build before it).
# piggy.o is assembled again every time (a fraction of a second), so that one
# already made that way from the cache is replaced too.
if ! { kmake -j"$(nproc)" vmlinux &&
       rm -f "$obj/arch/x86/boot/compressed/piggy.o" &&
       CCACHE_DISABLE=1 kmake -j"$(nproc)" bzImage; } > "$log" 2>&1; then
	echo "build-kernel: the $objname kernel failed to build; log: $log" >&2
	grep -E 'error|Error' "$log" | head -20 >&2 || true
	tail -n 40 "$log" >&2
	exit 1
fi
# and check it: the bzImage must carry this very compressed vmlinux
payload=$(ls "$obj"/arch/x86/boot/compressed/vmlinux.bin.* 2>/dev/null | head -1)
[ -n "$payload" ] && python3 - "$obj/arch/x86/boot/bzImage" "$payload" <<'PY' ||
import sys
bz = open(sys.argv[1], 'rb').read()
sys.exit(0 if open(sys.argv[2], 'rb').read() in bz else 1)
PY
	die "the bzImage of $objname does not hold the vmlinux just built ($payload); log: $log"
mkdir -p "$build/kernel/$objname"
cp "$obj/arch/x86/boot/bzImage" "$build/kernel/$objname/bzImage"
touch -d "@$begun" "$build/kernel/$objname/bzImage"
if [ "$kconfig" = gdb ]; then
	# the symbols of this very bzImage (a hard link: vmlinux is large), and
	# the gdb scripts (vmlinux-gdb.py, scripts/gdb/linux/) it auto-loads
	kmake -s scripts_gdb >> "$log" 2>&1 || die "scripts_gdb failed; log: $log"
	ln -f "$obj/vmlinux" "$build/kernel/$objname/vmlinux"
	ln -sfn "$obj" "$build/kernel/$objname/obj"
fi
cp -p "$obj/.config" "$build/kernel/$objname/config"
if [ "$flavour" = tree ]; then
	# no series: the tree and, if it is a git tree, its commit
	echo "# tree $usrc $(git -C "$usrc" describe --always --dirty 2>/dev/null)" > "$build/kernel/$objname/series"
else
	( cd "$applied" && ls | sed 's/^...-//' ) > "$build/kernel/$objname/series"
fi
hits=$(( $(ccstat direct_cache_hit) + $(ccstat preprocessed_cache_hit) )) miss=$(ccstat cache_miss)
step "kernel $objname ready in $(( $(date +%s) - t0 )) s: build/kernel/$objname/bzImage ($(grep -vc "^#" "$build/kernel/$objname/series" || true) patches; ccache $hits hits, $miss misses$( [ $((hits + miss)) -gt 0 ] && echo ", $((100 * hits / (hits + miss)))%"))"

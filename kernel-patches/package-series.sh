#!/bin/bash
# kernel-patches/package-series.sh: the patches of kernel-patches/series as
# the three series a maintainer receives, ready for git send-email.
#
#   package-series.sh [--build] [--out DIR]      (make send-ready [BUILD=1])
#
# kernel-patches/covers/groups says which series a patch goes to, by the start
# of its subject, so renumbering the series changes nothing there; each series
# has its cover letter in covers/<series>.txt (header lines Prefix, Subject,
# To, Cc, Base, Notes, then the body).  For each series it writes
# DIR/<series>/ (default build/send/): 0000-cover-letter.patch and the
# patches renumbered 1/N..N/N under the series' subject prefix, each with To:
# and Cc: from the tree's scripts/get_maintainer.pl (run on that patch; the
# cover gets the union) plus the lists the cover names.  The cover letter gets
# the series' subsection of "Mainline notes" in docs/patches.md, the patches
# that carry Cc: stable, the shortlog and the diffstat.
#
# Then it checks what it wrote:
#  - checkpatch --strict on every patch (check-series.sh --no-build, which
#    ignores the three message types docs/patches.md explains);
#  - each series applies, in order and with no fuzz (git apply), on Debian's
#    6.12 tree plus the series its cover names as Base;
#  - the mmap(2) patch of kernel-patches/man-pages/ applies to Debian's
#    mmap.2 (manpages-dev) and groff -man -ww -z prints no warning; the
#    rendered page goes to DIR/man-pages/.
# --build also runs check-series.sh itself: a kernel build after each patch,
# in the order of kernel-patches/series (CPU-heavy: minutes on 2 cores with a
# warm ccache).  Ends with "N passed, N failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
out=$top/build/send
build=0
tarball=${MAPSYNC_TARBALL:-/usr/src/linux-source-6.12.tar.xz}
manpage=/usr/share/man/man2/mmap.2.gz

die() { echo "package-series: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=1 ;;
	--out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift ;;
	-h|--help) sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option '$1' (--build, --out DIR)" ;;
	esac
	shift
done
command -v git >/dev/null || die "git is missing: run 'make deps'"

# --- the tree: scripts/checkpatch.pl, scripts/get_maintainer.pl, MAINTAINERS,
# and the files the patches touch.  The pristine tree of 'make stock-kernel'
# if there is one, else the needed parts of the tarball in build/send-tree.
tree=$top/build/kernel/src-stock/linux-source-6.12
if [ ! -f "$tree/MAINTAINERS" ]; then
	[ -r "$tarball" ] || die "missing $tarball: run 'make deps' (installs linux-source-6.12)"
	tree=$top/build/send-tree/linux-source-6.12
	stamp=$top/build/send-tree/files
	mapfile -t touched < <(sed -n 's|^--- a/|linux-source-6.12/|p' "$here"/[0-9][0-9][0-9][0-9]-*.patch | sort -u)
	if [ ! -f "$stamp" ] || [ "$tarball" -nt "$stamp" ] || ! printf '%s\n' "${touched[@]}" | cmp -s - "$stamp"; then
		echo "[$(date +%T)] unpacking MAINTAINERS, scripts/ and the files the patches change from $(basename "$tarball")"
		rm -rf "$top/build/send-tree"; mkdir -p "$top/build/send-tree"
		tar -xJf "$tarball" -C "$top/build/send-tree" linux-source-6.12/MAINTAINERS linux-source-6.12/Makefile \
			linux-source-6.12/scripts "${touched[@]}" || die "could not unpack $tarball"
		printf '%s\n' "${touched[@]}" > "$stamp"
	fi
fi

# --- patches, subjects and groups
mailhdr() {	# mail header $2 of patch file $1, unfolded
	awk -v key="$2:" '$1 == key { s = $0; on = 1; next }
	     on && /^[ \t]/ { s = s $0; next }
	     on { exit }
	     /^$/ { exit }
	     END { sub(/^[^:]*: */, "", s); gsub(/[ \t]+/, " ", s); print s }' "$1"
}
subject() { mailhdr "$1" Subject | sed 's/^\[[^]]*\] *//'; }	# without its [PATCH ...]
patches_in() {	# the numbered patches written in directory $1, cover letter left out
	local f
	for f in "$1"/[0-9][0-9][0-9][0-9]-*.patch; do
		[ -f "$f" ] && [ "${f##*/}" != 0000-cover-letter.patch ] && echo "$f"
	done
}
trailers() { awk '/^$/ { body = 1; next } /^---$/ { exit } body' "$1"; }	# the commit message
mapfile -t patches < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/series")
[ ${#patches[@]} -gt 0 ] || die "kernel-patches/series lists no patch"
mapfile -t rules < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/covers/groups")
declare -A group members
order=()
for r in "${rules[@]}"; do
	s=${r%%[[:space:]]*}
	case " ${order[*]} " in *" $s "*) ;; *) order+=("$s") ;; esac
done
for p in "${patches[@]}"; do
	[ -f "$here/$p" ] || die "kernel-patches/series names $p, which does not exist"
	subj=$(subject "$here/$p")
	g=
	for r in "${rules[@]}"; do
		s=${r%%[[:space:]]*}; prefix=$(sed -e 's/^[^[:space:]]*[[:space:]]*//' -e 's/[[:space:]]*$//' <<<"$r")
		case $subj in "$prefix"*) g=$s; break ;; esac
	done
	[ -n "$g" ] || die "$p (\"$subj\") matches no line of kernel-patches/covers/groups: add its subject prefix there"
	group[$p]=$g
	members[$g]+="$p "
done

diffstat_of() {	# one diffstat for several patches (a file that two patches touch counts once)
	awk '/^diff --git / { f = substr($4, 3); if (!(f in ins)) { order[++n] = f; ins[f] = del[f] = 0 }; hunk = 0; next }
	     /^@@ / { hunk = 1; next }
	     /^-- $/ { hunk = 0; next }
	     hunk && /^\+/ { ins[f]++; next }
	     hunk && /^-/ { del[f]++; next }
	     END { w = 0; for (i = 1; i <= n; i++) if (length(order[i]) > w) w = length(order[i])
		   for (i = 1; i <= n; i++) { f = order[i]; t = ins[f] + del[f]; bar = ""
			for (j = 0; j < ins[f] && j < 50; j++) bar = bar "+"
			for (j = 0; j < del[f] && j < 50; j++) bar = bar "-"
			printf " %-*s | %4d %s\n", w, f, t, bar; ti += ins[f]; td += del[f] }
		   printf " %d file%s changed, %d insertion%s(+), %d deletion%s(-)\n", n, n == 1 ? "" : "s",
			ti, ti == 1 ? "" : "s", td, td == 1 ? "" : "s" }' "$@"
}
header() { sed -n "/^\$/q; s/^$2: *//p" "$1"; }	# header KEY of a cover file
body() { sed '1,/^$/d' "$1"; }
addrs() {	# comma/newline separated addresses -> one per line, deduplicated by address
	tr ',' '\n' | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e '/^$/d' |
		awk '{ a = tolower($0); if (match(a, /<[^>]*>/)) a = substr(a, RSTART, RLENGTH); if (!seen[a]++) print }'
}
joined() { paste -sd, - | sed 's/,/, /g'; }
maint() {	# get_maintainer.pl for one patch: $2 = to (maintainers) | cc (reviewers, lists)
	local opts=(--no-git --no-git-fallback --no-rolestats --no-tree)
	if [ "$2" = to ]; then opts+=(--m --no-r --no-l); else opts+=(--no-m --r --l); fi
	(cd "$tree" && perl scripts/get_maintainer.pl "${opts[@]}" "$1" 2>/dev/null)
}
notes() {	# the "### $1" subsection of "## Mainline notes" in docs/patches.md, as mail text
	awk -v want="### $1" '
		/^## / { inside = ($0 == "## Mainline notes"); next }
		inside && /^### / { on = ($0 == want); next }
		inside && on { print }' "$top/docs/patches.md" | sed -e 's/`//g' | sed -e '/./,$!d'
}
kver=$(awk '/^VERSION =/ {v=$3} /^PATCHLEVEL =/ {p=$3} /^SUBLEVEL =/ {s=$3} END {print v "." p "." s}' "$tree/Makefile" 2>/dev/null)
[ -n "$kver" ] && [ "$kver" != .. ] || kver=6.12

rm -rf "$out"; mkdir -p "$out"
pass=0 fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
notok() { echo "not ok - $*"; fail=$((fail + 1)); }

for s in "${order[@]}"; do
	cover=$here/covers/$s.txt
	[ -f "$cover" ] || die "no cover letter $cover for series $s"
	read -r -a list <<<"${members[$s]:-}"
	n=${#list[@]}
	[ "$n" -gt 0 ] || die "series $s has no patch (kernel-patches/covers/groups)"
	prefix=$(header "$cover" Prefix); title=$(header "$cover" Subject)
	[ -n "$prefix" ] && [ -n "$title" ] || die "$cover: needs Prefix: and Subject: lines"
	w=${#n}
	dir=$out/$s; mkdir -p "$dir"
	all_to=$(header "$cover" To | addrs); all_cc=$(header "$cover" Cc | addrs)
	files=()
	for ((i = 1; i <= n; i++)); do
		p=${list[$((i - 1))]}
		to=$( { header "$cover" To | addrs; maint "$here/$p" to; } | addrs)
		cc=$( { header "$cover" Cc | addrs; maint "$here/$p" cc; } | addrs | grep -vixF -f <(printf '%s\n' "$to"))
		all_to=$(printf '%s\n%s\n' "$all_to" "$to" | addrs)
		all_cc=$(printf '%s\n%s\n' "$all_cc" "$cc" | addrs)
		f=$dir/$(printf %04d "$i")-${p#[0-9][0-9][0-9][0-9]-}
		# the header with the new Subject and To/Cc, then the rest unchanged
		awk -v subj="Subject: [$prefix $(printf "%0${w}d/%d" "$i" "$n")] $(subject "$here/$p")" \
		    -v to="To: $(printf '%s\n' "$to" | joined)" -v cc="Cc: $(printf '%s\n' "$cc" | joined)" '
			done_hdr { print; next }
			/^Subject:/ { print subj; print to; if (cc != "Cc: ") print cc; skip = 1; next }
			skip && /^[ \t]/ { next }
			{ skip = 0 }
			/^$/ { done_hdr = 1 }
			{ print }' "$here/$p" > "$f"
		files+=("$f")
	done
	stable=$(for ((i = 1; i <= n; i++)); do
		t=$(trailers "${files[$((i - 1))]}" | grep -im1 '^Cc: *stable@vger\.kernel\.org') &&
			printf '  %s/%s %s%s\n' "$i" "$n" "$(subject "${files[$((i - 1))]}")" "${t#*stable@vger.kernel.org}"
	done)
	[ -z "$stable" ] || all_cc=$(printf '%s\nstable@vger.kernel.org\n' "$all_cc" | addrs)
	all_cc=$(printf '%s\n' "$all_cc" | grep -vixF -f <(printf '%s\n' "$all_to"))
	# the cover letter
	{
		echo "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001"
		sed -n '/^From: /{p; :a; n; /^[ \t]/{p; ba}; q}' "$here/${list[0]}"
		echo "Date: $(date -R)"
		echo "Subject: [$prefix $(printf "%0${w}d/%d" 0 "$n")] $title"
		echo "To: $(printf '%s\n' "$all_to" | joined)"
		[ -z "$all_cc" ] || echo "Cc: $(printf '%s\n' "$all_cc" | joined)"
		echo
		body "$cover"
		base=$(header "$cover" Base)
		echo
		if [ -z "$base" ] || [ "$base" = none ]; then
			echo "Based on Debian's linux-source-6.12 ($kver)."
		else
			echo "Based on Debian's linux-source-6.12 ($kver) with the series \"$(header "$here/covers/$base.txt" Subject)\" applied."
		fi
		nt=$(header "$cover" Notes)
		if [ -n "$nt" ]; then
			text=$(notes "$nt")
			[ -n "$text" ] || die "docs/patches.md has no \"### $nt\" under \"## Mainline notes\" (named by $cover)"
			printf '\nMainline notes (what a rebase onto mainline has to change):\n\n%s\n' "$text"
		fi
		if [ -n "$stable" ]; then
			printf '\nFor stable (these carry Cc: stable@vger.kernel.org):\n%s\n' "$stable"
		else
			printf '\nNo patch of this series carries Cc: stable@vger.kernel.org.\n'
		fi
		echo
		echo
		echo "$(mailhdr "$here/${list[0]}" From | sed 's/ *<.*//') ($n):"
		for f in "${files[@]}"; do echo "  $(subject "$f")"; done
		echo
		diffstat_of "${files[@]}"
		echo
		echo "-- "
		git --version | sed 's/^git version //'
	} > "$dir/0000-cover-letter.patch"
	echo "# $s: $n patches -> ${dir#"$top/"}/ ([$prefix 0/$n] $title)"
	if body "$cover" | grep -q 'Cc: stable'; then	# the cover promises a stable list
		if [ -n "$stable" ]; then ok "$s: $(grep -c . <<<"$stable") patches carry the Cc: stable its cover speaks of"
		else notok "$s: its cover speaks of patches that carry Cc: stable, and none does"; fi
	fi
done

# --- checks
echo "# checkpatch --strict on every patch written"
while read -r line; do
	case $line in
	"ok - "*) line=${line#ok - }; ok "${line//"$top/"/}" ;;
	"not ok - "*) line=${line#not ok - }; notok "${line//"$top/"/}" ;;
	"#"*) echo "$line" ;;
	esac
done < <(mapfile -t all < <(for s in "${order[@]}"; do patches_in "$out/$s"; done)
	MAPSYNC_CHECKPATCH_TREE=$tree "$here/check-series.sh" --no-build "${all[@]}" 2>&1)

echo "# each series applies on its own base, in order, without fuzz"
for s in "${order[@]}"; do
	base=$(header "$here/covers/$s.txt" Base)
	chain=()
	if [ -n "$base" ] && [ "$base" != none ]; then
		[ -d "$out/$base" ] || { notok "$s: base series '$base' (Base: in covers/$s.txt) was not written"; continue; }
		mapfile -t chain < <(patches_in "$out/$base")
	fi
	mapfile -t mine < <(patches_in "$out/$s")
	tmp=$(mktemp -d)
	# only the files the patches touch, copied from the pristine tree
	sed -n 's|^--- a/||p' "${chain[@]}" "${mine[@]}" | sort -u |
		while read -r f; do [ -f "$tree/$f" ] && install -D -m 644 "$tree/$f" "$tmp/$f"; done
	good=1
	for p in "${chain[@]}" "${mine[@]}"; do
		if ! msg=$(cd "$tmp" && git apply --whitespace=nowarn "$p" 2>&1); then
			notok "$s applies on $([ -n "$base" ] && [ "$base" != none ] && echo "6.12 + $base" || echo 6.12): ${p#"$top/"}"
			echo "$msg" | sed 's/^/#   /'
			good=0; break
		fi
	done
	[ "$good" = 1 ] && ok "$s applies on $([ -n "$base" ] && [ "$base" != none ] && echo "6.12 + $base" || echo 6.12) (${#mine[@]} patches)"
	rm -rf "$tmp"
done

echo "# the mmap(2) patch (kernel-patches/man-pages/)"
mp=("$here"/man-pages/0*.patch)
if [ ! -f "${mp[0]}" ]; then
	notok "man-pages: no patch in kernel-patches/man-pages/"
elif [ ! -r "$manpage" ]; then
	notok "man-pages: $manpage missing: apt-get install manpages-dev (make deps)"
else
	m=$top/build/man-pages/check; rm -rf "$m"; mkdir -p "$m/man2" "$out/man-pages"
	zcat "$manpage" > "$m/man2/mmap.2"
	if msg=$(cd "$m" && git apply "${mp[@]}" 2>&1); then
		ok "man-pages: ${mp[*]##*/} applies to Debian's mmap.2"
		warn=$(groff -man -ww -z "$m/man2/mmap.2" 2>&1)
		if [ -z "$warn" ]; then ok "man-pages: groff -man -ww -z prints no warning"
		else notok "man-pages: groff -man -ww -z"; echo "$warn" | sed 's/^/#   /'; fi
		cp "${mp[@]}" "$out/man-pages/"
		MANWIDTH=78 man -l "$m/man2/mmap.2" 2>/dev/null | col -bx > "$out/man-pages/mmap.2.txt"
	else
		notok "man-pages: ${mp[*]##*/} does not apply to Debian's mmap.2"; echo "$msg" | sed 's/^/#   /'
	fi
fi

if [ "$build" = 1 ]; then
	echo "# check-series.sh: checkpatch and a kernel build after each patch of kernel-patches/series"
	while read -r line; do
		case $line in
		"ok - "*) ok "${line#ok - }" ;;
		"not ok - "*) notok "${line#not ok - }" ;;
		"#"*|*"passed,"*) [ "${line#*passed,}" = "$line" ] && echo "$line" ;;
		*) echo "# $line" ;;
		esac
	done < <(MAPSYNC_CHECKPATCH_TREE=$tree "$here/check-series.sh" 2>&1)
else
	echo "# no build check (--build / BUILD=1 runs check-series.sh: a build after each patch)"
fi
echo "# written to ${out#"$top/"}/: $(cd "$out" && ls -d */ | tr -d / | paste -sd' ')"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/bin/bash
# Build the guest initramfs (gzip cpio) from binaries installed on the host.
#
#   guest-rootfs/build.sh OUTPUT [EXTRA-ELF...]
#
# Copies every path of guest-rootfs/manifest, the shared libraries of each ELF
# (ldd), busybox's applet links, and guest-rootfs/init.  EXTRA-ELF files (our
# test programs, which run from the 9p share) are not copied, but their
# libraries are, so that they run in the guest.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUTPUT [EXTRA-ELF...]}; shift
die() { echo "rootfs: $*" >&2; exit 1; }

mkdir -p "$(dirname "$out")"
stage=$(mktemp -d "$(dirname "$out")/.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
# merged-/usr layout, as on the host: /bin, /sbin, /lib, /lib64 point into /usr
mkdir -p "$stage"/usr/{bin,sbin,lib,lib64}
for d in bin sbin lib lib64; do ln -s usr/$d "$stage/$d"; done

copy() {	# copy a host file to the same path in the stage, keeping symlinks as links to copies
	local f=$1
	[ -e "$stage$f" ] && return
	mkdir -p "$stage$(dirname "$f")"
	if [ -L "$f" ]; then
		local t; t=$(readlink -f "$f")
		copy "$t"
		ln -sf "$t" "$stage$f"
	else
		cp -p --remove-destination "$f" "$stage$f"
	fi
}
libs_of() {	# the shared libraries an ELF file needs, and the loader
	ldd "$1" 2>/dev/null | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}'
}

elves=()
while read -r path _; do
	case $path in ''|'#'*) continue;; esac
	[ -e "$path" ] || die "$path (guest-rootfs/manifest) is not installed: run 'make deps'"
	copy "$path"
	file -L "$path" | grep -q 'ELF.*dynamically' && elves+=("$path")
done < "$here/manifest"
for e in "$@"; do
	[ -e "$e" ] || die "no program $e to take libraries from"
	file -L "$e" | grep -q 'ELF.*dynamically' && elves+=("$e")
done
for e in "${elves[@]}"; do
	for l in $(libs_of "$e"); do copy "$l"; done
done

# busybox applets, then the names our scripts use for the e2fsprogs/xfs tools
for a in $("$stage/bin/busybox" --list-full); do
	[ -e "$stage/$a" ] || [ -L "$stage/$a" ] || ln -s /bin/busybox "$stage/$a"
done
for n in mkfs.ext2 mkfs.ext4; do ln -sf mke2fs "$stage/usr/sbin/$n"; done
mkdir -p "$stage"/{proc,sys,dev,run,tmp,mnt,root,etc}
echo "root:x:0:0:root:/root:/bin/sh" > "$stage/etc/passwd"
echo "root:x:0:" > "$stage/etc/group"
install -m 755 "$here/init" "$stage/init"
install -m 755 "$here/powercut" "$stage/usr/bin/powercut"

(cd "$stage" && find . -print0 | sort -z | cpio --null -o -H newc --quiet) | gzip -1 > "$out.tmp"
mv "$out.tmp" "$out"
echo "rootfs: ${out#"$PWD"/} ($(du -h "$out" | cut -f1), $(cd "$stage" && find . -type f | wc -l) files)"

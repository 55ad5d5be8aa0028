#!/bin/sh
# Build a Debian kernel (linux-source-6.12 or linux-source-6.1, both
# packaged for Debian 12) with the patches in contrib/kernel/patches-VERSION/,
# a small initramfs holding the static test program, and an ext4 data disk
# for run-qemu.sh.
#
# Everything is built outside the source tree, in
#   ${MADVSEQ_KERNEL_BUILD:-${XDG_CACHE_HOME:-$HOME/.cache}/madvseq-kernel-VERSION}
# Missing Debian packages are installed with apt-get (needs root).
#
# Environment:
#   MADVSEQ_KERNEL_VERSION 6.12 (default) or 6.1: which source and series
#   MADVSEQ_KERNEL_BUILD  cache directory (see above)
#   MADVSEQ_KERNEL_JOBS   make -j value (default: number of CPUs)
#   MADVSEQ_KERNEL_NICE   nice level for the kernel build (default: 19)
#   MADVSEQ_KERNEL_SERIES apply only the first N patches (default: all), to
#                         measure each step; use a separate MADVSEQ_KERNEL_BUILD
set -eu

here=$(cd "$(dirname "$0")" && pwd)
version=${MADVSEQ_KERNEL_VERSION:-6.12}
cache=${MADVSEQ_KERNEL_BUILD:-${XDG_CACHE_HOME:-$HOME/.cache}/madvseq-kernel-$version}
jobs=${MADVSEQ_KERNEL_JOBS:-$(nproc)}
nicelvl=${MADVSEQ_KERNEL_NICE:-19}
tarball=/usr/src/linux-source-$version.tar.xz

log() { printf 'build.sh: %s\n' "$*" >&2; }

case $version in
6.1|6.12) ;;
*)	log "MADVSEQ_KERNEL_VERSION must be 6.12 or 6.1, not '$version'"
	exit 1 ;;
esac
# The guest's configuration: what both versions share, then the version's own;
# the 6.12 kernel also boots tests/guest/run-guest.sh's harness (the host's
# root over 9p, cgroup v2, the daemon), all built in.
configs="$here/guest.config $here/guest-$version.config"
[ "$version" = 6.12 ] && configs="$configs $here/guest-harness.config"

start=$(date +%s)
mkdir -p "$cache"

# --- packages --------------------------------------------------------------
need=""
for pkg in linux-source-$version build-essential bc bison flex libelf-dev \
	   libssl-dev cpio kmod busybox-static e2fsprogs xz-utils \
	   qemu-system-x86; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null |
		grep -q 'install ok installed' || need="$need $pkg"
done
if [ -n "$need" ]; then
	log "installing:$need"
	if [ "$(id -u)" -ne 0 ]; then
		log "not root: install these packages first:$need"
		exit 1
	fi
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y $need
fi

# --- source: pristine copy, then a patched copy ----------------------------
pristine=$cache/linux-source-$version
if [ ! -f "$pristine/Makefile" ]; then
	log "extracting $tarball"
	rm -rf "$pristine"
	tar -C "$cache" -xf "$tarball"
fi

# The patched tree is rebuilt from the pristine one whenever the series
# changes: a copy made of hard links (patch(1) replaces the files it
# changes, so the pristine tree stays pristine) that keeps the timestamps of
# files the series does not touch, so make only rebuilds what changed.
# (0000-cover-letter.patch is the series' cover letter, not a change.)
patches=$(for p in "$here"/patches-"$version"/*.patch; do
	case ${p##*/} in 0000-*) ;; *) echo "$p" ;; esac
done)
if [ -n "${MADVSEQ_KERNEL_SERIES:-}" ]; then
	patches=$(echo "$patches" | head -n "$MADVSEQ_KERNEL_SERIES")
fi
# shellcheck disable=SC2086
series_sum=$( (echo "$patches" | xargs -r -n1 basename; cat $patches /dev/null) |
	sha256sum | cut -d' ' -f1)
src=$cache/src
if [ "$(cat "$src/.msq-series" 2>/dev/null)" != "$series_sum" ]; then
	log "applying patches"
	rm -rf "$src.tmp"
	cp -al "$pristine" "$src.tmp" 2>/dev/null || cp -a "$pristine" "$src.tmp"
	for p in $patches; do
		log "  $(basename "$p")"
		patch -d "$src.tmp" -p1 -s --no-backup-if-mismatch < "$p"
	done
	# Files that came out identical to the previous build keep their old
	# timestamps (a change to a commit message alone rebuilds nothing).
	# shellcheck disable=SC2086
	for f in $(sed -n 's|^+++ b/||p' $patches /dev/null | sort -u); do
		if [ -f "$src/$f" ] && cmp -s "$src/$f" "$src.tmp/$f"; then
			touch -r "$src/$f" "$src.tmp/$f"
		fi
	done
	echo "$series_sum" > "$src.tmp/.msq-series"
	rm -rf "$src"
	mv "$src.tmp" "$src"
fi

# --- kernel ----------------------------------------------------------------
obj=$cache/obj
mkdir -p "$obj"
# shellcheck disable=SC2086
cfg_sum=$(cat $configs | sha256sum | cut -d' ' -f1)
if [ "$(cat "$obj/.msq-config" 2>/dev/null)" != "$cfg_sum" ] ||
   [ ! -f "$obj/.config" ]; then
	log "configuring"
	make -s -C "$src" O="$obj" tinyconfig >/dev/null
	# shellcheck disable=SC2086
	"$src/scripts/kconfig/merge_config.sh" -m -O "$obj" "$obj/.config" \
		$configs >/dev/null
	make -s -C "$src" O="$obj" olddefconfig >/dev/null
	# Every symbol asked for must have made it through the dependencies,
	# and every one switched off must be off.
	# shellcheck disable=SC2086
	missing=$(cat $configs | while read -r line; do
		case $line in
		CONFIG_*)
			grep -qx "$line" "$obj/.config" || echo "$line" ;;
		"# CONFIG_"*" is not set")
			sym=${line#\# }
			sym=${sym%% *}
			! grep -q "^$sym=" "$obj/.config" || echo "$line" ;;
		esac
	done)
	if [ -n "$missing" ]; then
		log "config symbols not as asked: $missing"
		exit 1
	fi
	echo "$cfg_sum" > "$obj/.msq-config"
fi
log "building kernel (make -j$jobs, nice $nicelvl)"
kstart=$(date +%s)
nice -n "$nicelvl" make -s -C "$src" O="$obj" -j"$jobs" bzImage
log "kernel built in $(( $(date +%s) - kstart ))s"
cp "$obj/arch/x86/boot/bzImage" "$cache/bzImage"

# --- initramfs ---------------------------------------------------------------
ird=$cache/initramfs
rm -rf "$ird"
mkdir -p "$ird/bin" "$ird/dev" "$ird/proc" "$ird/sys" "$ird/mnt"
gcc -static -O2 -Wall -Wextra -o "$ird/bin/seqtest" "$here/seqtest.c"
cp /bin/busybox "$ird/bin/busybox"
for app in sh mount umount mkdir rmdir cat cut echo sleep poweroff reboot ls; do
	ln -s busybox "$ird/bin/$app"
done
cp "$here/guest-init.sh" "$ird/init"
chmod 755 "$ird/init"
(cd "$ird" && find . | cpio -o -H newc --quiet | gzip -1) > "$cache/initramfs.cpio.gz"

# --- data disk: a 64 MiB victim file and a 512 MiB stream file -------------
disk=$cache/data.ext4
if [ ! -f "$disk" ]; then
	log "creating data disk"
	dd=$cache/data
	rm -rf "$dd"
	mkdir -p "$dd"
	head -c 64M /dev/urandom > "$dd/victim"
	head -c 512M /dev/urandom > "$dd/stream"
	mkfs.ext4 -q -F -d "$dd" "$disk.tmp" 640M
	rm -rf "$dd"
	mv "$disk.tmp" "$disk"
fi

log "done in $(( $(date +%s) - start ))s: $cache/bzImage"

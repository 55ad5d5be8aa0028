#!/bin/sh
# Boot one of Debian's stock kernels under qemu and run a command in the
# guest, chrooted into the host's own root filesystem (read-only through
# virtio-9p, under an overlay whose writes go to a scratch ext4 disk), with
# cgroup v2 mounted unified and systemd's slices made.
#
#   tests/guest/run-guest.sh [options] KERNEL [--] COMMAND [ARG...]
#
# KERNEL is 6.12 (the newest linux-image-6.12.*-amd64-unsigned apt offers,
# bookworm-backports / bookworm-security), 6.1 (the newest
# linux-image-6.1.0-*-amd64-unsigned) or 6.12-madvseq: the kernel variant,
# Debian's linux-source-6.12 with contrib/kernel/patches-6.12, as
# contrib/kernel/build.sh builds it (everything built in, no modules; exit
# 77 when it is not built).  COMMAND runs as root in the current
# directory (the same path inside the guest), in the root cgroup; its
# output is printed as it runs, and files it writes to /msq-out in the
# guest land in the result directory (--out).
#
# Options:
#   --mglru y|n   switch MGLRU (/sys/kernel/mm/lru_gen/enabled) before the
#                 command (default: as the kernel boots: 6.12 on, 6.1 off)
#   --out DIR     result directory (default: CACHE/out-KERNEL, emptied first)
#   --mem MiB     guest memory (default 2048)
#   --disk GiB    scratch disk size, sparse (default 6)
#
# Environment (other MADVSEQ_* variables are passed to the command):
#   MADVSEQ_GUEST_CACHE    where the packages are unpacked and the initramfs
#                          and disk are made
#                          (default ${XDG_CACHE_HOME:-$HOME/.cache}/madvseq-guest)
#   MADVSEQ_GUEST_TIMEOUT  seconds before the guest is killed (default 1800)
#   MADVSEQ_QEMU_ACCEL     qemu accelerator (default tcg: KVM does not work
#                          on the machines this was written on)
#   MADVSEQ_KERNEL_BUILD   contrib/kernel/build.sh's directory, for
#                          6.12-madvseq (default
#                          ${XDG_CACHE_HOME:-$HOME/.cache}/madvseq-kernel-6.12)
#
# Exit status: the command's, 77 (skip) when qemu, busybox or the kernel
# package (or the kernel variant's build) are missing and cannot be
# installed, 125 when the guest failed
# before or around the command.
set -u

here=$(cd "$(dirname "$0")" && pwd)
cache=${MADVSEQ_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/madvseq-guest}
tmo=${MADVSEQ_GUEST_TIMEOUT:-1800}
accel=${MADVSEQ_QEMU_ACCEL:-tcg}
mglru="" out="" mem=2048 disk=6

log() { printf 'run-guest.sh: %s\n' "$*" >&2; }
skip() {
	log "SKIP: $*"
	exit 77
}
die() {
	log "$*"
	exit 125
}
now() { date +%s; }

# An initramfs tree at $1: static busybox with its applets, guest-init.sh as
# /init, an empty modules.order (guest-init.sh loads what it lists).
initramfs_skeleton() {
	rm -rf "$1" && mkdir -p "$1/bin" "$1/lib/modules" "$1/proc" "$1/sys" "$1/dev" ||
		die "cannot create $1"
	cp /bin/busybox "$1/bin/busybox"
	for app in $("$1/bin/busybox" --list); do
		[ "$app" = busybox ] || ln -s busybox "$1/bin/$app"
	done
	cp "$here/guest-init.sh" "$1/init" && chmod 755 "$1/init"
	: >"$1/modules.order"
}

# Whether the initramfs file $1 is missing or older than what makes it.
initramfs_stale() {
	[ ! -f "$1" ] || [ "$here/guest-init.sh" -nt "$1" ] || [ "$0" -nt "$1" ]
}

# The tree $1 packed into the initramfs file $2.
initramfs_pack() {
	(cd "$1" && find . | cpio -o -H newc --quiet | gzip -1) >"$2.tmp" &&
		mv "$2.tmp" "$2" || die "cannot make the initramfs"
}

while [ $# -gt 0 ]; do
	case $1 in
	--mglru) mglru=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--disk) disk=$2; shift 2 ;;
	--) shift; break ;;
	-*) die "unknown option $1" ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || die "usage: run-guest.sh [--mglru y|n] [--out DIR] KERNEL [--] COMMAND..."
kver=$1
shift
[ "${1:-}" = -- ] && shift
[ $# -ge 1 ] || die "no command to run in the guest"
case $kver in
6.12) pattern='^linux-image-6\.12\.[0-9]+\+deb[0-9]+-amd64-unsigned$' ;;
6.1) pattern='^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$' ;;
6.12-madvseq) pattern="" ;;
*) die "kernel: 6.12, 6.1 or 6.12-madvseq, not '$kver'" ;;
esac
case $mglru in "" | y | n) ;; *) die "--mglru: y or n" ;; esac

t0=$(now)
mkdir -p "$cache" || die "cannot create $cache"

# --- tools: qemu, busybox (static: it runs before any library is there),
# modprobe/depmod, mkfs.ext4, cpio, xz ------------------------------------
need=""
command -v qemu-system-x86_64 >/dev/null || need="$need qemu-system-x86"
[ -x /bin/busybox ] && file -L /bin/busybox 2>/dev/null | grep -q static ||
	need="$need busybox-static"
command -v depmod >/dev/null || need="$need kmod"
command -v mkfs.ext4 >/dev/null || need="$need e2fsprogs"
command -v cpio >/dev/null || need="$need cpio"
command -v xz >/dev/null || need="$need xz-utils"
command -v file >/dev/null || need="$need file"
if [ -n "$need" ]; then
	[ "$(id -u)" -eq 0 ] || skip "missing:$need (not root, cannot install)"
	log "installing:$need"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need >"$cache/apt.log" 2>&1 ||
		{ apt-get update -q >>"$cache/apt.log" 2>&1 &&
		  DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need >>"$cache/apt.log" 2>&1; } ||
		skip "cannot install$need (see $cache/apt.log)"
fi

if [ "$kver" = 6.12-madvseq ]; then
	# --- the kernel variant: build.sh's bzImage, its modules built in --------
	kbuild=${MADVSEQ_KERNEL_BUILD:-${XDG_CACHE_HOME:-$HOME/.cache}/madvseq-kernel-6.12}
	vmlinuz=$kbuild/bzImage
	[ -f "$vmlinuz" ] ||
		skip "the kernel variant is not built ($vmlinuz missing): run contrib/kernel/build.sh"
	[ "$vmlinuz" -nt "$kbuild/obj/.config" ] ||
		skip "$vmlinuz is older than its configuration: contrib/kernel/build.sh has not finished"
	# A bzImage of the small configuration (before guest-harness.config)
	# cannot mount the host's root: no 9p, no overlayfs.
	for sym in CONFIG_9P_FS CONFIG_OVERLAY_FS CONFIG_UNIX_DIAG CONFIG_PSI; do
		grep -qx "$sym=y" "$kbuild/obj/.config" 2>/dev/null ||
			skip "the kernel variant in $kbuild was built without $sym: rebuild it with contrib/kernel/build.sh"
	done
	krel="$(sed -n 's/^# Linux\/x86 \([^ ]*\) Kernel Configuration$/\1/p' "$kbuild/obj/.config")-madvseq"
	kdir=$cache/$kver
	initrd=$kdir/initramfs.cpio.gz
	if initramfs_stale "$initrd"; then
		log "making the initramfs for $kver (no modules)"
		initramfs_skeleton "$kdir/initramfs"
		initramfs_pack "$kdir/initramfs" "$initrd"
	fi
else
	# --- the kernel package: the newest apt offers, else the newest unpacked --
	pkg=$(apt-cache search --names-only "$pattern" 2>/dev/null | cut -d' ' -f1 | sort -V | tail -n 1)
	kdir=""
	if [ -n "$pkg" ]; then
		kdir=$cache/$pkg
		if [ ! -f "$kdir/.unpacked" ]; then
			log "fetching $pkg"
			rm -rf "$cache/debs.tmp" && mkdir -p "$cache/debs.tmp" &&
				(cd "$cache/debs.tmp" && apt-get download -q "$pkg" >/dev/null 2>&1) &&
				deb=$(ls "$cache"/debs.tmp/*.deb) || deb=""
			if [ -n "$deb" ]; then
				log "unpacking $(basename "$deb")"
				rm -rf "$kdir" && mkdir -p "$kdir" && dpkg-deb -x "$deb" "$kdir/root" &&
					touch "$kdir/.unpacked" || die "cannot unpack $deb"
				rm -rf "$cache/debs.tmp"
			else
				kdir=""
			fi
		fi
	fi
	if [ -z "$kdir" ]; then
		kdir=$(ls -d "$cache"/linux-image-*/.unpacked 2>/dev/null | sed 's|/.unpacked$||' |
		       grep -E "/${pattern#^}" | sort -V | tail -n 1)
		[ -n "$kdir" ] || skip "no $kver kernel package: apt has none matching $pattern"
		log "apt offers no $kver kernel now; using $(basename "$kdir") unpacked before"
	fi
	vmlinuz=$(ls "$kdir"/root/boot/vmlinuz-* 2>/dev/null | head -n 1)
	[ -n "$vmlinuz" ] || die "no vmlinuz in $kdir"
	krel=${vmlinuz##*/vmlinuz-}

	# --- initramfs: busybox, the modules the guest needs, guest-init.sh -------
	initrd=$kdir/initramfs.cpio.gz
	if initramfs_stale "$initrd"; then
		log "making the initramfs for $krel"
		mods=$kdir/root/lib/modules/$krel
		[ -f "$mods/modules.dep" ] || depmod -b "$kdir/root" "$krel" || die "depmod failed"
		ir=$kdir/initramfs
		initramfs_skeleton "$ir"
		# modprobe prints "insmod PATH" for each module, dependencies first, and
		# "builtin NAME" for what the kernel has built in.  Debian's 6.12
		# modules are xz-compressed; they are unpacked here so that the
		# initramfs does not depend on the kernel's or busybox's decompressor.
		# (crc32c: ext4's checksums, requested by name at mount time;
		# unix_diag: madvseqd identifies its clients through sock_diag where
		# SO_PEERPIDFD is missing (before 6.5); on a host modprobe loads it on
		# demand, here nothing would; loop: daemon-discovery-small-folios
		# mounts an ext4 image)
		for m in virtio_pci virtio_blk crc32c_generic crc32c_intel ext4 9pnet_virtio 9p overlay \
			unix_diag loop; do
			modprobe -d "$kdir/root" -S "$krel" --show-depends "$m" 2>/dev/null ||
				log "no module $m in $krel (built in, or not needed)"
		done | sed -n 's/^insmod \([^ ]*\).*/\1/p' | while read -r ko; do
			name=$(basename "$ko")
			name=${name%.xz}
			name=${name%.zst}
			grep -qx "$name" "$ir/modules.order" && continue
			case $ko in
			*.xz) xz -dc "$ko" >"$ir/lib/modules/$name" ;;
			*.zst) zstd -qdc "$ko" >"$ir/lib/modules/$name" ;;
			*) cp "$ko" "$ir/lib/modules/$name" ;;
			esac || exit 1
			echo "$name" >>"$ir/modules.order"
		done || die "cannot copy the modules"
		log "modules: $(tr '\n' ' ' <"$ir/modules.order")"
		initramfs_pack "$ir" "$initrd"
	fi
fi

# --- scratch disk (fresh each boot, sparse) and the result directory ------
[ -n "$out" ] || out=$cache/out-$kver
mkdir -p "$out" && out=$(cd "$out" && pwd -P) || die "cannot prepare $out"
# The guest sees the host's root through 9p, but its own scratch disk at
# /tmp and /var/tmp: a job written there would not be found.
case $out/ in
/tmp/* | /var/tmp/*) die "--out $out: the guest mounts its scratch disk on /tmp and /var/tmp; choose a directory elsewhere" ;;
esac
rm -rf "${out:?}"/* || die "cannot empty $out"
img=$(mktemp "$cache/scratch.XXXXXX") || die "cannot create a disk image in $cache"
truncate -s "${disk}G" "$img" &&
	mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 "$img" || die "cannot make $img"

# The job: the command, quoted, run from the current directory.
q() { printf "'%s' " "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
job=$out/job.sh
{
	echo "cd $(q "$PWD") || exit 125"
	echo "export HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8"
	# The MADVSEQ_* settings pass through (the guest's own are not needed).
	env | grep -E '^MADVSEQ_[A-Z0-9_]*=' | grep -vE '^MADVSEQ_(GUEST_CACHE|GUEST_TIMEOUT|QEMU_ACCEL)=' |
		while IFS='=' read -r k v; do echo "export $k=$(q "$v")"; done
	printf 'exec'
	for a in "$@"; do printf ' %s' "$(q "$a")"; done
	echo
} >"$job"

t1=$(now)
log "kernel $krel ($(basename "$kdir")), prepared in $((t1 - t0))s; booting (accel $accel, 2 CPUs, ${mem} MiB)"
console=$out/console.log
: >"$console"
tail -n +1 -f "$console" &
tailpid=$!
timeout "$tmo" qemu-system-x86_64 \
	-accel "$accel" -cpu max -smp 2 -m "$mem" \
	-display none -monitor none -serial "file:$console" -no-reboot \
	-kernel "$vmlinuz" -initrd "$initrd" \
	-append "console=ttyS0 panic=-1 quiet cgroup_no_v1=all msq_job=$job msq_mglru=$mglru" \
	-drive "file=$img,format=raw,if=virtio,cache=unsafe" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs "local,path=$out,mount_tag=out,security_model=none" \
	</dev/null >"$out/qemu.log" 2>&1
qrc=$?
sleep 1
kill "$tailpid" 2>/dev/null
wait "$tailpid" 2>/dev/null
rm -f "$img"
t2=$(now)
rc=$(sed -n 's/^GUEST-EXIT \([0-9]*\).*/\1/p' "$console" | tail -n 1)
log "guest ran $((t2 - t1))s (qemu status $qrc), command status ${rc:-none}; total $((t2 - t0))s; console: $console"
if [ "$qrc" -ne 0 ]; then
	cat "$out/qemu.log" >&2
	[ "$qrc" -eq 124 ] && log "killed after ${tmo}s (MADVSEQ_GUEST_TIMEOUT)"
fi
[ -n "$rc" ] || exit 125
exit "$rc"

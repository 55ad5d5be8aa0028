#!/bin/sh
# PID 1 of the guest (busybox, from the initramfs run-guest.sh builds).
#
# Loads the stock kernel's modules for virtio, ext4, 9p and overlayfs,
# mounts the host's root filesystem read-only (virtio-9p, tag hostroot)
# under a writable overlay whose upper layer is the scratch disk (ext4 on
# virtio-blk), mounts cgroup2 unified with memory, cpu and io enabled and
# systemd's slices made, and runs the job run-guest.sh wrote (msq_job= on
# the kernel command line, a path on the host) chrooted into that root.
# The job's output goes to the console; its files to /msq-out, a writable
# 9p share of a directory on the host (tag out).  Then power off.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin

say() { echo "guest-init: $*"; }
fail() {
	say "FAILED: $*"
	echo "GUEST-EXIT 125"
	reboot -f
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

# Modules in dependency order (modprobe --show-depends on the host).
while read -r ko; do
	insmod "/lib/modules/$ko" 2>/dev/null || say "insmod $ko failed"
done </modules.order

job=$(sed -n 's/.*msq_job=\([^ ]*\).*/\1/p' /proc/cmdline)
mglru=$(sed -n 's/.*msq_mglru=\([yn]\).*/\1/p' /proc/cmdline)

mkdir -p /host /scratch /newroot /msq-out
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /host ||
	fail "cannot mount the host's root (9p)"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out /msq-out ||
	fail "cannot mount the result directory (9p)"
mount -t ext4 -o noatime /dev/vda /scratch || fail "cannot mount the scratch disk"
mkdir -p /scratch/upper /scratch/work /scratch/tmp
chmod 1777 /scratch/tmp
# The host root as the lower layer: the build directories, python3, fio
# and the rest are the host's; what the guest writes stays on the scratch
# disk.
mount -t overlay overlay -o lowerdir=/host,upperdir=/scratch/upper,workdir=/scratch/work \
	/newroot || fail "cannot mount the overlay"

r=/newroot
mount -t proc proc $r/proc
mount -t sysfs sysfs $r/sys
mount -t devtmpfs devtmpfs $r/dev
mkdir -p $r/dev/pts $r/dev/shm
mount -t devpts devpts $r/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $r/dev/shm
mount -t tmpfs -o mode=755 tmpfs $r/run
# /tmp and /var/tmp on ext4 directly (not through the overlay): tests
# measure the page cache of the files they make there.
mount --bind /scratch/tmp $r/tmp
mount --bind /scratch/tmp $r/var/tmp
mkdir -p $r/msq-out
mount --bind /msq-out $r/msq-out

# cgroup v2, unified, as systemd sets it up: controllers enabled from the
# root down, leaves where the processes go.
mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 $r/sys/fs/cgroup ||
	fail "cannot mount cgroup2"
cg=$r/sys/fs/cgroup
echo "+memory +cpu +io" >$cg/cgroup.subtree_control || fail "cannot enable +memory +cpu +io"
for d in system.slice user.slice user.slice/user-1000.slice; do
	mkdir -p $cg/$d
	echo "+memory +cpu +io" >$cg/$d/cgroup.subtree_control
done
mkdir -p $cg/init.scope $cg/user.slice/user-1000.slice/session-1.scope

if [ -n "$mglru" ]; then
	if [ -e /sys/kernel/mm/lru_gen/enabled ]; then
		echo "$mglru" >/sys/kernel/mm/lru_gen/enabled
	else
		say "no /sys/kernel/mm/lru_gen (kernel without MGLRU)"
	fi
fi
say "kernel $(uname -r), $(nproc) CPUs, $(sed -n 's/MemTotal: *//p' /proc/meminfo)," \
	"MGLRU $(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null || echo absent)," \
	"cgroup2 controllers: $(cat $cg/cgroup.subtree_control)"

# The job runs in the root cgroup, as a container's init would: tests make
# their own cgroups below it or in the slices.
if [ -n "$job" ] && [ -f "$r$job" ]; then
	chroot $r /bin/sh -c '. "$0"' "$job" </dev/console >/dev/console 2>&1
	rc=$?
else
	say "no job (msq_job=$job)"
	rc=124
fi
echo "GUEST-EXIT $rc"
echo "$rc" >/msq-out/rc
sync
umount /msq-out 2>/dev/null
# -no-reboot makes qemu exit on reboot
reboot -f

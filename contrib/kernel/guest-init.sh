#!/bin/sh
# PID 1 of the test guest: mount, run seqtest on the data disk, power off.
# Without msq_args="..." on the kernel command line it runs four scenarios:
#   paced:      the victim read its file once and now does 1000 random reads/s
#   hot:        the victim read its file twice and reads as fast as it can
#   sharedread: as paced, over the first 64 MiB of the streamer's own file
#   sharedmap:  as sharedread, through the victim's own mmap() of that range
# each with the drop-behind switch off, then on.  On a kernel with the
# multi-gen LRU (/sys/kernel/mm/lru_gen/enabled) it runs them with MGLRU off
# and then on; on a kernel with the per-memory-cgroup switch
# (memory.seq_read_dropbehind, the 6.12 series) once through the sysctl and
# once through the cgroup's file (seqtest -g).  msq_lru="off" or "on" and
# msq_via="sysctl" or "memcg" on the command line restrict the matrix.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t cgroup2 cgroup2 /sys/fs/cgroup

scenarios() {
	/bin/seqtest -l paced -c 256 -w 1 -r 1000 "$@" /mnt/victim /mnt/stream
	echo "seqtest exit status $?"
	/bin/seqtest -l hot -c 256 -w 2 "$@" /mnt/victim /mnt/stream
	echo "seqtest exit status $?"
	/bin/seqtest -l sharedread -c 256 -w 1 -r 1000 -s "$@" \
		/mnt/victim /mnt/stream
	echo "seqtest exit status $?"
	/bin/seqtest -l sharedmap -c 256 -w 1 -r 1000 -s -m "$@" \
		/mnt/victim /mnt/stream
	echo "seqtest exit status $?"
}

if mount -t ext4 -o ro,noatime /dev/vda /mnt; then
	if [ -n "$msq_args" ]; then
		# shellcheck disable=SC2086
		/bin/seqtest -l custom $msq_args /mnt/victim /mnt/stream
		echo "seqtest exit status $?"
	else
		lrus=none
		if [ -e /sys/kernel/mm/lru_gen/enabled ]; then
			lrus=${msq_lru:-off on}
		fi
		vias=sysctl
		# The per-cgroup file exists in every non-root memory cgroup.
		mkdir -p /sys/fs/cgroup/probe
		echo +memory > /sys/fs/cgroup/cgroup.subtree_control
		if [ -e /sys/fs/cgroup/probe/memory.seq_read_dropbehind ]; then
			vias=${msq_via:-sysctl memcg}
		fi
		rmdir /sys/fs/cgroup/probe
		for lru in $lrus; do
			case $lru in
			off) echo n > /sys/kernel/mm/lru_gen/enabled ;;
			on) echo y > /sys/kernel/mm/lru_gen/enabled ;;
			esac
			for via in $vias; do
				start=$(cut -d. -f1 /proc/uptime)
				if [ "$via" = memcg ]; then
					scenarios -g
				else
					scenarios
				fi
				echo "seqtest: lru_gen $lru via $via took" \
				     "$(( $(cut -d. -f1 /proc/uptime) - start ))s"
			done
		done
	fi
	umount /mnt
else
	echo "seqtest: cannot mount the data disk"
fi
# -no-reboot makes qemu exit on reboot
reboot -f

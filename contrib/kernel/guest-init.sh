#!/bin/sh
# PID 1 of the test guest: mount, run seqtest on the data disk, power off.
# Without msq_args="..." on the kernel command line it runs four scenarios:
#   paced:      the victim read its file once and now does 1000 random reads/s
#   hot:        the victim read its file twice and reads as fast as it can
#   sharedread: as paced, over the first 64 MiB of the streamer's own file
#   sharedmap:  as sharedread, through the victim's own mmap() of that range
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t cgroup2 cgroup2 /sys/fs/cgroup
if mount -t ext4 -o ro,noatime /dev/vda /mnt; then
	if [ -n "$msq_args" ]; then
		# shellcheck disable=SC2086
		/bin/seqtest -l custom $msq_args /mnt/victim /mnt/stream
		echo "seqtest exit status $?"
	else
		/bin/seqtest -l paced -c 256 -w 1 -r 1000 /mnt/victim /mnt/stream
		echo "seqtest exit status $?"
		/bin/seqtest -l hot -c 256 -w 2 /mnt/victim /mnt/stream
		echo "seqtest exit status $?"
		/bin/seqtest -l sharedread -c 256 -w 1 -r 1000 -s \
			/mnt/victim /mnt/stream
		echo "seqtest exit status $?"
		/bin/seqtest -l sharedmap -c 256 -w 1 -r 1000 -s -m \
			/mnt/victim /mnt/stream
		echo "seqtest exit status $?"
	fi
	umount /mnt
else
	echo "seqtest: cannot mount the data disk"
fi
# -no-reboot makes qemu exit on reboot
reboot -f

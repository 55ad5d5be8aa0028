#!/bin/sh
# Boot the patched kernel built by build.sh under qemu-system-x86_64 (TCG
# software emulation unless MADVSEQ_QEMU_ACCEL says otherwise), run the
# scaled-down interference scenario with vm.seq_read_dropbehind off and on,
# print the results and power off.  On 6.12 the guest runs the scenarios with
# MGLRU off and on, each through the sysctl and through the per-memory-cgroup
# switch (guest-init.sh).
#
# Exit status: 0 when every scenario kept >= 90% of the victim's pages
# resident with the switch on, 1 when one did not or the guest failed, 77 (skip) when the kernel is not
# built and cannot be built here.
#
# Environment:
#   MADVSEQ_KERNEL_VERSION 6.12 (default) or 6.1 (as build.sh)
#   MADVSEQ_KERNEL_BUILD   cache directory (as build.sh)
#   MADVSEQ_KERNEL_NOBUILD set to 1 to skip instead of running build.sh
#   MADVSEQ_QEMU_ACCEL     qemu accelerator (default: tcg)
#   MADVSEQ_QEMU_TIMEOUT   seconds before the guest is killed (default: 2400)
#   MADVSEQ_SEQTEST_ARGS   run one custom seqtest scenario instead of the four
#                          default ones, e.g. "-c 128 -w 1 -r 1000"
#   MADVSEQ_GUEST_LRU      "off" or "on": only this MGLRU state (default both)
#   MADVSEQ_GUEST_VIA      "sysctl" or "memcg": only this switch (default both)
set -u

here=$(cd "$(dirname "$0")" && pwd)
version=${MADVSEQ_KERNEL_VERSION:-6.12}
cache=${MADVSEQ_KERNEL_BUILD:-${XDG_CACHE_HOME:-$HOME/.cache}/madvseq-kernel-$version}
accel=${MADVSEQ_QEMU_ACCEL:-tcg}
tmo=${MADVSEQ_QEMU_TIMEOUT:-2400}

if [ ! -f "$cache/bzImage" ] || [ ! -f "$cache/initramfs.cpio.gz" ] ||
   [ ! -f "$cache/data.ext4" ] ||
   [ "$here/seqtest.c" -nt "$cache/initramfs.cpio.gz" ] ||
   [ "$here/guest-init.sh" -nt "$cache/initramfs.cpio.gz" ]; then
	if [ "${MADVSEQ_KERNEL_NOBUILD:-0}" = 1 ]; then
		echo "run-qemu.sh: no kernel built in $cache; run contrib/kernel/build.sh first"
		exit 77
	fi
	echo "run-qemu.sh: building first (contrib/kernel/build.sh, 6-15 min)"
	if ! "$here/build.sh"; then
		echo "run-qemu.sh: build.sh failed; cannot run the kernel test here"
		exit 77
	fi
fi
if ! command -v qemu-system-x86_64 >/dev/null; then
	echo "run-qemu.sh: qemu-system-x86_64 missing (apt-get install qemu-system-x86)"
	exit 77
fi

log=$cache/qemu-console.log
start=$(date +%s)
timeout "$tmo" qemu-system-x86_64 \
	-accel "$accel" -cpu max -smp 2 -m 1024 \
	-display none -monitor none -serial "file:$log" -no-reboot \
	-kernel "$cache/bzImage" -initrd "$cache/initramfs.cpio.gz" \
	-append "console=ttyS0 panic=-1 loglevel=5 msq_args=\"${MADVSEQ_SEQTEST_ARGS:-}\" msq_lru=${MADVSEQ_GUEST_LRU:-} msq_via=${MADVSEQ_GUEST_VIA:-}" \
	-drive "file=$cache/data.ext4,format=raw,if=virtio,readonly=on" \
	</dev/null
qrc=$?
elapsed=$(( $(date +%s) - start ))

grep -E '^(seqtest|RESULT)' "$log"
echo "run-qemu.sh: $version guest ran ${elapsed}s (accel $accel, qemu status $qrc), console log: $log"

# (loglevel 5: warnings reach the console log too.)
if grep -Eq 'BUG:|Oops|WARNING:|Kernel panic|bad page' "$log"; then
	echo "run-qemu.sh: FAIL: the guest kernel reported a problem"
	grep -E -A 20 'BUG:|Oops|WARNING:|Kernel panic|bad page' "$log" | head -n 60
	exit 1
fi
if grep -q '^RESULT [a-z]* seq_read_dropbehind=absent ' "$log"; then
	echo "run-qemu.sh: FAIL: this kernel has no vm.seq_read_dropbehind"
	exit 1
fi
n_off=$(grep -c '^RESULT [a-z]* seq_read_dropbehind=0 ' "$log")
n_on=$(grep -c '^RESULT [a-z]* seq_read_dropbehind=1 ' "$log")
if [ "$n_off" -eq 0 ] || [ "$n_off" -ne "$n_on" ] ||
   grep -q '^seqtest exit status [1-9]' "$log"; then
	echo "run-qemu.sh: FAIL: guest did not report every round"
	tail -n 30 "$log"
	exit 1
fi
# Every round with the switch on must keep >= 90% of the victim's pages.
fail=0
for kept in $(grep '^RESULT [a-z]* seq_read_dropbehind=1 ' "$log" |
	      sed -n 's/.* retention=\([0-9]*\)\.[0-9]*%.*/\1/p'); do
	[ "$kept" -ge 90 ] || fail=1
done
if [ "$fail" -ne 0 ]; then
	echo "run-qemu.sh: FAIL: a scenario kept less than 90% with the switch on"
	exit 1
fi
echo "run-qemu.sh: PASS"
exit 0

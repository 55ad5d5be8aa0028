#!/bin/sh
# Runs inside a guest booted by run-guest.sh (chrooted into the host's
# root, cgroup v2): the shim's and the daemon's test suites and the
# interference scenario, scaled to the guest, with MGLRU off and on.
#
#   tests/guest/in-guest.sh BUILD [suites] [scenario]
#
# BUILD is a build directory made on the host (meson setup + ninja).  It is
# copied onto the guest's scratch disk (ext4) and mounted over itself: the
# tests measure the page cache of the files they make next to it, which
# cachestat(2) cannot see through the overlay the rest of the root is on.
# Results go to /msq-out (the host's result directory): meson's test log,
# the scenario's JSON per MGLRU setting.
#
# Environment: MADVSEQ_GUEST_SUITES (default "preload daemon cgroup2"),
# MADVSEQ_GUEST_SCENARIO (arguments for tests/bench/interference.py that
# replace the sizes below).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "$1" && pwd) || exit 125
shift
what=${*:-suites scenario}
out=/msq-out
[ -d "$out" ] || out=$(mktemp -d)
status=0

t() { date +%s; }
say() { echo "in-guest: $*"; }

say "kernel $(uname -r); MGLRU $(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null || echo absent);" \
	"memory $(sed -n 's/MemTotal: *//p' /proc/meminfo)"
ts=$(t)
rm -rf /tmp/msq-build
cp -a "$build" /tmp/msq-build && mount --bind /tmp/msq-build "$build" ||
	{ say "cannot put $build on the scratch disk"; exit 125; }
say "build directory copied to the scratch disk in $(($(t) - ts))s"

for w in $what; do
	case $w in
	suites)
		ts=$(t)
		set --
		for s in ${MADVSEQ_GUEST_SUITES:-preload daemon cgroup2}; do set -- "$@" --suite "$s"; done
		# (timeouts x3: every test runs 10-30 times slower under emulation)
		meson test -C "$build" --no-rebuild --print-errorlogs --timeout-multiplier 3 "$@" \
			>"$out/suites.log" 2>&1
		rc=$?
		grep -E '^ *[0-9]+/[0-9]+ ' "$out/suites.log"
		sed -n '/^Ok:/,/^Timeout:/p' "$out/suites.log"
		cp "$build/meson-logs/testlog.txt" "$out/testlog.txt" 2>/dev/null
		say "TIME suites $(($(t) - ts))s (meson test status $rc)"
		[ "$rc" -eq 0 ] || status=1
		;;
	scenario)
		for mglru in n y; do
			if [ -e /sys/kernel/mm/lru_gen/enabled ]; then
				echo "$mglru" >/sys/kernel/mm/lru_gen/enabled
				tag=mglru-$mglru
			else
				[ "$mglru" = n ] || continue
				tag=mglru-absent
			fi
			ts=$(t)
			say "scenario, MGLRU $(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null || echo absent)"
			# shellcheck disable=SC2086
			python3 "$repo/tests/bench/interference.py" \
				--lib "$build/preload/libmadvseq.so" --daemon "$build/daemon/madvseqd" \
				--streamers fio-mmap --variants kernel,shim,daemon,discovery \
				--reps 1 --passes 1 --alone-seconds 5 --no-cost \
				--cgroup-parent /sys/fs/cgroup/system.slice --dir /tmp \
				--discover-interval 200ms --timeout 300 \
				${MADVSEQ_GUEST_SCENARIO:---limit 320M --victim-size 96M --stream-size 768M} \
				--json "$out/scenario-$tag.json" --log-dir "$out/scenario-$tag-logs" \
				>"$out/scenario-$tag.txt" 2>"$out/scenario-$tag.err"
			rc=$?
			cat "$out/scenario-$tag.txt"
			[ "$rc" -eq 0 ] || { status=1; tail -n 20 "$out/scenario-$tag.err"; }
			say "TIME scenario-$tag $(($(t) - ts))s (status $rc)"
		done
		;;
	*)
		say "unknown part $w"
		status=2
		;;
	esac
done
umount "$build"
exit $status

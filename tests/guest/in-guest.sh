#!/bin/sh
# Runs inside a guest booted by run-guest.sh (chrooted into the host's
# root, cgroup v2): the shim's and the daemon's test suites, the
# interference scenario and the warm scenario, scaled to the guest, with
# MGLRU off and on (on the patched kernel also with its drop-behind switch
# on).
#
#   tests/guest/in-guest.sh BUILD [suites] [scenario] [warm]
#
# (suites: the tests of the shim's and the daemon's suites that use
# cgroups, and the suite cgroup2; scenario: interference.py, both MGLRU
# settings; warm: tests/bench/warm.py's pread victim next to a stream, the
# MGLRU settings of MADVSEQ_GUEST_WARM_MGLRU)
#
# BUILD is a build directory made on the host (meson setup + ninja).  It is
# copied onto the guest's scratch disk (ext4) and mounted over itself: the
# tests measure the page cache of the files they make next to it, which
# cachestat(2) cannot see through the overlay the rest of the root is on.
# Results go to /msq-out (the host's result directory): meson's test log,
# the scenario's JSON per MGLRU setting.
#
# Environment:
#   MADVSEQ_GUEST_TESTS     meson test arguments: which tests (default: the
#                           ones that make memory cgroups and read their
#                           files, below; "--suite preload --suite daemon
#                           --suite cgroup2" for all of them: about 40
#                           minutes on 6.12 under emulation)
#   MADVSEQ_GUEST_SCENARIO  arguments for tests/bench/interference.py that
#                           replace the sizes below
#   MADVSEQ_GUEST_WARM      arguments for tests/bench/warm.py that replace
#                           the sizes, rates and streams below
#   MADVSEQ_GUEST_WARM_MGLRU  MGLRU settings the warm part runs with, in
#                           order (default "y n"; where the kernel has no
#                           MGLRU, one run as it is)
#   MADVSEQ_TEST_SLOWDOWN   what the tests divide their streamers' rates
#                           by (default 10 here: a paced stream keeps the
#                           wall clock's pace, the shim and daemon do not;
#                           daemon-faults' madvseqd took 2.8 s of CPU for
#                           629 cycles in a 6.12 guest, 0.27 s for 610 on
#                           the host; see tests/preload/msqtest.py)
set -u
export MADVSEQ_TEST_SLOWDOWN="${MADVSEQ_TEST_SLOWDOWN:-10}"
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
rm -rf /tmp/msq-build && mkdir /tmp/msq-build &&
	# (not the work directories a failed test left behind on the host: a
	# sparse file of terabytes would come over 9p byte by byte)
	(cd "$build" && tar --exclude='./tests/*/msq-*' -cf - .) | (cd /tmp/msq-build && tar -xpf -) &&
	mount --bind /tmp/msq-build "$build" ||
	{ say "cannot put $build on the scratch disk"; exit 125; }
say "build directory copied to the scratch disk in $(($(t) - ts))s"

for w in $what; do
	case $w in
	suites)
		ts=$(t)
		# The tests that use cgroup v2 for real: the daemon's sections and
		# gates against the cgroups its clients are in (memory.current,
		# memory.max, memory.stat, memory.pressure, cgroup.procs), the v2
		# fixture, and a plain shim stream as the reference.  (The shim
		# under memory.max is the scenario's shim row; the preload suite's
		# 'pressure' streams 3 GiB: 6 minutes here.)
		tests=${MADVSEQ_GUEST_TESTS:-stream-shared daemon-fixture-v2 \
			daemon-shim daemon-discovery-static daemon-pressure-gate daemon-cgroup-removed \
			daemon-read-report daemon-strong-refs cgroup2-gate}
		# (timeouts x3: every test runs 10-30 times slower under emulation)
		# shellcheck disable=SC2086
		meson test -C "$build" --no-rebuild --print-errorlogs --timeout-multiplier 3 $tests \
			>"$out/suites.log" 2>&1
		rc=$?
		grep -E '^ *[0-9]+/[0-9]+ ' "$out/suites.log"
		sed -n '/^Ok:/,/^Timeout:/p' "$out/suites.log"
		cp "$build/meson-logs/testlog.txt" "$out/testlog.txt" 2>/dev/null
		say "TIME suites $(($(t) - ts))s (meson test status $rc)"
		[ "$rc" -eq 0 ] || status=1
		;;
	scenario)
		# On the kernel variant (contrib/kernel's 6.12 series) also its
		# rows: the switch on through the sysctl, through the scenario
		# cgroup's file, and with the shim and a discovering daemon there
		# to see them step aside.
		variants=kernel,shim,daemon,discovery
		[ -e /proc/sys/vm/seq_read_dropbehind ] &&
			variants=$variants,kvariant,kvariant-memcg,kvariant-aside
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
				--streamers fio-mmap --variants "$variants" \
				--reps 1 --passes 1 --alone-seconds 5 --no-cost \
				--cgroup-parent /sys/fs/cgroup/system.slice --dir /tmp \
				--discover-interval 200ms --timeout 300 \
				${MADVSEQ_GUEST_SCENARIO:---limit 320M --victim-size 96M --victim-rate 1000 --stream-size 384M} \
				--json "$out/scenario-$tag.json" --log-dir "/tmp/scenario-$tag-logs" \
				>"$out/scenario-$tag.txt" 2>"$out/scenario-$tag.err"
			rc=$?
			# (the logs hold the daemon's socket: 9p has none, so they are
			# kept on the scratch disk and copied)
			rm -f "/tmp/scenario-$tag-logs"/*.sock
			cp -r "/tmp/scenario-$tag-logs" "$out/"
			cat "$out/scenario-$tag.txt"
			[ "$rc" -eq 0 ] || { status=1; tail -n 20 "$out/scenario-$tag.err"; }
			say "TIME scenario-$tag $(($(t) - ts))s (status $rc)"
		done
		;;
	warm)
		# The warm scenario (issue 26): a Python service making 1000
		# Zipf(0.9)-keyed 4 KiB pread()s a second over a cached 192 MiB
		# file, in a 256 MiB cgroup, next to tar of a 1 GiB file (read())
		# and a Python mmap + MADV_SEQUENTIAL pass over it, with the
		# kernel alone, madvseq run, madvseqd (registered and by
		# discovery); each run also has the victim alone and next to an
		# O_DIRECT read of the same bytes, the p99 reference.
		#
		# On the kernel variant, per MGLRU setting, the kernel alone twice:
		# with the switch off (the unpatched kernel plus a flag test: the
		# reference of this boot), then in a cgroup under a parent whose
		# memory.seq_read_dropbehind is 1 (the switch is on for a cgroup
		# when it or an ancestor has it set): the kernel variant as a
		# manager, next to the same two streams (it covers MADV_SEQUENTIAL
		# mappings only, not tar's read()s).
		switches=none
		dparent=/sys/fs/cgroup/system.slice/msq-dropbehind.slice
		if [ -e /proc/sys/vm/seq_read_dropbehind ]; then
			switches="off on"
			mkdir -p "$dparent" && echo 1 >"$dparent/memory.seq_read_dropbehind" ||
				{ say "cannot turn on memory.seq_read_dropbehind in $dparent"; status=1; continue; }
		fi
		for mglru in ${MADVSEQ_GUEST_WARM_MGLRU:-y n}; do
			if [ -e /sys/kernel/mm/lru_gen/enabled ]; then
				echo "$mglru" >/sys/kernel/mm/lru_gen/enabled
				ltag=mglru-$mglru
			else
				[ -z "${notag:-}" ] || continue
				notag=1
				ltag="mglru-absent"
			fi
			for sw in $switches; do
				case $sw in
				none) variants=kernel,shim,daemon,discovery parent=/sys/fs/cgroup/system.slice
					tag=$ltag what="" ;;
				off) variants=kernel parent=/sys/fs/cgroup/system.slice
					tag=$ltag what=", memory.seq_read_dropbehind 0" ;;
				on) variants=kernel parent=$dparent
					tag=$ltag-dropbehind what=", memory.seq_read_dropbehind=1 in $dparent" ;;
				esac
				ts=$(t)
				say "warm, MGLRU $(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null || echo absent)$what"
				rm -rf "/tmp/warm-$tag-logs"
				# shellcheck disable=SC2086
				python3 "$repo/tests/bench/warm.py" --victim pread \
					--lib "$build/preload/libmadvseq.so" --daemon "$build/daemon/madvseqd" \
					--variants "$variants" --no-cpu-phase \
					--cgroup-parent "$parent" --dir /tmp \
					${MADVSEQ_GUEST_WARM:---streams tar,mmap --limit 256M --ws-size 192M \
					--rate 1000 --theta 0.9 --stream-size 1G --passes 1 \
					--after 10 --alone-seconds 6} \
					--log-dir "/tmp/warm-$tag-logs" --summary "$out/warm-$tag.txt" \
					>"$out/warm-$tag.out" 2>"$out/warm-$tag.err"
				rc=$?
				# (every phase's result, samples included, for table.py; the
				# logs hold the daemon's socket, which 9p cannot)
				cp "/tmp/warm-$tag-logs/phases.jsonl" "$out/warm-$tag.jsonl" 2>/dev/null
				rm -f "/tmp/warm-$tag-logs"/*.sock
				cp -r "/tmp/warm-$tag-logs" "$out/"
				cat "$out/warm-$tag.out"
				[ "$rc" -eq 0 ] || { status=1; tail -n 20 "$out/warm-$tag.err"; }
				say "TIME warm-$tag $(($(t) - ts))s (status $rc)"
			done
		done
		[ "$switches" = none ] || rmdir "$dparent"
		;;
	*)
		say "unknown part $w"
		status=2
		;;
	esac
done
umount "$build"
exit $status

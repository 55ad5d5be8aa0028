#!/usr/bin/env bash
# Set up and see it: installs what is needed, builds, then runs the warm
# scenario (tests/bench/warm.py) and prints the side-by-side table.  A
# service makes 4 KiB pread()s at a fixed 5,000 a second, Zipf keys, over a
# 768 MiB file that is fully cached in a 1 GiB memory cgroup: first alone,
# then next to `tar` reading a 4 GiB file twice with the kernel alone, then with
# tar under `madvseq run`, and next to an O_DIRECT read of the same bytes
# (the reference for what any stream costs the service on this machine).
# It prints the service's residency, disk reads and latency, one sentence
# of what changed, and PASS/MISS lines for what the project claims of its
# cache (working set kept, disk reads, p99 against the O_DIRECT reference).
# A DAMON pageout scheme running on the machine (some hosts run one: it
# evicts page cache that looks idle, the service's tail included, stream
# or not) is paused for the run and started again at its end, as the
# benchmarks do (--pause-damon), so that the rows differ only in the cache
# policy under test.
# Takes about 3 minutes; the files need a disk filesystem, not tmpfs.
#
#   scripts/demo.sh [--dir DIR] [--png FILE] [any tests/bench/warm.py option]
#
# Needs root (memory cgroup, page-cache eviction).  Everything it creates
# (cgroup, files, processes) is removed at the end, also on Ctrl-C.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

if [ "$(id -u)" -ne 0 ]; then
	echo "demo: needs root (memory cgroup and page-cache control); try: sudo $0" >&2
	exit 1
fi

# 1. Dependencies.
if [ -f scripts/deps.sh ]; then
	bash scripts/deps.sh
else
	need=()
	for c in meson:meson ninja:ninja-build cc:build-essential pkg-config:pkg-config \
	         fio:fio vmtouch:vmtouch nocache:nocache python3:python3; do
		command -v "${c%%:*}" >/dev/null || need+=("${c#*:}")
	done
	dpkg-query -W -f='${Status}' liburcu-dev 2>/dev/null | grep -q 'ok installed' || need+=(liburcu-dev)
	if ((${#need[@]})); then
		DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}"
	fi
fi

# 2. Build, as it would be installed: its own build dir, so that the test
# build's fault-injection library (which moves every program's memory
# layout) is not what gets measured.
# Its output goes to stderr with the progress: stdout is the tables.
if [ ! -f build-demo/build.ninja ]; then
	meson setup build-demo -Dfiu=disabled >&2
fi
ninja -C build-demo >&2
lib="$repo/build-demo/preload/libmadvseq.so"
[ -f "$lib" ] || { echo "demo: $lib was not built" >&2; exit 1; }

# 3. Run.  The harness makes its own cgroup and files and removes them on
# exit or SIGINT/SIGTERM; the trap here covers Ctrl-C during the build steps
# above and makes sure the harness is stopped if this script is killed.
bench_pid=
cleanup() {
	trap - INT TERM HUP EXIT
	if [ -n "$bench_pid" ] && kill -0 "$bench_pid" 2>/dev/null; then
		kill -TERM "$bench_pid" 2>/dev/null || true
		wait "$bench_pid" 2>/dev/null || true
	fi
}
trap 'cleanup; exit 130' INT TERM HUP
trap cleanup EXIT

py=/usr/bin/python3
[ -x "$py" ] || py=python3
cat <<'EOF'
demo: a service making 5,000 4 KiB pread()s a second, Zipf(0.9) keys, over a
      768 MiB file cached in a 1 GiB memory cgroup: alone, next to tar reading
      a 4 GiB file twice (the kernel alone), and with tar under madvseq run.
      Progress goes to stderr; the tables follow.
EOF
"$py" tests/bench/warm.py --victim pread --streams tar --variants kernel,shim \
	--after 15 --alone-seconds 8 --no-cpu-phase --judge cache --pause-damon \
	--lib "$lib" --dir "$repo/build-demo" "$@" &
bench_pid=$!
rc=0
wait "$bench_pid" || rc=$?
bench_pid=
exit $rc

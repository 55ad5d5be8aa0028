#!/usr/bin/env bash
# Set up and see it: installs what is needed, builds, then runs a short version
# of the interference scenario (DESIGN.md) and prints the side-by-side table:
# a random-read victim alone, with an MADV_SEQUENTIAL streamer in the same
# 1 GiB memory cgroup (the kernel alone), and with the streamer under
# libmadvseq (3 short reps, medians).  Takes about 3 minutes, a third of it
# building and writing the 4.5 GiB of test files (they need a disk
# filesystem, not tmpfs).
#
#   scripts/demo.sh [--dir DIR] [any tests/bench/interference.py option]
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
if [ ! -f build-demo/build.ninja ]; then
	meson setup build-demo -Dfiu=disabled
fi
ninja -C build-demo
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
demo: a 4 KiB random-read victim over a warm 512 MiB file shares a 1 GiB memory
      cgroup with a streamer reading a 4 GiB file through an MADV_SEQUENTIAL
      mapping: first alone, then with the streamer (the kernel alone), then with
      the streamer under libmadvseq.  Progress goes to stderr; the table follows.
EOF
"$py" tests/bench/interference.py --quick --lib "$lib" --dir "$repo/build-demo" \
	--mmap-cost "$repo/build-demo/tests/bench/mmap_cost" "$@" &
bench_pid=$!
rc=0
wait "$bench_pid" || rc=$?
bench_pid=
exit $rc

#!/usr/bin/env bash
# Installs what libmadvseq needs, builds it twice (plain, and with
# AddressSanitizer + UndefinedBehaviorSanitizer), warnings as errors, and
# runs every test suite on both builds.  Ends with "N passed, N failed,
# N skipped"; exits non-zero if any test failed.  Run as root: the tests
# measure the page cache and create memory cgroups (without root, those
# tests skip).
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh || exit 1

configure() {
	local dir=$1
	shift
	if [ -f "$dir/build.ninja" ]; then
		meson setup --reconfigure "$dir" "$@" >"$dir.setup.log" 2>&1
	else
		meson setup "$dir" "$@" >"$dir.setup.log" 2>&1
	fi || { cat "$dir.setup.log"; echo "meson setup $dir failed"; return 1; }
}

run_suite() {
	local dir=$1
	echo "=== tests: $dir"
	meson test -C "$dir" --print-errorlogs --no-rebuild --timeout-multiplier 2 || true
}

# A DAMON pageout scheme on the machine (a host's proactive reclaim) pages
# out what it sees idle, the tests' files included, and a test that
# measures the page cache fails on its work (2 MiB of a 64 MiB file read a
# moment before, once in a run).  Paused for the run, as the benchmarks'
# --pause-damon does, and started again at exit with its configuration.
damon_paused=()
pause_damon() {
	local k sc
	for k in /sys/kernel/mm/damon/admin/kdamonds/[0-9]*; do
		[ "$(cat "$k/state" 2>/dev/null)" = on ] || continue
		for sc in "$k"/contexts/*/schemes/[0-9]*; do
			[ "$(cat "$sc/action" 2>/dev/null)" = pageout ] || continue
			echo off 2>/dev/null >"$k/state" && damon_paused+=("$k")
			break
		done
	done
	[ ${#damon_paused[@]} -eq 0 ] ||
		echo "DAMON pageout paused for the tests: ${damon_paused[*]##*/}; started again at the end"
}
resume_damon() {
	local k
	for k in "${damon_paused[@]}"; do
		echo on 2>/dev/null >"$k/state" || echo "cannot start $k again: write 'on' to its state file" >&2
	done
}
pause_damon
trap resume_damon EXIT

status=0
configure build -Dwerror=true -Dfiu=enabled -Dtest_hooks=true &&
	ninja -C build && run_suite build || status=1

# The sanitizer runtimes must come first when the shim is preloaded into
# programs that were not built with them.
configure build-asan -Dwerror=true -Dfiu=enabled -Dtest_hooks=true -Db_sanitize=address,undefined -Db_lundef=false &&
	ninja -C build-asan &&
	MADVSEQ_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so):$PWD/build-asan/preload/libmadvseq.so" \
	ASAN_OPTIONS=detect_leaks=1:verify_asan_link_order=0:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	run_suite build-asan || status=1

python3 - build build-asan <<'PY'
import json, os, sys
passed = failed = skipped = 0
for d in sys.argv[1:]:
    log = os.path.join(d, "meson-logs", "testlog.json")
    if not os.path.exists(log):
        print("%s: no test log (build failed)" % d)
        failed += 1
        continue
    for line in open(log):
        r = json.loads(line)["result"]
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
            print("failed: %s (%s)" % (json.loads(line)["name"], d))
print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
sys.exit(1 if failed else 0)
PY
summary=$?
[ $status -eq 0 ] && exit $summary
exit 1

#!/usr/bin/env bash
# Builds the message-handler fuzzer with clang (its own meson build dir,
# so the gcc build is untouched) and runs it SECONDS on a copy of the seed
# corpus.  Exit 0: no crash; 1: a crash (the input is left in BUILD, to
# become a regression seed); 77: no clang or no libFuzzer here.
#   run.sh SOURCE_DIR BUILD_DIR SECONDS [libFuzzer options...]
set -uo pipefail
src=$1 build=$2 secs=$3
shift 3
command -v clang >/dev/null || { echo "clang not installed (scripts/deps.sh installs it)"; exit 77; }
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' >"$probe/p.c"
clang -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null || { echo "clang has no libFuzzer runtime"; exit 77; }
if [ ! -f "$build/build.ninja" ]; then
	CC=clang meson setup "$build" "$src" -Dfuzz=enabled -Dfiu=disabled -Db_lundef=false \
		-Db_sanitize=address,undefined >"$build.setup.log" 2>&1 ||
		{ cat "$build.setup.log"; exit 1; }
fi
ninja -C "$build" tests/fuzz/fuzz-handler >"$build.ninja.log" 2>&1 || { tail -30 "$build.ninja.log"; exit 1; }
corpus="$build/corpus-handler"
mkdir -p "$corpus"
cp -n "$src"/tests/fuzz/corpus/handler/* "$corpus"/ 2>/dev/null
cd "$build" || exit 1
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	./tests/fuzz/fuzz-handler -max_total_time="$secs" -timeout=10 -error_exitcode=1 -rss_limit_mb=4096 \
	-print_final_stats=1 "$@" "$corpus"

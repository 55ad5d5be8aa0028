#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# run-fuzzer.sh HARNESS SECONDS DIR WORKDIR [DICT]
# Replays every input of DIR/crashes (crashes found before, kept as
# regressions), then fuzzes for SECONDS from the seeds in DIR/seeds, new
# inputs going to WORKDIR/corpus.  A crash, a leak or an input slower
# than 1 s fails the test and is saved under WORKDIR: add it to
# DIR/crashes once fixed.  Exits 77 when the harness was not built (no
# clang with libFuzzer: see tests/fuzz/meson.build).
set -u
harness=$1 seconds=$2 dir=$3 work=$4 dict=${5:-}
if [ -z "$harness" ] || [ ! -x "$harness" ]; then
	echo "SKIP: no libFuzzer harness built (needs clang with -fsanitize=fuzzer; meson -Dfuzz=enabled)"
	exit 77
fi
mkdir -p "$work/corpus" || exit 1
export ASAN_OPTIONS=${FUZZ_ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
set -- "$dir"/crashes/*
if [ -e "$1" ]; then
	echo "replaying $# regression inputs from $dir/crashes"
	"$harness" -timeout=10 -rss_limit_mb=2048 "$@" || exit 1
fi
echo "fuzzing for $seconds s from $dir/seeds"
"$harness" -max_total_time="$seconds" -timeout=10 -report_slow_units=1 -rss_limit_mb=2048 -print_final_stats=1 \
	-artifact_prefix="$work/" ${dict:+-dict="$dict"} "$work/corpus" "$dir/seeds"

#!/bin/sh
# The whole guest matrix: boots each of Debian's stock kernels (6.12, 6.1)
# once under qemu (run-guest.sh) and runs in it the shim's and the
# daemon's tests that use cgroups and the guest-only cgroup v2 tests, then
# the interference scenario with MGLRU off and on, and the warm scenario
# (in-guest.sh); then the kernel variant (6.12-madvseq, contrib/kernel's
# 6.12 series, when contrib/kernel/build.sh has built it): the scenario,
# with its switch on and off, and the warm scenario with its switch off
# and on.
# Prints the tables (table.py) and how long each part took.
#
#   tests/guest/matrix.sh BUILD [KERNEL...]
#
# Default kernels: 6.12 6.1 6.12-madvseq.  MADVSEQ_GUEST_PARTS says what
# runs on the stock kernels (default "suites scenario warm"),
# MADVSEQ_GUEST_VARIANT_PARTS on the kernel variant (default "scenario
# warm"; "suites scenario warm" adds the tests, about 5 minutes).  The warm
# part runs with MGLRU on and off on 6.12 and the variant, as Debian 12
# boots it (off) on 6.1, unless MADVSEQ_GUEST_WARM_MGLRU says otherwise.
# Each boot may take MADVSEQ_GUEST_TIMEOUT seconds (default here 3600).
#
# BUILD is a configured and built meson build directory of this tree.
# Results go to ${MADVSEQ_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/madvseq-guest}/matrix/KERNEL.
# Exit 0 when every suite passed and every libmadvseq row kept >= 99% of the
# victim's file resident, 1 otherwise, 77 when no guest could be booted.
# (The warm part's PASS/MISS lines against issue 26's other targets, p99
# and stream speed, are printed, not counted.)
set -u
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: matrix.sh BUILD [KERNEL...]" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
shift
kernels=${*:-6.12 6.1 6.12-madvseq}
cache=${MADVSEQ_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/madvseq-guest}
[ -f "$build/preload/libmadvseq.so" ] && [ -x "$build/daemon/madvseqd" ] ||
	{ echo "matrix.sh: $build is not built (ninja -C $build)"; exit 77; }

export MADVSEQ_GUEST_TIMEOUT="${MADVSEQ_GUEST_TIMEOUT:-3600}"

t0=$(date +%s)
status=0 runs="" booted=0 tparts=""
for k in $kernels; do
	ts=$(date +%s)
	out=$cache/matrix/$k
	mkdir -p "$out"
	parts=${MADVSEQ_GUEST_PARTS:-suites scenario warm}
	[ "$k" = 6.12-madvseq ] && parts=${MADVSEQ_GUEST_VARIANT_PARTS:-scenario warm}
	for p in scenario warm; do
		case " $parts " in *" $p "*) case " $tparts " in *" $p "*) ;; *) tparts="$tparts $p" ;; esac ;; esac
	done
	wmglru=${MADVSEQ_GUEST_WARM_MGLRU:-}
	[ -n "$wmglru" ] || { [ "$k" = 6.1 ] && wmglru=n || wmglru="y n"; }
	# shellcheck disable=SC2086
	MADVSEQ_GUEST_WARM_MGLRU=$wmglru \
		"$here/run-guest.sh" --out "$out" "$k" -- sh "$here/in-guest.sh" "$build" $parts
	rc=$?
	echo "matrix.sh: TIME kernel $k $(($(date +%s) - ts))s (status $rc)"
	case $rc in
	0) booted=1 ;;
	77) echo "matrix.sh: kernel $k skipped (see run-guest.sh's reason above)"; continue ;;
	*) booted=1; status=1 ;;
	esac
	runs="$runs $k=$out"
done
[ "$booted" -eq 1 ] || { echo "matrix.sh: SKIP: no guest could be booted"; exit 77; }
echo
echo "matrix.sh: suites"
for r in $runs; do
	[ -f "${r#*=}/suites.log" ] || { echo "${r%%=*}: (no tests run)"; continue; }
	echo "${r%%=*}: $(grep -E '^(Ok|Fail|Skipped|Timeout|Expected Fail|Unexpected Pass):' "${r#*=}/suites.log" | tr -s ' ' | tr '\n' ' ')"
done
echo
if [ -n "$tparts" ]; then
	# shellcheck disable=SC2086
	python3 "$here/table.py" --parts "${tparts# }" $runs || status=1
fi
echo "matrix.sh: TIME total $(($(date +%s) - t0))s"
exit $status

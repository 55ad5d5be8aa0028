#!/bin/sh
# libfiu failures inside the shim never change what the program sees: the
# fadvise, preadv2, pwritev2, sync_file_range and allocation fault points fail every
# time, and cat/sha256sum/rpclient outputs stay identical.
#   faults.sh RPCLIENT
. "$(dirname "$0")/lib.sh"

CLIENT=$1
command -v fiu-run >/dev/null || skip "fiu-run (fiu-utils) not installed"
[ -n "${MADVSEQ_FIU:-}" ] || skip "the library was built without libfiu fault points"

F=$WORK/f
make_file "$F" 64
SUM=$(sha256sum < "$F")

# fiu-run sets LD_PRELOAD to its own library: libmadvseq (after the
# sanitizer runtimes, if any) is put in front of it inside.
fiu() {
	point=$1
	shift
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:verify_asan_link_order=0" \
	fiu-run -c "enable name=$point" sh -c 'LD_PRELOAD="$0 $LD_PRELOAD" exec "$@"' \
		"$(echo "${MADVSEQ_PRELOAD:-$MADVSEQ_LIB}" | tr : ' ')" "$@"
}

# The point must fire: with fadvise failing, a streamed file stays cached.
evict "$F"
out=$(fiu madvseq/readpath/fadvise sha256sum < "$F")
[ "$out" = "$SUM" ] && ok "fadvise failing: sha256sum output" || fail "fadvise failing: sha256sum output"
c=$(cached "$F")
if [ "$c" -gt $((LAG + SLACK)) ]; then ok "fadvise fault point fires ($(mib "$c") stayed cached)"
else fail "fadvise fault point did not fire ($(mib "$c") cached)"; fi

for point in madvseq/readpath/fadvise madvseq/readpath/preadv2 madvseq/readpath/pwritev2 madvseq/readpath/sync_file_range madvseq/alloc; do
	for sc in short vec errors dup fork write; do
		arg=$F
		[ $sc = write ] && arg=$WORK/w
		"$CLIENT" $sc "$arg" > "$WORK/plain" 2>&1
		MADVSEQ_DONTCACHE=1 MADVSEQ_READ=all fiu $point "$CLIENT" $sc "$arg" > "$WORK/shim" 2>&1
		cmp -s "$WORK/plain" "$WORK/shim" && ok "$point: $sc same" ||
			{ fail "$point: $sc differs"; diff "$WORK/plain" "$WORK/shim" | head; }
	done
	out=$(MADVSEQ_READ=all fiu $point cat "$F" | sha256sum)
	[ "$out" = "$SUM" ] && ok "$point: cat output" || fail "$point: cat output"
done

finish

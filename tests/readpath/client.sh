#!/bin/sh
# Edge cases through rpclient, run without and with the shim: the output
# (data hashes, return values, errno, offsets) must be identical.  Short
# reads, errors, O_DIRECT, pipes, sockets, EINTR, fork, threads, dup*,
# writes.  Then the page cache: what a forked child and threads leave.
#   client.sh RPCLIENT
. "$(dirname "$0")/lib.sh"

CLIENT=$1
F=$WORK/f
make_file "$F" 48

for sc in short vec errors odirect pipe socket eintr fork vfork threads dup shuffle write rows rwscan rwhint rwshort rwrandom; do
	arg=$F
	[ $sc = write ] || [ $sc = rows ] && arg=$WORK/w
	evict "$F"
	"$CLIENT" $sc "$arg" > "$WORK/plain" 2>&1
	for mode in advised all off; do
		evict "$F"
		shim MADVSEQ_READ=$mode "$CLIENT" $sc "$arg" > "$WORK/shim" 2>&1
		if cmp -s "$WORK/plain" "$WORK/shim"; then
			ok "$sc ($mode): same as without the shim"
		else
			fail "$sc ($mode): differs from without the shim"
			diff "$WORK/plain" "$WORK/shim" | head -20
		fi
	done
done

# A dump's output through stdio, rows of tens of bytes (most fwrite calls
# stay in stdio's buffer and are not looked at): written behind as any
# stream, at most four lags of it cached at the end, and the same bytes.
R=$WORK/rows
"$CLIENT" rows "$R.plain" > /dev/null
shim MADVSEQ_READ=all MADVSEQ_WRITE_FREE=0 "$CLIENT" rows "$R" > /dev/null
c=$(cached "$R")
if [ "$c" -le $((LAG * 4)) ]; then ok "128 MiB of stdio rows written behind: $(mib "$c") cached"
else fail "128 MiB of stdio rows written behind: $(mib "$c") cached (limit $(mib $((LAG * 4))))"; fi
cmp -s "$R.plain" "$R" && ok "stdio rows: the same bytes" || fail "stdio rows: the files differ"
rm -f "$R" "$R.plain"

# O_DIRECT fds are left alone: a file cached before stays cached.
warm "$F"
shim "$CLIENT" odirect "$F" > /dev/null
expect_whole "$F" "O_DIRECT reader"

# A child continuing the parent's stream (and calling exit()) drops behind
# it too; nothing breaks when the parent closes after it.
evict "$F"
shim "$CLIENT" fork "$F" > /dev/null
expect_streamed "$F" "fork: parent half, child half"

# Advice that takes the stream back: nothing dropped.  (Cold start: all
# the file read stays cached, as without the shim.)
for adv in normal random willneed; do
	evict "$F"
	warm_ref=$(size "$F")
	shim "$CLIENT" stop "$F" $adv > /dev/null
	c=$(cached "$F")
	if [ "$c" -ge $((warm_ref - (512 << 10))) ]; then ok "SEQUENTIAL then ${adv}: nothing dropped"
	else fail "SEQUENTIAL then ${adv}: $(mib "$c") of $(mib "$warm_ref") cached"; fi
done

# Reads that are not sequential are not a stream: nothing dropped.
evict "$F"
shim MADVSEQ_READ=all "$CLIENT" shuffle "$F" > /dev/null
c=$(cached "$F")
if [ "$c" -ge $(($(size "$F") - (512 << 10))) ]; then ok "shuffled 1 MiB preads: nothing dropped"
else fail "shuffled 1 MiB preads: $(mib "$c") cached"; fi

# A database's own file (read-write, no advice).  A scan from end to end
# is a stream, dropped behind, but what was cached before it stays (the
# snapshot waits for a run: the first 256 KiB count as cached before).
# Random reads and writes, and a short range scan closed at once, drop
# nothing: a database reads again what it wrote or just read.
evict "$F"
shim MADVSEQ_READ=all "$CLIENT" rwscan "$F" > /dev/null
expect_streamed "$F" "database file scanned end to end"
warm "$F"
shim MADVSEQ_READ=all "$CLIENT" rwscan "$F" > /dev/null
expect_whole "$F" "database file scanned end to end, cached before"
# Its scan dirties the pages it read (PostgreSQL writes back the hint bits
# it sets): dropped behind too, once clean.  The last lag is still dirty at
# close and stays (nobody waits for its writeback), and so do the first
# chunks, read before the run's snapshot: at most the lag and 8 MiB.
H=$WORK/hint
make_file "$H" 128
evict "$H"
shim MADVSEQ_READ=all "$CLIENT" rwhint "$H" > /dev/null
c=$(cached "$H")
if [ "$c" -le $((LAG + 2 * SLACK)) ]; then ok "database file scanned and rewritten behind the reader: $(mib "$c") cached"
else fail "database file scanned and rewritten behind the reader: $(mib "$c") of 128 MiB cached (limit $(mib $((LAG + 2 * SLACK))))"; fi
rm -f "$H"
evict "$F"
shim MADVSEQ_READ=all "$CLIENT" rwrandom "$F" > /dev/null
c=$(cached "$F")
if [ "$c" -ge $(($(size "$F") - (512 << 10))) ]; then ok "database file, random reads and writes: nothing dropped"
else fail "database file, random reads and writes: $(mib "$c") of $(mib "$(size "$F")") cached"; fi
evict "$F"
"$CLIENT" rwshort "$F" > /dev/null
ref=$(cached "$F")
evict "$F"
shim MADVSEQ_READ=all "$CLIENT" rwshort "$F" > /dev/null
c=$(cached "$F")
if [ "$c" -ge $((ref - (512 << 10))) ]; then ok "database file, 8 MiB range scan: nothing dropped at close ($((c >> 10)) KiB cached, $((ref >> 10)) KiB without the shim)"
else fail "database file, 8 MiB range scan: $((c >> 10)) KiB cached, $((ref >> 10)) KiB without the shim"; fi

# A vfork child's read and close leave the parent's state alone.
evict "$F"
shim "$CLIENT" vfork "$F" > /dev/null
expect_streamed "$F" "vfork: the parent's stream after the child closed"

# Two fds of one description (dup), read alternately.
evict "$F"
shim "$CLIENT" dup "$F" > /dev/null
expect_streamed "$F" "dup'd fds read alternately"

# A file the process may not write: no residency snapshot (cachestat
# says EPERM); the stream is still dropped behind.
chmod 755 "$WORK"
chmod 644 "$F"
if command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups test -r "$F" 2>/dev/null; then
	evict "$F"
	shim setpriv --reuid=65534 --regid=65534 --clear-groups "$CLIENT" short "$F" > "$WORK/shim" 2>&1
	"$CLIENT" short "$F" > "$WORK/plain" 2>&1
	cmp -s "$WORK/plain" "$WORK/shim" && ok "unwritable file: same" || fail "unwritable file: differs"
	evict "$F"
	shim setpriv --reuid=65534 --regid=65534 --clear-groups "$CLIENT" short "$F" > /dev/null 2>&1
	expect_streamed "$F" "unwritable file, no snapshot"
else
	echo "info: cannot read the test file as nobody: unwritable-file case not run"
fi

# RWF_DONTCACHE in place of reads: the same data and offsets.  tmpfs
# refuses it (EOPNOTSUPP): the program's own read is made instead.
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
	T=$(mktemp /dev/shm/readpath.XXXXXX)
	head -c 5000000 "$F" > "$T"
	"$CLIENT" short "$T" > "$WORK/plain" 2>&1
	shim MADVSEQ_DONTCACHE=1 MADVSEQ_DEBUG=1 "$CLIENT" short "$T" > "$WORK/shim" 2> "$WORK/log"
	rm -f "$T"
	cmp -s "$WORK/plain" "$WORK/shim" && ok "tmpfs (RWF_DONTCACHE refused): same" ||
		fail "tmpfs (RWF_DONTCACHE refused): differs"
	grep -q "RWF_DONTCACHE refused" "$WORK/log" && ok "tmpfs: refusal noticed" ||
		echo "info: tmpfs did not refuse RWF_DONTCACHE"
	# Writes too: a NOREUSE writer's large writes try RWF_DONTCACHE.
	T=$(mktemp /dev/shm/readpath.XXXXXX)
	"$CLIENT" write "$T" > "$WORK/plain" 2>&1
	shim MADVSEQ_READ=all "$CLIENT" write "$T" > "$WORK/shim" 2>&1
	rm -f "$T"
	cmp -s "$WORK/plain" "$WORK/shim" && ok "tmpfs writes (RWF_DONTCACHE refused): same" ||
		{ fail "tmpfs writes (RWF_DONTCACHE refused): differs"; diff "$WORK/plain" "$WORK/shim" | head; }
fi
for sc in short vec errors; do
	"$CLIENT" $sc "$F" > "$WORK/plain" 2>&1
	evict "$F"
	shim MADVSEQ_DONTCACHE=1 "$CLIENT" $sc "$F" > "$WORK/shim" 2>&1
	cmp -s "$WORK/plain" "$WORK/shim" && ok "$sc (RWF_DONTCACHE): same" ||
		{ fail "$sc (RWF_DONTCACHE): differs"; diff "$WORK/plain" "$WORK/shim" | head; }
	[ $sc = errors ] || expect_streamed "$F" "$sc (RWF_DONTCACHE)"
done
# (evict first: folios a DONTCACHE stream read ahead keep their
# drop-behind mark, and the kernel drops them at the next read.)
evict "$F"
warm "$F"
shim MADVSEQ_DONTCACHE=1 "$CLIENT" short "$F" > /dev/null
expect_whole "$F" "RWF_DONTCACHE, cached before"

finish

#!/bin/sh
# Real streaming programs under libmadvseq: cat, cp, sha256sum (advised
# mode: they call posix_fadvise(SEQUENTIAL)), dd, tar, rsync (all mode:
# they give no advice), and madvseq run's default (all).  A cold file streamed leaves at most lag + 4 MiB
# cached; a file cached before stays cached; copies are byte-identical;
# MADVSEQ_READ=off behaves as without the shim.
#   programs.sh advised|all   (two halves, each well under 20 s)
. "$(dirname "$0")/lib.sh"

SRC=$WORK/src
make_file "$SRC" 128
SUM=$(sha256sum < "$SRC")

stream() { # WHAT MODE COMMAND...: cold run, then warm run
	what=$1 mode=$2
	shift 2
	evict "$SRC"
	shim MADVSEQ_READ="$mode" "$@" || fail "$what: exit status $?"
	expect_streamed "$SRC" "$what (cold)"
	warm "$SRC"
	shim MADVSEQ_READ="$mode" "$@" || fail "$what: exit status $?"
	expect_whole "$SRC" "$what (cached before)"
}

copy_left() { # WHAT COPY [LIMIT]: a written copy leaves at most 4 lags cached
	c=$(cached "$2")
	if [ "$c" -le "${3:-$((LAG * 4))}" ]; then ok "$1: $(mib "$c") of the copy cached"
	else fail "$1: $(mib "$c") of the copy cached (limit $(mib "${3:-$((LAG * 4))}"))"; fi
}

same() { # WHAT FILE
	if [ "$(sha256sum < "$2")" = "$SUM" ]; then ok "$1: output identical"
	else fail "$1: output differs"; fi
}

if [ "${1:-advised}" = advised ]; then
stream cat advised sh -c 'cat "$1" > /dev/null' sh "$SRC"
stream sha256sum advised sh -c '[ "$(sha256sum < "$1")" = "$2" ]' sh "$SRC" "$SUM"
stream "sha256sum FILE" advised sha256sum "$SRC"
rm -f "$WORK/cp"
stream cp advised cp "$SRC" "$WORK/cp"
same cp "$WORK/cp"
else
stream dd all dd if="$SRC" of=/dev/null bs=1M status=none
stream "dd bs=4k" all dd if="$SRC" of=/dev/null bs=4k status=none
stream "tar to pipe" all sh -c 'tar -C "$1" -cf - src | cat > /dev/null' sh "$WORK"
rm -f "$WORK/rsync"
stream rsync all rsync --whole-file "$SRC" "$WORK/rsync"
same rsync "$WORK/rsync"

# Writers in "all" mode: write-behind, and the copy is identical (cache
# measured before the checksum reads the copy back).
for w in cp dd; do
	rm -f "$WORK/$w"
	evict "$SRC"
	if [ $w = cp ]; then shim MADVSEQ_READ=all cp "$SRC" "$WORK/$w"
	else shim MADVSEQ_READ=all dd if="$SRC" of="$WORK/$w" bs=1M status=none; fi || fail "$w (all): exit status"
	expect_streamed "$SRC" "$w (all) source"
	copy_left "$w (all) write-behind" "$WORK/$w"
	same "$w (all)" "$WORK/$w"
done

# stdio: sed reads lines with getdelim and writes them with fwrite, which
# libc makes through its own read and write.
rm -f "$WORK/sed"
evict "$SRC"
shim MADVSEQ_READ=all LC_ALL=C sed -n p "$SRC" > "$WORK/sed" || fail "sed (all): exit status"
expect_streamed "$SRC" "sed (all, getdelim) source"
copy_left "sed (all, fwrite) output" "$WORK/sed"
same "sed (all)" "$WORK/sed"

# A process that writes less than 4 lags in all (64 MiB) gets no
# write-behind, by the library's default: it would cost the writer's time
# for pages the output may occupy anyway.  (madvseq run asks for all of
# it, MADVSEQ_WRITE_FREE=0: below.)  NOREUSE asks for it from the first
# byte.
written_behind() { sed -n 's/^read_bytes_written_behind=//p' "$1"; }
rm -f "$WORK/small" "$WORK/st-small"
shim env -u MADVSEQ_WRITE_FREE MADVSEQ_READ=all MADVSEQ_STATS="$WORK/st-small" dd if="$SRC" of="$WORK/small" \
	bs=1M count=40 status=none || fail "dd 40 MiB (all): exit status"
wb=$(written_behind "$WORK/st-small")
c=$(cached "$WORK/small")
if [ "${wb:-x}" = 0 ] && [ "$c" -ge $((40 << 20)) ]; then
	ok "40 MiB written (all): no write-behind, $(mib "$c") cached as without the shim"
else fail "40 MiB written (all): written behind ${wb:-?}, $(mib "$c") cached"; fi
rm -f "$WORK/small" "$WORK/st-small"
shim MADVSEQ_READ=all MADVSEQ_STATS="$WORK/st-small" python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_NOREUSE)
src = open(sys.argv[2], "rb")
for _ in range(40):
    os.write(fd, src.read(1 << 20))
os.close(fd)' "$WORK/small" "$SRC" || fail "NOREUSE writer: exit status"
wb=$(written_behind "$WORK/st-small")
if [ "${wb:-0}" -gt 0 ]; then ok "40 MiB written to a NOREUSE fd: $(mib "$wb") written behind"
else fail "40 MiB written to a NOREUSE fd: written behind ${wb:-?}"; fi
copy_left "NOREUSE writer" "$WORK/small"

# A tree of outputs (rsync -r, tar -x): each file's last chunks are still
# dirty when the writer closes it, and write-behind drops only clean ones.
# Past the first 4 lags of a process's writes, rsync's 256 KiB writes go
# through RWF_DONTCACHE from a file's first 256 KiB on, where the
# filesystem takes it: once written, nothing of them stays (without:
# 80 MiB of the 192 here, 158 MiB of a 1.13 GB tree in kv_backup).  tar's
# 10 KiB writes stay plain (the kernel would start writeback of each) and
# leave what the disk has not written back by each close: reported only.
TREE=$WORK/tree
make_tree() {
	mkdir -p "$TREE"
	for i in 01 02 03 04 05 06 07 08 09 10 11 12; do
		head -c $((16 << 20)) "$SRC" > "$TREE/f$i"
	done
	TSUM=$(cd "$TREE" && cat f* | sha256sum)
}
# tree_copied WHAT LIMIT: judges the copy in $WORK/out-WHAT (on ext4; tar
# and other filesystems: reported only), then that it is identical.
tree_copied() {
	sync -f "$WORK/out-$1/tree"
	# (The cache before the checksum reads the copy back.)
	c=0
	for f in "$WORK/out-$1/tree"/f*; do c=$((c + $(cached "$f"))); done
	if [ "$(stat -f -c %T "$WORK")" != ext2/ext3 ] || [ "$1" = tar ]; then
		echo "info: $(stat -f -c %T "$WORK"): $1 of a tree left $(mib "$c") cached"
	elif [ "$c" -le "$2" ]; then ok "$1 of a tree (192 MiB): $(mib "$c") of the copy cached"
	else fail "$1 of a tree (192 MiB): $(mib "$c") of the copy cached (limit $(mib "$2"))"; fi
	[ "$(cd "$WORK/out-$1/tree" && cat f* | sha256sum)" = "$TSUM" ] && ok "$1 of a tree: output identical" ||
		fail "$1 of a tree: output differs"
	rm -rf "$WORK/out-$1"
}
make_tree
for w in rsync tar; do
	rm -rf "$WORK/out-$w"
	mkdir -p "$WORK/out-$w"
	vmtouch -e "$TREE" > /dev/null
	if [ $w = tar ]; then
		tar -C "$WORK" -cf - tree | shim MADVSEQ_READ=all tar -C "$WORK/out-$w" -xf - ||
			fail "tar -x (all): exit status"
	else
		shim env -u MADVSEQ_WRITE_FREE MADVSEQ_READ=all rsync -r --whole-file "$TREE" "$WORK/out-$w/" ||
			fail "rsync -r (all): exit status"
	fi
	tree_copied $w $((LAG * 4 + 2 * SLACK))
done

# madvseq run without --read manages every stream: tar (no advice) and
# cp's output.  (Under the sanitizers the wrapper is not used: it cannot
# put their runtimes first.)
if [ -z "${MADVSEQ_PRELOAD:-}" ]; then
	run_default() { env -u MADVSEQ_READ -u MADVSEQ_WRITE_FREE MADVSEQ_LIBRARY="$MADVSEQ_LIB" sh "$MADVSEQ_WRAPPER" run -- "$@"; }
	evict "$SRC"
	run_default sh -c 'tar -C "$1" -cf - src | cat > /dev/null' sh "$WORK" ||
		fail "madvseq run -- tar: exit status $?"
	expect_streamed "$SRC" "madvseq run (default --read) -- tar"
	rm -f "$WORK/cp-default"
	evict "$SRC"
	run_default cp "$SRC" "$WORK/cp-default" || fail "madvseq run -- cp: exit status $?"
	expect_streamed "$SRC" "madvseq run (default --read) -- cp: source"
	# (madvseq run: all of the output.  cp copies with copy_file_range,
	# which RWF_DONTCACHE cannot take: its last chunks are those whose
	# writeback the shim started and, never waiting for writeback, has
	# not seen end when cp closes the file.  The lag when writeback keeps
	# up (8 MiB in most runs), up to two lags when the disk is busy.)
	copy_left "madvseq run -- cp" "$WORK/cp-default" "$((LAG * 2))"
	same "madvseq run -- cp" "$WORK/cp-default"
	# rsync writes into a temporary file opened read-write, then renames it.
	rm -f "$WORK/rsync-default"
	evict "$SRC"
	run_default rsync --whole-file "$SRC" "$WORK/rsync-default" ||
		fail "madvseq run -- rsync: exit status $?"
	expect_streamed "$SRC" "madvseq run (default --read) -- rsync: source"
	copy_left "madvseq run -- rsync" "$WORK/rsync-default" "$LAG"
	same "madvseq run -- rsync" "$WORK/rsync-default"
	# And all of the output: write-behind from a process's first byte
	# (MADVSEQ_WRITE_FREE=0), so that a tree whose files are closed
	# before the process has written four lags does not stay cached
	# (with the library's own default: 64 MiB of these 192).
	rm -f "$WORK/small" "$WORK/st-small"
	run_default env MADVSEQ_STATS="$WORK/st-small" dd if="$SRC" of="$WORK/small" bs=1M count=40 \
		status=none || fail "madvseq run -- dd 40 MiB: exit status"
	wb=$(written_behind "$WORK/st-small")
	c=$(cached "$WORK/small")
	if [ "${wb:-0}" -gt 0 ] && [ "$c" -le $((LAG + SLACK)) ]; then
		ok "madvseq run -- dd 40 MiB: $(mib "$wb") written behind, $(mib "$c") cached"
	else fail "madvseq run -- dd 40 MiB: written behind ${wb:-?}, $(mib "$c") cached"; fi
	rm -f "$WORK/small" "$WORK/st-small"
	rm -rf "$WORK/out-run-rsync"
	mkdir -p "$WORK/out-run-rsync"
	vmtouch -e "$TREE" > /dev/null
	run_default rsync -r --whole-file "$TREE" "$WORK/out-run-rsync/" ||
		fail "madvseq run -- rsync -r: exit status $?"
	tree_copied run-rsync $((LAG + SLACK))
fi
rm -rf "$TREE"
finish
fi

# MADVSEQ_READ=off: what the kernel does alone.
evict "$SRC"
cat "$SRC" > /dev/null
plain=$(cached "$SRC")
evict "$SRC"
shim MADVSEQ_READ=off cat "$SRC" > /dev/null
off=$(cached "$SRC")
if [ "$off" -ge $((plain - SLACK)) ]; then ok "off: $(mib "$off") cached, without the shim $(mib "$plain")"
else fail "off: $(mib "$off") cached, without the shim $(mib "$plain")"; fi
evict "$SRC"
shim MADVSEQ_READ=off sha256sum "$SRC" > /dev/null
c=$(cached "$SRC")
[ "$c" -ge $((plain - SLACK)) ] && ok "off: sha256sum leaves the cache alone" || fail "off: sha256sum dropped pages"

# MADVSEQ_STATS counts the read path: one file, what it advised away.
evict "$SRC"
shim MADVSEQ_STATS="$WORK/stats" cat "$SRC" > /dev/null
files=$(sed -n 's/^read_files=//p' "$WORK/stats")
adv=$(sed -n 's/^read_bytes_advised=//p' "$WORK/stats")
size=$(stat -c %s "$SRC")
if [ "${files:-0}" -ge 1 ] && [ "${adv:-0}" -ge $((size - LAG - SLACK)) ]; then
	ok "MADVSEQ_STATS: read_files=$files read_bytes_advised=$(mib "$adv") of $(mib "$size")"
else
	fail "MADVSEQ_STATS: read_files=${files:-?} read_bytes_advised=${adv:-?} for a $(mib "$size") file"
fi

# noreuse mode: cat only advises SEQUENTIAL, so nothing is dropped.
evict "$SRC"
shim MADVSEQ_READ=noreuse cat "$SRC" > /dev/null
c=$(cached "$SRC")
[ "$c" -ge $((plain - SLACK)) ] && ok "noreuse: SEQUENTIAL alone is left alone" || fail "noreuse: dropped $(mib $((plain - c)))"

finish

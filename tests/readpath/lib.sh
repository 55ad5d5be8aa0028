# Shared by the read-path tests (sourced).  Environment from meson:
#   MADVSEQ_WRAPPER  the uninstalled `madvseq` script
#   MADVSEQ_LIB      libmadvseq.so
#   MADVSEQ_PRELOAD  (optional) full LD_PRELOAD value, e.g. the sanitizer
#                    runtimes followed by the library; replaces the wrapper
#   RP_DIR           scratch directory on a disk filesystem (not tmpfs)
set -u

LAG=$((16 << 20))
SLACK=$((4 << 20))
fails=0

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

[ "$(id -u)" = 0 ] || skip "needs root (cache eviction of test files, cgroup-free measurements)"
command -v fincore >/dev/null || skip "fincore (util-linux) not installed"
command -v vmtouch >/dev/null || skip "vmtouch not installed"

RP_DIR=${RP_DIR:-${TMPDIR:-/var/tmp}}
mkdir -p "$RP_DIR" || skip "cannot create $RP_DIR"
case "$(stat -f -c %T "$RP_DIR")" in
	tmpfs|ramfs) skip "$RP_DIR is on $(stat -f -c %T "$RP_DIR"): page-cache tests need a disk filesystem" ;;
esac
WORK=$(mktemp -d "$RP_DIR/readpath.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM

# shim [VAR=value...] PROGRAM ARGS: runs PROGRAM with libmadvseq.
shim() {
	if [ -n "${MADVSEQ_PRELOAD:-}" ]; then
		# The programs are not built with the sanitizers: no leak reports
		# about them (later options win).
		env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:verify_asan_link_order=0" \
			LD_PRELOAD="$MADVSEQ_PRELOAD" "$@"
	else
		env MADVSEQ_LIBRARY="$MADVSEQ_LIB" sh "$MADVSEQ_WRAPPER" run -- env "$@"
	fi
}

# Bytes of $1 in the page cache.  cachestat(2) counts a folio from the
# moment the kernel adds it, read-ahead still in flight included; mincore
# (fincore) counts it only once its read completed, so read-ahead that a
# program started just before it exited made fincore's figure depend on
# how fast a loaded disk answered (a 4 MiB window short, now and then).
# fincore where the kernel has no cachestat.
cached() {
	python3 - "$1" <<'EOF' 2>/dev/null || fincore -b -n -o RES "$1" | tr -d ' '
import ctypes, os, sys
class Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]
class Stat(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("cache", "dirty", "writeback", "evicted", "recent")]
libc = ctypes.CDLL(None, use_errno=True)
fd, st = os.open(sys.argv[1], os.O_RDONLY), Stat()
if libc.syscall(451, fd, ctypes.byref(Range(0, 0)), ctypes.byref(st), 0) != 0:
    sys.exit(1)
print(st.cache * os.sysconf("SC_PAGE_SIZE"))
EOF
}
evict() { vmtouch -e "$1" >/dev/null; }
warm() { vmtouch -t "$1" >/dev/null; WARM=$(cached "$1"); }
size() { stat -c %s "$1"; }
mib() { echo "$(( $1 >> 20 )) MiB"; }

# A file of $2 MiB of random data.
make_file() { dd if=/dev/urandom of="$1" bs=1M count="$2" status=none && sync "$1"; }

# expect_streamed FILE WHAT: at most lag + 4 MiB of FILE left cached.
expect_streamed() {
	c=$(cached "$1")
	if [ "$c" -le $((LAG + SLACK)) ]; then ok "$2: $(mib "$c") cached"
	else fail "$2: $(mib "$c") of $(mib "$(size "$1")") cached (limit $(mib $((LAG + SLACK))))"; fi
}

# warm FILE, then expect_whole FILE WHAT: what warm cached is still
# cached.  The shim drops whole 2 MiB chunks; up to 512 KiB less is
# reclaim by other load on the machine.
# A DAMON pageout scheme (some hosts run one over physical memory) evicts
# what it samples as idle, a warm test file too: a 512 MiB file left alone
# here lost 15 MiB within a minute, starting after 30 s, and a check below
# lost one 2 MiB folio of it now and then.  On such a machine the checks
# allow one such folio more, and say so.
damon_pageout_on() {
	for k in /sys/kernel/mm/damon/admin/kdamonds/[0-9]*; do
		[ "$(cat "$k/state" 2>/dev/null)" = on ] || continue
		for a in "$k"/contexts/*/schemes/*/action; do
			[ "$(cat "$a" 2>/dev/null)" = pageout ] && return 0
		done
	done
	return 1
}
WARM_SLACK=$((512 << 10))
damon_pageout_on && WARM_SLACK=$((WARM_SLACK + (2 << 20)))

expect_whole() {
	c=$(cached "$1")
	if [ "$c" -ge $((WARM - (512 << 10))) ]; then ok "$2: stayed cached ($((c >> 10)) of $((WARM >> 10)) KiB)"
	elif [ "$c" -ge $((WARM - WARM_SLACK)) ]; then
		ok "$2: stayed cached but $(((WARM - c) >> 10)) KiB ($((c >> 10)) of $((WARM >> 10)) KiB; this machine's DAMON pageout scheme evicts idle pages: one 2 MiB folio allowed)"
	else fail "$2: $((c >> 10)) KiB of $((WARM >> 10)) KiB cached before"; fi
}

finish() { [ "$fails" = 0 ] && exit 0; echo "$fails failure(s)"; exit 1; }

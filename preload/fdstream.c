/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read path's per-fd streams: which fds are managed (classification),
 * the fast path of a transfer, and an fd's state from its first look to
 * its close.  The wrappers that feed them are in readpath.c; the decisions
 * (runs, snapshots, drops, retries, write-behind) in fdrun.c, the probes
 * in fdprobe.c, the figures in fdstats.c.
 *
 * Mechanism.  Pages a stream brought in are dropped with
 * posix_fadvise(DONTNEED) (the raw syscall: our own wrapper must not see
 * it) in 2 MiB-aligned chunks lagging the stream's offset, minus the chunks
 * a residency snapshot (cachestat(2), taken ahead of the stream) found
 * cached before.  preadv2(RWF_DONTCACHE) keeps cached pages without a
 * snapshot, but the kernel drops each folio as the read completes,
 * synchronously, which makes plain streaming reads much slower than reads
 * with fadvise behind (tests/bench/RESULTS.md).  So it is used only with
 * MADVSEQ_DONTCACHE=1 (where the filesystem takes it; probed per st_dev,
 * EOPNOTSUPP falls back to the program's own call).  Files the process may
 * not write have no reliable snapshot (cachestat fails with EPERM, mincore
 * says "all resident"): there, as on the mmap path, the shim drops behind
 * without one, and pages cached before may be dropped too.
 *
 * Offsets.  pread-style calls give their offset.  read()-style calls
 * advance the file position: the shim keeps an estimate and checks it
 * with lseek(SEEK_CUR) (and the file's identity with fstat) only before it
 * acts, about once per 2 MiB, so an lseek it does not see (or a reused fd)
 * costs at most a chunk left cached.
 *
 * Write-behind.  Writes on managed fds (every regular file in "all" mode,
 * NOREUSE fds otherwise) start writeback of each completed chunk with
 * sync_file_range(SYNC_FILE_RANGE_WRITE) and fadvise(DONTNEED) chunks one
 * lag behind, which the kernel drops only once clean.  The shim never
 * waits on writeback (SYNC_FILE_RANGE_WAIT_* would consume a writeback
 * error the program's own fsync() must see) and never fsyncs.  That work
 * runs in the writer's own time, where the kernel alone would leave it to
 * its flusher threads: so a process's first write_free() bytes of writes
 * (MADVSEQ_WRITE_FREE; four lags, 64 MiB, by default) get none of it
 * (NOREUSE fds excepted): about what a writer's output may occupy anyway
 * with write-behind on (two lags ahead of the oldest unwritten chunk plus
 * the lag behind, three lags), and a lag more.  Programs that write less,
 * most of them, pay nothing for write-behind; cp or tar -x of a large tree
 * pay from there on.  madvseq run sets it to 0: a person who wraps a
 * backup means all of its output, and a tree of files closed before the
 * process reached four lags would keep them.
 *
 * Writes through pwritev2(RWF_DONTCACHE) (Linux 6.14+, where the filesystem
 * takes it): the kernel starts writeback of what the call wrote and drops
 * each folio it created once written, so a stream's output leaves nothing
 * behind, not even its last chunks, which are still dirty when the program
 * closes the file and which write-behind (it drops only clean chunks) has
 * to leave.  Folios cached before stay cached, and such writes are faster
 * and cheaper than plain ones (they recycle pages the VM already has).
 * Only where write-behind is due, only once the fd's run is MSQ_RUN_MIN
 * long (small files and small outputs stay as they were), only for calls
 * of at least DC_WRITE_MIN (the kernel starts writeback of each call's
 * range, which small writes pay dearly for, where write-behind's 2 MiB
 * chunks cost nothing), never under a seccomp filter (one that allows
 * write but not pwritev2 could kill the program), and not with
 * MADVSEQ_DONTCACHE=0.
 */
#include "fdstream.h"

#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <urcu/urcu-bp.h>

#include "../common/config.h"
#include "../common/fault.h"
#include "../common/sys.h"
#include "daemon_client.h"
#include "fdprobe.h"
#include "fdstate.h"
#include "fdstats.h"
#include "fdtable.h"
#include "objpool.h"
#include "readpath.h"

#define CHUNK MSQ_CHUNK
#define WB_POLL_NS 1000000L
#define DC_WRITE_MIN (UINT64_C(64) << 10)

enum msq_read_mode msq_fds_mode; /* MSQ_READ_OFF until msq_readpath_init() */
int msq_fds_dontcache = -1;       /* MADVSEQ_DONTCACHE (fdstream.h) */
static bool g_dc_any;             /* some fd was set up for RWF_DONTCACHE */

static uint64_t ceil_chunk(uint64_t x) { return (x + CHUNK - 1) & ~(CHUNK - 1); }

/* ---- which fds are managed ------------------------------------------- */

static bool managed_read(const struct msq_fd *s)
{
	if ((s->flags & F_STOPPED) || !(s->flags & F_CANREAD))
		return false;
	switch (msq_fds_mode) {
	case MSQ_READ_NOREUSE: return s->flags & F_NOREUSE;
	case MSQ_READ_ADVISED: return s->flags & (F_NOREUSE | F_SEQ);
	case MSQ_READ_ALL: return true;
	default: return false;
	}
}

static bool managed_write(const struct msq_fd *s)
{
	if ((s->flags & F_STOPPED) || !(s->flags & F_CANWRITE) || msq_fds_mode == MSQ_READ_OFF)
		return false;
	if (s->flags & F_NOREUSE)
		return true;
	/* A database's own writes it reads again (advice makes them a stream) */
	return msq_fds_mode == MSQ_READ_ALL && (!(s->flags & F_RWDATA) || (s->flags & F_SEQ));
}

static bool managed(const struct msq_fd *s, bool writing)
{
	return writing ? managed_write(s) : managed_read(s);
}

/* Whether advice `add' makes an fd managed in the current mode (checked
 * again after the daemon's policy may have changed the mode). */
static bool managed_by_advice(unsigned add)
{
	switch (__atomic_load_n(&msq_fds_mode, __ATOMIC_ACQUIRE)) {
	case MSQ_READ_NOREUSE: return add & F_NOREUSE;
	case MSQ_READ_ADVISED: return add & (F_NOREUSE | F_SEQ);
	case MSQ_READ_ALL: return true;
	default: return false;
	}
}

/* Bytes this process wrote through managed fds, counted up to
 * write_free() (reset in a fork child). */
static uint64_t g_wr_bytes;

/* The process's writes that get no write-behind (see "Write-behind"). */
static uint64_t write_free(void)
{
	return msq_cfg.write_free;
}

/* Is write-behind due for s's writes (see "Write-behind" above)? */
static bool write_behind_due(const struct msq_fd *s)
{
	return (s->flags & F_NOREUSE) || __atomic_load_n(&g_wr_bytes, __ATOMIC_RELAXED) >= write_free();
}

/* ---- the decisions' syscalls on one fd (fdrun.h) ---------------------- */

struct fd_arg {
	int fd;
	struct msq_fd *s;
};

static int op_cachestat(void *arg, uint64_t off, uint64_t len, struct msq_cachestat *cs)
{
	struct msq_cachestat_range r = { off, len };

	return msq_cachestat(((struct fd_arg *)arg)->fd, &r, cs);
}

static int op_dontneed(void *arg, uint64_t off, uint64_t len)
{
	if (MSQ_FAULT("madvseq/readpath/fadvise"))
		return -EIO;
	return msq_sys_fadvise(((struct fd_arg *)arg)->fd, off, len, POSIX_FADV_DONTNEED);
}

static void op_writeback(void *arg, uint64_t off, uint64_t len)
{
	if (!MSQ_FAULT("madvseq/readpath/sync_file_range"))
		MSQ_SYSCALL(SYS_sync_file_range, ((struct fd_arg *)arg)->fd, (off_t)off, (off_t)len,
			    SYNC_FILE_RANGE_WRITE);
}

static void op_nap(void *arg)
{
	(void)arg;
	MSQ_SYSCALL(SYS_nanosleep, &(struct timespec){ 0, WB_POLL_NS }, NULL);
}

static void op_advised(void *arg, uint64_t n, bool writing)
{
	msq_stats_advised(((struct fd_arg *)arg)->s, n, writing);
}

static void op_kept(void *arg, uint64_t n)
{
	msq_stats_kept(((struct fd_arg *)arg)->s, n);
}

static void op_note_kept(void *arg, uint64_t lo, uint64_t hi, uint64_t pages, uint64_t reader)
{
	msq_debug("fd %d: %" PRIu64 "M-%" PRIu64 "M cached before the stream came (%" PRIu64
		  " pages; reader at %" PRIu64 "M): kept", ((struct fd_arg *)arg)->fd, lo >> 20,
		  hi >> 20, pages, reader >> 20);
}

static const struct msq_run_ops g_ops = {
	.cachestat = op_cachestat,
	.dontneed = op_dontneed,
	.writeback = op_writeback,
	.nap = op_nap,
	.advised = op_advised,
	.kept = op_kept,
	.note_kept = op_note_kept,
};

/* The decisions' context for one call on fd, whose state s the caller holds. */
static struct msq_run_ctx run_ctx(struct fd_arg *a)
{
	return (struct msq_run_ctx){
		.ops = &g_ops,
		.arg = a,
		.lag = msq_cfg.policy.lag,
		.streamed = __atomic_load_n(&a->s->c.streamed, __ATOMIC_RELAXED),
		.wb_due = write_behind_due(a->s),
	};
}

static off_t sys_lseek_cur(int fd)
{
	return msq_sys_lseek(fd, 0, SEEK_CUR);
}

/* ---- the states ------------------------------------------------------- */

/* Per-fd states: from a lock-free pool (objpool.h), since read() and
 * write() may classify an fd inside a signal handler. */
static struct msq_pool g_states = MSQ_POOL_INIT(sizeof(struct msq_fd));

static struct msq_fd *new_state(void)
{
	struct msq_fd *s = msq_pool_alloc(&g_states);

	if (s)
		msq_run_init(&s->st);
	return s;
}

static void free_state(struct msq_fd *s)
{
	msq_pool_free(&g_states, s);
}

/*
 * States taken out of the fd table are freed after an RCU grace period,
 * RETIRE_BATCH at a time: one urcu_bp_synchronize_rcu() (a membarrier and
 * two sigprocmask calls) per close() would cost copies of many small files
 * dearly.  The list is pushed lock-free and taken whole with one exchange.
 */
#define RETIRE_BATCH 32
static struct msq_fd *g_retired;
static unsigned g_nretired;

static void retire_state(struct msq_fd *s)
{
	struct msq_fd *head = __atomic_load_n(&g_retired, __ATOMIC_RELAXED);
	unsigned n = 0;

	msq_stats_streamed(s); /* out of the table: msq_readpath_totals no longer sees it */

	do
		s->retired_next = head;
	while (!__atomic_compare_exchange_n(&g_retired, &head, s, false, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
	if (__atomic_add_fetch(&g_nretired, 1, __ATOMIC_RELAXED) < RETIRE_BATCH)
		return;
	if (!msq_is_owner())
		return; /* a vfork child: no grace period here, the parent frees them */
	head = __atomic_exchange_n(&g_retired, NULL, __ATOMIC_ACQUIRE);
	if (!head)
		return;
	urcu_bp_synchronize_rcu(); /* no reader still sees any of them */
	while (head) {
		struct msq_fd *next = head->retired_next;

		free_state(head);
		head = next;
		n++;
	}
	__atomic_sub_fetch(&g_nretired, n, __ATOMIC_RELAXED);
}

/* ---- classification --------------------------------------------------- */

/*
 * Files left alone: read-only files smaller than MSQ_RUN_MIN unless the
 * program says NOREUSE (a run that short drops nothing, and cp -r or tar
 * of many small files would pay the classification for nothing; cp
 * advises SEQUENTIAL for each).
 */
static bool unadvised_skip(const struct stat *st, int fl, unsigned extra)
{
	if (extra & F_NOREUSE)
		return false;
	return (fl & O_ACCMODE) == O_RDONLY && st->st_size < (off_t)MSQ_RUN_MIN;
}

/*
 * A file opened for reading and writing that holds data, with no advice,
 * is a database's (or an editor's): what it writes it reads again, and
 * most of its reads are random, with no cursor to drop behind.  But a
 * dump or a full scan reads it from end to end (PostgreSQL's backends
 * read the tables for pg_dump's COPY so, 8 KiB at a time): such a run is
 * a stream like any other.  So its reads are managed, its writes are not,
 * its snapshot waits for a run of MSQ_RUN_MIN (random readers never pay
 * for one), and at close only a run longer than the lag is dropped (see
 * final_drop()).  An empty one is a new output (rsync writes its copy
 * into a temporary file opened read-write), managed like a write-only one.
 */
static bool is_rwdata(const struct stat *st, int fl, unsigned extra)
{
	return (fl & O_ACCMODE) == O_RDWR && st->st_size > 0 && !(extra & (F_SEQ | F_NOREUSE));
}

/*
 * Looks at fd once (or again, with advice flags extra) and installs its
 * state: regular files only, not O_DIRECT; anything else is marked
 * MSQ_FD_IGNORED.  Returns the slot's value, or NULL (not open, or not
 * ours to track: a vfork child, the read path turned off).  Called with
 * the guard raised.  Async-signal-safe: no malloc, no lock, no daemon.
 */
static struct msq_fd *classify(int fd, unsigned extra)
{
	struct msq_fd *s, *old;
	struct stat st;
	int fl;
	off_t pos;

	if ((unsigned)fd >= MSQ_FDT_MAX)
		return MSQ_FD_IGNORED;
	if (__atomic_load_n(&msq_fds_mode, __ATOMIC_ACQUIRE) == MSQ_READ_OFF)
		return NULL;
	fl = msq_sys_fcntl(fd, F_GETFL, 0);
	if (fl < 0 || fstat(fd, &st) < 0)
		return NULL; /* not open: nothing to remember */
	if (!S_ISREG(st.st_mode) || (fl & O_DIRECT) || (fl & O_PATH) || unadvised_skip(&st, fl, extra)) {
		msq_fdt_cas(fd, NULL, MSQ_FD_IGNORED);
		return MSQ_FD_IGNORED;
	}
	/* A vfork child shares the parent's table.  It gets here only for a
	 * slot the parent left empty (or ignored), so it replaces no state of
	 * the parent's, and every state is checked against its file (fstat)
	 * before it is acted on: a state the child leaves behind costs the
	 * parent at most a look at the fd again.  Still, a large file's stream
	 * is left to the owner; small files and new outputs, most of them,
	 * spare the getpid. */
	if (st.st_size >= (off_t)MSQ_RUN_MIN && !msq_is_owner())
		return NULL;
	if (!(s = new_state())) {
		msq_fdt_cas(fd, NULL, MSQ_FD_IGNORED);
		return MSQ_FD_IGNORED;
	}
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->size = (uint64_t)st.st_size;
	s->flags = extra | (is_rwdata(&st, fl, extra) ? F_RWDATA : 0);
	s->st.snap_ahead = ceil_chunk(8 * msq_probe_readahead(st.st_dev));
	if (s->st.snap_ahead < MSQ_SNAP_AHEAD_MIN)
		s->st.snap_ahead = MSQ_SNAP_AHEAD_MIN;
	if ((fl & O_ACCMODE) != O_WRONLY)
		s->flags |= F_CANREAD;
	if ((fl & O_ACCMODE) != O_RDONLY)
		s->flags |= F_CANWRITE;
	s->st.snap_ok = true;
	s->st.blind = !msq_probe_may_write(fd, &st, fl) || !msq_probe_cachestat(fd);
	if (msq_fds_dontcache == 1)
		s->st.dontcache = msq_probe_dc_state(st.st_dev) != MSQ_DC_NO;
	if (s->st.dontcache)
		__atomic_store_n(&g_dc_any, true, __ATOMIC_RELAXED);
	/* An empty file's position is 0 unless the program seeked past its
	 * end before writing; the estimate is checked (lseek) before the
	 * first action anyway, and the call is spared for every new output. */
	pos = st.st_size == 0 ? 0 : sys_lseek_cur(fd);
	if (pos >= 0) {
		struct fd_arg a = { fd, s };
		struct msq_run_ctx c = run_ctx(&a);

		/* Before the first read: the snapshot sees what was cached before
		 * (a database's file: at its first long run, see is_rwdata()). */
		if (s->flags & F_CANREAD)
			msq_run_start(&c, &s->st, &s->st.rd, (uint64_t)pos, !(s->flags & F_RWDATA),
				      (uint64_t)st.st_size);
		if (s->flags & F_CANWRITE)
			msq_run_start(&c, &s->st, &s->st.wr, (uint64_t)pos, !(s->flags & F_RWDATA),
				      (uint64_t)st.st_size);
	}
	old = msq_fdt_xchg(fd, s);
	if (old == MSQ_FD_IGNORED && (unsigned)fd < MSQ_FDT_MAX && msq_fdt_peek(fd) != s) {
		free_state(s); /* no memory for the leaf */
		return MSQ_FD_IGNORED;
	}
	if (old && old != MSQ_FD_IGNORED)
		retire_state(old);
	msq_stats_file();
	msq_debug("fd %d: managed (%s%s%s%s)", fd, s->st.dontcache ? "RWF_DONTCACHE" : "fadvise behind",
		  s->st.blind ? ", no residency snapshot: pages cached before may go too" : "",
		  managed_write(s) ? ", write-behind" : "",
		  s->flags & F_RWDATA ? ", a database's file: long reads only" : "");
	return s;
}

/* ---- one transfer: classify, act, account ------------------------------ */

/* Whether the next write of n bytes on s is to go through RWF_DONTCACHE
 * (see the top).  Read lock held. */
static bool write_dontcache(struct msq_fd *s, uint64_t n)
{
	int st;

	if (!managed_write(s) || !write_behind_due(s) || !s->st.wr.started ||
	    s->st.wr.next - s->st.wr.run_start < MSQ_RUN_MIN || msq_probe_dc_state(s->dev) == MSQ_DC_NO)
		return false;
	st = __atomic_load_n(&s->wdc, __ATOMIC_RELAXED);
	if (st == MSQ_DC_UNKNOWN) {
		st = msq_probe_seccomp() ? MSQ_DC_NO : MSQ_DC_YES;
		__atomic_store_n(&s->wdc, st, __ATOMIC_RELAXED);
	}
	return st == MSQ_DC_YES;
}

void msq_fds_begin(struct msq_xfer *x, int fd, bool writing, uint64_t n)
{
	struct msq_fd *s = msq_fdt_peek(fd);

	*x = (struct msq_xfer){ .fd = fd, .writing = writing };
	if (!s && msq_fds_mode == MSQ_READ_ALL)
		s = classify(fd, 0); /* (not under the read lock: it may retire a state) */
	if (!s || s == MSQ_FD_IGNORED || n == 0)
		return;
	if (writing ? n < DC_WRITE_MIN || __atomic_load_n(&msq_fds_dontcache, __ATOMIC_RELAXED) == 0
		    : !__atomic_load_n(&g_dc_any, __ATOMIC_RELAXED))
		return;
	urcu_bp_read_lock();
	s = msq_fdt_peek(fd);
	if (s && s != MSQ_FD_IGNORED)
		x->dontcache = writing ? write_dontcache(s, n) : s->st.dontcache && managed_read(s);
	urcu_bp_read_unlock();
}

/* The filesystem of s refused RWF_DONTCACHE: remember, for every fd.
 * Read lock held. */
static void dontcache_refused(int fd, struct msq_fd *s)
{
	msq_probe_dc_learn(s->dev, MSQ_DC_NO);
	s->st.dontcache = false;
	__atomic_store_n(&s->wdc, MSQ_DC_NO, __ATOMIC_RELAXED);
	msq_debug("fd %d: RWF_DONTCACHE refused by this filesystem", fd);
}

/* Where a transfer at the file position went, from the estimate d->next
 * and the fd's position: false if fd no longer holds s's file.  Checked
 * only when something is due, about once per chunk. */
static bool file_position(int fd, const struct msq_fd *s, const struct msq_dir *d, uint64_t n,
			  uint64_t *off)
{
	uint64_t end = d->next + n;
	off_t pos = sys_lseek_cur(fd);
	struct stat st;

	if (pos < 0 || fstat(fd, &st) < 0 || st.st_dev != s->dev || st.st_ino != s->ino)
		return false;
	/* stdio's fwrite leaves up to a buffer in the FILE: the fd's position
	 * then lags the estimate a little (fread's runs ahead, which the run
	 * takes as going on). */
	if ((uint64_t)pos == end || (uint64_t)pos < n ||
	    ((uint64_t)pos < end && end - (uint64_t)pos <= MSQ_SEQ_SLACK))
		*off = end - n;
	else
		*off = (uint64_t)pos - n;
	return true;
}

void msq_fds_end(const struct msq_xfer *x, int64_t off, int64_t rc)
{
	uint64_t n = rc > 0 ? (uint64_t)rc : 0, at;
	struct msq_fd *s;
	struct msq_dir *d;
	MSQ_PROTECT_ERRNO;

	urcu_bp_read_lock();
	s = msq_fdt_peek(x->fd);
	if (!s || s == MSQ_FD_IGNORED)
		goto out;
	if (x->refused)
		dontcache_refused(x->fd, s);
	if (!n || !managed(s, x->writing))
		goto out;
	/* A load and a store, not a locked addition (this runs for every
	 * fwrite of pg_dump's rows): threads racing on one fd may lose an
	 * update of the count, as they may of d->next. */
	__atomic_store_n(&s->c.streamed, __atomic_load_n(&s->c.streamed, __ATOMIC_RELAXED) + n,
			 __ATOMIC_RELAXED);
	/* Counted only up to write_free(): write_behind_due() asks no more. */
	if (x->writing && __atomic_load_n(&g_wr_bytes, __ATOMIC_RELAXED) < write_free())
		__atomic_add_fetch(&g_wr_bytes, n, __ATOMIC_RELAXED);
	d = x->writing ? &s->st.wr : &s->st.rd;
	/* Most calls continue a run with nothing due: move the cursor and
	 * go.  (Two threads racing here lose an update: a run restarts.) */
	at = off >= 0 ? (uint64_t)off : d->next;
	if (msq_run_quiet(d, at, at + n)) {
		d->next = at + n;
		goto out;
	}
	/* Something is due: one thread at a time.  (No owner check, a getpid
	 * syscall, on this path, which random readers take at every call: a
	 * vfork child, which may only _exit or exec, that reads anyway moves
	 * the cursors as its parent would, with no lock, allocation or
	 * daemon involved.) */
	if (__atomic_exchange_n(&s->busy, 1, __ATOMIC_ACQUIRE))
		goto out;
	msq_stats_streamed(s);
	if (off < 0 && !file_position(x->fd, s, d, n, &at)) {
		/* fd reused behind our back (stdio's fclose): forget it. */
		__atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
		urcu_bp_read_unlock();
		if (msq_fdt_cas(x->fd, s, NULL))
			retire_state(s);
		return;
	}
	{
		struct fd_arg a = { x->fd, s };
		struct msq_run_ctx c = run_ctx(&a);

		msq_run_advance(&c, &s->st, d, at, at + n, x->writing);
	}
	__atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
out:
	urcu_bp_read_unlock();
}

bool msq_fds_at_least(int fd, uint64_t bytes)
{
	struct msq_fd *s;
	bool large = false;

	urcu_bp_read_lock();
	s = msq_fdt_peek(fd);
	if (s && s != MSQ_FD_IGNORED)
		large = s->size >= bytes;
	urcu_bp_read_unlock();
	return large;
}

/* ---- advice ------------------------------------------------------------ */

void msq_fds_advise(int fd, int advice)
{
	unsigned add = 0;
	struct msq_fd *s;

	switch (advice) {
	case POSIX_FADV_SEQUENTIAL:
		if (msq_fds_mode != MSQ_READ_ADVISED && msq_fds_mode != MSQ_READ_ALL)
			return;
		add = F_SEQ;
		break;
	case POSIX_FADV_NOREUSE:
		add = F_NOREUSE;
		break;
	case POSIX_FADV_NORMAL:
	case POSIX_FADV_RANDOM:
	case POSIX_FADV_WILLNEED:
		add = F_STOPPED; /* the program will reread: hands off */
		break;
	default:
		return;
	}
	s = msq_fdt_peek(fd);
	/* Not looked at yet, or left alone by "all" mode until advised
	 * (unadvised_skip): look (again) now. */
	if (!s || (s == MSQ_FD_IGNORED && (add & (F_SEQ | F_NOREUSE)))) {
		if (add == F_STOPPED && msq_fds_mode != MSQ_READ_ALL)
			return;
		/* The first file this process would manage on advice: the
		 * daemon's policy for its cgroup first (once), which may turn
		 * the read path off.  Only here, in posix_fadvise: read() and
		 * write() never wait for the daemon. */
		msq_daemon_ask_policy();
		if (add != F_STOPPED && !managed_by_advice(add))
			return;
		s = classify(fd, add);
		if (s && s != MSQ_FD_IGNORED)
			return;
	}
	if (!s || s == MSQ_FD_IGNORED)
		return;
	urcu_bp_read_lock();
	s = msq_fdt_peek(fd);
	if (s && s != MSQ_FD_IGNORED) {
		/* Advice replaces the previous one, as in the kernel. */
		if (add == F_STOPPED)
			__atomic_and_fetch(&s->flags, ~(unsigned)(F_SEQ | F_NOREUSE), __ATOMIC_RELAXED);
		else
			__atomic_and_fetch(&s->flags, ~(unsigned)F_STOPPED, __ATOMIC_RELAXED);
		__atomic_or_fetch(&s->flags, add, __ATOMIC_RELAXED);
	}
	urcu_bp_read_unlock();
}

/* ---- fd lifetime ------------------------------------------------------- */

/* How long the last run of a direction must be to be a stream to drop
 * behind at close (unless the program said NOREUSE).  A shorter run is a
 * small file, which "all" mode leaves alone when reading: copies of many
 * small files would otherwise start the writeback of each one at its
 * close, in the program's time.  On a database's file (F_RWDATA) a run is
 * a stream only once it is longer than the lag, as it is while the file
 * is open: a range scan it just read, it may read again. */
static uint64_t stream_min(const struct msq_fd *s)
{
	return (s->flags & F_RWDATA) ? msq_cfg.policy.lag + CHUNK : MSQ_RUN_MIN;
}

/* Before fd is closed: a last drop of what its streams brought in. */
static void final_drop(int fd, struct msq_fd *s)
{
	bool noreuse = s->flags & F_NOREUSE;
	bool rd = managed_read(s) && msq_run_is_stream(&s->st.rd, stream_min(s), noreuse) &&
		  !s->st.dontcache;
	bool wr = managed_write(s) && msq_run_is_stream(&s->st.wr, stream_min(s), noreuse) &&
		  s->st.wr.next > s->st.wr.done && write_behind_due(s);
	bool retry = managed_read(s) && s->st.rd.nretry;
	struct fd_arg a = { fd, s };
	struct msq_run_ctx c;
	struct stat st;

	if (!(rd || wr || retry) || s->inherited || !s->st.snap_ok || fstat(fd, &st) < 0 ||
	    st.st_dev != s->dev || st.st_ino != s->ino)
		return;
	c = run_ctx(&a);
	if (managed_read(s)) {
		off_t pos = rd ? sys_lseek_cur(fd) : -1;
		uint64_t end = s->st.rd.next;

		if (pos >= 0 && (uint64_t)pos > s->st.rd.run_start &&
		    (uint64_t)pos <= s->st.rd.next + MSQ_SEQ_SLACK)
			end = (uint64_t)pos;
		msq_run_final_read(&c, &s->st, end, rd);
	}
	if (wr)
		msq_run_final_write(&c, &s->st);
}

/* fd is about to be closed (or replaced by dup2): drop its state. */
void msq_fds_forget(int fd, bool drop)
{
	struct msq_fd *s = msq_fdt_peek(fd);
	MSQ_PROTECT_ERRNO;

	if (!s)
		return;
	/* A vfork child closes its own fd, not the parent's: it leaves the
	 * parent's state alone.  An ignored fd's mark it may clear, and the
	 * state of an fd that moved less than MSQ_RUN_MIN, which has nothing
	 * to lose: the parent then looks at the fd again.  Most closed files
	 * are such; they spare the getpid (tar -x makes a dozen syscalls or
	 * more per small file: one more is not free). */
	if (s != MSQ_FD_IGNORED && __atomic_load_n(&s->c.streamed, __ATOMIC_RELAXED) >= MSQ_RUN_MIN &&
	    !msq_is_owner())
		return;
	if (s != MSQ_FD_IGNORED && drop && !__atomic_exchange_n(&s->busy, 1, __ATOMIC_ACQUIRE)) {
		final_drop(fd, s);
		__atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
	}
	if (msq_fdt_cas(fd, s, NULL) && s != MSQ_FD_IGNORED) {
		char b[32];

		if (s->advised)
			msq_debug("fd %d: closed; %s dropped behind it (chunks advised DONTNEED)", fd,
				  msq_format_size(s->advised, b, sizeof(b)));
		msq_stats_record(fd, s);
		retire_state(s);
	}
}

/* newfd now refers to what oldfd does: the same file description, so the
 * same advice; its own cursors. */
void msq_fds_duplicated(int oldfd, int newfd)
{
	struct msq_fd *s;
	unsigned fl = 0;
	bool have = false;
	MSQ_PROTECT_ERRNO;

	if (!msq_is_owner())
		return;
	urcu_bp_read_lock();
	s = msq_fdt_peek(oldfd);
	if (s && s != MSQ_FD_IGNORED) {
		fl = s->flags & (F_SEQ | F_NOREUSE | F_STOPPED);
		have = true;
	}
	urcu_bp_read_unlock();
	if (!have)
		return;
	classify(newfd, fl);
}

/* ---- fork and policy ----------------------------------------------------- */

static void mark_inherited(int fd, struct msq_fd *v, void *arg)
{
	(void)fd;
	(void)arg;
	if (v != MSQ_FD_IGNORED) {
		v->inherited = true;
		v->busy = 0; /* a thread of the parent may have held it */
		memset(&v->c, 0, sizeof(v->c)); /* the child's own figures */
		v->totalled = 0;
	}
}

void msq_readpath_atfork_child(void)
{
	msq_fdt_each(0, MSQ_FDT_MAX - 1, mark_inherited, NULL);
	msq_stats_atfork_child();
	g_wr_bytes = 0;
}

void msq_readpath_set_mode(enum msq_read_mode m)
{
	if (m != __atomic_load_n(&msq_fds_mode, __ATOMIC_ACQUIRE))
		msq_debug("read path: %s (the cgroup's policy from madvseqd)", msq_read_mode_name(m));
	__atomic_store_n(&msq_fds_mode, m, __ATOMIC_RELEASE);
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read path's per-fd streams: what a read() or write() stream brought
 * into the page cache, and dropping it behind the stream.  The wrappers
 * that feed them are in readpath.c.
 *
 * Mechanism.  Pages a stream brought in are dropped with
 * posix_fadvise(DONTNEED) (the raw syscall: our own wrapper must not see
 * it) in 2 MiB-aligned chunks lagging the stream's offset, minus the chunks
 * a residency snapshot (cachestat(2), taken ahead of the stream) found
 * cached before.  preadv2(RWF_DONTCACHE) keeps cached pages without a
 * snapshot, but cat streamed a cold 1 GiB file with it at a fifth of the
 * speed of plain reads with fadvise behind on ext4 (6.18; 128 KiB reads:
 * the kernel drops each folio as the read completes, synchronously), far
 * from the 0.98x target.  So it is used only with MADVSEQ_DONTCACHE=1
 * (where the filesystem takes it; probed per st_dev, EOPNOTSUPP falls back
 * to the program's own call).  Files the process may not write have no
 * reliable snapshot (cachestat fails with EPERM, mincore says "all
 * resident"): there, as on the mmap path, the shim drops behind without
 * one, and pages cached before may be dropped too.
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
 * runs in the writer's own time (about 0.1 ms per MiB here), where the
 * kernel alone would leave it to its flusher threads: so a process's first
 * WB_FREE bytes of writes (MADVSEQ_WRITE_FREE; four lags, 64 MiB, by
 * default) get none of it (NOREUSE fds excepted): about what a writer's
 * output may occupy anyway with write-behind on (WB_AHEAD ahead of the
 * oldest unwritten chunk plus the lag behind, three lags), and a lag more.
 * Programs that write less, most of them, pay nothing for write-behind;
 * cp or tar -x of a large tree pay from there on.  madvseq run sets it to
 * 0: a person who wraps a backup means all of its output, and a tree of
 * files closed before the process reached four lags would keep them.
 */
#include "fdstream.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <urcu/urcu-bp.h>

#include "../common/config.h"
#include "../common/extents.h"
#include "../common/fault.h"
#include "../common/sys.h"
#include "daemon_client.h"
#include "fdtable.h"
#include "objpool.h"
#include "readpath.h"

#define CHUNK MSQ_CHUNK
/* A residency snapshot covers at least this much ahead of a stream, and
 * is extended when the stream gets within half of it: it must stay ahead
 * of readahead, which SEQUENTIAL doubles and which may have two windows in
 * flight, so it is 8 times the device's read_ahead_kb when that is more
 * (8 MiB here: a 64 MiB snapshot). */
#define SNAP_AHEAD_MIN (UINT64_C(16) << 20)
#define SNAP_AHEAD (s->snap_ahead)
/* A run is a stream, worth a snapshot, once it is this long: random
 * readers never pay for one.  (What a run read before its snapshot was
 * taken counts as cached before: at most a chunk per run stays.) */
#define RUN_MIN (UINT64_C(256) << 10)
/* A forward gap up to this still continues a run (interleaved readers of
 * one shared offset, skipped headers). */
#define SEQ_SLACK CHUNK

/* F_RWDATA: opened read-write, holding data, with no advice (a database's
 * file, see is_rwdata()): its long read runs are streams, its writes
 * are left alone, and so are runs shorter than a lag at close. */
enum { F_SEQ = 1, F_NOREUSE = 2, F_STOPPED = 4, F_CANREAD = 8, F_CANWRITE = 16, F_RWDATA = 32 };
enum { DC_UNKNOWN, DC_YES, DC_NO };

/* Chunk ranges a snapshot may hold (cached and not cached chunks
 * alternating over the window): more turns the snapshot off for the fd,
 * which then drops nothing (fail safe). */
#define PRE_MAX 64

/* Dirty chunks behind a reader, dropped again once clean (see
 * drop_range()); more are merged with their neighbours or given up. */
#define RETRY_MAX 8
struct retry {
	uint64_t lo, hi; /* chunk-aligned */
	uint64_t due;    /* retried once the fd's streamed count reaches this */
	unsigned tries;
};
#define RETRY_TRIES 8

/* One direction (reads or writes) of a stream. */
struct dir {
	uint64_t run_start; /* first offset of the current sequential run */
	uint64_t next;      /* where the next sequential access starts */
	uint64_t done;      /* chunks below this are dropped (or left on purpose) */
	uint64_t kicked;    /* writes: writeback started below this */
	uint64_t backlog;   /* writes: below this, written before write-behind was due */
	uint64_t snap_lo, snap_hi;
	uint64_t act;       /* below this, a sequential access needs no work */
	struct msq_extents pre; /* chunks cached before the stream reached them */
	struct msq_range pre_v[PRE_MAX]; /* its storage: no malloc on this path */
	struct retry retry[RETRY_MAX];
	unsigned nretry;
	bool started;
	bool snapping;      /* pre is valid for this run, up to snap_hi */
};

struct msq_fd {
	dev_t dev;
	ino_t ino;
	unsigned flags;
	int busy;       /* one thread at a time updates the state */
	bool snap_ok;   /* may drop: snapshots work, or the file is blind */
	bool blind;     /* no residency snapshot possible (see the top) */
	bool dontcache; /* reads go through preadv2(RWF_DONTCACHE) */
	bool inherited; /* copied by fork: no final drop at close */
	int wdc;        /* writes through RWF_DONTCACHE: DC_UNKNOWN until looked at */
	uint64_t snap_ahead;
	uint64_t size;     /* the file's size when it was classified */
	uint64_t advised;  /* bytes given to fadvise(DONTNEED), for MADVSEQ_DEBUG */
	struct msq_file_counts c; /* for MADVSEQ_STATS */
	uint64_t totalled; /* of c.streamed, added to g_tot.streamed (total_streamed) */
	struct msq_fd *retired_next; /* on the list of states awaiting their grace period */
	struct dir rd, wr;
};

enum msq_read_mode msq_fds_mode; /* MSQ_READ_OFF until msq_readpath_init() */
int msq_fds_dontcache = -1;       /* MADVSEQ_DONTCACHE (fdstream.h) */
static bool g_dc_any;             /* some fd was set up for RWF_DONTCACHE */

/* Filesystems that refused RWF_DONTCACHE (or took it), by st_dev. */
#define NDEV 32
static struct {
	dev_t dev;
	int state;
} g_devs[NDEV];

/* ---- the state ------------------------------------------------------- */

static uint64_t floor_chunk(uint64_t x) { return x & ~(CHUNK - 1); }
static uint64_t ceil_chunk(uint64_t x) { return (x + CHUNK - 1) & ~(CHUNK - 1); }

static int dev_state(dev_t dev)
{
	for (int i = 0; i < NDEV; i++)
		if (__atomic_load_n(&g_devs[i].state, __ATOMIC_ACQUIRE) != DC_UNKNOWN &&
		    g_devs[i].dev == dev)
			return g_devs[i].state;
	return DC_UNKNOWN;
}

static void dev_learn(dev_t dev, int state)
{
	for (int i = 0; i < NDEV; i++) {
		int unknown = DC_UNKNOWN;

		if (__atomic_load_n(&g_devs[i].state, __ATOMIC_ACQUIRE) != DC_UNKNOWN) {
			if (g_devs[i].dev == dev)
				return;
			continue;
		}
		g_devs[i].dev = dev;
		if (__atomic_compare_exchange_n(&g_devs[i].state, &unknown, state, false,
						__ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return;
	}
	/* Full: the probe is simply repeated on further filesystems. */
}

/* Readahead of the device under dev, from sysfs, cached per device;
 * 0 if unknown. */
static struct {
	dev_t dev;
	uint64_t ra;
	int set;
} g_ra[NDEV];

static uint64_t read_ra(const char *path)
{
	char buf[32];
	int fd = msq_sys_open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? msq_sys_read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		msq_sys_close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return strtoull(buf, NULL, 10) << 10;
}

static uint64_t device_readahead(dev_t dev)
{
	char path[96];
	uint64_t ra;
	int i;

	for (i = 0; i < NDEV && __atomic_load_n(&g_ra[i].set, __ATOMIC_ACQUIRE); i++)
		if (g_ra[i].dev == dev)
			return g_ra[i].ra;
	/* Filesystems name their bdi by st_dev; a partition's queue is its disk's. */
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", major(dev), minor(dev));
	if (!(ra = read_ra(path))) {
		snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../queue/read_ahead_kb", major(dev),
			 minor(dev));
		ra = read_ra(path);
	}
	if (i < NDEV) { /* racing threads may both add it: harmless */
		g_ra[i].dev = dev;
		g_ra[i].ra = ra;
		__atomic_store_n(&g_ra[i].set, 1, __ATOMIC_RELEASE);
	}
	return ra;
}

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

static off_t sys_lseek_cur(int fd)
{
	return msq_sys_lseek(fd, 0, SEEK_CUR);
}

static int sys_fadvise(int fd, uint64_t off, uint64_t len, int advice)
{
	if (MSQ_FAULT("madvseq/readpath/fadvise"))
		return -EIO;
	return msq_sys_fadvise(fd, off, len, advice);
}

/* Starts writeback of [off, off + len); never waits for it. */
static void start_writeback(int fd, uint64_t off, uint64_t len)
{
	if (!MSQ_FAULT("madvseq/readpath/sync_file_range"))
		MSQ_SYSCALL(SYS_sync_file_range, fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE);
}

/* Debug output: [lo, hi) held `pages` cached pages when the snapshot
 * looked, and is kept. */
static void note_kept(int fd, const struct dir *d, uint64_t lo, uint64_t hi, uint64_t pages)
{
	msq_debug("fd %d: %" PRIu64 "M-%" PRIu64 "M cached before the stream came (%" PRIu64
		  " pages; reader at %" PRIu64 "M): kept", fd, lo >> 20, hi >> 20, pages,
		  d->next >> 20);
}

/* Adds the chunks of [lo, hi) that hold cached pages to d->pre.  eof: the
 * file's size if the caller just read it (no page past it can be cached
 * now), else UINT64_MAX; the window counts as looked at up to hi either way,
 * as it always did for the part past the end.  Looked at, a window too
 * large for the per-chunk loop costs one cachestat call when nothing in
 * it is cached, or all of it is, or it is one chunk (a small file). */
static void snapshot(int fd, struct msq_fd *s, struct dir *d, uint64_t lo, uint64_t hi,
		     uint64_t eof)
{
	uint64_t end = eof < hi ? ceil_chunk(eof) : hi, page = (uint64_t)getpagesize(), pages;
	struct msq_cachestat_range all;
	struct msq_cachestat cs;

	if (s->blind || end <= lo) { /* nothing known, or nothing there: nothing kept */
		d->snap_hi = hi;
		return;
	}
	all = (struct msq_cachestat_range){ lo, end - lo };
	pages = ((eof < end ? eof : end) - lo + page - 1) / page; /* the window's pages before EOF */
	if (msq_cachestat(fd, &all, &cs) == 0 &&
	    (cs.nr_cache == 0 || cs.nr_cache >= pages || end - lo == CHUNK)) {
		if (cs.nr_cache && msq_extents_add(&d->pre, lo, end) < 0)
			s->snap_ok = false; /* from now on: drop nothing */
		else
			d->snap_hi = hi;
		if (cs.nr_cache)
			note_kept(fd, d, lo, end, cs.nr_cache);
		return;
	}
	for (uint64_t c = lo; c < end && s->snap_ok; c += CHUNK) {
		struct msq_cachestat_range r = { c, CHUNK };

		if (msq_cachestat(fd, &r, &cs) < 0 ||
		    (cs.nr_cache && msq_extents_add(&d->pre, c, c + CHUNK) < 0))
			s->snap_ok = false; /* from now on: drop nothing */
		else if (cs.nr_cache)
			note_kept(fd, d, c, c + CHUNK, cs.nr_cache);
	}
	if (s->snap_ok)
		d->snap_hi = hi;
}

/* Starts the snapshot of the current run at chunk lo (eof: as for
 * snapshot()). */
static void snap_start(int fd, struct msq_fd *s, struct dir *d, uint64_t lo, uint64_t eof)
{
	msq_extents_clear(&d->pre);
	d->snap_lo = d->snap_hi = lo;
	d->snapping = true;
	snapshot(fd, s, d, lo, lo + SNAP_AHEAD, eof);
}

/* A run starts at off.  snap_now: nothing was read yet (the fd was just
 * classified, and eof is the file's size), so the snapshot is taken right
 * away, and nothing is due before the first chunk boundary: the first
 * transfers take after()'s fast path.  Otherwise the next transfer goes
 * through advance(), which sets that point. */
static void new_run(int fd, struct msq_fd *s, struct dir *d, uint64_t off, bool snap_now,
		    uint64_t eof)
{
	d->run_start = d->next = off;
	/* Chunks a past run left dirty are forgotten: this run may read them
	 * again, and its snapshot then rightly finds them cached before. */
	d->nretry = 0;
	d->done = ceil_chunk(off);
	d->kicked = d->backlog = floor_chunk(off);
	d->started = true;
	d->snapping = false;
	d->act = off + 1;
	if (snap_now && s->snap_ok && !s->dontcache) {
		snap_start(fd, s, d, floor_chunk(off), eof);
		if (s->snap_ok)
			d->act = floor_chunk(off) + CHUNK;
	}
}

/* Process totals (readpath.h).  g_tot.streamed lags the fds' own counts:
 * see total_streamed(). */
static struct msq_read_totals g_tot;

/* Adds what fd state s streamed since the last call to g_tot.streamed.
 * The per-call bookkeeping (msq_fds_after) counts only s->c.streamed:
 * a locked addition to a process-wide total on every fwrite was a third
 * of the library's cost for small ones.  Called by the thread that holds
 * s (take) or forgets it. */
static uint64_t untotalled(const struct msq_fd *s)
{
	uint64_t now = __atomic_load_n(&s->c.streamed, __ATOMIC_RELAXED);
	uint64_t done = __atomic_load_n(&s->totalled, __ATOMIC_RELAXED);

	return now > done ? now - done : 0;
}

static void total_streamed(struct msq_fd *s)
{
	uint64_t n = untotalled(s);

	if (n) {
		__atomic_add_fetch(&g_tot.streamed, n, __ATOMIC_RELAXED);
		/* (msq_readpath_totals reads it from other threads) */
		__atomic_store_n(&s->totalled, s->totalled + n, __ATOMIC_RELAXED);
	}
}

static void count_advised(struct msq_fd *s, const struct dir *d, uint64_t n)
{
	s->advised += n;
	__atomic_add_fetch(&s->c.dropped, n, __ATOMIC_RELAXED);
	__atomic_add_fetch(&g_tot.dropped, n, __ATOMIC_RELAXED);
	if (d == &s->wr) {
		__atomic_add_fetch(&s->c.written, n, __ATOMIC_RELAXED);
		__atomic_add_fetch(&g_tot.written, n, __ATOMIC_RELAXED);
	}
}

/*
 * Records of closed files for MADVSEQ_STATS: slots claimed with one atomic
 * increment (close() may run in a signal handler), the rest summed up as
 * "other files".
 */
/* The file's name for the stats file: what /proc/self/fd says, control
 * characters made '?' (one record a line); "?" when fd no longer holds
 * s's file (reused behind our back, as after stdio's fclose).  Looked up
 * only for the files that get a record of their own: tar -x of 400 small
 * files paid a readlink for each. */
static void name_of(int fd, const struct msq_fd *s, char *buf, size_t len)
{
	char link[64];
	struct stat st;
	long n;

	if (fstat(fd, &st) < 0 || st.st_dev != s->dev || st.st_ino != s->ino) {
		snprintf(buf, len, "?");
		return;
	}
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = MSQ_SYSCALL(SYS_readlinkat, AT_FDCWD, link, buf, len - 1);
	if (n < 0)
		n = 0;
	if (n == (long)len - 1) {
		/* Cut short: not in the middle of a UTF-8 sequence. */
		long i = n - 1;
		unsigned char lead;

		while (i > 0 && ((unsigned char)buf[i] & 0xc0) == 0x80)
			i--;
		lead = (unsigned char)buf[i];
		if (lead >= 0xc0 && n - i < (lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2))
			n = i;
	}
	buf[n] = '\0';
	for (long i = 0; i < n; i++)
		if ((unsigned char)buf[i] < 32 || buf[i] == 127)
			buf[i] = '?';
}

#define FILE_RECORDS 64
static struct {
	struct msq_file_counts c;
	char path[128];
	int ready;
} g_rec[FILE_RECORDS];
static unsigned g_nrec;
static struct msq_file_counts g_rec_other;

static void record_file(int fd, const struct msq_fd *s)
{
	unsigned i;

	if (!s->c.streamed || !msq_cfg.stats_path[0])
		return;
	i = __atomic_fetch_add(&g_nrec, 1, __ATOMIC_RELAXED);
	if (i >= FILE_RECORDS) {
		__atomic_add_fetch(&g_rec_other.streamed, s->c.streamed, __ATOMIC_RELAXED);
		__atomic_add_fetch(&g_rec_other.dropped, s->c.dropped, __ATOMIC_RELAXED);
		__atomic_add_fetch(&g_rec_other.kept, s->c.kept, __ATOMIC_RELAXED);
		__atomic_add_fetch(&g_rec_other.written, s->c.written, __ATOMIC_RELAXED);
		return;
	}
	g_rec[i].c = s->c;
	name_of(fd, s, g_rec[i].path, sizeof(g_rec[i].path));
	__atomic_store_n(&g_rec[i].ready, 1, __ATOMIC_RELEASE);
}

struct each_arg {
	void (*fn)(const char *, const struct msq_file_counts *, void *);
	void *arg;
};

static void each_open(int fd, struct msq_fd *v, void *arg)
{
	struct each_arg *a = arg;
	char path[128];

	if (v != MSQ_FD_IGNORED && v->c.streamed) {
		name_of(fd, v, path, sizeof(path));
		a->fn(path[0] ? path : "?", &v->c, a->arg);
	}
}

void msq_readpath_each_file(void (*fn)(const char *path, const struct msq_file_counts *c,
				       void *arg),
			    void *arg)
{
	struct each_arg a = { fn, arg };
	unsigned n = __atomic_load_n(&g_nrec, __ATOMIC_RELAXED);

	for (unsigned i = 0; i < n && i < FILE_RECORDS; i++)
		if (__atomic_load_n(&g_rec[i].ready, __ATOMIC_ACQUIRE))
			fn(g_rec[i].path[0] ? g_rec[i].path : "?", &g_rec[i].c, arg);
	if (g_rec_other.streamed)
		fn("(other files)", &g_rec_other, arg);
	if (msq_fdt_used()) {
		urcu_bp_read_lock();
		msq_fdt_each(0, MSQ_FDT_MAX - 1, each_open, &a);
		urcu_bp_read_unlock();
	}
}

static void add_untotalled(int fd, struct msq_fd *v, void *arg)
{
	(void)fd;
	if (v != MSQ_FD_IGNORED)
		*(uint64_t *)arg += untotalled(v);
}

void msq_readpath_totals(struct msq_read_totals *t)
{
	uint64_t untotalled = 0;

	/* No fd ever looked at: nothing to add, and no urcu-bp registration
	 * of this thread (every process ends here at exit). */
	if (msq_fdt_used()) {
		urcu_bp_read_lock();
		msq_fdt_each(0, MSQ_FDT_MAX - 1, add_untotalled, &untotalled);
		urcu_bp_read_unlock();
	}
	t->files = __atomic_load_n(&g_tot.files, __ATOMIC_RELAXED);
	t->streamed = __atomic_load_n(&g_tot.streamed, __ATOMIC_RELAXED) + untotalled;
	t->dropped = __atomic_load_n(&g_tot.dropped, __ATOMIC_RELAXED);
	t->kept = __atomic_load_n(&g_tot.kept, __ATOMIC_RELAXED);
	t->written = __atomic_load_n(&g_tot.written, __ATOMIC_RELAXED);
}

/*
 * Dirty pages behind a reader.  fadvise(DONTNEED) starts their writeback
 * and drops only clean pages, so a chunk the program (or another) dirtied
 * after the stream read it stays, clean a moment later, for the LRU to
 * find: PostgreSQL's backends write back the hint bits they set on the
 * pages a COPY scans, and a scan of a freshly loaded table left 50-80 MiB
 * behind the reader that way, against the lag's 16.  So a chunk left
 * dirty or under writeback is remembered and advised again a lag of
 * transfers later, once cachestat says it is clean; one still dirty after
 * RETRY_TRIES such looks is given up.  What a clean chunk keeps after its
 * second advice is mapped or in use: left alone.
 */
static void retry_add(struct dir *d, uint64_t lo, uint64_t hi, uint64_t due)
{
	for (unsigned i = 0; i < d->nretry; i++) {
		struct retry *r = &d->retry[i];

		if (lo <= r->hi && hi >= r->lo) { /* touching: one range, due when the older is */
			r->lo = lo < r->lo ? lo : r->lo;
			r->hi = hi > r->hi ? hi : r->hi;
			return;
		}
	}
	if (d->nretry == RETRY_MAX) { /* full: the oldest is given up */
		memmove(&d->retry[0], &d->retry[1], (RETRY_MAX - 1) * sizeof(d->retry[0]));
		d->nretry--;
	}
	d->retry[d->nretry++] = (struct retry){ lo, hi, due, 0 };
}

/* Did fadvise(DONTNEED) of [lo, hi) leave dirty or writeback pages? */
static bool left_dirty(int fd, uint64_t lo, uint64_t hi)
{
	struct msq_cachestat_range r = { lo, hi - lo };
	struct msq_cachestat cs;

	return msq_cachestat(fd, &r, &cs) == 0 && (cs.nr_dirty || cs.nr_writeback);
}

/* Advises the chunks of r that are clean now, from its start up to the
 * first that is still dirty; returns where r goes on (r->hi: all done). */
static uint64_t retry_range(int fd, struct retry *r)
{
	uint64_t c, from = r->lo;

	for (c = r->lo; c < r->hi; c += CHUNK) {
		struct msq_cachestat_range q = { c, CHUNK };
		struct msq_cachestat cs;

		if (msq_cachestat(fd, &q, &cs) < 0) {
			c = r->hi; /* cannot tell: given up */
			break;
		}
		if (cs.nr_dirty || cs.nr_writeback)
			break;
	}
	if (c > from)
		sys_fadvise(fd, from, c - from, POSIX_FADV_DONTNEED); /* counted the first time */
	return c;
}

/* Retries the remembered chunks that are due (all of them when `all`,
 * at close, once). */
static void retry_due(int fd, struct msq_fd *s, struct dir *d, bool all)
{
	uint64_t now = __atomic_load_n(&s->c.streamed, __ATOMIC_RELAXED);
	unsigned i = 0;

	while (i < d->nretry) {
		struct retry *r = &d->retry[i];
		uint64_t c;

		if (!all && now < r->due) {
			i++;
			continue;
		}
		c = retry_range(fd, r);
		if (c == r->lo && ++r->tries >= RETRY_TRIES) {
			c += CHUNK; /* dirty all along: its first chunk is given up */
			r->tries = 0;
		} else if (c > r->lo) {
			r->tries = 0;
		}
		r->lo = c;
		r->due = now + msq_cfg.policy.lag;
		if (all || r->lo >= r->hi) {
			memmove(r, r + 1, (d->nretry - i - 1) * sizeof(*r));
			d->nretry--;
		} else {
			i++;
		}
	}
}

/* fadvise(DONTNEED) of the chunks of [from, to) not cached before. */
static void drop_range(int fd, struct msq_fd *s, struct dir *d, uint64_t from, uint64_t to)
{
	for (uint64_t c = from; c < to; c += CHUNK) {
		uint64_t e = c + CHUNK;

		if (msq_extents_overlaps(&d->pre, c, e)) {
			__atomic_add_fetch(&s->c.kept, CHUNK, __ATOMIC_RELAXED);
			__atomic_add_fetch(&g_tot.kept, CHUNK, __ATOMIC_RELAXED);
			continue;
		}
		while (e < to && !msq_extents_overlaps(&d->pre, e, e + CHUNK))
			e += CHUNK;
		if (sys_fadvise(fd, c, e - c, POSIX_FADV_DONTNEED) == 0) {
			count_advised(s, d, e - c);
			if (!s->blind && left_dirty(fd, c, e))
				retry_add(d, c, e,
					  __atomic_load_n(&s->c.streamed, __ATOMIC_RELAXED) +
						  msq_cfg.policy.lag);
		}
		c = e - CHUNK;
	}
}

/*
 * Writes: fadvise(DONTNEED) skips dirty and writeback pages, so chunks are
 * dropped in order once cachestat says they are clean; returns how far.
 * A writer more than WB_AHEAD past its oldest unwritten chunk waits for it
 * (polling: waiting with sync_file_range would take a writeback error
 * away from the program's own fsync), which bounds its cache footprint
 * as dd oflag=direct would, without changing what write() returns.
 */
#define WB_AHEAD (2 * msq_cfg.policy.lag)
#define WB_POLL_NS 1000000L
#define WB_POLLS 200 /* at most 200 ms per call */
#define WB_FREE (msq_cfg.write_free)

/* Bytes this process wrote through managed fds (reset in a fork child). */
static uint64_t g_wr_bytes;

/* Is write-behind due for fd's writes (see "Write-behind" above)? */
static bool write_behind_due(const struct msq_fd *s)
{
	return (s->flags & F_NOREUSE) || __atomic_load_n(&g_wr_bytes, __ATOMIC_RELAXED) >= WB_FREE;
}

static uint64_t drop_written(int fd, struct msq_fd *s, struct dir *d, uint64_t target)
{
	uint64_t c = d->done;
	int polls = 0;

	while (c < target) {
		struct msq_cachestat_range r = { c, CHUNK };
		struct msq_cachestat cs;

		if (!msq_extents_overlaps(&d->pre, c, c + CHUNK)) {
			if (msq_cachestat(fd, &r, &cs) < 0)
				return target; /* cannot tell: leave it to the kernel */
			if (cs.nr_dirty || cs.nr_writeback) {
				/* The backlog's writeback was started at once:
				 * its chunks go when clean, nobody waits. */
				if (target - c <= WB_AHEAD || c < d->backlog || polls++ == WB_POLLS)
					return c;
				if (polls == 1)
					start_writeback(fd, c, CHUNK);
				MSQ_SYSCALL(SYS_nanosleep, &(struct timespec){ 0, WB_POLL_NS }, NULL);
				continue;
			}
			if (cs.nr_cache && sys_fadvise(fd, c, CHUNK, POSIX_FADV_DONTNEED) == 0)
				count_advised(s, d, CHUNK);
		}
		c += CHUNK;
	}
	return c;
}

/*
 * A writer's last chunks, at close: drops those already clean (written back
 * since write-behind started them) and leaves dirty ones to the kernel.
 * fadvise(DONTNEED) would start their writeback first, in the program's
 * time, and still not drop them: they are dirty until it completes.
 */
static void drop_clean(int fd, struct msq_fd *s, struct dir *d, uint64_t from, uint64_t to)
{
	for (uint64_t c = from; c < to; c += CHUNK) {
		struct msq_cachestat_range r = { c, CHUNK };
		struct msq_cachestat cs;

		if (msq_extents_overlaps(&d->pre, c, c + CHUNK) || msq_cachestat(fd, &r, &cs) < 0 ||
		    cs.nr_dirty || cs.nr_writeback || !cs.nr_cache)
			continue;
		if (sys_fadvise(fd, c, CHUNK, POSIX_FADV_DONTNEED) == 0)
			count_advised(s, d, CHUNK);
	}
}

/* The stream moved to [off, end): extend the snapshot, drop behind. */
static void advance(int fd, struct msq_fd *s, struct dir *d, uint64_t off, uint64_t end,
		    bool writing)
{
	uint64_t lag = msq_cfg.policy.lag, target;

	if (!d->started || off < d->next || off > d->next + SEQ_SLACK)
		new_run(fd, s, d, off, false, UINT64_MAX);
	d->next = end;
	/* Until the next chunk boundary (or the run's length reaching RUN_MIN,
	 * or the snapshot's refill point) a sequential access has nothing to
	 * do; after() then only moves d->next. */
	d->act = floor_chunk(end) + CHUNK;
	if ((!writing && s->dontcache) || !s->snap_ok)
		return; /* RWF_DONTCACHE does it, or a snapshot failed: hands off */
	if (!d->snapping) {
		if (end - d->run_start < RUN_MIN) {
			if (d->run_start + RUN_MIN < d->act)
				d->act = d->run_start + RUN_MIN;
			return;
		}
		/* Pages this run read so far are in the chunk at floor(end), or
		 * before it: from here on, the snapshot sees them as cached. */
		if (floor_chunk(end) > d->done)
			d->done = floor_chunk(end);
		snap_start(fd, s, d, floor_chunk(end), UINT64_MAX);
	}
	if (end + SNAP_AHEAD / 2 > d->snap_hi)
		snapshot(fd, s, d, d->snap_hi, floor_chunk(end) + SNAP_AHEAD, UINT64_MAX);
	if (d->snap_hi - SNAP_AHEAD / 2 < d->act)
		d->act = d->snap_hi - SNAP_AHEAD / 2;
	if (writing && !write_behind_due(s))
		return; /* d->kicked and d->done stay: the backlog is taken up once due */
	if (writing && floor_chunk(end) > d->kicked) {
		if (floor_chunk(end) - d->kicked > WB_AHEAD)
			d->backlog = floor_chunk(end);
		start_writeback(fd, d->kicked, floor_chunk(end) - d->kicked);
		d->kicked = floor_chunk(end);
	}
	if (!writing && d->nretry)
		retry_due(fd, s, d, false);
	target = end > lag ? floor_chunk(end - lag) : 0;
	if (target <= d->done)
		return;
	if (writing)
		target = drop_written(fd, s, d, target);
	else
		drop_range(fd, s, d, d->done, target);
	d->done = target;
	if (d->snap_lo + SNAP_AHEAD < target) {
		/* Forget what is behind: keeps the set small on long streams.
		 * (Not on an empty set: msq_extents_remove then memmoves NULL.) */
		if (d->pre.n)
			msq_extents_remove(&d->pre, 0, target);
		d->snap_lo = target;
	}
}

/* Per-fd states: from a lock-free pool (objpool.h), since read() and
 * write() may classify an fd inside a signal handler. */
static struct msq_pool g_states = MSQ_POOL_INIT(sizeof(struct msq_fd));

static struct msq_fd *new_state(void)
{
	struct msq_fd *s = msq_pool_alloc(&g_states);

	if (s) {
		msq_extents_init_fixed(&s->rd.pre, s->rd.pre_v, PRE_MAX);
		msq_extents_init_fixed(&s->wr.pre, s->wr.pre_v, PRE_MAX);
	}
	return s;
}

static void free_state(struct msq_fd *s)
{
	msq_pool_free(&g_states, s);
}

/*
 * States taken out of the fd table are freed after an RCU grace period,
 * RETIRE_BATCH at a time: one urcu_bp_synchronize_rcu() (a membarrier and
 * two sigprocmask calls) per close() cost cp -r of small files dearly.
 * The list is pushed lock-free and taken whole with one exchange.
 */
#define RETIRE_BATCH 32
static struct msq_fd *g_retired;
static unsigned g_nretired;

static void retire_state(struct msq_fd *s)
{
	struct msq_fd *head = __atomic_load_n(&g_retired, __ATOMIC_RELAXED);
	unsigned n = 0;

	total_streamed(s); /* out of the table: msq_readpath_totals no longer sees it */

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

/* Whether this kernel has cachestat(2) (Linux 6.5+) and lets the process
 * call it, learnt from the first fd that answers: 1 yes, -1 no, 0 not yet
 * known. */
static int g_cachestat;

static bool cachestat_works(int fd)
{
	struct msq_cachestat_range r = { 0, 4096 };
	struct msq_cachestat cs;
	int known = __atomic_load_n(&g_cachestat, __ATOMIC_RELAXED);

	if (known)
		return known > 0;
	if (msq_cachestat(fd, &r, &cs) == 0)
		known = 1;
	else if (errno == ENOSYS)
		known = -1;
	else
		return false; /* this fd only (a seccomp filter's EPERM, say) */
	__atomic_store_n(&g_cachestat, known, __ATOMIC_RELAXED);
	return known > 0;
}

/* Would the write-side residency snapshot of fd be truthful?  As with
 * mincore(2), only for files the process may write. */
static bool may_write(int fd, const struct stat *st, int fl)
{
	char path[64];

	if ((fl & O_ACCMODE) != O_RDONLY || st->st_uid == geteuid())
		return true;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	/* faccessat is not one of the calls the library wraps. */
	return faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0;
}

/*
 * Files left alone: read-only files smaller than RUN_MIN unless the program
 * says NOREUSE (a run that short drops nothing, and cp -r or tar of many
 * small files would pay the classification for nothing; cp advises
 * SEQUENTIAL for each).
 */
static bool unadvised_skip(const struct stat *st, int fl, unsigned extra)
{
	if (extra & F_NOREUSE)
		return false;
	return (fl & O_ACCMODE) == O_RDONLY && st->st_size < (off_t)RUN_MIN;
}

/*
 * A file opened for reading and writing that holds data, with no advice,
 * is a database's (or an editor's): what it writes it reads again, and
 * most of its reads are random, with no cursor to drop behind.  But a
 * dump or a full scan reads it from end to end (PostgreSQL's backends
 * read the tables for pg_dump's COPY so, 8 KiB at a time): such a run is
 * a stream like any other.  So its reads are managed, its writes are not,
 * its snapshot waits for a run of RUN_MIN (random readers never pay for
 * one), and at close only a run longer than the lag is dropped (see
 * stream_to_drop()).  An empty one is a new output (rsync writes its copy
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
	if (st.st_size >= (off_t)RUN_MIN && !msq_is_owner())
		return NULL;
	if (!(s = new_state())) {
		msq_fdt_cas(fd, NULL, MSQ_FD_IGNORED);
		return MSQ_FD_IGNORED;
	}
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->size = (uint64_t)st.st_size;
	s->flags = extra | (is_rwdata(&st, fl, extra) ? F_RWDATA : 0);
	s->snap_ahead = ceil_chunk(8 * device_readahead(st.st_dev));
	if (s->snap_ahead < SNAP_AHEAD_MIN)
		s->snap_ahead = SNAP_AHEAD_MIN;
	if ((fl & O_ACCMODE) != O_WRONLY)
		s->flags |= F_CANREAD;
	if ((fl & O_ACCMODE) != O_RDONLY)
		s->flags |= F_CANWRITE;
	s->snap_ok = true;
	s->blind = !may_write(fd, &st, fl) || !cachestat_works(fd);
	if (msq_fds_dontcache == 1)
		s->dontcache = dev_state(st.st_dev) != DC_NO;
	if (s->dontcache)
		__atomic_store_n(&g_dc_any, true, __ATOMIC_RELAXED);
	/* An empty file's position is 0 unless the program seeked past its
	 * end before writing; the estimate is checked (lseek) before the
	 * first action anyway, and the call is spared for every new output. */
	pos = st.st_size == 0 ? 0 : sys_lseek_cur(fd);
	if (pos >= 0) {
		/* Before the first read: the snapshot sees what was cached before
		 * (a database's file: at its first long run, see is_rwdata()). */
		if (s->flags & F_CANREAD)
			new_run(fd, s, &s->rd, (uint64_t)pos, !(s->flags & F_RWDATA),
				(uint64_t)st.st_size);
		if (s->flags & F_CANWRITE)
			new_run(fd, s, &s->wr, (uint64_t)pos, !(s->flags & F_RWDATA),
				(uint64_t)st.st_size);
	}
	old = msq_fdt_xchg(fd, s);
	if (old == MSQ_FD_IGNORED && (unsigned)fd < MSQ_FDT_MAX && msq_fdt_peek(fd) != s) {
		free_state(s); /* no memory for the leaf */
		return MSQ_FD_IGNORED;
	}
	if (old && old != MSQ_FD_IGNORED)
		retire_state(old);
	__atomic_add_fetch(&g_tot.files, 1, __ATOMIC_RELAXED);
	msq_debug("fd %d: managed (%s%s%s%s)", fd, s->dontcache ? "RWF_DONTCACHE" : "fadvise behind",
		  s->blind ? ", no residency snapshot: pages cached before may go too" : "",
		  managed_write(s) ? ", write-behind" : "",
		  s->flags & F_RWDATA ? ", a database's file: long reads only" : "");
	return s;
}

/* Takes fd's state for bookkeeping: urcu-bp read lock held and the state
 * marked busy.  NULL if fd is not managed for this direction or another
 * thread is at it. */
static struct msq_fd *take(int fd, bool writing)
{
	struct msq_fd *s;

	/* No owner check (a getpid syscall) on this path, which random
	 * readers take at every call: a vfork child (which may only _exit or
	 * exec) that reads anyway moves the cursors as its parent would, with
	 * no lock, allocation or daemon involved. */
	urcu_bp_read_lock();
	s = msq_fdt_peek(fd);
	if (s && s != MSQ_FD_IGNORED && (writing ? managed_write(s) : managed_read(s)) &&
	    !__atomic_exchange_n(&s->busy, 1, __ATOMIC_ACQUIRE))
		return s;
	urcu_bp_read_unlock();
	return NULL;
}

static void give(struct msq_fd *s)
{
	__atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
	urcu_bp_read_unlock();
}

struct msq_fd *msq_fds_seen(int fd)
{
	struct msq_fd *s = msq_fdt_peek(fd);

	if (!s && msq_fds_mode == MSQ_READ_ALL)
		s = classify(fd, 0);
	return s;
}

/*
 * Bookkeeping after a successful transfer of n bytes.  off >= 0: the
 * offset the call used; off < 0: the file position, which the call
 * advanced by n.  Called with the guard raised; preserves errno.
 */
void msq_fds_after(int fd, int64_t off, uint64_t n, bool writing)
{
	struct msq_fd *s;
	struct dir *d;
	uint64_t end;
	MSQ_PROTECT_ERRNO;

	/* Most calls continue a run with nothing due: move the cursor and
	 * go.  (Two threads racing here lose an update: a run restarts.) */
	urcu_bp_read_lock();
	s = msq_fdt_peek(fd);
	if (s && s != MSQ_FD_IGNORED && (writing ? managed_write(s) : managed_read(s))) {
		/* A load and a store, not a locked addition (this runs for every
		 * fwrite of pg_dump's rows): threads racing on one fd may lose
		 * an update of the count, as they may of d->next. */
		__atomic_store_n(&s->c.streamed, __atomic_load_n(&s->c.streamed, __ATOMIC_RELAXED) + n,
				 __ATOMIC_RELAXED);
		/* Counted only up to WB_FREE: write_behind_due() asks no more. */
		if (writing && __atomic_load_n(&g_wr_bytes, __ATOMIC_RELAXED) < WB_FREE)
			__atomic_add_fetch(&g_wr_bytes, n, __ATOMIC_RELAXED);
		d = writing ? &s->wr : &s->rd;
		end = (off >= 0 ? (uint64_t)off : d->next) + n;
		if (d->started && end < d->act && (off < 0 || (uint64_t)off == d->next)) {
			d->next = end;
			urcu_bp_read_unlock();
			return;
		}
	}
	urcu_bp_read_unlock();
	if (!(s = take(fd, writing)))
		return;
	total_streamed(s);
	d = writing ? &s->wr : &s->rd;
	if (off >= 0) {
		advance(fd, s, d, (uint64_t)off, (uint64_t)off + n, writing);
		give(s);
		return;
	}
	end = d->next + n;
	/* Something is due (a chunk boundary, a snapshot, writeback): check
	 * the estimate of the file position first, about once per chunk. */
	{
		off_t pos = sys_lseek_cur(fd);
		struct stat st;

		if (pos < 0 || fstat(fd, &st) < 0 || st.st_dev != s->dev || st.st_ino != s->ino) {
			/* fd reused behind our back (stdio's fclose): forget it. */
			give(s);
			if (msq_fdt_cas(fd, s, NULL))
				retire_state(s);
			return;
		}
		/* stdio's fwrite leaves up to a buffer in the FILE: the fd's
		 * position then lags the estimate a little (fread's runs ahead,
		 * which advance() takes as the run going on). */
		if ((uint64_t)pos == end || (uint64_t)pos < n ||
		    ((uint64_t)pos < end && end - (uint64_t)pos <= SEQ_SLACK))
			advance(fd, s, d, end - n, end, writing);
		else
			advance(fd, s, d, (uint64_t)pos - n, (uint64_t)pos, writing);
	}
	give(s);
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

/* Is fd managed for reading with RWF_DONTCACHE?  Classifies it first in
 * "all" mode.  Guard raised. */
bool msq_fds_use_dontcache(int fd)
{
	struct msq_fd *s = msq_fdt_peek(fd);
	bool dc = false;

	if (!s)
		s = msq_fds_seen(fd);
	if (!s || s == MSQ_FD_IGNORED || !__atomic_load_n(&g_dc_any, __ATOMIC_RELAXED))
		return false;
	urcu_bp_read_lock();
	s = msq_fdt_peek(fd);
	if (s && s != MSQ_FD_IGNORED)
		dc = s->dontcache && managed_read(s);
	urcu_bp_read_unlock();
	return dc;
}

/*
 * Writes through pwritev2(RWF_DONTCACHE) (Linux 6.14+, where the filesystem
 * takes it): the kernel starts writeback of what the call wrote and drops
 * each folio it created once written, so a stream's output leaves nothing
 * behind, not even its last chunks, which are still dirty when the program
 * closes the file and which write-behind (it drops only clean chunks) had
 * to leave: an rsync of a tree of 64 MiB files kept 158 MiB of its copy.
 * Folios cached before stay cached.  On ext4 here such writes ran at 4x
 * the speed of plain ones, at a fifth of the CPU (they recycle pages the
 * VM already has).  Only where write-behind is due (the process wrote
 * WB_FREE, or the fd is NOREUSE), only once the fd's run is RUN_MIN long
 * (small files and small outputs stay as they were), only for calls of at
 * least DC_WRITE_MIN (the kernel starts writeback of each call's range: GNU
 * tar's 10 KiB writes of one archive ran at 0.68x the speed and 2.3x the
 * CPU so, where write-behind's 2 MiB chunks cost nothing), never under a
 * seccomp filter (one that allows write but not pwritev2 could kill the
 * program), and not with MADVSEQ_DONTCACHE=0.
 */
#define DC_WRITE_MIN (UINT64_C(64) << 10)
static bool seccomp_filtered(void)
{
	char buf[2048], *p;
	int fd = msq_sys_open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? msq_sys_read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		msq_sys_close(fd);
	if (n <= 0)
		return true; /* cannot tell: as if filtered */
	buf[n] = 0;
	p = strstr(buf, "\nSeccomp:");
	if (!p)
		return n == (ssize_t)sizeof(buf) - 1; /* cut short: cannot tell */
	p += strlen("\nSeccomp:");
	while (*p == ' ' || *p == '\t')
		p++;
	return *p != '0';
}

bool msq_fds_write_dontcache(int fd, uint64_t n)
{
	struct msq_fd *s;
	bool dc = false;

	if (n < DC_WRITE_MIN || __atomic_load_n(&msq_fds_dontcache, __ATOMIC_RELAXED) == 0)
		return false;
	urcu_bp_read_lock();
	s = msq_fdt_peek(fd);
	if (s && s != MSQ_FD_IGNORED && managed_write(s) && write_behind_due(s) && s->wr.started &&
	    s->wr.next - s->wr.run_start >= RUN_MIN && dev_state(s->dev) != DC_NO) {
		int st = __atomic_load_n(&s->wdc, __ATOMIC_RELAXED);

		if (st == DC_UNKNOWN) {
			st = seccomp_filtered() ? DC_NO : DC_YES;
			__atomic_store_n(&s->wdc, st, __ATOMIC_RELAXED);
		}
		dc = st == DC_YES;
	}
	urcu_bp_read_unlock();
	return dc;
}

/* The filesystem of fd refused RWF_DONTCACHE: remember, for every fd. */
void msq_fds_dontcache_refused(int fd)
{
	struct msq_fd *s;
	MSQ_PROTECT_ERRNO;

	urcu_bp_read_lock();
	s = msq_fdt_peek(fd);
	if (s && s != MSQ_FD_IGNORED) {
		dev_learn(s->dev, DC_NO);
		s->dontcache = false;
		__atomic_store_n(&s->wdc, DC_NO, __ATOMIC_RELAXED);
		msq_debug("fd %d: RWF_DONTCACHE refused by this filesystem", fd);
	}
	urcu_bp_read_unlock();
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

/* Whether the last run of d is a stream to drop behind at close: one with
 * a snapshot (what else was cached is unknown), and at least RUN_MIN long
 * unless the program said NOREUSE.  A shorter run is a small file, which
 * "all" mode leaves alone when reading: cp -r or tar -x of many small
 * files would otherwise start the writeback of each one at its close, in
 * the program's time (cp -r of 400 files took twice as long).  On a
 * database's file (F_RWDATA) a run is a stream only once it is longer than
 * the lag, as it is while the file is open: a range scan it just read,
 * it may read again. */
static bool stream_to_drop(const struct msq_fd *s, const struct dir *d)
{
	uint64_t min = (s->flags & F_RWDATA) ? msq_cfg.policy.lag + CHUNK : RUN_MIN;

	return d->started && d->snapping && ((s->flags & F_NOREUSE) || d->next - d->run_start >= min);
}

/* Before fd is closed: a last drop of what its streams brought in. */
static void final_drop(int fd, struct msq_fd *s)
{
	bool rd = managed_read(s) && stream_to_drop(s, &s->rd) && !s->dontcache;
	bool wr = managed_write(s) && stream_to_drop(s, &s->wr) && s->wr.next > s->wr.done &&
		  write_behind_due(s);
	bool retry = managed_read(s) && s->rd.nretry;
	struct stat st;

	if (!(rd || wr || retry) || s->inherited || !s->snap_ok || fstat(fd, &st) < 0 ||
	    st.st_dev != s->dev || st.st_ino != s->ino)
		return;
	if (rd) {
		off_t pos = sys_lseek_cur(fd);
		uint64_t end = s->rd.next;

		if (pos >= 0 && (uint64_t)pos > s->rd.run_start && (uint64_t)pos <= s->rd.next + SEQ_SLACK)
			end = (uint64_t)pos;
		if (end > s->rd.done)
			drop_range(fd, s, &s->rd, s->rd.done, ceil_chunk(end));
	}
	if (managed_read(s) && s->rd.nretry) /* (drop_range may have added some) */
		retry_due(fd, s, &s->rd, true);
	if (wr)
		drop_clean(fd, s, &s->wr, s->wr.done, ceil_chunk(s->wr.next));
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
	 * state of an fd that moved less than RUN_MIN, which has nothing to
	 * lose: the parent then looks at the fd again.  Most closed files are
	 * such; they spare the getpid (a syscall costs about 1.6 us here, and
	 * tar -x makes some 15 per small file). */
	if (s != MSQ_FD_IGNORED && __atomic_load_n(&s->c.streamed, __ATOMIC_RELAXED) >= RUN_MIN &&
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
		record_file(fd, s);
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
	/* The child's own totals (MADVSEQ_STATS). */
	memset(&g_tot, 0, sizeof(g_tot));
	g_wr_bytes = 0;
	/* The parent's closed files are the parent's to report. */
	g_nrec = 0;
	memset(&g_rec_other, 0, sizeof(g_rec_other));
}

void msq_readpath_set_mode(enum msq_read_mode m)
{
	if (m != __atomic_load_n(&msq_fds_mode, __ATOMIC_ACQUIRE))
		msq_debug("read path: %s (the cgroup's policy from madvseqd)", msq_read_mode_name(m));
	__atomic_store_n(&msq_fds_mode, m, __ATOMIC_RELEASE);
}


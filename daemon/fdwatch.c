/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fd streams of programs without the library.  No /proc file names a
 * read() stream as one, but a stream shows itself in three steps, each
 * cheaper than the next is dear, so that a host of idle processes costs
 * next to nothing:
 *   1. a discover = yes cgroup takes pages into its memory (its intake
 *      counter, one read per cgroup per look);
 *   2. then its processes' /proc/PID/io rchar + wchar say which of them
 *      move data (candidates);
 *   3. then a candidate's regular-file descriptors (/proc/PID/fd,
 *      /proc/PID/fdinfo) are followed: a position that moves forward look
 *      after look is a stream (fdseq.c).
 * A stream is acted on through a duplicate of the program's descriptor
 * (fdact.c): a cachestat snapshot ahead of it keeps what was cached before,
 * fadvise(DONTNEED) drops what lies a lag behind it, sync_file_range
 * starts the write-behind of a write stream.
 *
 * Bounds, whatever the watched processes do: at most MAX_PROCS processes,
 * MAX_FILES descriptors each, MAX_STREAMS streams with snapshots, and a
 * budget of BUDGET operations (a /proc read, a stat, a borrow) per look,
 * shared round-robin among the processes, so that 10,000 descriptors or a
 * thousand busy processes make the look longer, never the daemon's answers
 * slower than that.
 *
 * One manager per fd: a process that runs the library (connected, or with
 * libmadvseq.so in its maps) manages its own descriptors; the watch leaves
 * it alone.
 *
 * Not covered: pread()/pwrite() streams leave the position where it is
 * (restic reads its sources with read(), but PostgreSQL's and most
 * databases' I/O is pread/pwrite): they are not found here.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fault.h"
#include "../common/iec.h"
#include "../common/sys.h"
#include "daemon.h"
#include "fdact.h"
#include "fdseq.h"
#include "fdwatch.h"
#include "log.h"

#define MAX_PROCS 1024
#define MAX_CGS 4096
#define MAX_FILES 64        /* descriptors followed per process */
#define MAX_STREAMS 256     /* with snapshots, all processes */
#define MAX_PRE 512         /* ranges of cached-before pages per stream */
#define MAX_KNOWN 64        /* ranges whose snapshot was in time, per stream */
#define MAX_LEFT 64         /* ranges still cached after a drop, retried */
#define FD_SCAN_MAX 512     /* descriptor entries looked at per scan of one process */
#define BUDGET 4096         /* operations per look, all processes */
/* Intake per look that makes a cgroup hot.  The counter counts charges,
 * one per folio (v1 pgpgin: a 2 MiB folio is one), not pages: a few are
 * already megabytes of a stream, and a cgroup whose files are all cached
 * has none. */
#define HOT_CHARGES 8
#define HOT_NS (UINT64_C(2) * 1000 * 1000 * 1000)
#define CAND_BYTES (UINT64_C(1) << 20) /* rchar + wchar growth per look */
#define FD_RESCAN_NS (UINT64_C(250) * 1000 * 1000)
#define RESCAN_SOON_NS (UINT64_C(15) * 1000 * 1000)
#define IDLE_LOOKS 8        /* a descriptor still this long gives its place up */
#define FORGET_NS (UINT64_C(10) * 1000 * 1000 * 1000)
#define AHEAD (UINT64_C(64) << 20) /* snapshot this far ahead of a stream */
#define KNOWN_END (UINT64_C(1) << 62) /* past any file's end */
/* Planned per stream per look: fadvise(DONTNEED) of a gigabyte takes the
 * kernel ~100 ms, which a status request would wait for. */
#define DROP_MAX (UINT64_C(64) << 20)
#define WB_MAX (UINT64_C(64) << 20) /* writeback started per write stream per look */

struct fdw_file {
	int fd;
	uint64_t dev, ino, mnt_id;
	int flags;
	struct msqd_fdseq seq;
	unsigned idle;
	bool started;       /* its snapshot began */
	bool ended;         /* dropped up to the end of the file */
	bool open_ended;    /* the snapshot reached the end: everything past it is known */
	uint64_t start;     /* where the snapshot began: below, nothing is the daemon's */
	uint64_t snap_end, done, wb_done;
	uint64_t size;
	struct msq_extents known, pre, left;
	uint64_t streamed, dropped, unknown; /* unknown: passed before the snapshot got there */
	uint64_t found_ns, found_pos;        /* when and where it was first acted on */
	char *path;
};

struct fdw_cg;

struct fdw_proc {
	pid_t pid;
	int pidfd;
	struct fdw_cg *cg;
	uint64_t io;
	bool io_known, maps_checked, lib, dead;
	uint64_t fds_ns;   /* last scan of its descriptors */
	int fd_resume;     /* a scan cut short goes on after this number (-1: from the first) */
	uint64_t seen_ns;
	struct fdw_file *f;
	size_t nf;
};

struct fdw_cg {
	char *path;
	enum msqd_cg_layout layout;
	int intake_fd;
	uint64_t intake;
	bool known;
	uint64_t hot_until_ns, round;
	unsigned streams;
	struct fdw_cg *next;
};

struct msqd_fdwatch {
	struct fdw_proc **p; /* sorted by pid */
	size_t np;
	struct fdw_cg *cgs;
	unsigned ncgs, nstreams;
	uint64_t round, rot;
	long budget;
	/* totals, for status and metrics */
	uint64_t looks, found, dropped, streamed, kept_before, unknown, swapped, refused, left_alone,
		 over_limits, errors, busy_looks;
	uint64_t last_look_ns, max_look_ns;
	/* detection, for the benchmark: position and time of the last found */
	uint64_t last_found_pos, last_found_ms;
};

struct msqd_fdwatch *msqd_fdwatch_new(void)
{
	return calloc(1, sizeof(struct msqd_fdwatch));
}

static void file_free(struct msqd_fdwatch *w, struct fdw_file *f)
{
	if (f->started && w->nstreams)
		w->nstreams--;
	msq_extents_free(&f->known);
	msq_extents_free(&f->pre);
	msq_extents_free(&f->left);
	free(f->path);
}

static void file_remove(struct msqd_fdwatch *w, struct fdw_proc *p, size_t i)
{
	file_free(w, &p->f[i]);
	p->f[i] = p->f[--p->nf];
}

static void proc_free(struct msqd_fdwatch *w, struct fdw_proc *p)
{
	for (size_t i = 0; i < p->nf; i++)
		file_free(w, &p->f[i]);
	free(p->f);
	if (p->pidfd >= 0)
		close(p->pidfd);
	free(p);
}

void msqd_fdwatch_free(struct msqd_fdwatch *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->np; i++)
		proc_free(w, w->p[i]);
	free(w->p);
	for (struct fdw_cg *c = w->cgs, *n; c; c = n) {
		n = c->next;
		if (c->intake_fd >= 0)
			close(c->intake_fd);
		free(c->path);
		free(c);
	}
	free(w);
}

static size_t proc_index(const struct msqd_fdwatch *w, pid_t pid, bool *found)
{
	size_t lo = 0, hi = w->np;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (w->p[mid]->pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < w->np && w->p[lo]->pid == pid;
	return lo;
}

void msqd_fdwatch_forget(struct msqd_fdwatch *w, pid_t pid)
{
	bool found;
	size_t i;

	if (!w)
		return;
	i = proc_index(w, pid, &found);
	if (!found)
		return;
	proc_free(w, w->p[i]);
	memmove(&w->p[i], &w->p[i + 1], (w->np - i - 1) * sizeof(*w->p));
	w->np--;
}

/* Reads a small /proc file into buf (NUL-terminated).  Bytes or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

static bool key_u64(const char *text, const char *key, int base, uint64_t *v)
{
	size_t kl = strlen(key);

	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (!strncmp(l, key, kl)) {
			char *end;

			errno = 0;
			*v = strtoull(l + kl, &end, base);
			return !errno && end != l + kl;
		}
	}
	return false;
}

static struct fdw_cg *cg_get(struct msqd_fdwatch *w, const struct msqd_cg *g)
{
	struct fdw_cg *c;

	for (c = w->cgs; c; c = c->next)
		if (!strcmp(c->path, g->path))
			return c;
	if (w->ncgs >= MAX_CGS || !(c = calloc(1, sizeof(*c))) || !(c->path = strdup(g->path))) {
		free(c);
		return NULL;
	}
	c->layout = g->layout;
	c->intake_fd = -1;
	c->next = w->cgs;
	w->cgs = c;
	w->ncgs++;
	return c;
}

static struct fdw_proc *proc_get(struct msqd_fdwatch *w, pid_t pid, struct fdw_cg *cg)
{
	struct fdw_proc *p, **v;
	bool found;
	size_t i = proc_index(w, pid, &found);

	if (found) {
		w->p[i]->cg = cg; /* (moved between watched cgroups) */
		return w->p[i];
	}
	if (w->np >= MAX_PROCS) {
		w->over_limits++;
		return NULL;
	}
	if (!(v = realloc(w->p, (w->np + 1) * sizeof(*v))))
		return NULL;
	w->p = v;
	if (!(p = calloc(1, sizeof(*p))))
		return NULL;
	/* The pidfd first: what /proc/PID shows while it is alive is that
	 * process's, and a borrow through it can reach no other. */
	if ((p->pidfd = msq_pidfd_open(pid)) < 0) {
		free(p);
		return NULL;
	}
	p->pid = pid;
	p->cg = cg;
	p->fd_resume = -1;
	memmove(&w->p[i + 1], &w->p[i], (w->np - i) * sizeof(*w->p));
	w->p[i] = p;
	w->np++;
	return p;
}

/* Whether the process runs the library: its maps name libmadvseq.so. */
static bool runs_library(const struct msqd *d, pid_t pid)
{
	char path[128], buf[8192];
	bool found = false;
	ssize_t n, keep = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%d/maps", d->proc_root, (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	/* (At most 4 MiB of maps: a library is mapped early, near the top of
	 * the list's reading order or not at all.) */
	for (size_t total = 0; !found && total < (4u << 20);) {
		n = read(fd, buf + keep, sizeof(buf) - 1 - (size_t)keep);
		if (n <= 0)
			break;
		total += (size_t)n;
		buf[keep + n] = '\0';
		found = strstr(buf, "/libmadvseq.so") != NULL;
		/* a name cut between two reads */
		keep = keep + n > 32 ? 32 : keep + n;
		memmove(buf, buf + strlen(buf) - (size_t)keep, (size_t)keep);
	}
	close(fd);
	return found;
}

static bool spend(struct msqd_fdwatch *w, long n)
{
	if (w->budget < n)
		return false;
	w->budget -= n;
	return true;
}

/* fdinfo of one descriptor: 0, or -errno (-ENOENT: closed). */
static int fdinfo(const struct msqd *d, pid_t pid, int fd, uint64_t *pos, int *flags,
		  uint64_t *mnt_id, uint64_t *ino)
{
	char path[128], buf[1024];
	uint64_t fl = 0;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%d/fdinfo/%d", d->proc_root, (int)pid, fd);
	if (MSQ_FAULT("madvseq/daemon/proc/fdinfo"))
		return -EIO;
	if ((n = read_small(path, buf, sizeof(buf))) < 0)
		return (int)n;
	*mnt_id = *ino = 0;
	if (!key_u64(buf, "pos:", 10, pos) || !key_u64(buf, "flags:", 8, &fl))
		return -EINVAL;
	key_u64(buf, "mnt_id:", 10, mnt_id);
	key_u64(buf, "ino:", 10, ino);
	*flags = (int)fl;
	return 0;
}

/* Makes room among p's files: those that stayed still give their place
 * up.  Returns whether there is room for one more. */
static bool room(struct msqd_fdwatch *w, struct fdw_proc *p)
{
	if (p->nf < MAX_FILES)
		return true;
	for (size_t i = p->nf; i-- > 0;)
		if (!p->f[i].started && p->f[i].idle >= IDLE_LOOKS) {
			file_remove(w, p, i);
			return true;
		}
	return false;
}

static bool followed(const struct fdw_proc *p, int fd)
{
	for (size_t i = 0; i < p->nf; i++)
		if (p->f[i].fd == fd)
			return true;
	return false;
}

/* Looks for regular-file descriptors of p not followed yet, from where
 * the last scan stopped. */
static void scan_fds(struct msqd_fdwatch *w, struct msqd *d, struct fdw_proc *p)
{
	char path[128];
	struct dirent *de;
	unsigned looked = 0;
	int dfd, next_resume = -1;
	DIR *dir;

	p->fds_ns = d->now_ns;
	if (!p->maps_checked) {
		if (!spend(w, 8))
			return;
		p->maps_checked = true;
		if ((p->lib = runs_library(d, p->pid))) {
			log_debug("pid %d runs the library: its descriptors are its own to manage",
				  (int)p->pid);
			w->left_alone++;
			return;
		}
	}
	snprintf(path, sizeof(path), "%s/%d/fd", d->proc_root, (int)p->pid);
	if (MSQ_FAULT("madvseq/daemon/proc/fd") || !(dir = opendir(path)))
		return;
	dfd = dirfd(dir);
	while ((de = readdir(dir))) {
		struct fdw_file f = { 0 };
		struct stat st;
		char *end;
		long fd = strtol(de->d_name, &end, 10);

		if (*end || end == de->d_name || fd < 0 || fd > INT32_MAX || fd <= p->fd_resume)
			continue;
		if (++looked > FD_SCAN_MAX || !spend(w, 2)) {
			next_resume = p->fd_resume; /* (kept: go on from there) */
			break;
		}
		next_resume = (int)fd;
		if (followed(p, (int)fd))
			continue;
		/* stat follows the magic link to the open file itself (any
		 * mount namespace); it opens nothing. */
		if (fstatat(dfd, de->d_name, &st, 0) < 0 || !S_ISREG(st.st_mode) || !st.st_size)
			continue;
		if (fdinfo(d, p->pid, (int)fd, &f.seq.pos, &f.flags, &f.mnt_id, &f.ino) < 0 ||
		    (f.flags & (O_DIRECT | O_PATH)) || (f.ino && f.ino != (uint64_t)st.st_ino))
			continue;
		if (!room(w, p)) {
			w->over_limits++;
			break;
		}
		{
			struct fdw_file *v = realloc(p->f, (p->nf + 1) * sizeof(*v));

			if (!v)
				break;
			p->f = v;
		}
		f.fd = (int)fd;
		f.dev = (uint64_t)st.st_dev;
		f.ino = (uint64_t)st.st_ino;
		f.size = (uint64_t)st.st_size;
		msqd_fdseq_observe(&f.seq, f.seq.pos);
		p->f[p->nf++] = f;
	}
	/* All read: the next scan starts from the first descriptor again. */
	p->fd_resume = de ? next_resume : -1;
	closedir(dir);
}

static void name_file(const struct msqd *d, struct fdw_proc *p, struct fdw_file *f)
{
	char link[128], buf[4096];
	ssize_t n;

	snprintf(link, sizeof(link), "%s/%d/fd/%d", d->proc_root, (int)p->pid, f->fd);
	n = readlink(link, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		f->path = strdup(buf);
	}
}

/* One borrow of f's descriptor: snapshot ahead, drops behind.  Returns
 * -ESRCH when the process is gone, -ESTALE when f is another file now. */
static int act(struct msqd_fdwatch *w, struct msqd *d, struct fdw_proc *p, struct fdw_file *f,
	       struct msqd_cg *g, bool still)
{
	struct msq_extents drop = MSQ_EXTENTS_INIT;
	uint64_t pos = f->seq.pos, dropped = 0, next, from, to, reached;
	bool writable = (f->flags & O_ACCMODE) != O_RDONLY;
	struct stat st;
	int dup, rc;

	if (!spend(w, 4))
		return 0;
	dup = msqd_fdact_borrow(p->pidfd, f->fd, f->dev, f->ino, &st);
	if (dup < 0) {
		if (dup == -ESTALE)
			w->swapped++;
		else if (dup != -ESRCH && dup != -EBADF)
			w->refused++;
		return dup == -EBADF ? -ESTALE : dup;
	}
	f->size = (uint64_t)st.st_size;
	if (!f->started) {
		if (w->nstreams >= MAX_STREAMS) {
			w->over_limits++;
			close(dup);
			return 0;
		}
		w->nstreams++;
		f->started = true;
		f->start = f->snap_end = f->done = f->wb_done = msqd_fdseq_ceil(pos + MSQD_FDSEQ_MARGIN);
		f->found_ns = d->now_ns;
		f->found_pos = pos;
		w->found++;
		w->last_found_pos = pos;
		name_file(d, p, f);
		log_debug("pid %d fd %d: a stream at %" PRIu64 " MiB of %s (%" PRIu64 " MiB)",
			  (int)p->pid, f->fd, pos >> 20, f->path ? f->path : "?", f->size >> 20);
	}
	/* Ahead: what is cached before the stream gets there.  Once the
	 * snapshot reached the file's end, what lies past it did not exist
	 * before: an appending writer's pages, or a reader's of a file that
	 * grows, are the stream's. */
	if (!f->open_ended) {
		msqd_fdseq_snap_window(pos, f->snap_end, f->size, AHEAD, &from, &to);
		if (from > f->snap_end) {
			uint64_t lim = msqd_fdseq_ceil(f->size), e = from < lim ? from : lim;

			if (e > f->snap_end) {
				f->unknown += e - f->snap_end;
				w->unknown += e - f->snap_end;
			}
			f->snap_end = from;
		}
		if (from < to && f->known.n < MAX_KNOWN) {
			spend(w, 8);
			rc = msqd_fdact_snapshot(dup, from, to, f->size, &f->pre, MAX_PRE, &reached);
			if (rc == 0 && reached > from && msq_extents_add(&f->known, from, reached) == 0)
				f->snap_end = reached;
			else if (rc < 0)
				w->errors++;
		}
		if (f->snap_end >= msqd_fdseq_ceil(f->size) && f->known.n < MAX_KNOWN &&
		    msq_extents_add(&f->known, f->snap_end, KNOWN_END) == 0)
			f->open_ended = true;
	}
	/* Behind: what the policy lets go. */
	if (f->seq.stream && g && g->pol->mode == MSQ_MODE_PAGEOUT && msqd_gate_open(d, g)) {
		struct msqd_fdseq_plan_in in = {
			.pos = pos, .lag = g->pol->lag, .done = f->done, .size = f->size, .max = DROP_MAX,
			.at_end = still && !writable && pos >= f->size && !f->ended,
			.known = &f->known, .precached = &f->pre,
		};
		struct msq_extents left = MSQ_EXTENTS_INIT;

		if (writable && pos > g->pol->lag / 2) {
			uint64_t wb = msqd_fdseq_floor(pos - g->pol->lag / 2);

			if (wb > f->wb_done + WB_MAX)
				wb = f->wb_done + WB_MAX;
			if (wb > f->wb_done && msqd_fdact_writeback(dup, f->wb_done, wb) == 0)
				f->wb_done = wb;
		}
		rc = msqd_fdseq_plan(&in, &drop, &next);
		if (rc == 0) {
			uint64_t before = f->done;

			/* What stayed cached last time (dirty, under writeback,
			 * held for a moment) is tried again. */
			msq_extents_add_all(&drop, &f->left);
			msq_extents_clear(&f->left);
			spend(w, (long)drop.n);
			rc = msqd_fdact_drop(dup, &drop, &dropped, &left);
			if (left.n <= MAX_LEFT)
				msq_extents_add_all(&f->left, &left);
			f->done = next;
			if (in.at_end)
				f->ended = true;
			w->kept_before += msq_extents_covered(&f->pre, before, next);
		}
		msq_extents_free(&left);
		if (rc < 0)
			w->errors++;
		f->dropped += dropped;
		w->dropped += dropped;
		g->dropped += dropped;
		d->dropped_total += dropped;
	}
	msq_extents_free(&drop);
	close(dup);
	return 0;
}

/* The followed descriptors of p: positions read, streams acted on. */
static uint64_t follow(struct msqd_fdwatch *w, struct msqd *d, struct fdw_proc *p, struct msqd_cg *g,
		       unsigned *streams)
{
	uint64_t moved = 0;

	for (size_t i = p->nf; i-- > 0;) {
		struct fdw_file *f = &p->f[i];
		uint64_t pos, mnt_id, ino, was = f->seq.pos;
		enum msqd_fdseq_move mv;
		int flags, rc;

		if (!spend(w, 1))
			return moved;
		rc = fdinfo(d, p->pid, f->fd, &pos, &flags, &mnt_id, &ino);
		if (rc < 0 || (ino && ino != f->ino) || (f->mnt_id && mnt_id != f->mnt_id) ||
		    ((flags ^ f->flags) & (O_ACCMODE | O_DIRECT))) {
			/* Closed, or another file on the number now: a later
			 * scan finds what is there. */
			if (rc == 0)
				w->swapped++;
			file_remove(w, p, i);
			continue;
		}
		mv = msqd_fdseq_observe(&f->seq, pos);
		if (mv == MSQD_FDSEQ_RESTART && f->started) {
			/* Sought elsewhere: a new stream, if one, with a new
			 * snapshot (what it left behind stays as it is). */
			struct fdw_file n = { .fd = f->fd, .dev = f->dev, .ino = f->ino,
					      .mnt_id = f->mnt_id, .flags = f->flags, .seq = f->seq };

			file_free(w, f);
			*f = n;
			continue;
		}
		if (mv == MSQD_FDSEQ_FORWARD) {
			f->idle = 0;
			f->streamed += pos - was;
			w->streamed += pos - was;
			moved += pos - was;
		} else if (f->idle < UINT32_MAX) {
			f->idle++;
		}
		if (mv == MSQD_FDSEQ_FORWARD || (f->started && !f->ended && f->idle <= 2) ||
		    (f->started && f->left.n)) {
			rc = act(w, d, p, f, g, mv == MSQD_FDSEQ_STILL);
			if (rc == -ESRCH) {
				p->dead = true;
				return moved;
			}
			if (rc == -ESTALE) {
				file_remove(w, p, i);
				continue;
			}
		}
		if (f->started)
			(*streams)++;
	}
	return moved;
}

static void look_proc(struct msqd_fdwatch *w, struct msqd *d, struct fdw_proc *p,
		      struct msqd_cg *g, unsigned *streams)
{
	char path[128], buf[1024];
	uint64_t r = 0, wr = 0, io, grew, moved = 0;

	p->seen_ns = d->now_ns;
	if (p->lib || !spend(w, 1))
		return;
	snprintf(path, sizeof(path), "%s/%d/io", d->proc_root, (int)p->pid);
	if (MSQ_FAULT("madvseq/daemon/proc/io") || read_small(path, buf, sizeof(buf)) < 0 ||
	    !key_u64(buf, "rchar:", 10, &r) || !key_u64(buf, "wchar:", 10, &wr))
		return;
	if (!msqd_pidfd_alive(p->pidfd)) {
		p->dead = true; /* (what was read may be a new process's) */
		return;
	}
	io = r + wr;
	grew = p->io_known && io >= p->io ? io - p->io : 0;
	p->io = io;
	p->io_known = true;
	if (p->nf)
		moved = follow(w, d, p, g, streams);
	/* Data moved that no followed position explains: a descriptor not
	 * followed yet (just opened, as a program goes from file to file),
	 * looked for at the next look already; otherwise now and then. */
	if (!p->dead && grew >= CAND_BYTES &&
	    d->now_ns - p->fds_ns >= (grew - (moved < grew ? moved : grew) >= CAND_BYTES
					      ? RESCAN_SOON_NS : FD_RESCAN_NS))
		scan_fds(w, d, p);
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return x < y ? -1 : x > y;
}

/* The processes of one hot cgroup (its cgroup.procs), from a rotating
 * start so that a spent budget leaves others for the next look. */
static void look_cgroup(struct msqd_fdwatch *w, struct msqd *d, struct msqd_cg *g,
			struct fdw_cg *c, const pid_t *shims, size_t ns)
{
	char dir[4096], file[4200];
	pid_t *pids = NULL, self = getpid();
	size_t n = 0, cap = 0;
	unsigned streams = 0;
	FILE *f;
	long v;

	msqd_cgroup_dir(d->cg_root, g->path, g->layout, dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/cgroup.procs", dir);
	if (MSQ_FAULT("madvseq/daemon/proc/read") || !(f = fopen(file, "re")))
		return;
	while (n < MAX_PROCS * 4 && fscanf(f, "%ld", &v) == 1) {
		if (v <= 0 || v > INT32_MAX || v == self)
			continue;
		if (n == cap) {
			pid_t *np = realloc(pids, (cap = cap ? cap * 2 : 64) * sizeof(*pids));

			if (!np)
				break;
			pids = np;
		}
		pids[n++] = (pid_t)v;
	}
	fclose(f);
	for (size_t k = 0; k < n; k++) {
		pid_t pid = pids[(k + w->rot) % n];
		struct fdw_proc *p;

		if (bsearch(&pid, shims, ns, sizeof(*shims), cmp_pid)) {
			/* Its library is connected: its own to manage. */
			msqd_fdwatch_forget(w, pid);
			continue;
		}
		if (w->budget <= 0)
			break;
		if ((p = proc_get(w, pid, c)))
			look_proc(w, d, p, g, &streams);
	}
	c->streams = streams;
	free(pids);
}

uint64_t msqd_fdwatch_step(struct msqd_fdwatch *w, struct msqd *d, uint64_t now_ns)
{
	uint64_t t0 = msqd_now_ns(), period = d->conf.discover_watch_ns;
	pid_t *shims;
	size_t ns = 0;
	bool hot = false;

	if (!w)
		return now_ns + d->conf.discover_interval_ns;
	w->round++;
	w->rot++;
	w->looks++;
	w->budget = BUDGET;
	d->now_ns = now_ns;
	shims = malloc((d->nclients + 1) * sizeof(*shims));
	if (!shims)
		return now_ns + period;
	for (struct msqd_client *c = d->clients; c; c = c->next)
		if (c->fd >= 0 && c->hello && !c->ctl)
			shims[ns++] = c->pid;
	qsort(shims, ns, sizeof(*shims), cmp_pid);
	for (struct msqd_cg *g = d->cgs; g; g = g->next) {
		struct fdw_cg *c;
		uint64_t v;

		if (!g->pol->discover || g->pol->mode == MSQ_MODE_OFF || !(c = cg_get(w, g)))
			continue;
		c->round = w->round;
		if (msqd_cgroup_intake(d->cg_root, g->path, g->layout, &c->intake_fd, &v) == 0) {
			if (c->known && v >= c->intake && v - c->intake >= HOT_CHARGES)
				c->hot_until_ns = now_ns + HOT_NS;
			c->intake = v;
			c->known = true;
		}
		if (now_ns < c->hot_until_ns || c->streams) {
			hot = true;
			look_cgroup(w, d, g, c, shims, ns);
		}
	}
	free(shims);
	if (w->budget <= 0)
		w->busy_looks++;
	/* Forgotten: processes that exited, and those no watched cgroup
	 * listed for a while (moved out, or their cgroup quiet and gone). */
	for (size_t i = w->np; i-- > 0;) {
		struct fdw_proc *p = w->p[i];

		if (p->dead || p->cg->round != w->round || now_ns - p->seen_ns > FORGET_NS ||
		    (p->seen_ns && !msqd_pidfd_alive(p->pidfd))) {
			proc_free(w, p);
			memmove(&w->p[i], &w->p[i + 1], (w->np - i - 1) * sizeof(*w->p));
			w->np--;
		}
	}
	/* Cgroups no longer watched (removed, reloaded without discover). */
	for (struct fdw_cg **pc = &w->cgs; *pc;) {
		struct fdw_cg *c = *pc;

		if (c->round == w->round) {
			pc = &c->next;
			continue;
		}
		*pc = c->next;
		if (c->intake_fd >= 0)
			close(c->intake_fd);
		free(c->path);
		free(c);
		w->ncgs--;
	}
	w->last_look_ns = msqd_now_ns() - t0;
	if (w->last_look_ns > w->max_look_ns)
		w->max_look_ns = w->last_look_ns;
	/* Quiet: half as often (the cgroups' intake is all there is to read). */
	return now_ns + (hot ? period : period * 2);
}

/* --- renderings ---------------------------------------------------------- */

struct buf {
	char *s;
	size_t len, cap;
	bool err;
};

__attribute__((format(printf, 2, 3))) static void bput(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->err)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->err = true;
		return;
	}
	if (!b->s || b->len + (size_t)n >= b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *s;

		while (cap <= b->len + (size_t)n)
			cap *= 2;
		if (!(s = realloc(b->s, cap))) {
			b->err = true;
			return;
		}
		b->s = s;
		b->cap = cap;
		va_start(ap, fmt);
		vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

static char *bdone(struct buf *b)
{
	if (b->err) {
		free(b->s);
		return NULL;
	}
	if (!b->s)
		return strdup("");
	return b->s;
}

static void comm(const struct msqd *d, pid_t pid, char *buf, size_t len)
{
	char path[128];
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%d/comm", d->proc_root, (int)pid);
	n = read_small(path, buf, len);
	if (n <= 0)
		snprintf(buf, len, "?");
	else if (buf[n - 1] == '\n')
		buf[n - 1] = '\0';
}

static void json_str(struct buf *b, const char *s)
{
	bput(b, "\"");
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p == '"' || *p == '\\')
			bput(b, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			bput(b, "\\u%04x", *p); /* bytes, not text: valid JSON either way */
		else
			bput(b, "%c", *p);
	}
	bput(b, "\"");
}

static uint64_t kept_before(const struct fdw_file *f)
{
	return f->done > f->start ? msq_extents_covered(&f->pre, f->start, f->done) : 0;
}

char *msqd_fdwatch_status_text(const struct msqd_fdwatch *w, const struct msqd *d)
{
	struct buf b = { 0 };
	char a[MSQ_IEC_LEN], c[MSQ_IEC_LEN], e[MSQ_IEC_LEN], u[MSQ_IEC_LEN], k[MSQ_IEC_LEN], name[32];

	if (!w)
		return strdup("fd streams: off (out of memory at start)\n");
	bput(&b, "fd streams (read()/write() of programs without the library, discover = yes): "
		 "%u followed, %zu processes watched; %" PRIu64 " found, %s streamed, %s dropped, "
		 "%s kept (cached before), %s passed before a snapshot; %" PRIu64 " swapped under "
		 "the daemon, %" PRIu64 " refused, %" PRIu64 " left to their library; look last %.3f ms, "
		 "max %.3f ms, %" PRIu64 " cut short\n",
	     w->nstreams, w->np, w->found, msq_format_iec(w->streamed, a),
	     msq_format_iec(w->dropped, c), msq_format_iec(w->kept_before, e),
	     msq_format_iec(w->unknown, u), w->swapped, w->refused, w->left_alone,
	     (double)w->last_look_ns / 1e6, (double)w->max_look_ns / 1e6, w->busy_looks);
	bput(&b, "  fidelity (fd streams): kept are pages the snapshot ahead found cached, pages "
		 "mapped, dirty or under writeback; pages others use through read() alone are not told "
		 "apart; pread()/pwrite() streams are not found\n");
	for (size_t i = 0; i < w->np; i++) {
		const struct fdw_proc *p = w->p[i];

		for (size_t j = 0; j < p->nf; j++) {
			const struct fdw_file *f = &p->f[j];

			if (!f->started)
				continue;
			comm(d, p->pid, name, sizeof(name));
			bput(&b, "  pid %d %s (%s) in %s: fd %d %s %s: at %s, streamed %s, dropped %s, "
				 "kept %s, unknown %s\n",
			     (int)p->pid, "fd", name, p->cg->path, f->fd,
			     (f->flags & O_ACCMODE) == O_RDONLY ? "read" : "write",
			     f->path ? f->path : "(no path)", msq_format_iec(f->seq.pos, a),
			     msq_format_iec(f->streamed, c), msq_format_iec(f->dropped, e),
			     msq_format_iec(kept_before(f), u), msq_format_iec(f->unknown, k));
		}
	}
	return bdone(&b);
}

char *msqd_fdwatch_json_summary(const struct msqd_fdwatch *w)
{
	struct buf b = { 0 };

	if (!w)
		return strdup("null");
	bput(&b, "{\"followed\":%u,\"processes\":%zu,\"found\":%" PRIu64 ",\"streamed_bytes\":%" PRIu64
		 ",\"dropped_bytes\":%" PRIu64 ",\"kept_bytes\":%" PRIu64 ",\"unknown_bytes\":%" PRIu64
		 ",\"swapped\":%" PRIu64 ",\"refused\":%" PRIu64 ",\"left_to_library\":%" PRIu64
		 ",\"over_limits\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"looks\":%" PRIu64
		 ",\"last_look_ms\":%.3f,\"max_look_ms\":%.3f}",
	     w->nstreams, w->np, w->found, w->streamed, w->dropped, w->kept_before, w->unknown,
	     w->swapped, w->refused, w->left_alone, w->over_limits, w->errors, w->looks,
	     (double)w->last_look_ns / 1e6, (double)w->max_look_ns / 1e6);
	return bdone(&b);
}

char *msqd_fdwatch_json_streams(const struct msqd_fdwatch *w, const struct msqd *d, bool first)
{
	struct buf b = { 0 };
	char name[32];

	for (size_t i = 0; w && i < w->np; i++) {
		const struct fdw_proc *p = w->p[i];

		for (size_t j = 0; j < p->nf; j++) {
			const struct fdw_file *f = &p->f[j];

			if (!f->started)
				continue;
			comm(d, p->pid, name, sizeof(name));
			/* (numbers first, as madvseq stat reads them) */
			bput(&b, "%s\n{\"pid\":%d,\"dev\":%" PRIu64 ",\"ino\":%" PRIu64 ",\"dropped_bytes\":%" PRIu64
				 ",\"fd\":%d,\"position\":%" PRIu64 ",\"streamed_bytes\":%" PRIu64
				 ",\"kept_bytes\":%" PRIu64 ",\"unknown_bytes\":%" PRIu64 ",\"found_at\":%" PRIu64
				 ",\"found_ms_ago\":%" PRIu64 ",\"kind\":\"fd\",\"direction\":\"%s\",\"command\":",
			     first ? "" : ",", (int)p->pid, f->dev, f->ino, f->dropped, f->fd, f->seq.pos,
			     f->streamed, kept_before(f), f->unknown, f->found_pos,
			     (d->now_ns - f->found_ns) / 1000000,
			     (f->flags & O_ACCMODE) == O_RDONLY ? "read" : "write");
			json_str(&b, name);
			bput(&b, ",\"cgroup\":");
			json_str(&b, p->cg->path);
			bput(&b, ",\"file\":");
			if (f->path)
				json_str(&b, f->path);
			else
				bput(&b, "null");
			bput(&b, "}");
			first = false;
		}
	}
	return bdone(&b);
}

char *msqd_fdwatch_prometheus(const struct msqd_fdwatch *w)
{
	struct buf b = { 0 };

	if (!w)
		return strdup("");
	bput(&b, "# HELP madvseq_fd_streams Read()/write() streams of programs without the library "
		 "that madvseqd follows.\n# TYPE madvseq_fd_streams gauge\nmadvseq_fd_streams %u\n",
	     w->nstreams);
	bput(&b, "# HELP madvseq_fd_streams_found_total fd streams found (discover = yes).\n"
		 "# TYPE madvseq_fd_streams_found_total counter\nmadvseq_fd_streams_found_total %" PRIu64 "\n",
	     w->found);
	bput(&b, "# HELP madvseq_fd_bytes_total Bytes of fd streams: streamed, dropped behind them, "
		 "kept (cached before), unknown (passed before the snapshot).\n"
		 "# TYPE madvseq_fd_bytes_total counter\n"
		 "madvseq_fd_bytes_total{kind=\"streamed\"} %" PRIu64 "\n"
		 "madvseq_fd_bytes_total{kind=\"dropped\"} %" PRIu64 "\n"
		 "madvseq_fd_bytes_total{kind=\"kept\"} %" PRIu64 "\n"
		 "madvseq_fd_bytes_total{kind=\"unknown\"} %" PRIu64 "\n",
	     w->streamed, w->dropped, w->kept_before, w->unknown);
	bput(&b, "# HELP madvseq_fd_events_total Borrowed descriptors that were another file by then "
		 "(swapped), borrows refused, processes left to their library, limits reached.\n"
		 "# TYPE madvseq_fd_events_total counter\n"
		 "madvseq_fd_events_total{event=\"swapped\"} %" PRIu64 "\n"
		 "madvseq_fd_events_total{event=\"refused\"} %" PRIu64 "\n"
		 "madvseq_fd_events_total{event=\"library\"} %" PRIu64 "\n"
		 "madvseq_fd_events_total{event=\"limits\"} %" PRIu64 "\n",
	     w->swapped, w->refused, w->left_alone, w->over_limits);
	bput(&b, "# HELP madvseq_fd_look_seconds Duration of the fd watch's looks (last, max).\n"
		 "# TYPE madvseq_fd_look_seconds gauge\n"
		 "madvseq_fd_look_seconds{stat=\"last\"} %.6f\nmadvseq_fd_look_seconds{stat=\"max\"} %.6f\n",
	     (double)w->last_look_ns / 1e9, (double)w->max_look_ns / 1e9);
	return bdone(&b);
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fd streams of programs without the library.  No /proc file names a
 * read() stream as one, but a stream shows itself in three steps, each
 * cheaper than the next is dear, so that a host of idle processes costs
 * next to nothing:
 *   1. a discover = yes cgroup takes file pages into its memory (its
 *      memory.stat, one read per cgroup per look: charges that no fault
 *      explains, or a page cache that grew; anonymous memory, which is
 *      charged at a fault, is not news);
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
 * MAX_FILES descriptors each, MAX_STREAMS streams with snapshots.  A look
 * is done in slices of at most BUDGET operations (a /proc read, a stat, a
 * borrow) and SLICE_NS, with the event loop served between two slices; a
 * look cut short goes on where it stopped (the next process by pid, the
 * next descriptor by number), so that 10,000 descriptors or a thousand
 * busy processes make the look longer, never the loop's gaps.  A
 * descriptor that stayed still while its process moved data elsewhere
 * gives its place up at once, so that a stream among thousands of idle
 * descriptors is reached MAX_FILES descriptors a look.
 *
 * One manager per fd: a process that runs the library (connected, or with
 * libmadvseq.so in its maps) manages its own descriptors; the watch leaves
 * it alone.
 *
 * Files written and closed between two looks (restic's packs) are gone
 * before a second look could see them move: the kernel reports their
 * closes (fdclosed.c), for the filesystems on which the watch saw a
 * writer's descriptor.
 *
 * Not covered (madvseqd(8)): pread()/pwrite() streams leave the position
 * where it is (restic reads its sources with read(), but PostgreSQL's and
 * most databases' I/O is pread/pwrite).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../common/fault.h"
#include "../common/sys.h"
#include "conf.h"
#include "fdclosed.h"
#include "fdproc.h"
#include "fdseq.h"
#include "fdmanage.h"
#include "fdwatch.h"
#include "log.h"
#include "msqd.h"
#include "util.h"

#define MAX_PROCS 1024
#define MAX_CGS 4096
#define MAX_FILES 64        /* descriptors followed per process */
#define FD_SCAN_MAX 512     /* descriptor entries looked at per scan of one process */
#define BUDGET 1024         /* operations per slice of a look, all processes */
/* A slice's time: what the loop's clients wait at most for the watch. */
#define SLICE_NS (UINT64_C(4) * 1000 * 1000)
/* Between two slices of a look cut short: the loop serves what came in. */
#define SLICE_GAP_NS (UINT64_C(1) * 1000 * 1000)
/* Intake per look that makes a cgroup hot.  The counter counts charges,
 * one per folio (v1 pgpgin: a 2 MiB folio is one), not pages: a few are
 * already megabytes of a stream, and a cgroup whose files are all cached
 * has none.  Or a page cache grown by HOT_CACHE_BYTES. */
#define HOT_CHARGES 8
#define HOT_CACHE_BYTES (UINT64_C(4) << 20)
#define HOT_NS (UINT64_C(2) * 1000 * 1000 * 1000)
#define CAND_BYTES (UINT64_C(1) << 20) /* rchar + wchar growth per look */
#define FD_RESCAN_NS (UINT64_C(250) * 1000 * 1000)
#define RESCAN_SOON_NS (UINT64_C(15) * 1000 * 1000)
#define IDLE_LOOKS 8        /* a descriptor still this long gives its place up */
#define FORGET_NS (UINT64_C(10) * 1000 * 1000 * 1000)

static void file_remove(struct msqd_fdwatch *w, struct fdw_proc *p, size_t i)
{
	msqd_fdmanage_free(w, &p->f[i]);
	p->f[i] = p->f[--p->nf];
}

static void proc_free(struct msqd_fdwatch *w, struct fdw_proc *p)
{
	for (size_t i = 0; i < p->nf; i++)
		msqd_fdmanage_free(w, &p->f[i]);
	free(p->f);
	if (p->pidfd >= 0)
		close(p->pidfd);
	free(p);
}

void msqd_fdwatch_free(struct msqd_fdwatch *w)
{
	for (size_t i = 0; i < w->np; i++)
		proc_free(w, w->p[i]);
	free(w->p);
	free(w->resume_cg);
	for (struct fdw_cg *c = w->cgs, *n; c; c = n) {
		n = c->next;
		if (c->intake_fd >= 0)
			close(c->intake_fd);
		free(c->path);
		free(c);
	}
	*w = (struct msqd_fdwatch){ 0 };
}

static void forget(struct msqd_fdwatch *w, pid_t pid)
{
	bool found;
	size_t i;

	i = msqd_fdwatch_index(w, pid, &found);
	if (!found)
		return;
	proc_free(w, w->p[i]);
	memmove(&w->p[i], &w->p[i + 1], (w->np - i - 1) * sizeof(*w->p));
	w->np--;
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

static struct fdw_proc *proc_get(struct msqd *d, pid_t pid, struct fdw_cg *cg)
{
	struct msqd_fdwatch *w = &d->fdw;
	struct fdw_proc *p, **v;
	bool found;
	size_t i = msqd_fdwatch_index(w, pid, &found);

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
	if (msqd_fdproc_started(d->set.proc_root, pid, &p->since_real_ns) < 0)
		p->since_real_ns = msqd_realtime_ns();
	memmove(&w->p[i + 1], &w->p[i], (w->np - i) * sizeof(*w->p));
	w->p[i] = p;
	w->np++;
	return p;
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
	char path[128], dbuf[4096] __attribute__((aligned(8)));
	struct statfs sfs;
	unsigned looked = 0;
	int dfd, next_resume = p->fd_resume;
	bool cut = false;
	ssize_t got;

	p->fds_ns = d->now_ns;
	if (!p->maps_checked) {
		if (!msqd_fdwatch_spend(w, 8))
			return;
		p->maps_checked = true;
		if ((p->lib = msqd_fdproc_runs_library(d->set.proc_root, p->pid))) {
			log_debug("pid %d runs the library: its descriptors are its own to manage",
				  (int)p->pid);
			w->left_alone++;
			return;
		}
	}
	snprintf(path, sizeof(path), "%s/%d/fd", d->set.proc_root, (int)p->pid);
	if (MSQ_FAULT("madvseq/daemon/proc/fd") ||
	    (dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return;
	/* In /proc/PID/fd a directory offset is a descriptor's number (+2,
	 * past . and ..): a scan goes on after the last descriptor it
	 * reached without listing again all those below it. */
	if (p->fd_resume >= 0 && fstatfs(dfd, &sfs) == 0 && sfs.f_type == PROC_SUPER_MAGIC)
		lseek(dfd, (off_t)p->fd_resume + 3, SEEK_SET);
	/* A small buffer: one getdents64 makes the kernel build an entry
	 * (a dentry, an inode) for each descriptor it returns, and the
	 * slice's budget can stop only between two calls. */
	while (!cut && (got = getdents64(dfd, dbuf, sizeof(dbuf))) > 0) {
		for (ssize_t at = 0; at < got && !cut;) {
			struct dirent64 *de = (struct dirent64 *)(void *)(dbuf + at);
			struct fdw_file f = { 0 };
			struct stat st;
			char *end;
			long fd = strtol(de->d_name, &end, 10);

			at += de->d_reclen;
			if (*end || end == de->d_name || fd < 0 || fd > INT32_MAX || fd <= p->fd_resume)
				continue;
			if (++looked > FD_SCAN_MAX || !msqd_fdwatch_spend(w, 2)) {
				cut = true; /* (this one: the next scan's first) */
				break;
			}
			if (followed(p, (int)fd)) {
				next_resume = (int)fd;
				continue;
			}
			/* stat follows the magic link to the open file itself
			 * (any mount namespace); it opens nothing. */
			if (fstatat(dfd, de->d_name, &st, 0) < 0 || !S_ISREG(st.st_mode) ||
			    msqd_fdproc_fdinfo(d->set.proc_root, p->pid, (int)fd, &f.seq.pos, &f.flags,
					       &f.mnt_id, &f.ino) < 0 ||
			    (f.flags & (O_DIRECT | O_PATH)) || (f.ino && f.ino != (uint64_t)st.st_ino)) {
				next_resume = (int)fd;
				continue;
			}
			/* A file open for writing, even empty: the files this
			 * writer closes on that filesystem are reported from now
			 * on (one written and closed within a look is never seen
			 * here as a stream). */
			if ((f.flags & O_ACCMODE) != O_RDONLY)
				msqd_fdclosed_writer(d, p, (int)fd, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
			if (!st.st_size) {
				next_resume = (int)fd;
				continue;
			}
			if (!room(w, p)) {
				w->over_limits++;
				cut = true;
				break;
			}
			{
				struct fdw_file *v = realloc(p->f, (p->nf + 1) * sizeof(*v));

				if (!v) {
					cut = true;
					break;
				}
				p->f = v;
			}
			f.fd = (int)fd;
			f.dev = (uint64_t)st.st_dev;
			f.ino = (uint64_t)st.st_ino;
			f.size = (uint64_t)st.st_size;
			msqd_fdseq_observe(&f.seq, f.seq.pos);
			p->f[p->nf++] = f;
			next_resume = (int)fd;
		}
		/* (Each call is an operation of the budget too.) */
		if (!cut && !msqd_fdwatch_spend(w, 1))
			cut = true;
	}
	/* All read: the next scan starts from the first descriptor again. */
	p->fd_resume = cut ? next_resume : -1;
	close(dfd);
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

		if (!msqd_fdwatch_spend(w, 1))
			return moved;
		rc = msqd_fdproc_fdinfo(d->set.proc_root, p->pid, f->fd, &pos, &flags, &mnt_id, &ino);
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

			msqd_fdmanage_free(w, f);
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
			rc = msqd_fdmanage_act(d, p, f, g, mv == MSQD_FDSEQ_STILL);
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

/* One process's look.  Returns false when the slice ended before it
 * began. */
static bool look_proc(struct msqd_fdwatch *w, struct msqd *d, struct fdw_proc *p,
		      struct msqd_cg *g, unsigned *streams)
{
	uint64_t io, grew, moved = 0;

	if (!p->lib && !msqd_fdwatch_spend(w, 1))
		return false;
	p->seen_ns = d->now_ns;
	if (p->lib || msqd_fdproc_io(d->set.proc_root, p->pid, &io) < 0)
		return true;
	if (!msqd_pidfd_alive(p->pidfd)) {
		p->dead = true; /* (what was read may be a new process's) */
		return true;
	}
	grew = p->io_known && io >= p->io ? io - p->io : 0;
	p->io = io;
	p->io_known = true;
	if (p->nf)
		moved = follow(w, d, p, g, streams);
	/* Data moved that the followed positions do not explain: those
	 * that never moved are not what moves it, and make room for the
	 * next descriptors (among thousands, the stream is reached a
	 * MAX_FILES at a time). */
	if (!p->dead && grew - (moved < grew ? moved : grew) >= CAND_BYTES)
		for (size_t i = p->nf; i-- > 0;)
			if (!p->f[i].started && !p->f[i].streamed && p->f[i].idle)
				file_remove(w, p, i);
	/* Data moved that no followed position explains: a descriptor not
	 * followed yet (just opened, as a program goes from file to file),
	 * looked for at the next look already; otherwise now and then. */
	if (!p->dead && grew >= CAND_BYTES &&
	    d->now_ns - p->fds_ns >= (grew - (moved < grew ? moved : grew) >= CAND_BYTES
					      ? RESCAN_SOON_NS : FD_RESCAN_NS))
		scan_fds(w, d, p);
	return true;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return x < y ? -1 : x > y;
}

/* The processes of one hot cgroup (its cgroup.procs), by pid from where
 * the last look stopped, so that a look cut short leaves the others for
 * its next slice and none is starved. */
static void look_cgroup(struct msqd_fdwatch *w, struct msqd *d, struct msqd_cg *g,
			struct fdw_cg *c, const pid_t *shims, size_t ns)
{
	char dir[4096], file[4200];
	pid_t *pids = NULL, self = getpid();
	size_t n = 0, cap = 0, first = 0;
	unsigned streams = 0;
	FILE *f;
	long v;

	msqd_cgroup_dir(d->set.cg_root, g->path, g->layout, dir, sizeof(dir));
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
	if (n) /* (pids is NULL for an empty cgroup: not for qsort) */
		qsort(pids, n, sizeof(*pids), cmp_pid);
	while (first < n && pids[first] <= c->resume_pid)
		first++;
	for (size_t k = 0; k < n; k++) {
		pid_t pid = pids[(first + k) % n];
		struct fdw_proc *p;

		if (bsearch(&pid, shims, ns, sizeof(*shims), cmp_pid)) {
			/* Its library is connected: its own to manage. */
			forget(w, pid);
			continue;
		}
		if (w->cut)
			break;
		if (!(p = proc_get(d, pid, c)) || look_proc(w, d, p, g, &streams))
			c->resume_pid = pid;
	}
	/* (A slice's count, of the processes it reached: the cgroup stays
	 * looked into while any has a stream.) */
	if (streams || !w->cut)
		c->streams = streams;
	free(pids);
}

uint64_t msqd_fdwatch_step(struct msqd *d)
{
	struct msqd_fdwatch *w = &d->fdw;
	uint64_t t0 = msqd_now_ns(), now_ns = d->now_ns, period = d->set.conf.discover_watch_ns;
	bool fresh = !w->going_on, skipping = !fresh && w->resume_cg, hot = false;
	pid_t *shims;
	size_t ns = 0;

	if (fresh) {
		w->round++;
		w->looks++;
	}
	w->budget = BUDGET;
	w->until_ns = t0 + SLICE_NS;
	w->cut = false;
	shims = malloc((d->cl.n + 1) * sizeof(*shims));
	if (!shims)
		return period;
	for (struct msqd_client *c = d->cl.list; c; c = c->next)
		if (c->fd >= 0 && c->hello && !c->ctl)
			shims[ns++] = c->pid;
	qsort(shims, ns, sizeof(*shims), cmp_pid);
	for (struct msqd_cg *g = d->cgs.list; g; g = g->next) {
		struct fdw_cg *c;
		struct msqd_cg_filestat st;

		if (!g->pol->discover || g->pol->mode == MSQ_MODE_OFF || !(c = cg_get(w, g)))
			continue;
		c->round = w->round;
		/* The intake is read once a look, at its first slice (the
		 * cgroups after a cut too: their baselines stay a look's). */
		if (fresh) {
			if (msqd_cgroup_filestat(d->set.cg_root, g->path, g->layout, &c->intake_fd, &st) == 0) {
				uint64_t ch = st.charges >= c->intake.charges ? st.charges - c->intake.charges : 0,
					 fl = st.faults >= c->intake.faults ? st.faults - c->intake.faults : 0;

				if (c->known && (ch > fl + HOT_CHARGES ||
						 st.cache >= c->intake.cache + HOT_CACHE_BYTES))
					c->hot_until_ns = now_ns + HOT_NS;
				c->intake = st;
				c->known = true;
			}
			c->hot = now_ns < c->hot_until_ns || c->streams;
		}
		if (skipping) {
			if (strcmp(c->path, w->resume_cg))
				continue;
			skipping = false;
		}
		if (c->hot)
			hot = true;
		if (c->hot && !w->cut) {
			look_cgroup(w, d, g, c, shims, ns);
			if (w->cut) {
				free(w->resume_cg);
				w->resume_cg = strdup(c->path);
			}
		}
	}
	free(shims);
	/* Files the watched writers closed since the last look (before the
	 * exited ones are forgotten below). */
	msqd_fdclosed_step(d);
	if (w->cut)
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
	/* Cut short: the rest of the look once the loop served its clients. */
	w->going_on = w->cut;
	if (w->cut)
		return SLICE_GAP_NS;
	free(w->resume_cg);
	w->resume_cg = NULL;
	/* Quiet: half as often (the cgroups' intake is all there is to read). */
	return hot ? period : period * 2;
}

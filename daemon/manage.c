/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Managed regions and the management cycle: the shared engine
 * (common/stream.c) run against another process, through its pidfd
 * (process_madvise) and its /proc/PID/pagemap.  Advice is only ever
 * MADV_PAGEOUT or MADV_COLD, which never lose data (dirty pages are
 * written back first, anonymous pages stay without swap), so even a range
 * the client unmapped a moment ago cannot be harmed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../common/fault.h"
#include "../common/maps.h"
#include "../common/sys.h"
#include "../common/kernel_switch.h"
#include "daemon.h"
#include "log.h"

#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#define SNAP_STEP (UINT64_C(64) << 20)
#define GATE_RECHECK_NS (UINT64_C(1000) * 1000 * 1000)
#define IDLE_RECHECK_NS (UINT64_C(1000) * 1000 * 1000)
/* Aim for about this much to drop per cycle while streams run (as the
 * shim's engine does). */
#define TARGET_PER_CYCLE (4 * MSQ_CHUNK)

struct msqd_cg *msqd_cg_get(struct msqd *d, const char *path, enum msqd_cg_layout layout)
{
	struct msqd_cg *g;

	for (g = d->cgs; g; g = g->next)
		if (g->layout == layout && !strcmp(g->path, path))
			return g;
	if (MSQ_FAULT("madvseq/alloc") || !(g = calloc(1, sizeof(*g))))
		return NULL;
	if (!(g->path = strdup(path))) {
		free(g);
		return NULL;
	}
	g->layout = layout;
	g->intake.fd = -1;
	g->pol = msqd_conf_resolve(&d->conf, path, &g->section);
	g->next = d->cgs;
	d->cgs = g;
	return g;
}

void msqd_cg_reresolve(struct msqd *d)
{
	for (struct msqd_cg *g = d->cgs; g; g = g->next) {
		g->pol = msqd_conf_resolve(&d->conf, g->path, &g->section);
		g->gate_checked_ns = 0;
	}
}

struct check {
	uint64_t start, end, off, dev, ino;
	uint64_t covered; /* next address that must be covered */
	uint64_t vma_lo, vma_hi; /* the mapping the range starts in */
	bool shared, writable, bad;
	char path[PATH_MAX];
};

static int on_vma(const struct msq_vma *v, void *arg)
{
	struct check *k = arg;
	uint64_t a = v->start > k->start ? v->start : k->start;

	/* Contiguous, the same file, at the offsets the client named. */
	if (v->start > k->covered || (uint64_t)v->dev != k->dev || v->ino != k->ino || !v->ino ||
	    v->path[0] != '/' || !v->read || v->off + (a - v->start) != k->off + (a - k->start)) {
		k->bad = true;
		return 1;
	}
	if (a == k->start) {
		k->vma_lo = v->start;
		k->vma_hi = v->end;
		k->shared = v->shared;
		k->writable = v->write;
		snprintf(k->path, sizeof(k->path), "%s", v->path);
	} else if (v->shared != k->shared) {
		k->bad = true;
		return 1;
	}
	k->writable |= v->write;
	k->covered = v->end;
	return 0;
}

/* How far ahead of a reader the kernel may have read: fio's
 * POSIX_FADV_SEQUENTIAL doubles an 8 MiB read_ahead_kb, and two windows
 * can be in flight. */
#define READ_AHEAD_REACH (UINT64_C(32) << 20)

/*
 * The file range s maps, as far as the file goes, a window of up to
 * SNAP_STEP at a time: each window with anything cached (cachestat, which
 * costs per cached folio) is mapped from fd (advised MADV_RANDOM: faults
 * in it mark nothing accessed and read nothing ahead.  Under
 * MADV_SEQUENTIAL, faulting the page where a stream's read-ahead left its
 * mark would start the next read-ahead, whose pages come in after the
 * walk and stay), its residency read into a vector
 * (mincore, which tells the truth to a privileged caller but costs a
 * page-cache lookup per page, 25 ms for 2 GiB: not needed where cachestat
 * counted every page), fn called, and unmapped.
 * Stops at a window that cannot be mapped.  Returns 0, fn's first error,
 * or -errno.
 */
typedef int (*window_fn)(void *m, uint64_t len, uint64_t a, uint64_t foff,
			 const unsigned char *vec, void *arg);

static int each_cached_window(int fd, const struct stat *st, const struct msq_stream *s,
			      window_fn fn, void *arg)
{
	_cleanup_free_ unsigned char *vec = malloc(SNAP_STEP / 4096);
	int rc = 0;

	if (!vec)
		return -ENOMEM;
	for (uint64_t a = s->start; a < s->end && rc == 0; a += SNAP_STEP) {
		uint64_t len = s->end - a < SNAP_STEP ? s->end - a : SNAP_STEP;
		uint64_t foff = s->file_off + (a - s->start);
		bool all = false;
		void *m;

		if (foff >= (uint64_t)st->st_size)
			break;
		if (foff + len > (uint64_t)st->st_size)
			len = ((uint64_t)st->st_size - foff + 4095) & ~(uint64_t)4095;
		{
			struct msq_cachestat_range cr = { foff, len };
			struct msq_cachestat cs;

			if (msq_cachestat(fd, &cr, &cs) == 0) {
				if (cs.nr_cache == 0)
					continue; /* nothing cached: nothing for fn */
				all = cs.nr_cache == len / 4096;
			}
		}
		m = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd, (off_t)foff);
		if (m == MAP_FAILED)
			break;
		msq_sys_madvise(m, (size_t)len, MADV_RANDOM);
		if (all)
			memset(vec, 1, (size_t)(len / 4096)); /* cached through and through */
		else if (mincore(m, (size_t)len, vec) < 0)
			rc = -errno;
		if (rc == 0)
			rc = fn(m, len, a, foff, vec, arg);
		munmap(m, (size_t)len);
	}
	return rc;
}

/* Adds to out the runs of cached pages of a window (the client's
 * addresses [a, a + len)) that skip does not hold, each at its client
 * address + shift. */
static int add_cached_runs(const unsigned char *vec, uint64_t a, uint64_t len,
			   const struct msq_extents *skip, uint64_t shift, struct msq_extents *out)
{
	uint64_t run = 0;
	int rc = 0;

	for (uint64_t i = 0; i <= len / 4096 && rc == 0; i++) {
		uint64_t ca = a + i * 4096;
		bool in = i < len / 4096 && (vec[i] & 1) && !msq_extents_overlaps(skip, ca, ca + 4096);

		if (in && !run)
			run = ca + 1;
		if (!in && run) {
			rc = msq_extents_add(out, run - 1 + shift, ca + shift);
			run = 0;
		}
	}
	return rc;
}

/* snapshot(): what is cached outside the client's own pages. */
struct snap {
	const struct msq_extents *ahead;
	struct msq_extents *precached;
};

static int snap_window(void *m, uint64_t len, uint64_t a, uint64_t foff, const unsigned char *vec,
		       void *arg)
{
	struct snap *sn = arg;

	(void)m;
	(void)foff;
	return add_cached_runs(vec, a, len, sn->ahead, 0, sn->precached);
}

/*
 * The file the client maps at [vma_lo, vma_hi), whatever its mount
 * namespace (a container's file is not found by its path here), through
 * /proc/PID/map_files (CAP_SYS_ADMIN).  Held while the region is managed,
 * so that what the client leaves cached at exit can be found through it.
 * Returns the descriptor, or -1 (the path is then tried when needed).
 */
static int open_region_file(struct msqd *d, const struct msqd_client *c, uint64_t vma_lo,
			    uint64_t vma_hi, const struct msq_stream *s)
{
	char p[256];
	struct stat st;
	int fd;

	if (d->region_fds >= d->region_fd_budget || MSQ_FAULT("madvseq/daemon/proc/map_files"))
		return -1;
	snprintf(p, sizeof(p), "%s/%d/map_files/%llx-%llx", d->proc_root, (int)c->pid,
		 (unsigned long long)vma_lo, (unsigned long long)vma_hi);
	if ((fd = msq_open_same_file(p, s->dev, s->ino, true, &st)) < 0)
		return -1;
	d->region_fds++;
	return fd;
}

/* The region's file: its own descriptor, or opened by path (*opened set:
 * the caller closes it). */
static int region_file(const struct msqd_region *r, struct stat *st, bool *opened)
{
	*opened = r->fd < 0;
	if (r->fd < 0)
		return msq_open_same_file(r->s.path, r->s.dev, r->s.ino, true, st);
	return fstat(r->fd, st) < 0 ? -errno : r->fd;
}

static void region_free(struct msqd *d, struct msqd_region *r)
{
	if (r->fd >= 0) {
		close(r->fd);
		d->region_fds--;
	}
	msq_stream_free(&r->s);
	free(r);
}

/*
 * Pages of the file already cached before the region was handed over,
 * and not mapped by the client itself: strong references to keep, like
 * the shim's snapshot.  A stream found running (discovery) has read ahead
 * of each of its readers: pages within READ_AHEAD_REACH after a run of
 * mapped pages count as its own, not as cached before.  Best effort.
 */
static void snapshot(struct msqd_client *c, struct msqd_region *r)
{
	struct msq_stream *s = &r->s;
	struct stat st;
	struct msq_extents ahead = MSQ_EXTENTS_INIT;
	struct snap sn = { &ahead, &s->precached };
	bool opened;
	int fd, rc = 0;

	if ((fd = region_file(r, &st, &opened)) < 0)
		return;
	msq_extents_clear(&c->eng.present);
	msq_present_ranges(&c->eng.pm, s->start, s->end, &c->eng.present, NULL);
	/* The client's own pages: mapped, or read ahead of a run of mapped. */
	for (size_t i = 0; i < c->eng.present.n && rc == 0; i++)
		rc = msq_extents_add(&ahead, c->eng.present.v[i].start,
				     c->eng.present.v[i].end + READ_AHEAD_REACH);
	if (rc == 0)
		rc = each_cached_window(fd, &st, s, snap_window, &sn);
	s->precached_known = rc == 0;
	msq_extents_free(&ahead);
	if (opened)
		close(fd);
}

/* The client's own snapshot, clipped to the region. */
static int take_snapshot(struct msq_stream *s, const struct msq_wire_range *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t a = v[i].start > s->start ? v[i].start : s->start;
		uint64_t b = v[i].end < s->end ? v[i].end : s->end;
		int rc;

		if (a < b && (rc = msq_extents_add(&s->precached, a, b)) < 0)
			return rc;
	}
	s->precached_known = true;
	return 0;
}

int msqd_region_add(struct msqd *d, struct msqd_client *c, uint64_t id, uint64_t start,
		    uint64_t len, uint64_t dev, uint64_t ino, uint64_t off, bool checked_vma,
		    const char *path, bool shared, bool writable, const struct msq_wire_range *precached,
		    uint32_t nprecached)
{
	_cleanup_free_ struct check *k = calloc(1, sizeof(*k));
	struct msqd_region *r, **v;
	char maps[256];
	int rc;

	if (!k || MSQ_FAULT("madvseq/alloc"))
		return -ENOMEM;
	*k = (struct check){ .start = start, .end = start + len, .off = off, .dev = dev, .ino = ino,
			     .covered = start, .vma_lo = start, .vma_hi = start + len };
	if (!checked_vma) {
		snprintf(maps, sizeof(maps), "%s/%d/maps", d->proc_root, (int)c->pid);
		if (MSQ_FAULT("madvseq/daemon/proc/maps"))
			return -EIO;
		rc = msq_maps_foreach(maps, k->start, k->end, on_vma, k);
		if (rc < 0)
			return rc;
		if (k->bad || k->covered < k->end)
			return -EINVAL; /* not what the client maps there */
		/* Read while the pidfd's process was alive: its maps, no other's. */
		if (syscall(SYS_pidfd_send_signal, c->pidfd, 0, NULL, 0) < 0)
			return -ESRCH;
		path = k->path;
		shared = k->shared;
		writable = k->writable;
	}
	/* A range registered again (the client split or re-sent it) replaces
	 * what overlapped it. */
	for (size_t i = c->nr; i-- > 0;)
		if (c->r[i]->s.start < k->end && c->r[i]->s.end > start)
			msqd_region_remove(d, c, i);
	if (c->nr == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 4;

		if (!(v = realloc(c->r, cap * sizeof(*v))))
			return -ENOMEM;
		c->r = v;
		c->cap = cap;
	}
	if (!(r = calloc(1, sizeof(*r))))
		return -ENOMEM;
	/* As root the daemon may page out any file (MADV_PAGEOUT checks the
	 * caller's right to write the file, and CAP_FOWNER grants it). */
	rc = msq_stream_init(&r->s, start, start + len, off, (dev_t)dev, (ino_t)ino, path, shared,
			     writable, c->cg->pol->mode, true);
	if (rc < 0) {
		free(r);
		return rc;
	}
	r->id = id;
	r->fd = open_region_file(d, c, k->vma_lo, k->vma_hi, &r->s);
	{
		struct statfs sf;

		/* (Without the descriptor: the client's path, in the daemon's
		 * mount namespace; a container's file may not be found, and is
		 * then ours.) */
		bool known = r->fd >= 0 ? fstatfs(r->fd, &sf) == 0 : path && statfs(path, &sf) == 0;

		r->kernel_fs = known && msq_kernel_dropbehind_covers_fs((long)sf.f_type);
	}
	if (c->cg->pol->strong_refs && precached) {
		if ((rc = take_snapshot(&r->s, precached, nprecached)) < 0) {
			region_free(d, r);
			return rc;
		}
	} else if (c->cg->pol->strong_refs) {
		snapshot(c, r);
	}
	c->r[c->nr++] = r;
	c->cg->regions++;
	d->nregions++;
	/* A stream read from a warm cache moves a gigabyte a second: its
	 * first cycle must not wait for the (possibly long) period. */
	d->next_cycle_ns = d->now_ns;
	d->sleep_ns = 1000000;
	return 0;
}

/* Takes region i out of the client. */
static struct msqd_region *detach(struct msqd *d, struct msqd_client *c, size_t i)
{
	struct msqd_region *r = c->r[i];

	c->r[i] = c->r[--c->nr];
	if (c->cg)
		c->cg->regions--;
	d->nregions--;
	return r;
}

void msqd_region_remove(struct msqd *d, struct msqd_client *c, size_t i)
{
	region_free(d, detach(d, c, i));
}

bool msqd_gate_decide(const struct msqd_policy *p, const struct msqd_pressure *pr)
{
	if (!p->pressure_pct && p->psi_some_avg10 <= 0)
		return true;
	if (p->pressure_pct && pr->limit && pr->usage * 100 >= (uint64_t)p->pressure_pct * pr->limit)
		return true;
	return p->psi_some_avg10 > 0 && pr->some_avg10 >= p->psi_some_avg10;
}

/* The pressure gate: is this cgroup's memory tight enough to act? */
static bool gate_open(struct msqd *d, struct msqd_cg *g)
{
	const struct msqd_policy *p = g->pol;
	bool open = false;

	if (!p->pressure_pct && p->psi_some_avg10 <= 0)
		return true;
	if (g->gate_checked_ns && d->now_ns - g->gate_checked_ns < GATE_RECHECK_NS)
		return g->gate_open;
	g->gate_checked_ns = d->now_ns;
	if (msqd_cgroup_pressure(d->cg_root, d->proc_root, g->path, g->layout, &g->pr) < 0) {
		/* Cannot tell: act, as without a gate. */
		g->gate_open = true;
		return true;
	}
	open = msqd_gate_decide(p, &g->pr);
	if (open != g->gate_open)
		log_debug("cgroup %s: pressure gate %s", g->path, open ? "open" : "closed");
	g->gate_open = open;
	return open;
}

/* Time on CPU of the process's main thread, from /proc/PID/schedstat:
 * much cheaper to read than stat. */
static int read_runtime(const struct msqd_client *c, uint64_t *out)
{
	char buf[128];
	ssize_t n;

	if (c->schedfd < 0)
		return -EBADF;
	n = pread(c->schedfd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	*out = strtoull(buf, NULL, 10);
	return 0;
}

/* minflt + majflt of the whole process, from its open /proc/PID/stat. */
static int read_faults(struct msqd_client *c, uint64_t *out)
{
	char buf[1024], *p;
	unsigned long long minflt, majflt;
	uint64_t rt;
	ssize_t n;

	if (c->statfd < 0)
		return -EBADF;
	/* Single-threaded and not run since last time: no fault either. */
	if (c->threads == 1 && read_runtime(c, &rt) == 0) {
		if (rt == c->runtime) {
			*out = c->faults;
			return 0;
		}
		c->runtime = rt;
	}
	n = pread(c->statfd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	/* After the command name (which may hold spaces and parentheses):
	 * state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %llu %*u %llu %*u %*u %*u %*u %*d %*d %*d %ld",
		   &minflt, &majflt, &c->threads) != 3)
		return -EINVAL;
	*out = minflt + majflt;
	return 0;
}

/* The client's engine set for its cgroup's policy. */
static void engine_for_policy(struct msqd *d, struct msqd_client *c)
{
	const struct msqd_policy *p = c->cg->pol;

	c->eng.lag = p->lag;
	c->eng.filter = p->strong_refs && d->refs_ok ? msqd_refs_filter : NULL;
	c->eng.filter_arg = d;
}

/* Drops s as its policy says (one cycle, or all of it when flush);
 * counts what went.  Returns the cycle's result. */
static int64_t cycle_region(struct msqd *d, struct msqd_client *c, struct msq_stream *s, bool flush)
{
	uint64_t before = s->st.dropped, kept = s->st.kept, adv = c->eng.advice_cpu_ns;
	int64_t rc;

	s->how = c->cg->pol->mode == MSQ_MODE_COLD ? MSQ_DROP_COLD : MSQ_DROP_PAGEOUT;
	d->cur_cg = c->cg;
	rc = msq_stream_cycle(&c->eng, s, d->now_ns, flush);
	d->cur_cg = NULL;
	d->advice_cpu_ns += c->eng.advice_cpu_ns - adv;
	c->cg->dropped += s->st.dropped - before;
	c->cg->kept_mapped += s->st.kept - kept;
	d->dropped_total += s->st.dropped - before;
	return rc;
}

/* process_madvise said ESRCH: the client is exiting, but its pages stay
 * mapped until its pidfd says it has exited (msqd_client_closing). */
static void address_space_gone(struct msqd *d, struct msqd_client *c)
{
	c->dead = true;
	msqd_client_closing(d, c);
}

uint64_t msqd_region_final_drop(struct msqd *d, struct msqd_client *c, size_t i, uint64_t start,
				uint64_t end)
{
	struct msqd_region *r = c->r[i];
	struct msq_stream part;
	int64_t rc;

	if (!c->cg || c->dead || c->cg->pol->mode == MSQ_MODE_OFF || !gate_open(d, c->cg) ||
	    (d->kernel_state == 1 && r->kernel_fs))
		return 0;
	if (start < r->s.start)
		start = r->s.start;
	if (end > r->s.end)
		end = r->s.end;
	if (start >= end || msq_stream_clip(&part, &r->s, start, end) < 0)
		return 0;
	engine_for_policy(d, c);
	rc = cycle_region(d, c, &part, true);
	msq_stream_free(&part);
	if (rc == -ESRCH)
		address_space_gone(d, c);
	return rc > 0 ? (uint64_t)rc : 0;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

/*
 * An orphaned region's window, mapped by the daemon at m: the pages cached
 * there, less those cached before the stream and those in use elsewhere,
 * are added to o->files (file offsets) for fadvise(DONTNEED), which itself
 * leaves pages mapped by other processes, dirty or under writeback.  The
 * kpageflags check needs page frames, so the cached runs are faulted into
 * the daemon's own mapping (MADV_POPULATE_READ on cached pages reads
 * nothing).  Populating may mark a page accessed: the check then errs
 * towards keeping it.
 */
struct orphan {
	struct msqd *d;
	struct msqd_cg *cg;
	const struct msq_stream *s;
	struct msq_engine *own;
	struct msq_extents *files;
};

static int orphan_window(void *m, uint64_t len, uint64_t a, uint64_t foff, const unsigned char *vec,
			 void *arg)
{
	struct orphan *o = arg;
	uint64_t base = (uint64_t)(uintptr_t)m;
	struct msq_extents drop = MSQ_EXTENTS_INIT;
	struct msq_stream view;
	int rc = add_cached_runs(vec, a, len, &o->s->precached, base - a, &drop);

	if (rc == 0 && o->own->filter && drop.n) {
		struct msq_extents unseen = MSQ_EXTENTS_INIT;

		/* A run that cannot be looked at is kept. */
		for (size_t i = 0; i < drop.n && rc == 0; i++)
			if (msq_sys_madvise((void *)(uintptr_t)drop.v[i].start,
					    (size_t)(drop.v[i].end - drop.v[i].start), MADV_POPULATE_READ) < 0)
				rc = msq_extents_add(&unseen, drop.v[i].start, drop.v[i].end);
		for (size_t i = 0; i < unseen.n && rc == 0; i++)
			rc = msq_extents_remove(&drop, unseen.v[i].start, unseen.v[i].end);
		msq_extents_free(&unseen);
		view = (struct msq_stream){ .start = base, .end = base + len, .file_off = foff };
		o->d->cur_cg = o->cg;
		if (rc == 0)
			rc = o->own->filter(o->own, &view, &drop, o->own->filter_arg);
		o->d->cur_cg = NULL;
		msq_extents_free(&view.kept);
	}
	for (size_t i = 0; i < drop.n && rc == 0; i++)
		rc = msq_extents_add(o->files, foff + (drop.v[i].start - base),
				     foff + (drop.v[i].end - base));
	msq_extents_free(&drop);
	return rc;
}

/* What an exited client's region r left cached, through the file.
 * Returns bytes dropped. */
static uint64_t exit_drop(struct msqd *d, struct msqd_cg *g, const struct msqd_region *r)
{
	const struct msq_stream *s = &r->s;
	struct msq_extents files = MSQ_EXTENTS_INIT;
	struct msq_engine own;
	struct orphan o = { d, g, s, &own, &files };
	struct stat st;
	uint64_t dropped = 0;
	bool opened;
	int fd;

	if (!g || g->pol->mode != MSQ_MODE_PAGEOUT || !gate_open(d, g) ||
	    (d->kernel_state == 1 && r->kernel_fs) || !s->precached_known)
		return 0;
	/* All of it was cached before: nothing there is the stream's (and a
	 * thousand clients of one file exiting at once cost nothing). */
	if (msq_extents_covered(&s->precached, s->start, s->end) == s->end - s->start)
		return 0;
	if ((fd = region_file(r, &st, &opened)) < 0)
		return 0;
	/* The strong-reference check, on the daemon's own mapping. */
	msq_engine_init(&own, -1, 0);
	if (g->pol->strong_refs && d->refs_ok) {
		if (msq_pagemap_open(&own.pm, "/proc", 0, 0) < 0) {
			if (opened)
				close(fd);
			return 0; /* cannot check: keep it all */
		}
		own.filter = msqd_refs_filter;
		own.filter_arg = d;
	}
	/* What the windows found goes once they are unmapped (fadvise leaves
	 * mapped pages alone), even if a later window failed. */
	each_cached_window(fd, &st, s, orphan_window, &o);
	for (size_t j = 0; j < files.n; j++)
		if (syscall(SYS_fadvise64, fd, (off_t)files.v[j].start,
			    (off_t)(files.v[j].end - files.v[j].start), POSIX_FADV_DONTNEED) == 0)
			dropped += files.v[j].end - files.v[j].start;
	msq_extents_free(&files);
	msq_pagemap_close(&own.pm);
	msq_engine_free(&own);
	if (opened)
		close(fd);
	g->dropped += dropped;
	d->dropped_total += dropped;
	return dropped;
}

void msqd_region_exited(struct msqd *d, struct msqd_client *c, size_t i)
{
	struct msqd_leftover *l = calloc(1, sizeof(*l));

	if (!l) {
		msqd_region_remove(d, c, i); /* and its pages stay: nothing worse */
		return;
	}
	*l = (struct msqd_leftover){ .cg = c->cg, .pid = c->pid };
	l->r = detach(d, c, i);
	if (!d->leftovers)
		d->leftovers_tail = &d->leftovers;
	*d->leftovers_tail = l;
	d->leftovers_tail = &l->next;
	d->nleftovers++;
}

void msqd_exit_drops(struct msqd *d, uint64_t budget_ns)
{
	uint64_t t0 = msqd_now_ns();

	while (d->leftovers) {
		struct msqd_leftover *l = d->leftovers;
		uint64_t n;

		d->now_ns = msqd_now_ns();
		if (d->now_ns - t0 >= budget_ns)
			break;
		d->leftovers = l->next;
		d->nleftovers--;
		n = exit_drop(d, l->cg, l->r);
		log_debug("pid %d (exited): %llu KiB of what its region %#llx left cached dropped",
			  (int)l->pid, (unsigned long long)(n >> 10), (unsigned long long)l->r->s.start);
		region_free(d, l->r);
		free(l);
	}
}

void msqd_kernel_recheck(struct msqd *d)
{
	/* The patched kernel's own drop-behind, checked once a second: with it
	 * on, MADV_SEQUENTIAL mappings of the filesystems it covers are its. */
	if (d->now_ns - d->kernel_checked_ns >= UINT64_C(1000000000) || !d->kernel_checked_ns) {
		int k = msq_kernel_dropbehind_state(d->proc_root);

		if (k != d->kernel_state && d->kernel_checked_ns)
			log_info("kernel drop-behind (%s) is now %s", MSQ_KERNEL_DROPBEHIND_SYSCTL,
				 k == 1 ? "on: covered mappings are left to the kernel" : "off");
		d->kernel_state = k;
		d->kernel_checked_ns = d->now_ns;
	}
}

uint64_t msqd_cycle(struct msqd *d)
{
	uint64_t t0 = msqd_now_ns(), total = 0, left_to_kernel = 0;
	/* Idle clients due for a look are spread over cycles, a few each,
	 * so thousands of them never make one cycle long. */
	unsigned rechecks = 0, budget = d->nclients / 512 + 1;

	msqd_kernel_recheck(d);
	for (struct msqd_client *c = d->clients, *next; c; c = next) {
		const struct msqd_policy *p;

		next = c->next;
		if (!c->nr || !c->cg || c->dead || c->closing_ns)
			continue;
		p = c->cg->pol;
		if (p->mode == MSQ_MODE_OFF || !gate_open(d, c->cg))
			continue;
		/* Present pages appear only through the process's own page
		 * faults: with no new fault and nothing left to do last time,
		 * its regions are as they were.  Looked at anyway every
		 * IDLE_RECHECK_NS (kept pages are retried, readers may have
		 * been paged out by reclaim). */
		if (c->busy) {
			/* It dropped something last cycle: look again without
			 * reading its faults (which costs about as much as
			 * the look); they are read again once it goes quiet. */
			c->faults = UINT64_MAX;
		} else {
			uint64_t f = 0;
			bool known = read_faults(c, &f) == 0;

			if (known && f == c->faults &&
			    (d->now_ns - c->full_ns < IDLE_RECHECK_NS || rechecks >= budget)) {
				d->idle_skips++;
				continue;
			}
			if (known && f == c->faults)
				rechecks++;
			c->faults = known ? f : UINT64_MAX;
		}
		c->full_ns = d->now_ns;
		c->busy = false;
		engine_for_policy(d, c);
		for (size_t i = 0; i < c->nr; i++) {
			struct msq_stream *s = &c->r[i]->s;
			uint64_t before = s->st.dropped;
			int64_t rc;

			if (d->kernel_state == 1 && c->r[i]->kernel_fs) {
				left_to_kernel++;
				continue;
			}
			rc = cycle_region(d, c, s, false);
			if (s->st.dropped != before || rc < 0)
				c->busy = true;
			total += s->st.dropped - before;
			if (rc == -ESRCH) {
				address_space_gone(d, c);
				break;
			}
			if (rc < 0 && rc != -EAGAIN && s->st.errors == 1)
				log_debug("pid %d: region %#llx: %s", (int)c->pid,
					  (unsigned long long)s->start, strerror((int)-rc));
		}
	}
	d->kernel_regions = left_to_kernel;
	d->cycles++;
	d->last_cycle_ns = msqd_now_ns() - t0;
	if (d->last_cycle_ns > d->max_cycle_ns)
		d->max_cycle_ns = d->last_cycle_ns;
	/* Fast streams: shorten the period so each cycle drops about
	 * TARGET_PER_CYCLE; idle: back to the configured interval. */
	if (total > TARGET_PER_CYCLE)
		d->sleep_ns = d->sleep_ns * TARGET_PER_CYCLE / total;
	else if (total < TARGET_PER_CYCLE / 2)
		d->sleep_ns *= 2;
	if (d->sleep_ns < 1000000)
		d->sleep_ns = 1000000;
	if (d->sleep_ns > d->conf.interval_ns)
		d->sleep_ns = d->conf.interval_ns;
	return total;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Managed regions: what a client registers (or discovery finds) becomes a
 * region only where /proc/PID/maps shows that very file mapped there, read
 * while the client's pidfd shows it alive.  The region's file is held
 * through /proc/PID/map_files while the budget of descriptors allows, and
 * what was cached before the stream is recorded (the client's snapshot,
 * or the daemon's own) so that it is never dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../common/fault.h"
#include "../common/kernel_switch.h"
#include "../common/maps.h"
#include "../common/sys.h"
#include "msqd.h"
#include "regions.h"
#include "util.h"

#define SNAP_STEP (UINT64_C(64) << 20)

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
 * page-cache lookup per page: not needed where cachestat counted every
 * page), fn called, and unmapped.
 * Stops at a window that cannot be mapped.  Returns 0, fn's first error,
 * or -errno.
 */
int msqd_each_cached_window(int fd, const struct stat *st, const struct msq_stream *s, uint64_t *at,
			    uint64_t deadline_ns, msqd_window_fn fn, void *arg)
{
	_cleanup_free_ unsigned char *vec = malloc(SNAP_STEP / 4096);
	uint64_t a;
	int rc = 0;

	if (!vec)
		return -ENOMEM;
	/* (Each step advances by a whole window: validate.c keeps s page-
	 * aligned, and this loop ends whatever s holds.) */
	for (a = *at < s->start ? s->start : *at; a < s->end && rc == 0; a += SNAP_STEP) {
		if (deadline_ns && msqd_now_ns() >= deadline_ns)
			break; /* the rest next turn, from a */
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
		if (m == MAP_FAILED) {
			a = s->end;
			break;
		}
		msq_sys_madvise(m, (size_t)len, MADV_RANDOM);
		if (all)
			memset(vec, 1, (size_t)(len / 4096)); /* cached through and through */
		else if (mincore(m, (size_t)len, vec) < 0)
			rc = -errno;
		if (rc == 0)
			rc = fn(m, len, a, foff, vec, arg);
		munmap(m, (size_t)len);
	}
	/* Past the file's end, or done. */
	if (a >= s->end || s->file_off + (a - s->start) >= (uint64_t)st->st_size)
		a = s->end;
	*at = a;
	return rc;
}

/* Adds to out the runs of cached pages of a window (the client's
 * addresses [a, a + len)) that skip does not hold, each at its client
 * address + shift. */
int msqd_add_cached_runs(const unsigned char *vec, uint64_t a, uint64_t len,
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
	const struct msq_pagemap *pm; /* the client's */
	struct msq_extents *present;  /* scratch */
	struct msq_extents *ahead;    /* its own pages, growing window by window */
	struct msq_extents *precached;
};

static int snap_window(void *m, uint64_t len, uint64_t a, uint64_t foff, const unsigned char *vec,
		       void *arg)
{
	struct snap *sn = arg;
	int rc = 0;

	(void)m;
	(void)foff;
	/* The client's own pages in this window: mapped, or read ahead of a
	 * run of mapped (into the next windows too: they come later).  Read
	 * here, window by window, because only windows with pages cached
	 * come here: a mapping's pages are cached ones.  Read once for the
	 * whole region, a sparse mapping of terabytes cost the daemon that
	 * many pagemap entries at once, 8 bytes a page, where the kernel has
	 * no PAGEMAP_SCAN (before 6.7).  (Best effort: unread, its pages
	 * count as cached before, and are kept.) */
	msq_extents_clear(sn->present);
	if (msq_present_ranges(sn->pm, a, a + len, sn->present, NULL) == 0)
		for (size_t i = 0; i < sn->present->n && rc == 0; i++)
			rc = msq_extents_add(sn->ahead, sn->present->v[i].start,
					     sn->present->v[i].end + READ_AHEAD_REACH);
	if (rc < 0)
		return rc;
	return msqd_add_cached_runs(vec, a, len, sn->ahead, 0, sn->precached);
}

/*
 * The file the client maps at [vma_lo, vma_hi), whatever its mount
 * namespace (a container's file is not found by its path here), through
 * /proc/PID/map_files (CAP_SYS_ADMIN).  Held while the region is managed,
 * so that what the client leaves cached at exit can be found through it.
 * Returns the descriptor, or -1: the file is never opened by its path,
 * which names whatever the client makes it name by the time it is opened
 * (a directory swapped for a symlink to /etc).  held: counted against
 * region_fd_budget; else for the caller to close at once.
 */
static int open_region_file(struct msqd *d, const struct msqd_client *c, uint64_t vma_lo,
			    uint64_t vma_hi, const struct msq_stream *s, bool held)
{
	char p[256];
	struct stat st;
	int fd;

	if ((held && d->rg.fds >= d->rg.fd_budget) || MSQ_FAULT("madvseq/daemon/proc/map_files"))
		return -1;
	snprintf(p, sizeof(p), "%s/%d/map_files/%llx-%llx", d->set.proc_root, (int)c->pid,
		 (unsigned long long)vma_lo, (unsigned long long)vma_hi);
	if ((fd = msq_open_same_file(p, s->dev, s->ino, true, &st)) < 0)
		return -1;
	/* (Read while the process lived: its mapping, no later one's.) */
	if (!msqd_pidfd_alive(c->pidfd)) {
		close(fd);
		return -1;
	}
	d->rg.fds += held;
	return fd;
}

/* The region's file: its own descriptor, or opened by path (*opened set:
 * the caller closes it). */
int msqd_region_file(const struct msqd_region *r, struct stat *st)
{
	if (r->fd < 0)
		return -EBADF; /* never by path (see open_region_file) */
	return fstat(r->fd, st) < 0 ? -errno : r->fd;
}

static void snapshot_end(struct msqd *d, struct msqd_region *r, bool known);

void msqd_region_free(struct msqd *d, struct msqd_region *r)
{
	if (r->snapping)
		snapshot_end(d, r, false);
	if (r->fd >= 0) {
		close(r->fd);
		d->rg.fds--;
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
 *
 * The walk costs a cachestat per window of the mapping (a huge sparse
 * file takes long), so it is done in slices (msqd_snapshots, walk_budget
 * per turn of the event loop) and the region is not acted on until its
 * snapshot is done.  Here: the start.
 */
static void snapshot_begin(struct msqd *d, struct msqd_region *r)
{
	r->snap_at = r->s.start;
	r->snapping = true;
	d->rg.nsnapping++;
}

static void snapshot_end(struct msqd *d, struct msqd_region *r, bool known)
{
	r->s.precached_known = known;
	r->snapping = false;
	d->rg.nsnapping--;
	msq_extents_free(&r->snap_ahead);
}

/* One slice of r's walk, until deadline_ns.  Its file: the one held, or
 * else opened through /proc/PID/map_files for the slice, never by path;
 * neither: given up (what was cached before stays unknown). */
static void snapshot_slice(struct msqd *d, struct msqd_client *c, struct msqd_region *r,
			   uint64_t deadline_ns)
{
	struct snap sn = { &c->eng.pm, &c->eng.present, &r->snap_ahead, &r->s.precached };
	_cleanup_close_ int own = -1;
	struct stat st;
	int fd = r->fd, rc;

	if (fd < 0 && (own = open_region_file(d, c, r->vma_lo, r->vma_hi, &r->s, false)) < 0) {
		snapshot_end(d, r, false);
		return;
	}
	if (fd < 0)
		fd = own;
	if (fstat(fd, &st) < 0) {
		snapshot_end(d, r, false);
		return;
	}
	rc = msqd_each_cached_window(fd, &st, &r->s, &r->snap_at, deadline_ns, snap_window, &sn);
	if (rc < 0 || r->snap_at >= r->s.end)
		snapshot_end(d, r, rc == 0);
}

bool msqd_region_snapshot_now(struct msqd *d, struct msqd_client *c, struct msqd_region *r,
			      uint64_t deadline_ns)
{
	if (r->snapping)
		snapshot_slice(d, c, r, deadline_ns);
	return !r->snapping;
}

bool msqd_snapshots(struct msqd *d, uint64_t deadline_ns)
{
	for (struct msqd_client *c = d->cl.list; c && d->rg.nsnapping; c = c->next)
		for (size_t i = 0; i < c->nr && d->rg.nsnapping; i++) {
			if (!c->r[i]->snapping)
				continue;
			if (msqd_now_ns() >= deadline_ns)
				return true;
			snapshot_slice(d, c, c->r[i], deadline_ns);
		}
	return d->rg.nsnapping != 0;
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
		snprintf(maps, sizeof(maps), "%s/%d/maps", d->set.proc_root, (int)c->pid);
		if (MSQ_FAULT("madvseq/daemon/proc/maps"))
			return -EIO;
		rc = msq_maps_foreach(maps, k->start, k->end, on_vma, k);
		if (rc < 0)
			return rc;
		if (k->bad || k->covered < k->end)
			return -EINVAL; /* not what the client maps there */
		/* Read while the pidfd's process was alive: its maps, no other's. */
		if (!msqd_pidfd_alive(c->pidfd))
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
	r->vma_lo = k->vma_lo;
	r->vma_hi = k->vma_hi;
	r->fd = open_region_file(d, c, k->vma_lo, k->vma_hi, &r->s, true);
	{
		struct statfs sf;
		/* (Over the budget of held files: one opened for the look.) */
		_cleanup_close_ int own = r->fd < 0 ? open_region_file(d, c, k->vma_lo, k->vma_hi,
								       &r->s, false) : -1;
		int fd = r->fd >= 0 ? r->fd : own;

		r->kernel_fs = fd >= 0 && fstatfs(fd, &sf) == 0 &&
			       msq_kernel_dropbehind_covers_fs((long)sf.f_type);
	}
	if (c->cg->pol->strong_refs && precached) {
		if ((rc = take_snapshot(&r->s, precached, nprecached)) < 0) {
			msqd_region_free(d, r);
			return rc;
		}
	} else if (c->cg->pol->strong_refs) {
		snapshot_begin(d, r);
	}
	/* What the client costs: its bytes (the walks), its bookkeeping. */
	r->mem = sizeof(*r) + (path ? strlen(path) + 1 : 0) +
		 r->s.precached.cap * sizeof(*r->s.precached.v);
	c->bytes += r->s.end - r->s.start;
	c->mem += r->mem;
	c->r[c->nr++] = r;
	c->cg->regions++;
	d->rg.n++;
	/* A stream read from a warm cache moves a gigabyte a second: its
	 * first cycle must not wait for the (possibly long) period. */
	d->cyc.next_ns = d->now_ns;
	d->cyc.sleep_ns = 1000000;
	return 0;
}

/* Takes region i out of the client. */
struct msqd_region *msqd_region_detach(struct msqd *d, struct msqd_client *c, size_t i)
{
	struct msqd_region *r = c->r[i];

	c->r[i] = c->r[--c->nr];
	c->bytes -= r->s.end - r->s.start;
	c->mem -= r->mem;
	if (c->cg)
		c->cg->regions--;
	d->rg.n--;
	return r;
}

void msqd_region_remove(struct msqd *d, struct msqd_client *c, size_t i)
{
	msqd_region_free(d, msqd_region_detach(d, c, i));
}

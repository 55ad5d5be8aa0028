/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Exit drops: a client that exited (no library, or killed by a signal)
 * with regions still managed left their pages cached.  Each such region
 * goes to a queue; from there what it left cached, less what was cached
 * before and what others use, is dropped through the file
 * (POSIX_FADV_DONTNEED), a slice of time at a time between events so that
 * a thousand programs exiting at once do not stop the daemon.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/sys.h"
#include "msqd.h"
#include "exitdrop.h"
#include "faultin.h"
#include "log.h"
#include "refs.h"
#include "regions.h"
#include "util.h"

/*
 * An orphaned region's window, mapped by the daemon at m: the pages cached
 * there, less those cached before the stream and those in use elsewhere,
 * are added to o->files (file offsets) for fadvise(DONTNEED), which itself
 * leaves pages mapped by other processes, dirty or under writeback.  The
 * kpageflags check needs page frames, so the cached runs are faulted into
 * the daemon's own mapping, in a way that leaves the pages' flags as others
 * left them (faultin.c): the daemon's own look must not count as a use.
 */
struct orphan {
	struct msqd *d;
	struct msqd_cg *cg;
	const struct msq_stream *s;
	struct msq_engine *own;
	struct msq_extents *files;
	struct msqd_faultin fi;
};

static int orphan_window(void *m, uint64_t len, uint64_t a, uint64_t foff, const unsigned char *vec,
			 void *arg)
{
	struct orphan *o = arg;
	uint64_t base = (uint64_t)(uintptr_t)m;
	struct msq_extents drop = MSQ_EXTENTS_INIT;
	struct msq_stream view;
	int rc = msqd_add_cached_runs(vec, a, len, &o->s->precached, base - a, &drop);

	if (rc == 0 && o->own->filter && drop.n) {
		struct msq_extents unseen = MSQ_EXTENTS_INIT;

		/* A run that cannot be looked at is kept. */
		for (size_t i = 0; i < drop.n && rc == 0; i++)
			if (msqd_faultin(&o->fi, (const void *)(uintptr_t)drop.v[i].start,
					 (size_t)(drop.v[i].end - drop.v[i].start)) < 0)
				rc = msq_extents_add(&unseen, drop.v[i].start, drop.v[i].end);
		for (size_t i = 0; i < unseen.n && rc == 0; i++)
			rc = msq_extents_remove(&drop, unseen.v[i].start, unseen.v[i].end);
		msq_extents_free(&unseen);
		view = (struct msq_stream){ .start = base, .end = base + len, .file_off = foff };
		if (rc == 0)
			rc = o->own->filter(o->own, &view, &drop,
					    &(struct msqd_refs_check){ o->d, o->cg });
		msq_extents_free(&view.kept);
	}
	for (size_t i = 0; i < drop.n && rc == 0; i++)
		rc = msq_extents_add(o->files, foff + (drop.v[i].start - base),
				     foff + (drop.v[i].end - base));
	msq_extents_free(&drop);
	return rc;
}

/* What an exited client's region left cached, through the file it held,
 * from l->at on until deadline_ns.  Returns whether it is done. */
static bool exit_drop(struct msqd *d, struct msqd_leftover *l, uint64_t deadline_ns)
{
	const struct msqd_region *r = l->r;
	struct msqd_cg *g = l->cg;
	const struct msq_stream *s = &r->s;
	struct msq_extents files = MSQ_EXTENTS_INIT;
	struct msq_engine own;
	struct orphan o = { d, g, s, &own, &files, { { -1, -1 } } };
	struct stat st;
	uint64_t dropped = 0;
	int fd;

	if (!g || g->pol->mode != MSQ_MODE_PAGEOUT || !msqd_gate_open(d, g) ||
	    (r->kernel_fs && msqd_kernel_covers(d, g)))
		return true;
	if ((fd = msqd_region_file(r, &st)) < 0) {
		/* No descriptor held (over the budget, or map_files failed):
		 * the path is the client's to point anywhere, so it stays. */
		d->xd.skipped++;
		log_debug("pid %d (exited): region %#llx has no file held; its pages stay",
			  (int)l->pid, (unsigned long long)s->start);
		return true;
	}
	/* Nothing known of what was cached before: all of it stays.  All of
	 * it was cached before: nothing there is the stream's (and a
	 * thousand clients of one file exiting at once cost nothing). */
	if (!s->precached_known ||
	    msq_extents_covered(&s->precached, s->start, s->end) == s->end - s->start)
		return true;
	/* Mapped with no advice and not read through: what the program read
	 * here may be its own working set, not a stream's (the cycles already
	 * dropped what lay a lag behind the part it read front to back). */
	if (s->unadvised && !msq_read_through(s->start, s->end, s->rt.through))
		return true;
	/* The strong-reference check, on the daemon's own mapping. */
	msq_engine_init(&own, -1, 0);
	if (g->pol->strong_refs && d->refs.ok) {
		if (msq_pagemap_open(&own.pm, "/proc", 0, 0) < 0)
			return true; /* cannot check: keep it all */
		if (msqd_faultin_open(&o.fi) < 0) {
			msq_pagemap_close(&own.pm);
			return true;
		}
		own.filter = msqd_refs_filter; /* (its argument: orphan_window) */
	}
	/* What the windows found goes once they are unmapped (fadvise leaves
	 * mapped pages alone), even if a later window failed. */
	if (msqd_each_cached_window(fd, &st, s, &l->at, deadline_ns, orphan_window, &o) < 0)
		l->at = s->end;
	for (size_t j = 0; j < files.n; j++)
		if (syscall(SYS_fadvise64, fd, (off_t)files.v[j].start,
			    (off_t)(files.v[j].end - files.v[j].start), POSIX_FADV_DONTNEED) == 0)
			dropped += files.v[j].end - files.v[j].start;
	msq_extents_free(&files);
	msqd_faultin_close(&o.fi);
	msq_pagemap_close(&own.pm);
	msq_engine_free(&own);
	g->dropped += dropped;
	d->cnt.dropped += dropped;
	l->dropped += dropped;
	return l->at >= s->end;
}

void msqd_region_exited(struct msqd *d, struct msqd_client *c, size_t i)
{
	struct msqd_leftover *l = calloc(1, sizeof(*l));

	if (!l) {
		msqd_region_remove(d, c, i); /* and its pages stay: nothing worse */
		return;
	}
	*l = (struct msqd_leftover){ .cg = c->cg, .pid = c->pid };
	l->r = msqd_region_detach(d, c, i);
	l->at = l->r->s.start;
	if (l->cg)
		l->cg->leftovers++;
	if (!d->xd.queue)
		d->xd.tail = &d->xd.queue;
	*d->xd.tail = l;
	d->xd.tail = &l->next;
	d->xd.n++;
}

void msqd_exit_drops(struct msqd *d, uint64_t deadline_ns)
{
	while (d->xd.queue) {
		struct msqd_leftover *l = d->xd.queue;

		d->now_ns = msqd_now_ns();
		if (d->now_ns >= deadline_ns)
			break;
		/* A long walk goes on next turn, where it stopped. */
		if (!exit_drop(d, l, deadline_ns))
			break;
		d->xd.queue = l->next;
		d->xd.n--;
		log_debug("pid %d (exited): %llu KiB of what its region %#llx left cached dropped",
			  (int)l->pid, (unsigned long long)(l->dropped >> 10),
			  (unsigned long long)l->r->s.start);
		if (l->cg)
			l->cg->leftovers--;
		msqd_region_free(d, l->r);
		free(l);
	}
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "track.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/fault.h"
#include "../common/frontier.h"
#include "../common/kernel_switch.h"
#include "../common/maps.h"
#include "../common/sys.h"
#include "daemon_client.h"
#include "engine_thread.h"
#include "fdstream.h"
#include "log.h"
#include "regions.h"
#include "settings.h"

#define MAX_VMAS 64 /* per madvise call; more are left untracked */
#define SNAPSHOT_STEP (UINT64_C(64) << 20)

struct collect {
	uint64_t lo, hi;
	struct msq_region *r[MAX_VMAS];
	size_t n;
};

/* Pages of s already in the page cache: strong references to keep.
 * Only meaningful where mincore tells the truth (may_write). */
static int snapshot(struct msq_stream *s)
{
	unsigned char *vec;
	int rc = 0;

	if (MSQ_FAULT("madvseq/alloc") || !(vec = malloc(SNAPSHOT_STEP / 4096)))
		return -ENOMEM;
	rc = msq_cached_ranges(s->start, s->end, vec, SNAPSHOT_STEP / 4096, &s->precached);
	free(vec);
	s->precached_known = rc == 0;
	if (rc < 0)
		msq_extents_clear(&s->precached);
	return rc;
}

/* Whether MADV_PAGEOUT acts on the file and mincore tells the truth about
 * it: the kernel asks for its owner or the right to write it (path names
 * the file st describes). */
static bool may_write(const struct stat *st, const char *path)
{
	return st->st_uid == geteuid() || faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0;
}

static int on_vma(const struct msq_vma *v, void *arg)
{
	struct collect *c = arg;
	uint64_t start = v->start > c->lo ? v->start : c->lo;
	uint64_t end = v->end < c->hi ? v->end : c->hi;
	struct msq_region *r;
	struct stat st;
	bool same, writes;

	if (!v->ino || v->path[0] != '/')
		return 0; /* anonymous or special: no page cache to manage */
	if (c->n == MAX_VMAS)
		return 1;
	/* Is the path still the file we map (not deleted or replaced)? */
	same = stat(v->path, &st) == 0 && st.st_ino == v->ino && st.st_dev == v->dev;
	writes = same && may_write(&st, v->path);
	if (MSQ_FAULT("madvseq/alloc") || !(r = calloc(1, sizeof(*r))))
		return 0;
	if (msq_stream_init(&r->s, start, end, v->off + (start - v->start), v->dev, v->ino,
			    same ? v->path : NULL, v->shared, v->write, msq_cfg.policy.mode,
			    writes) < 0) {
		free(r);
		return 0;
	}
	if (msq_kernel_covers(NULL)) {
		struct statfs sf;

		/* The patched kernel drops behind MADV_SEQUENTIAL faults of
		 * page-cache files itself, exactly: leave those to it. */
		r->kernel = statfs(v->path, &sf) == 0 && msq_kernel_dropbehind_covers_fs((long)sf.f_type);
	}
	if (writes && !r->kernel)
		snapshot(&r->s);
	c->r[c->n++] = r;
	return 0;
}

void msq_track_sequential(uint64_t start, uint64_t end)
{
	struct collect c = { .lo = start, .hi = end };
	char pre[32];
	int rc;

	/* With the table lock held from reading the maps to inserting: a
	 * munmap or mremap of the range by another thread (its wrapper takes
	 * the same lock) comes wholly before, and then nothing is found, or
	 * wholly after, and then it untracks what was inserted.  Never a
	 * region for a range that is no longer what the maps said. */
	msq_track_lock();
	rc = msq_maps_foreach("/proc/self/maps", start, end, on_vma, &c);
	if (rc < 0)
		msq_debug("cannot read /proc/self/maps (%s): %#" PRIx64 "-%#" PRIx64 " not tracked",
			  strerror(-rc), start, end);
	if (!c.n) {
		msq_track_unlock();
		return;
	}
	for (size_t i = 0; i < c.n; i++) {
		struct msq_region *r = c.r[i];
		uint64_t s = r->s.start, e = r->s.end;
		bool known = r->s.precached_known, kernel = r->kernel;
		enum msq_drop_how how = r->s.how;

		msq_format_size(msq_extents_total(&r->s.precached), pre, sizeof(pre));
		if (msq_regions_insert(r) < 0) {
			msq_stream_free(&r->s);
			free(r);
			continue;
		}
		/* r may have been merged and freed: report from the copies. */
		if (kernel)
			msq_debug("tracking %#" PRIx64 "-%#" PRIx64 ": the kernel's drop-behind covers "
				  "it: left to the kernel", s, e);
		else
			msq_debug("tracking %#" PRIx64 "-%#" PRIx64 " (%s): %s%s", s, e,
				  msq_drop_how_name(how), known ? "cached before: " : "",
				  known ? pre : "cannot tell what was cached before (file not writable)");
	}
	msq_ethread_start();
	msq_track_unlock();
}

void msq_track_mapped(uint64_t start, uint64_t len, int fd, uint64_t off, bool shared)
{
	uint64_t end = (start + len + 4095) & ~(uint64_t)4095;
	struct msq_region *r;
	struct stat st;
	char self[40], pre[32], path[512];
	long n;

	if (msq_fds_mode != MSQ_READ_ALL || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	/* Only where MADV_PAGEOUT works and mincore tells what was cached
	 * before: without that snapshot, nothing says whose pages these are.
	 * (The kernel asks for the right to write the file, whatever the
	 * descriptor was opened for.) */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	if (!may_write(&st, self))
		return;
	/* Its name, to open it again for the last drop (msq_stream_cycle's
	 * flush: pages reclaim unmapped but left cached); the stream checks
	 * it is still the same file then.  None if too long. */
	n = (long)MSQ_SYSCALL(SYS_readlinkat, AT_FDCWD, self, path, sizeof(path) - 1);
	path[n > 0 && n < (long)sizeof(path) - 1 ? n : 0] = '\0';
	if (MSQ_FAULT("madvseq/alloc") || !(r = calloc(1, sizeof(*r))))
		return;
	if (msq_stream_init(&r->s, start, end, off, st.st_dev, st.st_ino, path[0] == '/' ? path : NULL,
			    shared, false, msq_cfg.policy.mode, true) < 0) {
		free(r);
		return;
	}
	r->s.unadvised = true;
	if (snapshot(&r->s) < 0) {
		msq_stream_free(&r->s);
		free(r);
		return;
	}
	msq_format_size(msq_extents_total(&r->s.precached), pre, sizeof(pre));
	msq_track_lock();
	if (msq_regions_insert(r) < 0) {
		msq_track_unlock();
		msq_stream_free(&r->s);
		free(r);
		return;
	}
	msq_debug("tracking %#" PRIx64 "-%#" PRIx64 " (mapped with no advice: dropped once read "
		  "front to back): cached before: %s", start, end, pre);
	msq_ethread_start();
	msq_track_unlock();
}

void msq_track_lock(void)
{
	msq_regions_lock();
}

void msq_track_unlock(void)
{
	msq_regions_unlock();
}

/* retire() without the final drop: the range is no longer the mapping it
 * was, or the program asked for its pages to be left alone.  (With the
 * drop: msq_ethread_retire, which leaves the daemon's parts to it.) */
static void retire_quietly(struct msq_region *part, void *arg)
{
	(void)arg;
	msq_ethread_account(part);
}

/* Locked: takes [start, end) out of the table, retiring what goes. */
static void remove_locked(uint64_t start, uint64_t end,
			  void (*retire)(struct msq_region *, void *), void *arg)
{
	if (msq_regions_remove(start, end, retire, arg) < 0)
		/* Out of memory: a stale entry could aim the engine at whatever
		 * is mapped there next, so stop tracking everything instead. */
		msq_regions_clear(retire, arg);
}

void msq_track_forget(uint64_t start, uint64_t end, bool flush)
{
	struct msq_handover h;
	bool daemon_took;

	h.n = 0;
	msq_track_lock();
	if (flush)
		remove_locked(start, end, msq_ethread_retire_handing_over, &h);
	else
		remove_locked(start, end, retire_quietly, NULL);
	msq_track_unlock();
	/* Outside the table lock: a final unregister waits for the daemon. */
	daemon_took = msq_daemon_forget(start, end, flush);
	if (h.n) {
		/* Still mapped: the caller unmaps it after this. */
		msq_track_lock();
		msq_ethread_handover_end(&h, daemon_took);
		msq_track_unlock();
	}
}

void msq_track_moved_locked(uint64_t old, uint64_t old_len, uint64_t new_addr, uint64_t new_len,
			    bool keep_old)
{
	/* A non-final unregister: sent without waiting for the answer. */
	msq_daemon_forget(old, old + old_len, false);
	if (msq_regions_move(old, old_len, new_addr, new_len, keep_old) < 0)
		msq_regions_clear(retire_quietly, NULL);
}

void msq_track_writable(uint64_t start, uint64_t end)
{
	struct msq_range parts[8];
	size_t n = 0;
	bool more = true;

	/* Private parts only: copy-on-write data may appear in them once
	 * writable, and MADV_DONTNEED would discard it.  A few at a time. */
	while (more) {
		msq_track_lock();
		n = 0;
		more = false;
		for (size_t i = 0;; i++) {
			struct msq_region *r = msq_regions_at(i);

			if (!r)
				break;
			if (r->s.shared || r->s.end <= start || r->s.start >= end)
				continue;
			if (n == sizeof(parts) / sizeof(parts[0])) {
				more = true;
				break;
			}
			parts[n++] = (struct msq_range){ r->s.start > start ? r->s.start : start,
							 r->s.end < end ? r->s.end : end };
		}
		for (size_t i = 0; i < n; i++) {
			remove_locked(parts[i].start, parts[i].end, retire_quietly, NULL);
			msq_debug("%#llx-%#llx made writable: no longer tracked (private mapping)",
				  (unsigned long long)parts[i].start, (unsigned long long)parts[i].end);
		}
		msq_track_unlock();
		for (size_t i = 0; i < n; i++)
			msq_daemon_forget(parts[i].start, parts[i].end, false);
	}
}

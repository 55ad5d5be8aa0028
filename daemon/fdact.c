/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Acting on a borrowed descriptor (see fdact.h).  Closing the duplicate is
 * the last thing done with it and happens within the same call as the
 * borrow (fdwatch.c): where the program closed its own descriptor in
 * between, the daemon's close is the file's last one, and what the last
 * close does (a pipe's EOF, a lease's release) comes that much later, by
 * microseconds, never not at all.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../common/fault.h"
#include "../common/sys.h"
#include "fdact.h"

#define PAGE UINT64_C(4096)

int msqd_fdact_borrow(int pidfd, int fd, uint64_t dev, uint64_t ino, struct stat *st)
{
	struct statfs sf;
	int dup, fl, e;

	if (MSQ_FAULT("madvseq/daemon/fd/getfd"))
		return -EPERM;
	dup = msq_pidfd_getfd(pidfd, fd);
	if (dup < 0)
		return -errno;
	/* (fstat, fcntl(F_GETFL) and fstatfs change nothing of the file.) */
	if (fstat(dup, st) < 0 || (fl = fcntl(dup, F_GETFL)) < 0 || fstatfs(dup, &sf) < 0) {
		e = -errno;
		close(dup);
		return e;
	}
	if (!S_ISREG(st->st_mode) || (uint64_t)st->st_dev != dev || (uint64_t)st->st_ino != ino ||
	    (fl & (O_DIRECT | O_PATH)) || sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC) {
		close(dup);
		return -ESTALE;
	}
	return dup;
}

int64_t msqd_fdact_cached(int fd, uint64_t from, uint64_t to)
{
	struct msq_cachestat_range r = { from, to - from };
	struct msq_cachestat cs;

	if (to <= from)
		return 0;
	if (MSQ_FAULT("madvseq/daemon/fd/cachestat"))
		return -EPERM;
	if (msq_cachestat(fd, &r, &cs) < 0)
		return -errno;
	return (int64_t)(cs.nr_cache * PAGE);
}

/* [a, b) page-aligned (b may be past the end of the file). */
static int snap(int fd, uint64_t a, uint64_t b, uint64_t size, struct msq_extents *pre, size_t max)
{
	uint64_t full = (b < size ? b : (size + PAGE - 1) & ~(PAGE - 1)) - a;
	int64_t c = msqd_fdact_cached(fd, a, b);

	if (c < 0)
		return (int)c;
	if (c == 0)
		return 0;
	if ((uint64_t)c >= full || b - a <= PAGE)
		return pre->n >= max ? -E2BIG : msq_extents_add(pre, a, b < size ? b : a + full);
	{
		uint64_t mid = a + (((b - a) / 2) & ~(PAGE - 1));
		int rc = snap(fd, a, mid, size, pre, max);

		return rc < 0 ? rc : snap(fd, mid, b, size, pre, max);
	}
}

int msqd_fdact_snapshot(int fd, uint64_t from, uint64_t to, uint64_t size, struct msq_extents *pre,
			size_t max_ranges, uint64_t *reached)
{
	/* A chunk at a time, so that a snapshot cut short by max_ranges is
	 * still complete up to a chunk boundary. */
	const uint64_t step = UINT64_C(2) << 20;
	uint64_t a;
	int rc = 0;

	from &= ~(PAGE - 1);
	for (a = from; a < to; a += step) {
		uint64_t b = to - a < step ? to : a + step;

		if (a >= size)
			break; /* nothing cached past the end (appended later: not before) */
		if ((rc = snap(fd, a, b, size, pre, max_ranges)) < 0)
			break;
	}
	if (rc == -E2BIG || rc == -ENOMEM) {
		/* What the last chunk added may be partial: keep it (more stays
		 * cached, never less), but the snapshot ends before it. */
		*reached = a;
		return 0;
	}
	if (rc < 0)
		return rc;
	*reached = to;
	return 0;
}

/* One chunk [a, b): dropped if no page of it is dirty or under writeback,
 * else added to left.  0 or -errno. */
static int drop_chunk(int fd, uint64_t a, uint64_t b, uint64_t *dropped, struct msq_extents *left)
{
	struct msq_cachestat_range cr = { a, b - a };
	struct msq_cachestat cs;
	int64_t before, after;
	int r;

	if (msq_cachestat(fd, &cr, &cs) < 0)
		return -errno;
	before = (int64_t)(cs.nr_cache * PAGE);
	if (before == 0)
		return 0;
	if (cs.nr_dirty || cs.nr_writeback) {
		/* DONTNEED would start (and may wait on) the writeback itself,
		 * in the daemon's only thread: tried again once the writeback
		 * sync_file_range started has made the pages clean. */
		return left && msq_extents_add(left, a, b) < 0 ? -ENOMEM : 0;
	}
	if (MSQ_FAULT("madvseq/daemon/fd/fadvise"))
		r = -EIO;
	else
		r = msq_sys_fadvise(fd, a, b - a, POSIX_FADV_DONTNEED);
	if (r < 0)
		return r;
	after = msqd_fdact_cached(fd, a, b);
	if (after >= 0 && after < before)
		*dropped += (uint64_t)(before - after);
	return left && after != 0 && msq_extents_add(left, a, b) < 0 ? -ENOMEM : 0;
}

int msqd_fdact_drop(int fd, const struct msq_extents *drop, uint64_t *dropped,
		    struct msq_extents *left)
{
	/* Chunk by chunk: a write stream's pages behind it are clean in order
	 * of their writeback, and one dirty page must hold back its chunk
	 * alone, not the whole range. */
	const uint64_t step = UINT64_C(2) << 20;
	int rc = 0;

	*dropped = 0;
	for (size_t i = 0; i < drop->n; i++) {
		for (uint64_t a = drop->v[i].start; a < drop->v[i].end;) {
			uint64_t b = (a & ~(step - 1)) + step;
			int r;

			if (b > drop->v[i].end)
				b = drop->v[i].end;
			if ((r = drop_chunk(fd, a, b, dropped, left)) < 0 && !rc)
				rc = r;
			a = b;
		}
	}
	return rc;
}

int msqd_fdact_writeback(int fd, uint64_t from, uint64_t to)
{
	if (to <= from)
		return 0;
	/* (WRITE alone: starts writeback of what is dirty, waits for none of
	 * it, though a full request queue may hold it for a moment.) */
	if (sync_file_range(fd, (off_t)from, (off_t)(to - from), SYNC_FILE_RANGE_WRITE) < 0)
		return -errno;
	return 0;
}

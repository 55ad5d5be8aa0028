/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fd streams, the decisions alone (pure: no system calls, no clock): is
 * this sequence of offsets a stream, how far ahead of it the cached-before
 * snapshot must be, and what behind it may be dropped.  The daemon's
 * fdwatch.c observes (/proc), fdact.c acts; both ask these.
 *
 * Offsets are a program's file position (/proc/PID/fdinfo pos), seen now
 * and then: a stream is a position that moves forward, by bounded steps,
 * look after look.  What lies behind it is the stream's only where the
 * snapshot was taken before the stream got there ("known"): the pages the
 * snapshot found cached are someone else's and stay, and so does anything
 * the stream passed before the daemon looked ahead of it.
 */
#ifndef MSQD_FDSEQ_H
#define MSQD_FDSEQ_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/extents.h"

/* A step forward larger than this between two looks is a seek, not a
 * stream (a look comes every few tens of ms: 64 GiB/s is no disk). */
#define MSQD_FDSEQ_MAX_STEP (UINT64_C(4) << 30)
/* A stream has moved at least this far, in at least two steps. */
#define MSQD_FDSEQ_MIN_BYTES (UINT64_C(4) << 20)
/* What read-ahead may have brought in past the position by the time it is
 * looked at (a doubled read-ahead window, rounded up): never in the
 * snapshot, which must hold only pages cached before the stream. */
#define MSQD_FDSEQ_MARGIN (UINT64_C(8) << 20)

struct msqd_fdseq {
	uint64_t pos;     /* the last position seen */
	uint64_t from;    /* where the current forward run began */
	unsigned steps;   /* forward moves in this run */
	bool seen;
	bool stream;
};

enum msqd_fdseq_move {
	MSQD_FDSEQ_FIRST,   /* first look: a baseline */
	MSQD_FDSEQ_STILL,   /* the same position */
	MSQD_FDSEQ_FORWARD, /* moved forward by a stream's step */
	MSQD_FDSEQ_RESTART, /* moved back, or jumped: a new run from here */
};

/* Takes position pos into q.  Returns what it did. */
enum msqd_fdseq_move msqd_fdseq_observe(struct msqd_fdseq *q, uint64_t pos);

/*
 * The snapshot ahead of a stream at pos: everything from *snap_end (where
 * the last one ended) to pos + ahead should be looked at now.  Where the
 * stream (pos + MSQD_FDSEQ_MARGIN) already passed *snap_end, the pages in
 * between may be the stream's: that part is skipped, never known.  Sets
 * [*from, *to) to what to look at now (empty: nothing), chunk-aligned, and
 * clipped to the file's size.
 */
void msqd_fdseq_snap_window(uint64_t pos, uint64_t snap_end, uint64_t size, uint64_t ahead,
			    uint64_t *from, uint64_t *to);

struct msqd_fdseq_plan_in {
	uint64_t pos;   /* the stream's position now */
	uint64_t lag;   /* bytes kept behind it */
	uint64_t done;  /* below this, already planned */
	bool at_end;    /* the reader is at the file's end and stays: its lag may go too */
	uint64_t size;  /* the file's size now */
	uint64_t max;   /* at most this many bytes planned in one call (0: no limit) */
	const struct msq_extents *known;     /* ranges whose snapshot was in time */
	const struct msq_extents *precached; /* found cached by the snapshot */
};

/*
 * Adds to *drop what may go: [done, frontier) where frontier is pos - lag
 * rounded up to a chunk (at most lag bytes stay behind the reader; at the
 * end, the file's end), within known, less precached, at most max bytes
 * of range from done on.  *next: the new done.  Returns 0 or -ENOMEM
 * (*drop then partly filled, *next untouched).
 */
int msqd_fdseq_plan(const struct msqd_fdseq_plan_in *in, struct msq_extents *drop, uint64_t *next);

/* offset rounded down / up to a chunk (MSQ_CHUNK) of the file. */
uint64_t msqd_fdseq_floor(uint64_t off);
uint64_t msqd_fdseq_ceil(uint64_t off);

#endif

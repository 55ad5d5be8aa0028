/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What to drop, given where the pages are.  Pure: no syscalls.
 *
 * Each maximal run of present pages is taken as one reader: its cursor is
 * the run's end.  The chunks (MSQ_CHUNK, aligned in file-offset space) that
 * hold pages more than `lag` bytes behind that cursor are planned for
 * dropping, less the ranges in `keep` (strong references): between
 * lag - MSQ_CHUNK and lag bytes stay behind each cursor.  Several readers
 * in one region therefore each keep their own lag.  Pages kept behind a
 * reader that has moved on are a run too, cut off from it: those are told
 * apart by the caller (retry), or they would stay as a reader's lag.
 */
#ifndef MSQ_PLAN_H
#define MSQ_PLAN_H

#include <stdbool.h>

#include "extents.h"

struct msq_plan_in {
	const struct msq_extents *present; /* present file pages (runs) */
	const struct msq_extents *keep;    /* never planned (may be NULL) */
	uint64_t start, end;               /* the region */
	uint64_t file_off;                 /* file offset at start */
	uint64_t lag;
	/* Pages planned before and kept (strong references, or a failure):
	 * retried now.  A run lying wholly inside them has no reader of its
	 * own, whatever its length; it is planned whole (may be NULL). */
	const struct msq_extents *retry;
	bool flush; /* the readers are gone: plan every present chunk */
};

/* Adds the planned ranges to *drop.  Returns 0 or -ENOMEM. */
int msq_plan(const struct msq_plan_in *in, struct msq_extents *drop);

/*
 * A mapping read with no advice (libmadvseq's read mode "all"): nothing
 * says it is a stream, so only what its reader has read front to back,
 * from the mapping's start with no gap, counts as one.  Its pages more than
 * `lag` behind the end of that part are planned, as msq_plan does for a
 * run; and once the part covers three quarters of the mapping (read
 * through: a table file, the rest being its index at the end) and a look
 * finds nothing new, every present chunk is.  A program that reads its
 * mapping at random keeps what it reads: its pages seldom join the part
 * that began at the start.  State carried from one look to the next:
 */
struct msq_through {
	uint64_t through; /* end of the part read front to back (0: not looked yet) */
	uint64_t seen;    /* bytes present at the last look */
	bool idle;        /* out: this look found nothing new */
	uint64_t limit;   /* out: this look's drop ends here (the region's start: none) */
	/* Set by the caller once a drop up to limit was made: below it the
	 * part has gone (or was kept, and is retried as such). */
	uint64_t dropped;
};

/* Adds the planned ranges to *drop (in->retry is not used: kept pages are
 * planned again where they lie).  Returns 0 or -ENOMEM. */
int msq_plan_read_through(const struct msq_plan_in *in, struct msq_through *t,
			  struct msq_extents *drop);

/* Whether [start, end) was read through, by msq_plan_read_through's rule. */
bool msq_read_through(uint64_t start, uint64_t end, uint64_t through);

/* Where what a reader gone for good may lose ends: the region's end if it
 * was read through, else the chunk boundary at or after `through' (start:
 * nothing was read front to back). */
uint64_t msq_read_through_limit(uint64_t start, uint64_t end, uint64_t file_off,
				uint64_t through);

/* Rounds addr down to a chunk boundary of a region mapping file_off at start. */
uint64_t msq_chunk_floor(uint64_t addr, uint64_t start, uint64_t file_off);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "fdseq.h"

#include <errno.h>

#include <madvseq/policy.h>

uint64_t msqd_fdseq_floor(uint64_t off)
{
	return off & ~(MSQ_CHUNK - 1);
}

uint64_t msqd_fdseq_ceil(uint64_t off)
{
	return off > UINT64_MAX - MSQ_CHUNK ? msqd_fdseq_floor(UINT64_MAX)
					    : msqd_fdseq_floor(off + MSQ_CHUNK - 1);
}

enum msqd_fdseq_move msqd_fdseq_observe(struct msqd_fdseq *q, uint64_t pos)
{
	if (!q->seen) {
		*q = (struct msqd_fdseq){ .pos = pos, .from = pos, .seen = true };
		return MSQD_FDSEQ_FIRST;
	}
	if (pos == q->pos)
		return MSQD_FDSEQ_STILL;
	if (pos < q->pos || pos - q->pos > MSQD_FDSEQ_MAX_STEP) {
		/* A seek: whatever was a stream here is over; a new run may
		 * begin.  (A stream that wraps round to the start of its file
		 * is a new stream, and gets a new snapshot.) */
		*q = (struct msqd_fdseq){ .pos = pos, .from = pos, .seen = true };
		return MSQD_FDSEQ_RESTART;
	}
	q->pos = pos;
	if (q->steps < UINT32_MAX)
		q->steps++;
	if (q->steps >= 2 && pos - q->from >= MSQD_FDSEQ_MIN_BYTES)
		q->stream = true;
	return MSQD_FDSEQ_FORWARD;
}

void msqd_fdseq_snap_window(uint64_t pos, uint64_t snap_end, uint64_t size, uint64_t ahead,
			    uint64_t *from, uint64_t *to)
{
	uint64_t lo = snap_end, past = pos > UINT64_MAX - MSQD_FDSEQ_MARGIN ? UINT64_MAX
									   : pos + MSQD_FDSEQ_MARGIN;
	uint64_t hi = pos > UINT64_MAX - ahead ? UINT64_MAX : pos + ahead;

	if (lo < past)
		lo = msqd_fdseq_ceil(past); /* overtaken: that part is never known */
	hi = msqd_fdseq_ceil(hi < size ? hi : size);
	*from = lo;
	*to = hi > lo ? hi : lo;
}

int msqd_fdseq_plan(const struct msqd_fdseq_plan_in *in, struct msq_extents *drop, uint64_t *next)
{
	const struct msq_extents *k = in->known;
	uint64_t frontier, lo = in->done, hi;

	if (in->at_end)
		frontier = msqd_fdseq_ceil(in->size);
	else if (in->pos > in->lag)
		/* Rounded up: at most lag bytes stay, at least lag - MSQ_CHUNK
		 * (as msq_plan() does for mappings). */
		frontier = msqd_fdseq_floor(in->pos - in->lag + MSQ_CHUNK - 1);
	else
		frontier = 0;
	if (!in->at_end && frontier > msqd_fdseq_floor(in->pos))
		frontier = msqd_fdseq_floor(in->pos); /* a lag under a chunk: never past the reader */
	hi = frontier;
	if (in->max && hi > lo && hi - lo > in->max)
		hi = lo + in->max;
	if (hi <= lo) {
		*next = lo > in->done ? lo : in->done;
		return 0;
	}
	for (size_t i = msq_extents_lower_bound(k, lo); i < k->n && k->v[i].start < hi; i++) {
		uint64_t a = k->v[i].start > lo ? k->v[i].start : lo;
		uint64_t b = k->v[i].end < hi ? k->v[i].end : hi;
		const struct msq_extents *p = in->precached;

		/* The gaps between the pages cached before, within [a, b). */
		for (size_t j = p ? msq_extents_lower_bound(p, a) : 0; a < b; j++) {
			uint64_t e = p && j < p->n && p->v[j].start < b ? p->v[j].start : b;

			if (e > a && msq_extents_add(drop, a, e) < 0)
				return -ENOMEM;
			if (!p || j >= p->n || p->v[j].start >= b)
				break;
			a = p->v[j].end;
		}
	}
	*next = hi;
	return 0;
}

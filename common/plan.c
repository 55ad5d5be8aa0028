/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "plan.h"

#include <errno.h>

#include <madvseq/policy.h>

uint64_t msq_chunk_floor(uint64_t addr, uint64_t start, uint64_t file_off)
{
	/* Boundaries where the file offset is a multiple of the chunk, since
	 * large folios are aligned in the file, not in the address space. */
	int64_t off = (int64_t)(file_off & (MSQ_CHUNK - 1));
	int64_t rel = (int64_t)(addr - start) + off;

	return start + (uint64_t)((rel & ~(int64_t)(MSQ_CHUNK - 1)) - off);
}

static int add_clipped(const struct msq_plan_in *in, struct msq_extents *drop, uint64_t lo,
		       uint64_t hi)
{
	if (lo < in->start)
		lo = in->start;
	if (hi > in->end)
		hi = in->end;
	return lo < hi ? msq_extents_add(drop, lo, hi) : 0;
}

static int remove_keep(const struct msq_plan_in *in, struct msq_extents *drop)
{
	if (in->keep)
		for (size_t i = 0; i < in->keep->n; i++)
			if (msq_extents_remove(drop, in->keep->v[i].start, in->keep->v[i].end) < 0)
				return -ENOMEM;
	return 0;
}

int msq_plan(const struct msq_plan_in *in, struct msq_extents *drop)
{
	const struct msq_extents *p = in->present;

	for (size_t i = 0; i < p->n; i++) {
		uint64_t a = p->v[i].start, b = p->v[i].end, lo, hi;

		if (in->retry && msq_extents_covered(in->retry, a, b) == b - a) {
			/* Nobody reads here: kept pages that a reader left
			 * behind.  Exactly the run, not its chunks: a reader's
			 * lag may begin in the next one. */
			if (msq_extents_add(drop, a, b) < 0)
				return -ENOMEM;
			continue;
		}
		lo = msq_chunk_floor(a, in->start, in->file_off);
		if (in->flush)
			hi = msq_chunk_floor(b + MSQ_CHUNK - 1, in->start, in->file_off);
		else if (b - in->start > in->lag)
			/* Round up: at most lag bytes stay behind the cursor (at
			 * least lag - MSQ_CHUNK), so what one reader holds is
			 * bounded by the lag plus what it reads between cycles. */
			hi = msq_chunk_floor(b - in->lag + MSQ_CHUNK - 1, in->start, in->file_off);
		else
			continue;
		if (add_clipped(in, drop, lo, hi) < 0)
			return -ENOMEM;
	}
	return remove_keep(in, drop);
}

bool msq_read_through(uint64_t start, uint64_t end, uint64_t through)
{
	return through > start && through - start >= (end - start) / 4 * 3;
}

uint64_t msq_read_through_limit(uint64_t start, uint64_t end, uint64_t file_off,
				uint64_t through)
{
	uint64_t limit;

	if (through <= start || through > end)
		return start;
	if (msq_read_through(start, end, through))
		return end;
	limit = msq_chunk_floor(through + MSQ_CHUNK - 1, start, file_off);
	return limit < end ? limit : end;
}

int msq_plan_read_through(const struct msq_plan_in *in, struct msq_through *t,
			  struct msq_extents *drop)
{
	const struct msq_extents *p = in->present;
	uint64_t before, limit, present = msq_extents_total(p);

	if (t->through < in->start || t->through > in->end)
		t->through = in->start;
	before = t->through;
	/* Runs are sorted and apart: one pass extends the part.  Pages
	 * already dropped behind it are absent, so a run that begins at or
	 * before its end continues it. */
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i].start <= t->through && p->v[i].end > t->through)
			t->through = p->v[i].end;
	/* Nothing new: the part did not grow and no page appeared (pages
	 * may have gone: the last look's drop, reclaim).  Not "what the
	 * last look left": pages a drop could not take yet (still on
	 * another CPU's way to the LRU, under I/O) would make every look
	 * news, and the last chunks of a file read through would stay. */
	t->idle = t->through == before && present <= t->seen;
	t->seen = present;
	if (in->flush)
		/* The reader is gone: what it read through. */
		limit = msq_read_through_limit(in->start, in->end, in->file_off, t->through);
	else if (t->idle && msq_read_through(in->start, in->end, t->through))
		limit = in->end;
	else if (t->through - in->start > in->lag)
		limit = msq_chunk_floor(t->through - in->lag + MSQ_CHUNK - 1, in->start,
					in->file_off);
	else
		limit = in->start;
	t->limit = limit;
	for (size_t i = 0; i < p->n && p->v[i].start < limit; i++) {
		uint64_t lo = msq_chunk_floor(p->v[i].start, in->start, in->file_off);
		uint64_t hi = msq_chunk_floor(p->v[i].end + MSQ_CHUNK - 1, in->start, in->file_off);

		if (add_clipped(in, drop, lo, hi < limit ? hi : limit) < 0)
			return -ENOMEM;
	}
	return remove_keep(in, drop);
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "extents.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"

void msq_extents_init_fixed(struct msq_extents *e, struct msq_range *storage, size_t cap)
{
	*e = (struct msq_extents){ .v = storage, .cap = cap, .fixed = true };
}

void msq_extents_free(struct msq_extents *e)
{
	if (e->fixed) {
		e->n = 0;
		return;
	}
	free(e->v);
	*e = MSQ_EXTENTS_INIT;
}

void msq_extents_clear(struct msq_extents *e)
{
	e->n = 0;
}

/* Moves n ranges from src to dst (memmove, which may not see NULL). */
static void move_ranges(struct msq_range *dst, const struct msq_range *src, size_t n)
{
	if (n)
		memmove(dst, src, n * sizeof(*dst));
}

static int reserve(struct msq_extents *e, size_t n)
{
	struct msq_range *v;
	size_t cap;

	if (n <= e->cap)
		return 0;
	if (e->fixed)
		return -ENOMEM;
	cap = e->cap ? e->cap * 2 : 8;
	while (cap < n)
		cap *= 2;
	if (MSQ_FAULT("madvseq/alloc"))
		return -ENOMEM;
	v = realloc(e->v, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	e->v = v;
	e->cap = cap;
	return 0;
}

size_t msq_extents_lower_bound(const struct msq_extents *e, uint64_t addr)
{
	size_t lo = 0, hi = e->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (e->v[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int msq_extents_add(struct msq_extents *e, uint64_t start, uint64_t end)
{
	size_t i, j;

	if (start >= end)
		return 0;
	/* First range that touches or follows start (adjacent ones merge). */
	i = msq_extents_lower_bound(e, start ? start - 1 : 0);
	if (i < e->n && e->v[i].end < start)
		i++;
	j = i;
	while (j < e->n && e->v[j].start <= end)
		j++;
	if (j > i) { /* merge v[i..j) with [start, end) into v[i] */
		if (e->v[i].start < start)
			start = e->v[i].start;
		if (e->v[j - 1].end > end)
			end = e->v[j - 1].end;
		e->v[i] = (struct msq_range){ start, end };
		move_ranges(&e->v[i + 1], &e->v[j], e->n - j);
		e->n -= j - i - 1;
		return 0;
	}
	if (reserve(e, e->n + 1) < 0)
		return -ENOMEM;
	move_ranges(&e->v[i + 1], &e->v[i], e->n - i);
	e->v[i] = (struct msq_range){ start, end };
	e->n++;
	return 0;
}

int msq_extents_add_all(struct msq_extents *dst, const struct msq_extents *src)
{
	int rc;

	for (size_t i = 0; i < src->n; i++)
		if ((rc = msq_extents_add(dst, src->v[i].start, src->v[i].end)) < 0)
			return rc;
	return 0;
}

int msq_extents_remove_all(struct msq_extents *dst, const struct msq_extents *src)
{
	int rc;

	for (size_t i = 0; i < src->n; i++)
		if ((rc = msq_extents_remove(dst, src->v[i].start, src->v[i].end)) < 0)
			return rc;
	return 0;
}

int msq_extents_remove(struct msq_extents *e, uint64_t start, uint64_t end)
{
	size_t i, j;

	/* (Empty: nothing to remove, and e->v may be NULL, which even
	 * &e->v[0] must not touch.) */
	if (start >= end || !e->n)
		return 0;
	i = msq_extents_lower_bound(e, start);
	if (i < e->n && e->v[i].start < start && e->v[i].end > end) {
		/* Splits one range in two. */
		if (reserve(e, e->n + 1) < 0)
			return -ENOMEM;
		move_ranges(&e->v[i + 1], &e->v[i], e->n - i);
		e->n++;
		e->v[i].end = start;
		e->v[i + 1].start = end;
		return 0;
	}
	if (i < e->n && e->v[i].start < start) {
		e->v[i].end = start;
		i++;
	}
	j = i;
	while (j < e->n && e->v[j].end <= end)
		j++;
	if (j < e->n && e->v[j].start < end)
		e->v[j].start = end;
	move_ranges(&e->v[i], &e->v[j], e->n - j);
	e->n -= j - i;
	return 0;
}

bool msq_extents_overlaps(const struct msq_extents *e, uint64_t start, uint64_t end)
{
	size_t i = msq_extents_lower_bound(e, start);

	return start < end && i < e->n && e->v[i].start < end;
}

uint64_t msq_extents_covered(const struct msq_extents *e, uint64_t start, uint64_t end)
{
	uint64_t sum = 0;

	for (size_t i = msq_extents_lower_bound(e, start); i < e->n && e->v[i].start < end; i++) {
		uint64_t s = e->v[i].start > start ? e->v[i].start : start;
		uint64_t t = e->v[i].end < end ? e->v[i].end : end;

		sum += t - s;
	}
	return sum;
}

uint64_t msq_extents_total(const struct msq_extents *e)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < e->n; i++)
		sum += e->v[i].end - e->v[i].start;
	return sum;
}

int msq_extents_copy_clip(struct msq_extents *dst, const struct msq_extents *src,
			  uint64_t start, uint64_t end, int64_t delta)
{
	struct msq_extents out = MSQ_EXTENTS_INIT;

	for (size_t i = msq_extents_lower_bound(src, start); i < src->n && src->v[i].start < end; i++) {
		uint64_t s = src->v[i].start > start ? src->v[i].start : start;
		uint64_t t = src->v[i].end < end ? src->v[i].end : end;

		if (reserve(&out, out.n + 1) < 0) {
			msq_extents_free(&out);
			return -ENOMEM;
		}
		out.v[out.n++] = (struct msq_range){ s + (uint64_t)delta, t + (uint64_t)delta };
	}
	msq_extents_free(dst);
	*dst = out;
	return 0;
}

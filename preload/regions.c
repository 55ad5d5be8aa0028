/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "regions.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <urcu/urcu-bp.h>

#include "../common/fault.h"
#include "shim.h"

struct entry {
	uint64_t start, end;
	struct msq_region *r;
};

struct table {
	size_t n;
	struct entry e[];
};

static struct table *g_table; /* RCU-protected; NULL when empty */
/* g_table as msq_regions_any() sees it (set with it, under the lock). */
void *msq_regions_published;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_next_id = 1;

bool msq_regions_overlap(uint64_t start, uint64_t end)
{
	struct table *t;
	bool hit = false;

	if (!msq_regions_any())
		return false;
	urcu_bp_read_lock();
	t = rcu_dereference(g_table);
	if (t) {
		size_t lo = 0, hi = t->n;

		while (lo < hi) { /* first entry ending after start */
			size_t mid = lo + (hi - lo) / 2;

			if (t->e[mid].end <= start)
				lo = mid + 1;
			else
				hi = mid;
		}
		hit = lo < t->n && t->e[lo].start < end;
	}
	urcu_bp_read_unlock();
	return hit;
}

void msq_regions_lock(void)
{
	pthread_mutex_lock(&g_lock);
}

pthread_mutex_t *msq_regions_mutex(void)
{
	return &g_lock;
}

void msq_regions_unlock(void)
{
	pthread_mutex_unlock(&g_lock);
}

size_t msq_regions_count(void)
{
	return g_table ? g_table->n : 0;
}

struct msq_region *msq_regions_at(size_t i)
{
	return g_table && i < g_table->n ? g_table->e[i].r : NULL;
}

/* A growable list of entries, the next table under construction. */
struct builder {
	struct entry *v;
	size_t n, cap;
};

static int push(struct builder *b, struct msq_region *r)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 8;
		struct entry *v;

		if (MSQ_FAULT("madvseq/alloc") || !(v = realloc(b->v, cap * sizeof(*v))))
			return -ENOMEM;
		b->v = v;
		b->cap = cap;
	}
	b->v[b->n++] = (struct entry){ r->s.start, r->s.end, r };
	return 0;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Publishes b as the table; frees the old one after a grace period. */
static int publish(struct builder *b)
{
	struct table *t = NULL, *old = g_table;

	if (b->n) {
		if (MSQ_FAULT("madvseq/alloc") ||
		    !(t = malloc(sizeof(*t) + b->n * sizeof(struct entry))))
			return -ENOMEM;
		qsort(b->v, b->n, sizeof(*b->v), cmp_entry);
		memcpy(t->e, b->v, b->n * sizeof(*b->v));
		t->n = b->n;
	}
	rcu_assign_pointer(g_table, t);
	__atomic_store_n(&msq_regions_published, t, __ATOMIC_RELEASE);
	if (old) {
		urcu_bp_synchronize_rcu();
		free(old);
	}
	return 0;
}

static void region_free(struct msq_region *r)
{
	msq_stream_free(&r->s);
	free(r);
}

static struct msq_region *region_clip(const struct msq_region *src, uint64_t start, uint64_t end)
{
	struct msq_region *r;

	if (MSQ_FAULT("madvseq/alloc") || !(r = calloc(1, sizeof(*r))))
		return NULL;
	if (msq_stream_clip(&r->s, &src->s, start, end) < 0) {
		free(r);
		return NULL;
	}
	r->id = src->id;
	r->delegated = src->delegated;
	r->kernel = src->kernel;
	return r;
}

static bool compatible(const struct msq_stream *a, const struct msq_stream *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->shared == b->shared &&
	       a->writable == b->writable && a->how == b->how &&
	       a->precached_known == b->precached_known &&
	       a->start - a->file_off == b->start - b->file_off;
}

static void stats_add(struct msq_stream_stats *to, const struct msq_stream_stats *from)
{
	to->dropped += from->dropped;
	to->kept += from->kept;
	to->cycles += from->cycles;
	to->advice_calls += from->advice_calls;
	to->errors += from->errors;
	if (from->last_error)
		to->last_error = from->last_error;
}

/* Folds old (tracked already) into r; old's state wins where they overlap. */
static int merge_into(struct msq_region *r, const struct msq_region *old)
{
	struct msq_stream *s = &r->s;
	const struct msq_stream *o = &old->s;
	int rc;

	if ((rc = msq_extents_remove(&s->precached, o->start, o->end)) < 0)
		return rc;
	for (size_t i = 0; i < o->precached.n; i++)
		if ((rc = msq_extents_add(&s->precached, o->precached.v[i].start, o->precached.v[i].end)) < 0)
			return rc;
	for (size_t i = 0; i < o->kept.n; i++)
		if ((rc = msq_extents_add(&s->kept, o->kept.v[i].start, o->kept.v[i].end)) < 0)
			return rc;
	for (size_t i = 0; i < o->cursors.n; i++)
		if ((rc = msq_extents_add(&s->cursors, o->cursors.v[i].start, o->cursors.v[i].end)) < 0)
			return rc;
	if (o->start < s->start) {
		s->file_off -= s->start - o->start;
		s->start = o->start;
	}
	if (o->end > s->end)
		s->end = o->end;
	stats_add(&s->st, &o->st);
	if (o->kept_until_ns > s->kept_until_ns)
		s->kept_until_ns = o->kept_until_ns;
	if (old->id < r->id)
		r->id = old->id;
	return 0;
}

int msq_regions_insert(struct msq_region *r)
{
	struct builder b = { 0 };
	struct msq_region **merged = NULL, **trimmed = NULL;
	size_t nm = 0, nt = 0, n = msq_regions_count();
	int rc = -ENOMEM;

	r->id = g_next_id++;
	if (n && (MSQ_FAULT("madvseq/alloc") || !(merged = calloc(n, sizeof(*merged))) ||
		  !(trimmed = calloc(2 * n, sizeof(*trimmed)))))
		goto fail;
	for (size_t i = 0; i < n; i++) {
		struct msq_region *o = g_table->e[i].r;
		bool touches = o->s.start <= r->s.end && o->s.end >= r->s.start;
		bool overlaps = o->s.start < r->s.end && o->s.end > r->s.start;

		if (touches && compatible(&o->s, &r->s)) {
			if (merge_into(r, o) < 0)
				goto fail;
			merged[nm++] = o;
		} else if (overlaps) {
			/* A different mapping now: keep only o's parts outside r. */
			struct msq_region *left = NULL, *right = NULL;

			if (o->s.start < r->s.start && !(left = region_clip(o, o->s.start, r->s.start)))
				goto fail;
			if (o->s.end > r->s.end && !(right = region_clip(o, r->s.end, o->s.end))) {
				if (left)
					region_free(left);
				goto fail;
			}
			if ((left && push(&b, left) < 0) || (right && push(&b, right) < 0)) {
				if (left)
					region_free(left);
				if (right)
					region_free(right);
				goto fail;
			}
			if (left)
				trimmed[nt++] = left;
			if (right)
				trimmed[nt++] = right;
			merged[nm++] = o;
		} else if (push(&b, o) < 0) {
			goto fail;
		}
	}
	if (push(&b, r) < 0 || publish(&b) < 0)
		goto fail;
	for (size_t i = 0; i < nm; i++)
		region_free(merged[i]);
	rc = 0;
	goto out;
fail:
	/* Undo: nothing was published.  r may hold merged state; the caller
	 * frees it.  Trimmed copies are ours. */
	for (size_t i = 0; i < nt; i++)
		region_free(trimmed[i]);
out:
	free(merged);
	free(trimmed);
	free(b.v);
	return rc;
}

int msq_regions_remove(uint64_t start, uint64_t end,
		       void (*retire)(struct msq_region *part, void *arg), void *arg)
{
	struct builder b = { 0 };
	/* retired: parts handed to retire() then freed; split: originals
	 * freed silently; made: new pieces, freed only on failure. */
	struct msq_region **retired = NULL, **split = NULL, **made = NULL;
	size_t nr = 0, ns = 0, nmade = 0, n = msq_regions_count();
	int rc = -ENOMEM;

	if (!n)
		return 0;
	if (MSQ_FAULT("madvseq/alloc") || !(retired = calloc(n, sizeof(*retired))) ||
	    !(split = calloc(n, sizeof(*split))) || !(made = calloc(3 * n, sizeof(*made))))
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct msq_region *o = g_table->e[i].r, *keep[2] = { NULL, NULL }, *part;
		uint64_t ps, pe;

		if (o->s.end <= start || o->s.start >= end) {
			if (push(&b, o) < 0)
				goto fail;
			continue;
		}
		ps = o->s.start > start ? o->s.start : start;
		pe = o->s.end < end ? o->s.end : end;
		if (ps == o->s.start && pe == o->s.end) {
			retired[nr++] = o; /* the whole region goes, with its stats */
			continue;
		}
		if (!(part = region_clip(o, ps, pe)))
			goto fail;
		made[nmade++] = part;
		if (o->s.start < ps && !(keep[0] = made[nmade++] = region_clip(o, o->s.start, ps)))
			goto fail;
		if (o->s.end > pe && !(keep[1] = made[nmade++] = region_clip(o, pe, o->s.end)))
			goto fail;
		/* The cumulative stats stay with one surviving piece. */
		(keep[0] ? keep[0] : keep[1])->s.st = o->s.st;
		for (int k = 0; k < 2; k++)
			if (keep[k] && push(&b, keep[k]) < 0)
				goto fail;
		retired[nr++] = part;
		split[ns++] = o;
	}
	if (publish(&b) < 0)
		goto fail;
	for (size_t i = 0; i < nr; i++) {
		if (retire)
			retire(retired[i], arg);
		region_free(retired[i]);
	}
	for (size_t i = 0; i < ns; i++)
		region_free(split[i]);
	rc = 0;
	goto out;
fail:
	for (size_t i = 0; i < nmade; i++)
		if (made[i])
			region_free(made[i]);
out:
	free(retired);
	free(split);
	free(made);
	free(b.v);
	return rc;
}

int msq_regions_move(uint64_t old, uint64_t old_len, uint64_t new_addr, uint64_t new_len,
		     bool keep_old)
{
	struct builder b = { 0 };
	struct msq_region **gone = NULL, **made = NULL;
	size_t ng = 0, nmade = 0, n = msq_regions_count();
	uint64_t old_end = old + old_len;
	int rc = -ENOMEM;

	if (!n)
		return 0;
	if (MSQ_FAULT("madvseq/alloc") || !(gone = calloc(n, sizeof(*gone))) ||
	    !(made = calloc(3 * n, sizeof(*made))))
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct msq_region *o = g_table->e[i].r, *piece[3] = { NULL, NULL, NULL }, *mid;
		uint64_t ps, pe, ns, ne;

		if (o->s.end <= old || o->s.start >= old_end) {
			if (push(&b, o) < 0)
				goto fail;
			continue;
		}
		ps = o->s.start > old ? o->s.start : old;
		pe = o->s.end < old_end ? o->s.end : old_end;
		ns = new_addr + (ps - old);
		ne = pe == old_end ? new_addr + new_len : new_addr + (pe - old);
		if (ne > new_addr + new_len)
			ne = new_addr + new_len;
		if (keep_old) {
			if (!(made[nmade++] = piece[0] = region_clip(o, o->s.start, o->s.end)))
				goto fail;
		} else {
			if (o->s.start < ps && !(made[nmade++] = piece[0] = region_clip(o, o->s.start, ps)))
				goto fail;
			if (o->s.end > pe && !(made[nmade++] = piece[1] = region_clip(o, pe, o->s.end)))
				goto fail;
		}
		if (ns < ne) {
			struct msq_stream tmp;
			int mrc;

			if (MSQ_FAULT("madvseq/alloc") || !(mid = calloc(1, sizeof(*mid))))
				goto fail;
			made[nmade++] = piece[2] = mid;
			/* Clip to what moved, then shift (and grow) it. */
			if (msq_stream_clip(&tmp, &o->s, ps, pe) < 0)
				goto fail;
			mrc = msq_stream_move(&mid->s, &tmp, ns, ne);
			msq_stream_free(&tmp);
			if (mrc < 0)
				goto fail;
			mid->s.st = o->s.st;
			mid->id = o->id;
			mid->delegated = o->delegated;
			mid->kernel = o->kernel;
		}
		for (int k = 0; k < 3; k++)
			if (piece[k] && push(&b, piece[k]) < 0)
				goto fail;
		gone[ng++] = o;
	}
	if (publish(&b) < 0)
		goto fail;
	for (size_t i = 0; i < ng; i++)
		region_free(gone[i]);
	rc = 0;
	goto out;
fail:
	for (size_t i = 0; i < nmade; i++)
		if (made[i])
			region_free(made[i]);
out:
	free(gone);
	free(made);
	free(b.v);
	return rc;
}

void msq_regions_clear(void (*retire)(struct msq_region *part, void *arg), void *arg)
{
	struct table *t = g_table;

	if (!t)
		return;
	rcu_assign_pointer(g_table, NULL);
	__atomic_store_n(&msq_regions_published, NULL, __ATOMIC_RELEASE);
	urcu_bp_synchronize_rcu();
	for (size_t i = 0; i < t->n; i++) {
		if (retire)
			retire(t->e[i].r, arg);
		region_free(t->e[i].r);
	}
	free(t);
}

void msq_regions_atfork_prepare(void)
{
	pthread_mutex_lock(&g_lock);
	urcu_bp_before_fork();
}

void msq_regions_atfork_parent(void)
{
	urcu_bp_after_fork_parent();
	pthread_mutex_unlock(&g_lock);
}

void msq_regions_atfork_child(void)
{
	struct table *t = g_table;

	urcu_bp_after_fork_child();
	/* The child is single-threaded: no reader can hold the old table. */
	g_table = NULL;
	msq_regions_published = NULL;
	if (t) {
		for (size_t i = 0; i < t->n; i++)
			region_free(t->e[i].r);
		free(t);
	}
	pthread_mutex_init(&g_lock, NULL);
}

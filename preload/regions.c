/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "regions.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <urcu/urcu-bp.h>

#include "../common/fault.h"
#include "locks.h"

struct entry {
	uint64_t start, end;
	struct msq_region *r;
	bool advised; /* r->s.unadvised is false (for lock-free lookups) */
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

/* Lock-free: does [start, end) overlap a tracked range (whole: lie within
 * one advised MADV_SEQUENTIAL)? */
static bool lookup(uint64_t start, uint64_t end, bool whole)
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
		hit = lo < t->n && (whole ? t->e[lo].start <= start && t->e[lo].end >= end &&
						    t->e[lo].advised
					  : t->e[lo].start < end);
	}
	urcu_bp_read_unlock();
	return hit;
}

bool msq_regions_overlap(uint64_t start, uint64_t end)
{
	return lookup(start, end, false);
}

bool msq_regions_contain(uint64_t start, uint64_t end)
{
	return lookup(start, end, true);
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
	b->v[b->n++] = (struct entry){ r->s.start, r->s.end, r, !r->s.unadvised };
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

/* A new region with src's identity and an empty stream. */
static struct msq_region *region_like(const struct msq_region *src)
{
	struct msq_region *r;

	if (MSQ_FAULT("madvseq/alloc") || !(r = calloc(1, sizeof(*r))))
		return NULL;
	r->id = src->id;
	r->delegated = src->delegated;
	r->kernel = src->kernel;
	return r;
}

static struct msq_region *region_clip(const struct msq_region *src, uint64_t start, uint64_t end)
{
	struct msq_region *r = region_like(src);

	if (r && msq_stream_clip(&r->s, &src->s, start, end) < 0) {
		free(r);
		return NULL;
	}
	return r;
}

static bool compatible(const struct msq_stream *a, const struct msq_stream *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->shared == b->shared &&
	       a->writable == b->writable && a->how == b->how &&
	       a->precached_known == b->precached_known && a->unadvised == b->unadvised &&
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

	if ((rc = msq_extents_remove(&s->precached, o->start, o->end)) < 0 ||
	    (rc = msq_extents_add_all(&s->precached, &o->precached)) < 0 ||
	    (rc = msq_extents_add_all(&s->kept, &o->kept)) < 0 ||
	    (rc = msq_extents_add_all(&s->cursors, &o->cursors)) < 0 ||
	    (rc = msq_extents_add_all(&s->written, &o->written)) < 0)
		return rc;
	if (o->start <= s->start) {
		/* (read with no advice: the part read front to back is old's) */
		s->rt = o->rt;
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

/*
 * A change to the table, built aside and published at once.  Regions that
 * leave the table are either "gone" (retire() sees them: whole regions, or
 * the parts of split ones that go) or "replaced" (split or merged: their
 * state lives on in new pieces).  Pieces made for the change are freed
 * instead of published if it fails, and the table is then as it was.
 */
struct change {
	struct builder next;
	struct msq_region **made, **gone, **replaced;
	size_t nmade, ngone, nreplaced;
};

static int change_begin(struct change *c)
{
	size_t n = msq_regions_count() + 1;

	*c = (struct change){ 0 };
	if (MSQ_FAULT("madvseq/alloc") || !(c->made = calloc(3 * n, sizeof(*c->made))) ||
	    !(c->gone = calloc(n, sizeof(*c->gone))) ||
	    !(c->replaced = calloc(n, sizeof(*c->replaced)))) {
		free(c->made);
		free(c->gone);
		return -ENOMEM;
	}
	return 0;
}

static void change_end(struct change *c)
{
	free(c->made);
	free(c->gone);
	free(c->replaced);
	free(c->next.v);
}

/* A new piece [start, end) of o; into the next table if keep, else gone. */
static struct msq_region *change_piece(struct change *c, const struct msq_region *o,
				       uint64_t start, uint64_t end, bool keep)
{
	struct msq_region *r = region_clip(o, start, end);

	if (!r)
		return NULL;
	c->made[c->nmade++] = r;
	if (!keep)
		c->gone[c->ngone++] = r;
	else if (push(&c->next, r) < 0)
		return NULL;
	return r;
}

static int change_commit(struct change *c, void (*retire)(struct msq_region *, void *), void *arg)
{
	int rc = publish(&c->next);

	if (rc < 0) {
		for (size_t i = 0; i < c->nmade; i++)
			region_free(c->made[i]);
	} else {
		for (size_t i = 0; i < c->ngone; i++) {
			if (retire)
				retire(c->gone[i], arg);
			region_free(c->gone[i]);
		}
		for (size_t i = 0; i < c->nreplaced; i++)
			region_free(c->replaced[i]);
	}
	change_end(c);
	return rc;
}

static int change_abort(struct change *c)
{
	for (size_t i = 0; i < c->nmade; i++)
		region_free(c->made[i]);
	change_end(c);
	return -ENOMEM;
}

int msq_regions_insert(struct msq_region *r)
{
	struct change c;

	r->id = g_next_id++;
	if (change_begin(&c) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < msq_regions_count(); i++) {
		struct msq_region *o = g_table->e[i].r;
		bool touches = o->s.start <= r->s.end && o->s.end >= r->s.start;
		bool overlaps = o->s.start < r->s.end && o->s.end > r->s.start;

		if (touches && compatible(&o->s, &r->s)) {
			if (merge_into(r, o) < 0)
				return change_abort(&c); /* r is the caller's to free */
			c.replaced[c.nreplaced++] = o;
		} else if (overlaps) {
			/* A different mapping now: keep only o's parts outside r. */
			if ((o->s.start < r->s.start && !change_piece(&c, o, o->s.start, r->s.start, true)) ||
			    (o->s.end > r->s.end && !change_piece(&c, o, r->s.end, o->s.end, true)))
				return change_abort(&c);
			c.replaced[c.nreplaced++] = o;
		} else if (push(&c.next, o) < 0) {
			return change_abort(&c);
		}
	}
	if (push(&c.next, r) < 0)
		return change_abort(&c);
	return change_commit(&c, NULL, NULL);
}

int msq_regions_remove(uint64_t start, uint64_t end,
		       void (*retire)(struct msq_region *part, void *arg), void *arg)
{
	struct change c;

	if (!msq_regions_count())
		return 0;
	if (change_begin(&c) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < msq_regions_count(); i++) {
		struct msq_region *o = g_table->e[i].r, *left = NULL, *right = NULL;
		uint64_t ps = o->s.start > start ? o->s.start : start;
		uint64_t pe = o->s.end < end ? o->s.end : end;

		if (ps >= pe) {
			if (push(&c.next, o) < 0)
				return change_abort(&c);
			continue;
		}
		if (ps == o->s.start && pe == o->s.end) {
			c.gone[c.ngone++] = o; /* the whole region goes, with its stats */
			continue;
		}
		if (!change_piece(&c, o, ps, pe, false) ||
		    (o->s.start < ps && !(left = change_piece(&c, o, o->s.start, ps, true))) ||
		    (o->s.end > pe && !(right = change_piece(&c, o, pe, o->s.end, true))))
			return change_abort(&c);
		/* The cumulative stats stay with one surviving piece. */
		(left ? left : right)->s.st = o->s.st;
		c.replaced[c.nreplaced++] = o;
	}
	return change_commit(&c, retire, arg);
}

/* o's part [ps, pe), moved to [ns, ne) (mremap), as a piece of c. */
static struct msq_region *change_moved_piece(struct change *c, const struct msq_region *o,
					     uint64_t ps, uint64_t pe, uint64_t ns, uint64_t ne)
{
	struct msq_region *part = region_clip(o, ps, pe), *r = region_like(o);

	if (!part || !r || msq_stream_move(&r->s, &part->s, ns, ne) < 0) {
		if (r)
			region_free(r); /* its stream is empty or complete: both free */
		r = NULL;
	}
	if (part)
		region_free(part);
	if (!r)
		return NULL;
	r->s.st = o->s.st;
	c->made[c->nmade++] = r;
	return push(&c->next, r) < 0 ? NULL : r;
}

int msq_regions_move(uint64_t old, uint64_t old_len, uint64_t new_addr, uint64_t new_len,
		     bool keep_old)
{
	uint64_t old_end = old + old_len;
	struct change c;

	if (!msq_regions_count())
		return 0;
	if (change_begin(&c) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < msq_regions_count(); i++) {
		struct msq_region *o = g_table->e[i].r;
		uint64_t ps = o->s.start > old ? o->s.start : old;
		uint64_t pe = o->s.end < old_end ? o->s.end : old_end;
		uint64_t ns = new_addr + (ps - old), ne;

		if (ps >= pe) {
			if (push(&c.next, o) < 0)
				return change_abort(&c);
			continue;
		}
		/* A region that reached the old end grows (or shrinks) with it. */
		ne = pe == old_end ? new_addr + new_len : new_addr + (pe - old);
		if (ne > new_addr + new_len)
			ne = new_addr + new_len;
		if (keep_old) { /* MREMAP_DONTUNMAP: the old range stays mapped */
			if (push(&c.next, o) < 0)
				return change_abort(&c);
		} else {
			if ((o->s.start < ps && !change_piece(&c, o, o->s.start, ps, true)) ||
			    (o->s.end > pe && !change_piece(&c, o, pe, o->s.end, true)))
				return change_abort(&c);
			c.replaced[c.nreplaced++] = o;
		}
		if (ns < ne && !change_moved_piece(&c, o, ps, pe, ns, ne))
			return change_abort(&c);
	}
	return change_commit(&c, NULL, NULL);
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

bool msq_regions_atfork_prepare(void)
{
	bool locked = msq_lock_bounded(&g_lock, MSQ_FORK_LOCK_NS);

	urcu_bp_before_fork();
	return locked;
}

void msq_regions_atfork_parent(bool locked)
{
	urcu_bp_after_fork_parent();
	if (locked)
		pthread_mutex_unlock(&g_lock);
}

void msq_regions_atfork_child(bool locked)
{
	struct table *t = g_table;

	urcu_bp_after_fork_child();
	/* The child is single-threaded: no reader can hold the old table.
	 * Without the lock, a writer of the parent's may have been half-way
	 * through a change: the child forgets the table without freeing. */
	g_table = NULL;
	msq_regions_published = NULL;
	if (t && locked) {
		for (size_t i = 0; i < t->n; i++)
			region_free(t->e[i].r);
		free(t);
	}
	pthread_mutex_init(&g_lock, NULL);
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read path's decisions (fdrun.h): runs, snapshots, drop-behind,
 * retries of dirty chunks and write-behind, on a stream's state alone.
 * The mechanism is described in fdstream.c; the syscalls are the caller's
 * (struct msq_run_ops).
 */
#include "fdrun.h"

#include <string.h>
#include <unistd.h>

#define CHUNK MSQ_CHUNK

static uint64_t floor_chunk(uint64_t x) { return x & ~(CHUNK - 1); }
static uint64_t ceil_chunk(uint64_t x) { return (x + CHUNK - 1) & ~(CHUNK - 1); }

static int cachestat(const struct msq_run_ctx *c, uint64_t off, uint64_t len,
		     struct msq_cachestat *cs)
{
	return c->ops->cachestat(c->arg, off, len, cs);
}

static void note_kept(const struct msq_run_ctx *c, const struct msq_dir *d, uint64_t lo,
		      uint64_t hi, uint64_t pages)
{
	if (c->ops->note_kept)
		c->ops->note_kept(c->arg, lo, hi, pages, d->next);
}

void msq_run_init(struct msq_stream *st)
{
	msq_extents_init_fixed(&st->rd.pre, st->rd.pre_v, MSQ_PRE_MAX);
	msq_extents_init_fixed(&st->wr.pre, st->wr.pre_v, MSQ_PRE_MAX);
}

/* Adds the chunks of [lo, hi) that hold cached pages to d->pre.  eof: the
 * file's size if the caller just read it (no page past it can be cached
 * now), else UINT64_MAX; the window counts as looked at up to hi either way,
 * as it always did for the part past the end.  Looked at, a window too
 * large for the per-chunk loop costs one cachestat call when nothing in
 * it is cached, or all of it is, or it is one chunk (a small file). */
static void snapshot(const struct msq_run_ctx *c, struct msq_stream *st, struct msq_dir *d,
		     uint64_t lo, uint64_t hi, uint64_t eof)
{
	uint64_t end = eof < hi ? ceil_chunk(eof) : hi, page = (uint64_t)getpagesize(), pages;
	struct msq_cachestat cs;

	if (st->blind || end <= lo) { /* nothing known, or nothing there: nothing kept */
		d->snap_hi = hi;
		return;
	}
	pages = ((eof < end ? eof : end) - lo + page - 1) / page; /* the window's pages before EOF */
	if (cachestat(c, lo, end - lo, &cs) == 0 &&
	    (cs.nr_cache == 0 || cs.nr_cache >= pages || end - lo == CHUNK)) {
		if (cs.nr_cache && msq_extents_add(&d->pre, lo, end) < 0)
			st->snap_ok = false; /* from now on: drop nothing */
		else
			d->snap_hi = hi;
		if (cs.nr_cache)
			note_kept(c, d, lo, end, cs.nr_cache);
		return;
	}
	for (uint64_t k = lo; k < end && st->snap_ok; k += CHUNK) {
		if (cachestat(c, k, CHUNK, &cs) < 0 ||
		    (cs.nr_cache && msq_extents_add(&d->pre, k, k + CHUNK) < 0))
			st->snap_ok = false; /* from now on: drop nothing */
		else if (cs.nr_cache)
			note_kept(c, d, k, k + CHUNK, cs.nr_cache);
	}
	if (st->snap_ok)
		d->snap_hi = hi;
}

/* Starts the snapshot of the current run at chunk lo (eof: as for
 * snapshot()). */
static void snap_start(const struct msq_run_ctx *c, struct msq_stream *st, struct msq_dir *d,
		       uint64_t lo, uint64_t eof)
{
	msq_extents_clear(&d->pre);
	d->snap_lo = d->snap_hi = lo;
	d->snapping = true;
	snapshot(c, st, d, lo, lo + st->snap_ahead, eof);
}

void msq_run_start(const struct msq_run_ctx *c, struct msq_stream *st, struct msq_dir *d,
		   uint64_t off, bool snap_now, uint64_t eof)
{
	d->run_start = d->next = off;
	/* Chunks a past run left dirty are forgotten: this run may read them
	 * again, and its snapshot then rightly finds them cached before. */
	d->nretry = 0;
	d->done = ceil_chunk(off);
	d->kicked = d->backlog = floor_chunk(off);
	d->started = true;
	d->snapping = false;
	d->act = off + 1;
	if (snap_now && st->snap_ok && !st->dontcache) {
		snap_start(c, st, d, floor_chunk(off), eof);
		if (st->snap_ok)
			d->act = floor_chunk(off) + CHUNK;
	}
}

/*
 * Dirty pages behind a reader.  fadvise(DONTNEED) starts their writeback
 * and drops only clean pages, so a chunk the program (or another) dirtied
 * after the stream read it stays, clean a moment later, for the LRU to
 * find: PostgreSQL's backends write back the hint bits they set on the
 * pages a COPY scans, which left several lags behind a reader that way.
 * So a chunk left dirty or under writeback is remembered and advised again
 * a lag of transfers later, once cachestat says it is clean; one still
 * dirty after MSQ_RETRY_TRIES such looks is given up.  What a clean chunk
 * keeps after its second advice is mapped or in use: left alone.
 */
static void retry_add(struct msq_dir *d, uint64_t lo, uint64_t hi, uint64_t due)
{
	for (unsigned i = 0; i < d->nretry; i++) {
		struct msq_retry *r = &d->retry[i];

		if (lo <= r->hi && hi >= r->lo) { /* touching: one range, due when the older is */
			r->lo = lo < r->lo ? lo : r->lo;
			r->hi = hi > r->hi ? hi : r->hi;
			return;
		}
	}
	if (d->nretry == MSQ_RETRY_MAX) { /* full: the oldest is given up */
		memmove(&d->retry[0], &d->retry[1], (MSQ_RETRY_MAX - 1) * sizeof(d->retry[0]));
		d->nretry--;
	}
	d->retry[d->nretry++] = (struct msq_retry){ lo, hi, due, 0 };
}

/* Did fadvise(DONTNEED) of [lo, hi) leave dirty or writeback pages? */
static bool left_dirty(const struct msq_run_ctx *c, uint64_t lo, uint64_t hi)
{
	struct msq_cachestat cs;

	return cachestat(c, lo, hi - lo, &cs) == 0 && (cs.nr_dirty || cs.nr_writeback);
}

/* Advises the chunks of r that are clean now, from its start up to the
 * first that is still dirty; returns where r goes on (r->hi: all done). */
static uint64_t retry_range(const struct msq_run_ctx *c, struct msq_retry *r)
{
	uint64_t k, from = r->lo;

	for (k = r->lo; k < r->hi; k += CHUNK) {
		struct msq_cachestat cs;

		if (cachestat(c, k, CHUNK, &cs) < 0) {
			k = r->hi; /* cannot tell: given up */
			break;
		}
		if (cs.nr_dirty || cs.nr_writeback)
			break;
	}
	if (k > from)
		c->ops->dontneed(c->arg, from, k - from); /* counted the first time */
	return k;
}

/* Retries the remembered chunks that are due (all of them when `all`,
 * at close, once). */
static void retry_due(const struct msq_run_ctx *c, struct msq_dir *d, bool all)
{
	unsigned i = 0;

	while (i < d->nretry) {
		struct msq_retry *r = &d->retry[i];
		uint64_t k;

		if (!all && c->streamed < r->due) {
			i++;
			continue;
		}
		k = retry_range(c, r);
		if (k == r->lo && ++r->tries >= MSQ_RETRY_TRIES) {
			k += CHUNK; /* dirty all along: its first chunk is given up */
			r->tries = 0;
		} else if (k > r->lo) {
			r->tries = 0;
		}
		r->lo = k;
		r->due = c->streamed + c->lag;
		if (all || r->lo >= r->hi) {
			memmove(r, r + 1, (d->nretry - i - 1) * sizeof(*r));
			d->nretry--;
		} else {
			i++;
		}
	}
}

/* fadvise(DONTNEED) of the chunks of [from, to) not cached before. */
static void drop_range(const struct msq_run_ctx *c, struct msq_stream *st, struct msq_dir *d,
		       uint64_t from, uint64_t to)
{
	bool writing = d == &st->wr;

	for (uint64_t k = from; k < to; k += CHUNK) {
		uint64_t e = k + CHUNK;

		if (msq_extents_overlaps(&d->pre, k, e)) {
			c->ops->kept(c->arg, CHUNK);
			continue;
		}
		while (e < to && !msq_extents_overlaps(&d->pre, e, e + CHUNK))
			e += CHUNK;
		if (c->ops->dontneed(c->arg, k, e - k) == 0) {
			c->ops->advised(c->arg, e - k, writing);
			if (!st->blind && left_dirty(c, k, e))
				retry_add(d, k, e, c->streamed + c->lag);
		}
		k = e - CHUNK;
	}
}

/*
 * Writes: fadvise(DONTNEED) skips dirty and writeback pages, so chunks are
 * dropped in order once cachestat says they are clean; returns how far.
 * A writer more than wb_ahead() past its oldest unwritten chunk waits for
 * it (polling: waiting with sync_file_range would take a writeback error
 * away from the program's own fsync), which bounds its cache footprint
 * as dd oflag=direct would, without changing what write() returns.
 */
static uint64_t wb_ahead(const struct msq_run_ctx *c)
{
	return 2 * c->lag;
}

static uint64_t drop_written(const struct msq_run_ctx *c, struct msq_stream *st,
			     struct msq_dir *d, uint64_t target)
{
	uint64_t k = d->done;
	int polls = 0;

	while (k < target) {
		struct msq_cachestat cs;

		if (!msq_extents_overlaps(&d->pre, k, k + CHUNK)) {
			if (cachestat(c, k, CHUNK, &cs) < 0)
				return target; /* cannot tell: leave it to the kernel */
			if (cs.nr_dirty || cs.nr_writeback) {
				/* The backlog's writeback was started at once:
				 * its chunks go when clean, nobody waits. */
				if (target - k <= wb_ahead(c) || k < d->backlog || polls++ == MSQ_WB_POLLS)
					return k;
				if (polls == 1)
					c->ops->writeback(c->arg, k, CHUNK);
				c->ops->nap(c->arg);
				continue;
			}
			if (cs.nr_cache && c->ops->dontneed(c->arg, k, CHUNK) == 0)
				c->ops->advised(c->arg, CHUNK, true);
		}
		k += CHUNK;
	}
	return k;
}

void msq_run_advance(const struct msq_run_ctx *c, struct msq_stream *st, struct msq_dir *d,
		     uint64_t off, uint64_t end, bool writing)
{
	uint64_t target;

	if (!d->started || off < d->next || off > d->next + MSQ_SEQ_SLACK)
		msq_run_start(c, st, d, off, false, UINT64_MAX);
	d->next = end;
	/* Until the next chunk boundary (or the run's length reaching
	 * MSQ_RUN_MIN, or the snapshot's refill point) a sequential access has
	 * nothing to do: msq_run_quiet() then holds. */
	d->act = floor_chunk(end) + CHUNK;
	if ((!writing && st->dontcache) || !st->snap_ok)
		return; /* RWF_DONTCACHE does it, or a snapshot failed: hands off */
	if (!d->snapping) {
		if (end - d->run_start < MSQ_RUN_MIN) {
			if (d->run_start + MSQ_RUN_MIN < d->act)
				d->act = d->run_start + MSQ_RUN_MIN;
			return;
		}
		/* Pages this run read so far are in the chunk at floor(end), or
		 * before it: from here on, the snapshot sees them as cached. */
		if (floor_chunk(end) > d->done)
			d->done = floor_chunk(end);
		snap_start(c, st, d, floor_chunk(end), UINT64_MAX);
	}
	if (end + st->snap_ahead / 2 > d->snap_hi)
		snapshot(c, st, d, d->snap_hi, floor_chunk(end) + st->snap_ahead, UINT64_MAX);
	if (d->snap_hi - st->snap_ahead / 2 < d->act)
		d->act = d->snap_hi - st->snap_ahead / 2;
	if (writing && !c->wb_due)
		return; /* d->kicked and d->done stay: the backlog is taken up once due */
	if (writing && floor_chunk(end) > d->kicked) {
		if (floor_chunk(end) - d->kicked > wb_ahead(c))
			d->backlog = floor_chunk(end);
		c->ops->writeback(c->arg, d->kicked, floor_chunk(end) - d->kicked);
		d->kicked = floor_chunk(end);
	}
	if (!writing && d->nretry)
		retry_due(c, d, false);
	target = end > c->lag ? floor_chunk(end - c->lag) : 0;
	if (target <= d->done)
		return;
	if (writing)
		target = drop_written(c, st, d, target);
	else
		drop_range(c, st, d, d->done, target);
	d->done = target;
	if (d->snap_lo + st->snap_ahead < target) {
		/* Forget what is behind: keeps the set small on long streams.
		 * (Not on an empty set: msq_extents_remove then memmoves NULL.) */
		if (d->pre.n)
			msq_extents_remove(&d->pre, 0, target);
		d->snap_lo = target;
	}
}

bool msq_run_is_stream(const struct msq_dir *d, uint64_t min, bool noreuse)
{
	return d->started && d->snapping && (noreuse || d->next - d->run_start >= min);
}

void msq_run_final_read(const struct msq_run_ctx *c, struct msq_stream *st, uint64_t end,
			bool drop)
{
	if (drop && end > st->rd.done)
		drop_range(c, st, &st->rd, st->rd.done, ceil_chunk(end));
	if (st->rd.nretry) /* (drop_range may have added some) */
		retry_due(c, &st->rd, true);
}

/*
 * A writer's last chunks, at close: drops those already clean (written back
 * since write-behind started them) and leaves dirty ones to the kernel.
 * fadvise(DONTNEED) would start their writeback first, in the program's
 * time, and still not drop them: they are dirty until it completes.
 */
void msq_run_final_write(const struct msq_run_ctx *c, struct msq_stream *st)
{
	struct msq_dir *d = &st->wr;

	for (uint64_t k = d->done; k < ceil_chunk(d->next); k += CHUNK) {
		struct msq_cachestat cs;

		if (msq_extents_overlaps(&d->pre, k, k + CHUNK) || cachestat(c, k, CHUNK, &cs) < 0 ||
		    cs.nr_dirty || cs.nr_writeback || !cs.nr_cache)
			continue;
		if (c->ops->dontneed(c->arg, k, CHUNK) == 0)
			c->ops->advised(c->arg, CHUNK, true);
	}
}

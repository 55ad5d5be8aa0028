/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Acting on one fd stream (see fdmanage.h).  The snapshot ahead of the
 * position keeps what was cached before the stream got there; behind it,
 * what the policy lets go is dropped (fdseq.c plans it, fdact.c does it
 * through the duplicate); a write stream's pages are first given to
 * writeback, which the daemon never waits for.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/sys.h"
#include "conf.h"
#include "fdact.h"
#include "fdclosed.h"
#include "fdproc.h"
#include "fdseq.h"
#include "fdmanage.h"
#include "log.h"
#include "msqd.h"

#define MAX_STREAMS 256     /* with snapshots, all processes */
#define MAX_PRE 512         /* ranges of cached-before pages per stream */
#define MAX_KNOWN 64        /* ranges whose snapshot was in time, per stream */
#define MAX_LEFT 64         /* ranges still cached after a drop, retried */
#define AHEAD (UINT64_C(64) << 20) /* snapshot this far ahead of a stream */
#define KNOWN_END (UINT64_C(1) << 62) /* past any file's end */
/* Planned per stream per look: fadvise(DONTNEED) of a gigabyte takes the
 * kernel ~100 ms, which a status request would wait for. */
#define DROP_MAX (UINT64_C(64) << 20)
/* Writeback started per write stream per look: a look comes every
 * discover_watch (100 ms), and a writer faster than this much per look
 * has the kernel's flusher start the rest. */
#define WB_MAX (UINT64_C(64) << 20)
#define WB_INFLIGHT (UINT64_C(64) << 20)
/* Dropped per stream per look, what was planned and what is retried:
 * 2 MiB chunks, three system calls each. */
#define RETRY_MAX (UINT64_C(256) << 20)

void msqd_fdmanage_free(struct msqd_fdwatch *w, struct fdw_file *f)
{
	if (f->started && w->nstreams)
		w->nstreams--;
	msq_extents_free(&f->known);
	msq_extents_free(&f->pre);
	msq_extents_free(&f->left);
	free(f->path);
}

int msqd_fdmanage_act(struct msqd *d, struct fdw_proc *p, struct fdw_file *f, struct msqd_cg *g,
		      bool still)
{
	struct msqd_fdwatch *w = &d->fdw;
	struct msq_extents drop = MSQ_EXTENTS_INIT;
	uint64_t pos = f->seq.pos, dropped = 0, next, from, to, reached;
	bool writable = (f->flags & O_ACCMODE) != O_RDONLY;
	struct stat st;
	int dup, rc;

	if (!msqd_fdwatch_spend(w, 4))
		return 0;
	dup = msqd_fdact_borrow(p->pidfd, f->fd, f->dev, f->ino, &st);
	if (dup < 0) {
		if (dup == -ESTALE)
			w->swapped++;
		else if (dup != -ESRCH && dup != -EBADF)
			w->refused++;
		return dup == -EBADF ? -ESTALE : dup;
	}
	f->size = (uint64_t)st.st_size;
	if (!f->started) {
		if (w->nstreams >= MAX_STREAMS) {
			w->over_limits++;
			close(dup);
			return 0;
		}
		w->nstreams++;
		f->started = true;
		f->start = f->snap_end = f->done = f->wb_done = msqd_fdseq_ceil(pos + MSQD_FDSEQ_MARGIN);
		f->found_ns = d->now_ns;
		f->found_pos = pos;
		w->found++;
		f->path = msqd_fdproc_name(d->set.proc_root, p->pid, f->fd);
		log_debug("pid %d fd %d: a stream at %" PRIu64 " MiB of %s (%" PRIu64 " MiB)",
			  (int)p->pid, f->fd, pos >> 20, f->path ? f->path : "?", f->size >> 20);
	}
	/* Ahead: what is cached before the stream gets there.  Once the
	 * snapshot reached the file's end, what lies past it did not exist
	 * before: an appending writer's pages, or a reader's of a file that
	 * grows, are the stream's. */
	if (!f->open_ended) {
		msqd_fdseq_snap_window(pos, f->snap_end, f->size, AHEAD, &from, &to);
		if (from > f->snap_end) {
			uint64_t lim = msqd_fdseq_ceil(f->size), e = from < lim ? from : lim;

			if (e > f->snap_end) {
				f->unknown += e - f->snap_end;
				w->unknown += e - f->snap_end;
			}
			f->snap_end = from;
		}
		if (from < to && f->known.n < MAX_KNOWN) {
			msqd_fdwatch_spend(w, 8);
			rc = msqd_fdact_snapshot(dup, from, to, f->size, &f->pre, MAX_PRE, &reached);
			if (rc == 0 && reached > from && msq_extents_add(&f->known, from, reached) == 0)
				f->snap_end = reached;
			else if (rc < 0)
				w->errors++;
		}
		if (f->snap_end >= msqd_fdseq_ceil(f->size) && f->known.n < MAX_KNOWN &&
		    msq_extents_add(&f->known, f->snap_end, KNOWN_END) == 0)
			f->open_ended = true;
	}
	/* Behind: what the policy lets go.  A writer that stands still at
	 * its file's end (done, or between files) leaves its lag too, as a
	 * reader at the end does: those pages are its own, just written. */
	if (f->seq.stream && g && g->pol->mode == MSQ_MODE_PAGEOUT && msqd_gate_open(d, g)) {
		struct msqd_fdseq_plan_in in = {
			.pos = pos, .lag = g->pol->lag, .done = f->done, .size = f->size, .max = DROP_MAX,
			.at_end = still && pos >= f->size && !f->ended,
			.known = &f->known, .precached = &f->pre,
		};
		struct msq_extents left = MSQ_EXTENTS_INIT;

		/* Write-behind: writeback of what is written up to the
		 * position's last whole chunk (all of it at the end) starts
		 * now, so that a look later, a lag behind, those pages are
		 * clean and DONTNEED drops them without writing anything
		 * itself.  Not for a file no directory names (st_nlink 0: a
		 * temporary file whose pages go at its last close, and would
		 * otherwise never reach the disk). */
		if (writable && st.st_nlink) {
			uint64_t wb = in.at_end ? msqd_fdseq_ceil(f->size) : msqd_fdseq_floor(pos);
			struct msq_cachestat_range cr = { f->done, f->wb_done - f->done };
			struct msq_cachestat cs = { 0 };

			if (wb > f->wb_done + WB_MAX)
				wb = f->wb_done + WB_MAX;
			/* While the disk has WB_INFLIGHT of this stream in flight,
			 * no more: submitting past what the queue takes would
			 * wait in the daemon's thread for requests to finish. */
			if (wb > f->wb_done && f->wb_done > f->done && msq_cachestat(dup, &cr, &cs) == 0 &&
			    cs.nr_writeback * UINT64_C(4096) >= WB_INFLIGHT)
				wb = f->wb_done;
			if (wb > f->wb_done && msqd_fdact_writeback(dup, f->wb_done, wb) == 0) {
				w->wb_started += wb - f->wb_done;
				f->wb_done = wb;
			}
		}
		if (writable && in.at_end && f->wb_done < msqd_fdseq_ceil(f->size))
			in.at_end = false; /* (its end next time, once all of it is under writeback) */
		rc = msqd_fdseq_plan(&in, &drop, &next);
		if (rc == 0) {
			uint64_t before = f->done;

			/* What stayed cached last time (dirty, under writeback,
			 * held for a moment) is tried again. */
			msq_extents_add_all(&drop, &f->left);
			msq_extents_clear(&f->left);
			if (msq_extents_total(&drop) > RETRY_MAX) {
				/* At most so much per look; the rest waits. */
				uint64_t cut = drop.v[0].start + RETRY_MAX;

				for (size_t i = 0; i < drop.n; i++)
					if (drop.v[i].end > cut)
						msq_extents_add(&left, drop.v[i].start > cut ? drop.v[i].start
											  : cut, drop.v[i].end);
				msq_extents_remove(&drop, cut, UINT64_MAX);
			}
			msqd_fdwatch_spend(w, (long)(msq_extents_total(&drop) >> 21) + 1);
			rc = msqd_fdact_drop(dup, &drop, &dropped, &left);
			/* (Too many pieces: their hull, whose dropped chunks the
			 * next try finds uncached and passes over.) */
			if (left.n <= MAX_LEFT)
				msq_extents_add_all(&f->left, &left);
			else
				msq_extents_add(&f->left, left.v[0].start, left.v[left.n - 1].end);
			f->done = next;
			if (in.at_end)
				f->ended = true;
			w->kept_before += msq_extents_covered(&f->pre, before, next);
		}
		msq_extents_free(&left);
		if (rc < 0)
			w->errors++;
		f->dropped += dropped;
		w->dropped += dropped;
		g->dropped += dropped;
		d->cnt.dropped += dropped;
	}
	msq_extents_free(&drop);
	close(dup);
	/* (Where the program closed its descriptor meanwhile, that close was
	 * the file's last, and is reported as the daemon's.) */
	if (writable && g && g->pol->mode == MSQ_MODE_PAGEOUT)
		msqd_fdclosed_borrowed(d, p, f->dev, f->ino);
	return 0;
}

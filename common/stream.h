/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The engine both the shim and the daemon run: one msq_stream per tracked
 * range of a sequentially-read file mapping, and one cycle that finds its
 * readers (frontier), decides what lies behind them (plan) and drops it.
 *
 * Thread contract: a stream and the engine it is cycled with are used by
 * one thread at a time; the caller also guarantees the range is still
 * mapped as it was when the stream was set up (the shim holds its table
 * lock across a cycle and across munmap/mremap of tracked ranges).
 */
#ifndef MSQ_STREAM_H
#define MSQ_STREAM_H

#include <stdbool.h>
#include <sys/types.h>

#include <madvseq/policy.h>

#include "extents.h"
#include "frontier.h"
#include "plan.h"

/* How a stream's pages are dropped; chosen once, when it is set up. */
enum msq_drop_how {
	MSQ_DROP_PAGEOUT,       /* MADV_PAGEOUT, verified by reading pagemap after */
	MSQ_DROP_UNMAP_FADVISE, /* own PTEs (MADV_DONTNEED) then fadvise(DONTNEED) */
	MSQ_DROP_COLD,          /* MADV_COLD only */
	MSQ_DROP_NONE,          /* nothing safe to do */
};

struct msq_stream_stats {
	uint64_t dropped; /* bytes that left the mapping because of us */
	uint64_t kept;    /* bytes still mapped after a drop: strong references */
	uint64_t cycles;
	uint64_t advice_calls;
	uint64_t errors;
	int last_error; /* -errno of the last failure, 0 if none */
};

struct msq_stream {
	uint64_t start, end; /* page-aligned address range */
	uint64_t file_off;   /* file offset mapped at start */
	dev_t dev;
	ino_t ino;
	char *path;          /* for the fadvise fallback; may be NULL */
	bool shared;         /* MAP_SHARED */
	bool writable;       /* PROT_WRITE */
	enum msq_drop_how how;
	bool precached_known;          /* precached is a reliable snapshot */
	struct msq_extents precached;  /* cached before tracking: never dropped */
	struct msq_extents kept;       /* left mapped after a drop; retried later */
	uint64_t kept_until_ns;
	struct msq_extents cursors;    /* run ends, for windowed pagemap reads */
	struct msq_extents written;    /* paged out while dirty: awaiting writeback */
	/* Read with no advice (libmadvseq's read mode "all"): planned by
	 * msq_plan_read_through.  A program maps hundreds of table files and
	 * reads a few at a time, each at once: such a mapping is looked at
	 * every cycle until it has been quiet (nothing new in it) for
	 * MSQ_QUIET_NS, and until it is first read for MSQ_FRESH_NS after its
	 * first look; then as far apart as it has been quiet, up to
	 * MSQ_QUIET_LOOK_MAX_NS (next_look_ns).  A reader that comes back is
	 * so seen within as long as it was away: a table reader away for a
	 * millisecond (on another table) is not left for 100 ms, in which it
	 * reads the whole table; and the tables it is done with are not read
	 * every cycle (a look costs a pagemap walk or a mincore() of the
	 * mapping: at a cycle a millisecond, 100 ms of such looks per table
	 * cost a scan 0.2 CPU-s per GB). */
	bool unadvised;
	bool ever_read; /* unadvised: a look found pages present */
	struct msq_through rt;
	uint64_t first_look_ns, news_ns, next_look_ns; /* news: the last look that found something new */
	uint64_t sweep;                /* next address of the discovery sweep */
	uint64_t full_scan_ns;         /* when the whole range was last read */
	struct msq_stream_stats st;
};

#define MSQ_QUIET_NS (UINT64_C(10) * 1000 * 1000)
#define MSQ_QUIET_LOOK_MAX_NS (UINT64_C(1600) * 1000 * 1000)
#define MSQ_FRESH_NS (UINT64_C(1000) * 1000 * 1000)

/* Per-thread engine context and scratch sets. */
struct msq_engine {
	struct msq_pagemap pm;
	int pidfd;               /* -1: the calling process (madvise) */
	uint64_t lag;
	uint64_t kept_retry_ns;  /* how long kept pages are left alone */
	struct msq_extents present, anon, drop, after, retry;
	/* Optional (the daemon's strong-reference check): called with the
	 * planned drop set before acting; removes from it what must stay.
	 * Returns 0 or -errno (the cycle then drops nothing). */
	int (*filter)(struct msq_engine *e, struct msq_stream *s, struct msq_extents *drop,
		      void *arg);
	void *filter_arg;
	/* Optional (madvseqd, for a client that drops in-process what it is
	 * asked: MSQ_MSG_DROP): called with the final drop set instead of
	 * advising it from here.  Asked ranges are left alone as kept pages
	 * are, until kept_retry_ns has passed; what is still there then is
	 * advised from here.  Returns 0, -EAGAIN (not asked: the set is
	 * advised from here after all) or another -errno. */
	int (*ask)(struct msq_engine *e, const struct msq_extents *set, enum msq_mode mode,
		   void *arg);
	void *ask_arg;
	uint64_t advice_cpu_ns;  /* CPU time spent in process_madvise (pidfd >= 0) */
};

void msq_engine_init(struct msq_engine *e, int pidfd, uint64_t lag);
void msq_engine_free(struct msq_engine *e);

/*
 * Initialises s for [start, end) of a mapping of file (dev, ino, path) at
 * file_off.  may_write: the caller may write the file (MADV_PAGEOUT works,
 * mincore tells the truth).  Takes a copy of path.  Returns 0 or -ENOMEM.
 */
int msq_stream_init(struct msq_stream *s, uint64_t start, uint64_t end, uint64_t file_off,
		    dev_t dev, ino_t ino, const char *path, bool shared, bool writable,
		    enum msq_mode mode, bool may_write);
void msq_stream_free(struct msq_stream *s);
/* dst = the part [start, end) of src, with its state clipped. */
int msq_stream_clip(struct msq_stream *dst, const struct msq_stream *src, uint64_t start,
		    uint64_t end);
/* The same state moved to another address (mremap). */
int msq_stream_move(struct msq_stream *dst, const struct msq_stream *src, uint64_t new_start,
		    uint64_t new_end);

/*
 * One cycle: drops what lies more than e->lag behind each reader of s (all
 * present pages if flush).  Returns bytes dropped (>= 0) or -errno; errors
 * are also counted in s->st.
 */
int64_t msq_stream_cycle(struct msq_engine *e, struct msq_stream *s, uint64_t now_ns, bool flush);

/*
 * Drops the present pages of [start, end) within s as a cycle would drop
 * them (with mode MSQ_MODE_COLD: deactivates them), for a manager that
 * decided so: madvseqd, whose cycle read this process's pages and checked
 * their strong references (MSQ_MSG_DROP).  Nothing cached before the
 * stream, and no chunk holding copy-on-write data, is advised.  Returns
 * bytes dropped (>= 0; not added to s->st, the manager that decided counts
 * them) or -errno.
 */
int64_t msq_stream_drop_asked(struct msq_engine *e, struct msq_stream *s, uint64_t start,
			      uint64_t end, enum msq_mode mode, uint64_t now_ns);

/* Where the readers of s are: the sum of its cursors' ends.  Two values
 * taken around a cycle differ when a reader moved in between. */
uint64_t msq_stream_progress(const struct msq_stream *s);

/*
 * The next period of a management loop that dropped `dropped' bytes in its
 * last cycle while its readers moved `moved' bytes: so that a cycle has
 * about `target' bytes to do, between min_ns and max_ns.  It shortens when
 * there was more work, and grows back only while no reader moves: a reader
 * that is still inside its lag (or was off the CPU for a moment) would
 * otherwise find the loop asleep when it runs on, and the pages behind it
 * pile up for a whole period.
 */
uint64_t msq_next_period(uint64_t period_ns, uint64_t dropped, uint64_t moved, uint64_t target,
			 uint64_t min_ns, uint64_t max_ns);

/*
 * The process is exiting (_exit): drops everything s mapped but what was
 * cached before, with one advice per gap between those ranges.  Uses only
 * syscalls (no allocation, no locks), so it is safe where _exit is: in
 * signal handlers, after fork.  Private copy-on-write data is about to
 * vanish with the process, so it needs no care here.  Returns 0 or -errno.
 */
int msq_stream_drop_all_on_exit(const struct msq_stream *s);

const char *msq_drop_how_name(enum msq_drop_how how);

/*
 * Opens path read-only (close-on-exec, non-blocking; with noatime, without
 * touching its access time where the caller may) if it is the file (dev,
 * ino), whose stat goes to *st.  Returns the descriptor or -errno
 * (-ESTALE: another file is there now).
 */
struct stat;
int msq_open_same_file(const char *path, dev_t dev, ino_t ino, bool noatime, struct stat *st);

#endif

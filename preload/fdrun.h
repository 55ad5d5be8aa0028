/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read path's decisions for one fd's streams (fdrun.c): where a
 * sequential run starts and goes on, what its residency snapshot found
 * cached before, which chunks behind it to drop, which dirty ones to try
 * again, and write-behind.  Pure: the few syscalls it needs (cachestat,
 * fadvise(DONTNEED), sync_file_range, a nap) and the accounting of what it
 * did go through a table of functions (struct msq_run_ops), which
 * fdstream.c fills with the real calls on an fd and tests/unit/test_fdrun.c
 * with a fake page cache.
 *
 * Contract: the caller holds the fd's state for itself (fdstream.c's busy
 * flag); nothing here allocates, blocks on a lock or keeps a pointer past
 * the call, and everything is async-signal-safe if the ops are.  Only
 * msq_run_advance() on a write stream naps (ops->nap, at most
 * MSQ_WB_POLLS times per call).
 */
#ifndef MSQ_FDRUN_H
#define MSQ_FDRUN_H

#include <stdbool.h>
#include <stdint.h>

#include <madvseq/policy.h>

#include "../common/extents.h"
#include "../common/sys.h"

/* A residency snapshot covers at least this much ahead of a stream, and
 * is extended when the stream gets within half of it: it must stay ahead
 * of readahead, which SEQUENTIAL doubles and which may have two windows in
 * flight, so it is 8 times the device's read_ahead_kb when that is more
 * (struct msq_stream.snap_ahead). */
#define MSQ_SNAP_AHEAD_MIN (UINT64_C(16) << 20)
/* A run is a stream, worth a snapshot, once it is this long: random
 * readers never pay for one.  (What a run read before its snapshot was
 * taken counts as cached before: at most a chunk per run stays.) */
#define MSQ_RUN_MIN (UINT64_C(256) << 10)
/* A forward gap up to this still continues a run (interleaved readers of
 * one shared offset, skipped headers). */
#define MSQ_SEQ_SLACK MSQ_CHUNK
/* Chunk ranges a snapshot may hold (cached and not cached chunks
 * alternating over the window): more turns the snapshot off for the fd,
 * which then drops nothing (fail safe). */
#define MSQ_PRE_MAX 64
/* Dirty chunks behind a reader, dropped again once clean; more are merged
 * with their neighbours or given up. */
#define MSQ_RETRY_MAX 8
#define MSQ_RETRY_TRIES 8
/* A writer's wait for its oldest unwritten chunk: naps per call. */
#define MSQ_WB_POLLS 200

struct msq_retry {
	uint64_t lo, hi; /* chunk-aligned */
	uint64_t due;    /* retried once the fd's streamed count reaches this */
	unsigned tries;
};

/* One direction (reads or writes) of a stream. */
struct msq_dir {
	uint64_t run_start; /* first offset of the current sequential run */
	uint64_t next;      /* where the next sequential access starts */
	uint64_t done;      /* chunks below this are dropped (or left on purpose) */
	uint64_t kicked;    /* writes: writeback started below this */
	uint64_t backlog;   /* writes: below this, written before write-behind was due */
	uint64_t snap_lo, snap_hi;
	uint64_t act;       /* below this, a sequential access needs no work */
	struct msq_extents pre; /* chunks cached before the stream reached them */
	struct msq_range pre_v[MSQ_PRE_MAX]; /* its storage: no malloc on this path */
	struct msq_retry retry[MSQ_RETRY_MAX];
	unsigned nretry;
	bool started;
	bool snapping;      /* pre is valid for this run, up to snap_hi */
};

/* Both directions of one fd, and what the decisions know of its file. */
struct msq_stream {
	uint64_t snap_ahead; /* the snapshot's reach ahead of the stream */
	bool snap_ok;   /* may drop: snapshots work, or the file is blind */
	bool blind;     /* no residency snapshot possible (fdstream.c says why) */
	bool dontcache; /* reads go through RWF_DONTCACHE: nothing to drop */
	struct msq_dir rd, wr;
};

/* The syscalls, and the accounting.  arg is the table's own (the fd). */
struct msq_run_ops {
	/* cachestat(2) of [off, off + len): 0, or < 0 if it cannot tell. */
	int (*cachestat)(void *arg, uint64_t off, uint64_t len, struct msq_cachestat *cs);
	/* posix_fadvise(DONTNEED): 0 on success. */
	int (*dontneed)(void *arg, uint64_t off, uint64_t len);
	/* sync_file_range(SYNC_FILE_RANGE_WRITE): starts writeback, never waits. */
	void (*writeback)(void *arg, uint64_t off, uint64_t len);
	/* The write poll's nap (1 ms). */
	void (*nap)(void *arg);
	/* n bytes advised DONTNEED behind the stream (writing: behind a writer). */
	void (*advised)(void *arg, uint64_t n, bool writing);
	/* n bytes left because the snapshot found them cached before. */
	void (*kept)(void *arg, uint64_t n);
	/* Debug: [lo, hi) held pages cached pages before the stream came
	 * (reader: the stream's offset); may be NULL. */
	void (*note_kept)(void *arg, uint64_t lo, uint64_t hi, uint64_t pages, uint64_t reader);
};

/* What one call of the decisions is given besides the state. */
struct msq_run_ctx {
	const struct msq_run_ops *ops;
	void *arg;
	uint64_t lag;      /* the policy's distance behind the stream */
	uint64_t streamed; /* bytes the fd moved so far: the clock of retries */
	bool wb_due;       /* write-behind is due for this fd's writes */
};

/* A fresh state: the snapshots' fixed storage. */
void msq_run_init(struct msq_stream *st);
/* A run of d starts at off.  snap_now: nothing was read yet (the fd was
 * just classified, and eof is the file's size), so the snapshot is taken
 * right away and nothing is due before the first chunk boundary.
 * Otherwise the next transfer goes through msq_run_advance(), which sets
 * that point. */
void msq_run_start(const struct msq_run_ctx *c, struct msq_stream *st, struct msq_dir *d,
		   uint64_t off, bool snap_now, uint64_t eof);
/* Whether a transfer to [off, end) on d is sequential with nothing due:
 * then only d->next moves (off: the transfer's offset; the caller passes
 * d->next for transfers at the file position). */
static inline bool msq_run_quiet(const struct msq_dir *d, uint64_t off, uint64_t end)
{
	return d->started && end < d->act && off == d->next;
}
/* The stream d (writing: st->wr) moved to [off, end): a new run if it
 * jumped, extend the snapshot, drop (or write back) behind it. */
void msq_run_advance(const struct msq_run_ctx *c, struct msq_stream *st, struct msq_dir *d,
		     uint64_t off, uint64_t end, bool writing);
/* Whether the last run of d is a stream to drop behind at close: one with
 * a snapshot, at least min long unless noreuse. */
bool msq_run_is_stream(const struct msq_dir *d, uint64_t min, bool noreuse);
/* At close, the read stream ends at end: drops what it left behind and
 * retries every dirty chunk once more. */
void msq_run_final_read(const struct msq_run_ctx *c, struct msq_stream *st, uint64_t end,
			bool drop);
/* At close: drops the writer's last chunks that are clean already, leaves
 * dirty ones to the kernel. */
void msq_run_final_write(const struct msq_run_ctx *c, struct msq_stream *st);

#endif

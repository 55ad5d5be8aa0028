/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the read path did (fdstats.c): the process totals
 * (msq_stats_totals) and the per-file records of MADVSEQ_STATS
 * (msq_stats_each_file).
 *
 * Contract: lock-free and allocation-free, callable with the guard raised
 * and from signal handlers (close() may run in one).  The state s is held
 * by the caller (urcu-bp read lock, or out of the table already).
 */
#ifndef MSQ_FDSTATS_H
#define MSQ_FDSTATS_H

#include <stdbool.h>
#include <stdint.h>

#include "defs.h"

struct msq_fd;

/* What the read path did in this process (MADVSEQ_STATS, and the
 * daemon's metrics): files managed, bytes the program moved through
 * managed streams, bytes advised DONTNEED behind them, bytes left because
 * they were cached before. */
struct msq_read_totals {
	uint64_t files, streamed, dropped, kept;
	uint64_t written; /* of dropped: behind write streams (write-behind) */
};
void msq_stats_totals(struct msq_read_totals *t) MSQ_HIDDEN;
/* One file's figures, for MADVSEQ_STATS (kept only when it is set). */
struct msq_file_counts {
	uint64_t streamed, dropped, kept, written;
};
/* Calls fn for the files the read path managed (closed ones, as many as
 * it kept records of, then the open ones).  Lock-free and
 * allocation-free: for the stats file at exit and _exit. */
void msq_stats_each_file(void (*fn)(const char *path, const struct msq_file_counts *c, void *arg),
			 void *arg) MSQ_HIDDEN;

/* One more file managed. */
void msq_stats_file(void) MSQ_HIDDEN;
/* Adds what s streamed since the last call to the process total; by the
 * thread that holds s, or forgets it. */
void msq_stats_streamed(struct msq_fd *s) MSQ_HIDDEN;
/* n bytes advised DONTNEED behind s's stream (writing: its writer's). */
void msq_stats_advised(struct msq_fd *s, uint64_t n, bool writing) MSQ_HIDDEN;
/* n bytes left because they were cached before. */
void msq_stats_kept(struct msq_fd *s, uint64_t n) MSQ_HIDDEN;
/* fd, about to be closed, was s's: keeps its record (MADVSEQ_STATS). */
void msq_stats_record(int fd, const struct msq_fd *s) MSQ_HIDDEN;
/* In a fork child: the child's own figures from here. */
void msq_stats_atfork_child(void) MSQ_HIDDEN;

#endif

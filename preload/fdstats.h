/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the read path did (fdstats.c): the process totals
 * (msq_readpath_totals, readpath.h) and the per-file records of
 * MADVSEQ_STATS (msq_readpath_each_file).
 *
 * Contract: lock-free and allocation-free, callable with the guard raised
 * and from signal handlers (close() may run in one).  The state s is held
 * by the caller (urcu-bp read lock, or out of the table already).
 */
#ifndef MSQ_FDSTATS_H
#define MSQ_FDSTATS_H

#include <stdbool.h>
#include <stdint.h>

#include "shim.h"

struct msq_fd;

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

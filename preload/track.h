/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the mapping wrappers tell the region table.  Called with the
 * re-entry guard raised.  Failures (memory, /proc) never reach the
 * program: a range that cannot be tracked is simply not managed, and a
 * table that cannot be updated is emptied rather than left stale.
 */
#ifndef MSQ_TRACK_H
#define MSQ_TRACK_H

#include <stdbool.h>
#include <stdint.h>

#include "defs.h"

/* [start, end) was advised MADV_SEQUENTIAL: track its file-backed parts. */
void msq_track_sequential(uint64_t start, uint64_t end) MSQ_HIDDEN;

/* The program mapped [start, start + len) of fd at off, read-only, with
 * no advice yet: in read mode "all", track it as a mapping that may be read
 * through (msq_plan_read_through). */
void msq_track_mapped(uint64_t start, uint64_t len, int fd, uint64_t off, bool shared) MSQ_HIDDEN;
/* The smallest mapping msq_track_mapped takes: below, the drop's 2 MiB
 * granularity would hold most of it anyway. */
#define MSQ_TRACK_MAPPED_MIN (UINT64_C(1) << 20)

void msq_track_lock(void) MSQ_HIDDEN;
void msq_track_unlock(void) MSQ_HIDDEN;
/* Not locked: [start, end) is going away (munmap, MAP_FIXED; flush: drop
 * its pages first, the daemon's regions through the daemon) or is no
 * longer read as a stream (MADV_NORMAL/RANDOM).  Takes the table lock,
 * then waits for the daemon's final drop with no lock held. */
void msq_track_forget(uint64_t start, uint64_t end, bool flush) MSQ_HIDDEN;
/* Locked: a successful mremap. */
void msq_track_moved_locked(uint64_t old, uint64_t old_len, uint64_t new_addr, uint64_t new_len,
			    bool keep_old) MSQ_HIDDEN;
/* Not locked, before the program makes [start, end) writable (mprotect):
 * private parts are untracked first, so that no MADV_DONTNEED can follow
 * a write there. */
void msq_track_writable(uint64_t start, uint64_t end) MSQ_HIDDEN;

#endif

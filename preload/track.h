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

#include "shim.h"

/* [start, end) was advised MADV_SEQUENTIAL: track its file-backed parts. */
void msq_track_sequential(uint64_t start, uint64_t end) MSQ_HIDDEN;

void msq_track_lock(void) MSQ_HIDDEN;
void msq_track_unlock(void) MSQ_HIDDEN;
/* Locked: [start, end) is going away (flush: drop its pages first). */
void msq_track_forget_locked(uint64_t start, uint64_t end, bool flush) MSQ_HIDDEN;
/* Locked: a successful mremap. */
void msq_track_moved(uint64_t old, uint64_t old_len, uint64_t new_addr, uint64_t new_len,
		     bool keep_old) MSQ_HIDDEN;

/* Resolves the real mapping functions (called once, from init). */
void msq_interpose_resolve(void) MSQ_HIDDEN;

#endif

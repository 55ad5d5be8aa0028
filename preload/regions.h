/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The table of tracked MADV_SEQUENTIAL ranges.
 *
 * Lookups (msq_regions_overlap, msq_regions_any) are lock-free: the table
 * is an immutable sorted array published with RCU (liburcu, "bp" flavour:
 * the program's threads need no registration).  Writers build a new array
 * under the table lock, publish it, wait for a grace period, then free the
 * old one.  Readers only see addresses; region state (struct msq_region)
 * is touched only with the table lock held, by writers and by the engine,
 * so the engine never acts on a range while it is being unmapped.
 */
#ifndef MSQ_REGIONS_H
#define MSQ_REGIONS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "../common/stream.h"

struct msq_region {
	struct msq_stream s;
	uint64_t id;
	bool delegated; /* the daemon does this region's work */
	bool kernel;    /* the kernel's own drop-behind covers it: step aside */
};

/* Any thread, no lock.  True if [start, end) overlaps a tracked range. */
bool msq_regions_overlap(uint64_t start, uint64_t end);
/* Any thread, no lock.  True if one tracked range advised MADV_SEQUENTIAL
 * holds all of [start, end). */
bool msq_regions_contain(uint64_t start, uint64_t end);
/* Any thread, no lock.  True if anything is tracked (one atomic load):
 * inline, since every munmap of the program asks. */
extern void *msq_regions_published __attribute__((visibility("hidden")));
static inline bool msq_regions_any(void)
{
	return __atomic_load_n(&msq_regions_published, __ATOMIC_RELAXED) != NULL;
}

void msq_regions_lock(void);
void msq_regions_unlock(void);
/* The table lock itself, for a condition variable waited on with it held. */
pthread_mutex_t *msq_regions_mutex(void);

/* --- With the table lock held --- */

/* Number of regions and the i-th in address order (NULL past the end). */
size_t msq_regions_count(void);
struct msq_region *msq_regions_at(size_t i);

/*
 * Tracks r (allocated with malloc; ownership passes to the table on
 * success, r may be merged into a neighbour and freed).  Adjacent or
 * overlapping regions of the same file at consistent offsets merge; where
 * they overlap, the state already tracked wins.  Returns 0 or -ENOMEM
 * (r untouched, still the caller's).
 */
int msq_regions_insert(struct msq_region *r);

/*
 * Stops tracking [start, end).  For each tracked part of it, retire() is
 * called (if not NULL) with a region holding that part's state, before the
 * part is freed; regions partly inside keep their outside parts.  Returns
 * 0 or -ENOMEM (nothing changed).
 */
int msq_regions_remove(uint64_t start, uint64_t end,
		       void (*retire)(struct msq_region *part, void *arg), void *arg);

/*
 * mremap bookkeeping: what was tracked in [old, old + old_len) is now at
 * [new, new + new_len); a region that reached old + old_len grows with the
 * mapping.  keep_old: MREMAP_DONTUNMAP left the old range mapped.
 */
int msq_regions_move(uint64_t old, uint64_t old_len, uint64_t new_addr, uint64_t new_len,
		     bool keep_old);

/* Frees every region without acting (fork child, tests); retire as above. */
void msq_regions_clear(void (*retire)(struct msq_region *part, void *arg), void *arg);

/* Fork (locks.h: a bounded try; locked: whether the prepare handler got
 * the table lock).  The child starts with an empty table. */
bool msq_regions_atfork_prepare(void);
void msq_regions_atfork_parent(bool locked);
void msq_regions_atfork_child(bool locked);

#endif

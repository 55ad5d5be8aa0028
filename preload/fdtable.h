/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A sparse table from file descriptor to per-fd read-path state: a
 * two-level radix array of atomic pointers, leaves allocated on demand,
 * so its size follows the fds used, not RLIMIT_NOFILE.
 *
 * Contract: msq_fdt_peek() is lock-free, allocation-free and
 * async-signal-safe (two atomic loads).  Slot values are NULL (never
 * looked at), MSQ_FD_IGNORED (looked at once: not ours) or a state pointer
 * that stays valid while the caller holds the urcu-bp read lock; whoever
 * swaps a pointer out frees it after urcu_bp_synchronize_rcu().  Leaves
 * are never freed.  fds at or above MSQ_FDT_MAX are never tracked.
 */
#ifndef MSQ_FDTABLE_H
#define MSQ_FDTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "defs.h"

#define MSQ_FDT_LEAF_BITS 9
#define MSQ_FDT_TOP 8192
#define MSQ_FDT_MAX (MSQ_FDT_TOP << MSQ_FDT_LEAF_BITS) /* 4 Mi fds */

/* "Classified: not a file the read path manages" (fd closed: NULL again). */
#define MSQ_FD_IGNORED ((struct msq_fd *)(uintptr_t)1)

struct msq_fd;

extern struct msq_fd **msq_fdt_top[MSQ_FDT_TOP] MSQ_HIDDEN;

static inline struct msq_fd *msq_fdt_peek(int fd)
{
	struct msq_fd **leaf;

	if ((unsigned)fd >= MSQ_FDT_MAX)
		return NULL;
	leaf = __atomic_load_n(&msq_fdt_top[(unsigned)fd >> MSQ_FDT_LEAF_BITS], __ATOMIC_ACQUIRE);
	if (!leaf)
		return NULL;
	return __atomic_load_n(&leaf[fd & ((1 << MSQ_FDT_LEAF_BITS) - 1)], __ATOMIC_ACQUIRE);
}

/* Stores v in fd's slot and returns the old value; allocates a leaf if
 * needed (slow paths only).  Returns MSQ_FD_IGNORED without storing when
 * fd is out of range or no memory is left (fault point madvseq/alloc). */
struct msq_fd *msq_fdt_xchg(int fd, struct msq_fd *v) MSQ_HIDDEN;
/* Stores v only if the slot holds old; true on success. */
int msq_fdt_cas(int fd, struct msq_fd *old, struct msq_fd *v) MSQ_HIDDEN;
/* Whether any fd was ever given a slot (a leaf exists). */
bool msq_fdt_used(void) MSQ_HIDDEN;
/* Calls fn for every non-NULL slot in [first, last]. */
void msq_fdt_each(unsigned first, unsigned last, void (*fn)(int fd, struct msq_fd *v, void *arg),
		  void *arg) MSQ_HIDDEN;

#endif

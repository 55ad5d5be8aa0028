/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A pool of fixed-size objects for the paths that must stay
 * async-signal-safe (read(), write(), close() ... may be called from a
 * signal handler that interrupted malloc): memory comes from anonymous
 * mmap (the raw syscall), in blocks of 64 objects claimed and released
 * with one atomic operation on the block's bitmap.  Lock-free, never
 * blocks; blocks are never returned to the system, so the pool's size
 * follows the most objects in use at once.
 */
#ifndef MSQ_OBJPOOL_H
#define MSQ_OBJPOOL_H

#include <stddef.h>

#include "defs.h"

struct msq_pool_block;

struct msq_pool {
	size_t size;                   /* of one object, rounded to 16 */
	struct msq_pool_block *blocks; /* a lock-free list: only ever pushed */
};

#define MSQ_POOL_INIT(objsize) { .size = ((objsize) + 15) & ~(size_t)15 }

/* A zeroed object, or NULL (no memory: fault point madvseq/alloc). */
void *msq_pool_alloc(struct msq_pool *p) MSQ_HIDDEN;
/* Gives obj (from msq_pool_alloc on p, or NULL) back. */
void msq_pool_free(struct msq_pool *p, void *obj) MSQ_HIDDEN;

#endif

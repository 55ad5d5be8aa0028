/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The management cycle: the shared engine (common/stream.c) run against
 * each client's regions, through its pidfd (process_madvise) and its
 * /proc/PID/pagemap, skipping clients that did not run since last time.
 */
#ifndef MSQD_CYCLE_H
#define MSQD_CYCLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct msqd;
struct msqd_cg;
struct msqd_client;

/* Returns bytes dropped in this pass. */
uint64_t msqd_cycle(struct msqd *d);
/* The client is about to unmap [start, end) of region i (or to exit):
 * drops all of that part the policy lets go, now.  Returns bytes dropped,
 * or -errno when the advice failed (the client then drops it itself);
 * a client whose address space is gone (ESRCH) is left to its exit drop,
 * and 0 is returned. */
int64_t msqd_region_final_drop(struct msqd *d, struct msqd_client *c, size_t i, uint64_t start,
			       uint64_t end);
#endif

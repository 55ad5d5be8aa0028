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

#include "../common/follow.h"

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
/* The cycles' schedule and figures (cycle.c). */
struct msqd_cycles {
	uint64_t next_ns;   /* when the next cycle is due */
	uint64_t sleep_ns;  /* the period: the interval, shorter while streams run */
	uint64_t n, last_ns, max_ns; /* cycles run; how long the last and longest took */
	uint64_t round;     /* rounds over all clients, each one or more cycles */
	uint64_t idle_skips; /* clients left alone: no page faults since last time */
	uint64_t kernel_regions; /* regions left to the kernel in the last cycle */
	uint64_t advice_cpu_ns;  /* CPU spent inside process_madvise (reclaim) */
	/* The daemon drops from its client's CPU (common/follow.h). */
	struct msq_follow follow;
	bool follow_ready;
	uint64_t follows;        /* times it bound itself to a reader's CPU */
	uint64_t dropped_ns;     /* when a cycle last dropped something */
};

#endif

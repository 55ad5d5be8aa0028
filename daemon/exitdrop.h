/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Exit drops: what a client that exited with regions still managed left
 * cached goes through the file, from a queue worked on a slice at a time.
 */
#ifndef MSQD_EXITDROP_H
#define MSQD_EXITDROP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct msqd;
struct msqd_client;

/* The client exited with region i still managed (no library, or killed
 * by a signal): the region leaves the client for the exit-drop queue,
 * where what it left cached goes through the file, as the final drop
 * would have taken it. */
void msqd_region_exited(struct msqd *d, struct msqd_client *c, size_t i);
/* Goes on with queued exit drops until deadline_ns (UINT64_MAX: all),
 * a window of a file at a time. */
void msqd_exit_drops(struct msqd *d, uint64_t deadline_ns);

/* A region whose client exited while it was managed: what it left cached
 * is dropped through the file (exitdrop.c), a few at a time between events,
 * so that a thousand programs exiting at once do not stop the daemon. */
struct msqd_leftover {
	struct msqd_leftover *next;
	struct msqd_region *r;
	struct msqd_cg *cg;
	pid_t pid;
	uint64_t at;      /* where its walk goes on (slices: exitdrop.c) */
	uint64_t dropped;
};

/* The exit-drop queue, in order (exitdrop.c). */
struct msqd_exitdrops {
	struct msqd_leftover *queue, **tail;
	unsigned n;
	uint64_t skipped; /* regions whose file was not held */
};

#endif

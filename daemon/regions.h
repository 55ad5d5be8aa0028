/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Managed regions: a client's range, checked against /proc/PID/maps, with
 * its file held open and what was cached before it (the snapshot).
 */
#ifndef MSQD_REGIONS_H
#define MSQD_REGIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <madvseq/protocol.h>

#include "../common/extents.h"
#include "../common/stream.h"

struct msqd;
struct msqd_client;
struct msqd_region;

/* precached: the client's snapshot (MSQ_REGION_SNAPSHOT), n ranges; NULL:
 * the daemon takes its own (when the policy checks strong references). */
int msqd_region_add(struct msqd *d, struct msqd_client *c, uint64_t id, uint64_t start,
		    uint64_t len, uint64_t dev, uint64_t ino, uint64_t off, bool checked_vma,
		    const char *path, bool shared, bool writable, const struct msq_wire_range *precached,
		    uint32_t nprecached);
void msqd_region_remove(struct msqd *d, struct msqd_client *c, size_t i);
/* Takes region i out of the client, for the caller to free. */
struct msqd_region *msqd_region_detach(struct msqd *d, struct msqd_client *c, size_t i);
void msqd_region_free(struct msqd *d, struct msqd_region *r);
/* The region's file: the descriptor it holds (never opened by path).
 * Returns it, -EBADF without one, or -errno. */
int msqd_region_file(const struct msqd_region *r, struct stat *st);

/*
 * The file range s maps, a window at a time from address *at: each window
 * with anything cached is mapped, its residency read into vec, fn called,
 * and unmapped.  Stops at deadline_ns (0: none) with *at where to resume,
 * or with *at = s->end once done.  Returns 0, fn's first error, or -errno.
 */
typedef int (*msqd_window_fn)(void *m, uint64_t len, uint64_t a, uint64_t foff,
			      const unsigned char *vec, void *arg);
int msqd_each_cached_window(int fd, const struct stat *st, const struct msq_stream *s, uint64_t *at,
			    uint64_t deadline_ns, msqd_window_fn fn, void *arg);
/* Goes on with pending snapshots (regions not managed until theirs is
 * done) until deadline_ns.  Returns whether any is left. */
bool msqd_snapshots(struct msqd *d, uint64_t deadline_ns);
/* The snapshot of r, walked on until deadline_ns.  Whether it is done. */
bool msqd_region_snapshot_now(struct msqd *d, struct msqd_client *c, struct msqd_region *r,
			      uint64_t deadline_ns);
/* Adds to out the runs of cached pages of a window (the client's
 * addresses [a, a + len)) that skip does not hold, each at its client
 * address + shift.  0 or -ENOMEM. */
int msqd_add_cached_runs(const unsigned char *vec, uint64_t a, uint64_t len,
			 const struct msq_extents *skip, uint64_t shift, struct msq_extents *out);

struct msqd_region {
	struct msq_stream s;
	int fd;        /* the mapped file, opened through /proc/PID/map_files; -1: by path */
	uint64_t id;   /* the client's id; discovery: 0 */
	bool seen;     /* discovery: found again in this scan */
	bool kernel_fs; /* on a filesystem the kernel's own drop-behind covers */
	size_t mem;     /* the daemon's bookkeeping for it, as counted at registration */
	uint64_t vma_lo, vma_hi; /* the mapping it starts in (/proc/PID/map_files name) */
	bool snapping;  /* its snapshot is being taken: not acted on yet (regions.c) */
	uint64_t snap_at; /* where the snapshot's walk goes on */
	struct msq_extents snap_ahead; /* the client's own pages, kept out of the snapshot */
};

/* The regions of all clients (regions.c). */
struct msqd_regions {
	uint64_t n;          /* regions managed, all clients */
	unsigned nsnapping;  /* regions whose snapshot is being taken */
	unsigned fds, fd_budget; /* files held for regions, and how many may be */
};

#endif

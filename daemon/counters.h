/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The daemon's running totals that more than one module adds to, and the
 * read-path counts shims report.  Each module keeps its own counters in
 * its own state; metrics.c renders all of them from one table (the
 * offsets of each counter in struct msqd, msqd.h).
 */
#ifndef MSQD_COUNTERS_H
#define MSQD_COUNTERS_H

#include <stdint.h>

/* What shims report of their read paths (READ_REPORT), which they run
 * themselves: the daemon only counts it.  Saturating sums. */
struct msqd_read_counts {
	uint64_t files, streamed, dropped, kept;
};

struct msqd_counters {
	uint64_t dropped;      /* bytes dropped: cycles, final drops, exit drops */
	uint64_t asked;        /* of which asked of the clients to drop (asks.c) */
	uint64_t kept_strong;  /* bytes kept for strong references (refs.c) */
	struct msqd_read_counts read; /* all shims' read paths, as reported */
	uint64_t proto_errors;   /* clients disconnected for the protocol (server.c) */
	uint64_t refused_regions; /* registrations refused (handle.c) */
};

#endif

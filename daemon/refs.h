/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Strong references: pages someone else uses, kept from a planned drop. */
#ifndef MSQD_REFS_H
#define MSQD_REFS_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/extents.h"
#include "../common/stream.h"

struct msqd;
struct msqd_cg;

void msqd_refs_init(struct msqd *d);
/* The engine's filter_arg for msqd_refs_filter: the daemon, and the cgroup
 * whose pages are checked (what is kept is counted for it).  Set for one
 * msq_stream_cycle() or one filter call, on the caller's stack. */
struct msqd_refs_check {
	struct msqd *d;
	struct msqd_cg *cg;
};
/* The engine's filter (stream.h): keeps from drop the pages someone else
 * uses.  arg: a struct msqd_refs_check.  0 or -ENOMEM. */
int msqd_refs_filter(struct msq_engine *e, struct msq_stream *s, struct msq_extents *drop,
		     void *arg);
const char *msqd_fidelity(const struct msqd *d);

/* The strong-reference check's state (refs.c). */
struct msqd_refs {
	bool ok;           /* kpageflags usable */
	bool warned;
	int kpageflags_fd;
	uint64_t flag_reads; /* frames whose flags were read (cost) */
	bool found_folios;   /* the last batch checked held large folios */
};

#endif

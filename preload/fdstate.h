/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read path's per-fd state, as fdstream.c (its owner) and fdstats.c
 * (its figures) see it.  A state lives in the fd table (fdtable.h): it is
 * valid while the caller holds the urcu-bp read lock, and only the thread
 * that set busy changes its streams.
 */
#ifndef MSQ_FDSTATE_H
#define MSQ_FDSTATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fdrun.h"
#include "readpath.h"

/* F_RWDATA: opened read-write, holding data, with no advice (a database's
 * file, see fdstream.c's is_rwdata()): its long read runs are streams, its
 * writes are left alone, and so are runs shorter than a lag at close. */
enum { F_SEQ = 1, F_NOREUSE = 2, F_STOPPED = 4, F_CANREAD = 8, F_CANWRITE = 16, F_RWDATA = 32 };

struct msq_fd {
	dev_t dev;
	ino_t ino;
	unsigned flags;
	int busy;       /* one thread at a time updates the state */
	bool inherited; /* copied by fork: no final drop at close */
	int wdc;        /* writes through RWF_DONTCACHE: MSQ_DC_UNKNOWN until looked at */
	uint64_t size;     /* the file's size when it was classified */
	uint64_t advised;  /* bytes given to fadvise(DONTNEED), for MADVSEQ_DEBUG */
	struct msq_file_counts c; /* for MADVSEQ_STATS */
	uint64_t totalled; /* of c.streamed, added to the process total (fdstats.c) */
	struct msq_fd *retired_next; /* on the list of states awaiting their grace period */
	struct msq_stream st; /* the streams' decisions (fdrun.h) */
};

#endif

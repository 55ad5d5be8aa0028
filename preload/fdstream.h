/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read path's per-fd streams (fdstream.c), as the wrappers in
 * readpath.c use them.  A stream's state lives in the fd table
 * (fdtable.h); the wrappers see it only as "tracked or not".
 *
 * Calls are made with the shim's guard raised (MSQ_ENTER) and preserve
 * errno, except where noted.
 */
#ifndef MSQ_FDSTREAM_H
#define MSQ_FDSTREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <madvseq/policy.h>

#include "shim.h"

struct msq_fd;

/* Which fds the read path manages; read by every wrapper's fast path.
 * MSQ_READ_OFF until msq_readpath_init() sets it, last. */
extern enum msq_read_mode msq_fds_mode MSQ_HIDDEN;
/* MADVSEQ_DONTCACHE: 1, managed reads and writes go through
 * RWF_DONTCACHE; -1 (unset, the default), writes only; 0, neither. */
extern int msq_fds_dontcache MSQ_HIDDEN;

/*
 * One transfer on a managed fd, as the wrappers make it: classify
 * (msq_fds_begin), act (the program's call, or RWF_DONTCACHE in its place),
 * account (msq_fds_end).  The state is looked up once in each phase and
 * passed down; it is not held across the program's call, which may block
 * for long inside what would be an RCU read-side section.
 */
struct msq_xfer {
	int fd;
	bool writing;
	bool dontcache; /* make the call through RWF_DONTCACHE */
	bool refused;   /* (set by the caller) the filesystem refused it */
};
/* Before the call of n bytes (0: a stdio call, never RWF_DONTCACHE):
 * classifies fd first in "all" mode (where every regular file is managed
 * from its first transfer) and fills x. */
void msq_fds_begin(struct msq_xfer *x, int fd, bool writing, uint64_t n) MSQ_HIDDEN;
/* After it: rc bytes moved at offset off (off < 0: at the file position,
 * which the call advanced): move the stream, drop or write back what is
 * due; and remember a refusal of RWF_DONTCACHE for every fd of its
 * filesystem.  Preserves errno. */
void msq_fds_end(const struct msq_xfer *x, int64_t off, int64_t rc) MSQ_HIDDEN;
/* Whether fd is managed and its file was at least bytes long when the read
 * path first looked at it (lock-free). */
bool msq_fds_at_least(int fd, uint64_t bytes) MSQ_HIDDEN;
/* The program advised fd (posix_fadvise succeeded). */
void msq_fds_advise(int fd, int advice) MSQ_HIDDEN;
/* fd is about to be closed or replaced: the last drop (if drop) and the
 * end of its state. */
void msq_fds_forget(int fd, bool drop) MSQ_HIDDEN;
/* newfd now refers to what oldfd does (dup*, F_DUPFD). */
void msq_fds_duplicated(int oldfd, int newfd) MSQ_HIDDEN;

#endif

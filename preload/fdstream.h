/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read path's per-fd streams (fdstream.c), as the wrappers in
 * readpath.c and copypath.c use them.  A stream's state lives in the fd
 * table (fdtable.h); the wrappers see it only as "tracked or not".
 *
 * Calls are made with the shim's guard raised (MSQ_ENTER) and preserve
 * errno, except where noted.
 */
/*
 * The read path of libmadvseq.so: drop-behind for files streamed with
 * read(2) and friends, write-behind for streaming writers.
 *
 * Which fds are managed (MADVSEQ_READ): noreuse (fds advised
 * POSIX_FADV_NOREUSE), advised (NOREUSE or SEQUENTIAL; the default), all
 * (every regular file, classified once at its first read or write; but
 * read-write files and read-only files under RUN_MIN only when advised),
 * off.
 * A managed fd stops being managed when the program advises NORMAL,
 * RANDOM or WILLNEED; a read that is not sequential starts a new run, and
 * only runs longer than the lag drop anything.
 *
 * Signals: read(), write() and the other async-signal-safe wrappers stay
 * async-signal-safe.  On fds that are not managed they cost a TLS check
 * and two atomic loads.  On managed fds (and at the first read of an fd
 * in "all" mode) the shim makes syscalls, takes the urcu-bp read lock and
 * takes per-fd state from a lock-free pool (objpool.h): no malloc, no
 * blocking lock, no daemon.  A handler that interrupts the shim itself
 * finds the re-entry guard raised and goes straight to libc.
 *
 * Fork: the per-fd state is inherited with the fds (the same streams); a
 * child never makes a final drop at close() for an inherited fd.  vfork
 * children (shared memory) leave the state alone entirely.
 */
#ifndef MSQ_FDSTREAM_H
#define MSQ_FDSTREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <madvseq/policy.h>

#include "defs.h"

struct msq_fd;

/* Which fds the read path manages; read by every wrapper's fast path.
 * MSQ_READ_OFF until msq_fds_init() sets it, last; written only here
 * (fdstream.c). */
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

/* Reads MADVSEQ_DONTCACHE and turns the read path on (from init, after
 * the real functions are resolved). */
void msq_fds_init(void) MSQ_HIDDEN;
/* The mode the daemon's policy for this cgroup asks for (read = key):
 * applied unless MADVSEQ_READ is set, which wins. */
void msq_fds_policy(enum msq_read_mode m) MSQ_HIDDEN;
/* In a fork child: states are now inherited copies. */
void msq_fds_atfork_child(void) MSQ_HIDDEN;

#endif

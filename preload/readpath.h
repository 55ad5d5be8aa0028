/* SPDX-License-Identifier: LGPL-2.1-or-later */
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
#ifndef MSQ_READPATH_H
#define MSQ_READPATH_H

#include <stdint.h>

#include <madvseq/policy.h>

#include "shim.h"

/* Reads MADVSEQ_DONTCACHE and turns the read path on (from init, after
 * msq_real_resolve()). */
void msq_readpath_init(void) MSQ_HIDDEN;
/* The mode the daemon's policy for this cgroup asks for (read = key). */
void msq_readpath_set_mode(enum msq_read_mode m) MSQ_HIDDEN;
/* What the read path did in this process (MADVSEQ_STATS, and the
 * daemon's metrics): files managed, bytes the program moved through
 * managed streams, bytes advised DONTNEED behind them, bytes left because
 * they were cached before. */
struct msq_read_totals {
	uint64_t files, streamed, dropped, kept;
	uint64_t written; /* of dropped: behind write streams (write-behind) */
};
void msq_readpath_totals(struct msq_read_totals *t) MSQ_HIDDEN;
/* One file's figures, for MADVSEQ_STATS (kept only when it is set). */
struct msq_file_counts {
	uint64_t streamed, dropped, kept, written;
};
/* Calls fn for the files the read path managed (closed ones, as many as
 * it kept records of, then the open ones).  Lock-free and allocation-free:
 * for the stats file at exit and _exit. */
void msq_readpath_each_file(void (*fn)(const char *path, const struct msq_file_counts *c,
				       void *arg),
			    void *arg) MSQ_HIDDEN;
/* In a fork child: states are now inherited copies. */
void msq_readpath_atfork_child(void) MSQ_HIDDEN;

#endif

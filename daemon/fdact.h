/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Acting on a watched program's fd stream through a duplicate of its
 * descriptor (pidfd_getfd(2)), which is the program's own open file: the
 * daemon opens nothing by path.  What it does through the duplicate is
 * limited to what leaves the open file as the program has it: cachestat,
 * posix_fadvise(DONTNEED), sync_file_range(WRITE).  It never reads or
 * writes data through it, never moves its offset, never changes its
 * flags or its advice (SEQUENTIAL, RANDOM and NOREUSE would change the
 * program's own read-ahead), and closes it at once.
 */
#ifndef MSQD_FDACT_H
#define MSQD_FDACT_H

#include <stdint.h>
#include <sys/stat.h>

#include "../common/extents.h"

/*
 * A duplicate of descriptor fd of the process behind pidfd, if it is still
 * the file (dev, ino) that was observed, a regular file whose pages the
 * page cache holds (not tmpfs/shmem: its pages are the file), opened
 * without O_DIRECT and not O_PATH.  The program may dup2() another file
 * onto the number at any time: this check is made on the duplicate
 * itself, before every action.  *st: the duplicate's stat.  Returns the
 * descriptor (the caller closes it at once after acting) or -errno:
 * -ESTALE another file (or kind) is there now, -ESRCH the process is gone,
 * -EBADF no such descriptor, -EPERM not allowed (ptrace rules).
 */
int msqd_fdact_borrow(int pidfd, int fd, uint64_t dev, uint64_t ino, struct stat *st);

/*
 * The pages of [from, to) that are cached now, added to *pre page by page
 * (cachestat, halving where a range is partly cached).  Stops where *pre
 * would hold more than max_ranges ranges.  *reached: how far the snapshot
 * is complete (to when all of it).  Returns 0 or -errno (cachestat refused:
 * nothing is known).
 */
int msqd_fdact_snapshot(int fd, uint64_t from, uint64_t to, uint64_t size, struct msq_extents *pre,
			size_t max_ranges, uint64_t *reached);

/*
 * posix_fadvise(DONTNEED) of each range of drop, a 2 MiB chunk at a time
 * (the kernel itself leaves pages mapped anywhere).  A chunk with dirty
 * pages or pages under writeback is not advised (DONTNEED would start the
 * writeback itself and may wait): it goes to left, to be tried again.
 * *dropped: bytes that left the cache; chunks still partly cached after it
 * are added to left too (left may be NULL).  Returns 0 or the first -errno.
 */
int msqd_fdact_drop(int fd, const struct msq_extents *drop, uint64_t *dropped,
		    struct msq_extents *left);

/* Starts writeback of [from, to) (sync_file_range WRITE: no waiting), so
 * that a write stream's pages behind it can be dropped once clean. */
int msqd_fdact_writeback(int fd, uint64_t from, uint64_t to);

/* Bytes of [from, to) cached now (cachestat), or -errno. */
int64_t msqd_fdact_cached(int fd, uint64_t from, uint64_t to);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Where are the readers?  Finds the pages of a range that are present in a
 * process's page tables, from /proc/PID/pagemap: with the PAGEMAP_SCAN ioctl
 * where the kernel has it (6.7+), else by reading pagemap entries.  Present
 * is coarser than touched (fault-around maps 64 KiB, large folios up to
 * 2 MiB), so a cursor found this way is good to about 2 MiB.
 *
 * Thread contract: a struct msq_pagemap is used by one thread at a time.
 */
#ifndef MSQ_FRONTIER_H
#define MSQ_FRONTIER_H

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "extents.h"

struct msq_pagemap {
	int fd;
	bool scan; /* PAGEMAP_SCAN works on fd */
	dev_t dev; /* identity of fd, checked before each use */
	ino_t ino;
	pid_t pid; /* 0: the calling process */
};

/*
 * A /proc file a preloaded library holds open: opened read-only with
 * O_CLOEXEC and, if high_fd > 0, moved to the lowest free number >= high_fd
 * (so it does not take the small numbers a program expects); *st is its
 * identity.  Returns the descriptor or -errno.  msq_held_same says whether
 * fd still refers to that file (a program may close or reuse the number).
 */
int msq_open_held(const char *path, int high_fd, struct stat *st);
bool msq_held_same(int fd, dev_t dev, ino_t ino);

/*
 * Opens /proc/<pid>/pagemap (pid 0: self) below proc_root ("/proc" unless a
 * test points elsewhere) with msq_open_held, and probes PAGEMAP_SCAN.
 * Returns 0 or -errno.
 */
int msq_pagemap_open(struct msq_pagemap *pm, const char *proc_root, pid_t pid, int high_fd);
void msq_pagemap_close(struct msq_pagemap *pm);
/* -EBADF if pm->fd no longer refers to the file that was opened. */
int msq_pagemap_check(const struct msq_pagemap *pm);

/*
 * Adds to *file the present, file-backed pages of [start, end) and the
 * present anonymous ones (copy-on-write copies in private file mappings)
 * to *anon.  With anon NULL, for a mapping that holds none (shared) or
 * where they need not be told apart, every present page goes to *file:
 * telling them apart costs the kernel a page lookup per entry.
 * Page-aligned addresses.  Returns 0 or -errno (sets are then partly
 * filled).
 */
int msq_present_ranges(const struct msq_pagemap *pm, uint64_t start, uint64_t end,
		       struct msq_extents *file, struct msq_extents *anon);

/*
 * Adds to *out the pages of [start, end), a file mapping of this process,
 * that are in the page cache, mapped or not (mincore(2), vec_len pages a
 * call into vec).  The truth only for files the process may write: for
 * others the kernel calls every page cached.  Page-aligned addresses.
 * Returns 0 or -errno.
 */
int msq_cached_ranges(uint64_t start, uint64_t end, unsigned char *vec, size_t vec_len,
		      struct msq_extents *out);

#endif

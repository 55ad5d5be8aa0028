/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Kernel interfaces newer than the build machine's headers (Debian 12 ships
 * 6.1 UAPI headers) and raw syscall wrappers.  Each wrapper returns what the
 * syscall returns and sets errno like libc does.
 */
#ifndef MSQ_SYS_H
#define MSQ_SYS_H

#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef MADV_COLD
#define MADV_COLD 20
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif

/* PAGEMAP_SCAN (Linux 6.7, fs/proc/task_mmu.c). */
#define MSQ_PAGE_IS_FILE (1ULL << 2)
#define MSQ_PAGE_IS_PRESENT (1ULL << 3)

struct msq_page_region {
	uint64_t start, end, categories;
};

struct msq_pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

#define MSQ_PAGEMAP_SCAN _IOWR('f', 16, struct msq_pm_scan_arg)

/* /proc/PID/pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst). */
#define MSQ_PM_PRESENT (1ULL << 63)
#define MSQ_PM_FILE (1ULL << 61)
#define MSQ_PM_EXCLUSIVE (1ULL << 56)
#define MSQ_PM_PFN_MASK ((1ULL << 55) - 1)

struct msq_cachestat_range {
	uint64_t off, len;
};

struct msq_cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

static inline int msq_cachestat(int fd, struct msq_cachestat_range *r, struct msq_cachestat *cs)
{
	return (int)syscall(SYS_cachestat, fd, r, cs, 0);
}

static inline int msq_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static inline ssize_t msq_process_madvise(int pidfd, const struct iovec *iov, size_t n, int advice)
{
	return syscall(SYS_process_madvise, pidfd, iov, n, advice, 0);
}

/* The real madvise, whatever interposes the libc symbol. */
static inline int msq_sys_madvise(void *addr, size_t len, int advice)
{
	return (int)syscall(SYS_madvise, addr, len, advice);
}

#endif

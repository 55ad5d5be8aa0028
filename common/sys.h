/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Kernel interfaces newer than the build machine's headers (Debian 12 ships
 * 6.1 UAPI headers) and raw syscall wrappers.  The msq_sys_* ones return
 * -errno and keep errno (see below); the others set errno like libc does.
 */
#ifndef MSQ_SYS_H
#define MSQ_SYS_H

#include <errno.h>
#include <fcntl.h>
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
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
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

/* A duplicate of descriptor fd of the process behind pidfd (5.6+; needs
 * PTRACE_MODE_ATTACH_REALCREDS), close-on-exec. */
static inline int msq_pidfd_getfd(int pidfd, int fd)
{
	return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
}

static inline ssize_t msq_process_madvise(int pidfd, const struct iovec *iov, size_t n, int advice)
{
	return syscall(SYS_process_madvise, pidfd, iov, n, advice, 0);
}

/*
 * The library's own I/O: raw syscalls that return the result or -errno and
 * leave errno alone.  libmadvseq.so exports read, write, close, fcntl, ...
 * for the program; a call by those names from inside the library would
 * bind to its own wrappers (an exported symbol is interposable), so the
 * engine, logging, stats, daemon client and /proc readers use these
 * instead.  Each is async-signal-safe.
 */
static inline long msq_sys_ret(long r)
{
	return r;
}

#define MSQ_SYSCALL(...)                                  \
	({                                                \
		int msq_e_ = errno;                       \
		long msq_r_ = syscall(__VA_ARGS__);       \
		if (msq_r_ < 0)                           \
			msq_r_ = -errno;                  \
		errno = msq_e_;                           \
		msq_sys_ret(msq_r_);                      \
	})

static inline int msq_sys_open(const char *path, int flags)
{
	return (int)MSQ_SYSCALL(SYS_openat, AT_FDCWD, path, flags, 0);
}

static inline int msq_sys_creat(const char *path, int flags, mode_t mode)
{
	return (int)MSQ_SYSCALL(SYS_openat, AT_FDCWD, path, flags, mode);
}

static inline int msq_sys_close(int fd)
{
	return (int)MSQ_SYSCALL(SYS_close, fd);
}

/* Retries EINTR: the library's reads of /proc and sysfs are short. */
static inline ssize_t msq_sys_read(int fd, void *buf, size_t n)
{
	long r;

	while ((r = MSQ_SYSCALL(SYS_read, fd, buf, n)) == -EINTR)
		;
	return r;
}

static inline ssize_t msq_sys_pread(int fd, void *buf, size_t n, off_t off)
{
	long r;

	while ((r = MSQ_SYSCALL(SYS_pread64, fd, buf, n, off)) == -EINTR)
		;
	return r;
}

/* Writes all of buf (a short write is continued); bytes written or -errno. */
static inline ssize_t msq_sys_write_all(int fd, const void *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		long r = MSQ_SYSCALL(SYS_write, fd, (const char *)buf + done, n - done);

		if (r == -EINTR)
			continue;
		if (r <= 0)
			return done ? (ssize_t)done : (r ? r : -EIO);
		done += (size_t)r;
	}
	return (ssize_t)done;
}

static inline int msq_sys_fcntl(int fd, int cmd, long arg)
{
	return (int)MSQ_SYSCALL(SYS_fcntl, fd, cmd, arg);
}

static inline off_t msq_sys_lseek(int fd, off_t off, int whence)
{
	return (off_t)MSQ_SYSCALL(SYS_lseek, fd, off, whence);
}

static inline int msq_sys_fadvise(int fd, uint64_t off, uint64_t len, int advice)
{
	return (int)MSQ_SYSCALL(SYS_fadvise64, fd, (off_t)off, (off_t)len, advice);
}

/* The real madvise, whatever interposes the libc symbol (-errno). */
static inline int msq_sys_madvise(void *addr, size_t len, int advice)
{
	return (int)MSQ_SYSCALL(SYS_madvise, addr, len, advice);
}

static inline int msq_sys_mincore(void *addr, size_t len, unsigned char *vec)
{
	return (int)MSQ_SYSCALL(SYS_mincore, addr, len, vec);
}

/* msq_cachestat's twin for the library's engine, which keeps errno. */
static inline int msq_sys_cachestat(int fd, struct msq_cachestat_range *r, struct msq_cachestat *cs)
{
	return (int)MSQ_SYSCALL(SYS_cachestat, fd, r, cs, 0);
}

/* Anonymous private memory of the library's own (MAP_FAILED-free: NULL). */
static inline void *msq_sys_map_anon(size_t len)
{
	long r = MSQ_SYSCALL(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return r < 0 ? NULL : (void *)r;
}

static inline int msq_sys_unmap(void *addr, size_t len)
{
	return (int)MSQ_SYSCALL(SYS_munmap, addr, len);
}

static inline pid_t msq_sys_getpid(void)
{
	return (pid_t)syscall(SYS_getpid);
}

#endif

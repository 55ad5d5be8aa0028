/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read path's wrappers: the read and write families, posix_fadvise,
 * sendfile and copy_file_range, the fd lifetime calls (close, dup*, fcntl,
 * close_range) and stdio's fread/fclose.  Each has a fast path for fds
 * that are none of the read path's business and otherwise tells
 * fdstream.c what moved; the mechanism (snapshots, fadvise behind the
 * stream, write-behind) is described there.
 */
#include "readpath.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/fault.h"
#include "../common/sys.h"
#include "env.h"
#include "fdstream.h"
#include "fdtable.h"
#include "locks.h"
#include "real.h"

#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x00000080
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif


/* preadv2 or pwritev2 with RWF_DONTCACHE in place of the program's read or
 * write (off -1: at the file position, as read, readv, write and writev
 * move); returns -2 (and errno untouched) when the caller must make the
 * program's own call.  The raw syscall: the library's own I/O does not go
 * through its wrappers. */
static ssize_t try_dontcache(bool writing, int fd, const struct iovec *iov, int cnt, int64_t off,
			     int flags)
{
	int saved = errno;
	ssize_t rc;

	if (writing ? MSQ_FAULT("madvseq/readpath/pwritev2") : MSQ_FAULT("madvseq/readpath/preadv2"))
		return -2;
	rc = syscall(writing ? SYS_pwritev2 : SYS_preadv2, fd, iov, cnt, (long)off, 0L,
		     flags | RWF_DONTCACHE);
	if (rc < 0 && (errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS)) {
		/* Refused before any data moved: the program's own call decides
		 * (an EINVAL of its own making comes back from it).  Kernels and
		 * filesystems without RWF_DONTCACHE say EOPNOTSUPP, kernels
		 * without the syscall ENOSYS. */
		if (errno == EOPNOTSUPP)
			msq_fds_dontcache_refused(fd);
		errno = saved;
		return -2;
	}
	return rc;
}

/* ---- wrappers ---------------------------------------------------------- */

/* glibc's fortified entry points (no public prototypes). */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);

/*
 * The fast path of every wrapper: true when fd is none of the read path's
 * business.  msq_fds_mode is set last by msq_readpath_init(), so a non-OFF mode
 * means initialised; OFF (configured, or not yet initialised) asks
 * msq_shim_ready(), which initialises on first use.
 */
static inline bool untracked(int fd)
{
	enum msq_read_mode m;
	struct msq_fd *s;

	if (msq_guard || (unsigned)fd >= MSQ_FDT_MAX)
		return true;
	m = __atomic_load_n(&msq_fds_mode, __ATOMIC_ACQUIRE);
	if (__builtin_expect(m == MSQ_READ_OFF, 0) &&
	    (!msq_shim_ready() || (m = __atomic_load_n(&msq_fds_mode, __ATOMIC_ACQUIRE)) == MSQ_READ_OFF))
		return true;
	s = msq_fdt_peek(fd);
	return s == MSQ_FD_IGNORED || (!s && m != MSQ_READ_ALL);
}

#define CALL MSQ_REAL

static ssize_t call_read(int fd, void *buf, size_t n)
{
	return CALL(read, syscall(SYS_read, fd, buf, n), fd, buf, n);
}

static __attribute__((noinline, cold)) ssize_t read_slow(int fd, void *buf, size_t n)
{
	struct iovec iov = { buf, n };
	ssize_t rc = -2;

	MSQ_ENTER();
	if (msq_fds_use_dontcache(fd))
		rc = try_dontcache(false, fd, &iov, 1, -1, 0);
	if (rc == -2)
		rc = call_read(fd, buf, n);
	if (rc > 0)
		msq_fds_after(fd, -1, (uint64_t)rc, false);
	MSQ_LEAVE();
	return rc;
}

/* read() and __read_chk share it: no call of the exported name from
 * inside the library (it would bind to the library's own symbol). */
static inline ssize_t wrap_read(int fd, void *buf, size_t n)
{
	if (__builtin_expect(untracked(fd), 1))
		return call_read(fd, buf, n);
	return read_slow(fd, buf, n);
}

MSQ_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	return wrap_read(fd, buf, n);
}

MSQ_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen && msq_real.read_chk)
		return msq_real.read_chk(fd, buf, n, buflen); /* reports the overflow */
	return wrap_read(fd, buf, n);
}

static ssize_t pread_common(int fd, void *buf, size_t n, int64_t off, bool is64)
{
	struct iovec iov = { buf, n };
	ssize_t rc = -2;

	if (untracked(fd) || off < 0)
		return is64 ? CALL(pread64, syscall(SYS_pread64, fd, buf, n, off), fd, buf, n, off)
			    : CALL(pread, syscall(SYS_pread64, fd, buf, n, off), fd, buf, n, off);
	MSQ_ENTER();
	if (msq_fds_use_dontcache(fd))
		rc = try_dontcache(false, fd, &iov, 1, off, 0);
	if (rc == -2)
		rc = is64 ? CALL(pread64, syscall(SYS_pread64, fd, buf, n, off), fd, buf, n, off)
			  : CALL(pread, syscall(SYS_pread64, fd, buf, n, off), fd, buf, n, off);
	if (rc > 0)
		msq_fds_after(fd, off, (uint64_t)rc, false);
	MSQ_LEAVE();
	return rc;
}

MSQ_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	return pread_common(fd, buf, n, off, false);
}

MSQ_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
	return pread_common(fd, buf, n, off, true);
}

MSQ_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	if (n > buflen && msq_real.pread_chk)
		return msq_real.pread_chk(fd, buf, n, off, buflen);
	return pread_common(fd, buf, n, off, false);
}

MSQ_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen)
{
	if (n > buflen && msq_real.pread64_chk)
		return msq_real.pread64_chk(fd, buf, n, off, buflen);
	return pread_common(fd, buf, n, off, true);
}

/* readv/preadv/preadv2 and their 64-bit names: off -1 means the file
 * position (readv, preadv2 with -1). */
enum vkind { V_READV, V_PREADV, V_PREADV64, V_PREADV2, V_PREADV64V2 };

static ssize_t call_v(enum vkind k, int fd, const struct iovec *iov, int cnt, int64_t off, int fl)
{
	switch (k) {
	case V_READV: return CALL(readv, syscall(SYS_readv, fd, iov, cnt), fd, iov, cnt);
	case V_PREADV: return CALL(preadv, syscall(SYS_preadv, fd, iov, cnt, off, 0), fd, iov, cnt, off);
	case V_PREADV64: return CALL(preadv64, syscall(SYS_preadv, fd, iov, cnt, off, 0), fd, iov, cnt, off);
	case V_PREADV2:
		return CALL(preadv2, syscall(SYS_preadv2, fd, iov, cnt, off, 0, fl), fd, iov, cnt, off, fl);
	case V_PREADV64V2:
		return CALL(preadv64v2, syscall(SYS_preadv2, fd, iov, cnt, off, 0, fl), fd, iov, cnt, off, fl);
	}
	return -1;
}

static ssize_t readv_common(enum vkind k, int fd, const struct iovec *iov, int cnt, int64_t off,
			    int fl)
{
	bool positional = k != V_READV && off != -1;
	ssize_t rc = -2;

	if (untracked(fd) || (k != V_READV && off < -1) || (k == V_PREADV && off < 0) ||
	    (k == V_PREADV64 && off < 0))
		return call_v(k, fd, iov, cnt, off, fl);
	MSQ_ENTER();
	if (msq_fds_use_dontcache(fd))
		rc = try_dontcache(false, fd, iov, cnt, positional ? off : -1, fl);
	if (rc == -2)
		rc = call_v(k, fd, iov, cnt, off, fl);
	if (rc > 0)
		msq_fds_after(fd, positional ? off : -1, (uint64_t)rc, false);
	MSQ_LEAVE();
	return rc;
}

MSQ_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	return readv_common(V_READV, fd, iov, cnt, -1, 0);
}

MSQ_EXPORT ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return readv_common(V_PREADV, fd, iov, cnt, off, 0);
}

MSQ_EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
	return readv_common(V_PREADV64, fd, iov, cnt, off, 0);
}

MSQ_EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int fl)
{
	return readv_common(V_PREADV2, fd, iov, cnt, off, fl);
}

MSQ_EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int fl)
{
	return readv_common(V_PREADV64V2, fd, iov, cnt, off, fl);
}

/* Writes: the same shape; a stream's writes go through RWF_DONTCACHE once
 * write-behind is due (msq_fds_write_dontcache). */
static ssize_t call_write(int fd, const void *buf, size_t n)
{
	return CALL(write, syscall(SYS_write, fd, buf, n), fd, buf, n);
}

static __attribute__((noinline, cold)) ssize_t write_slow(int fd, const void *buf, size_t n)
{
	ssize_t rc = -2;

	MSQ_ENTER();
	msq_fds_seen(fd);
	if (msq_fds_write_dontcache(fd, n))
		rc = try_dontcache(true, fd, &(struct iovec){ (void *)buf, n }, 1, -1, 0);
	if (rc == -2)
		rc = call_write(fd, buf, n);
	if (rc > 0)
		msq_fds_after(fd, -1, (uint64_t)rc, true);
	MSQ_LEAVE();
	return rc;
}

MSQ_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	if (__builtin_expect(untracked(fd), 1))
		return call_write(fd, buf, n);
	return write_slow(fd, buf, n);
}

static ssize_t pwrite_common(int fd, const void *buf, size_t n, int64_t off, bool is64)
{
	ssize_t rc;

	if (untracked(fd) || off < 0)
		return is64 ? CALL(pwrite64, syscall(SYS_pwrite64, fd, buf, n, off), fd, buf, n, off)
			    : CALL(pwrite, syscall(SYS_pwrite64, fd, buf, n, off), fd, buf, n, off);
	MSQ_ENTER();
	msq_fds_seen(fd);
	rc = msq_fds_write_dontcache(fd, n)
		     ? try_dontcache(true, fd, &(struct iovec){ (void *)buf, n }, 1, off, 0)
		     : -2;
	if (rc == -2)
		rc = is64 ? CALL(pwrite64, syscall(SYS_pwrite64, fd, buf, n, off), fd, buf, n, off)
			  : CALL(pwrite, syscall(SYS_pwrite64, fd, buf, n, off), fd, buf, n, off);
	if (rc > 0)
		msq_fds_after(fd, off, (uint64_t)rc, true);
	MSQ_LEAVE();
	return rc;
}

MSQ_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return pwrite_common(fd, buf, n, off, false);
}

MSQ_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
	return pwrite_common(fd, buf, n, off, true);
}

static ssize_t call_wv(enum vkind k, int fd, const struct iovec *iov, int cnt, int64_t off, int fl)
{
	switch (k) {
	case V_READV: return CALL(writev, syscall(SYS_writev, fd, iov, cnt), fd, iov, cnt);
	case V_PREADV: return CALL(pwritev, syscall(SYS_pwritev, fd, iov, cnt, off, 0), fd, iov, cnt, off);
	case V_PREADV64:
		return CALL(pwritev64, syscall(SYS_pwritev, fd, iov, cnt, off, 0), fd, iov, cnt, off);
	case V_PREADV2:
		return CALL(pwritev2, syscall(SYS_pwritev2, fd, iov, cnt, off, 0, fl), fd, iov, cnt, off, fl);
	case V_PREADV64V2:
		return CALL(pwritev64v2, syscall(SYS_pwritev2, fd, iov, cnt, off, 0, fl), fd, iov, cnt, off, fl);
	}
	return -1;
}

/* The bytes an iovec asks to move (0 if it cannot be told: too many
 * entries, or an overflow, which the real call then reports itself). */
static uint64_t iov_bytes(const struct iovec *iov, int cnt)
{
	uint64_t n = 0;

	if (cnt <= 0 || cnt > 1024)
		return 0;
	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len > (uint64_t)SSIZE_MAX - n)
			return 0;
		n += iov[i].iov_len;
	}
	return n;
}

static ssize_t writev_common(enum vkind k, int fd, const struct iovec *iov, int cnt, int64_t off,
			     int fl)
{
	bool positional = k != V_READV && off != -1;
	ssize_t rc;

	if (untracked(fd) || (k != V_READV && off < -1) || ((k == V_PREADV || k == V_PREADV64) && off < 0))
		return call_wv(k, fd, iov, cnt, off, fl);
	MSQ_ENTER();
	msq_fds_seen(fd);
	rc = msq_fds_write_dontcache(fd, iov_bytes(iov, cnt))
		     ? try_dontcache(true, fd, iov, cnt, positional ? off : -1, fl)
		     : -2;
	if (rc == -2)
		rc = call_wv(k, fd, iov, cnt, off, fl);
	if (rc > 0)
		msq_fds_after(fd, positional ? off : -1, (uint64_t)rc, true);
	MSQ_LEAVE();
	return rc;
}

MSQ_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	return writev_common(V_READV, fd, iov, cnt, -1, 0);
}

MSQ_EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return writev_common(V_PREADV, fd, iov, cnt, off, 0);
}

MSQ_EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
	return writev_common(V_PREADV64, fd, iov, cnt, off, 0);
}

MSQ_EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int fl)
{
	return writev_common(V_PREADV2, fd, iov, cnt, off, fl);
}

MSQ_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int fl)
{
	return writev_common(V_PREADV64V2, fd, iov, cnt, off, fl);
}

/*
 * sendfile and copy_file_range move data without a user buffer.  On
 * managed fds a large call is made in pieces, with bookkeeping between
 * them, so drop-behind keeps up inside one call (cp copies a whole file in
 * one copy_file_range), but only where the pieces provably do what the
 * one call would (may_split): then the program gets what one call returns,
 * the bytes moved (at most the kernel's own cap of one call), or the
 * error if none were.  Otherwise the call is made whole and accounted
 * after.
 */
#define PIECE (UINT64_C(8) << 20)
/* The kernel moves at most this much in one read, write, sendfile or
 * copy_file_range through the page cache (MAX_RW_COUNT). */
#define RW_MAX ((size_t)0x7ffff000)
#define EXT4_MAGIC 0xEF53
#define TMPFS_MAGIC 0x01021994

static bool copy_untracked(int in, int out)
{
	if (msq_guard || !msq_shim_ready() || msq_fds_mode == MSQ_READ_OFF)
		return true;
	if (msq_fds_mode == MSQ_READ_ALL)
		return false;
	return !msq_fdt_peek(in) && (out < 0 || !msq_fdt_peek(out));
}

static void copy_classify(int in, int out)
{
	msq_fds_seen(in);
	if (out >= 0)
		msq_fds_seen(out);
}

static ssize_t call_sendfile(int out, int in, int64_t *off, size_t n)
{
	return CALL(sendfile64, syscall(SYS_sendfile, out, in, off, n), out, in, (off64_t *)off, n);
}

static ssize_t call_cfr(int in, int64_t *in_off, int out, int64_t *out_off, size_t n, unsigned fl)
{
	return CALL(copy_file_range, syscall(SYS_copy_file_range, in, in_off, out, out_off, n, fl),
		    in, (off64_t *)in_off, out, (off64_t *)out_off, n, fl);
}

/*
 * Reads the program's offset *p without trusting the pointer (the kernel
 * answers a bad one with EFAULT; the shim must not fault first): false if
 * it cannot be read.
 */
static bool read_offset(const int64_t *p, int64_t *v)
{
	struct iovec local = { v, sizeof(*v) }, remote = { (void *)p, sizeof(*v) };

	return MSQ_SYSCALL(SYS_process_vm_readv, msq_sys_getpid(), &local, 1, &remote, 1, 0) ==
	       (long)sizeof(*v);
}

/*
 * Whether a copy of n bytes may be made in pieces with the one call's
 * result.  Both ends regular files of different inodes (a copy within
 * one file may overlap, which the kernel refuses whole: EINVAL), offsets
 * whose end does not overflow (EOVERFLOW/EINVAL would be the whole call's
 * answer), flags 0, and for copy_file_range an output on a filesystem
 * that copies through the page cache (ext4, tmpfs), where the kernel
 * itself moves the data in pieces of at most RW_MAX; elsewhere a
 * filesystem may clone the whole range at once.  sendfile always goes
 * through the page cache.
 */
static bool may_split(int in, const int64_t *in_off, int out, const int64_t *out_off, size_t n,
		      unsigned fl, bool is_sendfile)
{
	struct stat si, so;
	struct statfs fs;
	int64_t ipos, opos;

	/* Only a managed input file at least a piece long is worth it: a
	 * smaller one (most of those cp -r copies) or one the read path
	 * leaves alone is copied whole, without a look. */
	if (n <= PIECE || fl || !msq_fds_at_least(in, PIECE))
		return false;
	if (fstat(in, &si) < 0 || fstat(out, &so) < 0 || !S_ISREG(si.st_mode))
		return false;
	if (S_ISREG(so.st_mode) && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
		return false;
	if (!is_sendfile && (!S_ISREG(so.st_mode) || fstatfs(out, &fs) < 0 ||
			     (fs.f_type != EXT4_MAGIC && fs.f_type != TMPFS_MAGIC)))
		return false;
	if (in_off ? !read_offset(in_off, &ipos) : (ipos = msq_sys_lseek(in, 0, SEEK_CUR)) < 0)
		return false;
	if (out_off ? !read_offset(out_off, &opos)
		    : (opos = is_sendfile ? 0 : msq_sys_lseek(out, 0, SEEK_CUR)) < 0)
		return false;
	if (ipos < 0 || opos < 0)
		return false;
	return (uint64_t)ipos + n >= (uint64_t)ipos && (uint64_t)ipos + n <= INT64_MAX &&
	       (uint64_t)opos + n <= INT64_MAX;
}

/* One piece after another; out_fd < 0: sendfile (out is not a file).
 * The offsets were read by may_split: the pointers are valid. */
static ssize_t copy_pieces(int in, int64_t *in_off, int out, int64_t *out_off, size_t n,
			   unsigned fl, bool is_sendfile)
{
	ssize_t total = 0;

	if (n > RW_MAX)
		n = RW_MAX;
	do { /* at least one call: it reports bad fds even for n == 0 */
		size_t want = n - (size_t)total < PIECE ? n - (size_t)total : PIECE;
		int64_t is = in_off ? *in_off : -1, os = out_off ? *out_off : -1;
		ssize_t rc = is_sendfile ? call_sendfile(out, in, in_off, want)
					 : call_cfr(in, in_off, out, out_off, want, fl);

		if (rc < 0)
			return total ? total : rc; /* errno is the call's when nothing moved */
		if (rc > 0) {
			MSQ_PROTECT_ERRNO;
			msq_fds_after(in, is, (uint64_t)rc, false);
			if (!is_sendfile)
				msq_fds_after(out, os, (uint64_t)rc, true);
		}
		total += rc;
		if ((size_t)rc < want)
			break; /* end of file, or the output would block */
	} while ((size_t)total < n);
	return total;
}

/* The whole call, then the bookkeeping of what it moved.  The offsets
 * are read only after the kernel accepted (and advanced) them. */
static ssize_t copy_whole(int in, int64_t *in_off, int out, int64_t *out_off, size_t n,
			  unsigned fl, bool is_sendfile)
{
	ssize_t rc;

	rc = is_sendfile ? call_sendfile(out, in, in_off, n) : call_cfr(in, in_off, out, out_off, n, fl);
	if (rc > 0) {
		MSQ_PROTECT_ERRNO;
		msq_fds_after(in, in_off ? *in_off - rc : -1, (uint64_t)rc, false);
		if (!is_sendfile)
			msq_fds_after(out, out_off ? *out_off - rc : -1, (uint64_t)rc, true);
	}
	return rc;
}

static ssize_t copy_managed(int in, int64_t *in_off, int out, int64_t *out_off, size_t n,
			    unsigned fl, bool is_sendfile)
{
	ssize_t rc;

	MSQ_ENTER();
	/* (No owner check: a vfork child that copies anyway gets the one
	 * call's result either way.)  Classified before the call: its
	 * snapshot sees what was cached before. */
	copy_classify(in, is_sendfile ? -1 : out);
	if (may_split(in, in_off, out, out_off, n, fl, is_sendfile))
		rc = copy_pieces(in, in_off, out, out_off, n, fl, is_sendfile);
	else
		rc = copy_whole(in, in_off, out, out_off, n, fl, is_sendfile);
	MSQ_LEAVE();
	return rc;
}

MSQ_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
	if (copy_untracked(in, -1))
		return CALL(sendfile, syscall(SYS_sendfile, out, in, off, n), out, in, off, n);
	return copy_managed(in, (int64_t *)off, out, NULL, n, 0, true);
}

MSQ_EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t n)
{
	if (copy_untracked(in, -1))
		return call_sendfile(out, in, (int64_t *)off, n);
	return copy_managed(in, (int64_t *)off, out, NULL, n, 0, true);
}

MSQ_EXPORT ssize_t copy_file_range(int in, off64_t *in_off, int out, off64_t *out_off, size_t n,
				   unsigned fl)
{
	if (copy_untracked(in, out))
		return call_cfr(in, (int64_t *)in_off, out, (int64_t *)out_off, n, fl);
	return copy_managed(in, (int64_t *)in_off, out, (int64_t *)out_off, n, fl, false);
}

/* ---- advice ------------------------------------------------------------ */

static int fadvise_common(int fd, int64_t off, int64_t len, int advice, bool is64)
{
	int rc = is64 ? CALL(posix_fadvise64,
			     syscall(SYS_fadvise64, fd, off, len, advice) < 0 ? errno : 0, fd, off,
			     len, advice)
		      : CALL(posix_fadvise,
			     syscall(SYS_fadvise64, fd, off, len, advice) < 0 ? errno : 0, fd, off,
			     len, advice);

	if (rc == 0 && !msq_guard && msq_shim_ready() && msq_fds_mode != MSQ_READ_OFF) {
		MSQ_PROTECT_ERRNO;
		MSQ_ENTER();
		msq_fds_advise(fd, advice);
		MSQ_LEAVE();
	}
	return rc;
}

MSQ_EXPORT int posix_fadvise(int fd, off_t off, off_t len, int advice)
{
	return fadvise_common(fd, off, len, advice, false);
}

MSQ_EXPORT int posix_fadvise64(int fd, off64_t off, off64_t len, int advice)
{
	return fadvise_common(fd, off, len, advice, true);
}

/* ---- fd lifetime ------------------------------------------------------- */

MSQ_EXPORT int close(int fd)
{
	int rc;

	if (msq_guard || !msq_shim_ready() || !msq_fdt_peek(fd))
		return CALL(close, (int)syscall(SYS_close, fd), fd);
	MSQ_ENTER();
	msq_fds_forget(fd, true);
	rc = CALL(close, (int)syscall(SYS_close, fd), fd);
	MSQ_LEAVE();
	return rc;
}

static bool dup_untracked(int oldfd, int newfd)
{
	return msq_guard || !msq_shim_ready() ||
	       (!msq_fdt_peek(oldfd) && (newfd < 0 || !msq_fdt_peek(newfd)));
}

MSQ_EXPORT int dup(int fd)
{
	int rc;

	if (dup_untracked(fd, -1))
		return CALL(dup, (int)syscall(SYS_dup, fd), fd);
	MSQ_ENTER();
	rc = CALL(dup, (int)syscall(SYS_dup, fd), fd);
	if (rc >= 0)
		msq_fds_duplicated(fd, rc);
	MSQ_LEAVE();
	return rc;
}

static int call_dup23(int oldfd, int newfd, int flags, bool three)
{
	return three ? CALL(dup3, (int)syscall(SYS_dup3, oldfd, newfd, flags), oldfd, newfd, flags)
		     : CALL(dup2, (int)syscall(SYS_dup2, oldfd, newfd), oldfd, newfd);
}

static int dup23_tracked(int oldfd, int newfd, int flags, bool three)
{
	int rc;

	MSQ_ENTER();
	if (oldfd != newfd && msq_fdt_peek(newfd)) {
		/* newfd is closed by the call if it succeeds; validate first. */
		if (msq_sys_fcntl(oldfd, F_GETFD, 0) >= 0)
			msq_fds_forget(newfd, true);
	}
	rc = call_dup23(oldfd, newfd, flags, three);
	if (rc >= 0 && oldfd != newfd)
		msq_fds_duplicated(oldfd, rc);
	MSQ_LEAVE();
	return rc;
}

/* newfd may be a number the library briefly holds: see msq_lowfd_begin().
 * (Leaving touches no errno: the call's own stays.) */
static int dup23(int oldfd, int newfd, int flags, bool three)
{
	int rc;

	msq_lowfd_dup_enter();
	rc = dup_untracked(oldfd, newfd) ? call_dup23(oldfd, newfd, flags, three)
					 : dup23_tracked(oldfd, newfd, flags, three);
	msq_lowfd_dup_leave();
	return rc;
}

MSQ_EXPORT int dup2(int oldfd, int newfd)
{
	return dup23(oldfd, newfd, 0, false);
}

MSQ_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	return dup23(oldfd, newfd, flags, true);
}

static int fcntl_common(int fd, int cmd, void *arg, bool is64)
{
	int rc;

	rc = is64 ? CALL(fcntl64, (int)syscall(SYS_fcntl, fd, cmd, arg), fd, cmd, arg)
		  : CALL(fcntl, (int)syscall(SYS_fcntl, fd, cmd, arg), fd, cmd, arg);
	if (rc < 0 || msq_guard || !msq_shim_ready() || !msq_fdt_peek(fd))
		return rc;
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
		MSQ_ENTER();
		msq_fds_duplicated(fd, rc);
		MSQ_LEAVE();
	} else if (cmd == F_SETFL && ((uintptr_t)arg & O_DIRECT) && msq_is_owner()) {
		/* O_DIRECT now: the page cache is not involved any more. */
		MSQ_PROTECT_ERRNO;
		MSQ_ENTER();
		msq_fds_forget(fd, false);
		msq_fdt_cas(fd, NULL, MSQ_FD_IGNORED);
		MSQ_LEAVE();
	}
	return rc;
}

MSQ_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_common(fd, cmd, arg, false);
}

MSQ_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_common(fd, cmd, arg, true);
}

static void forget_one(int fd, struct msq_fd *v, void *arg)
{
	(void)v;
	(void)arg;
	msq_fds_forget(fd, false);
}

MSQ_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	int rc;

	rc = CALL(close_range, (int)syscall(SYS_close_range, first, last, flags), first, last, flags);
	/* After the call: the fds are gone (no final drop possible). */
	if (rc == 0 && !(flags & CLOSE_RANGE_CLOEXEC) && !msq_guard && msq_shim_ready() &&
	    msq_is_owner()) {
		MSQ_PROTECT_ERRNO;
		MSQ_ENTER();
		msq_fdt_each(first, last, forget_one, NULL);
		MSQ_LEAVE();
	}
	return rc;
}

/*
 * stdio reads and writes through libc's internal read and write, which no
 * wrapper sees (glibc binds them inside libc): sha256sum reads with fread
 * after advising SEQUENTIAL, pg_basebackup and pg_dump write their output
 * with fwrite, sed reads lines with getdelim.  fread, fwrite, getdelim and
 * getline are interposed for their bookkeeping (the fd's position differs
 * from the program's by at most stdio's buffer, which the stream's 2 MiB
 * chunks do not notice), and fclose for the end of the fd.  Other stdio
 * (getc, fgets, fputs, fprintf) is not followed.
 */
static int stream_fd(FILE *fp)
{
	MSQ_PROTECT_ERRNO;

	return fp ? fileno(fp) : -1;
}

/* Before a stdio call the real function `have' makes: the fd behind fp,
 * looked at and with the guard raised, when the read path follows it;
 * -1 (nothing done) otherwise. */
static int stdio_begin(FILE *fp, bool have)
{
	int fd;

	if (msq_guard || !msq_shim_ready() || msq_fds_mode == MSQ_READ_OFF || !have ||
	    untracked(fd = stream_fd(fp)))
		return -1;
	MSQ_ENTER();
	msq_fds_seen(fd);
	return fd;
}

/* After it, when stdio_begin gave fd >= 0: n bytes moved. */
static void stdio_end(int fd, uint64_t n, bool writing)
{
	if (n)
		msq_fds_after(fd, -1, n, writing);
	MSQ_LEAVE();
}

static size_t fread_common(void *p, size_t size, size_t n, FILE *fp, bool unlocked)
{
	size_t (*fn)(void *, size_t, size_t, FILE *) = unlocked ? msq_real.fread_unlocked : msq_real.fread;
	int fd = stdio_begin(fp, fn);
	size_t rc = fn ? fn(p, size, n, fp) : 0;

	if (fd >= 0)
		stdio_end(fd, (uint64_t)rc * size, false);
	return rc;
}

MSQ_EXPORT size_t fread(void *p, size_t size, size_t n, FILE *fp)
{
	return fread_common(p, size, n, fp, false);
}

MSQ_EXPORT size_t (fread_unlocked)(void *p, size_t size, size_t n, FILE *fp)
{
	return fread_common(p, size, n, fp, true);
}

static size_t fwrite_common(const void *p, size_t size, size_t n, FILE *fp, bool unlocked)
{
	size_t (*fn)(const void *, size_t, size_t, FILE *) =
		unlocked ? msq_real.fwrite_unlocked : msq_real.fwrite;
	int fd = stdio_begin(fp, fn);
	size_t rc = fn ? fn(p, size, n, fp) : 0;

	if (fd >= 0)
		stdio_end(fd, (uint64_t)rc * size, true);
	return rc;
}

MSQ_EXPORT size_t fwrite(const void *p, size_t size, size_t n, FILE *fp)
{
	return fwrite_common(p, size, n, fp, false);
}

MSQ_EXPORT size_t (fwrite_unlocked)(const void *p, size_t size, size_t n, FILE *fp)
{
	return fwrite_common(p, size, n, fp, true);
}

MSQ_EXPORT ssize_t getdelim(char **line, size_t *len, int delim, FILE *fp)
{
	int fd = stdio_begin(fp, msq_real.getdelim);
	ssize_t rc = msq_real.getdelim ? msq_real.getdelim(line, len, delim, fp) : (errno = ENOSYS, -1);

	if (fd >= 0)
		stdio_end(fd, rc > 0 ? (uint64_t)rc : 0, false);
	return rc;
}

MSQ_EXPORT ssize_t getline(char **line, size_t *len, FILE *fp)
{
	int fd = stdio_begin(fp, msq_real.getline);
	ssize_t rc = msq_real.getline ? msq_real.getline(line, len, fp) : (errno = ENOSYS, -1);

	if (fd >= 0)
		stdio_end(fd, rc > 0 ? (uint64_t)rc : 0, false);
	return rc;
}

MSQ_EXPORT int fclose(FILE *fp)
{
	int fd, rc;

	if (msq_guard || !msq_shim_ready() || !msq_real.fclose || (fd = stream_fd(fp)) < 0 ||
	    !msq_fdt_peek(fd))
		return msq_real.fclose ? msq_real.fclose(fp) : EOF;
	MSQ_ENTER();
	msq_fds_forget(fd, true);
	rc = msq_real.fclose(fp);
	MSQ_LEAVE();
	return rc;
}

/* ---- set-up -------------------------------------------------------------- */

void msq_readpath_init(void)
{
	const char *v = msq_env("MADVSEQ_DONTCACHE");

	/* Unset: writes only (fdstream.c says why reads are opt-in). */
	if (v) {
		bool on = false;

		if (msq_parse_bool(v, &on) < 0)
			msq_warn("MADVSEQ_DONTCACHE='%s' is not a boolean (yes or no); using 0", v);
		msq_fds_dontcache = on;
	}
	/* Last: the wrappers act only once the real functions are known. */
	__atomic_store_n(&msq_fds_mode, msq_cfg.policy.read, __ATOMIC_RELEASE);
}

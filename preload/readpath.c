/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read path's wrappers: the read and write families, posix_fadvise,
 * the fd lifetime calls (close, dup*, fcntl, close_range) and stdio's
 * fread/fclose (sendfile and copy_file_range: copypath.c).  Each has a
 * fast path for fds that are none of the read path's business and
 * otherwise tells fdstream.c what moved; the mechanism (snapshots, fadvise
 * behind the stream, write-behind) is described there.
 */
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
#include "fdstream.h"
#include "fdtable.h"
#include "locks.h"
#include "real.h"
#include "shim.h"

#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x00000080
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif


/* ---- wrappers ---------------------------------------------------------- */

/* glibc's fortified entry points (no public prototypes). */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);

/*
 * The fast path of every wrapper: true when fd is none of the read path's
 * business.  msq_fds_mode is set last by msq_fds_init(), so a non-OFF mode
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

/*
 * The read and write families, one implementation with a direction: which
 * of the program's calls a wrapper stands for.  X_ONE: read, write; X_POS:
 * pread, pwrite (X_POS64: their 64-bit names); X_V: readv, writev; X_PV:
 * preadv, pwritev; X_PV2: preadv2, pwritev2 (off -1: the file position).
 * X_ONE and X_POS calls move buf[0, n), the others iov[0, cnt).
 */
enum xkind { X_ONE, X_POS, X_POS64, X_V, X_PV, X_PV64, X_PV2, X_PV64V2 };

/* The program's own call. */
static inline ssize_t call_x(bool writing, enum xkind k, int fd, void *b, size_t n,
			     const struct iovec *iov, int cnt, int64_t off, int fl)
{
	if (writing) {
		switch (k) {
		case X_ONE: return CALL(write, syscall(SYS_write, fd, b, n), fd, b, n);
		case X_POS: return CALL(pwrite, syscall(SYS_pwrite64, fd, b, n, off), fd, b, n, off);
		case X_POS64: return CALL(pwrite64, syscall(SYS_pwrite64, fd, b, n, off), fd, b, n, off);
		case X_V: return CALL(writev, syscall(SYS_writev, fd, iov, cnt), fd, iov, cnt);
		case X_PV: return CALL(pwritev, syscall(SYS_pwritev, fd, iov, cnt, off, 0), fd, iov, cnt, off);
		case X_PV64:
			return CALL(pwritev64, syscall(SYS_pwritev, fd, iov, cnt, off, 0), fd, iov, cnt, off);
		case X_PV2:
			return CALL(pwritev2, syscall(SYS_pwritev2, fd, iov, cnt, off, 0, fl), fd, iov, cnt,
				    off, fl);
		case X_PV64V2:
			return CALL(pwritev64v2, syscall(SYS_pwritev2, fd, iov, cnt, off, 0, fl), fd, iov,
				    cnt, off, fl);
		}
	} else {
		switch (k) {
		case X_ONE: return CALL(read, syscall(SYS_read, fd, b, n), fd, b, n);
		case X_POS: return CALL(pread, syscall(SYS_pread64, fd, b, n, off), fd, b, n, off);
		case X_POS64: return CALL(pread64, syscall(SYS_pread64, fd, b, n, off), fd, b, n, off);
		case X_V: return CALL(readv, syscall(SYS_readv, fd, iov, cnt), fd, iov, cnt);
		case X_PV: return CALL(preadv, syscall(SYS_preadv, fd, iov, cnt, off, 0), fd, iov, cnt, off);
		case X_PV64:
			return CALL(preadv64, syscall(SYS_preadv, fd, iov, cnt, off, 0), fd, iov, cnt, off);
		case X_PV2:
			return CALL(preadv2, syscall(SYS_preadv2, fd, iov, cnt, off, 0, fl), fd, iov, cnt,
				    off, fl);
		case X_PV64V2:
			return CALL(preadv64v2, syscall(SYS_preadv2, fd, iov, cnt, off, 0, fl), fd, iov,
				    cnt, off, fl);
		}
	}
	return -1;
}

/* An offset the read path leaves to the program's call (which reports
 * it): negative for the positional calls, below -1 for preadv2 and
 * pwritev2. */
static inline bool bad_offset(enum xkind k, int64_t off)
{
	switch (k) {
	case X_ONE:
	case X_V: return false;
	case X_PV2:
	case X_PV64V2: return off < -1;
	default: return off < 0;
	}
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

/* preadv2 or pwritev2 with RWF_DONTCACHE in place of the program's call
 * (off -1: at the file position, as read, readv, write and writev move);
 * returns -2 (and errno untouched) when the caller must make the program's
 * own call, with x->refused set if the filesystem refused.  The raw
 * syscall: the library's own I/O does not go through its wrappers. */
static ssize_t try_dontcache(struct msq_xfer *x, const struct iovec *iov, int cnt, int64_t off,
			     int flags)
{
	int saved = errno;
	ssize_t rc;

	if (x->writing ? MSQ_FAULT("madvseq/readpath/pwritev2") : MSQ_FAULT("madvseq/readpath/preadv2"))
		return -2;
	rc = syscall(x->writing ? SYS_pwritev2 : SYS_preadv2, x->fd, iov, cnt, (long)off, 0L,
		     flags | RWF_DONTCACHE);
	if (rc < 0 && (errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS)) {
		/* Refused before any data moved: the program's own call decides
		 * (an EINVAL of its own making comes back from it).  Kernels and
		 * filesystems without RWF_DONTCACHE say EOPNOTSUPP, kernels
		 * without the syscall ENOSYS. */
		x->refused = errno == EOPNOTSUPP;
		errno = saved;
		return -2;
	}
	return rc;
}

/*
 * A transfer on an fd the read path may manage, in one recipe: classify
 * (msq_fds_begin), act (the program's call, or RWF_DONTCACHE in its
 * place), account (msq_fds_end).
 */
static __attribute__((noinline, cold)) ssize_t transfer(bool writing, enum xkind k, int fd,
							 void *b, size_t n,
							 const struct iovec *iov, int cnt,
							 int64_t off, int fl)
{
	int64_t at = (k == X_ONE || k == X_V || off == -1) ? -1 : off;
	struct iovec one = { b, n };
	struct msq_xfer x;
	ssize_t rc = -2;

	if (k == X_ONE || k == X_POS || k == X_POS64) {
		iov = &one;
		cnt = 1;
	}

	MSQ_ENTER();
	msq_fds_begin(&x, fd, writing, iov_bytes(iov, cnt));
	if (x.dontcache)
		rc = try_dontcache(&x, iov, cnt, at, fl);
	if (rc == -2)
		rc = call_x(writing, k, fd, b, n, iov, cnt, off, fl);
	if (rc > 0 || x.refused)
		msq_fds_end(&x, at, rc);
	MSQ_LEAVE();
	return rc;
}

/* Every wrapper of the families: the fast path, or the recipe. */
static inline ssize_t wrap_x(bool writing, enum xkind k, int fd, const void *buf, size_t n,
			     const struct iovec *iov, int cnt, int64_t off, int fl)
{
	if (__builtin_expect(untracked(fd) || bad_offset(k, off), 1))
		return call_x(writing, k, fd, (void *)buf, n, iov, cnt, off, fl);
	return transfer(writing, k, fd, (void *)buf, n, iov, cnt, off, fl);
}

/* read() and __read_chk share it: no call of the exported name from
 * inside the library (it would bind to the library's own symbol). */
MSQ_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	return wrap_x(false, X_ONE, fd, buf, n, NULL, 0, -1, 0);
}

MSQ_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen && msq_real.read_chk)
		return msq_real.read_chk(fd, buf, n, buflen); /* reports the overflow */
	return wrap_x(false, X_ONE, fd, buf, n, NULL, 0, -1, 0);
}

MSQ_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	return wrap_x(false, X_POS, fd, buf, n, NULL, 0, off, 0);
}

MSQ_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
	return wrap_x(false, X_POS64, fd, buf, n, NULL, 0, off, 0);
}

MSQ_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	if (n > buflen && msq_real.pread_chk)
		return msq_real.pread_chk(fd, buf, n, off, buflen);
	return wrap_x(false, X_POS, fd, buf, n, NULL, 0, off, 0);
}

MSQ_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen)
{
	if (n > buflen && msq_real.pread64_chk)
		return msq_real.pread64_chk(fd, buf, n, off, buflen);
	return wrap_x(false, X_POS64, fd, buf, n, NULL, 0, off, 0);
}

MSQ_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	return wrap_x(false, X_V, fd, NULL, 0, iov, cnt, -1, 0);
}

MSQ_EXPORT ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return wrap_x(false, X_PV, fd, NULL, 0, iov, cnt, off, 0);
}

MSQ_EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
	return wrap_x(false, X_PV64, fd, NULL, 0, iov, cnt, off, 0);
}

MSQ_EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int fl)
{
	return wrap_x(false, X_PV2, fd, NULL, 0, iov, cnt, off, fl);
}

MSQ_EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int fl)
{
	return wrap_x(false, X_PV64V2, fd, NULL, 0, iov, cnt, off, fl);
}

/* Writes: a stream's writes go through RWF_DONTCACHE once write-behind is
 * due (fdstream.c). */
MSQ_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	return wrap_x(true, X_ONE, fd, buf, n, NULL, 0, -1, 0);
}

MSQ_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return wrap_x(true, X_POS, fd, buf, n, NULL, 0, off, 0);
}

MSQ_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
	return wrap_x(true, X_POS64, fd, buf, n, NULL, 0, off, 0);
}

MSQ_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	return wrap_x(true, X_V, fd, NULL, 0, iov, cnt, -1, 0);
}

MSQ_EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return wrap_x(true, X_PV, fd, NULL, 0, iov, cnt, off, 0);
}

MSQ_EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
	return wrap_x(true, X_PV64, fd, NULL, 0, iov, cnt, off, 0);
}

MSQ_EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int fl)
{
	return wrap_x(true, X_PV2, fd, NULL, 0, iov, cnt, off, fl);
}

MSQ_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int fl)
{
	return wrap_x(true, X_PV64V2, fd, NULL, 0, iov, cnt, off, fl);
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

/* Before a stdio call the real function `have' makes: true, with x
 * classified and the guard raised, when the read path follows the fd
 * behind fp (never through RWF_DONTCACHE: stdio makes its own calls). */
static bool stdio_begin(struct msq_xfer *x, FILE *fp, bool have, bool writing)
{
	int fd;

	if (msq_guard || !msq_shim_ready() || msq_fds_mode == MSQ_READ_OFF || !have ||
	    untracked(fd = stream_fd(fp)))
		return false;
	MSQ_ENTER();
	msq_fds_begin(x, fd, writing, 0);
	return true;
}

/* After it, when stdio_begin said true: n bytes moved. */
static void stdio_end(const struct msq_xfer *x, uint64_t n)
{
	if (n)
		msq_fds_end(x, -1, (int64_t)n);
	MSQ_LEAVE();
}

static size_t fread_common(void *p, size_t size, size_t n, FILE *fp, bool unlocked)
{
	size_t (*fn)(void *, size_t, size_t, FILE *) = unlocked ? msq_real.fread_unlocked : msq_real.fread;
	struct msq_xfer x;
	bool on = stdio_begin(&x, fp, fn, false);
	size_t rc = fn ? fn(p, size, n, fp) : 0;

	if (on)
		stdio_end(&x, (uint64_t)rc * size);
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

/*
 * A writer's fwrite calls move its fd only when stdio flushes its buffer:
 * pg_dump writes each row with one, tens of bytes, millions of them a
 * dump.  So a call that fits in the room its buffer has left goes straight
 * to libc, before anything else is looked at, and a call that may flush
 * tells the stream the bytes that left the buffer for the fd: what was
 * pending, plus what it wrote, less what is pending after.  The room is
 * glibc's own test of putc_unlocked (bits/types/struct_FILE.h): the put
 * pointer against the end of the put area, which stdio keeps at the put
 * pointer in a line-buffered or unbuffered stream, or one last read, so
 * those take the long way.  (Read unlocked: a thread writing to the same
 * FILE meanwhile makes the count wrong, which the stream's next look at
 * the fd's position corrects.)  Measured: under pg_dumpall the library's
 * own code was 2.2% of the machine's busy CPU, most of it these calls'
 * bookkeeping; on tests/readpath's "rows" writer (1.5 million fwrite
 * calls) the library added 10.5% to the instructions the program ran
 * (callgrind), 1.5% with this path.
 */
static bool stays_buffered(const FILE *fp, size_t want)
{
	return fp->_IO_write_end > fp->_IO_write_ptr &&
	       (size_t)(fp->_IO_write_end - fp->_IO_write_ptr) > want;
}

static size_t stdio_pending(const FILE *fp)
{
	return fp->_IO_write_ptr > fp->_IO_write_base ? (size_t)(fp->_IO_write_ptr - fp->_IO_write_base)
						      : 0;
}

static size_t fwrite_common(const void *p, size_t size, size_t n, FILE *fp, bool unlocked)
{
	size_t (*fn)(const void *, size_t, size_t, FILE *) =
		unlocked ? msq_real.fwrite_unlocked : msq_real.fwrite;
	struct msq_xfer x;
	size_t rc, want, before, after;
	bool on;

	if (!fn)
		return 0;
	if (!fp || __builtin_mul_overflow(size, n, &want) || stays_buffered(fp, want))
		return fn(p, size, n, fp);
	before = stdio_pending(fp);
	on = stdio_begin(&x, fp, fn, true);
	rc = fn(p, size, n, fp);
	if (on) {
		want = rc * size + before;
		after = stdio_pending(fp);
		stdio_end(&x, want > after ? want - after : 0);
	}
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
	struct msq_xfer x;
	bool on = stdio_begin(&x, fp, msq_real.getdelim, false);
	ssize_t rc = msq_real.getdelim ? msq_real.getdelim(line, len, delim, fp) : (errno = ENOSYS, -1);

	if (on)
		stdio_end(&x, rc > 0 ? (uint64_t)rc : 0);
	return rc;
}

MSQ_EXPORT ssize_t getline(char **line, size_t *len, FILE *fp)
{
	struct msq_xfer x;
	bool on = stdio_begin(&x, fp, msq_real.getline, false);
	ssize_t rc = msq_real.getline ? msq_real.getline(line, len, fp) : (errno = ENOSYS, -1);

	if (on)
		stdio_end(&x, rc > 0 ? (uint64_t)rc : 0);
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

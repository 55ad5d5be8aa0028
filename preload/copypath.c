/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read path's copy wrappers: sendfile and copy_file_range, which move
 * data without a user buffer (the transfer wrappers are in readpath.c).
 */
#include <fcntl.h>
#include <stdint.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../common/sys.h"
#include "fdstream.h"
#include "fdtable.h"
#include "real.h"

#define CALL MSQ_REAL

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
static ssize_t copy_pieces(const struct msq_xfer *xi, const struct msq_xfer *xo, int64_t *in_off,
			   int64_t *out_off, size_t n, unsigned fl, bool is_sendfile)
{
	int in = xi->fd, out = xo->fd;
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
			msq_fds_end(xi, is, rc);
			if (!is_sendfile)
				msq_fds_end(xo, os, rc);
		}
		total += rc;
		if ((size_t)rc < want)
			break; /* end of file, or the output would block */
	} while ((size_t)total < n);
	return total;
}

/* The whole call, then the bookkeeping of what it moved.  The offsets
 * are read only after the kernel accepted (and advanced) them. */
static ssize_t copy_whole(const struct msq_xfer *xi, const struct msq_xfer *xo, int64_t *in_off,
			  int64_t *out_off, size_t n, unsigned fl, bool is_sendfile)
{
	int in = xi->fd, out = xo->fd;
	ssize_t rc;

	rc = is_sendfile ? call_sendfile(out, in, in_off, n) : call_cfr(in, in_off, out, out_off, n, fl);
	if (rc > 0) {
		MSQ_PROTECT_ERRNO;
		msq_fds_end(xi, in_off ? *in_off - rc : -1, rc);
		if (!is_sendfile)
			msq_fds_end(xo, out_off ? *out_off - rc : -1, rc);
	}
	return rc;
}

static ssize_t copy_managed(int in, int64_t *in_off, int out, int64_t *out_off, size_t n,
			    unsigned fl, bool is_sendfile)
{
	struct msq_xfer xi, xo = { .fd = out, .writing = true };
	ssize_t rc;

	MSQ_ENTER();
	/* (No owner check: a vfork child that copies anyway gets the one
	 * call's result either way.)  Classified before the call: its
	 * snapshot sees what was cached before.  Never through RWF_DONTCACHE. */
	msq_fds_begin(&xi, in, false, 0);
	if (!is_sendfile)
		msq_fds_begin(&xo, out, true, 0);
	if (may_split(in, in_off, out, out_off, n, fl, is_sendfile))
		rc = copy_pieces(&xi, &xo, in_off, out_off, n, fl, is_sendfile);
	else
		rc = copy_whole(&xi, &xo, in_off, out_off, n, fl, is_sendfile);
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

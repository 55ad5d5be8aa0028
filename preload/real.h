/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The one table of the real functions the wrappers stand in front of,
 * resolved once with dlsym(RTLD_NEXT) during initialisation.
 *
 * Only wrappers call through it, to make the program's own call.  The
 * library's own I/O never does, nor calls the libc names it exports: it
 * uses the raw syscalls of common/sys.h.  Until the table is filled (a
 * wrapper running before the library is initialised, or during dlsym),
 * MSQ_REAL() makes the syscall itself, which sets errno as libc would.
 */
#ifndef MSQ_REAL_H
#define MSQ_REAL_H

#include <stdio.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "shim.h"

struct msq_real_fns {
	/* mappings (interpose.c) */
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	int (*munmap)(void *, size_t);
	void *(*mremap)(void *, size_t, size_t, int, ...);
	int (*mprotect)(void *, size_t, int);
	int (*pkey_mprotect)(void *, size_t, int, int);
	int (*madvise)(void *, size_t, int);
	int (*posix_madvise)(void *, size_t, int);
	void (*exit_now)(int);
	void (*exit_now2)(int);
	/* the read path (readpath.c) */
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*pread)(int, void *, size_t, off_t);
	ssize_t (*pread64)(int, void *, size_t, off64_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*preadv)(int, const struct iovec *, int, off_t);
	ssize_t (*preadv64)(int, const struct iovec *, int, off64_t);
	ssize_t (*preadv2)(int, const struct iovec *, int, off_t, int);
	ssize_t (*preadv64v2)(int, const struct iovec *, int, off64_t, int);
	ssize_t (*read_chk)(int, void *, size_t, size_t);
	ssize_t (*pread_chk)(int, void *, size_t, off_t, size_t);
	ssize_t (*pread64_chk)(int, void *, size_t, off64_t, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*pwrite)(int, const void *, size_t, off_t);
	ssize_t (*pwrite64)(int, const void *, size_t, off64_t);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*pwritev)(int, const struct iovec *, int, off_t);
	ssize_t (*pwritev64)(int, const struct iovec *, int, off64_t);
	ssize_t (*pwritev2)(int, const struct iovec *, int, off_t, int);
	ssize_t (*pwritev64v2)(int, const struct iovec *, int, off64_t, int);
	int (*posix_fadvise)(int, off_t, off_t, int);
	int (*posix_fadvise64)(int, off64_t, off64_t, int);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	ssize_t (*sendfile64)(int, int, off64_t *, size_t);
	ssize_t (*copy_file_range)(int, off64_t *, int, off64_t *, size_t, unsigned);
	int (*close)(int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	int (*fcntl64)(int, int, ...);
	int (*close_range)(unsigned, unsigned, int);
	size_t (*fread)(void *, size_t, size_t, FILE *);
	size_t (*fread_unlocked)(void *, size_t, size_t, FILE *);
	size_t (*fwrite)(const void *, size_t, size_t, FILE *);
	size_t (*fwrite_unlocked)(const void *, size_t, size_t, FILE *);
	ssize_t (*getdelim)(char **, size_t *, int, FILE *);
	ssize_t (*getline)(char **, size_t *, FILE *);
	int (*fclose)(FILE *);
};

extern struct msq_real_fns msq_real MSQ_HIDDEN;

/* Fills msq_real (from init, once). */
void msq_real_resolve(void) MSQ_HIDDEN;

/* The program's own call: the real function, or the syscall before it is
 * known. */
#define MSQ_REAL(fn, fallback, ...) (msq_real.fn ? msq_real.fn(__VA_ARGS__) : (fallback))

#endif

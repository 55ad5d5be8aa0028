/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Prints what each wrapped call returns and the errno it leaves, for calls
 * that succeed and calls that fail.  The test runs it with and without the
 * shim and compares the outputs: they must be identical.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SHOW(what, expr)                                                         \
	do {                                                                     \
		long rc_;                                                        \
		errno = 1234;                                                    \
		rc_ = (long)(expr);                                              \
		printf("%-40s rc=%ld errno=%d\n", what, rc_ < -1 ? 1 : rc_, errno); \
	} while (0)

int main(int argc, char **argv)
{
	const long pg = 4096;
	int fd = open(argv[argc - 1], O_RDWR);
	char *p, *q;

	if (fd < 0 || ftruncate(fd, 64 * pg) < 0)
		return 2;
	p = mmap(NULL, 64 * pg, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return 2;
	SHOW("madvise seq ok", madvise(p, 64 * pg, MADV_SEQUENTIAL));
	SHOW("madvise unaligned", madvise(p + 1, pg, MADV_SEQUENTIAL));
	SHOW("madvise bad advice", madvise(p, pg, 12345));
	SHOW("madvise unmapped", madvise((void *)pg, pg, MADV_SEQUENTIAL));
	SHOW("posix_madvise seq ok", posix_madvise(p, 64 * pg, POSIX_MADV_SEQUENTIAL));
	SHOW("posix_madvise bad", posix_madvise(p, pg, 12345));
	SHOW("posix_madvise dontneed", posix_madvise(p, pg, POSIX_MADV_DONTNEED));
	SHOW("madvise random part", madvise(p + 8 * pg, 8 * pg, MADV_RANDOM));
	SHOW("munmap unaligned", munmap(p + 1, pg));
	SHOW("munmap zero length", munmap(p, 0));
	/* From here on the hole is not ours: this process has other threads
	 * (the shim's engine, the sanitizer's), and one of them may map
	 * something there. */
	SHOW("munmap hole ok", munmap(p + 16 * pg, 4 * pg));
	q = mremap(p, 64 * pg, 128 * pg, 0);
	printf("%-40s failed=%d errno=%d\n", "mremap grow in place", q == MAP_FAILED, errno);
	errno = 1234;
	q = mremap(p + 1, pg, 2 * pg, MREMAP_MAYMOVE);
	printf("%-40s failed=%d errno=%d\n", "mremap unaligned", q == MAP_FAILED, errno);
	errno = 1234;
	q = mmap(p, pg, PROT_READ, MAP_FIXED | MAP_SHARED, fd, 1);
	printf("%-40s failed=%d errno=%d\n", "mmap fixed bad offset", q == MAP_FAILED, errno);
	errno = 1234;
	q = mmap(p, pg, PROT_READ, MAP_FIXED | MAP_SHARED, fd, 0);
	printf("%-40s same=%d errno=%d\n", "mmap fixed over tracked", q == p, errno);
	errno = 1234;
	q = mmap(NULL, pg, PROT_READ, MAP_SHARED, -1, 0);
	printf("%-40s failed=%d errno=%d\n", "mmap bad fd", q == MAP_FAILED, errno);
	errno = 1234;
	q = mmap64(NULL, pg, PROT_READ, MAP_SHARED, fd, 0);
	printf("%-40s failed=%d errno=%d\n", "mmap64 ok", q == MAP_FAILED, errno);
	SHOW("munmap rest before the hole", munmap(p, 16 * pg));
	SHOW("munmap rest after the hole", munmap(p + 20 * pg, 44 * pg));
	/* (Not p again: another thread may have mapped something there.) */
	SHOW("munmap nothing there", munmap((void *)(16 * pg), 64 * pg));
	return 0;
}

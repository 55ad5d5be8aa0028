/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * copy_file_range() between overlapping ranges of one file: the kernel
 * refuses it (EINVAL) as a whole, so no byte may change, with or without
 * the shim, however the shim would split a long copy.
 *
 *   cfroverlap FILE [fadvise]
 *
 * FILE is 64 MiB.  With "fadvise" the descriptor is advised
 * POSIX_FADV_SEQUENTIAL first (what makes the shim manage it in its
 * default read mode).  Prints, per call, its return value, errno and the
 * file position after it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MIB (1L << 20)

static void show(const char *what, ssize_t rc, int err, int fd)
{
	printf("%-36s rc=%zd errno=%d pos=%lld\n", what, rc, rc < 0 ? err : 0,
	       (long long)lseek(fd, 0, SEEK_CUR));
}

int main(int argc, char **argv)
{
	int fd, err;
	ssize_t rc;
	off_t in, out;

	if (argc < 2)
		return 2;
	fd = open(argv[1], O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return 2;
	if (argc > 2 && !strcmp(argv[2], "fadvise") &&
	    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL) != 0)
		return 2;

	in = 0;
	out = 16 * MIB;
	errno = 0;
	rc = copy_file_range(fd, &in, fd, &out, (size_t)(32 * MIB), 0);
	err = errno;
	show("explicit offsets 0 -> 16M, 32M", rc, err, fd);
	printf("%-36s in=%lld out=%lld\n", "offsets after", (long long)in, (long long)out);

	/* The same overlap once more, from a later start. */
	in = 24 * MIB;
	out = 8 * MIB;
	errno = 0;
	rc = copy_file_range(fd, &in, fd, &out, (size_t)(24 * MIB), 0);
	err = errno;
	show("explicit offsets 24M -> 8M, 24M", rc, err, fd);

	/* Both offsets from the file position: the same start. */
	if (lseek(fd, 4 * MIB, SEEK_SET) < 0)
		return 2;
	errno = 0;
	rc = copy_file_range(fd, NULL, fd, NULL, (size_t)(32 * MIB), 0);
	err = errno;
	show("file position 4M -> 4M, 32M", rc, err, fd);
	return 0;
}

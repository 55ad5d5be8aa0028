/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Maps and advises a file from a constructor that runs before the
 * preloaded shim's own constructor (highest priority, in the program). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static int ok;

__attribute__((constructor(101))) static void early(void)
{
	char path[] = "/tmp/early-XXXXXX";
	int fd = mkstemp(path);
	char *p;

	if (fd < 0 || ftruncate(fd, 1 << 22) < 0)
		return;
	unlink(path);
	p = mmap(NULL, 1 << 22, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED || madvise(p, 1 << 22, MADV_SEQUENTIAL) || p[4096] != 0 ||
	    munmap(p, 1 << 22))
		return;
	close(fd);
	ok = 1;
}

int main(void)
{
	printf("early: %s\n", ok ? "ok" : "failed");
	return ok ? 0 : 1;
}

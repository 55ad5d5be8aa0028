/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Present pages from /proc/self/pagemap, with PAGEMAP_SCAN and by reading
 * entries: both must find what was touched, and tell file from anon. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "frontier.h"

#define M (UINT64_C(1) << 20)

static void check_mode(struct msq_pagemap *pm, unsigned char *shared, unsigned char *priv)
{
	struct msq_extents file = MSQ_EXTENTS_INIT, anon = MSQ_EXTENTS_INIT;
	uint64_t s = (uintptr_t)shared, p = (uintptr_t)priv;

	CHECK(msq_present_ranges(pm, s, s + 16 * M, &file, &anon) == 0);
	/* Touched: [0, 1M) and [8M, 9M); fault-around may map up to 64 KiB more. */
	CHECK_EQ(msq_extents_covered(&file, s, s + M), M);
	CHECK_EQ(msq_extents_covered(&file, s + 8 * M, s + 9 * M), M);
	CHECK(msq_extents_covered(&file, s + 2 * M, s + 7 * M) == 0);
	CHECK(msq_extents_covered(&file, s + 10 * M, s + 16 * M) == 0);
	CHECK_EQ(msq_extents_total(&anon), 0);

	msq_extents_clear(&file);
	CHECK(msq_present_ranges(pm, p, p + 16 * M, &file, &anon) == 0);
	/* A written page of a private mapping is an anonymous copy. */
	CHECK(msq_extents_covered(&anon, p + 4 * M, p + 4 * M + 4096) == 4096);
	CHECK(msq_extents_covered(&file, p, p + M) > 0);
	CHECK(!msq_extents_overlaps(&file, p + 4 * M, p + 4 * M + 4096));
	/* Not told apart (anon NULL): every present page, the copy too. */
	msq_extents_clear(&file);
	CHECK(msq_present_ranges(pm, p, p + 16 * M, &file, NULL) == 0);
	CHECK(msq_extents_covered(&file, p + 4 * M, p + 4 * M + 4096) == 4096);
	CHECK(msq_extents_covered(&file, p, p + M) > 0);
	msq_extents_free(&file);
	msq_extents_free(&anon);
}

int main(void)
{
	char path[] = "frontier-test-XXXXXX";
	struct msq_pagemap pm;
	unsigned char *shared, *priv;
	volatile unsigned sum = 0;
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	unlink(path);
	CHECK(ftruncate(fd, 16 * M) == 0);
	shared = mmap(NULL, 16 * M, PROT_READ, MAP_SHARED, fd, 0);
	priv = mmap(NULL, 16 * M, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	CHECK(shared != MAP_FAILED && priv != MAP_FAILED);
	for (uint64_t i = 0; i < M; i += 4096)
		sum += shared[i] + shared[8 * M + i] + priv[i];
	priv[4 * M] = 1;

	CHECK(msq_pagemap_open(&pm, "/proc", 0, 0) == 0);
	CHECK(msq_pagemap_check(&pm) == 0);
	if (pm.scan)
		check_mode(&pm, shared, priv);
	else
		printf("PAGEMAP_SCAN not supported: only the entry-reading path is tested\n");
	pm.scan = false;
	check_mode(&pm, shared, priv);
	msq_pagemap_close(&pm);
	CHECK(msq_pagemap_check(&pm) == -EBADF);

	/* high_fd moves the descriptor out of the program's way. */
	CHECK(msq_pagemap_open(&pm, "/proc", 0, 300) == 0);
	CHECK(pm.fd >= 300);
	msq_pagemap_close(&pm);
	CHECK(msq_pagemap_open(&pm, "/nonexistent", 0, 0) == -ENOENT);
	(void)sum;
	CHECK_DONE();
}

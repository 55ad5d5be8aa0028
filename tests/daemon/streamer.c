/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A streaming reader for the daemon tests: maps FILE, advises
 * MADV_SEQUENTIAL and reads it from start to end, then prints a checksum
 * of every byte it saw, so a test can check the data stayed intact.
 * Built twice: dynamic (run under the shim) and -static (which the shim
 * cannot reach: the daemon must find it through smaps).
 *
 *   streamer FILE [MIB_PER_SEC] [HOLD_MS] [PASSES] [munmap|exit|_exit|munmap-hold]
 *
 * MIB_PER_SEC paces the reading (0: as fast as it goes); HOLD_MS keeps
 * the mapping after the last pass (so a test can look at it); the last
 * argument says how it ends: munmap (default) and return, or exit() or
 * _exit() with the file still mapped, or munmap and HOLD_MS more before
 * returning (a process that lives on without the mapping).
 *
 * STREAMER_BALLAST_MIB=N in the environment makes it touch N MiB of
 * anonymous memory first: an address space that takes the kernel tens of
 * milliseconds to tear down when the process is killed.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	double rate = argc > 2 ? atof(argv[2]) : 0;
	long hold = argc > 3 ? atol(argv[3]) : 0;
	int passes = argc > 4 ? atoi(argv[4]) : 1;
	uint64_t sum = 0, t0;
	struct stat st;
	const uint64_t *p;
	size_t len;
	int fd;

	if (argc < 2) {
		fprintf(stderr, "usage: streamer FILE [MIB_PER_SEC] [HOLD_MS] [PASSES] "
			"[munmap|exit|_exit|munmap-hold]\n");
		return 2;
	}
	if (getenv("STREAMER_BALLAST_MIB")) {
		size_t n = (size_t)atol(getenv("STREAMER_BALLAST_MIB")) << 20;
		volatile char *b = n ? malloc(n) : NULL; /* (its stores are kept) */

		if (n && !b) {
			perror("ballast");
			return 1;
		}
		for (size_t i = 0; i < n; i += 4096)
			b[i] = 1;
	}
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(argv[1]);
		return 1;
	}
	len = (size_t)st.st_size & ~(size_t)7;
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED || madvise((void *)p, len, MADV_SEQUENTIAL) < 0) {
		perror("mmap/madvise");
		return 1;
	}
	printf("pid=%d map=%p len=%zu\n", (int)getpid(), (const void *)p, len);
	fflush(stdout);
	for (int pass = 0; pass < passes; pass++) {
		t0 = now_ns();
		for (size_t i = 0; i < len / 8; i++) {
			sum = sum * 31 + p[i];
			if (rate > 0 && (i & ((1 << 17) - 1)) == 0) { /* every MiB */
				uint64_t want = t0 + (uint64_t)((double)(i * 8) / (rate * 1048576.0) * 1e9);
				uint64_t t = now_ns();

				if (want > t)
					usleep((useconds_t)((want - t) / 1000));
			}
		}
	}
	printf("sum=%016llx bytes=%zu\n", (unsigned long long)sum, len);
	fflush(stdout);
	if (hold > 0)
		usleep((useconds_t)hold * 1000);
	if (argc > 5 && !strcmp(argv[5], "exit"))
		exit(0);
	if (argc > 5 && !strcmp(argv[5], "_exit"))
		_exit(0);
	munmap((void *)p, len);
	if (argc > 5 && !strcmp(argv[5], "munmap-hold") && hold > 0)
		usleep((useconds_t)hold * 1000);
	return 0;
}

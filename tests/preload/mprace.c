/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Writes into a private file mapping behind its reading cursor, made
 * writable with mprotect() while the shim drops what lies behind that
 * cursor.  The kernel keeps such writes (copy-on-write pages); a drop with
 * MADV_DONTNEED decided before the write and done after it would lose one.
 *
 *   mprace FILE SECONDS
 *
 * Each pass maps FILE MAP_PRIVATE PROT_READ, advises MADV_SEQUENTIAL and
 * reads it front to back; a second thread meanwhile makes 64 KiB pieces
 * 16 to 64 MiB behind the cursor PROT_READ|PROT_WRITE, writes a marker into
 * one page of each (and makes every other piece read-only again).  At the
 * end of the pass every marker must still be there.  Passes repeat for
 * SECONDS.  Prints "passes N markers N lost N"; exit status 0 when nothing
 * was lost, 1 when a marker was lost, 2 when a call failed.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PG 4096UL
#define PIECE (64UL << 10)
#define MIB (1UL << 20)

struct pass {
	unsigned char *p;
	size_t size;
	uint32_t *marker; /* per page: the marker written there, 0 for none */
	unsigned long cursor;
	int stop;
	unsigned long written;
	int failed;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *writer(void *arg)
{
	struct pass *w = arg;
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	static uint32_t serial;

	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		unsigned long c = __atomic_load_n(&w->cursor, __ATOMIC_ACQUIRE);
		unsigned long back, off, piece, pg;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		back = 16 * MIB + (unsigned long)(x % (48 * MIB));
		if (c < back + PIECE)
			continue;
		off = (c - back) & ~(PG - 1);
		piece = off & ~(PIECE - 1);
		pg = off / PG;
		if (w->marker[pg])
			continue;
		if (mprotect(w->p + piece, PIECE, PROT_READ | PROT_WRITE) < 0) {
			perror("mprotect");
			w->failed = 1;
			return NULL;
		}
		w->marker[pg] = 0x80000000u | ++serial;
		memcpy(w->p + off + 8, &w->marker[pg], sizeof(uint32_t));
		w->written++;
		if ((serial & 1) && mprotect(w->p + piece, PIECE, PROT_READ) < 0) {
			perror("mprotect");
			w->failed = 1;
			return NULL;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long passes = 0, markers = 0, lost = 0;
	double until;
	struct stat st;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: mprace FILE SECONDS\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || (size_t)st.st_size < 128 * MIB) {
		fprintf(stderr, "%s: cannot open, or smaller than 128 MiB\n", argv[1]);
		return 2;
	}
	until = now() + atof(argv[2]);
	do {
		struct pass w = { .size = (size_t)st.st_size };
		volatile unsigned char sink = 0;
		pthread_t t;

		w.p = mmap(NULL, w.size, PROT_READ, MAP_PRIVATE, fd, 0);
		w.marker = calloc(w.size / PG, sizeof(uint32_t));
		if (w.p == MAP_FAILED || !w.marker || madvise(w.p, w.size, MADV_SEQUENTIAL) < 0) {
			perror("mmap, calloc or madvise");
			return 2;
		}
		if (pthread_create(&t, NULL, writer, &w) != 0)
			return 2;
		for (unsigned long off = 0; off < w.size; off += PG) {
			sink ^= w.p[off];
			__atomic_store_n(&w.cursor, off, __ATOMIC_RELEASE);
		}
		__atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
		pthread_join(t, NULL);
		if (w.failed)
			return 2;
		for (unsigned long pg = 0; pg < w.size / PG; pg++) {
			uint32_t v;

			if (!w.marker[pg])
				continue;
			memcpy(&v, w.p + pg * PG + 8, sizeof(v));
			markers++;
			if (v != w.marker[pg])
				lost++;
		}
		munmap(w.p, w.size);
		free(w.marker);
		passes++;
		(void)sink;
	} while (now() < until);
	printf("passes %lu markers %lu lost %lu\n", passes, markers, lost);
	return lost ? 1 : 0;
}

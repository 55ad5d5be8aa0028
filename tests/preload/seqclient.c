/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A small streaming reader for the preload tests:
 *   seqclient [--private] [--threads N] [--passes N] [--advice posix|madvise|none]
 *             [--read] [--hold-ms N] [--settle-ms N --below BYTES] [--pause] FILE
 * maps FILE, advises MADV_SEQUENTIAL, reads it (N threads each stream their
 * own slice), and prints "checksum <hex>" and, as root, "max_cached <bytes>":
 * the most of FILE seen in the page cache (cachestat) while it read,
 * "max_behind <bytes>": the most seen cached behind the first reader's
 * cursor (from its slice's start), and
 * "end_cached <bytes>": what is cached once it has read everything and
 * waited --hold-ms, still mapping the file.
 * --settle-ms N --below BYTES: then waits, for at most N ms, until no more
 * than BYTES are cached, and prints "settle_ms <ms>", how long that took
 * (N if it never did), and end_cached as it is then.  What the engine
 * leaves once it has caught up with the reader is what a bound on it
 * judges, not how late a loaded machine let it run: a hold of fixed
 * length measured the latter too.
 * --read computes the same checksum with pread() instead, for reference.
 * --pause prints "advised" once the mapping is advised and waits for a
 * byte on stdin before reading.
 * --rate MBPS paces each reader to at most MBPS megabytes a second, like a
 * stream read from a disk (a file read from a warm host cache outruns any
 * scheduler hiccup of the engine).
 * --write maps the file shared and writable and, as it streams, writes a
 * marker into every page; after munmap it reads the file back and prints
 * "written ok" or "written LOST <offset>": dirty data must never be lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct cs_range { uint64_t off, len; };
struct cs { uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted; };

#define MARK 0x6d61647673657121ULL

static int fd;
static off_t size;
static const unsigned char *map;
static int nthreads = 1, passes = 1;
static uint64_t max_cached, max_behind;
static int can_sample = 1, writing;
static double rate; /* bytes per second per reader, 0: as fast as it goes */

static uint64_t cached_range(uint64_t off, uint64_t len)
{
	struct cs_range r = { off, len };
	struct cs c;

	if (!can_sample || syscall(451, fd, &r, &c, 0) < 0) {
		can_sample = 0;
		return 0;
	}
	return c.nr_cache * 4096;
}

static uint64_t cached_now(void)
{
	return cached_range(0, 0);
}

static void sample(void)
{
	uint64_t c = cached_now();

	if (c > __atomic_load_n(&max_cached, __ATOMIC_RELAXED))
		__atomic_store_n(&max_cached, c, __ATOMIC_RELAXED);
}

/* Cached bytes of [from, cursor): what the first reader leaves behind. */
static void sample_behind(off_t from, off_t cursor)
{
	uint64_t c = cursor > from ? cached_range((uint64_t)from, (uint64_t)(cursor - from)) : 0;

	if (c > max_behind)
		max_behind = c;
}

/* Order-independent per 8-byte word, so threads can add their slices. */
static uint64_t mix(uint64_t w, uint64_t off)
{
	return (w ^ (off * 0x9e3779b97f4a7c15ULL)) * 0xff51afd7ed558ccdULL;
}

struct slice { off_t from, to; uint64_t sum; int index; };

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void pace(double t0, uint64_t done)
{
	double ahead = (double)done / rate - (now_s() - t0);

	if (ahead > 0)
		usleep((useconds_t)(ahead * 1e6));
}

static void *stream(void *arg)
{
	struct slice *s = arg;
	double t0 = now_s();
	uint64_t done = 0;

	for (int p = 0; p < passes; p++)
		for (off_t o = s->from; o < s->to; o += 8) {
			uint64_t w;

			memcpy(&w, map + o, 8);
			s->sum += mix(w, (uint64_t)o);
			if (writing && (o & 4095) == 8) /* after the page's first word was read */
				memcpy((unsigned char *)map + o, &(uint64_t){ MARK ^ (uint64_t)o }, 8);
			if ((o & ((1 << 20) - 1)) == 0 && rate > 0)
				pace(t0, done += 1 << 20);
			if (s->index == 0 && (o & ((1 << 20) - 1)) == 0) {
				sample(); /* every MiB of the first reader's progress */
				sample_behind(s->from, o);
			}
		}
	return NULL;
}

static uint64_t by_pread(void)
{
	static unsigned char buf[1 << 20];
	uint64_t sum = 0;
	off_t o = 0;

	while (o < size) {
		ssize_t n = pread(fd, buf, sizeof(buf), o);

		if (n <= 0) {
			perror("pread");
			exit(2);
		}
		for (ssize_t i = 0; i + 8 <= n; i += 8) {
			uint64_t w;

			memcpy(&w, buf + i, 8);
			sum += mix(w, (uint64_t)(o + i));
		}
		o += n;
	}
	return sum;
}

int main(int argc, char **argv)
{
	int flags = MAP_SHARED, use_read = 0, hold_ms = 0, settle_ms = 0, pause = 0;
	uint64_t below = 0;
	int prot = PROT_READ;
	const char *advice = "madvise";
	struct stat st;
	uint64_t sum = 0;
	int i;

	for (i = 1; i < argc - 1; i++) {
		if (!strcmp(argv[i], "--private"))
			flags = MAP_PRIVATE;
		else if (!strcmp(argv[i], "--threads"))
			nthreads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--passes"))
			passes = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--advice"))
			advice = argv[++i];
		else if (!strcmp(argv[i], "--read"))
			use_read = 1;
		else if (!strcmp(argv[i], "--rate"))
			rate = atof(argv[++i]) * 1e6;
		else if (!strcmp(argv[i], "--write"))
			writing = 1, prot |= PROT_WRITE;
		else if (!strcmp(argv[i], "--pause"))
			pause = 1;
		else if (!strcmp(argv[i], "--hold-ms"))
			hold_ms = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--settle-ms"))
			settle_ms = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--below"))
			below = strtoull(argv[++i], NULL, 0);
		else
			break;
	}
	if (i != argc - 1 || nthreads < 1 || nthreads > 64) {
		fprintf(stderr, "usage: seqclient [options] FILE\n");
		return 2;
	}
	fd = open(argv[i], writing ? O_RDWR : O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(argv[i]);
		return 2;
	}
	size = st.st_size & ~(off_t)7;
	if (use_read) {
		printf("checksum %016" PRIx64 "\n", by_pread());
		return 0;
	}
	map = mmap(NULL, (size_t)st.st_size, prot, flags, fd, 0);
	if (map == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	if (!strcmp(advice, "madvise") && madvise((void *)map, (size_t)st.st_size, MADV_SEQUENTIAL)) {
		perror("madvise");
		return 2;
	}
	if (!strcmp(advice, "posix") && (errno = posix_madvise((void *)map, (size_t)st.st_size,
							      POSIX_MADV_SEQUENTIAL))) {
		perror("posix_madvise");
		return 2;
	}
	if (pause) {
		char c;

		printf("advised\n");
		fflush(stdout);
		if (read(0, &c, 1) != 1)
			return 2;
	}
	{
		pthread_t th[64];
		struct slice sl[64];
		off_t per = (size / nthreads) & ~(off_t)4095;

		for (int t = 0; t < nthreads; t++) {
			sl[t] = (struct slice){ t * per, t == nthreads - 1 ? size : (t + 1) * per, 0, t };
			pthread_create(&th[t], NULL, stream, &sl[t]);
		}
		for (int t = 0; t < nthreads; t++) {
			pthread_join(th[t], NULL);
			sum += sl[t].sum;
		}
	}
	sample();
	printf("checksum %016" PRIx64 "\n", sum);
	if (can_sample)
		printf("max_cached %" PRIu64 "\nmax_behind %" PRIu64 "\n", max_cached, max_behind);
	fflush(stdout);
	if (hold_ms)
		usleep((useconds_t)hold_ms * 1000);
	if (can_sample && settle_ms > 0) {
		double t0 = now_s(), waited = 0;

		while (cached_now() > below && (waited = now_s() - t0) * 1000 < settle_ms)
			usleep(5000);
		printf("settle_ms %d\n", (int)(waited * 1000));
	}
	if (can_sample)
		printf("end_cached %" PRIu64 "\n", cached_now());
	fflush(stdout);
	if (munmap((void *)map, (size_t)st.st_size)) {
		perror("munmap");
		return 2;
	}
	if (writing) { /* every marker must be in the file */
		for (off_t o = 8; o + 8 <= size; o += 4096) {
			uint64_t w;

			if (pread(fd, &w, 8, o) != 8 || w != (MARK ^ (uint64_t)o)) {
				printf("written LOST %lld\n", (long long)o);
				return 0;
			}
		}
		printf("written ok\n");
	}
	return 0;
}

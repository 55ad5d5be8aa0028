/* mmap_cost: per-call cost of calls the shim interposes but must not slow down.
 *
 * Times, in one process:
 *   anon   N pairs of mmap(MAP_PRIVATE|MAP_ANONYMOUS, LEN) + munmap
 *   file   N pairs of mmap(MAP_SHARED, LEN of a regular file) + munmap
 *   read4k N read()s of 4 KiB of page-cached data on a plain fd (lseek back
 *          to 0 at the end of the file; the lseek is in both runs)
 * None of these mappings or fds ever gets MADV_SEQUENTIAL / FADV_SEQUENTIAL, so
 * for the shim they are "untracked": what is measured is the price of the
 * interposition itself.  The benchmark harness runs this with and without
 * LD_PRELOAD, interleaved, and compares medians and minimums.
 *
 * Output: one line per test, "name ns_per_call calls", on stdout.
 * Each test is its own noinline function so that
 *   valgrind --tool=callgrind --toggle-collect=bench_anon ...
 * counts only the loop (instruction counts are immune to machine noise).
 *
 * -v K first creates K extra one-page VMAs (alternating protections, so they
 * don't merge).  The kernel's cost of an mmap/munmap pair depends on where
 * the new VMA lands in the maple tree (a store that spans two tree nodes
 * rebalances): a preloaded library shifts that layout by itself.  Running
 * over several K shows the layout effect apart from the wrappers' cost.
 *
 * Usage: mmap_cost [-n calls] [-l map_len] [-v K] [-t anon,file,read4k] FILE
 * FILE is created (1 MiB of data) if missing; it is read once first so its
 * pages are cached.  No dependency on the library.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FILE_LEN (1u << 20)

static volatile uintptr_t sink;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "mmap_cost: %s: %s\n", what, strerror(errno));
	exit(2);
}

static __attribute__((noinline)) void bench_anon(long n, size_t len)
{
	for (long i = 0; i < n; i++) {
		void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			die("mmap anon");
		sink += (uintptr_t)p;
		if (munmap(p, len) != 0)
			die("munmap anon");
	}
}

static __attribute__((noinline)) void bench_file(long n, size_t len, int fd)
{
	for (long i = 0; i < n; i++) {
		void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			die("mmap file");
		sink += (uintptr_t)p;
		if (munmap(p, len) != 0)
			die("munmap file");
	}
}

static __attribute__((noinline)) void bench_read4k(long n, int fd)
{
	static char buf[4096] __attribute__((aligned(4096)));
	for (long i = 0; i < n; i++) {
		ssize_t r = read(fd, buf, sizeof(buf));
		if (r < 0)
			die("read");
		if (r < (ssize_t)sizeof(buf) && lseek(fd, 0, SEEK_SET) != 0)
			die("lseek");
		sink += (uintptr_t)buf[0];
	}
}

static int open_data(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0)
		fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	struct stat st;
	if (fstat(fd, &st) != 0)
		die("fstat");
	if (st.st_size < FILE_LEN) {
		char *b = malloc(FILE_LEN);
		if (!b)
			die("malloc");
		for (size_t i = 0; i < FILE_LEN; i++)
			b[i] = (char)(i * 131u + (i >> 12));
		if (pwrite(fd, b, FILE_LEN, 0) != FILE_LEN)
			die("pwrite");
		free(b);
	}
	/* Cache it: read it all once. */
	char buf[65536];
	lseek(fd, 0, SEEK_SET);
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	lseek(fd, 0, SEEK_SET);
	return fd;
}

int main(int argc, char **argv)
{
	long n = 200000;
	size_t len = 1u << 20;
	const char *tests = "anon,file,read4k";
	long extra_vmas = 0;
	int c;
	while ((c = getopt(argc, argv, "n:l:t:v:")) != -1) {
		switch (c) {
		case 'v': extra_vmas = strtol(optarg, NULL, 0); break;
		case 'n': n = strtol(optarg, NULL, 0); break;
		case 'l': len = strtoul(optarg, NULL, 0); break;
		case 't': tests = optarg; break;
		default:
			fprintf(stderr, "usage: mmap_cost [-n calls] [-l map_len] [-v K] "
					"[-t anon,file,read4k] FILE\n");
			return 2;
		}
	}
	if (optind != argc - 1 || n <= 0 || len == 0 || len > FILE_LEN) {
		fprintf(stderr, "usage: mmap_cost [-n calls] [-l map_len<=1MiB] "
				"[-t anon,file,read4k] FILE\n");
		return 2;
	}
	int fd = open_data(argv[optind]);
	for (long i = 0; i < extra_vmas; i++)
		if (mmap(NULL, 4096, (i & 1) ? PROT_NONE : PROT_READ,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
			die("mmap extra vma");

	/* Warm-up: fault in libc paths and the shim's lazy init, untimed. */
	bench_anon(100, len);
	bench_file(100, len, fd);
	bench_read4k(100, fd);

	uint64_t t;
	if (strstr(tests, "anon")) {
		t = now_ns();
		bench_anon(n, len);
		printf("anon %.1f %ld\n", (double)(now_ns() - t) / n, n);
	}
	if (strstr(tests, "file")) {
		t = now_ns();
		bench_file(n, len, fd);
		printf("file %.1f %ld\n", (double)(now_ns() - t) / n, n);
	}
	if (strstr(tests, "read4k")) {
		lseek(fd, 0, SEEK_SET);
		long nr = n * 4;
		t = now_ns();
		bench_read4k(nr, fd);
		printf("read4k %.1f %ld\n", (double)(now_ns() - t) / nr, nr);
	}
	close(fd);
	return 0;
}

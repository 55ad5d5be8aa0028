/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Read-path client: one scenario per run, printing what the program saw
 * (data hash, return values, errno, offsets).  The tests run it with and
 * without libmadvseq and compare the output: the shim must not change it.
 *
 *   rpclient SCENARIO FILE
 * Scenarios: short, vec, errors, odirect, pipe, socket, eintr, fork,
 * threads, vfork, dup, shuffle, stop FILE normal|random|willneed,
 * write FILE (writes 64 MiB, prints its hash), rwscan, rwhint, rwshort,
 * rwrandom (a database's reads and writes of its own file).
 */
#ifndef _GNU_SOURCE
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ULL;
	return h;
}

#define H0 0xcbf29ce484222325ULL

static int open_seq(const char *path, int flags)
{
	int fd = open(path, flags);

	if (fd < 0) {
		perror(path);
		exit(2);
	}
	printf("fadvise=%d\n", posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL));
	return fd;
}

/* Odd sizes, reads across EOF, the position after each. */
static void sc_short(const char *path)
{
	static char buf[1 << 20];
	size_t sizes[] = { 1, 4095, 4097, 65537, 131072, 1 << 20, 12345 };
	int fd = open_seq(path, O_RDONLY);
	uint64_t h = H0, total = 0;
	ssize_t n;

	for (unsigned i = 0;; i++) {
		n = read(fd, buf, sizes[i % 7]);
		if (n <= 0)
			break;
		h = fnv(h, buf, (size_t)n);
		total += (uint64_t)n;
	}
	printf("short: n=%zd total=%llu hash=%016llx pos=%lld\n", n, (unsigned long long)total,
	       (unsigned long long)h, (long long)lseek(fd, 0, SEEK_CUR));
	/* pread does not move the position; a read at EOF returns 0. */
	n = pread(fd, buf, 100, 10);
	printf("pread=%zd pos=%lld h=%016llx read-at-eof=%zd\n", n, (long long)lseek(fd, 0, SEEK_CUR),
	       (unsigned long long)fnv(H0, buf, 100), read(fd, buf, 10));
	close(fd);
}

/* readv, preadv, preadv2 (offset -1: the file position). */
static void sc_vec(const char *path)
{
	static char a[70000], b[131072];
	struct iovec iov[2] = { { a, sizeof(a) }, { b, sizeof(b) } };
	int fd = open_seq(path, O_RDONLY);
	uint64_t h = H0, total = 0;
	ssize_t n;

	for (unsigned i = 0;; i++) {
		if (i % 3 == 0)
			n = readv(fd, iov, 2);
		else if (i % 3 == 1)
			n = preadv2(fd, iov, 2, -1, 0);
		else
			n = preadv(fd, iov, 2, (off_t)total);
		if (n <= 0)
			break;
		if (i % 3 == 2)
			lseek(fd, n, SEEK_CUR);
		h = fnv(h, a, (size_t)n < sizeof(a) ? (size_t)n : sizeof(a));
		if ((size_t)n > sizeof(a))
			h = fnv(h, b, (size_t)n - sizeof(a));
		total += (uint64_t)n;
	}
	printf("vec: n=%zd total=%llu hash=%016llx pos=%lld\n", n, (unsigned long long)total,
	       (unsigned long long)h, (long long)lseek(fd, 0, SEEK_CUR));
	close(fd);
}

/* Errors the program makes must come back unchanged. */
static void sc_errors(const char *path)
{
	char buf[16];
	void *volatile null = NULL; /* hidden from the compiler's checks */
	int fd = open_seq(path, O_RDONLY);
	ssize_t n;

	errno = 0;
	n = read(fd, null, 4096);
	printf("null buf: %zd errno=%d\n", n, errno);
	errno = 0;
	n = pread(fd, buf, sizeof(buf), -1);
	printf("negative off: %zd errno=%d\n", n, errno);
	errno = 0;
	n = preadv2(fd, &(struct iovec){ buf, sizeof(buf) }, 1, 0, 0x40000000);
	printf("bad rwf: %zd errno=%d\n", n, errno);
	errno = 0;
	n = read(fd, buf, sizeof(buf));
	printf("ok: %zd errno=%d pos=%lld\n", n, errno, (long long)lseek(fd, 0, SEEK_CUR));
	errno = 0;
	n = write(fd, buf, 1);
	printf("write ro: %zd errno=%d\n", n, errno);
	close(fd);
	errno = 0;
	n = read(fd, buf, sizeof(buf));
	printf("closed: %zd errno=%d\n", n, errno);
	errno = 0;
	printf("fadvise bad fd=%d errno=%d\n", posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL), errno);
}

static void sc_odirect(const char *path)
{
	void *buf;
	int fd = open_seq(path, O_RDONLY | O_DIRECT);
	uint64_t h = H0, total = 0;
	ssize_t n;

	if (posix_memalign(&buf, 4096, 1 << 20))
		exit(2);
	while ((n = read(fd, buf, 1 << 20)) > 0) {
		h = fnv(h, buf, (size_t)n);
		total += (uint64_t)n;
	}
	printf("odirect: n=%zd total=%llu hash=%016llx\n", n, (unsigned long long)total,
	       (unsigned long long)h);
	free(buf);
	close(fd);
}

/* Pipes and sockets: data through, fadvise's own error unchanged. */
static void sc_pipe(int sock)
{
	int p[2];
	char buf[4096];
	uint64_t h = H0, total = 0;
	pid_t pid;
	ssize_t n;

	if (sock ? socketpair(AF_UNIX, SOCK_STREAM, 0, p) : pipe(p))
		exit(2);
	printf("fadvise=%d\n", posix_fadvise(p[0], 0, 0, POSIX_FADV_SEQUENTIAL));
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		for (int i = 0; i < 4096; i++) {
			memset(buf, i & 0xff, sizeof(buf));
			if (write(p[1], buf, sizeof(buf)) != sizeof(buf))
				_exit(1);
		}
		_exit(0);
	}
	close(p[1]);
	while ((n = read(p[0], buf, 3000)) > 0) {
		h = fnv(h, buf, (size_t)n);
		total += (uint64_t)n;
	}
	waitpid(pid, NULL, 0);
	printf("%s: n=%zd total=%llu hash=%016llx\n", sock ? "socket" : "pipe", n,
	       (unsigned long long)total, (unsigned long long)h);
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* A read interrupted by a signal returns EINTR, with or without the shim. */
static void sc_eintr(void)
{
	struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART */
	int p[2];
	char buf[16];
	ssize_t n;

	if (pipe(p))
		exit(2);
	sigaction(SIGALRM, &sa, NULL);
	alarm(1);
	errno = 0;
	n = read(p[0], buf, sizeof(buf));
	printf("eintr: %zd errno=%d\n", n, errno);
}

/* Parent reads half, a child the rest through the same description. */
static void sc_fork(const char *path)
{
	static char buf[1 << 17];
	int fd = open_seq(path, O_RDONLY), st;
	struct stat sb;
	uint64_t h = H0, half;
	ssize_t n;
	pid_t pid;

	fstat(fd, &sb);
	half = (uint64_t)sb.st_size / 2;
	for (uint64_t got = 0; got < half; got += (uint64_t)n)
		if ((n = read(fd, buf, half - got < sizeof(buf) ? half - got : sizeof(buf))) <= 0)
			exit(2);
	pid = fork();
	if (pid == 0) {
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			h = fnv(h, buf, (size_t)n);
		printf("child: hash=%016llx pos=%lld\n", (unsigned long long)h,
		       (long long)lseek(fd, 0, SEEK_CUR));
		fflush(stdout);
		close(fd);
		exit(0); /* exit(), not _exit(): destructors run */
	}
	waitpid(pid, &st, 0);
	printf("parent: child=%d eof-read=%zd pos=%lld\n", WEXITSTATUS(st), read(fd, buf, 10),
	       (long long)lseek(fd, 0, SEEK_CUR));
	close(fd);
}

/* A vfork child (sharing the parent's memory) reads and closes the fd;
 * the parent's stream goes on, still managed. */
static void sc_vfork(const char *path)
{
	static char buf[1 << 17];
	int fd = open_seq(path, O_RDONLY), st;
	volatile uint64_t h = H0; /* kept across vfork */
	ssize_t n;
	pid_t pid;

	for (int i = 0; i < 64 && (n = read(fd, buf, sizeof(buf))) > 0; i++)
		h = fnv(h, buf, (size_t)n);
	pid = vfork();
	if (pid == 0) {
		n = read(fd, buf, sizeof(buf));
		close(fd);
		_exit(n > 0 ? 0 : 1);
	}
	waitpid(pid, &st, 0);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		h = fnv(h, buf, (size_t)n);
	printf("vfork: child=%d hash=%016llx pos=%lld\n", WEXITSTATUS(st), (unsigned long long)h,
	       (long long)lseek(fd, 0, SEEK_CUR));
	close(fd);
}

/* SEQUENTIAL, then another advice (argv[3]: normal, random, willneed),
 * then the whole file: the program takes it back, nothing is dropped. */
static void sc_stop(const char *path, const char *advice)
{
	static char buf[1 << 17];
	int fd = open_seq(path, O_RDONLY);
	int adv = !strcmp(advice, "random") ? POSIX_FADV_RANDOM
		  : !strcmp(advice, "willneed") ? POSIX_FADV_WILLNEED : POSIX_FADV_NORMAL;
	uint64_t h = H0;
	ssize_t n;

	printf("%s=%d\n", advice, posix_fadvise(fd, 0, adv == POSIX_FADV_WILLNEED ? 4096 : 0, adv));
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		h = fnv(h, buf, (size_t)n);
	printf("stop: hash=%016llx\n", (unsigned long long)h);
	close(fd);
}

/* Every 1 MiB block once, in a shuffled order: not a stream. */
static void sc_shuffle(const char *path)
{
	static char buf[1 << 20];
	int fd = open_seq(path, O_RDONLY);
	struct stat sb;
	uint64_t h = 0, nb;

	fstat(fd, &sb);
	nb = (uint64_t)sb.st_size >> 20;
	for (uint64_t i = 0; i < nb; i++) {
		uint64_t b = (i * 7919) % nb; /* a permutation when nb is not a multiple of 7919 */
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)(b << 20));

		if (n > 0)
			h += fnv(H0, buf, (size_t)n); /* order-independent */
	}
	printf("shuffle: blocks=%llu sum=%016llx\n", (unsigned long long)nb, (unsigned long long)h);
	close(fd);
}

/*
 * A database's access to its own file: opened read-write, no advice, 8 KiB
 * pages.  rwscan reads it from end to end (a dump's COPY); rwrandom reads
 * every page in a shuffled order and writes some back unchanged (index
 * lookups and updates); rwshort reads its first 8 MiB and closes it (a
 * range scan).  Each prints the data's hash.
 */
#define DBPAGE 8192

static int open_db(const char *path, struct stat *sb)
{
	int fd = open(path, O_RDWR);

	if (fd < 0 || fstat(fd, sb) < 0) {
		perror(path);
		exit(2);
	}
	return fd;
}

static void sc_rwscan(const char *path, uint64_t limit, bool rewrite)
{
	static char buf[DBPAGE], ring[32][DBPAGE];
	struct stat sb;
	int fd = open_db(path, &sb);
	uint64_t h = H0, off = 0, rewritten = 0;
	ssize_t n;

	while (off < limit && (n = pread(fd, buf, sizeof(buf), (off_t)off)) > 0) {
		h = fnv(h, buf, (size_t)n);
		/* rwhint: each page is written back unchanged 32 pages later, as
		 * PostgreSQL's scan ring writes the hint bits it set. */
		if (rewrite && n == DBPAGE) {
			uint64_t slot = (off / DBPAGE) % 32;

			if (off >= 32 * DBPAGE &&
			    pwrite(fd, ring[slot], DBPAGE, (off_t)(off - 32 * DBPAGE)) == DBPAGE)
				rewritten++;
			memcpy(ring[slot], buf, DBPAGE);
		}
		off += (uint64_t)n;
	}
	printf("rwscan: bytes=%llu hash=%016llx rewritten=%llu close=%d\n", (unsigned long long)off,
	       (unsigned long long)h, (unsigned long long)rewritten, close(fd));
}

static void sc_rwrandom(const char *path)
{
	static char buf[DBPAGE];
	struct stat sb;
	int fd = open_db(path, &sb);
	uint64_t h = 0, np = (uint64_t)sb.st_size / DBPAGE, written = 0;

	for (uint64_t i = 0; i < np; i++) {
		uint64_t p = (i * 7919) % np; /* a permutation when np is not a multiple of 7919 */
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)(p * DBPAGE));

		if (n > 0) {
			h += fnv(H0, buf, (size_t)n); /* order-independent */
			if (i % 16 == 0 && pwrite(fd, buf, (size_t)n, (off_t)(p * DBPAGE)) == n)
				written++;
		}
	}
	printf("rwrandom: pages=%llu written=%llu sum=%016llx close=%d\n", (unsigned long long)np,
	       (unsigned long long)written, (unsigned long long)h, close(fd));
}

struct part {
	int fd;
	off_t off, len;
	uint64_t h;
};

static void *reader(void *arg)
{
	static __thread char buf[1 << 16];
	struct part *p = arg;

	p->h = H0;
	for (off_t o = p->off; o < p->off + p->len;) {
		ssize_t n = pread(p->fd, buf, sizeof(buf), o);

		if (n <= 0)
			break;
		p->h = fnv(p->h, buf, (size_t)n);
		o += n;
	}
	return NULL;
}

/* Four threads pread quarters of one fd; one more reads with read(). */
static void sc_threads(const char *path)
{
	struct part p[4];
	pthread_t t[4];
	struct stat sb;
	int fd = open_seq(path, O_RDONLY);

	fstat(fd, &sb);
	for (int i = 0; i < 4; i++) {
		p[i] = (struct part){ fd, sb.st_size / 4 * i, sb.st_size / 4, 0 };
		pthread_create(&t[i], NULL, reader, &p[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		printf("thread %d: hash=%016llx\n", i, (unsigned long long)p[i].h);
	}
	close(fd);
}

/* dup, dup2 over a tracked fd, F_DUPFD_CLOEXEC, close_range. */
static void sc_dup(const char *path)
{
	static char buf[1 << 17];
	int fd = open_seq(path, O_RDONLY), d1, d2, d3;
	uint64_t h = H0;
	ssize_t n;

	d1 = dup(fd);
	d2 = fcntl(fd, F_DUPFD_CLOEXEC, 100);
	d3 = open_seq(path, O_RDONLY);
	printf("dup2=%d\n", dup2(fd, d3) == d3);
	for (int i = 0; (n = read(i % 2 ? d1 : d2, buf, sizeof(buf))) > 0; i++)
		h = fnv(h, buf, (size_t)n);
	printf("dup: hash=%016llx pos=%lld\n", (unsigned long long)h, (long long)lseek(d3, 0, SEEK_CUR));
	printf("close_range=%d\n", close_range((unsigned)d2, (unsigned)d2, 0));
	printf("closed=%d %d\n", fcntl(d2, F_GETFD) < 0, close(d1));
	close(d3);
	close(fd);
}

/* 64 MiB written in 1 MiB writes after NOREUSE advice; hash read back. */
static void sc_write(const char *path)
{
	static char buf[1 << 20];
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	uint64_t h = H0;
	ssize_t n, total = 0;

	if (fd < 0)
		exit(2);
	printf("fadvise=%d\n", posix_fadvise(fd, 0, 0, POSIX_FADV_NOREUSE));
	for (int i = 0; i < 64; i++) {
		for (size_t j = 0; j < sizeof(buf); j += 8)
			memcpy(buf + j, &(uint64_t){ (uint64_t)i * sizeof(buf) + j }, 8);
		n = i % 2 ? write(fd, buf, sizeof(buf)) : pwrite(fd, buf, sizeof(buf), total);
		if (i % 2 == 0 && n > 0)
			lseek(fd, n, SEEK_CUR);
		total += n;
	}
	printf("written=%zd pos=%lld\n", total, (long long)lseek(fd, 0, SEEK_CUR));
	close(fd);
	fd = open(path, O_RDONLY);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		h = fnv(h, buf, (size_t)n);
	printf("readback: hash=%016llx\n", (unsigned long long)h);
	close(fd);
}

/* A dump's output: 128 MiB through stdio in rows of tens of bytes, as
 * pg_dump writes them, every 4096th an 80 KiB block (larger than stdio's
 * buffer: written past it). */
static void sc_rows(const char *path)
{
	static char row[100], block[80 << 10];
	FILE *f = fopen(path, "w");
	uint64_t h = H0, total = 0;
	size_t n;

	if (!f)
		exit(2);
	for (uint64_t i = 0; total < (UINT64_C(128) << 20); i++) {
		const char *p = row;

		n = 17 + i % 80;
		if (i % 4096 == 4095) {
			memset(block, (int)(i & 0xff), sizeof(block));
			p = block;
			n = sizeof(block);
		} else {
			snprintf(row, sizeof(row), "%020llu\t%078llu", (unsigned long long)i,
				 (unsigned long long)(i * 2654435761u));
			row[n - 1] = '\n';
		}
		if ((i % 2 ? fwrite_unlocked(p, 1, n, f) : fwrite(p, n, 1, f) * n) != n) {
			printf("short fwrite at %llu: error=%d\n", (unsigned long long)total, ferror(f));
			break;
		}
		h = fnv(h, p, n);
		total += n;
	}
	printf("written=%llu pos=%ld error=%d hash=%016llx\n", (unsigned long long)total, ftell(f),
	       ferror(f), (unsigned long long)h);
	printf("fclose=%d\n", fclose(f));
}

int main(int argc, char **argv)
{
	const char *sc = argc > 1 ? argv[1] : "", *f = argc > 2 ? argv[2] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(sc, "short")) sc_short(f);
	else if (!strcmp(sc, "vec")) sc_vec(f);
	else if (!strcmp(sc, "errors")) sc_errors(f);
	else if (!strcmp(sc, "odirect")) sc_odirect(f);
	else if (!strcmp(sc, "pipe")) sc_pipe(0);
	else if (!strcmp(sc, "socket")) sc_pipe(1);
	else if (!strcmp(sc, "eintr")) sc_eintr();
	else if (!strcmp(sc, "fork")) sc_fork(f);
	else if (!strcmp(sc, "threads")) sc_threads(f);
	else if (!strcmp(sc, "vfork")) sc_vfork(f);
	else if (!strcmp(sc, "stop")) sc_stop(f, argc > 3 ? argv[3] : "normal");
	else if (!strcmp(sc, "shuffle")) sc_shuffle(f);
	else if (!strcmp(sc, "dup")) sc_dup(f);
	else if (!strcmp(sc, "write")) sc_write(f);
	else if (!strcmp(sc, "rows")) sc_rows(f);
	else if (!strcmp(sc, "rwscan")) sc_rwscan(f, UINT64_MAX, false);
	else if (!strcmp(sc, "rwhint")) sc_rwscan(f, UINT64_MAX, true);
	else if (!strcmp(sc, "rwshort")) sc_rwscan(f, UINT64_C(8) << 20, false);
	else if (!strcmp(sc, "rwrandom")) sc_rwrandom(f);
	else {
		fprintf(stderr, "usage: rpclient SCENARIO FILE\n");
		return 2;
	}
	return 0;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Every function the shim wraps, called in its ordinary and its edge cases:
 * errors (EINVAL, EBADF, EFAULT, EINTR, ESPIPE ...), short reads and
 * writes, O_APPEND, pipes, sockets, /dev/null, directories, negative
 * offsets, huge lengths, a description shared across fork, unaligned and
 * fixed mappings, large sendfile and copy_file_range.
 *
 *   equiv DIR          lists the groups of cases
 *   equiv DIR GROUP    runs one group
 *
 * works in DIR (empty, on a disk filesystem) and prints one line per case:
 * its name, the return value, errno (set to a sentinel before each call and
 * printed even on success) and, where the case produced data, a checksum of
 * it and the file position.  Nothing printed depends on addresses, pids or
 * descriptor numbers, so the test can compare a run without the shim with
 * runs under it line by line.  Data is checked through raw system calls
 * (never the wrappers under test).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef RWF_NOAPPEND
#define RWF_NOAPPEND 0x00000020
#endif

/* The fortified entry points, called as a fortified program would. */
extern ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
extern ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
extern ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);

#define MIB (1L << 20)
#define PG 4096L
#define SRC_SIZE (24 * MIB)
#define SENTINEL 4321

/* Static, so that a "large but valid" length stays in the address space. */
static unsigned char g_buf[4 * MIB] __attribute__((aligned(4096)));
/* What the checks read into (never the buffers the cases use). */
static unsigned char g_scratch[MIB];

/* ---------------------------------------------------------------------- */
/* Output and checksums */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const volatile unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ULL;
	return h;
}

#define FNV0 0xcbf29ce484222325ULL

/* Bad arguments passed on purpose, hidden from the compiler's checks. */
static volatile uintptr_t g_bad_addr = 8;
#define BAD ((void *)g_bad_addr)

static size_t opaque(size_t v)
{
	volatile size_t x = v;

	return x;
}

static int opaque_int(int v)
{
	volatile int x = v;

	return x;
}

static void line(const char *name, long rc, int err)
{
	printf("%-40s rc=%ld errno=%d", name, rc, err);
}

static void end(void)
{
	putchar('\n');
	fflush(stdout);
}

/* A call: errno preset, return value and errno printed, line left open. */
#define CALL(name, expr)                                  \
	do {                                              \
		long rc_;                                 \
		int e_;                                   \
		errno = SENTINEL;                         \
		rc_ = (long)(expr);                       \
		e_ = errno;                               \
		line(name, rc_, e_);                      \
	} while (0)
#define SHOW(name, expr)        \
	do {                    \
		CALL(name, expr); \
		end();          \
	} while (0)

static long pos(int fd)
{
	return (long)lseek(fd, 0, SEEK_CUR);
}

/* Checksum and size of a file, read with raw system calls. */
static void show_file(const char *path)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	uint64_t h = FNV0;
	long size = 0, n;

	if (fd < 0) {
		printf(" file=missing");
		return;
	}
	while ((n = syscall(SYS_pread64, fd, g_scratch, sizeof(g_scratch), size)) > 0) {
		h = fnv(h, g_scratch, (size_t)n);
		size += n;
	}
	syscall(SYS_close, fd);
	printf(" file=%016llx:%ld", (unsigned long long)h, size);
}

static void show_sum(const void *p, size_t n)
{
	printf(" sum=%016llx", (unsigned long long)fnv(FNV0, p, n));
}

static void show_pos(int fd)
{
	printf(" pos=%ld", pos(fd));
}

/* ---------------------------------------------------------------------- */
/* Fixtures */

/* A file of deterministic bytes (seeded), written with raw system calls. */
static void mk(const char *path, long size, uint64_t seed)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;

	if (fd < 0) {
		perror(path);
		exit(2);
	}
	for (long off = 0; off < size; off += (long)sizeof(g_buf)) {
		long n = size - off < (long)sizeof(g_buf) ? size - off : (long)sizeof(g_buf);

		for (long i = 0; i < n; i += 8) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			memcpy(g_buf + i, &x, 8);
		}
		if (syscall(SYS_pwrite64, fd, g_buf, n, off) != n)
			exit(2);
	}
	syscall(SYS_close, fd);
}

static int openf(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC, 0644);

	if (fd < 0) {
		perror(path);
		exit(2);
	}
	return fd;
}

static int seq(const char *path, int flags)
{
	int fd = openf(path, flags);

	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	return fd;
}

static void mkpipe(int p[2], int flags)
{
	if (pipe2(p, O_CLOEXEC | flags) < 0)
		exit(2);
}

static volatile sig_atomic_t g_alarms;

static void on_alarm(int sig)
{
	(void)sig;
	g_alarms++;
}

/* SIGALRM in ms milliseconds; its handler does not restart calls. */
static void alarm_in(long ms)
{
	struct itimerval it = { { 0, 0 }, { ms / 1000, (ms % 1000) * 1000 } };

	setitimer(ITIMER_REAL, &it, NULL);
}

static long drain(int fd, uint64_t *h)
{
	long total = 0, n;

	*h = FNV0;
	while ((n = syscall(SYS_read, fd, g_scratch, sizeof(g_scratch))) > 0) {
		*h = fnv(*h, g_scratch, (size_t)n);
		total += n;
	}
	return total;
}

/* A child that reads the pipe p to its end and reports the byte count and
 * checksum through r.  Returns its pid. */
static pid_t reader_child(int p[2], int r[2])
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		uint64_t h;
		long n;

		syscall(SYS_close, p[1]);
		n = drain(p[0], &h);
		if (syscall(SYS_write, r[1], &n, sizeof(n)) < 0 ||
		    syscall(SYS_write, r[1], &h, sizeof(h)) < 0)
			_exit(1);
		_exit(0);
	}
	return pid;
}

static void reader_result(pid_t pid, int p[2], int r[2])
{
	long n = -1;
	uint64_t h = 0;
	int st = -1;

	close(p[1]);
	waitpid(pid, &st, 0);
	if (syscall(SYS_read, r[0], &n, sizeof(n)) != sizeof(n) ||
	    syscall(SYS_read, r[0], &h, sizeof(h)) != sizeof(h))
		n = -1;
	printf(" child_status=%d child_read=%ld child_sum=%016llx", st, n, (unsigned long long)h);
	close(p[0]);
	close(r[0]);
	close(r[1]);
}

/* ---------------------------------------------------------------------- */
/* The read family */

static void case_read(void)
{
	int fd = seq("src", O_RDONLY), p[2], s[2], d;
	long total = 0, n;
	uint64_t h = FNV0;
	struct sigaction sa;

	CALL("read regular 64K", read(fd, g_buf, 64 * 1024));
	show_sum(g_buf, 64 * 1024);
	show_pos(fd);
	end();
	while ((n = read(fd, g_buf, MIB)) > 0) {
		h = fnv(h, g_buf, (size_t)n);
		total += n;
	}
	printf("%-40s rc=%ld errno=0 total=%ld sum=%016llx", "read sequential to EOF", n, total,
	       (unsigned long long)h);
	show_pos(fd);
	end();
	SHOW("read at EOF", read(fd, g_buf, 4096));
	lseek(fd, SRC_SIZE - 100, SEEK_SET);
	CALL("read short at EOF", read(fd, g_buf, 4096));
	show_sum(g_buf, 100);
	show_pos(fd);
	end();
	lseek(fd, SRC_SIZE - 10, SEEK_SET);
	CALL("read 1 GiB length near EOF", read(fd, g_buf, opaque(1UL << 30)));
	show_pos(fd);
	end();
	lseek(fd, SRC_SIZE - 10, SEEK_SET);
	CALL("read SSIZE_MAX+1 length", read(fd, g_buf, opaque((size_t)SSIZE_MAX + 1)));
	show_pos(fd);
	end();
	lseek(fd, 0, SEEK_SET);
	CALL("read bad buffer (EFAULT)", read(fd, BAD, 4096));
	show_pos(fd);
	end();
	CALL("read zero length", read(fd, g_buf, 0));
	show_pos(fd);
	end();
	CALL("__read_chk", __read_chk(fd, g_buf, 8192, sizeof(g_buf)));
	show_sum(g_buf, 8192);
	show_pos(fd);
	end();
	SHOW("__read_chk bad fd", __read_chk(-1, g_buf, 16, sizeof(g_buf)));
	SHOW("read fd -1", read(-1, g_buf, 16));
	SHOW("read closed fd", read(900, g_buf, 16));
	close(fd);

	fd = openf("src", O_WRONLY);
	SHOW("read O_WRONLY fd", read(fd, g_buf, 16));
	close(fd);
	fd = openf(".", O_RDONLY | O_DIRECTORY);
	SHOW("read directory", read(fd, g_buf, 16));
	close(fd);
	fd = openf("/dev/null", O_RDONLY);
	SHOW("read /dev/null", read(fd, g_buf, 16));
	close(fd);
	fd = open("src", O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd >= 0) {
		SHOW("read O_DIRECT unaligned (EINVAL)", read(fd, g_buf + 1, 4095));
		CALL("read O_DIRECT aligned", read(fd, g_buf, 8192));
		show_sum(g_buf, 8192);
		show_pos(fd);
		end();
		close(fd);
	} else {
		printf("read O_DIRECT: not supported here\n");
	}

	mkpipe(p, 0);
	syscall(SYS_write, p[1], "0123456789", 10);
	CALL("read pipe short", read(p[0], g_buf, 4096));
	show_sum(g_buf, 10);
	end();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);
	alarm_in(30);
	SHOW("read empty pipe, SIGALRM (EINTR)", read(p[0], g_buf, 4096));
	close(p[1]);
	SHOW("read pipe, writer gone", read(p[0], g_buf, 4096));
	close(p[0]);
	mkpipe(p, O_NONBLOCK);
	SHOW("read empty pipe O_NONBLOCK", read(p[0], g_buf, 4096));
	close(p[0]);
	close(p[1]);

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s) == 0) {
		syscall(SYS_write, s[1], "hello", 5);
		CALL("read socketpair", read(s[0], g_buf, 4096));
		show_sum(g_buf, 5);
		end();
		close(s[0]);
		close(s[1]);
	}

	/* A descriptor the program reads through a dup: one file position. */
	fd = seq("src", O_RDONLY);
	d = dup(fd);
	read(fd, g_buf, MIB);
	CALL("read through dup", read(d, g_buf, MIB));
	show_sum(g_buf, MIB);
	show_pos(fd);
	end();
	close(d);
	close(fd);
}

static void case_pread(void)
{
	int fd = seq("src", O_RDONLY), p[2];

	lseek(fd, 1000, SEEK_SET);
	CALL("pread middle", pread(fd, g_buf, 65536, 5 * MIB + 7));
	show_sum(g_buf, 65536);
	show_pos(fd);
	end();
	CALL("pread64 middle", pread64(fd, g_buf, 65536, 9 * MIB + 3));
	show_sum(g_buf, 65536);
	show_pos(fd);
	end();
	CALL("pread short at EOF", pread(fd, g_buf, 65536, SRC_SIZE - 77));
	show_sum(g_buf, 77);
	end();
	SHOW("pread at EOF", pread(fd, g_buf, 65536, SRC_SIZE));
	SHOW("pread far beyond EOF", pread(fd, g_buf, 65536, 1L << 40));
	SHOW("pread negative offset", pread(fd, g_buf, 16, -4096));
	SHOW("pread64 negative offset", pread64(fd, g_buf, 16, -1));
	SHOW("pread bad buffer", pread(fd, BAD, 4096, 0));
	SHOW("pread 1 GiB length near EOF", pread(fd, g_buf, opaque(1UL << 30), SRC_SIZE - 10));
	SHOW("pread64 SSIZE_MAX+1 length", pread64(fd, g_buf, opaque((size_t)SSIZE_MAX + 1), 0));
	CALL("__pread_chk", __pread_chk(fd, g_buf, 4096, 12345, sizeof(g_buf)));
	show_sum(g_buf, 4096);
	end();
	CALL("__pread64_chk", __pread64_chk(fd, g_buf, 4096, 23456, sizeof(g_buf)));
	show_sum(g_buf, 4096);
	end();
	SHOW("__pread_chk negative offset", __pread_chk(fd, g_buf, 16, -1, sizeof(g_buf)));
	SHOW("__pread64_chk bad fd", __pread64_chk(-1, g_buf, 16, 0, sizeof(g_buf)));
	/* A stream of preads, front to back. */
	{
		long total = 0, n;
		uint64_t h = FNV0;

		for (long off = 0; (n = pread(fd, g_buf, 2 * MIB, off)) > 0; off += n) {
			h = fnv(h, g_buf, (size_t)n);
			total += n;
		}
		printf("%-40s total=%ld sum=%016llx", "pread sequential to EOF", total,
		       (unsigned long long)h);
		show_pos(fd);
		end();
	}
	close(fd);
	SHOW("pread closed fd", pread(fd, g_buf, 16, 0));
	mkpipe(p, 0);
	SHOW("pread pipe (ESPIPE)", pread(p[0], g_buf, 16, 0));
	SHOW("pread64 pipe (ESPIPE)", pread64(p[0], g_buf, 16, 0));
	close(p[0]);
	close(p[1]);
	fd = openf(".", O_RDONLY | O_DIRECTORY);
	SHOW("pread directory", pread(fd, g_buf, 16, 0));
	close(fd);
}

static void case_readv(void)
{
	int fd = seq("src", O_RDONLY), p[2];
	struct iovec iov[3] = { { g_buf, 100 }, { g_buf + 1000, 5000 }, { g_buf + 8192, 70000 } };
	struct iovec bad[2] = { { g_buf, 100 }, { NULL, 100 } };
	struct iovec many[IOV_MAX + 1];
	struct sigaction sa;

	bad[1].iov_base = BAD;

	for (int i = 0; i <= IOV_MAX; i++)
		many[i] = (struct iovec){ g_buf + i, 1 };
	CALL("readv 3 pieces", readv(fd, iov, 3));
	show_sum(g_buf, 8192 + 70000);
	show_pos(fd);
	end();
	lseek(fd, SRC_SIZE - 3000, SEEK_SET);
	CALL("readv short at EOF", readv(fd, iov, 3));
	show_sum(g_buf, 8192);
	show_pos(fd);
	end();
	SHOW("readv zero pieces", readv(fd, iov, 0));
	SHOW("readv negative count", readv(fd, iov, opaque_int(-1)));
	SHOW("readv IOV_MAX+1 pieces", readv(fd, many, IOV_MAX + 1));
	lseek(fd, 0, SEEK_SET);
	CALL("readv second piece bad (EFAULT/short)", readv(fd, bad, 2));
	show_pos(fd);
	end();
	CALL("preadv", preadv(fd, iov, 3, 3 * MIB));
	show_sum(g_buf, 8192 + 70000);
	show_pos(fd);
	end();
	CALL("preadv64", preadv64(fd, iov, 3, 4 * MIB + 1));
	show_sum(g_buf, 8192 + 70000);
	end();
	SHOW("preadv negative offset", preadv(fd, iov, 3, -2));
	SHOW("preadv64 negative offset", preadv64(fd, iov, 3, -4096));
	lseek(fd, 2 * MIB, SEEK_SET);
	CALL("preadv2 offset -1 (file position)", preadv2(fd, iov, 3, -1, 0));
	show_sum(g_buf, 8192 + 70000);
	show_pos(fd);
	end();
	CALL("preadv2 RWF_HIPRI", preadv2(fd, iov, 3, 0, RWF_HIPRI));
	show_sum(g_buf, 8192 + 70000);
	end();
	SHOW("preadv2 bad flags", preadv2(fd, iov, 3, 0, 0x40000000));
	SHOW("preadv2 offset -2", preadv2(fd, iov, 3, -2, 0));
	CALL("preadv64v2 offset -1", preadv64v2(fd, iov, 1, -1, 0));
	show_sum(g_buf, 100);
	show_pos(fd);
	end();
	CALL("preadv64v2 RWF_NOWAIT cached", preadv64v2(fd, iov, 3, 0, RWF_NOWAIT));
	show_sum(g_buf, 8192 + 70000);
	end();
	SHOW("preadv64v2 bad fd", preadv64v2(-1, iov, 3, 0, 0));
	close(fd);
	mkpipe(p, 0);
	syscall(SYS_write, p[1], "abcdefghij", 10);
	CALL("readv pipe short", readv(p[0], iov, 3));
	show_sum(g_buf, 100);
	end();
	SHOW("preadv pipe (ESPIPE)", preadv(p[0], iov, 3, 0));
	SHOW("preadv2 empty pipe RWF_NOWAIT", preadv2(p[0], iov, 3, -1, RWF_NOWAIT));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	alarm_in(30);
	SHOW("readv empty pipe, SIGALRM (EINTR)", readv(p[0], iov, 3));
	close(p[0]);
	close(p[1]);
}

/* ---------------------------------------------------------------------- */
/* The write family */

static void case_write(void)
{
	int fd, p[2], s[2];
	struct sigaction sa;
	long total = 0;

	mk("w1", 0, 0);
	fd = seq("w1", O_WRONLY);
	memset(g_buf, 'a', MIB);
	SHOW("write regular 1M", write(fd, g_buf, MIB));
	for (int i = 0; i < 16; i++) {
		g_buf[0] = (unsigned char)i;
		total += write(fd, g_buf, MIB);
	}
	printf("%-40s total=%ld", "write sequential 16M", total);
	show_pos(fd);
	show_file("w1");
	end();
	SHOW("write bad buffer (EFAULT)", write(fd, BAD, 4096));
	SHOW("write zero length", write(fd, g_buf, 0));
	close(fd);
	fd = openf("src", O_RDONLY);
	SHOW("write fd opened O_RDONLY", write(fd, g_buf, 16));
	close(fd);
	SHOW("write closed fd", write(fd, g_buf, 16));
	SHOW("write fd -1", write(-1, g_buf, 16));

	mk("w2", 5000, 2);
	fd = openf("w2", O_WRONLY | O_APPEND);
	CALL("write O_APPEND", write(fd, "append-me", 9));
	show_pos(fd);
	show_file("w2");
	end();
	CALL("pwrite O_APPEND (appends anyway)", pwrite(fd, "XYZ", 3, 0));
	show_pos(fd);
	show_file("w2");
	end();
	CALL("pwritev2 O_APPEND RWF_NOAPPEND", pwritev2(fd, &(struct iovec){ "NOAPP", 5 }, 1, 10, RWF_NOAPPEND));
	show_file("w2");
	end();
	close(fd);

	fd = openf("/dev/null", O_WRONLY);
	SHOW("write /dev/null", write(fd, g_buf, 4096));
	SHOW("write /dev/null SSIZE_MAX+1 length", write(fd, g_buf, opaque((size_t)SSIZE_MAX + 1)));
	close(fd);
	fd = openf(".", O_RDONLY | O_DIRECTORY);
	SHOW("write directory", write(fd, g_buf, 16));
	close(fd);

	mkpipe(p, O_NONBLOCK);
	SHOW("write pipe O_NONBLOCK short", write(p[1], g_buf, MIB));
	SHOW("write full pipe O_NONBLOCK (EAGAIN)", write(p[1], g_buf, 4096));
	close(p[0]);
	close(p[1]);
	mkpipe(p, 0);
	fcntl(p[1], F_SETPIPE_SZ, 4096);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	SHOW("write pipe fill 4096", write(p[1], g_buf, 4096));
	alarm_in(30);
	SHOW("write full pipe, SIGALRM (EINTR)", write(p[1], g_buf, 4096));
	close(p[0]);
	SHOW("write pipe, reader gone (EPIPE)", write(p[1], g_buf, 16));
	close(p[1]);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s) == 0) {
		SHOW("write socketpair", write(s[0], "hello", 5));
		close(s[1]);
		SHOW("write socketpair, peer gone", write(s[0], "hello", 5));
		close(s[0]);
	}
}

static void case_pwrite(void)
{
	struct iovec iov[3] = { { g_buf, 100 }, { g_buf + 1000, 5000 }, { g_buf + 8192, 70000 } };
	struct iovec bad[2] = { { g_buf, 100 }, { NULL, 100 } };
	int fd, p[2];

	bad[1].iov_base = BAD;
	for (long i = 0; i < 90000; i++)
		g_buf[i] = (unsigned char)(i * 7 + 3);
	mk("w3", 2 * MIB, 3);
	fd = seq("w3", O_RDWR);
	lseek(fd, 77, SEEK_SET);
	CALL("pwrite middle", pwrite(fd, g_buf, 65536, MIB + 5));
	show_pos(fd);
	show_file("w3");
	end();
	CALL("pwrite64 past EOF (hole)", pwrite64(fd, g_buf, 4096, 3 * MIB));
	show_file("w3");
	end();
	SHOW("pwrite negative offset", pwrite(fd, g_buf, 16, -1));
	SHOW("pwrite64 negative offset", pwrite64(fd, g_buf, 16, -8192));
	SHOW("pwrite bad buffer", pwrite(fd, BAD, 16, 0));
	CALL("writev 3 pieces", writev(fd, iov, 3));
	show_pos(fd);
	show_file("w3");
	end();
	SHOW("writev negative count", writev(fd, iov, opaque_int(-1)));
	CALL("writev second piece bad", writev(fd, bad, 2));
	show_pos(fd);
	show_file("w3");
	end();
	CALL("pwritev", pwritev(fd, iov, 3, 100000));
	show_file("w3");
	end();
	CALL("pwritev64", pwritev64(fd, iov, 2, 200001));
	show_file("w3");
	end();
	SHOW("pwritev negative offset", pwritev(fd, iov, 3, -3));
	lseek(fd, 400000, SEEK_SET);
	CALL("pwritev2 offset -1 (file position)", pwritev2(fd, iov, 3, -1, 0));
	show_pos(fd);
	show_file("w3");
	end();
	CALL("pwritev2 RWF_DSYNC", pwritev2(fd, iov, 1, 0, RWF_DSYNC));
	show_file("w3");
	end();
	SHOW("pwritev2 bad flags", pwritev2(fd, iov, 1, 0, 0x40000000));
	CALL("pwritev64v2 RWF_APPEND", pwritev64v2(fd, iov, 2, 0, RWF_APPEND));
	show_pos(fd);
	show_file("w3");
	end();
	SHOW("pwritev64v2 offset -2", pwritev64v2(fd, iov, 2, -2, 0));
	close(fd);
	fd = openf("w3", O_RDONLY);
	SHOW("pwrite O_RDONLY fd", pwrite(fd, g_buf, 16, 0));
	close(fd);
	mkpipe(p, 0);
	SHOW("pwrite pipe (ESPIPE)", pwrite(p[1], g_buf, 16, 0));
	SHOW("pwritev64 pipe (ESPIPE)", pwritev64(p[1], iov, 1, 0));
	SHOW("pwritev2 pipe offset -1", pwritev2(p[1], iov, 1, -1, 0));
	close(p[0]);
	close(p[1]);
}

/* ---------------------------------------------------------------------- */
/* posix_fadvise, sendfile, copy_file_range */

static void case_fadvise(void)
{
	int fd = openf("src", O_RDONLY), p[2];

	SHOW("posix_fadvise SEQUENTIAL", posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL));
	SHOW("posix_fadvise64 WILLNEED", posix_fadvise64(fd, 0, MIB, POSIX_FADV_WILLNEED));
	SHOW("posix_fadvise NOREUSE", posix_fadvise(fd, 0, 0, POSIX_FADV_NOREUSE));
	SHOW("posix_fadvise RANDOM", posix_fadvise(fd, MIB, MIB, POSIX_FADV_RANDOM));
	SHOW("posix_fadvise NORMAL", posix_fadvise(fd, 0, 0, POSIX_FADV_NORMAL));
	SHOW("posix_fadvise bad advice", posix_fadvise(fd, 0, 0, 12345));
	SHOW("posix_fadvise negative length", posix_fadvise(fd, 0, -1, POSIX_FADV_SEQUENTIAL));
	SHOW("posix_fadvise64 negative offset", posix_fadvise64(fd, -4096, 0, POSIX_FADV_DONTNEED));
	SHOW("posix_fadvise huge range", posix_fadvise(fd, 1L << 62, 1L << 61, POSIX_FADV_DONTNEED));
	close(fd);
	SHOW("posix_fadvise closed fd", posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL));
	SHOW("posix_fadvise64 fd -1", posix_fadvise64(-1, 0, 0, POSIX_FADV_SEQUENTIAL));
	mkpipe(p, 0);
	SHOW("posix_fadvise pipe (ESPIPE)", posix_fadvise(p[0], 0, 0, POSIX_FADV_SEQUENTIAL));
	close(p[0]);
	close(p[1]);
	fd = openf(".", O_RDONLY | O_DIRECTORY);
	SHOW("posix_fadvise directory", posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL));
	close(fd);
	fd = openf("/dev/null", O_RDONLY);
	SHOW("posix_fadvise /dev/null", posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL));
	close(fd);
}

static void case_sendfile(void)
{
	int in = seq("src", O_RDONLY), out, p[2], r[2];
	off_t off;
	off64_t off64;
	long total = 0, n;
	pid_t pid;

	mk("s1", 0, 0);
	out = openf("s1", O_WRONLY);
	off = 1000;
	CALL("sendfile 12M to a file", sendfile(out, in, &off, 12 * MIB));
	printf(" off=%ld", (long)off);
	show_pos(in);
	show_pos(out);
	show_file("s1");
	end();
	lseek(in, 3 * MIB, SEEK_SET);
	CALL("sendfile64 file position, 10M", sendfile64(out, in, NULL, 10 * MIB));
	show_pos(in);
	show_pos(out);
	show_file("s1");
	end();
	off64 = SRC_SIZE - 5000;
	CALL("sendfile64 short at EOF", sendfile64(out, in, &off64, 9 * MIB));
	printf(" off=%ld", (long)off64);
	show_file("s1");
	end();
	off = SRC_SIZE;
	SHOW("sendfile at EOF", sendfile(out, in, &off, 4096));
	off = -1;
	SHOW("sendfile negative offset", sendfile(out, in, &off, 4096));
	off = 0;
	SHOW("sendfile zero count", sendfile(out, in, &off, 0));
	SHOW("sendfile in fd -1", sendfile(out, -1, NULL, 4096));
	SHOW("sendfile out fd -1", sendfile(-1, in, NULL, 4096));
	off = 0;
	SHOW("sendfile out O_RDONLY", sendfile(in, in, &off, 4096));
	close(out);
	out = openf("s1", O_WRONLY | O_APPEND);
	off = 0;
	SHOW("sendfile out O_APPEND", sendfile(out, in, &off, 4096));
	close(out);
	out = openf("/dev/null", O_WRONLY);
	off = 0;
	SHOW("sendfile to /dev/null 9M", sendfile(out, in, &off, 9 * MIB));
	close(out);

	/* Into a pipe a child reads: the totals and the bytes it saw. */
	mkpipe(p, 0);
	mkpipe(r, 0);
	pid = reader_child(p, r);
	off = 2 * MIB + 1;
	while (total < 12 * MIB && (n = sendfile(p[1], in, &off, (size_t)(12 * MIB - total))) > 0)
		total += n;
	printf("%-40s total=%ld off=%ld", "sendfile 12M into a pipe", total, (long)off);
	reader_result(pid, p, r);
	end();
	mkpipe(p, 0);
	mkpipe(r, 0);
	pid = reader_child(p, r);
	lseek(in, 0, SEEK_SET);
	total = 0;
	while (total < 9 * MIB && (n = sendfile64(p[1], in, NULL, (size_t)(9 * MIB - total))) > 0)
		total += n;
	printf("%-40s total=%ld", "sendfile64 9M into a pipe, file position", total);
	show_pos(in);
	reader_result(pid, p, r);
	end();
	mkpipe(p, 0);
	SHOW("sendfile from a pipe", sendfile(in, p[0], NULL, 16));
	close(p[0]);
	close(p[1]);
	close(in);
}

static void case_copy_file_range(void)
{
	int in = seq("src", O_RDONLY), out, p[2];
	off64_t a, b;

	mk("c1", 0, 0);
	out = seq("c1", O_WRONLY);
	a = 5;
	b = 4096;
	CALL("copy_file_range 12M between files", copy_file_range(in, &a, out, &b, 12 * MIB, 0));
	printf(" in_off=%ld out_off=%ld", (long)a, (long)b);
	show_pos(in);
	show_pos(out);
	show_file("c1");
	end();
	lseek(in, 7 * MIB, SEEK_SET);
	lseek(out, 100, SEEK_SET);
	CALL("copy_file_range 9M, file positions", copy_file_range(in, NULL, out, NULL, 9 * MIB, 0));
	show_pos(in);
	show_pos(out);
	show_file("c1");
	end();
	a = SRC_SIZE - 1000;
	b = 0;
	CALL("copy_file_range short at EOF", copy_file_range(in, &a, out, &b, 9 * MIB, 0));
	printf(" in_off=%ld out_off=%ld", (long)a, (long)b);
	show_file("c1");
	end();
	a = SRC_SIZE;
	SHOW("copy_file_range at EOF", copy_file_range(in, &a, out, &b, 4096, 0));
	a = -1;
	SHOW("copy_file_range negative offset", copy_file_range(in, &a, out, &b, 4096, 0));
	a = 0;
	SHOW("copy_file_range zero length", copy_file_range(in, &a, out, &b, 0, 0));
	SHOW("copy_file_range bad flags", copy_file_range(in, &a, out, &b, 4096, 1));
	SHOW("copy_file_range in fd -1", copy_file_range(-1, NULL, out, NULL, 4096, 0));
	SHOW("copy_file_range out O_RDONLY", copy_file_range(in, NULL, in, NULL, 4096, 0));
	a = 0;
	b = 1L << 62;
	SHOW("copy_file_range huge out offset", copy_file_range(in, &a, out, &b, 9 * MIB, 0));
	close(out);
	/* Overlapping ranges within one file: refused whole. */
	mk("c2", 32 * MIB, 5);
	out = seq("c2", O_RDWR);
	a = 0;
	b = 8 * MIB;
	CALL("copy_file_range overlapping 16M", copy_file_range(out, &a, out, &b, 16 * MIB, 0));
	printf(" in_off=%ld out_off=%ld", (long)a, (long)b);
	show_file("c2");
	end();
	a = 0;
	b = 16 * MIB;
	CALL("copy_file_range same file, disjoint", copy_file_range(out, &a, out, &b, 9 * MIB, 0));
	show_file("c2");
	end();
	close(out);
	out = openf("c1", O_WRONLY | O_APPEND);
	SHOW("copy_file_range out O_APPEND", copy_file_range(in, NULL, out, NULL, 4096, 0));
	close(out);
	mkpipe(p, 0);
	SHOW("copy_file_range to a pipe", copy_file_range(in, NULL, p[1], NULL, 4096, 0));
	close(p[0]);
	close(p[1]);
	out = openf(".", O_RDONLY | O_DIRECTORY);
	SHOW("copy_file_range from a directory", copy_file_range(out, NULL, in, NULL, 4096, 0));
	close(out);
	close(in);
}

/* Offsets the kernel cannot read: EFAULT, not a crash. */
static void case_bad_offsets(void)
{
	int in = seq("src", O_RDONLY), out;
	off64_t b = 0;

	mk("b1", 0, 0);
	out = seq("b1", O_WRONLY);
	SHOW("sendfile bad offset pointer", sendfile(out, in, (off_t *)BAD, 4096));
	SHOW("sendfile64 bad offset pointer", sendfile64(out, in, (off64_t *)BAD, 4096));
	SHOW("copy_file_range bad in offset pointer", copy_file_range(in, (off64_t *)BAD, out, &b, 4096, 0));
	SHOW("copy_file_range bad out offset pointer", copy_file_range(in, &b, out, (off64_t *)BAD, 4096, 0));
	close(out);
	close(in);
}

/* ---------------------------------------------------------------------- */
/* Descriptor lifetime: close, dup*, fcntl, close_range */

static void case_fds(void)
{
	int fd = seq("src", O_RDONLY), other, d;
	struct flock fl = { .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100 };

	read(fd, g_buf, 2 * MIB);
	CALL("dup", (d = dup(fd)) >= 0);
	show_pos(d);
	end();
	SHOW("close dup", close(d));
	SHOW("close twice (EBADF)", close(d));
	SHOW("close -1", close(-1));
	SHOW("dup -1", dup(-1));

	/* dup2 over a descriptor the read path follows: now another file. */
	mk("d1", 3 * MIB, 9);
	other = openf("d1", O_RDONLY);
	lseek(other, 4096, SEEK_SET);
	SHOW("dup2 over a streamed fd (same number)", dup2(other, fd) == fd);
	CALL("read after dup2", read(fd, g_buf, MIB));
	show_sum(g_buf, MIB);
	show_pos(fd);
	show_pos(other);
	end();
	SHOW("dup2 onto itself", dup2(fd, fd) == fd);
	SHOW("dup2 bad old fd", dup2(-1, fd));
	SHOW("dup2 bad new fd", dup2(fd, -1));
	SHOW("dup3 O_CLOEXEC", dup3(other, 150, O_CLOEXEC));
	SHOW("  FD_CLOEXEC set", fcntl(150, F_GETFD));
	SHOW("dup3 onto itself (EINVAL)", dup3(150, 150, 0));
	SHOW("dup3 bad flags", dup3(other, 151, 0x4));
	close(150);
	close(other);

	SHOW("fcntl F_GETFL", fcntl(fd, F_GETFL) & ~O_LARGEFILE);
	SHOW("fcntl F_DUPFD >= 200", fcntl(fd, F_DUPFD, 200));
	SHOW("fcntl64 F_DUPFD_CLOEXEC >= 210", fcntl64(fd, F_DUPFD_CLOEXEC, 210));
	CALL("read through F_DUPFD copy", read(200, g_buf, 4096));
	show_sum(g_buf, 4096);
	show_pos(fd);
	end();
	SHOW("fcntl F_GETFD", fcntl(210, F_GETFD));
	SHOW("fcntl F_SETFD 0", fcntl(210, F_SETFD, 0));
	SHOW("fcntl64 F_GETFD", fcntl64(210, F_GETFD));
	SHOW("fcntl F_SETLK read lock", fcntl(fd, F_SETLK, &fl));
	fl.l_type = F_WRLCK;
	SHOW("fcntl64 F_GETLK", fcntl64(fd, F_GETLK, &fl));
	SHOW("fcntl F_SETLK write lock on O_RDONLY", fcntl(fd, F_SETLK, &fl));
	SHOW("fcntl bad command", fcntl(fd, 999999));
	SHOW("fcntl64 bad fd", fcntl64(-1, F_GETFL));
	SHOW("fcntl F_DUPFD negative", fcntl(fd, F_DUPFD, -1));
	close(200);
	close(210);
	close(fd);

	/* O_APPEND switched on and off with F_SETFL on a written file. */
	mk("d2", 10000, 4);
	fd = seq("d2", O_WRONLY);
	SHOW("fcntl F_SETFL O_APPEND", fcntl(fd, F_SETFL, O_APPEND));
	CALL("write after F_SETFL O_APPEND", write(fd, "tail", 4));
	show_pos(fd);
	show_file("d2");
	end();
	SHOW("fcntl64 F_SETFL 0", fcntl64(fd, F_SETFL, 0));
	lseek(fd, 0, SEEK_SET);
	CALL("write after F_SETFL 0", write(fd, "head", 4));
	show_pos(fd);
	show_file("d2");
	end();
	close(fd);

	/* close_range over descriptors the read path follows. */
	for (int i = 0; i < 4; i++)
		dup2(openf("src", O_RDONLY), 300 + i);
	read(301, g_buf, MIB);
	SHOW("close_range CLOEXEC", close_range(300, 301, CLOSE_RANGE_CLOEXEC));
	SHOW("  F_GETFD after", fcntl(300, F_GETFD));
	SHOW("close_range 300..302", close_range(300, 302, 0));
	SHOW("  fcntl on closed", fcntl(301, F_GETFD));
	SHOW("  fcntl on kept", fcntl(303, F_GETFD) >= 0);
	SHOW("close_range last < first", close_range(310, 300, 0));
	SHOW("close_range bad flags", close_range(300, 310, 0x40000000));
	SHOW("close_range nothing open", close_range(500, 600, 0));
	close(303);
}

/* ---------------------------------------------------------------------- */
/* stdio */

static void case_stdio(void)
{
	FILE *f = fopen("src", "re");
	long total = 0;
	size_t n;
	uint64_t h = FNV0;
	int p[2];

	if (!f)
		exit(2);
	posix_fadvise(fileno(f), 0, 0, POSIX_FADV_SEQUENTIAL);
	CALL("fread 1000 x 3", fread(g_buf, 1000, 3, f));
	show_sum(g_buf, 3000);
	end();
	CALL("fread_unlocked 4096 x 1", fread_unlocked(g_buf, 4096, 1, f));
	show_sum(g_buf, 4096);
	end();
	while ((n = fread(g_buf, 1, MIB, f)) > 0) {
		h = fnv(h, g_buf, n);
		total += (long)n;
	}
	printf("%-40s total=%ld sum=%016llx eof=%d error=%d", "fread to EOF", total,
	       (unsigned long long)h, feof(f), ferror(f));
	end();
	SHOW("fread at EOF", fread(g_buf, 1, 100, f));
	SHOW("fread size 0", fread(g_buf, 0, 100, f));
	rewind(f);
	fseek(f, SRC_SIZE - 10, SEEK_SET);
	CALL("fread short at EOF", fread(g_buf, 4, 10, f));
	show_sum(g_buf, 8);
	end();
	SHOW("fclose", fclose(f));

	f = fopen("src", "re");
	fread(g_buf, 1, 10, f);
	close(fileno(f));
	SHOW("fread after its fd was closed", fread(g_buf, 1, 2 * MIB, f));
	SHOW("fclose after its fd was closed", fclose(f));

	mk("f1", 0, 0);
	f = fopen("f1", "we");
	SHOW("fread from a write-only FILE", fread(g_buf, 1, 10, f));
	SHOW("  ferror", ferror(f) != 0);
	fputs("buffered", f);
	SHOW("fclose flushes", fclose(f));
	printf("%-40s", "  after fclose");
	show_file("f1");
	end();

	mkpipe(p, 0);
	syscall(SYS_write, p[1], "0123456789", 10);
	close(p[1]);
	f = fdopen(p[0], "r");
	CALL("fread pipe short", fread(g_buf, 1, 4096, f));
	show_sum(g_buf, 10);
	end();
	SHOW("fclose pipe", fclose(f));

	/* fwrite: a stream of 1 MiB blocks past the write-behind allowance
	 * (and chunk boundaries), small ones, and the error cases. */
	f = fopen("w1", "we");
	if (!f)
		exit(2);
	posix_fadvise(fileno(f), 0, 0, POSIX_FADV_NOREUSE);
	for (int i = 0; i < (int)sizeof(g_buf); i++)
		g_buf[i] = (unsigned char)(i * 7 + 3);
	total = 0;
	for (int i = 0; i < 24; i++)
		total += (long)fwrite(g_buf, 1, MIB, f);
	printf("%-40s total=%ld pos=%ld error=%d", "fwrite 24 x 1 MiB", total, ftell(f), ferror(f));
	end();
	SHOW("fwrite 3 x 1000", fwrite(g_buf, 1000, 3, f));
	SHOW("fwrite_unlocked 4096 x 1", fwrite_unlocked(g_buf, 4096, 1, f));
	SHOW("fwrite size 0", fwrite(g_buf, 0, 100, f));
	SHOW("fwrite count 0", fwrite(g_buf, 100, 0, f));
	SHOW("fclose", fclose(f));
	printf("%-40s", "  after fclose");
	show_file("w1");
	end();

	f = fopen("w1", "ae");
	SHOW("fwrite append", fwrite(g_buf, 1, 5000, f));
	SHOW("fclose append", fclose(f));
	printf("%-40s", "  after fclose");
	show_file("w1");
	end();

	f = fopen("src", "re");
	SHOW("fwrite to a read-only FILE", fwrite(g_buf, 1, 10, f));
	SHOW("  ferror", ferror(f) != 0);
	SHOW("fclose read-only", fclose(f));

	f = fopen("w2", "we");
	setvbuf(f, NULL, _IONBF, 0);
	close(fileno(f));
	SHOW("fwrite after its fd was closed", fwrite(g_buf, 1, 100, f));
	SHOW("fclose after its fd was closed", fclose(f));

	/* getline / getdelim: a managed stream of lines to EOF, then EOF. */
	{
		char *ln = NULL;
		size_t cap = 0;
		ssize_t got;
		long lines = 0;

		f = fopen("src", "re");
		posix_fadvise(fileno(f), 0, 0, POSIX_FADV_SEQUENTIAL);
		h = FNV0;
		total = 0;
		while ((got = getline(&ln, &cap, f)) > 0) {
			h = fnv(h, ln, (size_t)got);
			total += got;
			lines++;
		}
		printf("%-40s total=%ld lines=%ld sum=%016llx eof=%d", "getline to EOF", total, lines,
		       (unsigned long long)h, feof(f));
		end();
		SHOW("getline at EOF", getline(&ln, &cap, f));
		rewind(f);
		CALL("getdelim 0xff", getdelim(&ln, &cap, 0xff, f));
		show_sum(ln, 16);
		end();
		SHOW("getdelim NULL size", getdelim(&ln, NULL, '\n', f));
		SHOW("fclose lines", fclose(f));
		free(ln);
	}

	mkpipe(p, 0);
	f = fdopen(p[1], "w");
	SHOW("fwrite pipe", fwrite(g_buf, 1, 1000, f));
	SHOW("fclose pipe (write end)", fclose(f));
	CALL("read what the pipe got", syscall(SYS_read, p[0], g_buf + MIB, 4096));
	show_sum(g_buf + MIB, 1000);
	end();
	close(p[0]);
}

/* ---------------------------------------------------------------------- */
/* Mappings */

static uint64_t touch(const volatile unsigned char *p, long from, long to)
{
	uint64_t h = FNV0;

	for (long off = from; off < to; off += PG) {
		unsigned char b[2] = { p[off], p[off + PG - 1] };

		h = fnv(h, b, 2);
	}
	return h;
}

static void case_mmap(void)
{
	int fd = openf("src", O_RDONLY), p[2], w;
	unsigned char *m, *q, *res;

	m = mmap(NULL, SRC_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	printf("%-40s failed=%d", "mmap shared 24M", m == MAP_FAILED);
	end();
	SHOW("madvise SEQUENTIAL", madvise(m, SRC_SIZE, MADV_SEQUENTIAL));
	printf("%-40s sum=%016llx", "  touch all", (unsigned long long)touch(m, 0, SRC_SIZE));
	end();
	SHOW("madvise unaligned start", madvise(m + 1, PG, MADV_SEQUENTIAL));
	SHOW("madvise unaligned length", madvise(m, PG + 1, MADV_SEQUENTIAL));
	SHOW("madvise zero length", madvise(m, 0, MADV_SEQUENTIAL));
	SHOW("madvise bad advice", madvise(m, PG, 12345));
	SHOW("madvise WILLNEED", madvise(m, MIB, MADV_WILLNEED));
	SHOW("madvise COLD", madvise(m + MIB, MIB, MADV_COLD));
	SHOW("madvise huge length", madvise(m, (size_t)-PG, MADV_SEQUENTIAL));
	SHOW("madvise unmapped (ENOMEM)", madvise((void *)PG, PG, MADV_SEQUENTIAL));
	SHOW("posix_madvise SEQUENTIAL", posix_madvise(m, SRC_SIZE, POSIX_MADV_SEQUENTIAL));
	SHOW("posix_madvise bad advice", posix_madvise(m, PG, 12345));
	SHOW("posix_madvise unaligned", posix_madvise(m + 3, PG, POSIX_MADV_NORMAL));
	SHOW("posix_madvise DONTNEED", posix_madvise(m, PG, POSIX_MADV_DONTNEED));
	SHOW("munmap unaligned", munmap(m + 1, PG));
	SHOW("munmap zero length", munmap(m, 0));
	SHOW("munmap a hole 8M..12M", munmap(m + 8 * MIB, 4 * MIB));
	printf("%-40s sum=%016llx", "  touch around the hole",
	       (unsigned long long)(touch(m, 0, 8 * MIB) ^ touch(m, 12 * MIB, SRC_SIZE)));
	end();
	SHOW("munmap the rest, unaligned length", munmap(m, 8 * MIB - 100));
	SHOW("munmap the tail", munmap(m + 12 * MIB, 12 * MIB));

	/* MAP_FIXED over the middle of a tracked, streamed range. */
	mk("m1", 16 * MIB, 11);
	w = openf("m1", O_RDONLY);
	m = mmap(NULL, 16 * MIB, PROT_READ, MAP_SHARED, fd, 0);
	madvise(m, 16 * MIB, MADV_SEQUENTIAL);
	touch(m, 0, 6 * MIB);
	q = mmap64(m + 4 * MIB, 4 * MIB, PROT_READ, MAP_SHARED | MAP_FIXED, w, 8 * MIB);
	printf("%-40s same=%d", "mmap64 MAP_FIXED over tracked", q == m + 4 * MIB);
	end();
	SHOW("  madvise SEQUENTIAL over both", madvise(m, 16 * MIB, MADV_SEQUENTIAL));
	printf("%-40s sum=%016llx", "  touch all", (unsigned long long)touch(m, 0, 16 * MIB));
	end();
	SHOW("  munmap", munmap(m, 16 * MIB));

	/* mremap: grow (may move), shrink, move to a fixed address. */
	m = mmap(NULL, 8 * MIB, PROT_READ, MAP_SHARED, fd, 0);
	madvise(m, 8 * MIB, MADV_SEQUENTIAL);
	touch(m, 0, 8 * MIB);
	q = mremap(m, 8 * MIB, 16 * MIB, MREMAP_MAYMOVE);
	printf("%-40s failed=%d sum=%016llx", "mremap grow 8M -> 16M", q == MAP_FAILED,
	       (unsigned long long)touch(q, 0, 16 * MIB));
	end();
	m = mremap(q, 16 * MIB, 4 * MIB, 0);
	printf("%-40s same=%d sum=%016llx", "mremap shrink 16M -> 4M", m == q,
	       (unsigned long long)touch(m, 0, 4 * MIB));
	end();
	res = mmap(NULL, 32 * MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	q = mremap(m, 4 * MIB, 4 * MIB, MREMAP_MAYMOVE | MREMAP_FIXED, res + 8 * MIB);
	printf("%-40s at_target=%d sum=%016llx", "mremap move to a fixed address", q == res + 8 * MIB,
	       (unsigned long long)touch(q, 0, 4 * MIB));
	end();
	errno = SENTINEL;
	m = mremap(q + 1, PG, 2 * PG, MREMAP_MAYMOVE);
	printf("%-40s failed=%d errno=%d", "mremap unaligned", m == MAP_FAILED, errno);
	end();
	errno = SENTINEL;
	m = mremap(q, PG, 2 * PG, MREMAP_FIXED);
	printf("%-40s failed=%d errno=%d", "mremap FIXED without MAYMOVE", m == MAP_FAILED, errno);
	end();
	errno = SENTINEL;
	m = mremap((void *)PG, PG, 2 * PG, MREMAP_MAYMOVE);
	printf("%-40s failed=%d errno=%d", "mremap unmapped", m == MAP_FAILED, errno);
	end();
	SHOW("munmap the reservation", munmap(res, 32 * MIB));

	/* Calls the kernel refuses. */
	errno = SENTINEL;
	m = mmap(NULL, PG, PROT_READ, MAP_SHARED, -1, 0);
	printf("%-40s failed=%d errno=%d", "mmap bad fd", m == MAP_FAILED, errno);
	end();
	errno = SENTINEL;
	m = mmap(NULL, 0, PROT_READ, MAP_SHARED, fd, 0);
	printf("%-40s failed=%d errno=%d", "mmap zero length", m == MAP_FAILED, errno);
	end();
	errno = SENTINEL;
	m = mmap64(NULL, PG, PROT_READ, MAP_SHARED, fd, 1);
	printf("%-40s failed=%d errno=%d", "mmap64 unaligned offset", m == MAP_FAILED, errno);
	end();
	errno = SENTINEL;
	m = mmap(NULL, PG, PROT_READ, MAP_SHARED, fd, -PG);
	printf("%-40s failed=%d errno=%d", "mmap negative offset", m == MAP_FAILED, errno);
	end();
	errno = SENTINEL;
	m = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	printf("%-40s failed=%d errno=%d", "mmap shared writable on O_RDONLY", m == MAP_FAILED, errno);
	end();
	errno = SENTINEL;
	m = mmap(NULL, PG, PROT_READ, MAP_SHARED | MAP_PRIVATE, fd, 0);
	printf("%-40s failed=%d errno=%d", "mmap SHARED|PRIVATE", m == MAP_FAILED, errno);
	end();
	mkpipe(p, 0);
	errno = SENTINEL;
	m = mmap(NULL, PG, PROT_READ, MAP_SHARED, p[0], 0);
	printf("%-40s failed=%d errno=%d", "mmap a pipe", m == MAP_FAILED, errno);
	end();
	close(p[0]);
	close(p[1]);
	errno = SENTINEL;
	m = mmap(NULL, 64 * MIB, PROT_READ, MAP_SHARED, fd, 0);
	printf("%-40s failed=%d errno=%d", "mmap past EOF", m == MAP_FAILED, errno);
	end();
	munmap(m, 64 * MIB);
	close(w);
	close(fd);
}

static void case_private_writes(void)
{
	int fd = openf("src", O_RDONLY);
	unsigned char *m = mmap(NULL, 16 * MIB, PROT_READ, MAP_PRIVATE, fd, 0);
	uint64_t h;

	printf("%-40s failed=%d", "mmap private 16M", m == MAP_FAILED);
	end();
	SHOW("madvise SEQUENTIAL", madvise(m, 16 * MIB, MADV_SEQUENTIAL));
	touch(m, 0, 8 * MIB);
	/* Made writable behind the cursor, written, streamed on: the writes
	 * stay (the kernel keeps copy-on-write pages of a private mapping). */
	SHOW("mprotect RW behind the cursor", mprotect(m, 2 * MIB, PROT_READ | PROT_WRITE));
	for (long off = 0; off < 2 * MIB; off += PG)
		m[off + 17] = (unsigned char)(off / PG + 1);
	SHOW("pkey_mprotect RW, pkey -1", pkey_mprotect(m + 2 * MIB, MIB, PROT_READ | PROT_WRITE, -1));
	m[2 * MIB + 5] = 0xee;
	touch(m, 8 * MIB, 16 * MIB);
	touch(m, 0, 16 * MIB);
	h = touch(m, 0, 16 * MIB);
	for (long off = 0; off < 2 * MIB; off += PG)
		h = fnv(h, &m[off + 17], 1);
	printf("%-40s sum=%016llx marker=%d", "  after streaming on", (unsigned long long)h,
	       m[2 * MIB + 5]);
	end();
	SHOW("madvise DONTNEED private (writes undone)", madvise(m, PG, MADV_DONTNEED));
	printf("%-40s byte=%d", "  first page", m[17]);
	end();
	SHOW("mprotect unaligned", mprotect(m + 1, PG, PROT_READ));
	SHOW("mprotect bad prot", mprotect(m, PG, 0x100));
	SHOW("mprotect unmapped (ENOMEM)", mprotect((void *)PG, PG, PROT_READ));
	SHOW("pkey_mprotect unallocated key", pkey_mprotect(m, PG, PROT_READ, 15));
	SHOW("mprotect PROT_NONE", mprotect(m + 4 * MIB, MIB, PROT_NONE));
	SHOW("munmap", munmap(m, 16 * MIB));
	m = mmap(NULL, PG, PROT_READ, MAP_SHARED, fd, 0);
	SHOW("mprotect shared writable on O_RDONLY", mprotect(m, PG, PROT_READ | PROT_WRITE));
	SHOW("pkey_mprotect shared writable on O_RDONLY", pkey_mprotect(m, PG, PROT_WRITE, -1));
	munmap(m, PG);
	close(fd);
}

/* ---------------------------------------------------------------------- */
/* A file description shared across fork */

static void case_fork(void)
{
	int fd = seq("src", O_RDONLY), r[2];
	uint64_t h = FNV0, ch = 0;
	long n = 0;
	pid_t pid;
	int st = -1;

	read(fd, g_buf, MIB);
	mkpipe(r, 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		long got;

		for (long i = 0; i < 64; i++) {
			got = read(fd, g_buf, 65536);
			if (got <= 0)
				break;
			h = fnv(h, g_buf, (size_t)got);
			n += got;
		}
		if (syscall(SYS_write, r[1], &n, sizeof(n)) < 0 ||
		    syscall(SYS_write, r[1], &h, sizeof(h)) < 0)
			_exit(1);
		_exit(0);
	}
	waitpid(pid, &st, 0);
	if (syscall(SYS_read, r[0], &n, sizeof(n)) != sizeof(n) ||
	    syscall(SYS_read, r[0], &ch, sizeof(ch)) != sizeof(ch))
		n = -1;
	printf("%-40s status=%d read=%ld sum=%016llx", "fork: the child reads 4M", st, n,
	       (unsigned long long)ch);
	show_pos(fd);
	end();
	CALL("  then the parent reads on", read(fd, g_buf, 4 * MIB));
	show_sum(g_buf, 4 * MIB);
	show_pos(fd);
	end();
	close(r[0]);
	close(r[1]);
	close(fd);
}

/* ---------------------------------------------------------------------- */

static const struct {
	const char *name;
	void (*run)(void);
} cases[] = {
	{ "read", case_read },
	{ "pread", case_pread },
	{ "readv", case_readv },
	{ "write", case_write },
	{ "pwrite", case_pwrite },
	{ "fadvise", case_fadvise },
	{ "sendfile", case_sendfile },
	{ "copy_file_range", case_copy_file_range },
	{ "bad-offsets", case_bad_offsets },
	{ "fds", case_fds },
	{ "stdio", case_stdio },
	{ "mmap", case_mmap },
	{ "private-writes", case_private_writes },
	{ "fork", case_fork },
};

int main(int argc, char **argv)
{
	int ran = 0;

	if (argc < 2 || chdir(argv[1]) < 0) {
		fprintf(stderr, "usage: equiv DIR [CASE]\n");
		return 2;
	}
	if (argc == 2) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	/* (The runner may link one in: the same bytes.) */
	if (access("src", F_OK) != 0)
		mk("src", SRC_SIZE, 1);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (strcmp(argv[2], cases[i].name))
			continue;
		printf("== %s\n", cases[i].name);
		fflush(stdout);
		cases[i].run();
		ran = 1;
	}
	printf("== %s\n", ran ? "done" : "no such case");
	return ran ? 0 : 2;
}

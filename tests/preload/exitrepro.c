/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Ends a process with _exit() while the shim tracks a streamed mapping.
 *
 *   exitrepro map FILE     maps 32 MiB of FILE MAP_SHARED, advises
 *                          MADV_SEQUENTIAL, touches every page, _exit(0)
 *   exitrepro signal FILE  maps, advises, touches and unmaps in a loop; a
 *                          SIGALRM handler calls _exit(0) in the middle of it
 *   exitrepro thread-signal FILE
 *                          the main thread reads FILE through read() in a
 *                          loop, opening and closing it (the read path
 *                          retires an fd state per close, and waits for a
 *                          grace period every 32); a second thread, which
 *                          never calls the shim, takes SIGALRM and its
 *                          handler calls _exit(0)
 *   exitrepro vfork FILE   maps and streams, then a vfork child calls
 *                          _exit(0); the parent goes on streaming, unmaps,
 *                          maps again and ends with _exit(0)
 *
 * Before its last _exit the program prints "exit_at NS" (CLOCK_MONOTONIC):
 * the test measures how long the process takes to end from there.  Exit
 * status 0: all went as the kernel says; 2: a call failed; 3: the data read
 * after the vfork child ended differs.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LEN (32UL << 20)
#define PG 4096UL

static int g_fd;

static void say_exit_at(void)
{
	struct timespec ts;
	char buf[64];
	int n;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	n = snprintf(buf, sizeof(buf), "exit_at %lld\n",
		     (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
	/* A raw system call: the measurement must not be the program's first
	 * write() through the shim, which would change what happens at exit
	 * (and this runs in a signal handler too). */
	if (syscall(SYS_write, STDOUT_FILENO, buf, (size_t)n) != n)
		_exit(2);
}

static unsigned char *map_stream(void)
{
	unsigned char *p = mmap(NULL, LEN, PROT_READ, MAP_SHARED, g_fd, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		_exit(2);
	}
	if (madvise(p, LEN, MADV_SEQUENTIAL) < 0) {
		perror("madvise");
		_exit(2);
	}
	return p;
}

static uint64_t touch(const volatile unsigned char *p, size_t from, size_t to)
{
	uint64_t sum = 0;

	for (size_t off = from; off < to; off += PG)
		sum = sum * 31 + p[off] + p[off + PG - 1];
	return sum;
}

static void on_alarm(int sig)
{
	(void)sig;
	say_exit_at();
	_exit(0);
}

static int run_signal(void)
{
	struct sigaction sa;
	struct itimerval it = { { 0, 0 }, { 0, 200 * 1000 } };

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	if (sigaction(SIGALRM, &sa, NULL) < 0 || setitimer(ITIMER_REAL, &it, NULL) < 0)
		return 2;
	/* Mostly inside the shim's mmap, madvise and munmap wrappers: a
	 * munmap of a tracked region takes the region table's lock. */
	for (;;) {
		unsigned char *p = map_stream();
		touch(p, 0, 2 * PG);
		for (size_t off = 0; off < LEN; off += LEN / 8)
			if (munmap(p + off, LEN / 8) < 0)
				return 2;
	}
}

/* The thread that takes SIGALRM: it waits, with no call into the shim. */
static void *alarm_taker(void *arg)
{
	(void)arg;
	for (;;)
		syscall(SYS_pause);
	return NULL;
}

static int run_thread_signal(const char *path)
{
	struct sigaction sa;
	struct itimerval it = { { 0, 0 }, { 0, 200 * 1000 } };
	static char buf[1 << 16];
	sigset_t alrm;
	pthread_t t;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	/* Created before the main thread blocks SIGALRM: the new thread
	 * inherits an empty mask and is the only one to take it. */
	if (sigaction(SIGALRM, &sa, NULL) < 0 || pthread_create(&t, NULL, alarm_taker, NULL) != 0 ||
	    pthread_sigmask(SIG_BLOCK, &alrm, NULL) != 0 || setitimer(ITIMER_REAL, &it, NULL) < 0)
		return 2;
	for (;;) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n;

		if (fd < 0)
			return 2;
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			;
		if (n < 0 || close(fd) < 0)
			return 2;
	}
}

/* Its own function, so that no local of the caller lives across vfork(). */
static __attribute__((noinline)) int vfork_child_exits(void)
{
	int st;
	pid_t pid = vfork();

	if (pid < 0)
		return -1;
	if (pid == 0)
		_exit(0); /* the parent's engine state is shared: hands off */
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -1;
	return 0;
}

static int run_vfork(void)
{
	unsigned char *p = map_stream();
	uint64_t before = touch(p, 0, LEN), after;

	if (vfork_child_exits() < 0)
		return 2;
	/* The parent's mapping and its tracking are as they were. */
	after = touch(p, 0, LEN);
	if (munmap(p, LEN) < 0)
		return 2;
	p = map_stream();
	if (touch(p, 0, LEN) != before || after != before) {
		fprintf(stderr, "data differ after the vfork child ended\n");
		return 3;
	}
	if (munmap(p, LEN) < 0)
		return 2;
	p = map_stream();
	touch(p, 0, LEN / 2);
	return 0;
}

int main(int argc, char **argv)
{
	int rc = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: exitrepro map|signal|thread-signal|vfork FILE\n");
		return 2;
	}
	g_fd = open(argv[2], O_RDONLY | O_CLOEXEC);
	if (g_fd < 0) {
		perror(argv[2]);
		return 2;
	}
	if (!strcmp(argv[1], "map")) {
		touch(map_stream(), 0, LEN);
	} else if (!strcmp(argv[1], "signal")) {
		rc = run_signal();
	} else if (!strcmp(argv[1], "thread-signal")) {
		rc = run_thread_signal(argv[2]);
	} else if (!strcmp(argv[1], "vfork")) {
		rc = run_vfork();
	} else {
		return 2;
	}
	if (rc)
		_exit(rc);
	say_exit_at();
	_exit(0);
}

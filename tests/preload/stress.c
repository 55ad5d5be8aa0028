/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Many threads map, advise, read, remap and unmap one file while the shim's
 * engine runs; the main thread forks (children that exit() through the
 * destructors), vforks and execs.  Every word read is checked against the
 * file's known content.  Exits 0 if nothing was ever wrong.
 *   stress FILE SECONDS
 * With STRESS_CHILD_EXIT_ONLY=1 forked children only exit: AddressSanitizer
 * (GCC 12) can deadlock a child that allocates after a threaded fork, with
 * or without the shim, so the sanitizer run keeps fork but not the child's
 * work.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define M (1UL << 20)
#define SIZE (64 * M)
#define THREADS 8

extern char **environ;
static int fd;
static volatile int stop;
static long errors, ops;

static uint64_t word_at(uint64_t off)
{
	return (off / 8 + 1) * 0x9e3779b97f4a7c15ULL;
}

static void make_file(const char *path)
{
	uint64_t *buf = malloc(M);

	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || !buf) {
		perror(path);
		exit(2);
	}
	for (uint64_t o = 0; o < SIZE; o += M) {
		for (size_t i = 0; i < M / 8; i++)
			buf[i] = word_at(o + i * 8);
		if (write(fd, buf, M) != (ssize_t)M)
			exit(2);
	}
	free(buf);
	/* Not cached: the engine has pages to drop. */
	fsync(fd);
	posix_fadvise(fd, 0, SIZE, POSIX_FADV_DONTNEED);
}

static void bad(const char *what)
{
	__atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
	fprintf(stderr, "stress: %s (errno %d)\n", what, errno);
}

/* Reads [from, to) of a mapping of the file at file offset base. */
static void verify(const unsigned char *p, uint64_t base, uint64_t from, uint64_t to)
{
	for (uint64_t o = from; o + 8 <= to; o += 4096) {
		uint64_t w;

		memcpy(&w, p + o, 8);
		if (w != word_at(base + o)) {
			bad("wrong data read through a mapping");
			return;
		}
	}
}

static void one_round(unsigned *seed)
{
	uint64_t len = (uint64_t)(rand_r(seed) % 24 + 8) * M;
	uint64_t off = (uint64_t)(rand_r(seed) % (int)((SIZE - len) / M + 1)) * M;
	int priv = rand_r(seed) & 1;
	unsigned char *p = mmap(NULL, len, PROT_READ | (priv ? PROT_WRITE : 0),
				priv ? MAP_PRIVATE : MAP_SHARED, fd, (off_t)off);

	if (p == MAP_FAILED) {
		bad("mmap");
		return;
	}
	if (madvise(p, len, MADV_SEQUENTIAL))
		bad("madvise(MADV_SEQUENTIAL)");
	verify(p, off, 0, len / 2);
	if (priv) /* copy-on-write data must never be dropped */
		memcpy(p + 4096, "cow!", 4);
	switch (rand_r(seed) % 5) {
	case 0: /* stop being sequential on part of it */
		if (madvise(p + len / 4, M, MADV_RANDOM))
			bad("madvise(MADV_RANDOM)");
		break;
	case 1: { /* unmap a hole in the middle */
		if (munmap(p + len / 2, 2 * M))
			bad("munmap (hole)");
		verify(p, off, len / 2 + 2 * M, len);
		if (munmap(p, len / 2) || munmap(p + len / 2 + 2 * M, len - len / 2 - 2 * M))
			bad("munmap (rest)");
		p = NULL;
		break;
	}
	case 2: { /* move and grow */
		unsigned char *q = mremap(p, len, len + 4 * M, MREMAP_MAYMOVE);

		if (q == MAP_FAILED) {
			bad("mremap");
			break;
		}
		p = q;
		len += 4 * M;
		if (off + len > SIZE)
			len = SIZE - off; /* only read what the file has */
		break;
	}
	case 3: { /* a new mapping over part of it */
		void *q = mmap(p + M, M, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (q == MAP_FAILED)
			bad("mmap(MAP_FIXED)");
		else if (((unsigned char *)q)[0] != 0)
			bad("fresh anonymous page not zero");
		verify(p, off, 2 * M, len);
		break;
	}
	default:
		verify(p, off, len / 2, len);
	}
	if (p) {
		if (priv && memcmp(p + 4096, "cow!", 4))
			bad("copy-on-write data lost");
		if (munmap(p, len))
			bad("munmap");
	}
	__atomic_add_fetch(&ops, 1, __ATOMIC_RELAXED);
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;

	while (!stop)
		one_round(&seed);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[THREADS];
	time_t end;
	static int forks; /* static: survives vfork */

	const char *e = getenv("STRESS_CHILD_EXIT_ONLY");
	int child_exit_only = e && *e == '1';

	if (argc != 3)
		return 2;
	make_file(argv[1]);
	end = time(NULL) + atoi(argv[2]);
	for (int i = 0; i < THREADS / 2; i++) /* threads started before... */
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	while (time(NULL) < end) {
		int st;
		pid_t pid = fork();

		if (pid == 0) { /* the child has its own state; exit() runs destructors */
			unsigned seed = 99;

			if (child_exit_only)
				_exit(0);
			for (int i = 0; i < 3; i++)
				one_round(&seed);
			exit(errors ? 3 : 0);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			bad("forked child failed");
		pid = vfork();
		if (pid == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			bad("vforked child failed");
		{
			char *args[] = { "true", NULL };

			if (posix_spawn(&pid, "/bin/true", NULL, NULL, args, environ) ||
			    waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
				bad("posix_spawn child failed");
		}
		if (++forks == 3) /* ...and after the engine runs */
			for (int i = THREADS / 2; i < THREADS; i++)
				pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
		usleep(20000);
	}
	stop = 1;
	for (int i = 0; i < (forks >= 3 ? THREADS : THREADS / 2); i++)
		pthread_join(th[i], NULL);
	printf("%ld rounds, %d forks, %ld errors\n", ops, forks, errors);
	unlink(argv[1]);
	return errors ? 1 : 0;
}

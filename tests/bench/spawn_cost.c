/* spawn_cost: what libmadvseq costs a process that never does anything the
 * library manages, as every process pays when the library is installed for
 * all programs (/etc/ld.so.preload).
 *
 * Times posix_spawn + waitpid of a short program (default /bin/true) with
 * each variant's LD_PRELOAD, the variants interleaved round by round so
 * that the machine's noise falls on all of them alike:
 *   plain       no LD_PRELOAD
 *   NAME=PATH   LD_PRELOAD=PATH (e.g. empty=libempty_preload.so, the cost
 *               of loading any library at all, and libmadvseq=...)
 * and prints, per variant, the median over the rounds of the mean spawn
 * time and of the child's own CPU time (user + system, from wait4), and
 * their differences from plain.
 *
 * With -p, each variant also runs this program itself in probe mode, which
 * reports, with raw system calls that no library sees, what the process
 * looks like at the end of main(): its threads, its open descriptors beyond
 * stdin/stdout/stderr, and its private dirty memory (smaps_rollup) -- the
 * library must start no thread, open nothing and dirty as few pages as it
 * can until it has work.
 *
 * Usage: spawn_cost [-n spawns] [-r rounds] [-p] [-c PROGRAM] NAME=PATH...
 * Output: one line per variant: the wall clock and the child CPU per spawn,
 * each with its difference from plain, [threads fds dirty_kB].
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_VARIANTS 8
#define MAX_ROUNDS 200

extern char **environ;

struct variant {
	const char *name;
	char env[4200]; /* "LD_PRELOAD=..." or "" for plain */
	double us[MAX_ROUNDS];     /* wall clock per spawn, one per round */
	double cpu_us[MAX_ROUNDS]; /* the child's own CPU time (user + system) per spawn */
	long threads, fds, dirty_kb;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "spawn_cost: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* The probe: what this process holds at the end of main().  Raw system
 * calls only, so that a preloaded library sees no call it wraps: the probe
 * must not wake what it measures. */
static long raw_read_file(const char *path, char *buf, size_t len)
{
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC), n, got = 0;

	if (fd < 0)
		return -1;
	while (got < (long)len - 1 && (n = syscall(SYS_read, fd, buf + got, len - 1 - (size_t)got)) > 0)
		got += n;
	syscall(SYS_close, fd);
	buf[got] = '\0';
	return got;
}

static long field(const char *text, const char *key)
{
	const char *p = strstr(text, key);

	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

static int probe(void)
{
	static char buf[1 << 16];
	char out[128];
	long threads, dirty, fds = 0, n;
	long dfd;

	if (raw_read_file("/proc/self/status", buf, sizeof(buf)) < 0)
		return 1;
	threads = field(buf, "Threads:");
	if (raw_read_file("/proc/self/smaps_rollup", buf, sizeof(buf)) < 0)
		return 1;
	dirty = field(buf, "Private_Dirty:");
	/* Descriptors beyond 0-2, other than the listing's own. */
	dfd = syscall(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return 1;
	while ((n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0)
		for (long off = 0; off < n;) {
			struct { uint64_t ino; int64_t off; unsigned short reclen; unsigned char type;
				 char name[]; } *e = (void *)(buf + off);

			if (e->name[0] != '.' && atol(e->name) > 2 && atol(e->name) != dfd)
				fds++;
			off += e->reclen;
		}
	syscall(SYS_close, dfd);
	n = snprintf(out, sizeof(out), "%ld %ld %ld\n", threads, fds, dirty);
	syscall(SYS_write, 1, out, (size_t)n);
	return 0;
}

static char **make_env(struct variant *v, char **store)
{
	store[0] = v->env[0] ? v->env : NULL;
	store[1] = NULL;
	return store;
}

/* Spawns prog and waits; returns the child's CPU time in microseconds. */
static double spawn_wait(const char *prog, char **argv, char **envp, int out_fd)
{
	posix_spawn_file_actions_t fa;
	struct rusage ru;
	pid_t pid;
	int st, rc;

	posix_spawn_file_actions_init(&fa);
	if (out_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
	rc = posix_spawn(&pid, prog, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		errno = rc;
		die(prog);
	}
	if (wait4(pid, &st, 0, &ru) != pid)
		die("wait4");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "spawn_cost: %s exited with status %#x\n", prog, st);
		exit(2);
	}
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec +
	       ru.ru_stime.tv_usec;
}

static void run_probe(struct variant *v, const char *self)
{
	char *envs[2], out[128] = "";
	char *argv[] = { (char *)self, (char *)"--probe", NULL };
	int p[2];
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe");
	spawn_wait(self, argv, make_env(v, envs), p[1]);
	close(p[1]);
	n = read(p[0], out, sizeof(out) - 1);
	close(p[0]);
	if (n <= 0 || sscanf(out, "%ld %ld %ld", &v->threads, &v->fds, &v->dirty_kb) != 3) {
		fprintf(stderr, "spawn_cost: probe under %s printed '%s'\n", v->name, out);
		exit(2);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const double *v, int n, double *min)
{
	double s[MAX_ROUNDS];

	memcpy(s, v, sizeof(double) * (size_t)n);
	qsort(s, (size_t)n, sizeof(double), cmp_double);
	*min = s[0];
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	struct variant v[MAX_VARIANTS] = { { .name = "plain" } };
	const char *prog = "/bin/true";
	char self[4096];
	int nv = 1, spawns = 500, rounds = 15, opt;
	bool with_probe = false;
	double plain_med = 0, plain_cpu = 0;

	if (argc == 2 && !strcmp(argv[1], "--probe"))
		return probe();
	while ((opt = getopt(argc, argv, "n:r:pc:")) != -1) {
		switch (opt) {
		case 'n': spawns = atoi(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 'p': with_probe = true; break;
		case 'c': prog = optarg; break;
		default:
			fprintf(stderr, "usage: spawn_cost [-n spawns] [-r rounds] [-p] [-c PROGRAM] NAME=PATH...\n");
			return 2;
		}
	}
	if (spawns < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "spawn_cost: -n >= 1 and 1 <= -r <= %d\n", MAX_ROUNDS);
		return 2;
	}
	for (; optind < argc && nv < MAX_VARIANTS; optind++, nv++) {
		char *eq = strchr(argv[optind], '=');

		if (!eq || eq == argv[optind] || access(eq + 1, R_OK) < 0) {
			fprintf(stderr, "spawn_cost: '%s' is not NAME=READABLE_PATH\n", argv[optind]);
			return 2;
		}
		*eq = '\0';
		v[nv].name = argv[optind];
		snprintf(v[nv].env, sizeof(v[nv].env), "LD_PRELOAD=%s", eq + 1);
	}
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n < 0)
		die("/proc/self/exe");
	self[n] = '\0';
	for (int r = 0; r < rounds; r++)
		/* Each round starts with another variant: none is always first. */
		for (int k = 0; k < nv; k++) {
			struct variant *x = &v[(r + k) % nv];
			char *envs[2], *pargv[] = { (char *)prog, NULL };
			uint64_t t0 = now_ns();
			double cpu = 0;

			for (int i = 0; i < spawns; i++)
				cpu += spawn_wait(prog, pargv, make_env(x, envs), -1);
			x->us[r] = (double)(now_ns() - t0) / spawns / 1000.0;
			x->cpu_us[r] = cpu / spawns;
		}
	for (int k = 0; k < nv; k++) {
		double min, cmin, med = median(v[k].us, rounds, &min), cpu = median(v[k].cpu_us, rounds, &cmin);

		if (k == 0) {
			plain_med = med;
			plain_cpu = cpu;
		}
		if (with_probe)
			run_probe(&v[k], self);
		printf("%-12s wall median %7.1f us (min %7.1f) %+7.1f over plain;  child CPU %6.1f us %+6.1f",
		       v[k].name, med, min, med - plain_med, cpu, cpu - plain_cpu);
		if (with_probe)
			printf("  threads %ld  fds %ld  private_dirty %ld kB", v[k].threads, v[k].fds,
			       v[k].dirty_kb);
		printf("\n");
	}
	printf("(%d rounds of %d spawns of %s each, variants interleaved; medians over the rounds;\n"
	       " child CPU: the spawned process's own user + system time, which a loaded machine moves\n"
	       " far less than the wall clock)\n", rounds, spawns, prog);
	return 0;
}

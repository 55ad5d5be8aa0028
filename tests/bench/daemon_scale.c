/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * madvseqd at scale: PROCS processes each register REGIONS regions (the
 * protocol a shim speaks), then the daemon's management cycle time and
 * resident memory are sampled from its status for SECONDS.
 *
 *   daemon_scale MADVSEQD DIR [PROCS [REGIONS [SECONDS]]]
 *   daemon_scale --cpu MADVSEQD DIR STREAMER [LIBMADVSEQ]
 *
 * --cpu: the daemon's own CPU time per GB/s streamed.  STREAMER (a
 * tests/daemon streamer) reads DIR/cpu.dat (2 GiB, evicted first) once,
 * under LIBMADVSEQ (the daemon does the work for the shim) or, without
 * it, found by discovery; the daemon's CPU time over the stream (schedstat) is
 * divided by the stream's GB/s.
 *
 * Every process maps one DIR/scale.dat REGIONS times (8 MiB each, all
 * pages present, so each cycle finds readers and plans, as for a stream
 * that is not moving), and registers each mapping.  Prints the figures
 * and exits 0; 77 if it cannot run here (not root).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <madvseq/protocol.h>

#include "../daemon/status_request.h"

#define REGION (8u << 20)

static char g_sock[108];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int conn(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	strcpy(sa.sun_path, g_sock);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	return fd;
}

static char *daemon_status(void)
{
	return msq_test_status(conn(), 10000);
}

static void child(const char *file, int regions, int ready)
{
	struct msq_msg_hello h = { .flags = MSQ_HELLO_SHIM };
	struct stat st;
	char buf[256];
	int fd = open(file, O_RDONLY | O_CLOEXEC), s;

	if (fd < 0 || fstat(fd, &st) < 0 || (s = conn()) < 0) {
		fprintf(stderr, "daemon_scale: pid %d: cannot connect: %s\n", (int)getpid(), strerror(errno));
		_exit(1);
	}
	if (msq_client_send(s, &h, MSQ_MSG_HELLO, sizeof(h), 1) < 0 || recv(s, buf, sizeof(buf), 0) <= 0) {
		fprintf(stderr, "daemon_scale: pid %d: no welcome\n", (int)getpid());
		_exit(1);
	}
	for (int i = 0; i < regions; i++) {
		void *p = mmap(NULL, REGION, PROT_READ, MAP_SHARED | MAP_POPULATE, fd,
			       (off_t)i * REGION);
		struct msq_msg_register r = {
			.id = (uint64_t)i + 1, .start = (uintptr_t)p, .length = REGION,
			.dev = st.st_dev, .ino = st.st_ino, .offset = (uint64_t)i * REGION,
			.flags = MSQ_REGION_SHARED,
		};
		struct msq_msg_result res = { 0 };

		if (p == MAP_FAILED || madvise(p, REGION, MADV_SEQUENTIAL) < 0)
			_exit(1);
		if (msq_client_send(s, &r, MSQ_MSG_REGISTER, sizeof(r), (uint32_t)i + 2) < 0 ||
		    recv(s, &res, sizeof(res), 0) != sizeof(res) || res.status != 0) {
			fprintf(stderr, "daemon_scale: pid %d: region %d not registered: %s\n",
				(int)getpid(), i, res.status ? strerror(-res.status) : strerror(errno));
			_exit(2);
		}
	}
	if (write(ready, "r", 1) != 1)
		_exit(1);
	pause();
	_exit(0);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double g_utime, g_stime;

static double proc_cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	g_utime = (double)ut / (double)sysconf(_SC_CLK_TCK);
	g_stime = (double)st / (double)sysconf(_SC_CLK_TCK);
	/* The total from schedstat: nanoseconds on a CPU, where utime and
	 * stime are 10 ms ticks (the daemon is one thread). */
	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = '\0';
			return (double)strtoull(buf, NULL, 10) / 1e9;
		}
	}
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* N from "cycles: N, ..." in a status. */
static long long status_cycles(const char *st)
{
	const char *p = st ? strstr(st, "cycles: ") : NULL;

	return p ? strtoll(p + 8, NULL, 10) : -1;
}

/* Seconds from "... (X s of it inside process_madvise ..." in a status. */
static double advice_cpu_s(const char *st)
{
	const char *p = st ? strstr(st, " s of it inside process_madvise") : NULL;

	while (p && p > st && p[-1] != '(')
		p--;
	return p ? strtod(p, NULL) : -1;
}

static int cpu_mode(const char *madvseqd, const char *dir, const char *streamer, const char *lib)
{
	const uint64_t size = UINT64_C(2) << 30;
	char file[4096], conf[4096], log[4096];
	double c0, c1, t0, t1, gbps, a0, a1;
	long long n0, n1;
	char *st;
	pid_t daemon, s;
	int fd, status;

	snprintf(file, sizeof(file), "%s/cpu.dat", dir);
	snprintf(conf, sizeof(conf), "%s/cpu.conf", dir);
	snprintf(log, sizeof(log), "%s/cpu-daemon.log", dir);
	snprintf(g_sock, sizeof(g_sock), "%s/cpu.sock", dir);
	fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return 1;
	{
		struct stat sb;

		if (fstat(fd, &sb) == 0 && (uint64_t)sb.st_size < size) {
			char *blk = malloc(1 << 20);

			for (int i = 0; i < 1 << 20; i++)
				blk[i] = (char)(rand() >> 7);
			for (uint64_t i = 0; i < size >> 20; i++)
				if (write(fd, blk, 1 << 20) != 1 << 20)
					return 1;
			free(blk);
		}
		fsync(fd);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
	{
		FILE *f = fopen(conf, "w");

		if (!f)
			return 1;
		/* Only this cgroup (the streamer's): discovery must not reach
		 * other programs of the machine. */
		char cg[4096] = "/", line[4200];
		FILE *self = fopen("/proc/self/cgroup", "re");

		while (self && fgets(line, sizeof(line), self)) {
			char *k1 = strchr(line, ':'), *c2 = k1 ? strchr(k1 + 1, ':') : NULL;

			if (c2 && (strstr(k1, ":memory:") == k1 || strstr(k1, ",memory:") || strstr(k1, ":memory,"))) {
				snprintf(cg, sizeof(cg), "%s", c2 + 1);
				cg[strcspn(cg, "\n")] = '\0';
			}
		}
		if (self)
			fclose(self);
		/* The default discover_interval: the page-cache intake, not the
		 * period, finds the stream quickly. */
		fprintf(f, "[bench]\nmatch = %s\nmode = pageout\n"
			   "discover = %s\nstrong_refs = %s\n", cg, lib ? "no" : "yes",
			getenv("DAEMON_SCALE_REFS") ? getenv("DAEMON_SCALE_REFS") : "yes");
		fclose(f);
	}
	daemon = fork();
	if (daemon == 0) {
		int lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		dup2(lfd, 2);
		execl(madvseqd, madvseqd, "-s", g_sock, "-c", conf, "-l", "warning", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 200 && !daemon_status(); i++)
		usleep(25000);
	st = daemon_status(); /* (a static buffer: read at once) */
	a0 = advice_cpu_s(st);
	n0 = status_cycles(st);
	c0 = proc_cpu_s(daemon);
	double u0 = g_utime, s0 = g_stime;
	t0 = now_s();
	s = fork();
	if (s == 0) {
		int nul = open("/dev/null", O_WRONLY);

		dup2(nul, 1);
		if (lib) {
			setenv("LD_PRELOAD", lib, 1);
			setenv("MADVSEQ_SOCKET", g_sock, 1);
		}
		execl(streamer, streamer, file, (char *)NULL);
		_exit(127);
	}
	waitpid(s, &status, 0);
	t1 = now_s();
	c1 = proc_cpu_s(daemon);
	st = daemon_status();
	a1 = advice_cpu_s(st);
	n1 = status_cycles(st);
	gbps = (double)size / 1e9 / (t1 - t0);
	printf("daemon_scale --cpu: %s streamer read 2 GiB in %.2f s (%.2f GB/s); daemon CPU %.3f s = "
	       "%.2f%% of one core, %.2f%% of a core per GB/s (target <= 1%%)\n",
	       lib ? "shimmed (daemon does the work)" : "unshimmed (discovery)", t1 - t0, gbps, c1 - c0,
	       100 * (c1 - c0) / (t1 - t0), 100 * (c1 - c0) / (t1 - t0) / gbps);
	printf("daemon_scale --cpu: of which user %.3f s, system %.3f s (10 ms ticks; system time "
	       "includes the reclaim MADV_PAGEOUT does in the caller's context)\n", g_utime - u0,
	       g_stime - s0);
	if (a0 >= 0 && a1 >= a0)
		printf("daemon_scale --cpu: inside process_madvise (reclaiming the dropped pages) %.3f s "
		       "= %.2f%% of a core per GB/s; the rest (finding, checking, planning) %.3f s = "
		       "%.2f%% of a core per GB/s\n", a1 - a0, 100 * (a1 - a0) / (t1 - t0) / gbps,
		       (c1 - c0) - (a1 - a0), 100 * ((c1 - c0) - (a1 - a0)) / (t1 - t0) / gbps);
	if (n0 >= 0 && n1 > n0)
		printf("daemon_scale --cpu: %lld management cycles, %.1f MiB streamed and %.0f us of "
		       "daemon CPU per cycle\n", n1 - n0, (double)size / (1 << 20) / (double)(n1 - n0),
		       1e6 * (c1 - c0) / (double)(n1 - n0));
	{
		char *p;

		st = daemon_status();
		p = st ? strstr(st, "dropped: ") : NULL;
		if (p)
			printf("daemon_scale --cpu: daemon %.*s\n", (int)strcspn(p, "\n"), p);
		if (!lib && st && (p = strstr(st, "discovery scans: ")))
			printf("daemon_scale --cpu: %.*s\n", (int)strcspn(p, "\n"), p);
	}
	kill(daemon, SIGTERM);
	waitpid(daemon, NULL, 0);
	unlink(conf);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	int procs = argc > 3 ? atoi(argv[3]) : 1000;
	int regions = argc > 4 ? atoi(argv[4]) : 10;
	double seconds = argc > 5 ? atof(argv[5]) : 5;
	char file[4096], conf[4096], log[4096];
	double samples[4096], t0, t_reg, cpu0 = 0;
	size_t ns = 0;
	pid_t daemon, *kids;
	int pipefd[2], ready = 0, rc = 0;
	struct rlimit rl;
	char *st;
	long rss_kib = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: daemon_scale MADVSEQD DIR [PROCS [REGIONS [SECONDS]]]\n"
				"       daemon_scale --cpu MADVSEQD DIR STREAMER [LIBMADVSEQ]\n");
		return 2;
	}
	if (geteuid() != 0) {
		printf("daemon_scale: needs root (process_madvise on other processes)\n");
		return 77;
	}
	if (!strcmp(argv[1], "--cpu"))
		return argc < 5 ? 2 : cpu_mode(argv[2], argv[3], argv[4], argc > 5 ? argv[5] : NULL);
	snprintf(file, sizeof(file), "%s/scale.dat", argv[2]);
	snprintf(conf, sizeof(conf), "%s/scale.conf", argv[2]);
	snprintf(log, sizeof(log), "%s/scale-daemon.log", argv[2]);
	snprintf(g_sock, sizeof(g_sock), "%s/scale.sock", argv[2]);
	{
		FILE *f = fopen(conf, "w");
		int fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		struct stat sb;

		if (!f || fd < 0)
			return 1;
		fputs("[/*]\nmode = pageout\n", f);
		fclose(f);
		if (fstat(fd, &sb) == 0 && sb.st_size < (off_t)regions * REGION) {
			char *blk = malloc(1 << 20);

			for (int i = 0; i < 1 << 20; i++)
				blk[i] = (char)rand();
			for (unsigned i = 0; i < (unsigned)regions * (REGION >> 20); i++)
				if (write(fd, blk, 1 << 20) != 1 << 20)
					return 1;
			free(blk);
		}
		close(fd);
	}
	/* The daemon inherits it: five descriptors per client (socket, pidfd,
	 * pagemap, stat, schedstat), and one per region's file while half the
	 * limit allows. */
	rl.rlim_cur = rl.rlim_max = (rlim_t)procs * (6 + 2 * (rlim_t)regions) + 256;
	setrlimit(RLIMIT_NOFILE, &rl);
	daemon = fork();
	if (daemon == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		dup2(fd, 2);
		execl(argv[1], argv[1], "-s", g_sock, "-c", conf, "-l", "warning", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 200 && !daemon_status(); i++)
		usleep(25000);
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return 1;
	kids = calloc((size_t)procs, sizeof(*kids));
	t0 = now_s();
	for (int i = 0; i < procs; i++) {
		kids[i] = fork();
		if (kids[i] == 0)
			child(file, regions, pipefd[1]);
	}
	close(pipefd[1]);
	for (char c; ready < procs && read(pipefd[0], &c, 1) == 1;)
		ready++;
	t_reg = now_s() - t0;
	printf("daemon_scale: %d/%d processes registered %d regions each in %.2f s\n", ready, procs,
	       regions, t_reg);
	if (ready < procs)
		rc = 1;
	/* Sample "last" cycle times: each is one full pass over every region. */
	for (double end = now_s() + seconds; now_s() < end && ns < 4096;) {
		char *p;

		usleep(100000);
		if (!(st = daemon_status()))
			continue;
		if ((p = strstr(st, ", last ")))
			samples[ns++] = atof(p + 7);
		if ((p = strstr(st, "daemon: cpu ")))
			cpu0 = atof(p + 12);
	}
	{
		char path[64], line[256];
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/status", (int)daemon);
		if ((f = fopen(path, "re"))) {
			while (fgets(line, sizeof(line), f))
				if (!strncmp(line, "VmRSS:", 6))
					rss_kib = atol(line + 6);
			fclose(f);
		}
	}
	st = daemon_status();
	if (st && strstr(st, "clients: ")) {
		char *c = strstr(st, "clients: "), *nl = strchr(c, '\n');

		printf("daemon_scale: daemon reports %.*s\n", nl ? (int)(nl - c) : 80, c);
	}
	if (ns) {
		qsort(samples, ns, sizeof(*samples), cmp_d);
		printf("daemon_scale: %d processes x %d regions: management cycle median %.2f ms, "
		       "p95 %.2f ms, max %.2f ms (%zu samples); daemon RSS %.1f MiB; daemon CPU %.2f s total\n",
		       procs, regions, samples[ns / 2], samples[ns * 95 / 100], samples[ns - 1], ns,
		       (double)rss_kib / 1024, cpu0);
		printf("daemon_scale: targets: cycle <= 10 ms: %s; RSS <= 32 MiB: %s\n",
		       samples[ns / 2] <= 10 ? "met" : "NOT met", rss_kib <= 32 * 1024 ? "met" : "NOT met");
	} else {
		rc = 1;
	}
	for (int i = 0; i < procs; i++)
		if (kids[i] > 0)
			kill(kids[i], SIGKILL);
	while (waitpid(-1, NULL, WNOHANG) > 0 || errno == EINTR)
		;
	kill(daemon, SIGTERM);
	while (wait(NULL) > 0)
		;
	unlink(conf);
	unlink(file);
	return rc;
}

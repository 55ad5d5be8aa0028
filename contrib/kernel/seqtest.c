// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * seqtest: the interference scenario of DESIGN.md, scaled down for a small
 * emulated guest.  Runs as the guest's test program (PID 1's child).
 *
 * A victim process does random 4 KiB pread()s over a warm file; a streamer
 * reads a larger file once through an mmap() + MADV_SEQUENTIAL mapping.  Both
 * run in one memory cgroup (v2).  For each value of vm.seq_read_dropbehind
 * (0, then 1) it prints one RESULT line: retention (the victim file's
 * resident fraction after the stream relative to before, from mincore(),
 * which tells the truth to root), the victim's reads per second and mean
 * pread() latency alone -> with the streamer, and the streamer's throughput.
 *
 * usage: seqtest [-c cgroup_limit_mib] [-w warm_passes] [-a alone_secs]
 *                [-r victim_reads_per_sec] [-l label] [-s] [-m] [-g]
 *                VICTIM STREAM
 *
 * -s: the victim uses the first size-of-VICTIM bytes of STREAM instead of
 *     VICTIM, so the streamer passes through the victim's pages: they must
 *     stay, as the victim references them.
 * -m: the victim reads through its own (plain) mmap() of its file instead of
 *     pread(): a second mapping of the streamer's folios with -s.
 * -g: switch the drop-behind through the test cgroup's own
 *     memory.seq_read_dropbehind (the 6.12 series) instead of the sysctl,
 *     which stays 0.
 *
 * Each RESULT line also says which switch was used (via=sysctl or
 * via=memcg) and whether the multi-gen LRU was on (lru_gen=on, off, or
 * absent: /sys/kernel/mm/lru_gen/enabled).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SYSCTL "/proc/sys/vm/seq_read_dropbehind"
#define CGROUP "/sys/fs/cgroup/seqtest"
#define CGSWITCH CGROUP "/memory.seq_read_dropbehind"
#define LRU_GEN "/sys/kernel/mm/lru_gen/enabled"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "seqtest: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

static void read_line(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, len - 1);

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* One memory.stat field of the test cgroup, in MiB. */
static double memcg_stat_mib(const char *key)
{
	char line[256];
	size_t klen = strlen(key);
	double v = -1;
	FILE *f = fopen(CGROUP "/memory.stat", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen) && line[klen] == ' ') {
			v = strtod(line + klen + 1, NULL) / (1 << 20);
			break;
		}
	fclose(f);
	return v;
}

static double resident_pct(const char *path, off_t len)
{
	struct stat st;
	unsigned char *vec;
	size_t pages, i, n = 0;
	void *p;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st))
		die(path);
	if (len > 0 && len < st.st_size)
		st.st_size = len;
	pages = (st.st_size + 4095) / 4096;
	p = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		die("mmap");
	vec = malloc(pages);
	if (!vec || mincore(p, st.st_size, vec))
		die("mincore");
	for (i = 0; i < pages; i++)
		n += vec[i] & 1;
	free(vec);
	munmap(p, st.st_size);
	close(fd);
	return 100.0 * n / pages;
}

static uint64_t rng = 88172645463325252ULL;

static uint64_t xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double victim_rate;	/* reads per second, 0: as fast as possible */
static const unsigned char *victim_map;	/* read through this mapping */
static const char *label = "scenario";
static double victim_lat_us;	/* mean pread() latency of the last run */
static bool via_memcg;		/* -g: the cgroup's switch, not the sysctl */

/* "on", "off" or "absent": the multi-gen LRU's state (any component on) */
static const char *lru_gen_state(void)
{
	char buf[32];

	if (access(LRU_GEN, F_OK))
		return "absent";
	read_line(LRU_GEN, buf, sizeof(buf));
	return strtoul(buf, NULL, 0) ? "on" : "off";
}

/* Random 4 KiB preads until @secs have passed or @child has exited. */
static double victim_run(int fd, size_t pages, double secs, pid_t child,
			 int *status)
{
	char buf[4096];
	double t0 = now(), t, busy = 0;
	uint64_t ops = 0;

	for (;;) {
		off_t off = (off_t)(xorshift() % pages) * 4096;

		t = now();
		if (victim_map)
			buf[0] = *(volatile const unsigned char *)(victim_map + off);
		else if (pread(fd, buf, sizeof(buf), off) != (ssize_t)sizeof(buf))
			die("victim pread");
		busy += now() - t;
		if (++ops % 16)
			continue;
		t = now();
		if (victim_rate > 0 && ops > victim_rate * (t - t0)) {
			double ahead = ops / victim_rate - (t - t0);
			struct timespec ts = {
				.tv_sec = (time_t)ahead,
				.tv_nsec = (long)((ahead - (time_t)ahead) * 1e9),
			};

			nanosleep(&ts, NULL);
			t = now();
		}
		if (child > 0 && waitpid(child, status, WNOHANG) == child)
			break;
		if (child <= 0 && t - t0 >= secs)
			break;
	}
	victim_lat_us = busy * 1e6 / ops;
	return ops / (now() - t0);
}

/* The streamer: one pass over @path through a MADV_SEQUENTIAL mapping. */
static void streamer(const char *path, int report_fd)
{
	struct stat st;
	volatile unsigned char sink = 0;
	unsigned char *p;
	double t0, mibs;
	off_t off;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st))
		die(path);
	p = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		die("stream mmap");
	if (madvise(p, st.st_size, MADV_SEQUENTIAL))
		die("madvise");
	t0 = now();
	for (off = 0; off < st.st_size; off += 4096)
		sink += p[off];
	mibs = st.st_size / (1024.0 * 1024.0) / (now() - t0);
	if (write(report_fd, &mibs, sizeof(mibs)) != sizeof(mibs))
		die("report");
	(void)sink;
	_exit(0);
}

static off_t victim_size(const char *path)
{
	struct stat st;

	if (stat(path, &st))
		die(path);
	return st.st_size;
}

static void one_round(int mode, const char *victim, off_t victim_len,
		      bool use_map, const char *stream, int warm_passes,
		      double alone_secs)
{
	char buf[1 << 16], val[8];
	struct stat st;
	double alone, with, mibs = 0, res_before, res_after, res_stream;
	double lat_alone, lat_with;
	int fd, i, status = 0, pfd[2];
	size_t pages;
	pid_t pid;

	snprintf(val, sizeof(val), "%d", mode);
	if (mode >= 0 && via_memcg) {
		if (write_file(SYSCTL, "0") || write_file(CGSWITCH, val))
			die("write " CGSWITCH);
	} else if (mode >= 0) {
		/* (The cgroup stays from an earlier -g run: its switch off.) */
		if (write_file(SYSCTL, val) ||
		    (!access(CGSWITCH, F_OK) && write_file(CGSWITCH, "0")))
			die("write " SYSCTL);
	}
	sync();
	if (write_file("/proc/sys/vm/drop_caches", "3"))
		die("drop_caches");

	fd = open(victim, O_RDONLY);
	if (fd < 0 || fstat(fd, &st))
		die(victim);
	if (victim_len > 0 && victim_len < st.st_size)
		st.st_size = victim_len;
	pages = st.st_size / 4096;
	if (use_map) {
		victim_map = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		if (victim_map == MAP_FAILED)
			die("victim mmap");
	}
	/* Warm: read the whole file @warm_passes times (twice: active list) */
	for (i = 0; i < warm_passes; i++) {
		off_t off;

		for (off = 0; off < st.st_size; off += sizeof(buf)) {
			if (victim_map) {
				off_t o;

				for (o = off; o < off + (off_t)sizeof(buf); o += 4096)
					buf[0] = ((volatile const unsigned char *)
						  victim_map)[o];
			} else if (pread(fd, buf, sizeof(buf), off) <= 0) {
				die("warm pread");
			}
		}
	}
	alone = victim_run(fd, pages, alone_secs, 0, NULL);
	lat_alone = victim_lat_us;
	res_before = resident_pct(victim, st.st_size);

	if (pipe(pfd))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(pfd[0]);
		streamer(stream, pfd[1]);
	}
	close(pfd[1]);
	with = victim_run(fd, pages, 0, pid, &status);
	lat_with = victim_lat_us;
	if (!WIFEXITED(status) || WEXITSTATUS(status) ||
	    read(pfd[0], &mibs, sizeof(mibs)) != sizeof(mibs))
		fprintf(stderr, "seqtest: streamer failed (status %#x)\n",
			status);
	close(pfd[0]);
	res_after = resident_pct(victim, st.st_size);
	if (victim_map) {
		munmap((void *)victim_map, st.st_size);
		victim_map = NULL;
	}
	close(fd);
	res_stream = resident_pct(stream, 0);

	printf("RESULT %s seq_read_dropbehind=%s via=%s lru_gen=%s "
	       "retention=%.1f%% victim_resident=%.1f%%->%.1f%% "
	       "victim_reads=%.0f/s->%.0f/s victim_latency=%.1fus->%.1fus "
	       "streamer=%.1fMiB/s stream_resident=%.1f%% "
	       "memcg_file=%.0fMiB\n",
	       label, mode < 0 ? "absent" : val, via_memcg ? "memcg" : "sysctl",
	       lru_gen_state(), 100.0 * res_after / res_before, res_before,
	       res_after, alone, with, lat_alone, lat_with, mibs, res_stream,
	       memcg_stat_mib("file"));
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int limit_mib = 256, warm_passes = 2, opt, mode;
	double alone_secs = 5;
	char val[64], cur[64];
	bool have_switch = true, shared = false, use_map = false;

	while ((opt = getopt(argc, argv, "c:w:a:r:l:smg")) != -1) {
		switch (opt) {
		case 'g':
			via_memcg = true;
			break;
		case 's':
			shared = true;
			break;
		case 'm':
			use_map = true;
			break;
		case 'l':
			label = optarg;
			break;
		case 'r':
			victim_rate = atof(optarg);
			break;
		case 'c':
			limit_mib = atoi(optarg);
			break;
		case 'w':
			warm_passes = atoi(optarg);
			break;
		case 'a':
			alone_secs = atof(optarg);
			break;
		default:
			goto usage;
		}
	}
	if (argc - optind != 2)
		goto usage;

	if (access(SYSCTL, F_OK)) {
		/* An unpatched kernel, or one without the switch: one round */
		printf("seqtest: no %s in this kernel, memcg limit %d MiB\n",
		       SYSCTL, limit_mib);
		have_switch = false;
	} else {
		read_line(SYSCTL, cur, sizeof(cur));
		read_line(SYSCTL "_lag_kb", val, sizeof(val));
		printf("seqtest: %s = %s, lag %s KiB, memcg limit %d MiB\n",
		       SYSCTL, cur, val, limit_mib);
	}

	if (mkdir(CGROUP, 0755) && errno != EEXIST)
		die("mkdir " CGROUP);
	snprintf(val, sizeof(val), "%dM", limit_mib);
	if (write_file("/sys/fs/cgroup/cgroup.subtree_control", "+memory") ||
	    write_file(CGROUP "/memory.max", val))
		die("memcg setup");
	snprintf(val, sizeof(val), "%d", (int)getpid());
	if (write_file(CGROUP "/cgroup.procs", val))
		die("join cgroup");
	if (via_memcg && have_switch && access(CGSWITCH, F_OK)) {
		printf("seqtest: no %s in this kernel\n", CGSWITCH);
		return 1;
	}

	for (mode = have_switch ? 0 : -1; mode <= (have_switch ? 1 : -1); mode++)
		one_round(mode, shared ? argv[optind + 1] : argv[optind],
			  shared ? victim_size(argv[optind]) : 0, use_map,
			  argv[optind + 1], warm_passes, alone_secs);
	return 0;
usage:
	fprintf(stderr, "usage: seqtest [-c limit_mib] [-w warm_passes] "
		"[-a alone_secs] [-r victim_reads_per_sec] [-l label]\n"
		"               [-s] [-m] [-g] VICTIM STREAM\n");
	return 2;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Which cgroup a process is in, and how much memory pressure that cgroup
 * is under.  Paths are read below a proc root and a cgroupfs root, so tests
 * point them at a fixture tree.
 *
 * The cgroup that matters is the one whose memory the page cache is
 * charged to: the v1 memory controller's, where a v1 hierarchy has it
 * (hosts whose cgroup2 mount has no memory controller), else the v2 path.
 */
#ifndef MSQD_CGROUP_H
#define MSQD_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "counters.h"

enum msqd_cg_layout {
	MSQD_CG_V2 = 2, /* <root>/<path>/memory.{current,max,pressure} */
	MSQD_CG_V1 = 1, /* <root>/memory/<path>/memory.{usage,limit}_in_bytes */
};

/*
 * Reads <proc_root>/<pid>/cgroup.  Writes the memory cgroup's path
 * ("/a/b") to path.  Returns 0 or -errno (-ENOENT: no memory cgroup line).
 */
int msqd_cgroup_of(const char *proc_root, pid_t pid, char *path, size_t len,
		   enum msqd_cg_layout *layout);

struct msqd_pressure {
	uint64_t usage, limit; /* bytes; limit 0 when none found */
	double some_avg10;     /* -1 when unknown */
};

/* Reads usage, the tightest limit on the way to the root, and memory PSI
 * (v2: the cgroup's memory.pressure; v1: /proc/pressure/memory, the whole
 * machine).  Returns 0 or -errno. */
int msqd_cgroup_pressure(const char *cg_root, const char *proc_root, const char *path,
			 enum msqd_cg_layout layout, struct msqd_pressure *out);

/* The cgroup's directory: <cg_root>/memory<path> (v1), <cg_root><path> (v2). */
void msqd_cgroup_dir(const char *cg_root, const char *path, enum msqd_cg_layout layout, char *buf,
		     size_t len);

/*
 * A counter of pages taken into the cgroup's memory, which only grows: the
 * signal that something there reads a lot, even when the cgroup is full
 * and its usage stays flat.  v1: memory.stat total_pgpgin (charges); v2:
 * memory.stat file (pages cached now) + pgsteal (pages reclaim took out).
 * The file is read through *fd, as msqd_stat_file_value() does.
 * Returns 0 or -errno.
 */
int msqd_cgroup_intake(const char *cg_root, const char *path, enum msqd_cg_layout layout,
		       int *fd, uint64_t *pages);

/* A cgroup's intake of file pages alone, for the fd watch, whose read()
 * streams fault nothing in.  v1's charges (total_pgpgin) count anonymous
 * memory too (a thousand forks' copy-on-write faults look like a stream),
 * so it comes with the faults (total_pgfault), one charge each at most
 * for anonymous memory: charges beyond the faults are file pages.  And
 * the page cache's size (v1 total_cache, v2 file, bytes).  v2's charges
 * are msqd_cgroup_intake()'s file + pgsteal, its faults 0.  Read through
 * *fd.  Returns 0 or -errno. */
struct msqd_cg_filestat {
	uint64_t charges, faults, cache;
};
int msqd_cgroup_filestat(const char *cg_root, const char *path, enum msqd_cg_layout layout,
			 int *fd, struct msqd_cg_filestat *out);

/* The value of key in a file of "key value" lines (memory.stat,
 * /proc/vmstat), read through *fd, which is opened on first use (*fd < 0)
 * and kept open for the next call.  Returns 0, -ENOENT without the key, or
 * -errno. */
int msqd_stat_file_value(const char *file, int *fd, const char *key, uint64_t *v);

/*
 * The daemon's record of each cgroup seen (struct msqd_cg, below):
 * found or made by path; policies resolved again after a reload; and the
 * pressure gate, which lets the daemon act only where memory is tight
 * enough (as the cgroup's policy says).
 */
struct msqd;
struct msqd_cg;
struct msqd_policy;

struct msqd_cg *msqd_cg_get(struct msqd *d, const char *path, enum msqd_cg_layout layout);
void msqd_cg_reresolve(struct msqd *d);
/* Whether p's pressure gate lets the daemon act at pressure pr. */
bool msqd_gate_decide(const struct msqd_policy *p, const struct msqd_pressure *pr);
/* The gate of g now (pressure read again at most once a second). */
bool msqd_gate_open(struct msqd *d, struct msqd_cg *g);
/* Frees the records of removed cgroups nothing refers to (once a second). */
void msqd_cg_reap(struct msqd *d);

/* Reads the kernel's drop-behind switch again if a second has passed (each
 * cycle, and each status: an idle daemon runs no cycles). */
void msqd_kernel_recheck(struct msqd *d);
/* Whether the kernel drops behind MADV_SEQUENTIAL faults in cgroup g: its
 * sysctl is on, or g's own switch (memory.seq_read_dropbehind, cgroup v2,
 * set on g or an ancestor), read again if a second has passed. */
bool msqd_kernel_covers(struct msqd *d, struct msqd_cg *g);

/* The types of the daemon's cgroup records. */
/* Discovery's watch on a counter of pages coming into the page cache
 * (discover.c): a scan is started once `trigger' pages came in since the
 * last scan, no sooner than gap_ns after it. */
struct msqd_intake {
	int fd;              /* the counter's file, kept open; -1: not (yet) */
	uint64_t base;       /* the counter at the last scan (or first look) */
	uint64_t last;       /* the counter at the last look */
	bool known;
	uint64_t gap_ns;     /* doubles while triggered scans find nothing */
	uint64_t scanned_ns;
};

/* One per cgroup path seen; lives until it is removed and nothing refers
 * to it (msqd_cg_reap), or the daemon exits. */
struct msqd_cg {
	char *path;
	enum msqd_cg_layout layout;
	const struct msqd_policy *pol; /* into the current configuration */
	const char *section;           /* winning section, NULL: built-in */
	uint64_t dropped, kept_strong, kept_mapped;
	uint64_t streamed; /* how far its mapped streams' readers moved on */
	struct msqd_read_counts read; /* what its shims' read paths reported */
	unsigned clients, regions;
	unsigned leftovers; /* exit drops queued with it */
	bool gate_open;
	uint64_t gate_checked_ns;
	struct msqd_pressure pr;
	struct msqd_intake intake; /* discovery's watch on its page-cache intake */
	/* The kernel's per-cgroup drop-behind (memory.seq_read_dropbehind of
	 * it or an ancestor, cgroup v2): 1 on, 0 off, < 0 absent; read again
	 * at most once a second (msqd_kernel_covers()). */
	int kernel_state;
	uint64_t kernel_checked_ns;
	struct msqd_cg *next;
};

/* The cgroups seen (cgroup.c). */
struct msqd_cgroups {
	struct msqd_cg *list;
	uint64_t reaped_ns; /* the last look for removed ones */
	uint64_t freed;     /* removed cgroups forgotten */
};

/* The machine-wide drop-behind switch (vm.seq_read_dropbehind), read at
 * most once a second (msqd_kernel_recheck). */
struct msqd_kernel_switch {
	int state;           /* 1 on, 0 off, < 0 absent */
	uint64_t checked_ns;
};

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * madvseqd's shared state: the types every part reads.  The daemon is one
 * thread: an epoll loop (main.c) that serves the socket (server.c), hands
 * each message, once validate.c has checked it, to handle.c; keeps its
 * clients (client.c) and their regions (regions.c); runs management cycles
 * (cycle.c) and exit drops (exitdrop.c) under each cgroup's policy and
 * pressure gate (cgroup.c); rescans processes of discover = yes cgroups
 * (discover.c) and answers status queries (metrics.c).  Each has its own
 * header with its functions.
 *
 * A "client" is a process whose memory the daemon manages: either a shim
 * that connected (fd >= 0) or a process found by discovery (fd == -1).
 * Its identity is a pidfd taken from the kernel (SO_PEERPIDFD, or
 * SO_PEERCRED + pidfd_open checked against the socket), never from a
 * message; its pagemap is opened while that pidfd shows it alive, so pid
 * reuse cannot point either at another process.
 */
#ifndef MSQD_DAEMON_H
#define MSQD_DAEMON_H

#include <limits.h>
#include <stdlib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <madvseq/protocol.h>

#include "../common/stream.h"
#include "cgroup.h"
#include "conf.h"
#include "util.h"

struct msqd_region {
	struct msq_stream s;
	int fd;        /* the mapped file, opened through /proc/PID/map_files; -1: by path */
	uint64_t id;   /* the client's id; discovery: 0 */
	bool seen;     /* discovery: found again in this scan */
	bool kernel_fs; /* on a filesystem the kernel's own drop-behind covers */
	size_t mem;     /* the daemon's bookkeeping for it, as counted at registration */
	uint64_t vma_lo, vma_hi; /* the mapping it starts in (/proc/PID/map_files name) */
	bool snapping;  /* its snapshot is being taken: not acted on yet (regions.c) */
	uint64_t snap_at; /* where the snapshot's walk goes on */
	struct msq_extents snap_ahead; /* the client's own pages, kept out of the snapshot */
};

/* A region whose client exited while it was managed: what it left cached
 * is dropped through the file (exitdrop.c), a few at a time between events,
 * so that a thousand programs exiting at once do not stop the daemon. */
struct msqd_leftover {
	struct msqd_leftover *next;
	struct msqd_region *r;
	struct msqd_cg *cg;
	pid_t pid;
	uint64_t at;      /* where its walk goes on (slices: exitdrop.c) */
	uint64_t dropped;
};

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

/* One per cgroup path seen; lives until the daemon exits or reloads. */
/* What shims report of their read paths (READ_REPORT), which they run
 * themselves: the daemon only counts it.  Saturating sums. */
struct msqd_read_counts {
	uint64_t files, streamed, dropped, kept;
};

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

enum { MSQD_W_LISTEN, MSQD_W_SOCK, MSQD_W_PIDFD, MSQD_W_SIGNAL };
struct msqd_watch {
	int kind;
	struct msqd_client *c;
};

struct msqd_client {
	int fd;     /* socket; -1: found by discovery */
	int pidfd;
	pid_t pid;
	uid_t uid;
	bool hello, ctl;
	bool denied;          /* lost its rights (exec, credentials): refused from now on */
	bool dead;           /* its address space is gone (process_madvise: ESRCH) */
	uint64_t closing_ns; /* going (msqd_client_closing): dropped at this time, or when it exits */
	bool counted; /* in nshim */
	uint64_t since_ns;
	struct msqd_cg *cg;
	struct msq_engine eng; /* pidfd and the client's pagemap */
	int statfd;            /* /proc/PID/stat: page-fault counters */
	int schedfd;           /* /proc/PID/schedstat: time on CPU */
	uint64_t runtime;      /* of the main thread, at the last stat read */
	long threads;          /* from stat; schedstat covers one thread only */
	uint64_t faults;       /* minflt + majflt at the last full cycle */
	uint64_t full_ns;      /* when its regions were last cycled */
	uint64_t cycle_round;  /* the last round of cycles that looked at it (cycle.c) */
	bool busy;             /* the last cycle dropped something or failed */
	struct msqd_region **r;
	size_t nr, cap;
	uint64_t bytes;        /* sum of its regions' lengths (max_client_bytes) */
	size_t mem;            /* the daemon's bookkeeping for it (max_client_memory) */
	uint64_t proto_errors;
	struct msqd_read_counts read; /* what its read path reported */
	struct msqd_watch wsock, wpid;
	struct msqd_client *prev, *next;
};

struct msqd {
	/* settings */
	const char *proc_root, *cg_root, *config_path;
	char socket[108];
	struct msqd_conf conf;
	/* state */
	int epfd, lfd, sigfd;
	int spare_fd;       /* reserved for refusing clients when out of fds */
	bool emfile_warned;
	unsigned region_fds, region_fd_budget; /* files held for regions (regions.c) */
	struct msqd_client *clients; /* list */
	unsigned nclients, nshim, ndiscovered;
	uint64_t nregions;           /* regions managed, all clients */
	struct msqd_cg *cgs;
	uint64_t now_ns, next_cycle_ns, next_discover_ns, sleep_ns;
	uint64_t cycles, last_cycle_ns, max_cycle_ns;
	uint64_t cycle_round;  /* rounds over all clients, each one or more cycles */
	uint64_t idle_skips; /* clients left alone: no page faults since last time */
	uint64_t dropped_total, kept_strong_total;
	struct msqd_read_counts read_total; /* all shims' read paths, as reported */
	uint64_t proto_errors, refused_regions, discover_scans, discover_triggered;
	uint64_t denied_clients;     /* clients refused for their rights (client.c) */
	uint64_t refused_clients;    /* connections refused: limits, identity (server.c) */
	bool limit_warned;
	uint64_t discover_refused;   /* processes discovery left alone (max_discovered) */
	bool discover_limit_warned;
	pid_t scan_resume_pid;       /* a full scan goes on after this pid (discover.c) */
	uint64_t exit_drops_skipped; /* regions whose file was not held (exitdrop.c) */
	unsigned nsnapping;          /* regions whose snapshot is being taken */
	uint64_t cg_reaped_ns, cgs_freed; /* removed cgroups forgotten (cgroup.c) */
	uint64_t next_watch_ns;
	unsigned quiet_watches; /* looks in a row that saw the counters still */
	struct msqd_intake disk_intake; /* the machine's reads from disk (/proc/vmstat pgpgin) */
	int kernel_state;    /* vm.seq_read_dropbehind: 1 on, 0 off, < 0 absent */
	uint64_t kernel_checked_ns;
	uint64_t kernel_regions; /* regions left to the kernel in the last cycle */
	bool refs_ok;        /* kpageflags usable */
	bool refs_warned;
	int kpageflags_fd;
	uint64_t kpageflags_reads; /* frames whose flags were read (cost) */
	bool refs_found_folios;    /* the last batch checked held large folios */
	uint64_t advice_cpu_ns;    /* CPU spent inside process_madvise (reclaim) */
	uint64_t started_ns;
	struct msqd_cg *cur_cg;  /* whose pages are being checked (for refs.c) */
	struct msqd_leftover *leftovers, **leftovers_tail; /* exit drops, in order */
	unsigned nleftovers;
	struct msqd_fdwatch *fdwatch; /* read()/write() streams of programs without the library (fdwatch.c) */
	uint64_t next_fdwatch_ns;
};

#endif

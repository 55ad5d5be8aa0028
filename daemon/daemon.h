/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * madvseqd's shared state.  The daemon is one thread: an epoll loop
 * (main.c) that serves the socket (server.c), runs management cycles over
 * every client's regions (manage.c), rescans processes of discover = yes
 * cgroups (discover.c) and answers status queries (metrics.c).
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

/* Frees *p with free() at scope exit (systemd style). */
#define _cleanup_(f) __attribute__((cleanup(f)))
static inline void freep(void *p) { free(*(void **)p); }
void msqd_closep(int *fd);
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(msqd_closep)

struct msqd_region {
	struct msq_stream s;
	int fd;        /* the mapped file, opened through /proc/PID/map_files; -1: by path */
	uint64_t id;   /* the client's id; discovery: 0 */
	bool seen;     /* discovery: found again in this scan */
	bool kernel_fs; /* on a filesystem the kernel's own drop-behind covers */
};

/* A region whose client exited while it was managed: what it left cached
 * is dropped through the file (manage.c), a few at a time between events,
 * so that a thousand programs exiting at once do not stop the daemon. */
struct msqd_leftover {
	struct msqd_leftover *next;
	struct msqd_region *r;
	struct msqd_cg *cg;
	pid_t pid;
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
struct msqd_cg {
	char *path;
	enum msqd_cg_layout layout;
	const struct msqd_policy *pol; /* into the current configuration */
	const char *section;           /* winning section, NULL: built-in */
	uint64_t dropped, kept_strong, kept_mapped;
	unsigned clients, regions;
	bool gate_open;
	uint64_t gate_checked_ns;
	struct msqd_pressure pr;
	struct msqd_intake intake; /* discovery's watch on its page-cache intake */
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
	bool busy;             /* the last cycle dropped something or failed */
	struct msqd_region **r;
	size_t nr, cap;
	uint64_t proto_errors;
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
	unsigned region_fds, region_fd_budget; /* files held for regions (manage.c) */
	struct msqd_client *clients; /* list */
	unsigned nclients, nshim, ndiscovered;
	uint64_t nregions;           /* regions managed, all clients */
	struct msqd_cg *cgs;
	uint64_t now_ns, next_cycle_ns, next_discover_ns, sleep_ns;
	uint64_t cycles, last_cycle_ns, max_cycle_ns;
	uint64_t idle_skips; /* clients left alone: no page faults since last time */
	uint64_t dropped_total, kept_strong_total;
	uint64_t proto_errors, refused_regions, discover_scans, discover_triggered;
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
};

uint64_t msqd_now_ns(void);

/* server.c */
int msqd_server_listen(struct msqd *d);
void msqd_server_accept(struct msqd *d);
void msqd_server_readable(struct msqd *d, struct msqd_client *c);
void msqd_client_drop(struct msqd *d, struct msqd_client *c, const char *why);
void msqd_client_closing(struct msqd *d, struct msqd_client *c);
struct msqd_client *msqd_client_new(struct msqd *d, int fd, int pidfd, pid_t pid, uid_t uid);
/* Opens the client's pagemap and resolves its cgroup; 0 or -errno. */
int msqd_client_attach(struct msqd *d, struct msqd_client *c);
void msqd_server_timeouts(struct msqd *d);
/* Text replies for status / stats (metrics.c fills the buffer). */

/* manage.c */
/* precached: the client's snapshot (MSQ_REGION_SNAPSHOT), n ranges; NULL:
 * the daemon takes its own (when the policy checks strong references). */
int msqd_region_add(struct msqd *d, struct msqd_client *c, uint64_t id, uint64_t start,
		    uint64_t len, uint64_t dev, uint64_t ino, uint64_t off, bool checked_vma,
		    const char *path, bool shared, bool writable, const struct msq_wire_range *precached,
		    uint32_t nprecached);
void msqd_region_remove(struct msqd *d, struct msqd_client *c, size_t i);
/* The client exited with region i still managed (no library, or killed
 * by a signal): the region leaves the client for the exit-drop queue,
 * where what it left cached goes through the file, as the final drop
 * would have taken it. */
void msqd_region_exited(struct msqd *d, struct msqd_client *c, size_t i);
/* Runs queued exit drops for about budget_ns (at least one). */
void msqd_exit_drops(struct msqd *d, uint64_t budget_ns);
/* The client is about to unmap [start, end) of region i (or to exit):
 * drops all of that part the policy lets go, now.  Returns bytes dropped. */
uint64_t msqd_region_final_drop(struct msqd *d, struct msqd_client *c, size_t i, uint64_t start,
				uint64_t end);
/* Returns bytes dropped in this pass. */
uint64_t msqd_cycle(struct msqd *d);
/* Reads the kernel's drop-behind switch again if a second has passed (each
 * cycle, and each status: an idle daemon runs no cycles). */
void msqd_kernel_recheck(struct msqd *d);
struct msqd_cg *msqd_cg_get(struct msqd *d, const char *path, enum msqd_cg_layout layout);
void msqd_cg_reresolve(struct msqd *d);
/* Whether p's pressure gate lets the daemon act at pressure pr. */
bool msqd_gate_decide(const struct msqd_policy *p, const struct msqd_pressure *pr);

/* discover.c */
/* Scans every process of discover = yes cgroups (each discover_interval).
 * Returns how many regions it newly manages. */
unsigned msqd_discover(struct msqd *d);
/* Starts a scan at once where discover_trigger bytes came into the page
 * cache since the last one.  Returns how long to wait before the next look:
 * discover_watch while the counters move, longer while all is quiet. */
uint64_t msqd_discover_watch(struct msqd *d);

/* refs.c */
void msqd_refs_init(struct msqd *d);
int msqd_refs_filter(struct msq_engine *e, struct msq_stream *s, struct msq_extents *drop,
		     void *arg);
const char *msqd_fidelity(const struct msqd *d);

/* metrics.c */
/* Appends to a malloc'd buffer; returns 0 or -ENOMEM. */
int msqd_status_text(struct msqd *d, char **buf, size_t *len);
/* STATUS= for systemctl status: clients, regions, bytes dropped (at most
 * once a second, when they changed). */
void msqd_notify_status(struct msqd *d);
/* format: MSQ_STATS_TEXT (the status), _PROMETHEUS or _JSON. */
int msqd_stats_text(struct msqd *d, uint32_t format, char **buf, size_t *len);

#endif

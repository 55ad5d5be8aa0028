/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Discovery of MADV_SEQUENTIAL mappings in programs without the shim. */
#ifndef MSQD_DISCOVER_H
#define MSQD_DISCOVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup.h"

struct msqd;

/* Scans every process of discover = yes cgroups (each discover_interval).
 * Returns how many regions it newly manages. */
unsigned msqd_discover(struct msqd *d);
/* Starts a scan at once where discover_trigger bytes came into the page
 * cache since the last one.  Returns how long to wait before the next look:
 * discover_watch while the counters move, longer while all is quiet. */
uint64_t msqd_discover_watch(struct msqd *d);

/* A process whose smaps showed no MADV_SEQUENTIAL mapping, and its fault
 * count then: until it faults again it has streamed through no mapping
 * (a stream faults its pages in), and its smaps, which walk its page
 * tables, are not read again. */
struct msqd_quiet_proc {
	pid_t pid;
	uint64_t start, faults; /* /proc/PID/stat starttime (a reused pid is new), minflt + majflt */
};

/* Discovery's schedule, watch and figures (discover.c). */
struct msqd_discovery {
	uint64_t next_ns;        /* the next full scan */
	uint64_t next_watch_ns;  /* the next look at the intake counters */
	unsigned quiet_watches;  /* looks in a row that saw the counters still */
	pid_t resume_pid;        /* a full scan goes on after this pid */
	struct msqd_intake disk_intake; /* the machine's reads from disk (/proc/vmstat pgpgin) */
	uint64_t scans, triggered; /* full scans; scans started by a cgroup's intake */
	uint64_t refused;        /* processes left alone (max_discovered) */
	struct msqd_quiet_proc *quiet; /* sorted by pid */
	size_t nquiet;
	uint64_t quiet_skips;    /* smaps not read: the process had not faulted since */
	bool limit_warned;
};

#endif

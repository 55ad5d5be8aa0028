/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Discovery of read()/write() streams in programs without the library
 * (Go programs, static binaries, servers started without it), for the
 * processes of cgroups whose section says discover = yes.  The watch
 * (fdwatch.c) finds busy processes and follows their descriptors' file
 * positions; fdmanage.c acts on a stream through a duplicate of its
 * descriptor (fdact.c), as the pure decisions of fdseq.c say; fdproc.c
 * reads what /proc says of them; fdshow.c renders each stream's line.
 */
#ifndef MSQD_FDWATCH_H
#define MSQD_FDWATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/extents.h"
#include "cgroup.h"
#include "fdseq.h"
#include "util.h"

struct msqd;

/* One descriptor followed: its position, and once it is a stream, what
 * the snapshot ahead of it found and what was dropped behind it. */
struct fdw_file {
	int fd;
	uint64_t dev, ino, mnt_id;
	int flags;
	struct msqd_fdseq seq;
	unsigned idle;
	bool started;       /* its snapshot began (counted in nstreams) */
	bool ended;         /* dropped up to the end of the file */
	bool open_ended;    /* the snapshot reached the end: everything past it is known */
	uint64_t start;     /* where the snapshot began: below, nothing is the daemon's */
	uint64_t snap_end, done, wb_done;
	uint64_t size;
	struct msq_extents known, pre, left;
	uint64_t streamed, dropped, unknown; /* unknown: passed before the snapshot got there */
	uint64_t found_ns, found_pos;        /* when and where it was first acted on */
	char *path;
};

struct fdw_cg;

/* A process of a watched cgroup, known by a pidfd taken at first sight. */
struct fdw_proc {
	pid_t pid;
	int pidfd;
	struct fdw_cg *cg;
	uint64_t io;
	bool io_known, maps_checked, lib, dead;
	uint64_t fds_ns;   /* last scan of its descriptors */
	int fd_resume;     /* a scan cut short goes on after this number (-1: from the first) */
	uint64_t seen_ns;
	uint64_t since_real_ns; /* CLOCK_REALTIME of its start: files born after are its own */
	struct fdw_file *f;
	size_t nf;
};

/* A watched cgroup: its page-cache intake says when to look inside. */
struct fdw_cg {
	char *path;
	enum msqd_cg_layout layout;
	int intake_fd;
	struct msqd_cg_filestat intake;
	bool known;
	uint64_t hot_until_ns, round;
	bool hot;           /* looked into in this look */
	pid_t resume_pid;   /* the round's next process is the first pid above it */
	unsigned streams;
	struct fdw_cg *next;
};

/* The watch's state (struct msqd's fdw), changed by fdwatch.c and
 * fdmanage.c; its counters are rows of metrics.c's table. */
struct msqd_fdwatch {
	struct fdw_proc **p; /* sorted by pid */
	size_t np;
	struct fdw_cg *cgs;
	unsigned ncgs, nstreams;
	uint64_t round;
	long budget;         /* operations left in this slice of a look */
	uint64_t until_ns;   /* the slice's end */
	bool cut;            /* this slice ran out: the look goes on at the next */
	bool going_on;       /* a look cut short is under way */
	char *resume_cg;     /* ...and goes on from this cgroup */
	uint64_t next_ns;    /* the next look, or the next slice of one */
	/* totals, for status and metrics */
	uint64_t looks, found, dropped, streamed, kept_before, unknown, swapped, refused, left_alone,
		 over_limits, errors, busy_looks, wb_started;
	uint64_t last_look_ns, max_look_ns;
};

/* What the status says of the fd streams' fidelity, and of what is not
 * covered. */
#define MSQD_FDWATCH_FIDELITY \
	"kept are pages the snapshot ahead found cached, pages mapped, dirty or under writeback; " \
	"pages others use through read() alone are not told apart; pread()/pwrite() streams are " \
	"not found"

/* One look at the opted-in cgroups, their busy processes and their
 * streams, acting on those; bounded in time and memory whatever the
 * watched processes do.  Returns how long until the next look. */
uint64_t msqd_fdwatch_step(struct msqd *d);
/* Everything the watch holds (at exit). */
void msqd_fdwatch_free(struct msqd_fdwatch *w);

/* Where pid is in w->p (sorted by pid), or would go; *found: whether it
 * is there. */
static inline size_t msqd_fdwatch_index(const struct msqd_fdwatch *w, pid_t pid, bool *found)
{
	size_t lo = 0, hi = w->np;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (w->p[mid]->pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < w->np && w->p[lo]->pid == pid;
	return lo;
}

/* Takes n operations from the slice's budget; false (nothing taken, and
 * the look to go on at the next slice) when it is spent or its time is
 * up. */
static inline bool msqd_fdwatch_spend(struct msqd_fdwatch *w, long n)
{
	if (w->cut)
		return false;
	if (w->budget < n || msqd_now_ns() >= w->until_ns) {
		w->cut = true;
		return false;
	}
	w->budget -= n;
	return true;
}

#endif

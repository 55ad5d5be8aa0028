/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Dropping a mapping's pages from the CPU its reader runs on.
 *
 * MADV_PAGEOUT unmaps each page before it reclaims it.  While the reader's
 * address space is loaded on another CPU (the reader runs there), each
 * batch of unmaps ends with a TLB-shootdown IPI to that CPU and a wait for
 * its answer, and the reader's page faults and our unmaps take the same
 * locks from two CPUs.  The kernel's own direct reclaim runs in the
 * reader's context and pays neither.  So the thread that drops binds
 * itself to the CPU the reader last ran on (madvseqd, which serves many,
 * goes back to its own affinity once it has nothing to drop).
 *
 * Measured on a 2-CPU virtual machine, where an IPI is a VM exit, with a
 * LevelDB scan of 5 GB (machine CPU-s per GB; the kernel alone 0.65-0.83):
 * dropped from the other CPU, the library 1.07-1.09 and madvseqd
 * 1.13-1.31; from the reader's CPU, 0.70-0.71 and 0.77-0.94 with the
 * reader pinned, 0.90-0.92 and 0.98 with it free to move (the scheduler
 * moves a reader away from the thread that preempts it, and the drops
 * follow it there).
 *
 * Followed only where the reader is known: the main thread of a process
 * with no other thread than it and the library's own.  A program that
 * reads from several threads has its address space on several CPUs,
 * and any unmap (the kernel's reclaim too) interrupts them all.
 */
#ifndef MSQ_FOLLOW_H
#define MSQ_FOLLOW_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

/* What a /proc/PID/stat line says of the process. */
struct msq_proc_stat {
	uint64_t faults; /* minflt + majflt */
	long threads;
	int cpu;         /* the CPU its main thread last ran on */
};

/* Parses a /proc/PID/stat line (NUL-terminated); 0 or -EINVAL. */
int msq_proc_stat_parse(const char *buf, struct msq_proc_stat *st);

struct msq_follow {
	cpu_set_t own; /* the thread's affinity while it follows nobody */
	int bound;     /* the CPU it is bound to; -1: its own affinity */
	bool ok;       /* own is known and has more than one CPU */
};

/* Starts from the calling thread's affinity. */
void msq_follow_init(struct msq_follow *f);

/* Binds the calling thread to cpu, if its own affinity allows it; back to
 * its own affinity for cpu < 0.  An affinity someone else set while it was
 * bound becomes its own.  Failures leave it where it was. */
void msq_follow_cpu(struct msq_follow *f, int cpu);

#endif

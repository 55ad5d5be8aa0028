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
 * itself to the CPU the reader last ran on.  madvseqd has the library's
 * engine thread make the drops it decides for a program with the library
 * (MSQ_MSG_DROP, daemon/asks.c); for one without, it follows only a reader
 * bound to one CPU, and goes back to its own affinity once it has had
 * nothing to drop for a while (daemon/cycle.c).
 *
 * Reclaim ends a batch of unmaps every 31 pages (shrink_folio_list frees
 * folios in batches and flushes the TLBs before each), so dropping 5 GB
 * of small folios from another CPU sends some 25,000 IPIs.  Measured on a
 * 2-CPU virtual machine, where an IPI is a VM exit, with a LevelDB scan of
 * 5 GB next to 800 MiB of other cached files (machine CPU-s per GB; the
 * kernel alone 0.80-0.89, 3,900 IPIs): the library, from the reader's
 * CPU, 0.70-0.73 and 4,300-5,000 IPIs, from the other CPU 0.79-0.92 and
 * 23,000-26,000; madvseqd with the reader pinned, from its CPU,
 * 0.74-0.80 and 720-770 IPIs.  The cost of following: the drops take
 * the reader's CPU, not an idle one (the library's scan 820 MB/s
 * following, 830-1,000 not).
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

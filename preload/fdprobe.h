/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the read path learns of the kernel, the devices and the process
 * once, and caches (fdprobe.c): whether a filesystem takes RWF_DONTCACHE,
 * a device's readahead, whether cachestat(2) works, whether a seccomp
 * filter is on, whether a file's residency snapshot would be truthful.
 *
 * Contract: lock-free, allocation-free and async-signal-safe (raw
 * syscalls, fixed tables filled with atomic stores); callable with the
 * shim's guard raised, from any thread.
 */
#ifndef MSQ_FDPROBE_H
#define MSQ_FDPROBE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "shim.h"

/* RWF_DONTCACHE on a filesystem (by st_dev), or on an fd's writes. */
enum { MSQ_DC_UNKNOWN, MSQ_DC_YES, MSQ_DC_NO };

/* What the filesystem on dev said to RWF_DONTCACHE (MSQ_DC_UNKNOWN: not
 * asked yet, or the table is full), and remembering its answer. */
int msq_probe_dc_state(dev_t dev) MSQ_HIDDEN;
void msq_probe_dc_learn(dev_t dev, int state) MSQ_HIDDEN;
/* Readahead of the device under dev, in bytes, from sysfs; 0 if unknown. */
uint64_t msq_probe_readahead(dev_t dev) MSQ_HIDDEN;
/* Whether this kernel has cachestat(2) and lets the process call it on fd
 * (learnt once from the first fd that answers). */
bool msq_probe_cachestat(int fd) MSQ_HIDDEN;
/* Whether the process runs under a seccomp filter (or cannot tell). */
bool msq_probe_seccomp(void) MSQ_HIDDEN;
/* Would a residency snapshot of fd (st: its fstat, fl: its F_GETFL) be
 * truthful?  As with mincore(2), only for files the process may write. */
bool msq_probe_may_write(int fd, const struct stat *st, int fl) MSQ_HIDDEN;

#endif

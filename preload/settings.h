/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The library's settings (settings.c): the MADVSEQ_* variables, read once
 * at initialisation (env.c is the only reader of the environment), and
 * whether the kernel's own drop-behind covers this process.  A leaf: it
 * calls only env.c and log.c.
 *
 * Thread contract: msq_cfg is written only by msq_settings_read(), during
 * initialisation, before any wrapper acts; read-only afterwards, from any
 * thread and from signal handlers.
 */
#ifndef MSQ_SETTINGS_H
#define MSQ_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#include <madvseq/policy.h>

#include "defs.h"

#define MSQ_STATS_PATH_MAX 4096

struct msq_shim_config {
	struct msq_policy policy;
	bool debug;             /* MADVSEQ_DEBUG */
	bool read_set;          /* MADVSEQ_READ is set: it wins over the daemon's policy */
	const char *stats_path; /* MADVSEQ_STATS ("" = none; at most
				 * MSQ_STATS_PATH_MAX - 1 bytes) */
	bool force_pagemap_read;/* MADVSEQ_PAGEMAP_SCAN=0: read entries instead */
	uint64_t write_free;    /* MADVSEQ_WRITE_FREE: a process's writes before
				 * write-behind (fdstream.c); four lags unset */
};

extern struct msq_shim_config msq_cfg MSQ_HIDDEN;

/* Fills msq_cfg from the environment (from init, once); a bad value gets
 * one warning naming the default. */
void msq_settings_read(void) MSQ_HIDDEN;
/* Whether the kernel's own drop-behind is on for this process (the sysctl,
 * or, with *by_cgroup set, its cgroup's switch).  Looked up on the first
 * call, not at start-up: a process that never streams reads no /proc. */
bool msq_kernel_covers(bool *by_cgroup) MSQ_HIDDEN;

#endif

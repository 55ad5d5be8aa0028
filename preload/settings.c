/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "settings.h"

#include <string.h>

#include "../common/config.h"
#include "../common/kernel_switch.h"
#include "env.h"
#include "log.h"

struct msq_shim_config msq_cfg = { .policy = MSQ_POLICY_DEFAULT, .stats_path = "" };
/* (Apart from msq_cfg, which would otherwise take a page of .data that
 * every process dirties at start-up.) */
static char g_stats_path[MSQ_STATS_PATH_MAX];

/* Reads one variable; a bad value gets one warning naming the default. */
#define READ_ENV(name, parse, field, what, deftext)                                   \
	do {                                                                          \
		const char *v_ = msq_env(name);                                       \
		if (v_ && parse(v_, field) < 0)                                       \
			msq_warn("%s='%s' is not %s; using %s", name, v_, what, deftext); \
	} while (0)

void msq_settings_read(void)
{
	char def[32];
	const char *v;
	bool scan = true;

	READ_ENV("MADVSEQ_DEBUG", msq_parse_bool, &msq_cfg.debug, "a boolean (yes or no)", "0");
	msq_log_set_debug(msq_cfg.debug);
	READ_ENV("MADVSEQ_MODE", msq_parse_mode, &msq_cfg.policy.mode,
		 "a mode (pageout, cold or off)", "pageout");
	READ_ENV("MADVSEQ_READ", msq_parse_read_mode, &msq_cfg.policy.read,
		 "a read mode (noreuse, advised, all or off)", "advised");
	/* Set, even to a value that is not a mode: the daemon's policy does
	 * not replace what the program's environment says. */
	msq_cfg.read_set = msq_env("MADVSEQ_READ") != NULL;
	msq_format_size(MSQ_DEFAULT_LAG, def, sizeof(def));
	READ_ENV("MADVSEQ_LAG", msq_parse_size, &msq_cfg.policy.lag, "a size (e.g. 16M)", def);
	READ_ENV("MADVSEQ_INTERVAL", msq_parse_duration_ns, &msq_cfg.policy.interval_ns,
		 "a duration from 100us to 1h (e.g. 20ms)", "20ms");
#ifdef MSQ_TEST_HOOKS
	/* A test hook: the fallback that reads one pagemap entry a page. */
	v = msq_test_env("MADVSEQ_PAGEMAP_SCAN");
	if (v && msq_parse_bool(v, &scan) < 0)
		msq_warn("MADVSEQ_PAGEMAP_SCAN='%s' is not a boolean (yes or no); using 1", v);
#endif
	msq_cfg.force_pagemap_read = !scan;
	/* Whole pages; at least one chunk, so a cursor's own chunk stays. */
	msq_cfg.policy.lag &= ~(uint64_t)4095;
	if (msq_cfg.policy.lag < MSQ_CHUNK) {
		if (msq_env("MADVSEQ_LAG"))
			msq_warn("MADVSEQ_LAG is below the 2M drop granularity; using 2M");
		msq_cfg.policy.lag = MSQ_CHUNK;
	}
	/* Four lags unless told (madvseq run says 0): see fdstream.c.  (The
	 * lag is final here: nothing changes it later.) */
	msq_cfg.write_free = 4 * msq_cfg.policy.lag;
	READ_ENV("MADVSEQ_WRITE_FREE", msq_parse_size, &msq_cfg.write_free, "a size (e.g. 64M, or 0)",
		 "4 lags");
	v = msq_env("MADVSEQ_STATS");
	if (v) {
		if (strlen(v) >= sizeof(g_stats_path)) {
			msq_warn("MADVSEQ_STATS path too long; no stats file");
		} else {
			strcpy(g_stats_path, v);
			msq_cfg.stats_path = g_stats_path;
		}
	}
}

/* -1: not looked up yet; else 0 (off), 1 (the sysctl), 2 (the cgroup's). */
static int g_kernel = -1;

bool msq_kernel_covers(bool *by_cgroup)
{
	int k = __atomic_load_n(&g_kernel, __ATOMIC_ACQUIRE);

	if (k < 0) {
		/* The kernel's switches: the sysctl, and the per-cgroup file
		 * of the process's own cgroup v2 (or an ancestor's).  Two
		 * threads may both look: same answer. */
		const char *procfs = NULL, *cgroupfs = NULL;
		bool cg = false;

#ifdef MSQ_TEST_HOOKS
		/* Test hooks: fixture trees in their place. */
		procfs = msq_test_env("MADVSEQ_PROCFS");
		cgroupfs = msq_test_env("MADVSEQ_CGROUPFS");
#endif
		k = msq_kernel_dropbehind_for(procfs ? procfs : "/proc", cgroupfs, 0, &cg) == 1;
		k = k ? 1 + cg : 0;
		__atomic_store_n(&g_kernel, k, __ATOMIC_RELEASE);
	}
	if (by_cgroup)
		*by_cgroup = k == 2;
	return k > 0;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Start-up, configuration, logging and fork handling of libmadvseq.so.
 */
#include "shim.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/kernel_switch.h"
#include "../common/sys.h"
#include "daemon_client.h"
#include "engine.h"
#include "env.h"
#include "locks.h"
#include "readpath.h"
#include "real.h"
#include "regions.h"
#include "track.h"

struct msq_shim_config msq_cfg = { .policy = MSQ_POLICY_DEFAULT, .stats_path = "" };
/* (Apart from msq_cfg, which would otherwise take a page of .data that
 * every process dirties at start-up.) */
static char g_stats_path[MSQ_STATS_PATH_MAX];
__thread int msq_guard;

enum { INIT_NONE, INIT_RUNNING, INIT_READY, INIT_DISABLED };
static int g_state = INIT_NONE;
static __thread bool t_initialising MSQ_TLS;
static pid_t g_owner;

void *msq_next_symbol(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

bool msq_is_owner(void)
{
	return getpid() == g_owner;
}

uint64_t msq_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void vlog(const char *fmt, va_list ap)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "libmadvseq[%d]: ", (int)getpid());

	if (n < 0 || msq_secure_execution())
		return;
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	/* The raw syscall, not stdio (no locks, no buffers shared with the
	 * program) nor the library's own write wrapper. */
	msq_sys_write_all(STDERR_FILENO, buf, (size_t)n);
}

void msq_warn(const char *fmt, ...)
{
	va_list ap;
	MSQ_PROTECT_ERRNO;

	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

void msq_debug(const char *fmt, ...)
{
	va_list ap;
	MSQ_PROTECT_ERRNO;

	if (!msq_cfg.debug)
		return;
	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

/* Reads one variable; a bad value gets one warning naming the default. */
#define READ_ENV(name, parse, field, what, deftext)                                   \
	do {                                                                          \
		const char *v_ = msq_env(name);                                       \
		if (v_ && parse(v_, field) < 0)                                       \
			msq_warn("%s='%s' is not %s; using %s", name, v_, what, deftext); \
	} while (0)

static void read_config(void)
{
	char def[32];
	const char *v;
	bool scan = true;

	READ_ENV("MADVSEQ_DEBUG", msq_parse_bool, &msq_cfg.debug, "a boolean (yes or no)", "0");
	READ_ENV("MADVSEQ_MODE", msq_parse_mode, &msq_cfg.policy.mode,
		 "a mode (pageout, cold or off)", "pageout");
	READ_ENV("MADVSEQ_READ", msq_parse_read_mode, &msq_cfg.policy.read,
		 "a read mode (noreuse, advised, all or off)", "advised");
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

/* Which locks the prepare handler got: bounded tries, since fork may be
 * called from a signal handler that interrupted their holder. */
static bool g_fork_table, g_fork_client;

static void atfork_prepare(void)
{
	g_fork_table = msq_regions_atfork_prepare();
	g_fork_client = msq_daemon_atfork_prepare();
}

static void atfork_parent(void)
{
	msq_daemon_atfork_parent(g_fork_client);
	msq_regions_atfork_parent(g_fork_table);
}

static void atfork_child(void)
{
	g_owner = getpid();
	msq_regions_atfork_child(g_fork_table);
	msq_engine_atfork_child();
	msq_daemon_atfork_child(g_fork_client);
	msq_readpath_atfork_child();
	msq_lowfd_atfork_child();
}

static void program_name(char *buf, size_t len)
{
	int fd = msq_sys_open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? msq_sys_read(fd, buf, len - 1) : -1;

	if (fd >= 0)
		msq_sys_close(fd);
	if (n <= 0)
		n = 0;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

static void init(void)
{
	char lag[32], comm[32];

	msq_guard++;
	g_owner = getpid();
	read_config();
	msq_daemon_init();
	msq_real_resolve();
	msq_readpath_init();
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	/* The stats file and the debug line report the kernel's switch:
	 * asked for, so looked up now (and not at _exit). */
	if (msq_cfg.debug || msq_cfg.stats_path[0])
		msq_kernel_covers(NULL);
	if (msq_cfg.debug) {
		bool by_cgroup, kernel = msq_kernel_covers(&by_cgroup);

		program_name(comm, sizeof(comm));
		msq_debug("active in %s: mode=%s lag=%s interval=%llums read=%s%s", comm,
			  msq_mode_name(msq_cfg.policy.mode),
			  msq_format_size(msq_cfg.policy.lag, lag, sizeof(lag)),
			  (unsigned long long)(msq_cfg.policy.interval_ns / 1000000),
			  msq_read_mode_name(msq_cfg.policy.read),
			  !kernel ? ""
			  : by_cgroup
				  ? "; the kernel's own drop-behind is on for this cgroup "
				    "(" MSQ_KERNEL_DROPBEHIND_CGFILE "): libmadvseq steps aside"
				  : "; the kernel's own drop-behind is on: libmadvseq steps aside");
	}
	msq_guard--;
}

bool msq_shim_initialised(void)
{
	return __atomic_load_n(&g_state, __ATOMIC_ACQUIRE) == INIT_READY;
}

bool msq_shim_ready(void)
{
	int st = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);

	if (__builtin_expect(st == INIT_READY, 1))
		return true;
	if (st == INIT_DISABLED || t_initialising)
		return false; /* re-entered from our own initialisation */
	st = INIT_NONE;
	if (__atomic_compare_exchange_n(&g_state, &st, INIT_RUNNING, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		t_initialising = true;
		init();
		t_initialising = false;
		__atomic_store_n(&g_state, INIT_READY, __ATOMIC_RELEASE);
		return true;
	}
	/* Another thread is initialising: wait for it (it never waits for us). */
	while ((st = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE)) == INIT_RUNNING)
		sched_yield();
	return st == INIT_READY;
}

__attribute__((constructor)) static void shim_constructor(void)
{
	msq_shim_ready();
}

__attribute__((destructor)) static void shim_destructor(void)
{
	/* A vfork child calling exit() runs this on its parent's memory; a
	 * fork child has its own (empty unless it tracked regions itself).
	 * exit() from a signal handler that interrupted the shim (guard
	 * raised) leaves everything as it is. */
	if (!msq_shim_initialised() || msq_guard || !msq_is_owner())
		return;
	msq_guard++;
	msq_engine_shutdown();
	__atomic_store_n(&g_state, INIT_DISABLED, __ATOMIC_RELEASE);
	msq_guard--;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The life of libmadvseq.so: initialisation, fork and exit.  Each step
 * calls the hooks the modules declare in their own headers; the settings,
 * the messages and who we are live in the leaf below (settings.c, log.c,
 * self.c, env.c).
 */
#include "shim.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/kernel_switch.h"
#include "../common/sys.h"
#include "daemon_client.h"
#include "engine_thread.h"
#include "fdstats.h"
#include "fdstream.h"
#include "locks.h"
#include "log.h"
#include "real.h"
#include "regions.h"
#include "settings.h"
#include "statsfile.h"

enum { INIT_NONE, INIT_RUNNING, INIT_READY, INIT_DISABLED };
static int g_state = INIT_NONE;
static __thread bool t_initialising MSQ_TLS;

/* ---- fork ---------------------------------------------------------------- */

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
	msq_self_init();
	msq_regions_atfork_child(g_fork_table);
	msq_ethread_atfork_child();
	msq_statsfile_atfork_child();
	msq_daemon_atfork_child(g_fork_client);
	msq_fds_atfork_child();
	msq_lowfd_atfork_child();
}

/* ---- initialisation ------------------------------------------------------ */

/* What the daemon client reports: the read path's totals. */
static void daemon_totals(struct msq_daemon_totals *t)
{
	struct msq_read_totals r;

	msq_stats_totals(&r);
	*t = (struct msq_daemon_totals){ r.files, r.streamed, r.dropped, r.kept };
}

static const struct msq_daemon_hooks g_daemon_hooks = {
	.read_policy = msq_fds_policy,
	.totals = daemon_totals,
};

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
	msq_self_init();
	msq_settings_read();
	msq_daemon_init(&g_daemon_hooks);
	msq_real_resolve();
	msq_fds_init();
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

/* ---- exit ---------------------------------------------------------------- */

void msq_shim_exit_now(void)
{
	msq_ethread_exit_flush();
	if (msq_cfg.stats_path[0])
		msq_statsfile_write();
}

/*
 * At exit(): the daemon's regions first (their final drop, which the
 * daemon makes and is waited for without the table lock), then every
 * other region's, made here (and the daemon's too if it did not confirm
 * its drop), then the read path's report to the daemon and the stats
 * file.
 */
static void exit_sequence(void)
{
	bool stopped = msq_ethread_stop();
	bool daemon_took = msq_daemon_release_all();

	if (stopped)
		msq_ethread_retire_all(daemon_took);
	msq_daemon_report_at_exit();
	if (msq_cfg.stats_path[0])
		msq_statsfile_write();
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
	exit_sequence();
	__atomic_store_n(&g_state, INIT_DISABLED, __ATOMIC_RELEASE);
	msq_guard--;
}

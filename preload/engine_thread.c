/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "engine_thread.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/fault.h"
#include "../common/follow.h"
#include "../common/frontier.h"
#include "../common/sys.h"
#include "daemon_client.h"
#include "locks.h"
#include "log.h"
#include "self.h"
#include "settings.h"

/* Where the pagemap descriptor goes, away from the numbers programs use. */
#define HIGH_FD 512
#define MIN_SLEEP_NS (UINT64_C(1) * 1000 * 1000)
/* Aim for about this much to drop per cycle while streams run. */
#define TARGET_PER_CYCLE MSQ_CHUNK

/* All below is protected by the table lock. */
static struct msq_engine g_eng = { .pm = { .fd = -1 }, .pidfd = -1 };
static bool g_eng_ready, g_running, g_stopping;
/* A new region wakes the engine at once: a stream read from a warm cache
 * moves a gigabyte a second, and its first cycle must not wait. */
static pthread_cond_t g_kick_cond;
static bool g_kick, g_kick_cond_ready;
static struct msq_ethread_totals g_done; /* totals of regions no longer tracked */

static int ensure_pagemap(void)
{
	int rc;

	if (!g_eng_ready) {
		msq_engine_init(&g_eng, -1, msq_cfg.policy.lag);
		g_eng_ready = true;
	}
	if (g_eng.pm.fd >= 0 && msq_pagemap_check(&g_eng.pm) == 0)
		return 0;
	/* Closed or replaced behind our back (programs that close every fd).
	 * Opened at a low number, then moved up: not while the program
	 * dup2()s (locks.h); the next round tries again. */
	g_eng.pm.fd = -1;
	if (!msq_lowfd_begin())
		return -EAGAIN;
	rc = msq_pagemap_open(&g_eng.pm, "/proc", 0, HIGH_FD);
	msq_lowfd_end();
	if (rc == 0 && msq_cfg.force_pagemap_read)
		g_eng.pm.scan = false;
	return rc;
}

/* The engine drops from the CPU the program's main thread runs on
 * (common/follow.h).  Its /proc/self/stat is opened as the pagemap is;
 * both belong to the engine thread alone. */
static struct msq_follow g_follow;
static int g_statfd = -1;
static dev_t g_stat_dev;
static ino_t g_stat_ino;

static int self_stat_fd(void)
{
	struct stat st;
	int fd;

	if (msq_held_same(g_statfd, g_stat_dev, g_stat_ino))
		return g_statfd;
	g_statfd = -1;
	if (!msq_lowfd_begin())
		return -EAGAIN;
	fd = msq_open_held("/proc/self/stat", HIGH_FD, &st);
	msq_lowfd_end();
	if (fd < 0)
		return fd;
	g_stat_dev = st.st_dev;
	g_stat_ino = st.st_ino;
	return g_statfd = fd;
}

/* Called by the engine thread, without the table lock (a move to another
 * CPU waits for that CPU), after a round that dropped something. */
static void follow_reader(void)
{
	struct msq_proc_stat st;
	char buf[1024];
	ssize_t n;
	int fd = self_stat_fd();

	if (fd < 0 || (n = msq_sys_pread(fd, buf, sizeof(buf) - 1, 0)) <= 0)
		return;
	buf[n] = '\0';
	if (msq_proc_stat_parse(buf, &st) < 0)
		return;
	/* The main thread and this one: the reader is the main thread. */
	msq_follow_cpu(&g_follow, st.threads == 2 ? st.cpu : -1);
}

static void add_stats(const struct msq_stream_stats *st)
{
	g_done.dropped += st->dropped;
	g_done.kept += st->kept;
	g_done.cycles += st->cycles;
	g_done.errors += st->errors;
}

static void account(const struct msq_region *r)
{
	g_done.regions++;
	add_stats(&r->s.st);
}

static void report_region(const struct msq_region *r, const char *why)
{
	char d[32], k[32];

	msq_debug("region #%" PRIu64 " %#" PRIx64 "-%#" PRIx64 " %s (%s, %s): dropped %s, kept %s, "
		  "%" PRIu64 " cycles, %" PRIu64 " errors%s%s",
		  r->id, r->s.start, r->s.end, r->s.path ? r->s.path : "?", msq_drop_how_name(r->s.how),
		  why, msq_format_size(r->s.st.dropped, d, sizeof(d)),
		  msq_format_size(r->s.st.kept, k, sizeof(k)), r->s.st.cycles, r->s.st.errors,
		  r->s.st.last_error ? " last: " : "",
		  r->s.st.last_error ? strerror(-r->s.st.last_error) : "");
}

/* Whether the engine leaves r to someone else: the daemon (while it is
 * connected) or the kernel's own drop-behind. */
static bool not_ours(const struct msq_region *r)
{
	return r->kernel || (r->delegated && msq_daemon_ready());
}

/*
 * Locked: the drops madvseqd decided and asked this process to make
 * (MSQ_MSG_DROP), made where they lie in the region handed over to it that
 * they name, as this engine would make them.  Made here because this
 * thread runs where the reader does (follow_reader): the same MADV_PAGEOUT
 * from the daemon's process flushes the reader's TLB from another CPU
 * every 31 pages.
 */
static uint64_t make_asked_drops(void)
{
	static struct msq_daemon_ask asks[MSQ_DAEMON_ASKS_MAX]; /* the engine thread's */
	size_t n = msq_daemon_take_asks(asks);
	uint64_t total = 0, now = msq_now_ns();

	for (size_t k = 0; k < n; k++) {
		for (size_t i = 0;; i++) {
			struct msq_region *r = msq_regions_at(i);
			int64_t d;

			if (!r)
				break;
			if (r->id != asks[k].id || r->kernel || !not_ours(r) ||
			    asks[k].end <= r->s.start || asks[k].start >= r->s.end)
				continue;
			d = msq_stream_drop_asked(&g_eng, &r->s, asks[k].start, asks[k].end,
						  asks[k].mode, now);
			if (d > 0)
				total += (uint64_t)d;
		}
	}
	g_done.asked += total;
	return total;
}

/* Locked: drops all of s the policy lets go (its reader is done). */
static void final_drop(struct msq_stream *s)
{
	if (msq_is_owner() && ensure_pagemap() == 0)
		msq_stream_cycle(&g_eng, s, msq_now_ns(), true);
}

static void retire(struct msq_region *part, const char *why, bool daemons_too)
{
	if (!part->kernel && (daemons_too || !not_ours(part)))
		final_drop(&part->s);
	account(part);
	report_region(part, why);
}

void msq_ethread_retire(struct msq_region *part, void *arg)
{
	retire(part, arg ? arg : "unmapped", false);
}

/* At exit, when the daemon did not confirm the final drop of its parts. */
static void retire_with_daemons(struct msq_region *part, void *arg)
{
	retire(part, arg, true);
}

void msq_ethread_retire_handing_over(struct msq_region *part, void *handover)
{
	struct msq_handover *h = handover;

	if (!part->kernel && not_ours(part) && h->n < MSQ_HANDOVER_MAX &&
	    msq_stream_clip(&h->s[h->n], &part->s, part->s.start, part->s.end) == 0)
		h->n++;
	retire(part, "unmapped", false);
}

void msq_ethread_handover_end(struct msq_handover *h, bool daemon_took)
{
	for (size_t i = 0; i < h->n; i++) {
		struct msq_stream *s = &h->s[i];
		char d[32];

		if (!daemon_took) {
			final_drop(s); /* (its region was counted when it left the table) */
			add_stats(&s->st);
			msq_debug("%#" PRIx64 "-%#" PRIx64 ": final drop made here: dropped %s", s->start,
				  s->end, msq_format_size(s->st.dropped, d, sizeof(d)));
		}
		msq_stream_free(s);
	}
	h->n = 0;
}

void msq_ethread_account(struct msq_region *part)
{
	account(part);
	report_region(part, "untracked");
}

static void *engine_main(void *arg)
{
	uint64_t sleep_ns = MIN_SLEEP_NS, last_moved_ns = 0, dropped_last = 0;
	sigset_t all;

	(void)arg;
	msq_guard = 1; /* everything this thread calls is the shim's own */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	msq_follow_init(&g_follow); /* the affinity of the thread that started it */
	for (;;) {
		uint64_t dropped = 0, moved = 0, until = msq_now_ns() + sleep_ns;
		struct timespec ts = { (time_t)(until / 1000000000), (long)(until % 1000000000) };

		msq_regions_lock();
		while (!g_kick && !g_stopping &&
		       pthread_cond_timedwait(&g_kick_cond, msq_regions_mutex(), &ts) == 0)
			;
		if (g_kick)
			sleep_ns = MIN_SLEEP_NS;
		g_kick = false;
		msq_regions_unlock();
		bool pm_ok = false;

		if (dropped_last)
			follow_reader();

		for (size_t i = 0;; i++) {
			struct msq_region *r;

			msq_regions_lock();
			if (g_stopping) {
				g_running = false;
				msq_regions_unlock();
				return NULL;
			}
			if (i == 0)
				msq_daemon_sync(); /* hands regions to madvseqd, or takes them back */
			r = msq_regions_at(i);
			if (!r) {
				msq_regions_unlock();
				break;
			}
			/* The pagemap descriptor is checked once a round, not once
			 * a region. */
			if (i == 0)
				pm_ok = ensure_pagemap() == 0;
			if (i == 0 && pm_ok)
				dropped += make_asked_drops();
			if (!not_ours(r) && pm_ok) {
				uint64_t at = msq_stream_progress(&r->s);
				int64_t d = msq_stream_cycle(&g_eng, &r->s, msq_now_ns(), false);
				uint64_t now_at = msq_stream_progress(&r->s);

				if (d > 0)
					dropped += (uint64_t)d;
				moved += now_at > at ? now_at - at : at - now_at;
			}
			msq_regions_unlock();
		}
		/* How late this round came after the last one that saw a
		 * stream move (a statistic: read at exit by another thread). */
		if (moved) {
			uint64_t now = msq_now_ns();

			if (last_moved_ns && now - last_moved_ns > g_done.max_round_gap_ns)
				__atomic_store_n(&g_done.max_round_gap_ns, now - last_moved_ns,
						 __ATOMIC_RELAXED);
			last_moved_ns = now;
		} else {
			last_moved_ns = 0;
		}
		/* Fast streams: about TARGET_PER_CYCLE a cycle; idle: back to
		 * the configured interval. */
		sleep_ns = msq_next_period(sleep_ns, dropped, moved, TARGET_PER_CYCLE, MIN_SLEEP_NS,
					   msq_cfg.policy.interval_ns);
		dropped_last = dropped;
	}
}

void msq_ethread_start(void)
{
	pthread_attr_t attr;
	pthread_t t;
	sigset_t all, old;
	int rc;

	if (g_running || g_stopping) {
		g_kick = true;
		pthread_cond_signal(&g_kick_cond);
		return;
	}
	if (MSQ_FAULT("madvseq/thread/create")) {
		msq_debug("engine thread not started (fault injected); will retry");
		return;
	}
	if (!g_kick_cond_ready) {
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&g_kick_cond, &ca);
		pthread_condattr_destroy(&ca);
		g_kick_cond_ready = true;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	/* Created with every signal blocked, so none is ever delivered to it. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&t, &attr, engine_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc) {
		msq_debug("engine thread not started: %s; will retry", strerror(rc));
		return;
	}
	pthread_setname_np(t, "madvseq");
	g_running = true;
}

bool msq_ethread_stop(void)
{
	bool locked = msq_lock_bounded(msq_regions_mutex(), MSQ_SHUTDOWN_LOCK_NS);

	if (locked) {
		/* (and once the engine sees this, it hands nothing more to
		 * the daemon) */
		g_stopping = true;
		if (g_kick_cond_ready)
			pthread_cond_signal(&g_kick_cond);
		msq_regions_unlock();
	}
	return locked;
}

void msq_ethread_retire_all(bool daemon_took)
{
	char d[32], k[32];

	if (!msq_lock_bounded(msq_regions_mutex(), MSQ_SHUTDOWN_LOCK_NS))
		return;
	msq_regions_clear(daemon_took ? msq_ethread_retire : retire_with_daemons, (void *)"at exit");
	if (msq_cfg.debug && g_done.regions)
		msq_debug("totals: %" PRIu64 " regions, dropped %s, kept %s (strongly "
			  "referenced), %" PRIu64 " errors",
			  g_done.regions, msq_format_size(g_done.dropped, d, sizeof(d)),
			  msq_format_size(g_done.kept, k, sizeof(k)), g_done.errors);
	msq_regions_unlock();
}

void msq_ethread_totals(struct msq_ethread_totals *t)
{
	*t = g_done;
}

void msq_ethread_exit_flush(void)
{
	/* The lock may be held by the engine (briefly) or by the very code
	 * this _exit interrupted (a signal handler): give up after ~50 ms,
	 * and still write the stats. */
	if (msq_lock_bounded(msq_regions_mutex(), MSQ_EXIT_LOCK_NS)) {
		g_stopping = true;
		for (size_t i = 0;; i++) {
			struct msq_region *r = msq_regions_at(i);

			if (!r)
				break;
			/* The daemon's regions: its exit drop takes them. */
			if (!not_ours(r))
				msq_stream_drop_all_on_exit(&r->s);
			account(r);
		}
		/* Left locked: the process ends now, and nothing may start
		 * another operation on the table meanwhile. */
	}
}

void msq_ethread_atfork_child(void)
{
	/* The child has no engine thread; its pagemap is its own. */
	if (g_eng.pm.fd >= 0)
		msq_sys_close(g_eng.pm.fd);
	g_eng.pm.fd = -1;
	if (g_statfd >= 0)
		msq_sys_close(g_statfd); /* the parent's */
	g_statfd = -1;
	g_running = false;
	g_kick = false;
	g_kick_cond_ready = false; /* re-initialised when the child starts one */
	memset(&g_done, 0, sizeof(g_done));
}

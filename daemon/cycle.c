/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The management cycle: the shared engine (common/stream.c) run against
 * another process, through its pidfd (process_madvise) and its
 * /proc/PID/pagemap; a shim is asked to make the drops itself (asks.c).
 * Advice is only ever MADV_PAGEOUT or MADV_COLD, which never lose data
 * (dirty pages are written back first, anonymous pages stay without swap),
 * so even a range the client unmapped a moment ago cannot be harmed.
 * Clients that took no page fault since last time are left alone (their
 * /proc/PID/stat and schedstat say so cheaply).
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asks.h"
#include "client.h"
#include "cycle.h"
#include "msqd.h"
#include "log.h"
#include "refs.h"
#include "regions.h"
#include "util.h"

#define IDLE_RECHECK_NS (UINT64_C(1000) * 1000 * 1000)
/* How long the daemon stays on a reader's CPU with nothing to drop. */
#define FOLLOW_HOLD_NS (UINT64_C(1000) * 1000 * 1000)
/* The most one cycle takes before it leaves the rest to the next. */
#define CYCLE_BUDGET_NS (UINT64_C(20) * 1000 * 1000)
/* Aim for about this much to drop per cycle while streams run (as the
 * shim's engine does). */
#define TARGET_PER_CYCLE (4 * MSQ_CHUNK)

/* Time on CPU of the process's main thread, from /proc/PID/schedstat:
 * much cheaper to read than stat. */
static int read_runtime(const struct msqd_client *c, uint64_t *out)
{
	char buf[128];
	ssize_t n;

	if (c->schedfd < 0)
		return -EBADF;
	n = pread(c->schedfd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	*out = strtoull(buf, NULL, 10);
	return 0;
}

/* Reads the client's /proc/PID/stat: its faults (minflt + majflt of the
 * whole process), threads and the CPU its main thread last ran on. */
static int read_stat(struct msqd_client *c, struct msq_proc_stat *st)
{
	char buf[1024];
	ssize_t n;
	int rc;

	if (c->statfd < 0)
		return -EBADF;
	n = pread(c->statfd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	if ((rc = msq_proc_stat_parse(buf, st)) < 0)
		return rc;
	c->threads = st->threads;
	return 0;
}

/* minflt + majflt of the whole process. */
static int read_faults(struct msqd_client *c, uint64_t *out)
{
	struct msq_proc_stat st;
	uint64_t rt;
	int rc;

	/* Single-threaded and not run since last time: no fault either. */
	if (c->threads == 1 && read_runtime(c, &rt) == 0) {
		if (rt == c->runtime) {
			*out = c->faults;
			return 0;
		}
		c->runtime = rt;
	}
	if ((rc = read_stat(c, &st)) < 0)
		return rc;
	*out = st.faults;
	return 0;
}

/* Before a client that dropped last time is cycled again: the daemon moves
 * to the CPU its reader runs on (common/follow.h), where the unmaps of its
 * MADV_PAGEOUT need no TLB shootdown of the reader's CPU.  Followed: a
 * process that does not drop itself what it is asked (one without the
 * library), of one thread, or of two, whose main thread may run on one CPU
 * only.  A reader free to move is not: the daemon's drops make it wait on
 * its CPU, the scheduler moves it to the idle one, and the daemon after it
 * (a LevelDB scan of 5 GB: 2,000 moves and as many TLB-shootdown IPIs as
 * with no following, 27-30 thousand, and the scan at 790-890 MB/s instead
 * of 950-1,040). */
static void follow_reader(struct msqd *d, struct msqd_client *c)
{
	struct msq_proc_stat st;
	cpu_set_t may;

	if (!d->cyc.follow_ready) {
		msq_follow_init(&d->cyc.follow);
		d->cyc.follow_ready = true;
	}
	if (c->takes_drops)
		st.cpu = -1; /* it drops on its reader's CPU itself (asks.c): no stat read */
	else if (read_stat(c, &st) < 0)
		return;
	else if (st.threads > 2)
		st.cpu = -1; /* its readers: not known */
	else if (sched_getaffinity(c->pid, sizeof(may), &may) < 0 || CPU_COUNT(&may) != 1)
		st.cpu = -1; /* free to move (or gone) */
	if (st.cpu != d->cyc.follow.bound) {
		msq_follow_cpu(&d->cyc.follow, st.cpu);
		if (st.cpu >= 0 && d->cyc.follow.bound == st.cpu)
			d->cyc.follows++;
	}
}

/* The client's engine set for its cgroup's policy. */
static void engine_for_policy(struct msqd *d, struct msqd_client *c)
{
	const struct msqd_policy *p = c->cg->pol;

	c->eng.lag = p->lag;
	c->eng.filter = p->strong_refs && d->refs.ok ? msqd_refs_filter : NULL;
	c->eng.filter_arg = NULL; /* set for each cycle (cycle_region) */
}

/* Drops s as its policy says (one cycle, or all of it when flush);
 * counts what went.  Returns the cycle's result. */
static int64_t cycle_region(struct msqd *d, struct msqd_client *c, struct msq_stream *s, uint64_t id,
			    bool flush)
{
	uint64_t before = s->st.dropped, kept = s->st.kept, adv = c->eng.advice_cpu_ns;
	uint64_t at = msq_stream_progress(s), now_at;
	size_t ncursors = s->cursors.n;
	struct msqd_refs_check chk = { d, c->cg };
	struct msqd_ask_to ask = { c->fd, id, &d->cnt.asked };
	int64_t rc;

	s->how = c->cg->pol->mode == MSQ_MODE_COLD ? MSQ_DROP_COLD : MSQ_DROP_PAGEOUT;
	c->eng.filter_arg = &chk;
	/* A shim drops what a cycle decides itself (asks.c); a final drop is
	 * made here, as the client waits for it before it unmaps. */
	if (c->takes_drops && c->fd >= 0 && !flush) {
		c->eng.ask = msqd_ask_drops;
		c->eng.ask_arg = &ask;
	}
	rc = msq_stream_cycle(&c->eng, s, d->now_ns, flush);
	c->eng.filter_arg = NULL;
	c->eng.ask = NULL;
	c->eng.ask_arg = NULL;
	d->cyc.advice_cpu_ns += c->eng.advice_cpu_ns - adv;
	c->cg->dropped += s->st.dropped - before;
	c->cg->kept_mapped += s->st.kept - kept;
	d->cnt.dropped += s->st.dropped - before;
	/* How far its readers moved on (a sum of cursor addresses: only
	 * comparable while the cursors are the same ones). */
	now_at = msq_stream_progress(s);
	if (s->cursors.n == ncursors && now_at > at)
		c->cg->streamed += now_at - at;
	return rc;
}

/* process_madvise said ESRCH: the client is exiting, but its pages stay
 * mapped until its pidfd says it has exited (msqd_client_closing). */
static void address_space_gone(struct msqd *d, struct msqd_client *c)
{
	c->dead = true;
	msqd_client_closing(d, c);
}

int64_t msqd_region_final_drop(struct msqd *d, struct msqd_client *c, size_t i, uint64_t start,
			       uint64_t end)
{
	struct msqd_region *r = c->r[i];
	struct msq_stream part;
	uint64_t t0;
	int64_t rc;

	/* (A snapshot still being taken: what is left of it, now, within the
	 * walk budget; else nothing is dropped.) */
	if (!c->cg || c->dead || c->cg->pol->mode == MSQ_MODE_OFF || !msqd_gate_open(d, c->cg) ||
	    !msqd_region_snapshot_now(d, c, r, msqd_now_ns() + d->set.conf.walk_budget_ns) ||
	    (r->kernel_fs && msqd_kernel_covers(d, c->cg)))
		return 0;
	if (start < r->s.start)
		start = r->s.start;
	if (end > r->s.end)
		end = r->s.end;
	if (start >= end || msq_stream_clip(&part, &r->s, start, end) < 0)
		return 0;
	engine_for_policy(d, c);
	t0 = msqd_now_ns();
	rc = cycle_region(d, c, &part, r->id, true);
	/* (What a client finds cached after its munmap is explained here.) */
	/* (kept: strong references, and what stayed mapped after the advice) */
	log_debug("pid %d: final drop of %#llx-%#llx: %lld KiB dropped, %llu KiB kept (%s), %llu us",
		  (int)c->pid, (unsigned long long)start, (unsigned long long)end,
		  (long long)(rc > 0 ? rc >> 10 : 0),
		  (unsigned long long)(msq_extents_total(&part.kept) >> 10),
		  rc < 0 ? strerror((int)-rc) : "ok", (unsigned long long)((msqd_now_ns() - t0) / 1000));
	msq_stream_free(&part);
	if (rc == -ESRCH) {
		address_space_gone(d, c);
		return 0;
	}
	return rc;
}

uint64_t msqd_cycle(struct msqd *d)
{
	uint64_t t0 = msqd_now_ns(), total = 0, moved = 0, left_to_kernel = 0;
	/* Idle clients due for a look are spread over cycles, a few each,
	 * so thousands of them never make one cycle long. */
	unsigned rechecks = 0, budget = d->cl.n / 512 + 1;

	msqd_kernel_recheck(d);
	bool whole = true;

	if (!d->cyc.round)
		d->cyc.round = 1;
	for (struct msqd_client *c = d->cl.list, *next; c; c = next) {
		const struct msqd_policy *p;

		next = c->next;
		/* Each client once per round; a round longer than
		 * CYCLE_BUDGET_NS (hundreds of new clients, each looked at
		 * whole the first time) goes on in the next cycle, so that
		 * the daemon keeps answering meanwhile. */
		if (c->cycle_round == d->cyc.round)
			continue;
		if (msqd_now_ns() - t0 >= CYCLE_BUDGET_NS) {
			whole = false;
			break;
		}
		c->cycle_round = d->cyc.round;
		if (!c->nr || !c->cg || c->dead || c->closing_ns)
			continue;
		p = c->cg->pol;
		if (p->mode == MSQ_MODE_OFF || !msqd_gate_open(d, c->cg))
			continue;
		/* Present pages appear only through the process's own page
		 * faults: with no new fault and nothing left to do last time,
		 * its regions are as they were.  Looked at anyway every
		 * IDLE_RECHECK_NS (kept pages are retried, readers may have
		 * been paged out by reclaim). */
		if (c->busy) {
			/* It dropped something last cycle: look again without
			 * comparing its faults; they are compared again once it
			 * goes quiet.  Its stat is read for its CPU only. */
			c->faults = UINT64_MAX;
			follow_reader(d, c);
		} else {
			uint64_t f = 0;
			bool known = read_faults(c, &f) == 0;

			if (known && f == c->faults &&
			    (d->now_ns - c->full_ns < IDLE_RECHECK_NS || rechecks >= budget)) {
				d->cyc.idle_skips++;
				continue;
			}
			if (known && f == c->faults)
				rechecks++;
			c->faults = known ? f : UINT64_MAX;
		}
		/* Before acting: the address space is still the one the
		 * client's rights were checked for (client.c). */
		if (!msqd_client_same_mm(c)) {
			int rc = msqd_client_may_act(d, c);

			if (rc == -EPERM && c->fd < 0)
				msqd_client_drop(d, c, "exec'd (found again by the next scan)");
			else if (rc == -EPERM)
				msqd_client_deny(d, c, "exec'd since HELLO");
			else if (rc < 0)
				address_space_gone(d, c);
			continue;
		}
		c->full_ns = d->now_ns;
		c->busy = false;
		engine_for_policy(d, c);
		for (size_t i = 0; i < c->nr; i++) {
			struct msq_stream *s = &c->r[i]->s;
			uint64_t before = s->st.dropped, at = msq_stream_progress(s), now_at;
			int64_t rc;

			if (c->r[i]->kernel_fs && msqd_kernel_covers(d, c->cg)) {
				left_to_kernel++;
				continue;
			}
			if (c->r[i]->snapping)
				continue; /* what was cached before is not known yet */
			rc = cycle_region(d, c, s, c->r[i]->id, false);
			/* (A mapping read with no advice is dropped at the look
			 * after one that found news, which may find its reader
			 * gone and making no fault any more.  A quiet one needs
			 * no visit: a reader back in it makes faults.) */
			if (s->st.dropped != before || rc < 0 || (s->unadvised && !s->rt.idle))
				c->busy = true;
			total += s->st.dropped - before;
			now_at = msq_stream_progress(s);
			moved += now_at > at ? now_at - at : at - now_at;
			if (rc == -ESRCH) {
				address_space_gone(d, c);
				break;
			}
			if (rc < 0 && rc != -EAGAIN && s->st.errors == 1)
				log_debug("pid %d: region %#llx: %s", (int)c->pid,
					  (unsigned long long)s->start, strerror((int)-rc));
		}
	}
	/* Nothing to drop for a while: back to the daemon's own affinity.
	 * Not at the first cycle that drops nothing: a stream is dropped
	 * every other cycle or so, and each move is a migration. */
	if (total)
		d->cyc.dropped_ns = d->now_ns;
	else if (d->cyc.follow_ready && d->now_ns - d->cyc.dropped_ns >= FOLLOW_HOLD_NS)
		msq_follow_cpu(&d->cyc.follow, -1);
	d->cyc.kernel_regions = left_to_kernel;
	if (whole)
		d->cyc.round++;
	d->cyc.n++;
	d->cyc.last_ns = msqd_now_ns() - t0;
	if (d->cyc.last_ns > d->cyc.max_ns)
		d->cyc.max_ns = d->cyc.last_ns;
	/* Fast streams: about TARGET_PER_CYCLE a cycle; idle: back to the
	 * configured interval. */
	d->cyc.sleep_ns = msq_next_period(d->cyc.sleep_ns, total, moved, TARGET_PER_CYCLE, 1000000,
				      d->set.conf.interval_ns);
	if (!whole)
		d->cyc.sleep_ns = 1000000; /* the rest of the round, soon */
	return total;
}

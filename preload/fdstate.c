/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The read path's per-fd states: allocation, and retirement after an RCU
 * grace period. */
#include "fdstate.h"

#include <urcu/urcu-bp.h>

#include "objpool.h"
#include "self.h"

/* Per-fd states: from a lock-free pool (objpool.h), since read() and
 * write() may classify an fd inside a signal handler. */
static struct msq_pool g_states = MSQ_POOL_INIT(sizeof(struct msq_fd));

struct msq_fd *msq_fdstate_new(void)
{
	struct msq_fd *s = msq_pool_alloc(&g_states);

	if (s)
		msq_run_init(&s->st);
	return s;
}

void msq_fdstate_free(struct msq_fd *s)
{
	msq_pool_free(&g_states, s);
}

/*
 * States taken out of the fd table are freed after an RCU grace period,
 * RETIRE_BATCH at a time: one urcu_bp_synchronize_rcu() (a membarrier and
 * two sigprocmask calls) per close() would cost copies of many small files
 * dearly.  The list is pushed lock-free and taken whole with one exchange.
 */
#define RETIRE_BATCH 32
static struct msq_fd *g_retired;
static unsigned g_nretired;

void msq_fdstate_retire(struct msq_fd *s)
{
	struct msq_fd *head = __atomic_load_n(&g_retired, __ATOMIC_RELAXED);
	unsigned n = 0;

	msq_stats_streamed(s); /* out of the table: msq_stats_totals no longer sees it */

	do
		s->retired_next = head;
	while (!__atomic_compare_exchange_n(&g_retired, &head, s, false, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
	if (__atomic_add_fetch(&g_nretired, 1, __ATOMIC_RELAXED) < RETIRE_BATCH)
		return;
	if (!msq_is_owner())
		return; /* a vfork child: no grace period here, the parent frees them */
	head = __atomic_exchange_n(&g_retired, NULL, __ATOMIC_ACQUIRE);
	if (!head)
		return;
	urcu_bp_synchronize_rcu(); /* no reader still sees any of them */
	while (head) {
		struct msq_fd *next = head->retired_next;

		msq_fdstate_free(head);
		head = next;
		n++;
	}
	__atomic_sub_fetch(&g_nretired, n, __ATOMIC_RELAXED);
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "locks.h"

#include <time.h>

#include "../common/sys.h"

bool msq_lock_bounded(pthread_mutex_t *m, uint64_t ns)
{
	struct timespec nap = { 0, 100 * 1000 };
	uint64_t tries = ns / 100000 + 1;

	while (pthread_mutex_trylock(m) != 0) {
		if (!--tries)
			return false;
		MSQ_SYSCALL(SYS_nanosleep, &nap, NULL);
	}
	return true;
}

static int g_lowfd_window; /* the library holds a descriptor at a low number */
static int g_lowfd_dups;   /* dup2/dup3 calls of the program in flight */

bool msq_lowfd_begin(void)
{
	__atomic_store_n(&g_lowfd_window, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&g_lowfd_dups, __ATOMIC_SEQ_CST) == 0)
		return true;
	__atomic_store_n(&g_lowfd_window, 0, __ATOMIC_SEQ_CST);
	return false;
}

void msq_lowfd_end(void)
{
	__atomic_store_n(&g_lowfd_window, 0, __ATOMIC_SEQ_CST);
}

void msq_lowfd_dup_enter(void)
{
	struct timespec nap = { 0, 20 * 1000 };
	uint64_t tries = MSQ_LOWFD_WAIT_NS / 20000;

	__atomic_add_fetch(&g_lowfd_dups, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&g_lowfd_window, __ATOMIC_SEQ_CST) && tries--)
		MSQ_SYSCALL(SYS_nanosleep, &nap, NULL);
}

void msq_lowfd_dup_leave(void)
{
	__atomic_sub_fetch(&g_lowfd_dups, 1, __ATOMIC_SEQ_CST);
}

void msq_lowfd_atfork_child(void)
{
	g_lowfd_window = 0;
	g_lowfd_dups = 0;
}

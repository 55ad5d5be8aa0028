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

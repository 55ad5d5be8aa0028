/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "self.h"

#include <time.h>
#include <unistd.h>

__thread int msq_guard;
static pid_t g_owner;

void msq_self_init(void)
{
	g_owner = getpid();
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

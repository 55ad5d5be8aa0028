/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Small helpers every part of madvseqd uses: scope-exit cleanup (systemd
 * style), the monotonic clock, and whether a pidfd's process still lives.
 */
#ifndef MSQD_UTIL_H
#define MSQD_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* Frees *p with free() at scope exit (systemd style). */
#define _cleanup_(f) __attribute__((cleanup(f)))
static inline void freep(void *p) { free(*(void **)p); }
void msqd_closep(int *fd);
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(msqd_closep)

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t msqd_now_ns(void);
/* CLOCK_REALTIME in nanoseconds: the clock of file times (statx). */
uint64_t msqd_realtime_ns(void);

/* Whether the process behind pidfd has not exited yet: signal 0 through
 * pidfd_send_signal, which finds the process before it checks the right
 * to signal it.  So EPERM also means alive: the unit's bounding set has no
 * CAP_KILL, and root without it may not signal another user's process.
 * Anything read from /proc/PID while this says true was that process's,
 * not a later one with its pid. */
bool msqd_pidfd_alive(int pidfd);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The shim's side of the madvseqd protocol (include/madvseq/protocol.h).
 *
 * When a daemon listens on MADVSEQ_SOCKET (default
 * /run/madvseq/madvseqd.sock), the engine thread connects to it, hands
 * over every tracked region and, once the daemon confirms one, marks it
 * delegated so the in-process engine leaves it alone.  When the daemon
 * refuses a region, is not there, or goes away, the regions are the
 * engine's again at its next cycle; it retries the daemon later (1 s,
 * growing to 8 s) and re-registers everything when it answers.
 *
 * Everything runs with the region table lock held, on the engine thread,
 * except msq_daemon_forget_locked (any thread that holds the lock).  All
 * socket calls are non-blocking: nothing here ever stalls the program.
 * The socket is close-on-exec, at a descriptor number >= 520, and is
 * never used again if the program closes or replaces it.
 */
#ifndef MSQ_DAEMON_CLIENT_H
#define MSQ_DAEMON_CLIENT_H

#include <stdint.h>

#include "shim.h"

/* From init(): reads MADVSEQ_SOCKET and MADVSEQ_DAEMON (0: never connect). */
void msq_daemon_init(void) MSQ_HIDDEN;
/* Engine thread, table lock held: (re)connects when due, reads replies,
 * registers new regions, sets each region's delegated flag. */
void msq_daemon_sync(void) MSQ_HIDDEN;
/* Table lock held: [start, end) is about to stop being what was
 * registered (munmap, mremap, MADV_NORMAL): tell the daemon first. */
void msq_daemon_forget_locked(uint64_t start, uint64_t end) MSQ_HIDDEN;
/* Fork child: the parent's connection is not the child's. */
void msq_daemon_atfork_child(void) MSQ_HIDDEN;

#endif

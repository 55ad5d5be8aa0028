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
 * socket calls are non-blocking; the program waits only where the daemon
 * must act first: at munmap of a delegated region and at exit (for the
 * final drop, up to 50 ms), and for the policy before its first managed
 * read (up to 20 ms, once).
 * The socket is close-on-exec, at a descriptor number >= 520, and is
 * never used again if the program closes or replaces it.
 */
#ifndef MSQ_DAEMON_CLIENT_H
#define MSQ_DAEMON_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "shim.h"

/* From init(): reads MADVSEQ_SOCKET and MADVSEQ_DAEMON (0: never connect). */
void msq_daemon_init(void) MSQ_HIDDEN;
/* Engine thread, table lock held: (re)connects when due, reads replies,
 * registers new regions, sets each region's delegated flag. */
void msq_daemon_sync(void) MSQ_HIDDEN;
/* Table lock held: [start, end) is about to stop being what was
 * registered (munmap, mremap, MADV_NORMAL): tell the daemon first.
 * final (munmap): the daemon drops the range's last lag first, and this
 * waits for it (up to 50 ms). */
void msq_daemon_forget_locked(uint64_t start, uint64_t end, bool final) MSQ_HIDDEN;
/* Table lock held, the process exiting: the final drop of every region
 * the daemon manages.  No allocation (safe in _exit). */
void msq_daemon_release_all_locked(void) MSQ_HIDDEN;
/* The read path is about to manage its first file: once per process,
 * connects (if it is not yet) and waits briefly (20 ms) for the cgroup's
 * policy, whose read = key then applies unless MADVSEQ_READ is set.
 * Takes the table lock. */
void msq_daemon_ask_policy(void) MSQ_HIDDEN;
/* Fork child: the parent's connection is not the child's. */
void msq_daemon_atfork_child(void) MSQ_HIDDEN;

#endif

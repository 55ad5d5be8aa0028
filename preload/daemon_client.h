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
 * Locks (see locks.h): the client has its own lock, taken inside the
 * region table lock (never the other way round) and held only for
 * non-blocking socket calls and bookkeeping.  No lock is held while a
 * thread waits for the daemon.  All socket calls are non-blocking raw
 * syscalls; a program thread waits only where the daemon must act first:
 * at munmap of a delegated region (for the final drop, up to 50 ms) and
 * for the policy before its first advised file (up to 20 ms, once).
 * Nothing here runs at _exit, in a vfork child, or from read()/write():
 * at _exit the daemon's own exit drop takes over the delegated regions.
 * The socket is close-on-exec, at a descriptor number >= 520, and is
 * never used again if the program closes or replaces it.
 */
#ifndef MSQ_DAEMON_CLIENT_H
#define MSQ_DAEMON_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include <madvseq/policy.h>

#include "defs.h"
#include "locks.h"

/*
 * The client is transport only: what the daemon's answers mean to the
 * read path, and what the read path reports, reach it through these
 * hooks, handed over at init.
 */
struct msq_daemon_totals {
	uint64_t files, streamed, dropped, kept;
};
struct msq_daemon_hooks {
	/* The read = key of the cgroup's policy (a valid mode), with the
	 * client lock held, on the thread that read the answer (the engine
	 * thread, or one in posix_fadvise, msq_daemon_ask_policy). */
	void (*read_policy)(enum msq_read_mode m);
	/* What the read path did so far, for its report: lock-free and
	 * allocation-free (called with or without the client lock). */
	void (*totals)(struct msq_daemon_totals *t);
};
/* From init(): reads MADVSEQ_SOCKET and MADVSEQ_DAEMON (0: never connect)
 * and keeps a copy of *hooks. */
void msq_daemon_init(const struct msq_daemon_hooks *hooks) MSQ_HIDDEN;
/* Lock-free: the daemon welcomed us and the connection stands; regions
 * marked delegated are its work only while this is true. */
bool msq_daemon_ready(void) MSQ_HIDDEN;
/* Engine thread, table lock held: (re)connects when due, reads replies,
 * registers new regions, sets each region's delegated flag. */
void msq_daemon_sync(void) MSQ_HIDDEN;
/* One drop madvseqd decided and asked this process to make
 * (MSQ_MSG_DROP), checked only for its form: the engine thread makes it
 * where it lies in a region handed over. */
struct msq_daemon_ask {
	uint64_t id; /* of the region */
	uint64_t start, end;
	enum msq_mode mode; /* MSQ_MODE_PAGEOUT or MSQ_MODE_COLD */
};
#define MSQ_DAEMON_ASKS_MAX 1024
/* Engine thread, table lock held, after msq_daemon_sync(): takes the drops
 * asked since the last call, oldest first.  Asks beyond
 * MSQ_DAEMON_ASKS_MAX waiting are not kept (the daemon asks again a
 * second later). */
size_t msq_daemon_take_asks(struct msq_daemon_ask out[MSQ_DAEMON_ASKS_MAX]) MSQ_HIDDEN;
/* [start, end) is no longer what was registered (munmap, mremap,
 * MADV_NORMAL, made writable): tell the daemon.  final (munmap, exit):
 * the daemon drops the range's last lag first, and this waits for it (up
 * to 50 ms, with no lock held, so call it without the table lock).
 * Returns whether the daemon confirmed that final drop; when it did not
 * (no answer in time, advice that failed, no daemon any more), the
 * regions it had there are the caller's to drop. */
bool msq_daemon_forget(uint64_t start, uint64_t end, bool final) MSQ_HIDDEN;
/* At exit() (not _exit): the final drop of every region the daemon
 * manages.  Call without the table lock.  Returns whether the daemon
 * confirmed it, as msq_daemon_forget. */
bool msq_daemon_release_all(void) MSQ_HIDDEN;
/* At exit() (not _exit), without the table lock: tells the daemon what
 * the read path did since the last report (its metrics), connecting once
 * if the program never did; waits up to 20 ms for the welcome and 20 ms
 * for the answer. */
void msq_daemon_report_at_exit(void) MSQ_HIDDEN;
/* The read path is about to manage its first advised file: once per
 * process, connects (if it is not yet) and waits briefly (20 ms) for the
 * cgroup's policy (its read = key goes to the read_policy hook).  Only
 * from posix_fadvise: never from read() or write(). */
void msq_daemon_ask_policy(void) MSQ_HIDDEN;
/* Fork: the client lock around fork; the child's connection is not the
 * parent's. */
bool msq_daemon_atfork_prepare(void) MSQ_HIDDEN;
void msq_daemon_atfork_parent(bool locked) MSQ_HIDDEN;
void msq_daemon_atfork_child(bool locked) MSQ_HIDDEN;

#endif

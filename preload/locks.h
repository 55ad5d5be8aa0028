/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The shim's locks and their order.  Each module owns its lock; a thread
 * that holds several took them in this order, and releases them before it
 * waits for anything outside the process.
 *
 *   1. the region table lock (regions.c): the table's contents, the
 *      engine's state (engine_thread.c) and the region bookkeeping of
 *      track.c.  Held by writers of the table, by the engine for one
 *      region's cycle, and across the real munmap/mremap of a tracked
 *      range: syscalls only, never a wait for the daemon.
 *   2. the daemon client lock (daemon_client.c): the connection and the
 *      registrations.  Held only for non-blocking socket calls; a thread
 *      waiting for an answer polls with no lock held.
 *   3. liburcu-bp's own locks (grace periods), taken inside its
 *      functions.  urcu_bp_synchronize_rcu() is never called inside an
 *      RCU read-side section of the same thread (the re-entry guard keeps
 *      wrappers out of the shim's own sections).
 *
 * The read path (fdstream.c, fdtable.c) takes no lock: per-fd state is
 * claimed with an atomic busy flag (try only) and read under urcu-bp.
 *
 * Where no wait is allowed — _exit, fork from a signal handler, the
 * destructor at exit() — the locks are taken with msq_lock_bounded(),
 * which gives up after a few milliseconds; the caller then does nothing
 * (at _exit, fork) or leaks instead of freeing (a fork child).  Nothing
 * that runs at _exit or in a vfork child allocates or talks to the
 * daemon; read()/write() and the other async-signal-safe wrappers never
 * allocate with malloc, never take a blocking lock and never talk to the
 * daemon.
 */
#ifndef MSQ_LOCKS_H
#define MSQ_LOCKS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "defs.h"

/* How long fork's prepare handler, the destructor and _exit try a lock. */
#define MSQ_FORK_LOCK_NS (UINT64_C(10) * 1000 * 1000)
#define MSQ_EXIT_LOCK_NS (UINT64_C(50) * 1000 * 1000)
#define MSQ_SHUTDOWN_LOCK_NS (UINT64_C(200) * 1000 * 1000)

/* Tries m for up to ns (trylock, 100 us naps); true if it is now held. */
bool msq_lock_bounded(pthread_mutex_t *m, uint64_t ns) MSQ_HIDDEN;

/*
 * The library's own descriptors (pagemap, the daemon's socket) are opened
 * at the lowest free number and then moved up out of the program's way.
 * While one sits at a low number, a program's dup2()/dup3() onto that
 * number would fail with EBUSY (inside the open) or silently take it (the
 * library would then close the program's descriptor).  So the two never
 * overlap: a window starts only while no dup2/dup3 runs (else the caller
 * tries again later), and dup2/dup3 wait for a window to end — for at most
 * MSQ_LOWFD_WAIT_NS, so that a signal handler that interrupted a window
 * on its own thread goes on.  Lock-free and async-signal-safe.
 */
#define MSQ_LOWFD_WAIT_NS (UINT64_C(10) * 1000 * 1000)
bool msq_lowfd_begin(void) MSQ_HIDDEN;
void msq_lowfd_end(void) MSQ_HIDDEN;
void msq_lowfd_dup_enter(void) MSQ_HIDDEN;
void msq_lowfd_dup_leave(void) MSQ_HIDDEN;
/* A fork child: no window is open in it, no dup2 runs. */
void msq_lowfd_atfork_child(void) MSQ_HIDDEN;

#endif

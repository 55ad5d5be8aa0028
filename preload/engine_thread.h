/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The shim's engine thread: started on the first tracked region, it cycles
 * every region (common/stream.c) with the table lock held per region, and
 * sleeps between cycles for an interval that shrinks while streams move
 * fast (so each cycle has about one chunk to drop) and grows back to
 * MADVSEQ_INTERVAL when they stop.
 */
#ifndef MSQ_ENGINE_THREAD_H
#define MSQ_ENGINE_THREAD_H

#include <stdbool.h>

#include "defs.h"
#include "regions.h"

/* Starts the thread unless running.  Call with the table lock held. */
void msq_ethread_start(void) MSQ_HIDDEN;
/* retire() callback for msq_regions_remove: final drop of a part whose
 * mapping is about to go (its readers are done), then accounts its stats.
 * Call with the table lock held, before the real munmap. */
void msq_ethread_retire(struct msq_region *part, void *arg) MSQ_HIDDEN;
/* retire() without the final drop (the range is no longer the mapping it
 * was, or the program asked for its pages to be left alone). */
void msq_ethread_account(struct msq_region *part) MSQ_HIDDEN;

/*
 * The daemon's parts of a range being unmapped: the daemon makes their
 * final drop, and the shim makes it if the daemon does not confirm it (no
 * answer in time, advice that failed).  msq_ethread_retire_handing_over is
 * msq_ethread_retire that also keeps a copy of each such part (up to
 * MSQ_HANDOVER_MAX; the others are the daemon's alone, as before);
 * msq_ethread_handover_end, with the table lock held and the range still
 * mapped, drops them unless the daemon took them, and frees the copies.
 */
#define MSQ_HANDOVER_MAX 4
struct msq_handover {
	size_t n;
	struct msq_stream s[MSQ_HANDOVER_MAX];
};
void msq_ethread_retire_handing_over(struct msq_region *part, void *handover) MSQ_HIDDEN;
void msq_ethread_handover_end(struct msq_handover *h, bool daemon_took) MSQ_HIDDEN;
/* In _exit: drops what the regions mapped, with syscalls only (no
 * allocation; the table lock only if it can be had within a few ms, and
 * then left held: the process ends). */
void msq_ethread_exit_flush(void) MSQ_HIDDEN;
/*
 * At exit (shim.c runs the sequence): msq_ethread_stop() tells the thread
 * to stop, taking the table lock for at most MSQ_SHUTDOWN_LOCK_NS (exit()
 * may come from a signal handler that interrupted a holder of the lock on
 * this very thread), and says whether it got it; after the daemon's final
 * drop of its regions, msq_ethread_retire_all() (only if stop got the lock)
 * makes the final drop of every region still tracked, of the daemon's
 * ones too unless daemon_took, and accounts them.
 */
bool msq_ethread_stop(void) MSQ_HIDDEN;
void msq_ethread_retire_all(bool daemon_took) MSQ_HIDDEN;
/* The totals of the regions no longer tracked (the stats file), and the
 * longest time the thread took between two rounds in which streams moved:
 * how late a loaded machine let it be (what streamed meanwhile stayed). */
struct msq_ethread_totals {
	uint64_t regions, dropped, kept, cycles, errors;
	uint64_t asked; /* dropped on madvseqd's ask (MSQ_MSG_DROP): its decisions */
	uint64_t max_round_gap_ns;
};
void msq_ethread_totals(struct msq_ethread_totals *t) MSQ_HIDDEN;
/* In a fork child: no engine thread; its pagemap and totals its own. */
void msq_ethread_atfork_child(void) MSQ_HIDDEN;

#endif

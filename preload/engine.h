/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The shim's engine thread: started on the first tracked region, it cycles
 * every region (common/stream.c) with the table lock held per region, and
 * sleeps between cycles for an interval that shrinks while streams move
 * fast (so each cycle has about one chunk to drop) and grows back to
 * MADVSEQ_INTERVAL when they stop.
 */
#ifndef MSQ_ENGINE_H
#define MSQ_ENGINE_H

#include <stdbool.h>

#include "regions.h"
#include "shim.h"

/* Starts the thread unless running.  Call with the table lock held. */
void msq_engine_start(void) MSQ_HIDDEN;
/* retire() callback for msq_regions_remove: final drop of a part whose
 * mapping is about to go (its readers are done), then accounts its stats.
 * Call with the table lock held, before the real munmap. */
void msq_engine_retire(struct msq_region *part, void *arg) MSQ_HIDDEN;
/* retire() without the final drop (the range is no longer the mapping it
 * was, or the program asked for its pages to be left alone). */
void msq_engine_account(struct msq_region *part) MSQ_HIDDEN;
/* In _exit: drops what the regions mapped, with syscalls only (no
 * allocation; the table lock only if it can be had within a few ms). */
void msq_engine_exit_flush(void) MSQ_HIDDEN;
/* At exit: stops the engine, flushes remaining regions, reports. */
void msq_engine_shutdown(void) MSQ_HIDDEN;

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * MADVSEQ_STATS (statsfile.c): one small file per process ("%p" in the
 * name becomes the pid: one file per process of a tree), with the
 * engine's totals (engine_thread.h) and the read path's (fdstats.h), then one
 * line per file: "file=STREAMED DROPPED KEPT WRITTEN PATH".
 *
 * Contract: raw syscalls only, no allocation, no lock: it also runs at
 * _exit (shim.c), after the regions' last drop.
 */
#ifndef MSQ_STATSFILE_H
#define MSQ_STATSFILE_H

#include "defs.h"

/* Writes the file named by msq_cfg.stats_path (set: the caller checks). */
void msq_statsfile_write(void) MSQ_HIDDEN;
/* In a fork child: writes its own file only if it did something. */
void msq_statsfile_atfork_child(void) MSQ_HIDDEN;

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * How the fd watch is shown: its totals as rows of metrics.c's counter
 * table (spliced into GLOBAL_COUNTERS, in its vocabulary: see "Adding a
 * counter" in HACKING.md), and each followed stream's line in the
 * status (text) and in the JSON status's "streams" (fdshow.c), a renderer
 * of its own as the pod families are.
 */
#ifndef MSQD_FDSHOW_H
#define MSQD_FDSHOW_H

#include <stdbool.h>

#include "outbuf.h"

struct msqd;

/* X(id, prometheus name, type, help, label, json key, unit, filter, value),
 * v a struct view * of metrics.c. */
#define MSQD_FDWATCH_COUNTERS(X) \
	X(fd_followed, "madvseq_fd_streams", "gauge", \
	  "Read()/write() streams of programs without the library that madvseqd follows.", NULL, \
	  "fd_streams.followed", COUNT, F_ALL, v->d->fdw.nstreams) \
	X(fd_processes, NULL, NULL, NULL, NULL, "fd_streams.processes", COUNT, F_ALL, v->d->fdw.np) \
	X(fd_found, "madvseq_fd_streams_found_total", "counter", "fd streams found (discover = yes).", \
	  NULL, "fd_streams.found", COUNT, F_ALL, v->d->fdw.found) \
	X(fd_streamed, "madvseq_fd_bytes_total", "counter", \
	  "Bytes of fd streams: streamed, dropped behind them, kept (cached before), unknown (passed " \
	  "before the snapshot), given to writeback early.", "kind=\"streamed\"", \
	  "fd_streams.streamed_bytes", BYTES, F_ALL, v->d->fdw.streamed) \
	X(fd_dropped, "madvseq_fd_bytes_total", NULL, NULL, "kind=\"dropped\"", \
	  "fd_streams.dropped_bytes", BYTES, F_ALL, v->d->fdw.dropped) \
	X(fd_kept, "madvseq_fd_bytes_total", NULL, NULL, "kind=\"kept\"", "fd_streams.kept_bytes", \
	  BYTES, F_ALL, v->d->fdw.kept_before) \
	X(fd_unknown, "madvseq_fd_bytes_total", NULL, NULL, "kind=\"unknown\"", \
	  "fd_streams.unknown_bytes", BYTES, F_ALL, v->d->fdw.unknown) \
	X(fd_writeback, "madvseq_fd_bytes_total", NULL, NULL, "kind=\"writeback\"", \
	  "fd_streams.writeback_bytes", BYTES, F_ALL, v->d->fdw.wb_started) \
	X(fd_swapped, "madvseq_fd_events_total", "counter", \
	  "Borrowed descriptors that were another file by then (swapped), borrows refused, " \
	  "processes left to their library, limits reached.", "event=\"swapped\"", \
	  "fd_streams.swapped", COUNT, F_ALL, v->d->fdw.swapped) \
	X(fd_refused, "madvseq_fd_events_total", NULL, NULL, "event=\"refused\"", \
	  "fd_streams.refused", COUNT, F_ALL, v->d->fdw.refused) \
	X(fd_library, "madvseq_fd_events_total", NULL, NULL, "event=\"library\"", \
	  "fd_streams.left_to_library", COUNT, F_ALL, v->d->fdw.left_alone) \
	X(fd_limits, "madvseq_fd_events_total", NULL, NULL, "event=\"limits\"", \
	  "fd_streams.over_limits", COUNT, F_ALL, v->d->fdw.over_limits) \
	X(fd_errors, NULL, NULL, NULL, NULL, "fd_streams.errors", COUNT, F_ALL, v->d->fdw.errors) \
	X(fd_looks, NULL, NULL, NULL, NULL, "fd_streams.looks", COUNT, F_ALL, v->d->fdw.looks) \
	X(fd_cut_short, NULL, NULL, NULL, NULL, "fd_streams.cut_short", COUNT, F_ALL, \
	  v->d->fdw.busy_looks) \
	X(fd_look_last, "madvseq_fd_look_seconds", "gauge", "Duration of the fd watch's looks (last, max).", \
	  "stat=\"last\"", "fd_streams.last_look_seconds", NS_MS, F_ALL, v->d->fdw.last_look_ns) \
	X(fd_look_max, "madvseq_fd_look_seconds", NULL, NULL, "stat=\"max\"", \
	  "fd_streams.max_look_seconds", NS_MS, F_ALL, v->d->fdw.max_look_ns) \
	X(fd_closed_files, "madvseq_fd_closed_files_total", "counter", \
	  "Files a watched writer closed that madvseqd went through (fanotify).", NULL, \
	  "fd_streams.closed_files", COUNT, F_ALL, v->d->fdc.files) \
	X(fd_closed_dropped, "madvseq_fd_closed_bytes_total", "counter", \
	  "Bytes of files a watched writer closed: dropped, and left cached (still dirty or in use " \
	  "when given up).", "kind=\"dropped\"", "fd_streams.closed_dropped_bytes", BYTES, F_ALL, \
	  v->d->fdc.dropped) \
	X(fd_closed_left, "madvseq_fd_closed_bytes_total", NULL, NULL, "kind=\"left\"", \
	  "fd_streams.closed_left_bytes", BYTES, F_ALL, v->d->fdc.left) \
	X(fd_closed_marks, NULL, NULL, NULL, NULL, "fd_streams.closed_filesystems", COUNT, F_ALL, \
	  v->d->fdc.marks) \
	X(fd_closed_ignored, NULL, NULL, NULL, NULL, "fd_streams.closed_ignored", COUNT, F_ALL, \
	  v->d->fdc.ignored) \
	X(fd_closed_overflows, NULL, NULL, NULL, NULL, "fd_streams.closed_overflows", COUNT, F_ALL, \
	  v->d->fdc.overflows)


/* "  pid N fd (comm) in CGROUP: fd N read|write FILE: ..." lines. */
void msqd_fdshow_text(struct msqd_out *o, const struct msqd *d);
/* One JSON object a line, numbers first, each after a comma unless
 * first.  Returns whether it put none (first stays first). */
bool msqd_fdshow_json(struct msqd_out *o, const struct msqd *d, bool first);

#endif

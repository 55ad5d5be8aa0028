/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The library's messages (log.c): "libmadvseq[PID]: ..." on stderr, with
 * the raw write syscall (no stdio, no lock, no buffer shared with the
 * program, not the library's own write wrapper).  Warnings always, info
 * only with MADVSEQ_DEBUG; under secure execution (env.h) nothing.  Both
 * preserve errno.  Depends only on env.c.
 */
#ifndef MSQ_LOG_H
#define MSQ_LOG_H

#include <stdbool.h>

#include "defs.h"

/* Whether msq_debug() prints (MADVSEQ_DEBUG; from the settings, at init). */
void msq_log_set_debug(bool on) MSQ_HIDDEN;
void msq_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2))) MSQ_HIDDEN;
void msq_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2))) MSQ_HIDDEN;

#endif

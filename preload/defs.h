/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What every file of libmadvseq.so uses and depends on nothing: symbol
 * visibility, the TLS model, and saving errno around bookkeeping.
 */
#ifndef MSQ_DEFS_H
#define MSQ_DEFS_H

#include <errno.h>

#define MSQ_HIDDEN __attribute__((visibility("hidden")))
/* The wrapped libc functions: the only symbols the library exports. */
#define MSQ_EXPORT __attribute__((visibility("default")))
#define MSQ_TLS __attribute__((tls_model("initial-exec")))

/* Saves errno on entry and restores it on scope exit. */
#define MSQ_PROTECT_ERRNO                                                          \
	__attribute__((cleanup(msq_restore_errno))) int msq_saved_errno_ = errno
static inline void msq_restore_errno(int *e) { errno = *e; }

#endif

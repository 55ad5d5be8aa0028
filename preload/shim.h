/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Internals of libmadvseq.so shared by its wrappers.  Nothing here is
 * exported (libmadvseq.map exports only the wrapped libc symbols).
 *
 * Every wrapper follows one order:
 *   1. msq_shim_ready() (lazy init: wrappers can run before constructors);
 *   2. re-entry guard: a call made by the shim itself (or by libc/liburcu
 *      on its behalf) goes straight to the real function;
 *   3. the real call;
 *   4. bookkeeping that preserves errno and the return value.
 * The program sees exactly what it would without the shim.
 *
 * Fork: pthread_atfork handlers keep the shim's locks and liburcu
 * consistent (locks.h); a child starts with no tracked regions (it "has
 * its own state") and never acts on the parent's.  vfork children share
 * the parent's memory: every slow path checks msq_is_owner() first and
 * passes the call through untouched in a vfork child.
 *
 * The library's own I/O uses the raw syscalls of common/sys.h, never the
 * libc names it exports; the wrappers reach libc through real.h.
 */
#ifndef MSQ_SHIM_H
#define MSQ_SHIM_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <madvseq/policy.h>

#define MSQ_HIDDEN __attribute__((visibility("hidden")))
/* The wrapped libc functions: the only symbols the library exports. */
#define MSQ_EXPORT __attribute__((visibility("default")))
#define MSQ_TLS __attribute__((tls_model("initial-exec")))

#define MSQ_STATS_PATH_MAX 4096

struct msq_shim_config {
	struct msq_policy policy;
	bool debug;             /* MADVSEQ_DEBUG */
	const char *stats_path; /* MADVSEQ_STATS ("" = none; at most
				 * MSQ_STATS_PATH_MAX - 1 bytes) */
	bool force_pagemap_read;/* MADVSEQ_PAGEMAP_SCAN=0: read entries instead */
	uint64_t write_free;    /* MADVSEQ_WRITE_FREE: a process's writes before
				 * write-behind (fdstream.c); four lags unset */
};

extern struct msq_shim_config msq_cfg MSQ_HIDDEN;
/* Depth of shim code on this thread; > 0 means "go straight to libc". */
extern __thread int msq_guard MSQ_TLS MSQ_HIDDEN;

/* True once initialised and enabled; initialises on first call.  False
 * while initialisation is under way (re-entry from dlsym or malloc). */
bool msq_shim_ready(void) MSQ_HIDDEN;
/* True once initialised and enabled; never initialises (for _exit). */
bool msq_shim_initialised(void) MSQ_HIDDEN;
/* dlsym(RTLD_NEXT, name), called only from msq_shim_ready(). */
void *msq_next_symbol(const char *name) MSQ_HIDDEN;
/* False in a vfork child running on its parent's memory. */
bool msq_is_owner(void) MSQ_HIDDEN;
/* Whether the kernel's own drop-behind is on for this process (the sysctl,
 * or, with *by_cgroup set, its cgroup's switch).  Looked up on the first
 * call, not at start-up: a process that never streams reads no /proc. */
bool msq_kernel_covers(bool *by_cgroup) MSQ_HIDDEN;
/* "libmadvseq: ..." on stderr; warnings always, info only with MADVSEQ_DEBUG.
 * Under secure execution (env.h) nothing is printed. */
void msq_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2))) MSQ_HIDDEN;
void msq_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2))) MSQ_HIDDEN;
uint64_t msq_now_ns(void) MSQ_HIDDEN;

/* Saves errno on entry and restores it on scope exit. */
#define MSQ_PROTECT_ERRNO                                                          \
	__attribute__((cleanup(msq_restore_errno))) int msq_saved_errno_ = errno
static inline void msq_restore_errno(int *e) { errno = *e; }

/* Enter/leave shim bookkeeping on this thread. */
#define MSQ_ENTER() (msq_guard++)
#define MSQ_LEAVE() (msq_guard--)

/* Fork hooks of the other parts of the shim (locks.h: bounded tries;
 * locked: whether the prepare handler got the lock). */
bool msq_regions_atfork_prepare(void) MSQ_HIDDEN;
void msq_regions_atfork_parent(bool locked) MSQ_HIDDEN;
void msq_regions_atfork_child(bool locked) MSQ_HIDDEN;
void msq_engine_atfork_child(void) MSQ_HIDDEN;

#endif

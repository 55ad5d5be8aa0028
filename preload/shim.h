/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The life of libmadvseq.so (shim.c): initialisation, fork and exit, each
 * calling the hooks the other modules declare in their own headers.
 * Nothing here is exported (libmadvseq.map exports only the wrapped libc
 * symbols).  Only the wrappers call into it; no module below calls back.
 *
 * Every wrapper follows one order:
 *   1. msq_shim_ready() (lazy init: wrappers can run before constructors);
 *   2. re-entry guard (msq_guard, self.h): a call made by the shim itself
 *      (or by libc/liburcu on its behalf) goes straight to the real
 *      function;
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

#include <stdbool.h>

#include "defs.h"
#include "self.h"

/* True once initialised and enabled; initialises on first call.  False
 * while initialisation is under way (re-entry from dlsym or malloc). */
bool msq_shim_ready(void) MSQ_HIDDEN;
/* True once initialised and enabled; never initialises (for _exit). */
bool msq_shim_initialised(void) MSQ_HIDDEN;
/* From _exit/_Exit (which skip the destructors), initialised, guard down,
 * the owner: drops what the regions mapped and writes the stats file,
 * with syscalls only (no allocation, no daemon; the table lock only if it
 * can be had within a few ms). */
void msq_shim_exit_now(void) MSQ_HIDDEN;

#endif

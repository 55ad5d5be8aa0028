/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Who is running the library's code (self.c): the re-entry guard of this
 * thread, whether this process owns the memory it runs on, and the clock.
 * A leaf: it calls nothing else of the library.
 *
 * Thread/signal/fork contract: all of it is async-signal-safe and
 * allocation-free.  msq_is_owner() is false in a vfork child, which runs
 * on its parent's memory until it calls _exit or exec: every slow path
 * asks it before it changes shared state.  msq_self_init() is called at
 * initialisation and in a fork child (which owns its own copy).
 */
#ifndef MSQ_SELF_H
#define MSQ_SELF_H

#include <stdbool.h>
#include <stdint.h>

#include "defs.h"

/* Depth of the library's code on this thread; > 0 means "go straight to
 * libc" (a call made by the library itself, or by libc or liburcu on its
 * behalf). */
extern __thread int msq_guard MSQ_TLS MSQ_HIDDEN;

/* Enter/leave the library's bookkeeping on this thread. */
#define MSQ_ENTER() (msq_guard++)
#define MSQ_LEAVE() (msq_guard--)

/* This process owns its memory from now on (init, fork child). */
void msq_self_init(void) MSQ_HIDDEN;
/* False in a vfork child running on its parent's memory. */
bool msq_is_owner(void) MSQ_HIDDEN;
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t msq_now_ns(void) MSQ_HIDDEN;

#endif

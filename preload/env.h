/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The only code in preload/ that reads the environment (tests/preload/
 * test_secure.py fails the build's tests if any other object of the
 * library refers to getenv or environ).
 *
 * Secure execution: installed through /etc/ld.so.preload the library is
 * loaded into setuid and setgid programs and programs with file
 * capabilities, with the caller's environment (ld.so strips LD_PRELOAD
 * there, not ld.so.preload).  Where the kernel set AT_SECURE, as glibc
 * tests for its own tunables, every variable reads as unset: the library
 * runs with its built-in defaults, writes no file, prints nothing and talks
 * only to a daemon that runs as root on the default socket.
 *
 * Thread/signal contract: both functions are safe from any thread after
 * the library's initialisation; msq_env() is not called from signal
 * handlers (getenv is not async-signal-safe against setenv).
 */
#ifndef MSQ_ENV_H
#define MSQ_ENV_H

#include <stdbool.h>

#include "shim.h"

/* getauxval(AT_SECURE), read once. */
bool msq_secure_execution(void) MSQ_HIDDEN;
/* A user setting (MADVSEQ_*): its value, or NULL when unset, empty, or
 * under secure execution. */
const char *msq_env(const char *name) MSQ_HIDDEN;
/* A hook for the tests (MADVSEQ_PROCFS, ...): as msq_env(), and only in a
 * build configured with -Dtest_hooks=true.  Code that reads one is inside
 * #ifdef MSQ_TEST_HOOKS, so that an installed library holds not a byte of
 * it, names included (tests/preload/test_secure.py checks). */
#ifdef MSQ_TEST_HOOKS
const char *msq_test_env(const char *name) MSQ_HIDDEN;
#endif

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The one table of the real functions the wrappers stand in front of,
 * resolved once with dlsym(RTLD_NEXT) during initialisation.  Its fields
 * come from the list of wrapped symbols, wrapped.def.
 *
 * Only wrappers call through it, to make the program's own call.  The
 * library's own I/O never does, nor calls the libc names it exports: it
 * uses the raw syscalls of common/sys.h.  Until the table is filled (a
 * wrapper running before the library is initialised, or during dlsym),
 * MSQ_REAL() makes the syscall itself, which sets errno as libc would.
 */
#ifndef MSQ_REAL_H
#define MSQ_REAL_H

#include <stdio.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "shim.h"

struct msq_real_fns {
#define MSQ_WRAP(symbol, field, ret, params) ret(*field) params;
#include "wrapped.def"
};

extern struct msq_real_fns msq_real MSQ_HIDDEN;

/* Fills msq_real (from init, once). */
void msq_real_resolve(void) MSQ_HIDDEN;

/* The program's own call: the real function, or the syscall before it is
 * known. */
#define MSQ_REAL(fn, fallback, ...) (msq_real.fn ? msq_real.fn(__VA_ARGS__) : (fallback))

#endif

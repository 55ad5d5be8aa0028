/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One followed fd stream acted on (fdmanage.c): a borrow of the program's
 * descriptor, the snapshot ahead of the position, the write-behind and
 * the drops behind it, and the duplicate closed, all within one call.
 */
#ifndef MSQD_FDMANAGE_H
#define MSQD_FDMANAGE_H

#include <stdbool.h>

#include "fdwatch.h"

struct msqd;
struct msqd_cg;

/* One borrow of f's descriptor (process p, in cgroup g: NULL when not
 * known, then nothing is dropped); still: the position did not move since
 * the last look.  Returns 0, -ESRCH when the process is gone, -ESTALE
 * when f is another file (or no descriptor) now. */
int msqd_fdmanage_act(struct msqd *d, struct fdw_proc *p, struct fdw_file *f, struct msqd_cg *g,
		      bool still);
/* What f holds (not f itself); a started stream leaves the count. */
void msqd_fdmanage_free(struct msqd_fdwatch *w, struct fdw_file *f);

#endif

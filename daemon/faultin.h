/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Faulting pages of a file into the daemon's own mapping without marking
 * them accessed, so that their page flags still say what others did to
 * them (see faultin.c).
 */
#ifndef MSQD_FAULTIN_H
#define MSQD_FAULTIN_H

#include <stddef.h>

struct msqd_faultin {
	int fd[2]; /* a pipe: [0] read end, [1] write end */
};

/* Returns 0, or -errno of pipe2(). */
int msqd_faultin_open(struct msqd_faultin *f);
void msqd_faultin_close(struct msqd_faultin *f);
/* Faults in the pages of [addr, addr + len) (page-aligned, mapped
 * readable) as loads would.  Returns 0, or -EFAULT when a page could not
 * be faulted in (past the file's end now, or an I/O error), or another
 * -errno of write()/read() on the pipe. */
int msqd_faultin(struct msqd_faultin *f, const void *addr, size_t len);

#endif

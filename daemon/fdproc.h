/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What /proc says of a watched process's descriptors, for the fd watch:
 * small files read whole, fdinfo's fields, whether the process runs the
 * library, a descriptor's name and the process's command.  Paths are below
 * a proc root (tests).  Nothing here acts on anything.
 */
#ifndef MSQD_FDPROC_H
#define MSQD_FDPROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads a small file into buf (NUL-terminated).  Bytes or -errno. */
ssize_t msqd_fdproc_read(const char *path, char *buf, size_t len);
/* The number after the line that starts with key in text, in base. */
bool msqd_fdproc_key(const char *text, const char *key, int base, uint64_t *v);
/* /proc/PID/io's rchar + wchar: 0 or -errno. */
int msqd_fdproc_io(const char *proc_root, pid_t pid, uint64_t *io);
/* fdinfo of one descriptor: pos, flags, mnt_id and ino (0 when the kernel
 * does not say).  0, or -errno (-ENOENT: closed). */
int msqd_fdproc_fdinfo(const char *proc_root, pid_t pid, int fd, uint64_t *pos, int *flags,
		       uint64_t *mnt_id, uint64_t *ino);
/* Whether the process's maps name libmadvseq.so (it manages its own). */
bool msqd_fdproc_runs_library(const char *proc_root, pid_t pid);
/* What /proc/PID/fd/FD names, malloc'd; NULL if nothing. */
char *msqd_fdproc_name(const char *proc_root, pid_t pid, int fd);
/* When the process started (/proc/PID/stat's starttime), on
 * CLOCK_REALTIME in nanoseconds, rounded up to the kernel's tick: a file
 * born after it cannot have been cached before the process ran.  0 or
 * -errno. */
int msqd_fdproc_started(const char *proc_root, pid_t pid, uint64_t *real_ns);
/* /proc/PID/comm without its newline; "?" when gone. */
void msqd_fdproc_comm(const char *proc_root, pid_t pid, char *buf, size_t len);

#endif

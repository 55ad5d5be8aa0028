/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Discovery of read()/write() streams in programs without the library
 * (Go programs, static binaries, servers started without it), for the
 * processes of cgroups whose section says discover = yes.  See fdwatch.c.
 */
#ifndef MSQD_FDWATCH_H
#define MSQD_FDWATCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct msqd;
struct msqd_fdwatch;

/* The watch's state, empty; NULL when out of memory (then no fd streams). */
struct msqd_fdwatch *msqd_fdwatch_new(void);
void msqd_fdwatch_free(struct msqd_fdwatch *w);
/* One look at the opted-in cgroups, their busy processes and their
 * streams, acting on those; bounded in time and memory whatever the
 * watched processes do.  Returns when the next look is due. */
uint64_t msqd_fdwatch_step(struct msqd_fdwatch *w, struct msqd *d, uint64_t now_ns);
/* The process connected through the library: it manages its own fds, the
 * watch forgets its streams (one manager per fd). */
void msqd_fdwatch_forget(struct msqd_fdwatch *w, pid_t pid);

/* Renderings for status (text), the JSON status's "streams" lines (each
 * line starting with a comma if not first), and the metrics
 * (Prometheus).  Each returns a malloc'd string (NULL: out of memory). */
char *msqd_fdwatch_status_text(const struct msqd_fdwatch *w, const struct msqd *d);
char *msqd_fdwatch_json_streams(const struct msqd_fdwatch *w, const struct msqd *d, bool first);
char *msqd_fdwatch_json_summary(const struct msqd_fdwatch *w);
char *msqd_fdwatch_prometheus(const struct msqd_fdwatch *w);

#endif

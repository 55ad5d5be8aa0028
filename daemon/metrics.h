/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Text replies for status / stats. */
#ifndef MSQD_METRICS_H
#define MSQD_METRICS_H

#include <stdbool.h>
#include <stddef.h>

struct msqd;

/* Appends to a malloc'd buffer; returns 0 or -ENOMEM. */
int msqd_status_text(struct msqd *d, char **buf, size_t *len);
int msqd_stats_text(struct msqd *d, bool prometheus, char **buf, size_t *len);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Text replies for status / stats. */
#ifndef MSQD_METRICS_H
#define MSQD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct msqd;

/* Appends to a malloc'd buffer; returns 0 or -ENOMEM. */
int msqd_status_text(struct msqd *d, char **buf, size_t *len);
/* STATUS= for systemctl status: clients, regions, bytes dropped (at most
 * once a second, when they changed). */
void msqd_notify_status(struct msqd *d);
/* format: MSQ_STATS_TEXT (the status), _PROMETHEUS or _JSON. */
int msqd_stats_text(struct msqd *d, uint32_t format, char **buf, size_t *len);

#endif

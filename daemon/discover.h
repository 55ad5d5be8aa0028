/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Discovery of MADV_SEQUENTIAL mappings in programs without the shim. */
#ifndef MSQD_DISCOVER_H
#define MSQD_DISCOVER_H

#include <stdint.h>

struct msqd;

/* Scans every process of discover = yes cgroups (each discover_interval).
 * Returns how many regions it newly manages. */
unsigned msqd_discover(struct msqd *d);
/* Starts a scan at once where discover_trigger bytes came into the page
 * cache since the last one.  Returns how long to wait before the next look:
 * discover_watch while the counters move, longer while all is quiet. */
uint64_t msqd_discover_watch(struct msqd *d);

#endif

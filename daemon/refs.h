/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Strong references: pages someone else uses, kept from a planned drop. */
#ifndef MSQD_REFS_H
#define MSQD_REFS_H

#include "../common/extents.h"
#include "../common/stream.h"

struct msqd;

void msqd_refs_init(struct msqd *d);
int msqd_refs_filter(struct msq_engine *e, struct msq_stream *s, struct msq_extents *drop,
		     void *arg);
const char *msqd_fidelity(const struct msqd *d);

#endif

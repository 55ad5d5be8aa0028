/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Drops asked of a shim (MSQ_MSG_DROP): the engine's `ask' hook
 * (common/stream.h) for the cycles of a client that said MSQ_HELLO_DROPS.
 * The daemon decides (its policy, its strong-reference check) and the
 * client's own engine thread drops, from its reader's CPU.
 */
#ifndef MSQD_ASKS_H
#define MSQD_ASKS_H

#include <stdint.h>

#include "../common/stream.h"

/* Where a cycle's asks go: ask_arg of the client's engine. */
struct msqd_ask_to {
	int fd;           /* the client's socket */
	uint64_t id;      /* the client's id of the region cycled */
	uint64_t *asked;  /* bytes asked, added to */
};

/* The engine's ask hook: sends set as DROP messages to a->fd without
 * waiting.  -EAGAIN when any could not be sent (the client's socket is
 * full, or closed): the engine then advises the set from here. */
int msqd_ask_drops(struct msq_engine *e, const struct msq_extents *set, enum msq_mode mode,
		   void *a);

#endif

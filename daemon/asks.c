/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Why ask: reclaim flushes the TLBs of every CPU an address space is live
 * on each time it has unmapped a batch of 31 folios (mm/vmscan.c,
 * shrink_folio_list).  The daemon's MADV_PAGEOUT of a reader's pages
 * (process_madvise) runs on another CPU than the reader, so each batch
 * interrupts the reader: 27,000-30,000 IPIs for a LevelDB scan of 5 GB,
 * against 3,900 with the kernel alone.  The library's engine thread runs
 * where the reader does (common/follow.h) and drops there with none.
 * process_madvise has no advice that would unmap first.  So for a shim
 * the daemon sends what it decided, and the shim drops it.
 *
 * Nothing the client does with an ask can harm others: the shim drops
 * only pages of its own mapping, as its own engine would.  A client that
 * does not read its socket fills it; sends then fail at once (never
 * block), and the engine drops from here as for any other client.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <madvseq/protocol.h>

#include "../common/fault.h"
#include "asks.h"

int msqd_ask_drops(struct msq_engine *e, const struct msq_extents *set, enum msq_mode mode,
		   void *a)
{
	union {
		struct msq_msg_drop m;
		char raw[sizeof(struct msq_msg_drop) +
			 MSQ_DROP_MAX_RANGES * sizeof(struct msq_wire_range)];
	} u;
	struct msqd_ask_to *to = a;
	uint64_t bytes = 0;

	(void)e;
	for (size_t i = 0; i < set->n;) {
		uint32_t n = 0, size;

		u.m = (struct msq_msg_drop){ .id = to->id, .mode = (uint32_t)mode };
		for (; i < set->n && n < MSQ_DROP_MAX_RANGES; i++, n++) {
			u.m.r[n] = (struct msq_wire_range){ set->v[i].start, set->v[i].end };
			bytes += set->v[i].end - set->v[i].start;
		}
		u.m.n = n;
		size = (uint32_t)(sizeof(u.m) + n * sizeof(u.m.r[0]));
		u.m.h = (struct msq_msg_hdr){ MSQ_PROTO_MAGIC, MSQ_PROTO_VERSION, MSQ_MSG_DROP, size, 0 };
		/* (An ask is the daemon's advice: the same fault point.) */
		if (MSQ_FAULT("madvseq/madvise") ||
		    send(to->fd, &u, size, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)size)
			return -EAGAIN;
	}
	*to->asked += bytes;
	return 0;
}

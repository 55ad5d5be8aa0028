/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Every value a client sends, checked here before anything acts on it:
 * sizes and counts first (the message is exactly as long as its type and
 * its counts say), then flags and padding, then addresses: page-aligned,
 * non-empty, not wrapping, below the largest user address, and for a
 * snapshot sorted, non-overlapping and inside the region.  Everything
 * after this file may assume that each range it walks is whole pages
 * with start < end, so that every page loop advances.
 *
 * Two kinds of failure: -EBADMSG (a message no client of this protocol
 * sends: the connection ends) and -EINVAL (a request refused in its
 * RESULT, as a region that is not what /proc/PID/maps says is).
 */
#include <errno.h>

#include <madvseq/protocol.h>

#include "validate.h"

#define PAGE UINT64_C(4096)
/* 57-bit virtual addresses (5-level paging) are the most any task has. */
#define USER_TOP (UINT64_C(1) << 57)

static size_t expected_size(uint16_t type)
{
	switch (type) {
	case MSQ_MSG_HELLO: return sizeof(struct msq_msg_hello);
	case MSQ_MSG_REGISTER: return sizeof(struct msq_msg_register);
	case MSQ_MSG_UNREGISTER: return sizeof(struct msq_msg_unregister);
	case MSQ_MSG_POLICY_GET: return sizeof(struct msq_msg_hdr);
	case MSQ_MSG_STATUS: return sizeof(struct msq_msg_hdr);
	case MSQ_MSG_STATS: return sizeof(struct msq_msg_stats_req);
	case MSQ_MSG_READ_REPORT: return sizeof(struct msq_msg_read_report);
	}
	return 0;
}

/* Fixed-size messages have exactly their size; REGISTER may carry its
 * snapshot after the fixed part. */
bool msqd_valid_size(uint16_t type, const void *buf, size_t n)
{
	const struct msq_msg_register *r = buf;
	size_t fixed = expected_size(type);

	if (type != MSQ_MSG_REGISTER || n < fixed)
		return fixed && n == fixed;
	return r->nprecached <= MSQ_REGISTER_MAX_PRECACHED &&
	       n == fixed + r->nprecached * sizeof(struct msq_wire_range) &&
	       (r->nprecached == 0 || r->flags & MSQ_REGION_SNAPSHOT);
}

/* [start, start + len): whole pages, not empty, inside user space. */
static bool range_ok(uint64_t start, uint64_t len)
{
	return start % PAGE == 0 && len % PAGE == 0 && len && start + len > start &&
	       start + len <= USER_TOP;
}

int msqd_valid_hello(const struct msq_msg_hello *m)
{
	if (m->flags & ~(MSQ_HELLO_SHIM | MSQ_HELLO_CTL | MSQ_HELLO_DROPS) || m->pad ||
	    !(m->flags & MSQ_HELLO_SHIM) == !(m->flags & MSQ_HELLO_CTL) ||
	    (m->flags & MSQ_HELLO_DROPS && !(m->flags & MSQ_HELLO_SHIM)))
		return -EBADMSG;
	return 0;
}

int msqd_valid_register(const struct msq_msg_register *m)
{
	uint64_t prev = 0;

	if (m->flags &
	    ~(MSQ_REGION_SHARED | MSQ_REGION_WRITABLE | MSQ_REGION_SNAPSHOT | MSQ_REGION_UNADVISED))
		return -EBADMSG;
	if (!range_ok(m->start, m->length) || m->offset % PAGE || m->offset + m->length < m->offset)
		return -EINVAL;
	/* The snapshot: page ranges inside the region, sorted, apart. */
	for (uint32_t i = 0; i < m->nprecached; i++) {
		const struct msq_wire_range *v = &m->precached[i];

		if (v->start % PAGE || v->end % PAGE || v->start >= v->end || v->start < m->start ||
		    v->end > m->start + m->length || v->start < prev)
			return -EINVAL;
		prev = v->end;
	}
	return 0;
}

int msqd_valid_unregister(const struct msq_msg_unregister *m)
{
	if (m->pad || m->flags & ~MSQ_UNREGISTER_FINAL)
		return -EBADMSG;
	/* The shim sends what it unmaps: whole pages (munmap's own rule). */
	return range_ok(m->start, m->length) ? 0 : -EINVAL;
}

/* Counts only: any value is a claim about the client's own program, and
 * the sums it is added to saturate.  A delta over 1 PiB is no report a
 * shim sends between two cycles or at exit. */
int msqd_valid_read_report(const struct msq_msg_read_report *m)
{
	const uint64_t most = UINT64_C(1) << 50;

	return m->files > most || m->streamed > most || m->dropped > most || m->kept > most
		       ? -EBADMSG
		       : 0;
}

int msqd_valid_stats(const struct msq_msg_stats_req *m)
{
	return m->format > MSQ_STATS_JSON || m->pad ? -EBADMSG : 0;
}

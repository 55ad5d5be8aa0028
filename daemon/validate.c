/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Every value a client sends, checked here before anything acts on it.
 */
#include <madvseq/protocol.h>

#include "validate.h"

static size_t expected_size(uint16_t type)
{
	switch (type) {
	case MSQ_MSG_HELLO: return sizeof(struct msq_msg_hello);
	case MSQ_MSG_REGISTER: return sizeof(struct msq_msg_register);
	case MSQ_MSG_UNREGISTER: return sizeof(struct msq_msg_unregister);
	case MSQ_MSG_POLICY_GET: return sizeof(struct msq_msg_hdr);
	case MSQ_MSG_STATUS: return sizeof(struct msq_msg_hdr);
	case MSQ_MSG_STATS: return sizeof(struct msq_msg_stats_req);
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

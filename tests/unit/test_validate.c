/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* madvseqd's validation of client messages (daemon/validate.c). */
#include <errno.h>
#include <string.h>

#include <madvseq/protocol.h>

#include "../../daemon/validate.h"
#include "check.h"

#define P UINT64_C(4096)
#define A UINT64_C(0x7f0000000000)

static struct {
	struct msq_msg_register r;
	struct msq_wire_range v[4];
} q;

static int reg(uint64_t start, uint64_t len, uint64_t off, uint32_t flags, uint32_t n, ...)
{
	__builtin_va_list ap;

	memset(&q, 0, sizeof(q));
	q.r = (struct msq_msg_register){ .start = start, .length = len, .offset = off,
					 .flags = flags | (n ? MSQ_REGION_SNAPSHOT : 0), .nprecached = n };
	__builtin_va_start(ap, n);
	for (uint32_t i = 0; i < n; i++) {
		q.v[i].start = __builtin_va_arg(ap, uint64_t);
		q.v[i].end = __builtin_va_arg(ap, uint64_t);
	}
	__builtin_va_end(ap);
	return msqd_valid_register(&q.r);
}

static int unreg(uint64_t start, uint64_t len, uint32_t flags, uint32_t pad)
{
	struct msq_msg_unregister u = { .start = start, .length = len, .flags = flags, .pad = pad };

	return msqd_valid_unregister(&u);
}

int main(void)
{
	struct msq_msg_hello h = { .flags = MSQ_HELLO_SHIM };

	/* REGISTER: whole pages, non-empty, no wrap, below the top. */
	CHECK_EQ(reg(A, 16 * P, 0, MSQ_REGION_SHARED, 0), 0);
	CHECK_EQ(reg(A + 1, 16 * P, 0, 0, 0), -EINVAL);
	CHECK_EQ(reg(A, 16 * P + 1, 0, 0, 0), -EINVAL);
	CHECK_EQ(reg(A, 0, 0, 0, 0), -EINVAL);
	CHECK_EQ(reg(A, 16 * P, 0x800, 0, 0), -EINVAL);
	CHECK_EQ(reg(UINT64_MAX - P + 1, 2 * P, 0, 0, 0), -EINVAL);
	CHECK_EQ(reg(UINT64_C(1) << 57, P, 0, 0, 0), -EINVAL);
	CHECK_EQ(reg(A, 16 * P, UINT64_MAX - P + 1, 0, 0), -EINVAL);
	CHECK_EQ(reg(A, 16 * P, 0, 0x80, 0), -EBADMSG);
	CHECK_EQ(reg(A, 16 * P, 0, MSQ_REGION_SHARED | MSQ_REGION_UNADVISED, 0), 0);
	CHECK_EQ(reg(A, 16 * P, 0, MSQ_REGION_UNADVISED << 1, 0), -EBADMSG);
	/* Its snapshot: whole pages, sorted, apart, inside. */
	CHECK_EQ(reg(A, 16 * P, 0, 0, 2, A, A + P, A + 2 * P, A + 4 * P), 0);
	CHECK_EQ(reg(A, 16 * P, 0, 0, 2, A, A + P, A + P, A + 4 * P), 0); /* touching */
	CHECK_EQ(reg(A, 16 * P, 0, 0, 1, A + 0x10, A + P), -EINVAL);
	CHECK_EQ(reg(A, 16 * P, 0, 0, 1, A, A + P + 8), -EINVAL);
	CHECK_EQ(reg(A, 16 * P, 0, 0, 2, A + 2 * P, A + 3 * P, A, A + P), -EINVAL);
	CHECK_EQ(reg(A, 16 * P, 0, 0, 2, A, A + 3 * P, A + 2 * P, A + 4 * P), -EINVAL);
	CHECK_EQ(reg(A, 16 * P, 0, 0, 1, A - P, A + P), -EINVAL);
	CHECK_EQ(reg(A, 16 * P, 0, 0, 1, A + 15 * P, A + 17 * P), -EINVAL);
	CHECK_EQ(reg(A, 16 * P, 0, 0, 1, A + P, A + P), -EINVAL);
	CHECK_EQ(reg(A, 16 * P, 0, 0, 1, A + 2 * P, A + P), -EINVAL);
	/* UNREGISTER: the same rules for its range; flags and pad. */
	CHECK_EQ(unreg(A, P, MSQ_UNREGISTER_FINAL, 0), 0);
	CHECK_EQ(unreg(A + 0xa00, P, MSQ_UNREGISTER_FINAL, 0), -EINVAL);
	CHECK_EQ(unreg(A, 0xa00, MSQ_UNREGISTER_FINAL, 0), -EINVAL);
	CHECK_EQ(unreg(A, 0, 0, 0), -EINVAL);
	CHECK_EQ(unreg(UINT64_MAX - P + 1, 2 * P, 0, 0), -EINVAL);
	CHECK_EQ(unreg(A, P, 2, 0), -EBADMSG);
	CHECK_EQ(unreg(A, P, 0, 1), -EBADMSG);
	/* HELLO: one of shim or ctl, nothing else; a shim may take drops. */
	CHECK_EQ(msqd_valid_hello(&h), 0);
	h.flags = MSQ_HELLO_SHIM | MSQ_HELLO_DROPS;
	CHECK_EQ(msqd_valid_hello(&h), 0);
	h.flags = MSQ_HELLO_CTL | MSQ_HELLO_DROPS;
	CHECK_EQ(msqd_valid_hello(&h), -EBADMSG);
	h.flags = MSQ_HELLO_DROPS << 1 | MSQ_HELLO_SHIM;
	CHECK_EQ(msqd_valid_hello(&h), -EBADMSG);
	h.flags = MSQ_HELLO_SHIM | MSQ_HELLO_CTL;
	CHECK_EQ(msqd_valid_hello(&h), -EBADMSG);
	h.flags = 0;
	CHECK_EQ(msqd_valid_hello(&h), -EBADMSG);
	h.flags = MSQ_HELLO_CTL;
	h.pad = 1;
	CHECK_EQ(msqd_valid_hello(&h), -EBADMSG);
	/* Sizes: REGISTER's count and length agree. */
	memset(&q, 0, sizeof(q));
	q.r.nprecached = 2;
	q.r.flags = MSQ_REGION_SNAPSHOT;
	CHECK(msqd_valid_size(MSQ_MSG_REGISTER, &q, sizeof(q.r) + 2 * sizeof(q.v[0])));
	CHECK(!msqd_valid_size(MSQ_MSG_REGISTER, &q, sizeof(q.r) + 1 * sizeof(q.v[0])));
	q.r.flags = 0;
	CHECK(!msqd_valid_size(MSQ_MSG_REGISTER, &q, sizeof(q.r) + 2 * sizeof(q.v[0])));
	q.r.nprecached = MSQ_REGISTER_MAX_PRECACHED + 1;
	CHECK(!msqd_valid_size(MSQ_MSG_REGISTER, &q, sizeof(q.r)));
	CHECK(!msqd_valid_size(99, &q, 16));
	CHECK_DONE();
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The asking side of madvseqd's socket; see client.h. */
#include <errno.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <madvseq/protocol.h>

#include "client.h"

int msq_client_send(int fd, void *m, uint16_t type, uint32_t size, uint32_t seq)
{
	struct msq_msg_hdr *h = m;

	*h = (struct msq_msg_hdr){ MSQ_PROTO_MAGIC, MSQ_PROTO_VERSION, type, size, seq };
	return send(fd, m, size, MSG_NOSIGNAL) == (ssize_t)size ? 0 : -errno;
}

int msq_client_recv(int fd, void *buf, size_t len, uint32_t seq)
{
	const struct msq_msg_hdr *h = buf;
	ssize_t n = recv(fd, buf, len, 0);

	if (n < 0)
		return -errno;
	if ((size_t)n < sizeof(*h) || h->magic != MSQ_PROTO_MAGIC || h->size != (uint32_t)n ||
	    h->seq != seq)
		return -EBADMSG;
	if (h->type == MSQ_MSG_ERROR && (size_t)n == sizeof(struct msq_msg_error))
		return ((const struct msq_msg_error *)buf)->status;
	return (int)n;
}

int msq_client_recv_text(int fd, void *buf, size_t len, uint32_t seq)
{
	const struct msq_msg_text *t = buf;
	int n = msq_client_recv(fd, buf, len, seq);

	if (n < 0)
		return n;
	if (t->h.type != MSQ_MSG_TEXT || (size_t)n != sizeof(*t) + t->length)
		return -EBADMSG;
	return n;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * For test programs: what `madvseqctl status` asks, on a socket already
 * connected to madvseqd.  Returns the status text (NUL-terminated, in a
 * static buffer, cut at 1 MiB) or NULL; closes fd either way.
 */
#ifndef MSQ_TEST_STATUS_REQUEST_H
#define MSQ_TEST_STATUS_REQUEST_H

#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <madvseq/protocol.h>

#include "../../common/client.h"

static char *msq_test_status(int fd, int timeout_ms)
{
	static char out[1 << 20];
	struct msq_msg_hello h = { .flags = MSQ_HELLO_CTL };
	struct msq_msg_hdr s;
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	char buf[MSQ_MSG_MAX];
	size_t len = 0;
	bool end = false;

	if (fd < 0)
		return NULL;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (msq_client_send(fd, &h, MSQ_MSG_HELLO, sizeof(h), 1) < 0 ||
	    recv(fd, buf, sizeof(buf), 0) <= 0 ||
	    msq_client_send(fd, &s, MSQ_MSG_STATUS, sizeof(s), 2) < 0) {
		close(fd);
		return NULL;
	}
	while (!end) {
		struct msq_msg_text *t = (struct msq_msg_text *)buf;
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n < (ssize_t)sizeof(*t) || t->h.type != MSQ_MSG_TEXT)
			break;
		if (len + t->length < sizeof(out)) {
			memcpy(out + len, t->data, t->length);
			len += t->length;
		}
		end = t->flags & MSQ_TEXT_END;
	}
	close(fd);
	out[len] = '\0';
	return end ? out : NULL;
}

#endif

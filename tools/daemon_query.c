/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's status, as madvseqctl asks for it (include/madvseq/protocol.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <madvseq/protocol.h>

#include "../common/client.h"
#include "helper.h"

char *msq_query_daemon_status(const char *sock)
{
	static char buf[MSQ_MSG_MAX];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct msq_msg_hello hello = { .flags = MSQ_HELLO_CTL };
	struct msq_msg_stats_req req = { .format = MSQ_STATS_JSON };
	struct timeval tv = { 5, 0 };
	char *out = NULL, *o;
	size_t len = 0;
	int fd, rc = 0;

	if (strlen(sock) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	strcpy(sa.sun_path, sock);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    (rc = msq_client_send(fd, &hello, MSQ_MSG_HELLO, sizeof(hello), 1)) < 0 ||
	    (rc = msq_client_recv(fd, buf, sizeof(buf), 1)) < 0 ||
	    (rc = msq_client_send(fd, &req, MSQ_MSG_STATS, sizeof(req), 2)) < 0)
		goto fail;
	for (;;) {
		const struct msq_msg_text *t = (const void *)buf;

		if ((rc = msq_client_recv_text(fd, buf, sizeof(buf), 2)) < 0)
			goto fail;
		if (!(o = realloc(out, len + t->length + 1))) {
			rc = -ENOMEM;
			goto fail;
		}
		out = o;
		memcpy(out + len, t->data, t->length);
		len += t->length;
		out[len] = '\0';
		if (t->flags & MSQ_TEXT_END)
			break;
	}
	close(fd);
	return out;
fail:
	if (rc == 0)
		rc = -errno;
	free(out);
	close(fd);
	errno = -rc;
	return NULL;
}

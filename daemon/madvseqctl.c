/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * madvseqctl: asks a running madvseqd for its status or its metrics.
 * See madvseqctl(8).
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <madvseq/protocol.h>

static void usage(FILE *f)
{
	fprintf(f, "Usage: madvseqctl [-s SOCKET] status [--format=text|json]\n"
		   "       madvseqctl [-s SOCKET] stats [--format=text|prometheus|json]\n"
		   "       madvseqctl --version | --help\n"
		   "SOCKET defaults to $MADVSEQ_SOCKET, else " MSQ_DEFAULT_SOCKET ".\n");
}

static int xsend(int fd, void *m, uint16_t type, uint32_t size, uint32_t seq)
{
	struct msq_msg_hdr *h = m;

	*h = (struct msq_msg_hdr){ MSQ_PROTO_MAGIC, MSQ_PROTO_VERSION, type, size, seq };
	return send(fd, m, size, MSG_NOSIGNAL) == (ssize_t)size ? 0 : -errno;
}

static int xrecv(int fd, void *buf, size_t len, uint32_t seq)
{
	struct timeval tv = { 10, 0 };
	const struct msq_msg_hdr *h = buf;
	ssize_t n;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = recv(fd, buf, len, 0);
	if (n < 0)
		return -errno;
	if ((size_t)n < sizeof(*h) || h->magic != MSQ_PROTO_MAGIC || h->size != (uint32_t)n ||
	    h->seq != seq)
		return -EBADMSG;
	if (h->type == MSQ_MSG_ERROR && (size_t)n == sizeof(struct msq_msg_error))
		return ((const struct msq_msg_error *)buf)->status;
	return (int)n;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "format", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	static char buf[MSQ_MSG_MAX];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *sock = getenv("MADVSEQ_SOCKET"), *cmd;
	struct msq_msg_hello hello = { .flags = MSQ_HELLO_CTL };
	struct msq_msg_stats_req req = { 0 };
	bool stats;
	int opt, fd, rc;

	if (!sock || !*sock)
		sock = MSQ_DEFAULT_SOCKET;
	/* Options may also follow the command ("status --format=json"). */
	while ((opt = getopt_long(argc, argv, "s:f:hV", opts, NULL)) != -1) {
		switch (opt) {
		case 's': sock = optarg; break;
		case 'f':
			if (!strcmp(optarg, "prometheus"))
				req.format = MSQ_STATS_PROMETHEUS;
			else if (!strcmp(optarg, "text"))
				req.format = MSQ_STATS_TEXT;
			else if (!strcmp(optarg, "json"))
				req.format = MSQ_STATS_JSON;
			else {
				fprintf(stderr, "madvseqctl: --format: text, prometheus or json\n");
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("madvseqctl %s (protocol %d)\n", MSQD_VERSION, MSQ_PROTO_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 2;
	}
	cmd = argv[optind];
	if (!strcmp(cmd, "status"))
		/* The status in JSON is the same answer as the stats in JSON. */
		stats = req.format == MSQ_STATS_JSON;
	else if (!strcmp(cmd, "stats"))
		stats = true;
	else {
		usage(stderr);
		return 2;
	}
	if (!stats && req.format == MSQ_STATS_PROMETHEUS) {
		fprintf(stderr, "madvseqctl: status: --format is text or json (metrics: stats)\n");
		return 2;
	}
	if (strlen(sock) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "madvseqctl: socket path too long\n");
		return 1;
	}
	strcpy(sa.sun_path, sock);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "madvseqctl: cannot reach madvseqd at %s: %s\n", sock, strerror(errno));
		return 1;
	}
	if ((rc = xsend(fd, &hello, MSQ_MSG_HELLO, sizeof(hello), 1)) < 0 ||
	    (rc = xrecv(fd, buf, sizeof(buf), 1)) < 0)
		goto fail;
	if (stats)
		rc = xsend(fd, &req, MSQ_MSG_STATS, sizeof(req), 2);
	else
		rc = xsend(fd, &req, MSQ_MSG_STATUS, sizeof(struct msq_msg_hdr), 2);
	if (rc < 0)
		goto fail;
	for (;;) {
		const struct msq_msg_text *t = (const void *)buf;

		if ((rc = xrecv(fd, buf, sizeof(buf), 2)) < 0)
			goto fail;
		if (t->h.type != MSQ_MSG_TEXT || (size_t)rc != sizeof(*t) + t->length) {
			rc = -EBADMSG;
			goto fail;
		}
		fwrite(t->data, 1, t->length, stdout);
		if (t->flags & MSQ_TEXT_END)
			break;
	}
	close(fd);
	return fflush(stdout) == 0 ? 0 : 1;
fail:
	fprintf(stderr, "madvseqctl: %s: %s\n", sock,
		rc == -EPERM ? "permission denied (status is for root and the daemon's user)" : strerror(-rc));
	close(fd);
	return 1;
}

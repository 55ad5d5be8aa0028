/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * madvseqctl: asks a running madvseqd for its status or its metrics.
 * See madvseqctl(8).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <madvseq/protocol.h>

#include "../common/client.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: madvseqctl [-s SOCKET] status [--format=text|json]\n"
		   "       madvseqctl [-s SOCKET] stats [--format=text|prometheus|json]\n"
		   "       madvseqctl [-s SOCKET] stats --format=prometheus --output=FILE\n"
		   "       madvseqctl --version | --help\n"
		   "SOCKET defaults to $MADVSEQ_SOCKET, else " MSQ_DEFAULT_SOCKET ".\n");
}

/* --output: the answer goes to a temporary file next to FILE, renamed over
 * it once complete, so that a reader (node_exporter's textfile collector)
 * sees the old file or the new one, never half of one.  The temporary name
 * does not end in ".prom", which the collector skips.  Returns a stream
 * and the temporary path in tmp, or NULL with errno set. */
static FILE *open_atomic(const char *path, char *tmp, size_t len)
{
	FILE *f;
	int fd;

	if ((size_t)snprintf(tmp, len, "%s.XXXXXX", path) >= len) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fchmod(fd, 0644) < 0 || !(f = fdopen(fd, "w"))) {
		int e = errno;

		close(fd);
		unlink(tmp);
		errno = e;
		return NULL;
	}
	return f;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "format", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "output", required_argument, NULL, 'o' },
		{ 0 },
	};
	static char buf[MSQ_MSG_MAX];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *sock = getenv("MADVSEQ_SOCKET"), *cmd, *output = NULL;
	char tmp[4096];
	FILE *out = stdout;
	struct msq_msg_hello hello = { .flags = MSQ_HELLO_CTL };
	struct msq_msg_stats_req req = { 0 };
	bool stats;
	int opt, fd, rc;

	if (!sock || !*sock)
		sock = MSQ_DEFAULT_SOCKET;
	/* Options may also follow the command ("status --format=json"). */
	while ((opt = getopt_long(argc, argv, "s:f:o:hV", opts, NULL)) != -1) {
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
		case 'o': output = optarg; break;
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
	if (output && (!stats || req.format != MSQ_STATS_PROMETHEUS)) {
		fprintf(stderr, "madvseqctl: --output is for stats --format=prometheus\n");
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
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){ 10, 0 }, sizeof(struct timeval));
	if ((rc = msq_client_send(fd, &hello, MSQ_MSG_HELLO, sizeof(hello), 1)) < 0 ||
	    (rc = msq_client_recv(fd, buf, sizeof(buf), 1)) < 0)
		goto fail;
	if (stats)
		rc = msq_client_send(fd, &req, MSQ_MSG_STATS, sizeof(req), 2);
	else
		rc = msq_client_send(fd, &req, MSQ_MSG_STATUS, sizeof(struct msq_msg_hdr), 2);
	if (rc < 0)
		goto fail;
	if (output && !(out = open_atomic(output, tmp, sizeof(tmp)))) {
		fprintf(stderr, "madvseqctl: %s: %s\n", output, strerror(errno));
		close(fd);
		return 1;
	}
	for (;;) {
		const struct msq_msg_text *t = (const void *)buf;

		if ((rc = msq_client_recv_text(fd, buf, sizeof(buf), 2)) < 0)
			goto fail;
		fwrite(t->data, 1, t->length, out);
		if (t->flags & MSQ_TEXT_END)
			break;
	}
	close(fd);
	if (out == stdout)
		return fflush(stdout) == 0 ? 0 : 1;
	if (fflush(out) != 0 || fsync(fileno(out)) < 0 || fclose(out) != 0 || rename(tmp, output) < 0) {
		fprintf(stderr, "madvseqctl: %s: %s\n", output, strerror(errno));
		unlink(tmp);
		return 1;
	}
	return 0;
fail:
	fprintf(stderr, "madvseqctl: %s: %s\n", sock,
		rc == -EPERM ? "permission denied (status is for root and the daemon's user)" : strerror(-rc));
	close(fd);
	if (out != stdout) {
		fclose(out);
		unlink(tmp);
	}
	return 1;
}

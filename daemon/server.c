/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The socket: accepting clients, framing, answering.  A client that
 * breaks the protocol (malformed, truncated, oversized, out of order, or
 * never says HELLO) is disconnected; its regions stop being managed.
 * What a message may ask is checked by validate.c and done by handle.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <madvseq/protocol.h>

#include "../common/fault.h"
#include "client.h"
#include "msqd.h"
#include "handle.h"
#include "log.h"
#include "server.h"
#include "util.h"

/* Messages handled per wakeup of one client, so no client starves others. */
#define MAX_BURST 64
/* Connections kept for root beyond max_clients: its status always answers. */
#define ROOT_SLOTS 16

static int mkdir_parents(const char *path)
{
	char buf[sizeof(((struct sockaddr_un *)0)->sun_path)];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

int msqd_server_listen(struct msqd *d)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;
	struct stat st;
	int rc;

	if (strlen(d->set.socket) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, d->set.socket);
	if ((rc = mkdir_parents(d->set.socket)) < 0)
		return rc;
	if (MSQ_FAULT("madvseq/daemon/socket/listen"))
		return -EADDRINUSE;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* A socket file left by a daemon that was killed: remove it, unless a
	 * daemon still answers there. */
	if (lstat(d->set.socket, &st) == 0 && S_ISSOCK(st.st_mode)) {
		_cleanup_close_ int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return -EADDRINUSE;
		unlink(d->set.socket);
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	/* Any user's shim may connect; what it may ask is checked per message. */
	if (chmod(d->set.socket, 0666) < 0)
		return -errno;
	if (listen(fd, SOMAXCONN) < 0)
		return -errno;
	d->srv.lfd = fd;
	fd = -1;
	return 0;
}

/*
 * Why a new client of uid must be refused, or NULL.  Every user but root
 * has max_clients slots between them and max_clients_per_uid each; root
 * has ROOT_SLOTS more, so that its status always gets through a flood.
 * Discovered processes count against max_clients too.
 */
static const char *over_limit(const struct msqd *d, uid_t uid)
{
	unsigned same = 0;

	if (uid == 0)
		return d->cl.n >= d->set.conf.max_clients + ROOT_SLOTS ? "max_clients, and root's reserve"
									  : NULL;
	if (d->cl.n >= d->set.conf.max_clients)
		return "max_clients";
	for (const struct msqd_client *c = d->cl.list; c; c = c->next)
		same += c->fd >= 0 && c->uid == uid;
	return same >= d->set.conf.max_clients_per_uid ? "max_clients_per_uid" : NULL;
}

/* Connections accepted per turn of the event loop.  Each costs an
 * identity check, which without SO_PEERPIDFD (before 6.5) reads the
 * peer's /proc/PID/fd: a thousand connections from one process, taken in
 * one turn, kept the first one's WELCOME back for seconds on a kernel
 * without it (tests/bench/RESULTS.md).  The listening socket stays
 * readable: the rest
 * come next turn, after what the accepted ones said is answered. */
#define ACCEPT_BATCH 16

void msqd_server_accept(struct msqd *d)
{
	for (int n = 0; n < ACCEPT_BATCH; n++) {
		struct ucred cr;
		socklen_t len = sizeof(cr);
		const char *why;
		int fd, pidfd;

		if (MSQ_FAULT("madvseq/daemon/socket/accept"))
			return;
		fd = accept4(d->srv.lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE) && d->srv.spare_fd >= 0) {
			/* Out of descriptors: a pending connection would keep the
			 * listening socket readable forever.  Use the spare to
			 * accept and refuse it (its shim carries on alone). */
			if (!d->srv.emfile_warned)
				log_warn("out of file descriptors at %u clients: refusing new ones "
					 "(raise LimitNOFILE)", d->cl.n);
			d->srv.emfile_warned = true;
			close(d->srv.spare_fd);
			fd = accept4(d->srv.lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0)
				close(fd);
			d->srv.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (fd >= 0)
				continue;
			return;
		}
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_warn("accept: %s", strerror(errno));
			return;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
			close(fd);
			continue;
		}
		if ((why = over_limit(d, cr.uid))) {
			d->srv.refused++;
			if (!d->srv.limit_warned)
				log_warn("uid %u: refusing clients (%s)", (unsigned)cr.uid, why);
			d->srv.limit_warned = true;
			close(fd);
			continue;
		}
		pidfd = msqd_peer_pidfd(fd, &cr);
		if (pidfd < 0) {
			log_debug("peer identity: %s", strerror(-pidfd));
			d->srv.refused++;
			close(fd);
			continue;
		}
		if (!msqd_client_new(d, fd, pidfd, cr.pid, cr.uid)) {
			close(pidfd);
			close(fd);
		}
	}
}

static int send_msg(struct msqd_client *c, void *msg, uint16_t type, uint32_t size, uint32_t seq)
{
	struct msq_msg_hdr *h = msg;

	*h = (struct msq_msg_hdr){ MSQ_PROTO_MAGIC, MSQ_PROTO_VERSION, type, size, seq };
	if (MSQ_FAULT("madvseq/daemon/socket/send"))
		return -EPIPE;
	if (send(c->fd, msg, size, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)size)
		return errno ? -errno : -EIO;
	return 0;
}

/* A text answer in chunks, blocking up to a few seconds: madvseqctl waits
 * for it, and only privileged users may ask. */
static int send_text(struct msqd_client *c, uint32_t seq, const char *text, size_t len)
{
	static char buf[MSQ_MSG_MAX];
	struct msq_msg_text *m = (struct msq_msg_text *)buf;
	const size_t room = MSQ_MSG_MAX - sizeof(*m);
	struct timeval tv = { 3, 0 };
	int fl = fcntl(c->fd, F_GETFL), rc = 0;

	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	fcntl(c->fd, F_SETFL, fl & ~O_NONBLOCK);
	do {
		size_t n = len < room ? len : room;
		struct msq_msg_hdr *h = &m->h;

		m->flags = n == len ? MSQ_TEXT_END : 0;
		m->length = (uint32_t)n;
		memcpy(m->data, text, n);
		*h = (struct msq_msg_hdr){ MSQ_PROTO_MAGIC, MSQ_PROTO_VERSION, MSQ_MSG_TEXT,
					   (uint32_t)(sizeof(*m) + n), seq };
		if (send(c->fd, m, sizeof(*m) + n, MSG_NOSIGNAL) != (ssize_t)(sizeof(*m) + n)) {
			rc = -errno;
			break;
		}
		text += n;
		len -= n;
	} while (len);
	fcntl(c->fd, F_SETFL, fl);
	return rc;
}

int msqd_server_send_reply(struct msqd_client *c, struct msqd_reply *r)
{
	int rc = 0;

	if (r->kind == MSQD_REPLY_MSG)
		rc = send_msg(c, &r->msg, r->type, r->size, r->seq);
	else if (r->kind == MSQD_REPLY_TEXT)
		rc = send_text(c, r->seq, r->text, r->len);
	free(r->text);
	return r->send_may_fail ? 0 : rc;
}

void msqd_server_readable(struct msqd *d, struct msqd_client *c)
{
	/* One byte more than the largest message, to see oversized ones. */
	static uint64_t buf[(MSQ_MSG_MAX + 8) / 8];

	for (int i = 0; i < MAX_BURST; i++) {
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n;
		int rc;

		if (MSQ_FAULT("madvseq/daemon/socket/recv")) {
			msqd_client_drop(d, c, "receive failed (fault injected)");
			return;
		}
		n = recvmsg(c->fd, &mh, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		/* (A peer gone with our replies unread is ECONNRESET.) */
		if ((n == 0 || (n < 0 && errno == ECONNRESET)) && c->nr) {
			msqd_client_closing(d, c);
			return;
		}
		if (n <= 0) {
			msqd_client_drop(d, c, n == 0 ? "disconnected" : strerror(errno));
			return;
		}
		if (mh.msg_flags & MSG_TRUNC || (size_t)n > MSQ_MSG_MAX)
			rc = -EMSGSIZE;
		else {
			struct msqd_reply reply = { 0 };
			int sent;

			rc = msqd_handle(d, c, buf, (size_t)n, &reply);
			sent = msqd_server_send_reply(c, &reply);
			if (rc == 0)
				rc = sent;
		}
		if (c->closing_ns)
			return; /* it went while we answered */
		if (rc < 0) {
			/* Refused requests answered with an error are not the
			 * client's fault; everything else is a protocol error. */
			if (rc != -EPERM && rc != -ESRCH && rc != -EACCES && rc != -ENOENT) {
				c->proto_errors++;
				d->cnt.proto_errors++;
				log_info("pid %d: %s; disconnecting it", (int)c->pid,
					 rc == -EMSGSIZE ? "oversized message"
					 : rc == -EBADMSG ? "malformed or truncated message"
					 : rc == -EPROTO ? "message out of order"
					 : strerror(-rc));
			}
			msqd_client_drop(d, c, "protocol");
			return;
		}
	}
}

/* Whether a message from the client waits unread.  A daemon kept busy (a
 * thousand clients exiting at once) may reach a new client's HELLO only after
 * hello_timeout: that client did speak in time and must not be cut off. */
static bool message_waiting(int fd)
{
	char byte;

	return recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

void msqd_server_timeouts(struct msqd *d)
{
	for (struct msqd_client *c = d->cl.list, *next; c; c = next) {
		next = c->next;
		if (c->fd >= 0 && !c->hello && d->now_ns - c->since_ns > d->set.conf.hello_timeout_ns &&
		    !message_waiting(c->fd))
			msqd_client_drop(d, c, "said nothing (hello_timeout)");
		else if (c->closing_ns && d->now_ns >= c->closing_ns)
			msqd_client_drop(d, c, c->dead ? "exited (its pidfd did not say so in time)"
						       : "disconnected (still running)");
	}
}

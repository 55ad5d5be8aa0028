/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The socket: accepting clients, taking their identity from the kernel,
 * checking every message, answering.  A client that breaks the protocol
 * (malformed, truncated, oversized, out of order, or never says HELLO) is
 * disconnected; its regions stop being managed.  Nothing a message says
 * is trusted beyond what /proc/PID/maps confirms (manage.c).
 */
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <madvseq/protocol.h>

#include "../common/fault.h"
#include "../common/frontier.h"
#include "../common/sys.h"
#include "daemon.h"
#include "log.h"

/* How long a client whose socket ended with regions still registered
 * has to count as exited (see msqd_server_readable). */
#define EXIT_WAIT_NS (UINT64_C(200) * 1000 * 1000)

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
/* Messages handled per wakeup of one client, so no client starves others. */
#define MAX_BURST 64
#define MAX_REGIONS_PER_CLIENT 65536

void msqd_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static bool pidfd_alive(int pidfd)
{
	return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0;
}

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

	if (strlen(d->socket) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, d->socket);
	if ((rc = mkdir_parents(d->socket)) < 0)
		return rc;
	if (MSQ_FAULT("madvseq/daemon/socket/listen"))
		return -EADDRINUSE;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* A socket file left by a daemon that was killed: remove it, unless a
	 * daemon still answers there. */
	if (lstat(d->socket, &st) == 0 && S_ISSOCK(st.st_mode)) {
		_cleanup_close_ int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return -EADDRINUSE;
		unlink(d->socket);
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	/* Any user's shim may connect; what it may ask is checked per message. */
	if (chmod(d->socket, 0666) < 0)
		return -errno;
	if (listen(fd, SOMAXCONN) < 0)
		return -errno;
	d->lfd = fd;
	fd = -1;
	return 0;
}

struct msqd_client *msqd_client_new(struct msqd *d, int fd, int pidfd, pid_t pid, uid_t uid)
{
	struct msqd_client *c = calloc(1, sizeof(*c));

	if (!c || MSQ_FAULT("madvseq/alloc")) {
		free(c);
		return NULL;
	}
	c->fd = fd;
	c->pidfd = pidfd;
	c->pid = pid;
	c->uid = uid;
	c->since_ns = d->now_ns;
	c->statfd = c->schedfd = -1;
	msq_engine_init(&c->eng, pidfd, MSQ_DEFAULT_LAG);
	c->wsock = (struct msqd_watch){ MSQD_W_SOCK, c };
	c->wpid = (struct msqd_watch){ MSQD_W_PIDFD, c };
	if (fd >= 0 && epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd,
				 &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &c->wsock }) < 0)
		goto fail;
	/* The pidfd turns readable when the process exits. */
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, pidfd,
		      &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &c->wpid }) < 0) {
		if (fd >= 0)
			epoll_ctl(d->epfd, EPOLL_CTL_DEL, fd, NULL);
		goto fail;
	}
	c->next = d->clients;
	if (d->clients)
		d->clients->prev = c;
	d->clients = c;
	d->nclients++;
	if (fd < 0)
		d->ndiscovered++;
	return c;
fail:
	free(c);
	return NULL;
}

int msqd_client_attach(struct msqd *d, struct msqd_client *c)
{
	char path[4096];
	enum msqd_cg_layout layout;
	int rc;

	if ((rc = msqd_cgroup_of(d->proc_root, c->pid, path, sizeof(path), &layout)) < 0)
		return rc;
	if ((rc = msq_pagemap_open(&c->eng.pm, d->proc_root, c->pid, 0)) < 0)
		return rc;
	/* PAGEMAP_SCAN over whole regions, as the shim does: it finds a
	 * reader wherever it is at once (windowed reads sweep 32 MiB a cycle,
	 * so a reader far into a region handed over late would be found many
	 * cycles later).  Idle clients are not scanned at all (manage.c). */
	{
		char stat[256];

		snprintf(stat, sizeof(stat), "%s/%d/stat", d->proc_root, (int)c->pid);
		c->statfd = open(stat, O_RDONLY | O_CLOEXEC);
		snprintf(stat, sizeof(stat), "%s/%d/schedstat", d->proc_root, (int)c->pid);
		c->schedfd = open(stat, O_RDONLY | O_CLOEXEC);
	}
	/* Opened while the pidfd's process is alive: the pid named that
	 * process, not a later one with the same number. */
	if (!pidfd_alive(c->pidfd))
		return -ESRCH;
	c->cg = msqd_cg_get(d, path, layout);
	if (!c->cg)
		return -ENOMEM;
	c->cg->clients++;
	return 0;
}

/*
 * The client's process is going: its socket ended (a process being killed
 * closes its files before it counts as exited), or its address space is
 * gone (c->dead).  Its pages stay mapped until the kernel has torn that
 * address space down, which for a large process takes tens of
 * milliseconds; its pidfd turns readable only after.  Only then is what
 * its regions left the daemon's to drop: wait for that (without blocking,
 * and not for long), managing and answering nothing of it meanwhile.
 */
void msqd_client_closing(struct msqd *d, struct msqd_client *c)
{
	if (c->closing_ns)
		return;
	if (c->fd >= 0)
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	c->closing_ns = d->now_ns + EXIT_WAIT_NS;
}

void msqd_client_drop(struct msqd *d, struct msqd_client *c, const char *why)
{
	log_debug("client pid %d%s: %s", (int)c->pid, c->fd < 0 ? " (discovered)" : "", why);
	/* Gone with regions still managed: what they left cached is the
	 * daemon's to drop (a live client keeps its pages, or its shim
	 * takes its regions back). */
	if (c->nr && (c->dead || poll(&(struct pollfd){ .fd = c->pidfd, .events = POLLIN }, 1, 0) == 1)) {
		log_debug("pid %d exited with %zu region%s managed: dropping what %s left cached",
			  (int)c->pid, c->nr, c->nr == 1 ? "" : "s", c->nr == 1 ? "it" : "they");
		while (c->nr)
			msqd_region_exited(d, c, c->nr - 1);
	}
	while (c->nr)
		msqd_region_remove(d, c, c->nr - 1);
	free(c->r);
	if (c->cg)
		c->cg->clients--;
	if (c->fd >= 0) {
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		d->nshim -= c->counted;
	} else {
		d->ndiscovered--;
	}
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->pidfd, NULL);
	close(c->pidfd);
	msq_pagemap_close(&c->eng.pm);
	if (c->statfd >= 0)
		close(c->statfd);
	if (c->schedfd >= 0)
		close(c->schedfd);
	msq_engine_free(&c->eng);
	if (c->prev)
		c->prev->next = c->next;
	else
		d->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	d->nclients--;
	free(c);
}

/* The peer's process as a pidfd, from the kernel only. */
static int peer_pidfd(int fd, pid_t *pid, uid_t *uid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	int pidfd = -1;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return -errno;
	len = sizeof(pidfd);
	/* 6.5+: the pidfd of the process that connected, race-free. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0 || pidfd < 0) {
		/* Older kernels: pidfd_open, which a pid reused between
		 * connect and here could fool; the peer must also still
		 * hold its end (checked again at HELLO). */
		pidfd = msq_pidfd_open(cr.pid);
		if (pidfd < 0)
			return -errno;
	} else {
		int fl = fcntl(pidfd, F_GETFD);

		if (fl >= 0)
			fcntl(pidfd, F_SETFD, fl | FD_CLOEXEC);
	}
	*pid = cr.pid;
	*uid = cr.uid;
	return pidfd;
}

void msqd_server_accept(struct msqd *d)
{
	for (;;) {
		int fd, pidfd;
		pid_t pid = 0;
		uid_t uid = 0;

		if (MSQ_FAULT("madvseq/daemon/socket/accept"))
			return;
		fd = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE) && d->spare_fd >= 0) {
			/* Out of descriptors: a pending connection would keep the
			 * listening socket readable forever.  Use the spare to
			 * accept and refuse it (its shim carries on alone). */
			if (!d->emfile_warned)
				log_warn("out of file descriptors at %u clients: refusing new ones "
					 "(raise LimitNOFILE)", d->nclients);
			d->emfile_warned = true;
			close(d->spare_fd);
			fd = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0)
				close(fd);
			d->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (fd >= 0)
				continue;
			return;
		}
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_warn("accept: %s", strerror(errno));
			return;
		}
		if (d->nclients >= d->conf.max_clients) {
			log_warn("%u clients: refusing more (max_clients)", d->nclients);
			close(fd);
			continue;
		}
		pidfd = peer_pidfd(fd, &pid, &uid);
		if (pidfd < 0) {
			log_debug("peer identity: %s", strerror(-pidfd));
			close(fd);
			continue;
		}
		if (!msqd_client_new(d, fd, pidfd, pid, uid)) {
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

static int send_error(struct msqd_client *c, uint32_t seq, int status)
{
	struct msq_msg_error m = { .status = status, .version = MSQ_PROTO_VERSION };

	return send_msg(c, &m, MSQ_MSG_ERROR, sizeof(m), seq);
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
static bool size_ok(uint16_t type, const void *buf, size_t n)
{
	const struct msq_msg_register *r = buf;
	size_t fixed = expected_size(type);

	if (type != MSQ_MSG_REGISTER || n < fixed)
		return fixed && n == fixed;
	return r->nprecached <= MSQ_REGISTER_MAX_PRECACHED &&
	       n == fixed + r->nprecached * sizeof(struct msq_wire_range) &&
	       (r->nprecached == 0 || r->flags & MSQ_REGION_SNAPSHOT);
}

static int on_hello(struct msqd *d, struct msqd_client *c, const struct msq_msg_hello *m)
{
	struct msq_msg_welcome w = { 0 };
	int rc;

	if (m->flags & ~(MSQ_HELLO_SHIM | MSQ_HELLO_CTL) || m->pad ||
	    !(m->flags & MSQ_HELLO_SHIM) == !(m->flags & MSQ_HELLO_CTL))
		return -EINVAL;
	c->hello = true;
	if (m->flags & MSQ_HELLO_CTL) {
		/* Status names processes and cgroups: root or the daemon's user. */
		if (c->uid != 0 && c->uid != geteuid()) {
			send_error(c, m->h.seq, -EPERM);
			return -EPERM;
		}
		c->ctl = true;
	} else {
		if ((rc = msqd_client_attach(d, c)) < 0) {
			log_info("pid %d: cannot manage it (%s); it goes on by itself", (int)c->pid,
				 strerror(-rc));
			send_error(c, m->h.seq, rc);
			return rc;
		}
		d->nshim++;
		c->counted = true;
		w.flags = MSQ_WELCOME_DELEGATE;
		log_debug("pid %d (uid %u) registered, cgroup %s", (int)c->pid, (unsigned)c->uid,
			  c->cg->path);
	}
	return send_msg(c, &w, MSQ_MSG_WELCOME, sizeof(w), m->h.seq);
}

static int on_register(struct msqd *d, struct msqd_client *c, const struct msq_msg_register *m)
{
	struct msq_msg_result res = { .id = m->id };

	if (m->flags & ~(MSQ_REGION_SHARED | MSQ_REGION_WRITABLE | MSQ_REGION_SNAPSHOT))
		return -EINVAL;
	if (m->start % 4096 || m->length % 4096 || !m->length || m->start + m->length < m->start ||
	    m->start + m->length > (UINT64_C(1) << 57) || m->offset % 4096)
		res.status = -EINVAL;
	else if (c->nr >= MAX_REGIONS_PER_CLIENT)
		res.status = -ENOSPC;
	else
		res.status = msqd_region_add(d, c, m->id, m->start, m->length, m->dev, m->ino,
					     m->offset, false, NULL, false, false,
					     m->flags & MSQ_REGION_SNAPSHOT ? m->precached : NULL,
					     m->nprecached);
	if (res.status < 0) {
		d->refused_regions++;
		log_debug("pid %d: region %#llx+%#llx refused: %s", (int)c->pid,
			  (unsigned long long)m->start, (unsigned long long)m->length,
			  strerror(-res.status));
	}
	return send_msg(c, &res, MSQ_MSG_RESULT, sizeof(res), m->h.seq);
}

static int on_unregister(struct msqd *d, struct msqd_client *c, const struct msq_msg_unregister *m)
{
	struct msq_msg_result res = { 0 };
	uint64_t end = m->start + m->length;

	if (m->pad || m->flags & ~MSQ_UNREGISTER_FINAL)
		return -EINVAL;
	if (end < m->start)
		end = UINT64_MAX;
	for (size_t i = c->nr; i-- > 0;) {
		if (c->r[i]->s.start >= end || c->r[i]->s.end <= m->start)
			continue;
		/* Still mapped: the client waits for this answer to unmap.
		 * (Unless it gave up waiting and exited: then through the
		 * file.) */
		if (m->flags & MSQ_UNREGISTER_FINAL) {
			msqd_region_final_drop(d, c, i, m->start, end);
			if (c->dead)
				continue; /* through the file, once it has exited */
		}
		msqd_region_remove(d, c, i);
	}
	if (c->dead)
		return 0; /* and it waits for no answer */
	return send_msg(c, &res, MSQ_MSG_RESULT, sizeof(res), m->h.seq);
}

static int on_policy(struct msqd *d, struct msqd_client *c, const struct msq_msg_hdr *h)
{
	const struct msqd_policy *p = c->cg->pol;
	struct msq_msg_policy m = {
		.mode = p->mode, .read = p->read, .lag = p->lag,
		.interval_ns = d->conf.interval_ns, .flags = MSQ_WELCOME_DELEGATE,
	};

	return send_msg(c, &m, MSQ_MSG_POLICY, sizeof(m), h->seq);
}

static int on_text(struct msqd *d, struct msqd_client *c, const struct msq_msg_hdr *h, bool stats,
		   uint32_t format)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int rc;

	if (stats && format > MSQ_STATS_JSON)
		return -EINVAL;
	rc = stats ? msqd_stats_text(d, format, &buf, &len)
		   : msqd_status_text(d, &buf, &len);
	if (rc < 0) {
		send_error(c, h->seq, rc);
		return 0;
	}
	return send_text(c, h->seq, buf, len);
}

/* Handles one message; < 0 ends the connection. */
static int handle(struct msqd *d, struct msqd_client *c, const void *buf, size_t n)
{
	const struct msq_msg_hdr *h = buf;

	if (n < sizeof(*h) || h->magic != MSQ_PROTO_MAGIC)
		return -EBADMSG;
	if (h->version != MSQ_PROTO_VERSION) {
		send_error(c, h->seq, -EPROTONOSUPPORT);
		return -EPROTONOSUPPORT;
	}
	if (h->size != n || !size_ok(h->type, buf, n))
		return -EBADMSG; /* truncated, padded, or of an unknown type */
	if (!c->hello && h->type != MSQ_MSG_HELLO)
		return -EPROTO;
	switch (h->type) {
	case MSQ_MSG_HELLO:
		if (c->hello)
			return -EPROTO;
		return on_hello(d, c, buf);
	case MSQ_MSG_REGISTER:
		return c->ctl ? -EPROTO : on_register(d, c, buf);
	case MSQ_MSG_UNREGISTER:
		return c->ctl ? -EPROTO : on_unregister(d, c, buf);
	case MSQ_MSG_POLICY_GET:
		return c->ctl ? -EPROTO : on_policy(d, c, buf);
	case MSQ_MSG_STATUS:
		return !c->ctl ? -EPROTO : on_text(d, c, buf, false, 0);
	case MSQ_MSG_STATS:
		return !c->ctl ? -EPROTO : on_text(d, c, buf, true, ((const struct msq_msg_stats_req *)buf)->format);
	}
	return -EBADMSG;
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
		else
			rc = handle(d, c, buf, (size_t)n);
		if (c->closing_ns)
			return; /* it went while we answered */
		if (rc < 0) {
			/* Refused requests answered with an error are not the
			 * client's fault; everything else is a protocol error. */
			if (rc != -EPERM && rc != -ESRCH && rc != -EACCES && rc != -ENOENT) {
				c->proto_errors++;
				d->proto_errors++;
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
	for (struct msqd_client *c = d->clients, *next; c; c = next) {
		next = c->next;
		if (c->fd >= 0 && !c->hello && d->now_ns - c->since_ns > d->conf.hello_timeout_ns &&
		    !message_waiting(c->fd))
			msqd_client_drop(d, c, "said nothing (hello_timeout)");
		else if (c->closing_ns && d->now_ns >= c->closing_ns)
			msqd_client_drop(d, c, c->dead ? "exited (its pidfd did not say so in time)"
						       : "disconnected (still running)");
	}
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Clients: a shim that connected, or a process discovery found.  Their
 * identity (pidfd, pid, uid) comes from the kernel only; their pagemap
 * and /proc files are opened while the pidfd shows the process alive.
 * When one goes, its regions go with it (to the exit-drop queue if it
 * exited with them managed).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fault.h"
#include "../common/sys.h"
#include "client.h"
#include "msqd.h"
#include "exitdrop.h"
#include "log.h"
#include "regions.h"
#include "util.h"

/* How long a client whose socket ended with regions still registered
 * has to count as exited (see msqd_server_readable). */
#define EXIT_WAIT_NS (UINT64_C(200) * 1000 * 1000)

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

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
	if (fd >= 0 && epoll_ctl(d->srv.epfd, EPOLL_CTL_ADD, fd,
				 &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &c->wsock }) < 0)
		goto fail;
	/* The pidfd turns readable when the process exits. */
	if (epoll_ctl(d->srv.epfd, EPOLL_CTL_ADD, pidfd,
		      &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &c->wpid }) < 0) {
		if (fd >= 0)
			epoll_ctl(d->srv.epfd, EPOLL_CTL_DEL, fd, NULL);
		goto fail;
	}
	c->next = d->cl.list;
	if (d->cl.list)
		d->cl.list->prev = c;
	d->cl.list = c;
	d->cl.n++;
	if (fd < 0)
		d->cl.ndiscovered++;
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

	if ((rc = msqd_cgroup_of(d->set.proc_root, c->pid, path, sizeof(path), &layout)) < 0)
		return rc;
	/* The pagemap first: it binds the mm the rights are checked for. */
	if ((rc = msq_pagemap_open(&c->eng.pm, d->set.proc_root, c->pid, 0)) < 0)
		return rc;
	if ((rc = msqd_client_may_act(d, c)) < 0)
		return rc;
	/* PAGEMAP_SCAN over whole regions, as the shim does: it finds a
	 * reader wherever it is at once (windowed reads sweep 32 MiB a cycle,
	 * so a reader far into a region handed over late would be found many
	 * cycles later).  Idle clients are not scanned at all (cycle.c). */
	{
		char stat[256];

		snprintf(stat, sizeof(stat), "%s/%d/stat", d->set.proc_root, (int)c->pid);
		c->statfd = open(stat, O_RDONLY | O_CLOEXEC);
		snprintf(stat, sizeof(stat), "%s/%d/schedstat", d->set.proc_root, (int)c->pid);
		c->schedfd = open(stat, O_RDONLY | O_CLOEXEC);
	}
	/* Opened while the pidfd's process is alive: the pid named that
	 * process, not a later one with the same number. */
	if (!msqd_pidfd_alive(c->pidfd))
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
		epoll_ctl(d->srv.epfd, EPOLL_CTL_DEL, c->fd, NULL);
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
		epoll_ctl(d->srv.epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		d->cl.nshim -= c->counted;
	} else {
		d->cl.ndiscovered--;
	}
	epoll_ctl(d->srv.epfd, EPOLL_CTL_DEL, c->pidfd, NULL);
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
		d->cl.list = c->next;
	if (c->next)
		c->next->prev = c->prev;
	d->cl.n--;
	free(c);
}

/*
 * The peer inode of a connected unix socket (sock_diag, UDIAG_SHOW_PEER).
 * Returns 0 or -errno.
 */
static int unix_peer_ino(int fd, uint64_t *peer)
{
	struct {
		struct nlmsghdr nlh;
		struct unix_diag_req r;
	} req = {
		.nlh = { .nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			 .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1 },
		.r = { .sdiag_family = AF_UNIX, .udiag_states = UINT32_MAX,
		       .udiag_show = UDIAG_SHOW_PEER, .udiag_cookie = { UINT32_MAX, UINT32_MAX } },
	};
	_cleanup_close_ int nl = -1;
	uint64_t buf[1024];
	struct stat st;
	ssize_t n;

	if (fstat(fd, &st) < 0)
		return -errno;
	req.r.udiag_ino = (uint32_t)st.st_ino;
	nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0)
		return -errno;
	if (send(nl, &req, sizeof(req), 0) != (ssize_t)sizeof(req))
		return -errno;
	n = recv(nl, buf, sizeof(buf), 0);
	if (n < 0)
		return -errno;
	for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
		struct unix_diag_msg *m = NLMSG_DATA(h);
		struct rtattr *a;
		int alen;

		if (h->nlmsg_type == NLMSG_ERROR)
			return -ENOENT;
		if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || m->udiag_ino != (uint32_t)st.st_ino)
			continue;
		alen = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
		for (a = (struct rtattr *)(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen))
			if (a->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(a) >= sizeof(uint32_t)) {
				*peer = *(uint32_t *)RTA_DATA(a);
				return 0;
			}
	}
	return -ENOENT;
}

/* Whether the process behind pidfd (pid) holds a descriptor of socket
 * inode ino, read from the real /proc/PID/fd while the pidfd shows it
 * alive. */
static bool holds_socket(pid_t pid, int pidfd, uint64_t ino)
{
	char dir[256], want[64], link[64];
	struct dirent *de;
	bool found = false;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof(want), "socket:[%llu]", (unsigned long long)ino);
	if (!(d = opendir(dir)))
		return false;
	while (!found && (de = readdir(d))) {
		ssize_t n = readlinkat(dirfd(d), de->d_name, link, sizeof(link) - 1);

		if (n > 0) {
			link[n] = '\0';
			found = !strcmp(link, want);
		}
	}
	closedir(d);
	return found && msqd_pidfd_alive(pidfd);
}

/*
 * The peer's process as a pidfd, from the kernel only.  6.5+ gives it
 * race-free (SO_PEERPIDFD, the process that connected).  Only where that
 * option does not exist (ENOPROTOOPT; EINVAL from kernels that know the
 * number for something else) is the pid from SO_PEERCRED opened, which a
 * pid reused between connect and accept could name: that process must
 * then hold the other end of this very socket (sock_diag's peer inode,
 * found among its /proc/PID/fd), and have the uid the kernel recorded at
 * connect.  Any other failure refuses the client.  That proof is read in
 * the real /proc, whatever --proc-root names: the pidfd is of a real
 * process, and a fixture tree (tests) holds no descriptors.
 */
int msqd_peer_pidfd(int fd, const struct ucred *cr)
{
	socklen_t len = sizeof(int);
	uint64_t peer;
	uid_t uid;
	int pidfd = -1, err;

	if (MSQ_FAULT("madvseq/daemon/socket/peerpidfd")) {
		/* (tests: a kernel without SO_PEERPIDFD) */
		errno = ENOPROTOOPT;
		err = -1;
	} else {
		err = getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len);
	}
	if (err == 0 && pidfd >= 0) {
		int fl = fcntl(pidfd, F_GETFD);

		if (fl >= 0)
			fcntl(pidfd, F_SETFD, fl | FD_CLOEXEC);
		return pidfd;
	}
	if (err == 0 || (errno != ENOPROTOOPT && errno != EINVAL))
		return err == 0 ? -ESRCH : -errno;
	if ((pidfd = msq_pidfd_open(cr->pid)) < 0)
		return -errno;
	if ((err = unix_peer_ino(fd, &peer)) < 0 || !holds_socket(cr->pid, pidfd, peer) ||
	    msqd_proc_uids("/proc", cr->pid, &uid, NULL, NULL) < 0 || uid != cr->uid ||
	    !msqd_pidfd_alive(pidfd)) {
		close(pidfd);
		return err < 0 ? err : -ESRCH;
	}
	return pidfd;
}

/* Real, effective and saved uids of pid, from /proc/PID/status.  0 or
 * -errno. */
int msqd_proc_uids(const char *proc_root, pid_t pid, uid_t *r, uid_t *e, uid_t *s)
{
	char path[256], buf[4096], *p;
	_cleanup_close_ int fd = -1;
	unsigned long ur, ue, us;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%d/status", proc_root, (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
		return -errno;
	if ((n = read(fd, buf, sizeof(buf) - 1)) <= 0)
		return n < 0 ? -errno : -EIO;
	buf[n] = '\0';
	if (!(p = strstr(buf, "\nUid:")) || sscanf(p + 5, "%lu %lu %lu", &ur, &ue, &us) != 3)
		return -EIO;
	*r = (uid_t)ur;
	if (e)
		*e = (uid_t)ue;
	if (s)
		*s = (uid_t)us;
	return 0;
}

/*
 * Whether the address space the client had at HELLO is still its own:
 * the pagemap descriptor opened then is bound to that mm, and reads
 * nothing once the process exec'd (or exited), even with the same pid
 * and the same program.  One pread of 8 bytes: cheap enough to ask before
 * every action.  (Entry 0 is read: the page at address 0, never mapped,
 * but the read itself answers 8 bytes while the mm lives.)
 */
bool msqd_client_same_mm(const struct msqd_client *c)
{
	uint64_t e;

	return c->eng.pm.fd >= 0 && pread(c->eng.pm.fd, &e, sizeof(e), 0) == (ssize_t)sizeof(e);
}

/* Whether the process has an address space at all (a new pagemap reads
 * something): after the mm check failed, an exec (true) or an exit. */
static bool has_mm(struct msqd *d, const struct msqd_client *c)
{
	char path[256];
	_cleanup_close_ int fd = -1;
	uint64_t e;

	snprintf(path, sizeof(path), "%s/%d/pagemap", d->set.proc_root, (int)c->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd >= 0 && pread(fd, &e, sizeof(e), 0) == (ssize_t)sizeof(e) && msqd_pidfd_alive(c->pidfd);
}

/*
 * Whether the client may have the daemon act on its process now.  The
 * rule is the kernel's own for a ptrace-like access by an unprivileged
 * user, simplified: the process's real, effective and saved uids all
 * equal the client's (SO_PEERCRED) uid, and it is dumpable (the kernel
 * makes /proc/PID root's when it is not: a setuid or setgid program, or
 * one that said PR_SET_DUMPABLE 0).  A root client may act on anyone.
 * Then the mm check above: an exec since HELLO (a setuid program, say)
 * ends the client's rights, whatever its credentials are now.  Read
 * while the pidfd shows the process alive.  Returns 0, -EPERM, or -ESRCH
 * (the process is gone, or exiting: its address space is).
 */
int msqd_client_may_act(struct msqd *d, struct msqd_client *c)
{
	char path[256];
	struct stat st;
	uid_t r, e, s;

	if (c->denied)
		return -EPERM;
	if (c->uid != 0) {
		snprintf(path, sizeof(path), "%s/%d", d->set.proc_root, (int)c->pid);
		if (msqd_proc_uids(d->set.proc_root, c->pid, &r, &e, &s) < 0 || stat(path, &st) < 0)
			return -ESRCH;
		if (r != c->uid || e != c->uid || s != c->uid || st.st_uid != c->uid)
			return -EPERM;
	}
	if (!msqd_pidfd_alive(c->pidfd))
		return -ESRCH;
	if (c->eng.pm.fd >= 0 && !msqd_client_same_mm(c))
		return has_mm(d, c) ? -EPERM : -ESRCH;
	return 0;
}

/* The client lost its rights (it exec'd, or its credentials changed):
 * its regions go without a drop, and it is refused from now on. */
void msqd_client_deny(struct msqd *d, struct msqd_client *c, const char *why)
{
	if (!c->denied) {
		log_info("pid %d (uid %u): %s; no longer acting on it", (int)c->pid, (unsigned)c->uid,
			 why);
		d->cl.denied++;
	}
	c->denied = true;
	while (c->nr)
		msqd_region_remove(d, c, c->nr - 1);
}

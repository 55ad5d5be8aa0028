/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Clients: a shim that connected, or a process discovery found.  Their
 * identity (pidfd, pid, uid) comes from the kernel only; their pagemap
 * and /proc files are opened while the pidfd shows the process alive.
 * When one goes, its regions go with it (to the exit-drop queue if it
 * exited with them managed).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/fault.h"
#include "../common/sys.h"
#include "client.h"
#include "daemon.h"
#include "exitdrop.h"
#include "log.h"
#include "regions.h"

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
	 * cycles later).  Idle clients are not scanned at all (cycle.c). */
	{
		char stat[256];

		snprintf(stat, sizeof(stat), "%s/%d/stat", d->proc_root, (int)c->pid);
		c->statfd = open(stat, O_RDONLY | O_CLOEXEC);
		snprintf(stat, sizeof(stat), "%s/%d/schedstat", d->proc_root, (int)c->pid);
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
int msqd_peer_pidfd(int fd, pid_t *pid, uid_t *uid)
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

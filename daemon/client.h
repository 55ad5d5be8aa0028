/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Clients: their lifetime (new, attached, closing, dropped) and their
 * identity, which comes from the kernel only (struct msqd_client below).
 */
#ifndef MSQD_CLIENT_H
#define MSQD_CLIENT_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "../common/stream.h"
#include "counters.h"

struct msqd;
struct msqd_client;

struct msqd_client *msqd_client_new(struct msqd *d, int fd, int pidfd, pid_t pid, uid_t uid);
/* Opens the client's pagemap and resolves its cgroup; 0 or -errno. */
int msqd_client_attach(struct msqd *d, struct msqd_client *c);
/* Its socket ended or its address space is gone: stop serving it, drop it
 * once it has exited (or after a short wait). */
void msqd_client_closing(struct msqd *d, struct msqd_client *c);
void msqd_client_drop(struct msqd *d, struct msqd_client *c, const char *why);
/* The process of cr (the socket fd's SO_PEERCRED) as a pidfd, from the
 * kernel only.  Returns the pidfd or -errno. */
int msqd_peer_pidfd(int fd, const struct ucred *cr);
/* Real, effective and saved uids of pid (any may be NULL but r).  0 or
 * -errno. */
int msqd_proc_uids(const char *proc_root, pid_t pid, uid_t *r, uid_t *e, uid_t *s);
/* Whether the client's process still has the address space it had at
 * HELLO (no exec since). */
bool msqd_client_same_mm(const struct msqd_client *c);
/* Whether the client may have the daemon act on its process now (see
 * client.c).  0, -EPERM or -ESRCH. */
int msqd_client_may_act(struct msqd *d, struct msqd_client *c);
/* Takes the client's rights away for good (its regions go undropped). */
void msqd_client_deny(struct msqd *d, struct msqd_client *c, const char *why);

/* What an epoll event of the daemon's stands for (main.c). */
enum { MSQD_W_LISTEN, MSQD_W_SOCK, MSQD_W_PIDFD, MSQD_W_SIGNAL };
struct msqd_watch {
	int kind;
	struct msqd_client *c;
};

/*
 * A managed process: a shim that connected (fd >= 0) or a process found by
 * discovery (fd == -1).  Its identity is a pidfd taken from the kernel
 * (SO_PEERPIDFD, or SO_PEERCRED + pidfd_open checked against the socket),
 * never from a message; its pagemap is opened while that pidfd shows it
 * alive, so pid reuse cannot point either at another process.
 */
struct msqd_client {
	int fd;     /* socket; -1: found by discovery */
	int pidfd;
	pid_t pid;
	uid_t uid;
	bool hello, ctl;
	bool denied;          /* lost its rights (exec, credentials): refused from now on */
	bool dead;           /* its address space is gone (process_madvise: ESRCH) */
	uint64_t closing_ns; /* going (msqd_client_closing): dropped at this time, or when it exits */
	bool counted; /* in nshim */
	bool takes_drops; /* a shim that drops what it is asked (MSQ_HELLO_DROPS, asks.c) */
	uint64_t since_ns;
	struct msqd_cg *cg;
	struct msq_engine eng; /* pidfd and the client's pagemap */
	int statfd;            /* /proc/PID/stat: page-fault counters */
	int schedfd;           /* /proc/PID/schedstat: time on CPU */
	uint64_t runtime;      /* of the main thread, at the last stat read */
	long threads;          /* from stat; schedstat covers one thread only */
	uint64_t faults;       /* minflt + majflt at the last full cycle */
	uint64_t full_ns;      /* when its regions were last cycled */
	uint64_t cycle_round;  /* the last round of cycles that looked at it (cycle.c) */
	bool busy;             /* the last cycle dropped something or failed */
	struct msqd_region **r;
	size_t nr, cap;
	uint64_t bytes;        /* sum of its regions' lengths (max_client_bytes) */
	size_t mem;            /* the daemon's bookkeeping for it (max_client_memory) */
	uint64_t proto_errors;
	struct msqd_read_counts read; /* what its read path reported */
	struct msqd_watch wsock, wpid;
	struct msqd_client *prev, *next;
};

/* All clients (client.c). */
struct msqd_clients {
	struct msqd_client *list;
	unsigned n, nshim, ndiscovered;
	uint64_t denied; /* clients refused for their rights (exec, credentials) */
};

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Clients: their lifetime (new, attached, closing, dropped) and their
 * identity, which comes from the kernel only (see daemon.h).
 */
#ifndef MSQD_CLIENT_H
#define MSQD_CLIENT_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>

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

#endif

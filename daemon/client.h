/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Clients: their lifetime (new, attached, closing, dropped) and their
 * identity, which comes from the kernel only (see daemon.h).
 */
#ifndef MSQD_CLIENT_H
#define MSQD_CLIENT_H

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
/* The peer of socket fd as a pidfd, with its pid and uid, from the kernel
 * only.  Returns the pidfd or -errno. */
int msqd_peer_pidfd(int fd, pid_t *pid, uid_t *uid);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The socket: listening, accepting, framing (one SOCK_SEQPACKET message
 * at a time), sending what handle.c answers, and the clients' timeouts.
 */
#ifndef MSQD_SERVER_H
#define MSQD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct msqd;
struct msqd_client;
struct msqd_reply;

int msqd_server_listen(struct msqd *d);
void msqd_server_accept(struct msqd *d);
void msqd_server_readable(struct msqd *d, struct msqd_client *c);
void msqd_server_timeouts(struct msqd *d);
/* Sends what a handler answered (handle.h) and frees its text.  Returns 0,
 * or -errno of a send whose failure ends the connection. */
int msqd_server_send_reply(struct msqd_client *c, struct msqd_reply *r);

/* The socket and the event loop's descriptors (server.c, main.c). */
struct msqd_server {
	int epfd, lfd, sigfd;
	int spare_fd;        /* reserved for refusing clients when out of fds */
	bool emfile_warned, limit_warned;
	uint64_t refused;    /* connections refused: limits, identity */
	uint64_t next_timeouts_ns; /* the next look at the clients' timeouts */
};

#endif

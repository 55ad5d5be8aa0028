/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The socket: listening, accepting, framing (one SOCK_SEQPACKET message
 * at a time), sending replies, and the clients' timeouts.
 */
#ifndef MSQD_SERVER_H
#define MSQD_SERVER_H

#include <stddef.h>
#include <stdint.h>

struct msqd;
struct msqd_client;

int msqd_server_listen(struct msqd *d);
void msqd_server_accept(struct msqd *d);
void msqd_server_readable(struct msqd *d, struct msqd_client *c);
void msqd_server_timeouts(struct msqd *d);

/* Replies.  0 or -errno. */
int msqd_send_msg(struct msqd_client *c, void *msg, uint16_t type, uint32_t size, uint32_t seq);
int msqd_send_error(struct msqd_client *c, uint32_t seq, int status);
int msqd_send_text(struct msqd_client *c, uint32_t seq, const char *text, size_t len);

#endif

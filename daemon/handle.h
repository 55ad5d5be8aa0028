/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What each message does, once it arrived whole (server.c).  Every value
 * in it is checked by validate.c before anything acts on it.  A handler
 * says what to answer in a struct msqd_reply; server.c sends it, so that
 * the socket is server.c's alone and handlers never call back into it.
 */
#ifndef MSQD_HANDLE_H
#define MSQD_HANDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <madvseq/protocol.h>

struct msqd;
struct msqd_client;

enum msqd_reply_kind {
	MSQD_REPLY_NONE, /* nothing to send (the client waits for no answer) */
	MSQD_REPLY_MSG,  /* msg: one fixed-size message (header filled by the sender) */
	MSQD_REPLY_TEXT, /* text: a malloc'd answer sent in TEXT chunks, then freed */
};

struct msqd_reply {
	enum msqd_reply_kind kind;
	uint16_t type;   /* MSQD_REPLY_MSG: MSQ_MSG_* */
	uint32_t size;   /* MSQD_REPLY_MSG: bytes of msg */
	uint32_t seq;    /* the request's */
	/* A failed send does not end the connection (an ERROR in place of
	 * a status text: the request was answered as well as it could be). */
	bool send_may_fail;
	union {
		struct msq_msg_hdr h;
		struct msq_msg_welcome welcome;
		struct msq_msg_result result;
		struct msq_msg_policy policy;
		struct msq_msg_error error;
	} msg;
	char *text;
	size_t len;
};

/*
 * Handles one message of n bytes; *reply (zeroed by the caller) says what
 * to answer, which the caller sends whatever is returned.  Returns 0, or
 * -errno: the connection ends, once the reply is sent.
 */
int msqd_handle(struct msqd *d, struct msqd_client *c, const void *buf, size_t n,
		struct msqd_reply *reply);

#endif

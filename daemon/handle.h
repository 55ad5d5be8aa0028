/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What each message does, once it arrived whole (server.c).  Every value
 * in it is checked by validate.c before anything acts on it.
 */
#ifndef MSQD_HANDLE_H
#define MSQD_HANDLE_H

#include <stddef.h>

struct msqd;
struct msqd_client;

/* Handles one message of n bytes; < 0 (-errno) ends the connection. */
int msqd_handle(struct msqd *d, struct msqd_client *c, const void *buf, size_t n);

#endif

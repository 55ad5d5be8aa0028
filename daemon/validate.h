/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Every value a client sends, checked in one place before anything uses
 * it.  A message that fails here is refused (EINVAL in its RESULT) or
 * ends the connection; nothing after this file loops over an unchecked
 * range.
 */
#ifndef MSQD_VALIDATE_H
#define MSQD_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <madvseq/protocol.h>

/* Whether a message of type, n bytes at buf, has the size its type
 * fixes (REGISTER: plus its snapshot). */
bool msqd_valid_size(uint16_t type, const void *buf, size_t n);

/* Each returns 0, -EBADMSG (disconnect) or -EINVAL (refuse). */
int msqd_valid_hello(const struct msq_msg_hello *m);
/* The fixed part and the snapshot (msqd_valid_size checked its count). */
int msqd_valid_register(const struct msq_msg_register *m);
int msqd_valid_unregister(const struct msq_msg_unregister *m);
int msqd_valid_stats(const struct msq_msg_stats_req *m);
int msqd_valid_read_report(const struct msq_msg_read_report *m);

#endif

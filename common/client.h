/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The asking side of madvseqd's socket (include/madvseq/protocol.h), for
 * madvseqctl, the madvseq helper and test programs: one request, then the
 * daemon's answer message by message.  The socket is SOCK_SEQPACKET, so
 * one recv() is one whole message.  Receive timeouts are the caller's
 * (SO_RCVTIMEO): they show as -EAGAIN.
 */
#ifndef MSQ_CLIENT_H
#define MSQ_CLIENT_H

#include <stddef.h>
#include <stdint.h>

/* Fills the header of message m (size bytes, header first) and sends it.
 * Returns 0, or -errno of send() (a seqpacket send is all or nothing). */
int msq_client_send(int fd, void *m, uint16_t type, uint32_t size, uint32_t seq);

/* Receives one message into buf (len bytes, MSQ_MSG_MAX is enough) that
 * answers request seq.  Returns its length, or
 *   -errno         recv() failed (-EAGAIN: the receive timeout passed);
 *   -EBADMSG       not a message of this protocol, or not the answer to seq;
 *   status < 0     the daemon refused with an error message (-EPERM, ...). */
int msq_client_recv(int fd, void *buf, size_t len, uint32_t seq);

/* Receives one part of a text answer (MSQ_MSG_TEXT) to request seq into
 * buf, as msq_client_recv(); a message that is not a well-formed text
 * part is -EBADMSG.  Returns the length of the whole message; the text is
 * ((struct msq_msg_text *)buf)->data, the last part has MSQ_TEXT_END. */
int msq_client_recv_text(int fd, void *buf, size_t len, uint32_t seq);

#endif

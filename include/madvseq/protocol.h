/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The wire protocol between libmadvseq.so (or madvseqctl) and madvseqd.
 *
 * Transport: a Unix SOCK_SEQPACKET socket, so every message arrives whole
 * or not at all and its size is known.  Every message starts with struct
 * msq_msg_hdr; `size` is the size of the whole message and must equal the
 * fixed size of its type (text replies excepted).  All fields are fixed
 * width, native byte order (both ends run on the same machine), with
 * explicit padding that must be zero.
 *
 * Order: the client sends HELLO first and waits for WELCOME; then any of
 * REGISTER / UNREGISTER / POLICY_GET / READ_REPORT / STATUS / STATS, each answered by
 * exactly one reply carrying the request's seq.  A message out of this
 * order, malformed, truncated or oversized ends the connection.
 *
 * The client's identity (pid, uid) is what the kernel says (SO_PEERCRED),
 * never what a message says; the daemon acts only on that process's
 * memory, on ranges it checked against /proc/PID/maps.
 *
 * Versioning: MSQ_PROTO_VERSION changes whenever a struct changes.  A
 * daemon answers a HELLO of another version with an ERROR carrying the
 * version it speaks, and the client goes on without the daemon.
 */
#ifndef MADVSEQ_PROTOCOL_H
#define MADVSEQ_PROTOCOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MSQ_PROTO_MAGIC UINT32_C(0x3151534d) /* "MSQ1" */
#define MSQ_PROTO_VERSION 5
#define MSQ_DEFAULT_SOCKET "/run/madvseq/madvseqd.sock"
/* Largest message either side sends (a text reply chunk). */
#define MSQ_MSG_MAX 65536

enum msq_msg_type {
	/* client -> daemon */
	MSQ_MSG_HELLO = 1,
	MSQ_MSG_REGISTER = 2,
	MSQ_MSG_UNREGISTER = 3,
	MSQ_MSG_POLICY_GET = 4,
	MSQ_MSG_STATUS = 5, /* madvseqctl status */
	MSQ_MSG_STATS = 6,  /* madvseqctl stats */
	MSQ_MSG_READ_REPORT = 7, /* the shim's read path: what it did */
	/* daemon -> client */
	MSQ_MSG_WELCOME = 101,
	MSQ_MSG_RESULT = 102,
	MSQ_MSG_POLICY = 103,
	MSQ_MSG_TEXT = 104,
	MSQ_MSG_ERROR = 105,
	MSQ_MSG_DROP = 106, /* daemon to shim, unasked: drops to make in-process */
};

struct msq_msg_hdr {
	uint32_t magic;   /* MSQ_PROTO_MAGIC */
	uint16_t version; /* MSQ_PROTO_VERSION */
	uint16_t type;    /* enum msq_msg_type */
	uint32_t size;    /* of the whole message, header included */
	uint32_t seq;     /* chosen by the client, echoed in the reply */
};

/* HELLO: flags MSQ_HELLO_*. */
#define MSQ_HELLO_SHIM 1u /* a preloaded library with regions to hand over */
#define MSQ_HELLO_CTL 2u  /* madvseqctl: status and stats only */
/* With MSQ_HELLO_SHIM: the client makes the drops the daemon decides for
 * its registered regions itself, when sent a DROP (see there). */
#define MSQ_HELLO_DROPS 4u
struct msq_msg_hello {
	struct msq_msg_hdr h;
	uint32_t flags;
	uint32_t pad;
};

/* WELCOME: the daemon's answer to HELLO. */
struct msq_msg_welcome {
	struct msq_msg_hdr h;
	uint32_t flags;   /* MSQ_WELCOME_* */
	uint32_t pad;
};
#define MSQ_WELCOME_DELEGATE 1u /* registered regions are the daemon's work */

/* REGISTER: one range of a file mapping the client reads sequentially.
 * With MSQ_REGION_SNAPSHOT the message ends in the client's own record of
 * what was cached before its program read the range (taken when it
 * advised MADV_SEQUENTIAL, so unlike a snapshot the daemon could take
 * now, it does not count the stream's own read-ahead): nprecached address
 * ranges inside [start, start + length), sorted, not overlapping.  The
 * message is then sizeof(struct msq_msg_register) + nprecached * 16. */
#define MSQ_REGION_SHARED 1u   /* MAP_SHARED */
#define MSQ_REGION_WRITABLE 2u /* PROT_WRITE */
#define MSQ_REGION_SNAPSHOT 4u /* precached[] is the client's snapshot */
/* Mapped with no advice, read-only (the client's read mode "all"): only
 * what its reader reads front to back is a stream (msq_plan_read_through
 * in common/plan.h).  It drops nothing a final UNREGISTER of the same
 * range would not. */
#define MSQ_REGION_UNADVISED 8u
#define MSQ_REGISTER_MAX_PRECACHED 256
struct msq_wire_range {
	uint64_t start, end; /* [start, end) */
};
struct msq_msg_register {
	struct msq_msg_hdr h;
	uint64_t id;     /* the client's name for the range */
	uint64_t start;  /* page-aligned */
	uint64_t length; /* page multiple, > 0 */
	uint64_t dev;    /* st_dev of the mapped file (as in /proc/PID/maps) */
	uint64_t ino;
	uint64_t offset; /* file offset mapped at start */
	uint32_t flags;  /* MSQ_REGION_* */
	uint32_t nprecached; /* 0 without MSQ_REGION_SNAPSHOT */
	struct msq_wire_range precached[];
};

/* UNREGISTER: stop managing whatever registered range overlaps
 * [start, start + length); sent before the client unmaps or moves it.
 * With MSQ_UNREGISTER_FINAL (the client is about to unmap the range, or
 * to exit) the daemon first drops what its policy would drop of that
 * range once the reader is done with it (all of it but strong references
 * and what was cached before), then answers; the client waits for that
 * RESULT, briefly, before unmapping.  Its status is 0 when the daemon did
 * what its policy asks (which may be nothing: a closed pressure gate,
 * mode off), -EPERM when the client lost its rights, or the -errno of
 * advice that failed: then, as when no answer comes in time, the client
 * drops that range itself. */
#define MSQ_UNREGISTER_FINAL 1u
struct msq_msg_unregister {
	struct msq_msg_hdr h;
	uint64_t start;
	uint64_t length;
	uint32_t flags;  /* MSQ_UNREGISTER_* */
	uint32_t pad;
};

/* POLICY_GET, STATUS, STATS: a bare header; STATS may carry a format. */
#define MSQ_STATS_TEXT 0u
#define MSQ_STATS_PROMETHEUS 1u
#define MSQ_STATS_JSON 2u /* status and metrics as one JSON document */
struct msq_msg_stats_req {
	struct msq_msg_hdr h;
	uint32_t format;
	uint32_t pad;
};

/* READ_REPORT: what the shim's read path (which the shim runs itself, in
 * the program) did since the client's previous report: counts only, for
 * the daemon's metrics and status; the daemon acts on nothing because of
 * it.  Answered by a RESULT. */
struct msq_msg_read_report {
	struct msq_msg_hdr h;
	uint64_t files;    /* files that became managed */
	uint64_t streamed; /* bytes the program read or wrote through them */
	uint64_t dropped;  /* bytes advised DONTNEED behind the streams */
	uint64_t kept;     /* bytes left because they were cached before */
};

/* RESULT: the outcome of REGISTER / UNREGISTER / READ_REPORT. */
struct msq_msg_result {
	struct msq_msg_hdr h;
	int32_t status;  /* 0 or -errno (EINVAL: not what /proc/PID/maps says) */
	uint32_t pad;
	uint64_t id;     /* REGISTER's id; 0 for UNREGISTER */
};

/* POLICY: the client's cgroup policy as the daemon resolved it.  The
 * shim applies `read' to its read path (which it runs itself) unless the
 * program's environment sets MADVSEQ_READ. */
struct msq_msg_policy {
	struct msq_msg_hdr h;
	uint32_t mode;   /* enum msq_mode */
	uint32_t read;   /* enum msq_read_mode */
	uint64_t lag;
	uint64_t interval_ns;
	uint32_t flags;  /* MSQ_WELCOME_DELEGATE */
	uint32_t pad;
};

/* TEXT: a chunk of a STATUS / STATS answer; the last one has MSQ_TEXT_END. */
#define MSQ_TEXT_END 1u
struct msq_msg_text {
	struct msq_msg_hdr h;
	uint32_t flags;
	uint32_t length; /* bytes of data[] used */
	char data[];     /* not NUL-terminated */
};

/*
 * DROP: ranges of the client's registered regions that the daemon's cycle
 * decided to drop (its policy, its strong-reference check), sent to a
 * client that said MSQ_HELLO_DROPS, with seq 0 and no answer.  The client
 * drops them as its own engine would (common/stream.c: present pages
 * only, never a chunk holding copy-on-write data, nothing cached before
 * its stream) from its engine thread, which runs where its reader does:
 * reclaim flushes the TLBs of every CPU the address space is live on, so
 * the same MADV_PAGEOUT from the daemon's process costs the reader's CPU
 * an interrupt per 31 pages freed.  Ranges outside the region `id' the
 * client handed over are ignored.  A client that does not read them leaves its
 * socket full: the daemon then makes the drops itself (process_madvise).
 * n ranges, page-aligned, sorted, apart; the message is
 * sizeof(struct msq_msg_drop) + n * 16.
 */
#define MSQ_DROP_MAX_RANGES 64
struct msq_msg_drop {
	struct msq_msg_hdr h;
	uint64_t id;   /* REGISTER's id of the region they lie in */
	uint32_t mode; /* MSQ_MODE_PAGEOUT or MSQ_MODE_COLD (policy.h) */
	uint32_t n;    /* 1..MSQ_DROP_MAX_RANGES */
	struct msq_wire_range r[];
};

/* ERROR: the request was refused; the connection may be closed after. */
struct msq_msg_error {
	struct msq_msg_hdr h;
	int32_t status;   /* -errno */
	uint32_t version; /* the version the daemon speaks */
};

#ifdef __cplusplus
}
#endif
#endif

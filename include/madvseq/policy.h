/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libmadvseq policy: what the shim, the daemon and their shared engine agree
 * on.  Plain C, no dependencies, safe to include from C++.
 */
#ifndef MADVSEQ_POLICY_H
#define MADVSEQ_POLICY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How pages behind a reader's cursor are dropped. */
enum msq_mode {
	MSQ_MODE_OFF = 0,     /* track nothing, act on nothing */
	MSQ_MODE_COLD = 1,    /* MADV_COLD: deactivate, let reclaim decide */
	MSQ_MODE_PAGEOUT = 2, /* MADV_PAGEOUT: reclaim now (default) */
};

/* Which read() streams the read path manages. */
enum msq_read_mode {
	MSQ_READ_OFF = 0,
	MSQ_READ_NOREUSE = 1, /* only fds advised POSIX_FADV_NOREUSE */
	MSQ_READ_ADVISED = 2, /* NOREUSE and SEQUENTIAL (default) */
	MSQ_READ_ALL = 3,     /* every regular file read sequentially */
};

/*
 * Drops are issued in chunks of this size, aligned to it: a range that
 * covers only part of a large folio may leave the folio cached.
 */
#define MSQ_CHUNK (UINT64_C(2) << 20)

/*
 * Default distance kept cached behind a cursor.  Present bits locate a
 * cursor to about 2 MiB (fault-around, large folios); 16 MiB leaves room
 * for several cursors' jitter and kept the victim's cache whole in the
 * interference benchmark.
 */
#define MSQ_DEFAULT_LAG (UINT64_C(16) << 20)

/* Default engine period; shortened automatically while streams run fast. */
#define MSQ_DEFAULT_INTERVAL_NS (UINT64_C(20) * 1000 * 1000)

struct msq_policy {
	enum msq_mode mode;
	enum msq_read_mode read;
	uint64_t lag;         /* bytes kept behind each cursor, multiple of 4 KiB */
	uint64_t interval_ns; /* longest engine period */
};

#define MSQ_POLICY_DEFAULT                                                  \
	((struct msq_policy){ .mode = MSQ_MODE_PAGEOUT,                     \
			      .read = MSQ_READ_ADVISED,                     \
			      .lag = MSQ_DEFAULT_LAG,                       \
			      .interval_ns = MSQ_DEFAULT_INTERVAL_NS })

#ifdef __cplusplus
}
#endif
#endif

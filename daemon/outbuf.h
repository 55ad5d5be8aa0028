/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A growing text buffer for the daemon's answers (status, stats), and the
 * escapes their formats need. */
#ifndef MSQD_OUTBUF_H
#define MSQD_OUTBUF_H

#include <stddef.h>

struct msqd_out {
	char *buf;
	size_t len, cap;
	int err; /* the first error (-ENOMEM, -EINVAL): later puts do nothing */
};

/* Appends, printf-style. */
void msqd_put(struct msqd_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the text over (*buf malloc'd, for the caller to free), or frees it
 * and returns the first error.  0 or -errno. */
int msqd_out_finish(struct msqd_out *o, char **buf, size_t *len);
/* A JSON string: quotes, backslashes and control characters escaped, valid
 * UTF-8 kept, any other byte (file names are bytes) as U+FFFD. */
void msqd_json_str(struct msqd_out *o, const char *s);
/* A Prometheus label value (backslash, double quote and newline escaped)
 * in buf, cut to fit.  Returns buf. */
const char *msqd_prom_esc(const char *s, char *buf, size_t len);

#endif

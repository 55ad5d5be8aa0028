/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A growing text buffer for the daemon's answers, and the escapes its
 * formats need (JSON strings, Prometheus label values). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "outbuf.h"

void msqd_put(struct msqd_out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->err)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(o->buf ? o->buf + o->len : NULL, o->buf ? o->cap - o->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			o->err = -EINVAL;
			return;
		}
		if (o->buf && o->len + (size_t)n < o->cap) {
			o->len += (size_t)n;
			return;
		}
		size_t cap = o->cap ? o->cap * 2 : 16384;
		while (cap < o->len + (size_t)n + 1)
			cap *= 2;
		char *b = realloc(o->buf, cap);
		if (!b) {
			o->err = -ENOMEM;
			return;
		}
		o->buf = b;
		o->cap = cap;
	}
}

int msqd_out_finish(struct msqd_out *o, char **buf, size_t *len)
{
	if (o->err) {
		free(o->buf);
		return o->err;
	}
	*buf = o->buf;
	*len = o->len;
	return 0;
}

/* A JSON string: quotes, backslashes and control characters escaped, valid
 * UTF-8 kept, any other byte (file names are bytes) as U+FFFD. */
void msqd_json_str(struct msqd_out *o, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	msqd_put(o, "\"");
	while (*p) {
		unsigned n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2
			   : (*p & 0xf8) == 0xf0 ? 3 : 4;
		unsigned k = 1;

		if (n == 0) {
			if (*p == '"' || *p == '\\')
				msqd_put(o, "\\%c", *p);
			else if (*p < 0x20 || *p == 0x7f)
				msqd_put(o, "\\u%04x", *p);
			else
				msqd_put(o, "%c", *p);
			p++;
			continue;
		}
		while (n < 4 && k <= n && (p[k] & 0xc0) == 0x80)
			k++;
		if (n < 4 && k == n + 1 && !(n == 1 && *p < 0xc2)) {
			msqd_put(o, "%.*s", (int)k, (const char *)p);
			p += k;
		} else {
			msqd_put(o, "\\ufffd");
			p++;
		}
	}
	msqd_put(o, "\"");
}

/* Label values: backslash, double quote and newline escaped. */
const char *msqd_prom_esc(const char *s, char *buf, size_t len)
{
	size_t n = 0;

	for (; *s && n + 3 < len; s++) {
		if (*s == '\\' || *s == '"') {
			buf[n++] = '\\';
			buf[n++] = *s;
		} else if (*s == '\n') {
			buf[n++] = '\\';
			buf[n++] = 'n';
		} else {
			buf[n++] = *s;
		}
	}
	buf[n] = '\0';
	return buf;
}


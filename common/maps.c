/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "maps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fault.h"
#include "sys.h"

static const char *hex(const char *p, uint64_t *v)
{
	const char *s = p;

	*v = 0;
	for (;; p++) {
		unsigned d;

		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else
			break;
		*v = *v << 4 | d;
	}
	return p == s ? NULL : p;
}

int msq_maps_parse_line(const char *l, struct msq_vma *v)
{
	uint64_t maj, min, ino = 0;
	size_t n;

	memset(v, 0, sizeof(*v));
	if (!(l = hex(l, &v->start)) || *l++ != '-' || !(l = hex(l, &v->end)) || *l++ != ' ')
		return -EINVAL;
	if (strlen(l) < 5 || l[4] != ' ')
		return -EINVAL;
	v->read = l[0] == 'r';
	v->write = l[1] == 'w';
	v->exec = l[2] == 'x';
	v->shared = l[3] == 's';
	l += 5;
	if (!(l = hex(l, &v->off)) || *l++ != ' ' || !(l = hex(l, &maj)) || *l++ != ':' ||
	    !(l = hex(l, &min)) || *l++ != ' ')
		return -EINVAL;
	v->dev = makedev((unsigned)maj, (unsigned)min);
	if (*l < '0' || *l > '9')
		return -EINVAL;
	for (; *l >= '0' && *l <= '9'; l++)
		ino = ino * 10 + (uint64_t)(*l - '0');
	v->ino = ino;
	while (*l == ' ')
		l++;
	n = strcspn(l, "\n");
	if (n >= sizeof(v->path))
		n = sizeof(v->path) - 1;
	memcpy(v->path, l, n);
	v->path[n] = '\0';
	return 0;
}

int msq_maps_foreach(const char *path, uint64_t lo, uint64_t hi,
		     int (*cb)(const struct msq_vma *vma, void *arg), void *arg)
{
	size_t cap = 1 << 16, len = 0;
	char *buf;
	struct msq_vma *vma;
	int fd, rc = 0;
	bool eof = false;

	if (MSQ_FAULT("madvseq/proc/maps"))
		return -EIO;
	buf = malloc(cap);
	vma = malloc(sizeof(*vma));
	if (!buf || !vma || MSQ_FAULT("madvseq/alloc")) {
		free(buf);
		free(vma);
		return -ENOMEM;
	}
	fd = msq_sys_open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = fd;
		goto out;
	}
	for (;;) {
		char *nl = memchr(buf, '\n', len);
		size_t line, used;

		if (!nl && !eof) {
			ssize_t got;

			if (len == cap - 1) { /* a line longer than the buffer */
				rc = -E2BIG;
				break;
			}
			got = msq_sys_read(fd, buf + len, cap - 1 - len);
			if (got < 0) {
				rc = (int)got;
				break;
			}
			eof = got == 0;
			len += (size_t)got;
			continue;
		}
		if (!nl && len == 0)
			break;
		line = nl ? (size_t)(nl - buf) : len;
		buf[line] = '\0';
		if (msq_maps_parse_line(buf, vma) == 0) {
			if (vma->start >= hi)
				break;
			if (vma->end > lo && (rc = cb(vma, arg)) != 0)
				break;
		}
		used = nl ? line + 1 : len;
		memmove(buf, buf + used, len - used);
		len -= used;
	}
	msq_sys_close(fd);
out:
	free(buf);
	free(vma);
	return rc;
}

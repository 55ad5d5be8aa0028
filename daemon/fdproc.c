/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * /proc reads of the fd watch (see fdproc.h).  Each opens one small file
 * O_NONBLOCK (a /proc file never blocks, but a test's proc root may hold
 * a FIFO) and reads it once.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/fault.h"
#include "fdproc.h"

ssize_t msqd_fdproc_read(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

bool msqd_fdproc_key(const char *text, const char *key, int base, uint64_t *v)
{
	size_t kl = strlen(key);

	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (!strncmp(l, key, kl)) {
			char *end;

			errno = 0;
			*v = strtoull(l + kl, &end, base);
			return !errno && end != l + kl;
		}
	}
	return false;
}

int msqd_fdproc_io(const char *proc_root, pid_t pid, uint64_t *io)
{
	char path[128], buf[1024];
	uint64_t r, w;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%d/io", proc_root, (int)pid);
	if (MSQ_FAULT("madvseq/daemon/proc/io"))
		return -EIO;
	if ((n = msqd_fdproc_read(path, buf, sizeof(buf))) < 0)
		return (int)n;
	if (!msqd_fdproc_key(buf, "rchar:", 10, &r) || !msqd_fdproc_key(buf, "wchar:", 10, &w))
		return -EINVAL;
	*io = r + w;
	return 0;
}

int msqd_fdproc_fdinfo(const char *proc_root, pid_t pid, int fd, uint64_t *pos, int *flags,
		       uint64_t *mnt_id, uint64_t *ino)
{
	char path[128], buf[1024];
	uint64_t fl = 0;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%d/fdinfo/%d", proc_root, (int)pid, fd);
	if (MSQ_FAULT("madvseq/daemon/proc/fdinfo"))
		return -EIO;
	if ((n = msqd_fdproc_read(path, buf, sizeof(buf))) < 0)
		return (int)n;
	*mnt_id = *ino = 0;
	if (!msqd_fdproc_key(buf, "pos:", 10, pos) || !msqd_fdproc_key(buf, "flags:", 8, &fl))
		return -EINVAL;
	msqd_fdproc_key(buf, "mnt_id:", 10, mnt_id);
	msqd_fdproc_key(buf, "ino:", 10, ino);
	*flags = (int)fl;
	return 0;
}

bool msqd_fdproc_runs_library(const char *proc_root, pid_t pid)
{
	char path[128], buf[8192];
	bool found = false;
	ssize_t n, keep = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%d/maps", proc_root, (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	/* (At most 4 MiB of maps: a library is mapped early, near the top of
	 * the list's reading order or not at all.) */
	for (size_t total = 0; !found && total < (4u << 20);) {
		n = read(fd, buf + keep, sizeof(buf) - 1 - (size_t)keep);
		if (n <= 0)
			break;
		total += (size_t)n;
		buf[keep + n] = '\0';
		found = strstr(buf, "/libmadvseq.so") != NULL;
		/* a name cut between two reads */
		keep = keep + n > 32 ? 32 : keep + n;
		memmove(buf, buf + strlen(buf) - (size_t)keep, (size_t)keep);
	}
	close(fd);
	return found;
}

char *msqd_fdproc_name(const char *proc_root, pid_t pid, int fd)
{
	char link[128], buf[4096];
	ssize_t n;

	snprintf(link, sizeof(link), "%s/%d/fd/%d", proc_root, (int)pid, fd);
	n = readlink(link, buf, sizeof(buf) - 1);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	return strdup(buf);
}

void msqd_fdproc_comm(const char *proc_root, pid_t pid, char *buf, size_t len)
{
	char path[128];
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%d/comm", proc_root, (int)pid);
	n = msqd_fdproc_read(path, buf, len);
	if (n <= 0)
		snprintf(buf, len, "?");
	else if (buf[n - 1] == '\n')
		buf[n - 1] = '\0';
}

int msqd_fdproc_started(const char *proc_root, pid_t pid, uint64_t *real_ns)
{
	char path[128], buf[1024], *at, *end;
	unsigned long long ticks;
	struct timespec boot, real;
	uint64_t start_ns, boot_ns, now_ns;
	long hz = sysconf(_SC_CLK_TCK);
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%d/stat", proc_root, (int)pid);
	if (MSQ_FAULT("madvseq/daemon/proc/stat"))
		return -EIO;
	if ((n = msqd_fdproc_read(path, buf, sizeof(buf))) < 0)
		return (int)n;
	/* After the command (which may hold spaces and parentheses): state
	 * is field 3, starttime field 22. */
	if (!(at = strrchr(buf, ')')) || hz <= 0)
		return -EINVAL;
	at++;
	for (int field = 3; field < 22; field++) {
		at += strspn(at, " ");
		at += strcspn(at, " ");
	}
	errno = 0;
	ticks = strtoull(at, &end, 10);
	if (end == at || errno)
		return -EINVAL;
	if (clock_gettime(CLOCK_BOOTTIME, &boot) < 0 || clock_gettime(CLOCK_REALTIME, &real) < 0)
		return -errno;
	start_ns = (uint64_t)(ticks + 1) * (1000000000u / (uint64_t)hz);
	boot_ns = (uint64_t)boot.tv_sec * 1000000000u + (uint64_t)boot.tv_nsec;
	now_ns = (uint64_t)real.tv_sec * 1000000000u + (uint64_t)real.tv_nsec;
	*real_ns = now_ns - (boot_ns > start_ns ? boot_ns - start_ns : 0);
	return 0;
}

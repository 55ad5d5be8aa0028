/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The read path's probes (fdprobe.h). */
#include "fdprobe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../common/sys.h"

#define NDEV 32

/* Filesystems that refused RWF_DONTCACHE (or took it), by st_dev. */
static struct {
	dev_t dev;
	int state;
} g_devs[NDEV];

int msq_probe_dc_state(dev_t dev)
{
	for (int i = 0; i < NDEV; i++)
		if (__atomic_load_n(&g_devs[i].state, __ATOMIC_ACQUIRE) != MSQ_DC_UNKNOWN &&
		    g_devs[i].dev == dev)
			return g_devs[i].state;
	return MSQ_DC_UNKNOWN;
}

void msq_probe_dc_learn(dev_t dev, int state)
{
	for (int i = 0; i < NDEV; i++) {
		int unknown = MSQ_DC_UNKNOWN;

		if (__atomic_load_n(&g_devs[i].state, __ATOMIC_ACQUIRE) != MSQ_DC_UNKNOWN) {
			if (g_devs[i].dev == dev)
				return;
			continue;
		}
		g_devs[i].dev = dev;
		if (__atomic_compare_exchange_n(&g_devs[i].state, &unknown, state, false,
						__ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return;
	}
	/* Full: the probe is simply repeated on further filesystems. */
}

/* Readahead per device, cached. */
static struct {
	dev_t dev;
	uint64_t ra;
	int set;
} g_ra[NDEV];

static uint64_t read_ra(const char *path)
{
	char buf[32];
	int fd = msq_sys_open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? msq_sys_read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		msq_sys_close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return strtoull(buf, NULL, 10) << 10;
}

uint64_t msq_probe_readahead(dev_t dev)
{
	char path[96];
	uint64_t ra;
	int i;

	for (i = 0; i < NDEV && __atomic_load_n(&g_ra[i].set, __ATOMIC_ACQUIRE); i++)
		if (g_ra[i].dev == dev)
			return g_ra[i].ra;
	/* Filesystems name their bdi by st_dev; a partition's queue is its disk's. */
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", major(dev), minor(dev));
	if (!(ra = read_ra(path))) {
		snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../queue/read_ahead_kb", major(dev),
			 minor(dev));
		ra = read_ra(path);
	}
	if (i < NDEV) { /* racing threads may both add it: harmless */
		g_ra[i].dev = dev;
		g_ra[i].ra = ra;
		__atomic_store_n(&g_ra[i].set, 1, __ATOMIC_RELEASE);
	}
	return ra;
}

/* Whether this kernel has cachestat(2) (Linux 6.5+) and lets the process
 * call it: 1 yes, -1 no, 0 not yet known. */
static int g_cachestat;

bool msq_probe_cachestat(int fd)
{
	struct msq_cachestat_range r = { 0, 4096 };
	struct msq_cachestat cs;
	int known = __atomic_load_n(&g_cachestat, __ATOMIC_RELAXED);

	if (known)
		return known > 0;
	if (msq_cachestat(fd, &r, &cs) == 0)
		known = 1;
	else if (errno == ENOSYS)
		known = -1;
	else
		return false; /* this fd only (a seccomp filter's EPERM, say) */
	__atomic_store_n(&g_cachestat, known, __ATOMIC_RELAXED);
	return known > 0;
}

bool msq_probe_seccomp(void)
{
	char buf[2048], *p;
	int fd = msq_sys_open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? msq_sys_read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		msq_sys_close(fd);
	if (n <= 0)
		return true; /* cannot tell: as if filtered */
	buf[n] = 0;
	p = strstr(buf, "\nSeccomp:");
	if (!p)
		return n == (ssize_t)sizeof(buf) - 1; /* cut short: cannot tell */
	p += strlen("\nSeccomp:");
	while (*p == ' ' || *p == '\t')
		p++;
	return *p != '0';
}

bool msq_probe_may_write(int fd, const struct stat *st, int fl)
{
	char path[64];

	if ((fl & O_ACCMODE) != O_RDONLY || st->st_uid == geteuid())
		return true;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	/* faccessat is not one of the calls the library wraps. */
	return faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "kernel_switch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sys.h"

#define SYSCTL_PATH "/sys/vm/seq_read_dropbehind"
#define LAG_PATH "/sys/vm/seq_read_dropbehind_lag_kb"

/* Reads a decimal number from procfs_root + rel into *out. */
static int read_sysctl_u64(const char *procfs_root, const char *rel,
			   uint64_t *out)
{
	char path[4096], buf[64], *end;
	unsigned long long v;
	ssize_t n;
	int fd, saved = errno, ret;

	if (!procfs_root)
		procfs_root = "/proc";
	if (snprintf(path, sizeof(path), "%s%s", procfs_root, rel) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;

	fd = msq_sys_open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return (fd == -ENOENT || fd == -ENOTDIR) ? -ENOENT : fd;
	n = msq_sys_read(fd, buf, sizeof(buf) - 1);
	ret = n < 0 ? (int)n : 0;
	msq_sys_close(fd);
	if (ret)
		return ret;
	buf[n] = '\0';

	if (buf[0] < '0' || buf[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(buf, &end, 10);
	ret = errno == ERANGE ? -EINVAL : 0;
	errno = saved;
	while (*end == ' ' || *end == '\t' || *end == '\n')
		end++;
	if (ret || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

int msq_kernel_dropbehind_state(const char *procfs_root)
{
	uint64_t v;
	int ret = read_sysctl_u64(procfs_root, SYSCTL_PATH, &v);

	if (ret)
		return ret;
	return v != 0;
}

int msq_kernel_dropbehind_lag(const char *procfs_root, uint64_t *lag_bytes)
{
	uint64_t kb;
	int ret = read_sysctl_u64(procfs_root, LAG_PATH, &kb);

	if (ret)
		return ret;
	if (kb > UINT64_MAX / 1024)
		return -EINVAL;
	*lag_bytes = kb * 1024;
	return 0;
}

bool msq_kernel_dropbehind_covers_fs(long f_type)
{
	switch ((unsigned long)f_type & 0xffffffffUL) {
	case 0x01021994UL:	/* TMPFS_MAGIC (shmem) */
	case 0x958458f6UL:	/* HUGETLBFS_MAGIC */
	case 0x858458f6UL:	/* RAMFS_MAGIC */
	case 0x58465342UL:	/* XFS_SUPER_MAGIC: large folios */
		return false;
	default:
		return true;
	}
}

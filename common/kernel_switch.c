/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "kernel_switch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sys.h"

#define SYSCTL_PATH "/sys/vm/seq_read_dropbehind"
#define LAG_PATH "/sys/vm/seq_read_dropbehind_lag_kb"

/* Reads the decimal number a kernel file holds ("1\n") into *out.
 * Returns 0, -ENOENT (also for a path through a non-directory), -EINVAL
 * when the content is not one number, or the -errno of open()/read(). */
static int read_u64_file(const char *path, uint64_t *out)
{
	char buf[64], *end;
	unsigned long long v;
	ssize_t n;
	int fd, saved = errno, ret;

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

/* Reads a decimal number from procfs_root + rel into *out. */
static int read_sysctl_u64(const char *procfs_root, const char *rel,
			   uint64_t *out)
{
	char path[4096];

	if (!procfs_root)
		procfs_root = "/proc";
	if (snprintf(path, sizeof(path), "%s%s", procfs_root, rel) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	return read_u64_file(path, out);
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

int msq_kernel_dropbehind_cgroup_state(const char *cgroupfs_root, const char *cgroup)
{
	char path[4096];
	size_t rootlen, len;
	bool seen = false;

	if (!cgroupfs_root)
		cgroupfs_root = "/sys/fs/cgroup";
	if (!cgroup || cgroup[0] != '/' || strstr(cgroup, "/../") ||
	    (strlen(cgroup) >= 3 && !strcmp(cgroup + strlen(cgroup) - 3, "/..")))
		return -EINVAL;
	rootlen = strlen(cgroupfs_root);
	len = rootlen + strlen(cgroup);
	if (len + sizeof("/" MSQ_KERNEL_DROPBEHIND_CGFILE) > sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, cgroupfs_root, rootlen);
	strcpy(path + rootlen, cgroup);
	/* Without trailing slashes: "/a/b/" is "/a/b". */
	while (len > rootlen && path[len - 1] == '/')
		len--;

	/* From the cgroup up to the root's child: the root has no file, and
	 * any level switched on turns it on for everything below (as the
	 * kernel's mem_cgroup_seq_read_dropbehind() decides). */
	while (len > rootlen) {
		uint64_t v;
		int ret;

		strcpy(path + len, "/" MSQ_KERNEL_DROPBEHIND_CGFILE);
		ret = read_u64_file(path, &v);
		if (ret == -ENOENT && !seen)
			return -ENOENT;	/* not on this kernel, or not here */
		if (ret && ret != -ENOENT)
			return ret;
		if (!ret) {
			if (v)
				return 1;
			seen = true;
		}
		/* Up one level: cut the last component. */
		while (len > rootlen && path[len - 1] != '/')
			len--;
		while (len > rootlen && path[len - 1] == '/')
			len--;
	}
	return seen ? 0 : -ENOENT;	/* "/": the root cgroup has none */
}

int msq_cgroup2_path(const char *procfs_root, pid_t pid, char *buf, size_t len)
{
	char path[4096], text[8192];
	const char *line, *eol;
	ssize_t n;
	int fd;

	if (!procfs_root)
		procfs_root = "/proc";
	if ((pid ? snprintf(path, sizeof(path), "%s/%d/cgroup", procfs_root, (int)pid)
		 : snprintf(path, sizeof(path), "%s/self/cgroup", procfs_root)) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = msq_sys_open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fd;
	n = msq_sys_read(fd, text, sizeof(text) - 1);
	msq_sys_close(fd);
	if (n < 0)
		return (int)n;
	text[n] = '\0';

	/* "hierarchy-ID:controller-list:path" lines; v2's is "0::path". */
	for (line = text; *line; line = *eol ? eol + 1 : eol) {
		size_t plen;

		eol = strchr(line, '\n');
		if (!eol)
			eol = line + strlen(line);
		if (strncmp(line, "0::", 3))
			continue;
		plen = (size_t)(eol - line) - 3;
		if (plen + 1 > len)
			return -ENAMETOOLONG;
		memcpy(buf, line + 3, plen);
		buf[plen] = '\0';
		return 0;
	}
	return -ENOENT;
}

int msq_kernel_dropbehind_for(const char *procfs_root, const char *cgroupfs_root, pid_t pid,
			      bool *by_cgroup)
{
	char cg[4096];
	int global = msq_kernel_dropbehind_state(procfs_root), local = -ENOENT;

	if (by_cgroup)
		*by_cgroup = false;
	if (global == 1)
		return 1;
	if (msq_cgroup2_path(procfs_root, pid, cg, sizeof(cg)) == 0)
		local = msq_kernel_dropbehind_cgroup_state(cgroupfs_root, cg);
	if (local == 1) {
		if (by_cgroup)
			*by_cgroup = true;
		return 1;
	}
	if (global == 0 || local == 0)
		return 0;
	return global;
}

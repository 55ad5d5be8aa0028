/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Detection of the kernel drop-behind switch from contrib/kernel/:
 * the sysctl vm.seq_read_dropbehind (/proc/sys/vm/seq_read_dropbehind) and
 * its lag, vm.seq_read_dropbehind_lag_kb, and (the 6.12 series) the
 * per-memory-cgroup file memory.seq_read_dropbehind of cgroup v2, which
 * turns it on for the processes of a cgroup and its descendants.
 *
 * With the switch on, the kernel reclaims the folios an mmap() region
 * advised MADV_SEQUENTIAL has faulted in once the region's fault cursor is
 * the lag past them, unless another mapping, a read() user or dirtying
 * holds them: the shim's and the daemon's policy, applied exactly.  User
 * space then steps aside for the regions the kernel covers: MADV_SEQUENTIAL
 * mappings of page-cache files (msq_kernel_dropbehind_covers_fs()).  It does
 * NOT cover read()/posix_fadvise streams, nor mappings that user space never
 * advised MADV_SEQUENTIAL itself.
 *
 * Pure functions of the files under procfs_root: no allocation, no logging.
 */
#ifndef MSQ_KERNEL_SWITCH_H
#define MSQ_KERNEL_SWITCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MSQ_KERNEL_DROPBEHIND_SYSCTL "vm.seq_read_dropbehind"
#define MSQ_KERNEL_DROPBEHIND_CGFILE "memory.seq_read_dropbehind"

/*
 * State of the switch.  procfs_root is where procfs is mounted ("/proc";
 * NULL means "/proc"); tests point it at a fixture directory holding
 * sys/vm/seq_read_dropbehind.
 *
 * Returns 1 if the kernel has the switch and it is on, 0 if it has it and it
 * is off, -ENOENT if the running kernel has no such sysctl (any unpatched
 * kernel), another -errno if it cannot be read (-EACCES, ...) and -EINVAL if
 * its content is not a number.
 */
int msq_kernel_dropbehind_state(const char *procfs_root);

/*
 * The kernel's lag behind the fault cursor, in bytes.  Returns 0 and sets
 * *lag_bytes, or a negative errno as msq_kernel_dropbehind_state(); leaves
 * *lag_bytes untouched on failure.
 */
int msq_kernel_dropbehind_lag(const char *procfs_root, uint64_t *lag_bytes);

/*
 * Whether the kernel's drop-behind can act on MADV_SEQUENTIAL mappings of
 * files on a filesystem with this statfs() f_type.  False for shmem/tmpfs,
 * hugetlbfs and ramfs (no page-cache fault path or nothing to reclaim) and
 * for XFS (large folios, which the 6.1 series leaves alone).
 */
bool msq_kernel_dropbehind_covers_fs(long f_type);

/*
 * The per-cgroup switch for the cgroup v2 path cgroup ("/a/b", as the "0::"
 * line of /proc/PID/cgroup gives it) below cgroupfs_root, where cgroup2 is
 * mounted (NULL means "/sys/fs/cgroup").  The kernel applies drop-behind to
 * a fault when the faulting process's memory cgroup or any of its ancestors
 * has memory.seq_read_dropbehind set to 1, so this reads the file of cgroup
 * and of each ancestor up to (not including) the root, which has none.
 *
 * Returns 1 if one of them is on, 0 if cgroup has the file and all of them
 * are off, -ENOENT if cgroup has no such file (a kernel without the 6.12
 * series, the memory controller not enabled for the cgroup, or the root
 * cgroup itself), -EINVAL for a path that is not absolute or contains "..",
 * -ENAMETOOLONG, or another -errno from reading a file.
 */
int msq_kernel_dropbehind_cgroup_state(const char *cgroupfs_root, const char *cgroup);

/*
 * The cgroup v2 path of process pid (0: the caller, "self") from
 * <procfs_root>/<pid>/cgroup (procfs_root NULL: "/proc"): the path of its
 * "0::" line, copied into buf.  Returns 0, -ENOENT if there is no such line
 * (a host with only v1 hierarchies), -ENAMETOOLONG if it does not fit in
 * len, or another -errno from reading the file.
 */
int msq_cgroup2_path(const char *procfs_root, pid_t pid, char *buf, size_t len);

/*
 * Whether the kernel drops behind MADV_SEQUENTIAL faults of process pid
 * (0: the caller): 1 when the sysctl is on, or when it is off or absent and
 * the process's cgroup v2 (or an ancestor) has the per-cgroup switch on.
 * Returns 0 when neither is on and at least one of them exists, else the
 * error of the sysctl's msq_kernel_dropbehind_state() (-ENOENT: a kernel
 * without the series).  *by_cgroup (may be NULL) is set to whether it is on
 * because of the cgroup only.
 */
int msq_kernel_dropbehind_for(const char *procfs_root, const char *cgroupfs_root, pid_t pid,
			      bool *by_cgroup);

#endif

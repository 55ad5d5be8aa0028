/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Detection of the kernel drop-behind switch from contrib/kernel/:
 * the sysctl vm.seq_read_dropbehind (/proc/sys/vm/seq_read_dropbehind) and
 * its lag, vm.seq_read_dropbehind_lag_kb.
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
#include <stdint.h>

#define MSQ_KERNEL_DROPBEHIND_SYSCTL "vm.seq_read_dropbehind"

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

#endif

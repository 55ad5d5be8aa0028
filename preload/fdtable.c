/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "fdtable.h"

#include "../common/fault.h"
#include "../common/sys.h"

#define LEAF_SIZE (1u << MSQ_FDT_LEAF_BITS)

struct msq_fd **msq_fdt_top[MSQ_FDT_TOP];
/* One past the highest top slot that ever held a leaf: walks stop there,
 * so a process that never had a leaf touches none of the table's 64 KiB
 * (at exit, every process sums the table). */
static unsigned g_top_used;

static struct msq_fd **leaf_of(int fd, int create)
{
	struct msq_fd ***top = &msq_fdt_top[(unsigned)fd >> MSQ_FDT_LEAF_BITS];
	struct msq_fd **leaf = __atomic_load_n(top, __ATOMIC_ACQUIRE), **expect = NULL;

	if (leaf || !create)
		return leaf;
	/* A page of zeroes from mmap, not malloc: this runs inside read()
	 * and write(), which signal handlers may call. */
	if (MSQ_FAULT("madvseq/alloc") || !(leaf = msq_sys_map_anon(LEAF_SIZE * sizeof(*leaf))))
		return NULL;
	/* Two threads may race to add the same leaf: the loser frees its own. */
	if (!__atomic_compare_exchange_n(top, &expect, leaf, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		msq_sys_unmap(leaf, LEAF_SIZE * sizeof(*leaf));
		leaf = expect;
	} else {
		unsigned used = __atomic_load_n(&g_top_used, __ATOMIC_RELAXED),
			 want = ((unsigned)fd >> MSQ_FDT_LEAF_BITS) + 1;

		while (used < want && !__atomic_compare_exchange_n(&g_top_used, &used, want, true,
								   __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			;
	}
	return leaf;
}

struct msq_fd *msq_fdt_xchg(int fd, struct msq_fd *v)
{
	struct msq_fd **leaf;

	if ((unsigned)fd >= MSQ_FDT_MAX)
		return MSQ_FD_IGNORED;
	if (!(leaf = leaf_of(fd, v != NULL)))
		return v ? MSQ_FD_IGNORED : NULL;
	return __atomic_exchange_n(&leaf[fd & (LEAF_SIZE - 1)], v, __ATOMIC_ACQ_REL);
}

int msq_fdt_cas(int fd, struct msq_fd *old, struct msq_fd *v)
{
	struct msq_fd **leaf;

	if ((unsigned)fd >= MSQ_FDT_MAX || !(leaf = leaf_of(fd, v != NULL)))
		return 0;
	return __atomic_compare_exchange_n(&leaf[fd & (LEAF_SIZE - 1)], &old, v, false,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

bool msq_fdt_used(void)
{
	return __atomic_load_n(&g_top_used, __ATOMIC_ACQUIRE) != 0;
}

void msq_fdt_each(unsigned first, unsigned last, void (*fn)(int fd, struct msq_fd *v, void *arg),
		  void *arg)
{
	unsigned top_end = __atomic_load_n(&g_top_used, __ATOMIC_ACQUIRE);

	if (last >= MSQ_FDT_MAX)
		last = MSQ_FDT_MAX - 1;
	for (unsigned t = first >> MSQ_FDT_LEAF_BITS;
	     first <= last && t <= last >> MSQ_FDT_LEAF_BITS && t < top_end; t++) {
		struct msq_fd **leaf = __atomic_load_n(&msq_fdt_top[t], __ATOMIC_ACQUIRE);

		if (!leaf)
			continue;
		for (unsigned i = 0; i < LEAF_SIZE; i++) {
			unsigned fd = (t << MSQ_FDT_LEAF_BITS) | i;
			struct msq_fd *v;

			if (fd < first || fd > last)
				continue;
			if ((v = __atomic_load_n(&leaf[i], __ATOMIC_ACQUIRE)))
				fn((int)fd, v, arg);
		}
	}
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Faulting file pages into the daemon's own mapping without marking them
 * accessed.
 *
 * The exit drop needs the page frames of what an exited client left
 * cached, to read their flags in /proc/kpageflags: ACTIVE or REFERENCED
 * means someone else read() them (or another mapping touched them) and
 * they stay.  Frames need a mapping, and the daemon maps the file itself.
 * MADV_POPULATE_READ would fault the pages in safely (an error, not
 * SIGBUS, where the file was truncated), but it goes through
 * get_user_pages() with FOLL_TOUCH, and for every page mapped by a PTE
 * follow_page_pte() then calls folio_mark_accessed() (mm/gup.c, 6.1 to
 * 6.18): the classic LRU sets PG_referenced on a page nobody touched (and
 * activates one already referenced), MGLRU's folio_inc_refs() sets
 * PG_referenced too.  The check would then see its own look and keep
 * everything.  (A PMD-mapped folio is only made young in the page table,
 * touch_pmd(): with 6.16+'s large ext4 folios mapped by 2 MiB the flags
 * stayed clean, which is why 6.18 dropped what 6.12 and 6.1 kept.)
 *
 * A page fault does not mark the folio: filemap_fault() looks a cached
 * folio up without FGP_ACCESSED, and fault-around (filemap_map_pages())
 * maps its neighbours as they are.  So the pages are faulted in by a
 * kernel copy from them: write() of one byte of each page into a pipe.
 * The copy faults like a load from user space would, but where the page
 * cannot be had (truncated since mincore()) it fails with EFAULT instead
 * of killing the daemon with SIGBUS.  What is written is thrown away.
 *
 * Unmapping does not mark them either where the mapping is MADV_RANDOM
 * (zap_pte_range() skips young PTEs of VM_RAND_READ mappings since 6.3's
 * vma_has_recency()); on 6.1 it marks those the daemon's faults made
 * young, after the flags were read: pages the exit drop keeps were in use
 * anyway, those it drops go.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "faultin.h"

int msqd_faultin_open(struct msqd_faultin *f)
{
	if (pipe2(f->fd, O_CLOEXEC | O_NONBLOCK) < 0) {
		f->fd[0] = f->fd[1] = -1;
		return -errno;
	}
	return 0;
}

void msqd_faultin_close(struct msqd_faultin *f)
{
	for (int i = 0; i < 2; i++)
		if (f->fd[i] >= 0)
			close(f->fd[i]);
	f->fd[0] = f->fd[1] = -1;
}

/* Empties the pipe (what was written is of no use). */
static int drain(struct msqd_faultin *f)
{
	char sink[4096];
	ssize_t n;

	while ((n = read(f->fd[0], sink, sizeof(sink))) > 0)
		;
	return n < 0 && errno != EAGAIN ? -errno : 0;
}

int msqd_faultin(struct msqd_faultin *f, const void *addr, size_t len)
{
	const char *p = addr;

	for (size_t off = 0; off < len; off += 4096) {
		ssize_t n = write(f->fd[1], p + off, 1);
		int rc;

		/* A full pipe (64 KiB of one-byte writes): empty it, again. */
		if (n < 0 && errno == EAGAIN) {
			if ((rc = drain(f)) < 0)
				return rc;
			n = write(f->fd[1], p + off, 1);
		}
		if (n < 0)
			return -errno;
		if (n != 1)
			return -EIO;
	}
	return drain(f);
}

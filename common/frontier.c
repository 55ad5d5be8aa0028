/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "frontier.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fault.h"
#include "sys.h"

#define PAGE 4096u

static int probe_scan(int fd)
{
	static char probe[PAGE] __attribute__((aligned(PAGE)));
	struct msq_page_region r;
	struct msq_pm_scan_arg a = {
		.size = sizeof(a),
		.start = (uintptr_t)probe,
		.end = (uintptr_t)probe + PAGE,
		.vec = (uintptr_t)&r,
		.vec_len = 1,
		.category_mask = MSQ_PAGE_IS_PRESENT,
		.return_mask = MSQ_PAGE_IS_PRESENT,
	};

	if (MSQ_FAULT("madvseq/pagemap/scan"))
		return 0; /* (tests: a kernel before 6.7) */
	return ioctl(fd, MSQ_PAGEMAP_SCAN, &a) >= 0;
}

int msq_open_held(const char *path, int high_fd, struct stat *st)
{
	int fd = msq_sys_open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return fd;
	if (high_fd > 0) {
		int hfd = msq_sys_fcntl(fd, F_DUPFD_CLOEXEC, high_fd);

		if (hfd >= 0) {
			msq_sys_close(fd);
			fd = hfd;
		}
	}
	if (fstat(fd, st) < 0) {
		int e = -errno;

		msq_sys_close(fd);
		return e;
	}
	return fd;
}

bool msq_held_same(int fd, dev_t dev, ino_t ino)
{
	struct stat st;

	return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

int msq_pagemap_open(struct msq_pagemap *pm, const char *proc_root, pid_t pid, int high_fd)
{
	char path[256];
	struct stat st;
	int fd;

	if (pid > 0)
		snprintf(path, sizeof(path), "%s/%d/pagemap", proc_root, (int)pid);
	else
		snprintf(path, sizeof(path), "%s/self/pagemap", proc_root);
	if (MSQ_FAULT("madvseq/pagemap/open"))
		return -EMFILE;
	fd = msq_open_held(path, high_fd, &st);
	if (fd < 0)
		return fd;
	*pm = (struct msq_pagemap){
		.fd = fd, .dev = st.st_dev, .ino = st.st_ino, .pid = pid,
		/* The probe's address is ours, for another process's pagemap
		 * too: it only tells if the ioctl exists (6.7+; before, ENOTTY,
		 * and the entries are read one by one). */
		.scan = probe_scan(fd),
	};
	return 0;
}

void msq_pagemap_close(struct msq_pagemap *pm)
{
	if (pm->fd >= 0)
		msq_sys_close(pm->fd);
	pm->fd = -1;
}

int msq_pagemap_check(const struct msq_pagemap *pm)
{
	return msq_held_same(pm->fd, pm->dev, pm->ino) ? 0 : -EBADF;
}

static int add_range(struct msq_extents *set, uint64_t s, uint64_t e)
{
	return set ? msq_extents_add(set, s, e) : 0;
}

static int scan_ranges(const struct msq_pagemap *pm, uint64_t start, uint64_t end,
		       struct msq_extents *file, struct msq_extents *anon)
{
	struct msq_page_region vec[128];

	while (start < end) {
		struct msq_pm_scan_arg a = {
			.size = sizeof(a),
			.start = start,
			.end = end,
			.vec = (uintptr_t)vec,
			.vec_len = sizeof(vec) / sizeof(*vec),
			.category_mask = MSQ_PAGE_IS_PRESENT,
			/* Asked for, PAGE_IS_FILE costs a page lookup per
			 * present entry (vm_normal_page): a quarter of the
			 * walk's time next to a LevelDB scan. */
			.return_mask = MSQ_PAGE_IS_PRESENT | (anon ? MSQ_PAGE_IS_FILE : 0),
		};
		int n = ioctl(pm->fd, MSQ_PAGEMAP_SCAN, &a);

		if (n < 0)
			return -errno;
		for (int i = 0; i < n; i++) {
			bool is_file = !anon || (vec[i].categories & MSQ_PAGE_IS_FILE);
			int rc = add_range(is_file ? file : anon, vec[i].start, vec[i].end);

			if (rc < 0)
				return rc;
		}
		if (a.walk_end <= start)
			break;
		start = a.walk_end;
	}
	return 0;
}

static int read_ranges(const struct msq_pagemap *pm, uint64_t start, uint64_t end,
		       struct msq_extents *file, struct msq_extents *anon)
{
	uint64_t ent[1024];

	while (start < end) {
		uint64_t pages = (end - start) / PAGE;
		size_t want = pages < 1024 ? (size_t)pages : 1024;
		ssize_t got = msq_sys_pread(pm->fd, ent, want * sizeof(*ent),
					    (off_t)(start / PAGE * sizeof(*ent)));

		if (got < 0)
			return (int)got;
		if (got == 0)
			return -EIO;
		for (size_t i = 0; i < (size_t)got / sizeof(*ent); i++) {
			uint64_t a = start + i * PAGE;
			int rc = 0;

			if (!(ent[i] & MSQ_PM_PRESENT))
				continue;
			rc = add_range(!anon || (ent[i] & MSQ_PM_FILE) ? file : anon, a, a + PAGE);
			if (rc < 0)
				return rc;
		}
		start += (uint64_t)got / sizeof(*ent) * PAGE;
	}
	return 0;
}

int msq_present_ranges(const struct msq_pagemap *pm, uint64_t start, uint64_t end,
		       struct msq_extents *file, struct msq_extents *anon)
{
	if (MSQ_FAULT("madvseq/pagemap/read"))
		return -EIO;
	start &= ~(uint64_t)(PAGE - 1);
	if (pm->scan)
		return scan_ranges(pm, start, end, file, anon);
	return read_ranges(pm, start, end, file, anon);
}

int msq_cached_ranges(uint64_t start, uint64_t end, unsigned char *vec, size_t vec_len,
		      struct msq_extents *out)
{
	uint64_t step = (uint64_t)vec_len * PAGE;

	for (uint64_t a = start; a < end; a += step) {
		uint64_t len = end - a < step ? end - a : step;
		uint64_t run = 0;
		int rc;

		if ((rc = msq_sys_mincore((void *)(uintptr_t)a, (size_t)len, vec)) < 0)
			return rc;
		for (uint64_t k = 0; k <= len / PAGE; k++) {
			bool in = k < len / PAGE && (vec[k] & 1);

			if (in && !run)
				run = a + k * PAGE + 1; /* +1: 0 means "no run" */
			if (!in && run) {
				if ((rc = msq_extents_add(out, run - 1, a + k * PAGE)) < 0)
					return rc;
				run = 0;
			}
		}
	}
	return 0;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Reading /proc/PID/maps. */
#ifndef MSQ_MAPS_H
#define MSQ_MAPS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct msq_vma {
	uint64_t start, end, off;
	bool read, write, exec, shared;
	dev_t dev;
	uint64_t ino;
	char path[PATH_MAX]; /* "" for anonymous; may end in " (deleted)" */
};

/*
 * Calls cb for each VMA of the maps file at path that overlaps [lo, hi),
 * in address order.  Stops early when cb returns non-zero and returns that
 * value.  Returns 0, cb's value, or -errno.
 */
int msq_maps_foreach(const char *path, uint64_t lo, uint64_t hi,
		     int (*cb)(const struct msq_vma *vma, void *arg), void *arg);

/* Parses one line; returns 0 or -EINVAL. */
int msq_maps_parse_line(const char *line, struct msq_vma *vma);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "statsfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/sys.h"
#include "engine_thread.h"
#include "fdstats.h"
#include "log.h"
#include "settings.h"

static bool g_fork_child; /* a fork child: writes stats only if it did something */

static void write_file_line(const char *name, const struct msq_file_counts *c, void *arg)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "file=%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %s\n",
			 c->streamed, c->dropped, c->kept, c->written, name);

	if (n > 0)
		msq_sys_write_all(*(int *)arg, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/*
 * Opens the stats file for writing, or refuses it with one warning.  The
 * name comes from the environment, possibly under a directory others may
 * write (/tmp/s.%p): no final symlink is followed (O_NOFOLLOW), a FIFO
 * does not block the exit (O_NONBLOCK), and an existing file must be a
 * regular file that the process's real user owns, so that no one makes
 * the process overwrite a file of theirs, or of root's.  Truncated only
 * once it passed those checks.
 */
static int open_stats_file(const char *path)
{
	struct stat st;
	int fd = msq_sys_creat(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
			       0644);

	if (fd < 0) {
		msq_warn("MADVSEQ_STATS: cannot write %s: error %d%s", path, -fd,
			 fd == -ELOOP ? " (a symbolic link: not followed)" : "");
		return fd;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid()) {
		msq_warn("MADVSEQ_STATS: %s is not a regular file of this user's: not written", path);
		msq_sys_close(fd);
		return -EPERM;
	}
	if (ftruncate(fd, 0) < 0) {
		msq_sys_close(fd);
		return -EIO;
	}
	return fd;
}

void msq_statsfile_write(void)
{
	char path[MSQ_STATS_PATH_MAX + 16], buf[1024];
	const char *p = msq_cfg.stats_path;
	size_t n = 0;
	struct msq_ethread_totals et;
	struct msq_read_totals rt;
	int fd, len;

	for (; *p && n < sizeof(path) - 12; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			n += (size_t)snprintf(path + n, sizeof(path) - n, "%d", (int)msq_sys_getpid());
			p++;
		} else {
			path[n++] = *p;
		}
	}
	path[n] = '\0';
	msq_ethread_totals(&et);
	msq_stats_totals(&rt);
	if (g_fork_child && !et.regions && !rt.files)
		return; /* the parent's file is the parent's */
	len = snprintf(buf, sizeof(buf),
		       "pid=%d\nmode=%s\nlag=%" PRIu64 "\nregions=%" PRIu64 "\nbytes_dropped=%" PRIu64
		       "\nbytes_kept=%" PRIu64 "\ncycles=%" PRIu64 "\nerrors=%" PRIu64
		       "\nkernel_covers=%d\nread_files=%" PRIu64 "\nread_bytes_advised=%" PRIu64
		       "\nread_bytes_streamed=%" PRIu64 "\nread_bytes_kept=%" PRIu64
		       "\nread_bytes_written_behind=%" PRIu64 "\nmax_round_gap_us=%" PRIu64
		       "\nbytes_dropped_asked=%" PRIu64 "\n",
		       (int)msq_sys_getpid(), msq_mode_name(msq_cfg.policy.mode), msq_cfg.policy.lag,
		       et.regions, et.dropped, et.kept, et.cycles, et.errors,
		       msq_kernel_covers(NULL), rt.files, rt.dropped, rt.streamed, rt.kept, rt.written,
		       et.max_round_gap_ns / 1000, et.asked);
	if ((fd = open_stats_file(path)) < 0)
		return;
	if (msq_sys_write_all(fd, buf, (size_t)len) != len)
		msq_warn("MADVSEQ_STATS: short write to %s", path);
	/* Then one line per file: "file=STREAMED DROPPED KEPT WRITTEN PATH". */
	msq_stats_each_file(write_file_line, &fd);
	msq_sys_close(fd);
}

void msq_statsfile_atfork_child(void)
{
	g_fork_child = true;
}

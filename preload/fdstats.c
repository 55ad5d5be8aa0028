/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read path's figures (fdstats.h): process totals, and records of
 * closed files for MADVSEQ_STATS, in slots claimed with one atomic
 * increment (close() may run in a signal handler), the rest summed up as
 * "other files".
 */
#include "fdstats.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <urcu/urcu-bp.h>

#include "../common/sys.h"
#include "fdstate.h"
#include "fdtable.h"
#include "utf8.h"

/* Process totals.  streamed lags the fds' own counts: see
 * msq_stats_streamed(). */
static struct msq_read_totals g_tot;

void msq_stats_file(void)
{
	__atomic_add_fetch(&g_tot.files, 1, __ATOMIC_RELAXED);
}

/* What fd state s streamed and the total does not have yet.  The per-call
 * bookkeeping counts only s->c.streamed: a locked addition to a
 * process-wide total on every fwrite would make most of the library's
 * cost for small ones. */
static uint64_t untotalled(const struct msq_fd *s)
{
	uint64_t now = __atomic_load_n(&s->c.streamed, __ATOMIC_RELAXED);
	uint64_t done = __atomic_load_n(&s->totalled, __ATOMIC_RELAXED);

	return now > done ? now - done : 0;
}

void msq_stats_streamed(struct msq_fd *s)
{
	uint64_t n = untotalled(s);

	if (n) {
		__atomic_add_fetch(&g_tot.streamed, n, __ATOMIC_RELAXED);
		/* (msq_readpath_totals reads it from other threads) */
		__atomic_store_n(&s->totalled, s->totalled + n, __ATOMIC_RELAXED);
	}
}

void msq_stats_advised(struct msq_fd *s, uint64_t n, bool writing)
{
	s->advised += n;
	__atomic_add_fetch(&s->c.dropped, n, __ATOMIC_RELAXED);
	__atomic_add_fetch(&g_tot.dropped, n, __ATOMIC_RELAXED);
	if (writing) {
		__atomic_add_fetch(&s->c.written, n, __ATOMIC_RELAXED);
		__atomic_add_fetch(&g_tot.written, n, __ATOMIC_RELAXED);
	}
}

void msq_stats_kept(struct msq_fd *s, uint64_t n)
{
	__atomic_add_fetch(&s->c.kept, n, __ATOMIC_RELAXED);
	__atomic_add_fetch(&g_tot.kept, n, __ATOMIC_RELAXED);
}

/* The file's name for the stats file: what /proc/self/fd says, control
 * characters made '?' (one record a line); "?" when fd no longer holds
 * s's file (reused behind our back, as after stdio's fclose).  Looked up
 * only for the files that get a record of their own: a readlink for each
 * of many small files would cost more than the rest of their bookkeeping. */
static void name_of(int fd, const struct msq_fd *s, char *buf, size_t len)
{
	char link[64];
	struct stat st;
	long n;

	if (fstat(fd, &st) < 0 || st.st_dev != s->dev || st.st_ino != s->ino) {
		snprintf(buf, len, "?");
		return;
	}
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = MSQ_SYSCALL(SYS_readlinkat, AT_FDCWD, link, buf, len - 1);
	if (n < 0)
		n = 0;
	if (n == (long)len - 1) /* cut short: not in the middle of a UTF-8 sequence */
		n = (long)msq_utf8_trim(buf, (size_t)n);
	buf[n] = '\0';
	msq_name_printable(buf, (size_t)n);
}

#define FILE_RECORDS 64
static struct {
	struct msq_file_counts c;
	char path[128];
	int ready;
} g_rec[FILE_RECORDS];
static unsigned g_nrec;
static struct msq_file_counts g_rec_other;

void msq_stats_record(int fd, const struct msq_fd *s)
{
	unsigned i;

	if (!s->c.streamed || !msq_cfg.stats_path[0])
		return;
	i = __atomic_fetch_add(&g_nrec, 1, __ATOMIC_RELAXED);
	if (i >= FILE_RECORDS) {
		__atomic_add_fetch(&g_rec_other.streamed, s->c.streamed, __ATOMIC_RELAXED);
		__atomic_add_fetch(&g_rec_other.dropped, s->c.dropped, __ATOMIC_RELAXED);
		__atomic_add_fetch(&g_rec_other.kept, s->c.kept, __ATOMIC_RELAXED);
		__atomic_add_fetch(&g_rec_other.written, s->c.written, __ATOMIC_RELAXED);
		return;
	}
	g_rec[i].c = s->c;
	name_of(fd, s, g_rec[i].path, sizeof(g_rec[i].path));
	__atomic_store_n(&g_rec[i].ready, 1, __ATOMIC_RELEASE);
}

struct each_arg {
	void (*fn)(const char *, const struct msq_file_counts *, void *);
	void *arg;
};

static void each_open(int fd, struct msq_fd *v, void *arg)
{
	struct each_arg *a = arg;
	char path[128];

	if (v != MSQ_FD_IGNORED && v->c.streamed) {
		name_of(fd, v, path, sizeof(path));
		a->fn(path[0] ? path : "?", &v->c, a->arg);
	}
}

void msq_readpath_each_file(void (*fn)(const char *path, const struct msq_file_counts *c,
				       void *arg),
			    void *arg)
{
	struct each_arg a = { fn, arg };
	unsigned n = __atomic_load_n(&g_nrec, __ATOMIC_RELAXED);

	for (unsigned i = 0; i < n && i < FILE_RECORDS; i++)
		if (__atomic_load_n(&g_rec[i].ready, __ATOMIC_ACQUIRE))
			fn(g_rec[i].path[0] ? g_rec[i].path : "?", &g_rec[i].c, arg);
	if (g_rec_other.streamed)
		fn("(other files)", &g_rec_other, arg);
	if (msq_fdt_used()) {
		urcu_bp_read_lock();
		msq_fdt_each(0, MSQ_FDT_MAX - 1, each_open, &a);
		urcu_bp_read_unlock();
	}
}

static void add_untotalled(int fd, struct msq_fd *v, void *arg)
{
	(void)fd;
	if (v != MSQ_FD_IGNORED)
		*(uint64_t *)arg += untotalled(v);
}

void msq_readpath_totals(struct msq_read_totals *t)
{
	uint64_t open = 0;

	/* No fd ever looked at: nothing to add, and no urcu-bp registration
	 * of this thread (every process ends here at exit). */
	if (msq_fdt_used()) {
		urcu_bp_read_lock();
		msq_fdt_each(0, MSQ_FDT_MAX - 1, add_untotalled, &open);
		urcu_bp_read_unlock();
	}
	t->files = __atomic_load_n(&g_tot.files, __ATOMIC_RELAXED);
	t->streamed = __atomic_load_n(&g_tot.streamed, __ATOMIC_RELAXED) + open;
	t->dropped = __atomic_load_n(&g_tot.dropped, __ATOMIC_RELAXED);
	t->kept = __atomic_load_n(&g_tot.kept, __ATOMIC_RELAXED);
	t->written = __atomic_load_n(&g_tot.written, __ATOMIC_RELAXED);
}

void msq_stats_atfork_child(void)
{
	/* The child's own totals (MADVSEQ_STATS). */
	memset(&g_tot, 0, sizeof(g_tot));
	/* The parent's closed files are the parent's to report. */
	g_nrec = 0;
	memset(&g_rec_other, 0, sizeof(g_rec_other));
}

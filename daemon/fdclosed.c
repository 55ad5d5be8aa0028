/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Files a watched writer closed (see fdclosed.h).  Everything here runs
 * within the fd watch's looks, a bounded amount each: a flood of events,
 * of marks or of closed files makes the work longer, spread over looks,
 * never the loop's gaps, and the fanotify queue is the kernel's (16,384
 * events; past that it says it overflowed, and those closes are not
 * acted on).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../common/extents.h"
#include "../common/fault.h"
#include "../common/sys.h"
#include "conf.h"
#include "fdact.h"
#include "fdclosed.h"
#include "fdwatch.h"
#include "log.h"
#include "msqd.h"

#define MAX_FS 16           /* filesystems marked at once */
#define MAX_QUEUE 256       /* closed files being dropped at once */
#define MAX_HANDLE 128      /* MAX_HANDLE_SZ */
/* Closed files are gone through a span at a time: one cachestat for a
 * span with nothing cached (an operation), a 2 MiB chunk at a time where
 * something is (an operation a chunk), OPS a look at most: some 25 ms of
 * DONTNEED, or 8 GiB passed over.  A sparse file of terabytes takes
 * looks, not the loop's time, and the fd watch's own slices are not
 * touched. */
#define SPAN (UINT64_C(64) << 20)
#define OPS 128
#define EVENTS_MAX 256      /* events read per look */
/* A mark no watched writer used for this long is given up, and with it
 * the descriptor it holds on that filesystem. */
#define MARK_IDLE_NS (UINT64_C(30) * 1000 * 1000 * 1000)
/* A closed file still dirty or under writeback is tried again at each
 * look for this long; then what is left stays. */
#define RETRY_NS (UINT64_C(30) * 1000 * 1000 * 1000)
/* Dirty pages of a closed file given to writeback at once, at most: more
 * would wait in the daemon's thread for the request queue. */
#define WB_MAX (UINT64_C(64) << 20)
/* A writer counts while the watch looked at its descriptors this recently,
 * which it does only while the process moves a megabyte a look: a server
 * that now and then writes a small file of its own is no stream. */
#define BUSY_NS (UINT64_C(2) * 1000 * 1000 * 1000)
#define PAGE UINT64_C(4096)
#define CHUNK (UINT64_C(2) << 20)

struct fdc_fs {
	uint64_t dev;
	fsid_t fsid;
	int fd;             /* a file of it, open read-only: open_by_handle_at's mount_fd */
	uint64_t used_ns;
};

struct fdc_file {
	size_t fs;          /* index into fs[] */
	bool self;          /* reported as the daemon's close: whose, act() finds out */
	uint64_t until_ns;  /* given up then */
	uint64_t born_after_ns; /* CLOCK_REALTIME: the writer's start */
	uint64_t at;        /* dropped below this, but for what is left */
	uint32_t hlen;
	int htype;
	unsigned char h[MAX_HANDLE];
};

static void fs_drop(struct msqd_fdclosed *c, size_t i)
{
	struct fdc_fs *f = &c->fs[i];

	/* (The mark goes with the descriptor's filesystem; a refused
	 * removal leaves a mark whose events nothing acts on.) */
	if (f->fd >= 0) {
		fanotify_mark(c->fan, FAN_MARK_REMOVE | FAN_MARK_FILESYSTEM, FAN_CLOSE_WRITE, f->fd, NULL);
		close(f->fd);
	}
	/* Files queued on it go too; the last entry moves into i. */
	for (size_t k = c->nq; k-- > 0;) {
		if (c->q[k].fs == i)
			c->q[k] = c->q[--c->nq];
		else if (c->q[k].fs == c->nfs - 1)
			c->q[k].fs = i;
	}
	c->fs[i] = c->fs[--c->nfs];
}

void msqd_fdclosed_free(struct msqd_fdclosed *c)
{
	while (c->nfs)
		fs_drop(c, c->nfs - 1);
	free(c->fs);
	free(c->q);
	if (c->fan > 0)
		close(c->fan);
	*c = (struct msqd_fdclosed){ 0 };
}

static bool group_ready(struct msqd_fdclosed *c)
{
	if (c->fan > 0)
		return true;
	if (c->unavailable)
		return false;
	if (!c->fs && !(c->fs = calloc(MAX_FS, sizeof(*c->fs))))
		return false;
	if (!c->q && !(c->q = calloc(MAX_QUEUE, sizeof(*c->q))))
		return false;
	/* FID mode: events carry a file handle, and the kernel opens nothing
	 * on the daemon's behalf (a device node's driver included). */
	c->fan = MSQ_FAULT("madvseq/daemon/fd/fanotify")
			 ? (errno = EPERM, -1)
			 : fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_CLOEXEC | FAN_NONBLOCK,
					 O_RDONLY | O_CLOEXEC | O_LARGEFILE);
	c->self = getpid();
	if (c->fan <= 0) {
		log_info("fd streams: no fanotify group (%s): files a watched writer closes between two "
			 "looks stay cached", strerror(errno));
		c->fan = -1;
		c->unavailable = true;
		return false;
	}
	return true;
}

void msqd_fdclosed_writer(struct msqd *d, struct fdw_proc *p, int fd, uint64_t dev, uint64_t ino)
{
	struct msqd_fdclosed *c = &d->fdc;
	struct statfs sf;
	struct stat st, again;
	char path[64];
	int dup, keep;

	for (size_t i = 0; i < c->nfs; i++)
		if (c->fs[i].dev == dev) {
			c->fs[i].used_ns = d->now_ns;
			return;
		}
	if (c->nfs >= MAX_FS || !group_ready(c) || !msqd_fdwatch_spend(&d->fdw, 4))
		return;
	dup = msqd_fdact_borrow(p->pidfd, fd, dev, ino, &st);
	if (dup < 0)
		return;
	/* The mark is set through the borrowed descriptor (a regular file,
	 * checked), then given up at once; what stays is a read-only open of
	 * the same file (the magic link: the same inode, no name looked up),
	 * for open_by_handle_at, which takes no O_PATH descriptor. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", dup);
	keep = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOATIME | O_CLOEXEC);
	if (keep < 0 && errno == EPERM)
		keep = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (keep < 0 || fstat(keep, &again) < 0 || again.st_dev != st.st_dev ||
	    again.st_ino != st.st_ino || !S_ISREG(again.st_mode) || fstatfs(keep, &sf) < 0 ||
	    fanotify_mark(c->fan, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, FAN_CLOSE_WRITE, dup, NULL) < 0) {
		/* (No file handles on that filesystem, or no fsid: its closed
		 * files are not reported.) */
		log_debug("fd streams: closed files on device %" PRIu64 ":%" PRIu64 " not reported (%s)",
			  (uint64_t)major(st.st_dev), (uint64_t)minor(st.st_dev), strerror(errno));
		c->refused++;
		if (keep >= 0)
			close(keep);
		close(dup);
		/* Remembered without a descriptor, so that it is not tried
		 * again at every look. */
		c->fs[c->nfs++] = (struct fdc_fs){ .dev = dev, .fd = -1, .used_ns = d->now_ns };
		return;
	}
	/* (Not recorded as a borrow: this writer's cgroup may not be one the
	 * daemon drops for, which only fdmanage.c knows; where this close was
	 * the file's last, that file stays cached.) */
	close(dup);
	c->fs[c->nfs++] = (struct fdc_fs){ .dev = dev, .fsid = sf.f_fsid, .fd = keep, .used_ns = d->now_ns };
	c->marks++;
	log_debug("fd streams: files closed on device %" PRIu64 ":%" PRIu64 " are reported (pid %d wrote "
		  "there)", (uint64_t)major(st.st_dev), (uint64_t)minor(st.st_dev), (int)p->pid);
}

void msqd_fdclosed_borrowed(struct msqd *d, const struct fdw_proc *p, uint64_t dev, uint64_t ino)
{
	struct msqd_fdclosed *c = &d->fdc;
	struct fdc_borrow b = { dev, ino, p->since_real_ns, d->now_ns };

	for (unsigned i = 0; i < MSQD_FDCLOSED_BORROWS; i++)
		if (c->borrows[i].dev == dev && c->borrows[i].ino == ino) {
			c->borrows[i] = b;
			return;
		}
	c->borrows[c->next_borrow++ % MSQD_FDCLOSED_BORROWS] = b;
}

/* The writer of a file the daemon's own close was reported for: its start
 * (*born_after), if a borrowed duplicate of that file was closed lately. */
static bool borrowed_lately(const struct msqd *d, uint64_t dev, uint64_t ino, uint64_t *born_after)
{
	const struct msqd_fdclosed *c = &d->fdc;

	for (unsigned i = 0; i < MSQD_FDCLOSED_BORROWS; i++) {
		const struct fdc_borrow *b = &c->borrows[i];

		if (b->ns && b->dev == dev && b->ino == ino && d->now_ns - b->ns <= BUSY_NS) {
			*born_after = b->born_after_ns;
			return true;
		}
	}
	return false;
}

/* The watched process pid, if the watch follows it and may act for it:
 * a busy writer (BUSY_NS) whose cgroup's section says discover and
 * pageout, with the gate open.  *born_after: when it started.
 *
 * A writer that exited since the last look still counts: a program closes
 * its last file and exits at once (rclone), and the watch forgets it only
 * at the end of this look.  Its pid could be another process's by then
 * only if the pid space went round within a look; even so, what that one
 * closed is dropped only if it is a file born after the watched writer
 * started, and only its clean pages that nobody maps: no data, and
 * nothing cached before. */
static bool writer_ok(struct msqd *d, pid_t pid, uint64_t *born_after)
{
	bool found;
	size_t i = msqd_fdwatch_index(&d->fdw, pid, &found);
	const struct fdw_proc *p = found ? d->fdw.p[i] : NULL;

	/* (Not before its maps were checked: a process that runs the library
	 * manages its own files, closed ones included.) */
	if (!p)
		return false;
	if (!p->maps_checked || p->lib || !p->cg || d->now_ns - p->fds_ns > BUSY_NS) {
		log_debug("fd streams: pid %d closed a file: %s", (int)pid,
			  p->lib ? "it runs the library" : !p->maps_checked || !p->cg ? "not looked at yet"
			  : "not a busy writer");
		return false;
	}
	for (struct msqd_cg *g = d->cgs.list; g; g = g->next)
		if (!strcmp(g->path, p->cg->path)) {
			if (!g->pol->discover || g->pol->mode != MSQ_MODE_PAGEOUT || !msqd_gate_open(d, g))
				return false;
			*born_after = p->since_real_ns;
			return true;
		}
	return false;
}

/* One FAN_CLOSE_WRITE event: ev, its m.event_len bytes (m: its metadata,
 * copied out).  The kernel pads FID records to 4 bytes, so an event's
 * 64-bit fields may be unaligned: every field is copied out, never read
 * in place. */
static void enqueue(struct msqd *d, const char *ev, const struct fanotify_event_metadata *m)
{
	struct msqd_fdclosed *c = &d->fdc;
	struct fanotify_event_info_fid fid;
	struct file_handle fh;
	const unsigned char *handle;
	size_t at = m->metadata_len, len = m->event_len;
	uint64_t born_after = 0;
	size_t i;

	c->events++;
	if (at < sizeof(*m) || at > len || len - at < sizeof(fid))
		return;
	memcpy(&fid, ev + at, sizeof(fid));
	if (fid.hdr.info_type != FAN_EVENT_INFO_TYPE_FID || fid.hdr.len > len - at ||
	    fid.hdr.len < sizeof(fid) + sizeof(fh))
		return;
	memcpy(&fh, ev + at + sizeof(fid), sizeof(fh));
	if (fh.handle_bytes > MAX_HANDLE || fh.handle_bytes > fid.hdr.len - sizeof(fid) - sizeof(fh))
		return;
	handle = (const unsigned char *)ev + at + sizeof(fid) + sizeof(fh);
	/* (The daemon's own close: the last of a borrowed duplicate.) */
	if (m->pid != c->self && !writer_ok(d, m->pid, &born_after)) {
		c->ignored++;
		return;
	}
	for (i = 0; i < c->nfs; i++)
		if (c->fs[i].fd >= 0 && !memcmp(&c->fs[i].fsid, &fid.fsid, sizeof(fsid_t)))
			break;
	if (i == c->nfs) {
		c->ignored++;
		return;
	}
	c->fs[i].used_ns = d->now_ns;
	/* The same file closed again: one entry, its time renewed. */
	for (size_t k = 0; k < c->nq; k++)
		if (c->q[k].fs == i && c->q[k].htype == fh.handle_type && c->q[k].hlen == fh.handle_bytes &&
		    !memcmp(c->q[k].h, handle, fh.handle_bytes)) {
			c->q[k].until_ns = d->now_ns + RETRY_NS;
			return;
		}
	if (c->nq >= MAX_QUEUE) {
		c->ignored++;
		return;
	}
	c->q[c->nq] = (struct fdc_file){ .fs = i, .self = m->pid == c->self, .until_ns = d->now_ns + RETRY_NS,
					 .born_after_ns = born_after, .hlen = fh.handle_bytes,
					 .htype = fh.handle_type };
	memcpy(c->q[c->nq].h, handle, fh.handle_bytes);
	c->nq++;
}

/* Reads what the kernel reported since the last look. */
static void read_events(struct msqd *d)
{
	struct msqd_fdclosed *c = &d->fdc;
	char buf[8192] __attribute__((aligned(8)));
	unsigned n = 0;
	ssize_t got;

	/* (Not from the slice's budget: a bounded number of events, each a
	 * lookup among the watched processes and the queue.) */
	while (n < EVENTS_MAX && (got = read(c->fan, buf, sizeof(buf))) > 0) {
		for (size_t at = 0; at + sizeof(struct fanotify_event_metadata) <= (size_t)got;) {
			struct fanotify_event_metadata m;

			memcpy(&m, buf + at, sizeof(m));
			if (m.event_len < sizeof(m) || m.event_len > (size_t)got - at ||
			    m.vers != FANOTIFY_METADATA_VERSION)
				break;
			if (m.mask & FAN_Q_OVERFLOW)
				c->overflows++;
			else if (m.mask & FAN_CLOSE_WRITE)
				enqueue(d, buf + at, &m);
			if (m.fd >= 0)
				close(m.fd); /* (none in FID mode) */
			at += m.event_len;
			n++;
		}
	}
}

/* One closed file: opened by its handle, checked, its clean pages
 * dropped.  Returns true when it is done with (dropped, or not the
 * daemon's), false to go on at the next look. */
static bool act(struct msqd *d, struct fdc_file *e, long *ops)
{
	struct msqd_fdclosed *c = &d->fdc;
	char hbuf[sizeof(struct file_handle) + MAX_HANDLE] __attribute__((aligned(8)));
	struct file_handle *fh = (struct file_handle *)(void *)hbuf;
	struct msq_extents span = MSQ_EXTENTS_INIT, left = MSQ_EXTENTS_INIT;
	struct msq_cachestat_range all = { 0, 0 }; /* (0: to the end of the file) */
	struct msq_cachestat cs;
	struct statx sx;
	struct statfs sf;
	struct stat st;
	uint64_t end, to, dropped = 0;
	int pfd, fd;
	bool done;

	(*ops)--; /* (the opens and checks) */
	fh->handle_bytes = e->hlen;
	fh->handle_type = e->htype;
	memcpy(fh->f_handle, e->h, e->hlen);
	/* O_PATH first: nothing of the file is opened until it is known to
	 * be a regular file (a FIFO or a device node never is). */
	pfd = open_by_handle_at(c->fs[e->fs].fd, fh, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return true; /* (deleted since: its pages went with it) */
	if (fstat(pfd, &st) < 0) {
		close(pfd);
		return true;
	}
	if (e->self) {
		/* Reported as the daemon's own close: the writer's whose
		 * duplicate it closed last, or nobody's. */
		if (!borrowed_lately(d, (uint64_t)st.st_dev, (uint64_t)st.st_ino, &e->born_after_ns)) {
			c->ignored++;
			close(pfd);
			return true;
		}
		e->self = false;
	}
	if (!S_ISREG(st.st_mode) || !st.st_nlink || fstatfs(pfd, &sf) < 0 ||
	    sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC ||
	    statx(pfd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_BTIME, &sx) < 0 ||
	    !(sx.stx_mask & STATX_BTIME) ||
	    (uint64_t)sx.stx_btime.tv_sec * 1000000000u + sx.stx_btime.tv_nsec < e->born_after_ns) {
		/* Older than the writer (pages of it may have been cached
		 * before), or a filesystem with no birth times: left. */
		log_debug("fd streams: closed file %" PRIu64 " left: not a regular file born after its writer",
			  (uint64_t)st.st_ino);
		c->ignored++;
		close(pfd);
		return true;
	}
	fd = open_by_handle_at(c->fs[e->fs].fd, fh, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOATIME | O_CLOEXEC);
	close(pfd);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || msq_cachestat(fd, &all, &cs) < 0) {
		if (fd >= 0)
			close(fd);
		c->refused++;
		return true;
	}
	end = ((uint64_t)st.st_size + PAGE - 1) & ~(PAGE - 1);
	if (cs.nr_cache == 0 || e->at >= end) {
		close(fd);
		c->files++;
		return true;
	}
	/* Dirty pages: their writeback started now (a bounded amount; the
	 * kernel's flusher takes more), dropped once clean at a later look. */
	if (cs.nr_dirty && (cs.nr_dirty + cs.nr_writeback) * PAGE <= WB_MAX)
		msqd_fdact_writeback(fd, 0, end);
	/* Span by span from where the last try stopped: one cachestat passes
	 * over a span with nothing cached (most of a stream's file, dropped
	 * behind it while it was written), a span with pages cached is
	 * dropped chunk by chunk, and a chunk still dirty or under writeback
	 * is where the next try begins. */
	while (e->at < end && !left.n && *ops > 0) {
		uint64_t got = 0;
		int64_t in;

		to = end - e->at > SPAN ? e->at + SPAN : end;
		(*ops)--;
		if ((in = msqd_fdact_cached(fd, e->at, to)) < 0)
			break;
		if (in > 0) {
			*ops -= (long)((to - e->at + CHUNK - 1) / CHUNK);
			msq_extents_clear(&span);
			if (msq_extents_add(&span, e->at, to) < 0 ||
			    msqd_fdact_drop(fd, &span, &got, &left) < 0)
				break;
			dropped += got;
		}
		e->at = left.n ? left.v[0].start : to;
	}
	c->dropped += dropped;
	d->cnt.dropped += dropped;
	done = e->at >= end;
	if (!done && d->now_ns >= e->until_ns) {
		int64_t l = msqd_fdact_cached(fd, 0, end);

		c->left += l > 0 ? (uint64_t)l : 0;
		done = true;
	}
	if (done)
		c->files++;
	msq_extents_free(&span);
	msq_extents_free(&left);
	close(fd);
	return done;
}

void msqd_fdclosed_step(struct msqd *d)
{
	struct msqd_fdclosed *c = &d->fdc;

	if (c->fan <= 0)
		return;
	/* (Read even when the look was cut short: the watch forgets a writer
	 * that exited at the end of this look, and a close read later would
	 * find no writer for it.) */
	read_events(d);
	{
		long ops = OPS;

		for (size_t k = c->nq; k-- > 0 && ops > 0;)
			if (act(d, &c->q[k], &ops))
				c->q[k] = c->q[--c->nq];
	}
	for (size_t i = c->nfs; i-- > 0;)
		if (d->now_ns - c->fs[i].used_ns > MARK_IDLE_NS) {
			log_debug("fd streams: device %" PRIu64 ":%" PRIu64 " no longer watched for closed files",
				  (uint64_t)major(c->fs[i].dev), (uint64_t)minor(c->fs[i].dev));
			fs_drop(c, i);
		}
}

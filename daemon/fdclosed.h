/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Files that a watched writer closed: the part of fd discovery that a
 * look at descriptors cannot do.  restic writes each 16 MiB pack, syncs
 * it and closes it within one look; rclone closes each copy with its last
 * chunks under writeback.  Once closed, no descriptor names the file, and
 * the daemon never opens one by path.
 *
 * The kernel names them instead: a fanotify group in FID mode (it reports
 * a file handle, opens nothing) marks each filesystem on which the fd
 * watch saw a watched writer's descriptor, for FAN_CLOSE_WRITE.  An
 * event counts only when its pid is a process the watch follows (its
 * cgroup says discover = yes, mode = pageout, and the gate is open), that
 * moved data fast within the last two seconds, and that does not run the
 * library.  The file is then opened by its handle,
 * O_PATH first: it must be a regular file, still linked, not on tmpfs,
 * and born after that writer started (statx btime against its start
 * time), so that no page of it was cached before the stream; only then is it opened for
 * reading (never read), its dirty pages given to writeback (a bounded
 * amount), and its clean cached pages dropped with
 * posix_fadvise(DONTNEED), which leaves pages mapped anywhere.  A file
 * still dirty or under writeback is tried again at later looks, for a
 * while.
 *
 * What it holds: per marked filesystem an O_PATH descriptor of the file
 * whose descriptor showed it (open_by_handle_at needs one on that
 * filesystem), given up with the mark once no watched writer has used the
 * filesystem for a while.  An unprivileged writer gains nothing: it may
 * fadvise a file it wrote itself.
 */
#ifndef MSQD_FDCLOSED_H
#define MSQD_FDCLOSED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct msqd;
struct fdw_proc;

struct fdc_fs;
struct fdc_file;

/* A borrowed duplicate of a writer's file that the daemon closed. */
struct fdc_borrow {
	uint64_t dev, ino, born_after_ns, ns;
};
#define MSQD_FDCLOSED_BORROWS 16

/* The closed-file watch's state (struct msqd's fdc), changed by
 * fdclosed.c alone; its counters are rows of metrics.c's table. */
struct msqd_fdclosed {
	int fan;           /* the fanotify group, -1 when none */
	bool unavailable;  /* fanotify_init refused (no CAP_SYS_ADMIN, seccomp, old kernel) */
	struct fdc_fs *fs;
	size_t nfs;
	struct fdc_file *q; /* closed files being dropped */
	size_t nq;
	pid_t self;        /* the daemon's pid: closes reported as its own */
	struct fdc_borrow borrows[MSQD_FDCLOSED_BORROWS]; /* the last ones, a ring */
	unsigned next_borrow;
	/* totals, for status and metrics */
	uint64_t marks, events, files, dropped, left, ignored, refused, overflows;
};

/* A watched writer (p, not running the library) holds descriptor fd of
 * file (dev, ino) open for writing: mark its filesystem, if not marked
 * yet, so that the files it closes are reported.  Call only for
 * processes of discover = yes cgroups. */
void msqd_fdclosed_writer(struct msqd *d, struct fdw_proc *p, int fd, uint64_t dev, uint64_t ino);

/* The daemon closed its borrowed duplicate of writer p's file (dev, ino).
 * Where the program had closed its own descriptor in between, the
 * daemon's close was the file's last, and the kernel reports it as the
 * daemon's: such a report is taken as p's when it names this file within
 * a couple of seconds.  Call only for a writer the watch acts for (a
 * stream of a discover = yes, pageout cgroup). */
void msqd_fdclosed_borrowed(struct msqd *d, const struct fdw_proc *p, uint64_t dev, uint64_t ino);

/* Reads what the kernel reported and acts on the closed files, a bounded
 * amount each call; gives up marks that went unused.  Called at every
 * slice of the fd watch's look, after the processes were looked at and
 * before the exited ones are forgotten. */
void msqd_fdclosed_step(struct msqd *d);

/* Everything it holds (at exit). */
void msqd_fdclosed_free(struct msqd_fdclosed *c);

#endif

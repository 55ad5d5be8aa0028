/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "hostns.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../common/fault.h"
#include "cgroup.h"
#include "log.h"

#define PF_KTHREAD 0x00200000 /* include/linux/sched.h: flags in /proc/PID/stat */

/* Opens <proc_root>/<what>/ns/cgroup.  Returns the descriptor, -ENOTSUP
 * when the file is not a namespace (a fixture's), or -errno. */
static int open_ns(const char *proc_root, const char *what)
{
	char path[4096];
	struct statfs sfs;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s/ns/cgroup", proc_root, what) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
		return -errno;
	if (fstatfs(fd, &sfs) < 0 || sfs.f_type != NSFS_MAGIC) {
		close(fd);
		return -ENOTSUP;
	}
	return fd;
}

/* Whether PID 2 under proc_root is a kernel thread (kthreadd): parent 0
 * and PF_KTHREAD.  In a child pid namespace PID 2 is some process. */
static bool pid2_is_kthread(const char *proc_root)
{
	char path[4096], buf[512], *end;
	unsigned flags;
	int ppid, fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/2/stat", proc_root);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "2 (comm) S ppid pgrp session tty_nr tpgid flags ...": the
	 * command may hold blanks and parentheses, the last ')' ends it. */
	if (!(end = strrchr(buf, ')')) ||
	    sscanf(end + 1, " %*c %d %*d %*d %*d %*d %u", &ppid, &flags) != 2)
		return false;
	return ppid == 0 && (flags & PF_KTHREAD);
}

/* The reference namespace: PID 1's, else kthreadd's.  *whose names it.
 * Returns a descriptor or -errno (-ENOTSUP: no namespaces here). */
static int open_host_ns(const char *proc_root, const char **whose)
{
	int fd = open_ns(proc_root, "1");

	*whose = "pid 1 (the node's init)";
	if ((fd == -EACCES || fd == -EPERM) && pid2_is_kthread(proc_root)) {
		int fd2 = open_ns(proc_root, "2");

		if (fd2 >= 0) {
			*whose = "the kernel's threads (pid 1's cannot be read)";
			return fd2;
		}
	}
	return fd;
}

/* Whether the daemon's own cgroup path reads "/": what every process
 * sees of its own cgroup in a namespace made for it. */
static bool own_cgroup_is_root(const char *proc_root)
{
	char path[4096];
	enum msqd_cg_layout layout;

	return msqd_cgroup_of(proc_root, getpid(), path, sizeof(path), &layout) == 0 &&
	       !strcmp(path, "/");
}

static const char mismatch[] =
	"cgroup paths of processes outside this container read relative to its own "
	"cgroup (\"/../..\"): config sections and pod/qos matchers do not match them, "
	"and their memory pressure is not read";

int msqd_hostns_enter(const char *proc_root, bool stay)
{
	struct stat host, self;
	const char *whose;
	int fd, self_fd, rc;

	fd = open_host_ns(proc_root, &whose);
	if (fd == -ENOTSUP || fd == -ENOENT) {
		log_debug("no cgroup namespace files under %s: nothing to compare", proc_root);
		return 0;
	}
	if (fd < 0) {
		/* Without CAP_SYS_PTRACE (or hostPID): a guess at most. */
		if (own_cgroup_is_root(proc_root))
			log_warn("cannot read pid 1's cgroup namespace (%s): if this container has "
				 "its own, %s (CAP_SYS_PTRACE and CAP_SYS_ADMIN let madvseqd enter "
				 "the node's)", strerror(-fd), mismatch);
		else
			log_debug("cannot read pid 1's cgroup namespace: %s", strerror(-fd));
		return 0;
	}
	self_fd = open_ns(proc_root, "thread-self");
	if (self_fd < 0 || fstat(fd, &host) < 0 || fstat(self_fd, &self) < 0) {
		rc = self_fd < 0 ? self_fd : -errno;
		log_debug("cannot compare cgroup namespaces: %s", strerror(-rc));
		goto out;
	}
	if (host.st_dev == self.st_dev && host.st_ino == self.st_ino) {
		rc = 0;
		goto out;
	}
	if (stay) {
		log_warn("staying in this container's own cgroup namespace (--own-cgroupns): %s",
			 mismatch);
		rc = -EEXIST;
		goto out;
	}
	if (MSQ_FAULT("madvseq/daemon/hostns/setns")) {
		errno = EPERM;
		rc = -1;
	} else {
		rc = setns(fd, CLONE_NEWCGROUP);
	}
	if (rc < 0) {
		rc = -errno;
		log_warn("cannot enter the cgroup namespace of %s: %s; %s (give madvseqd "
			 "CAP_SYS_ADMIN, or run it in the node's cgroup namespace)",
			 whose, strerror(-rc), mismatch);
		goto out;
	}
	log_info("entered the cgroup namespace of %s: cgroup paths read as the node sees them",
		 whose);
	rc = 1;
out:
	if (self_fd >= 0)
		close(self_fd);
	close(fd);
	return rc;
}

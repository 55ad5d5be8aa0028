/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The host's cgroup namespace.  A process reads other processes'
 * /proc/PID/cgroup relative to its own cgroup namespace: inside a
 * container that has one of its own (containerd's default on cgroup v2,
 * podman --cgroupns=private), a pod's path reads "/../../besteffort/pod..."
 * instead of "/kubepods/besteffort/pod...", so neither config sections nor
 * pod matchers match it, and its directory is not found below the cgroupfs
 * root.  With hostPID the daemon sees PID 1, the node's init: it enters
 * init's cgroup namespace, and reads paths as the node does.
 *
 * Call once, single-threaded, before anything reads a cgroup: setns()
 * moves the calling thread only, and threads started later inherit it.
 */
#ifndef MSQD_HOSTNS_H
#define MSQD_HOSTNS_H

#include <stdbool.h>

/*
 * Compares the daemon's cgroup namespace with PID 1's under proc_root
 * and, when they differ, enters PID 1's (setns, CAP_SYS_ADMIN), unless
 * stay (--own-cgroupns).  Where PID 1's cannot be read (an init that
 * refuses ptrace reads), the kernel's threads' is taken instead: kthreadd
 * (PID 2, a kernel thread, only in the initial pid namespace) is always in
 * the initial cgroup namespace.  A proc_root without namespace files (a
 * test fixture) is left alone.  Logs one line when it enters, and one
 * warning when the namespaces differ and it does not.
 * Returns 1 (entered), 0 (nothing to do, or nothing to compare) or
 * -errno (they differ and the daemon stays in its own).
 */
int msqd_hostns_enter(const char *proc_root, bool stay);

#endif

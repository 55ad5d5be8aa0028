/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * msq_kernel_dropbehind_state()/_lag()/_covers_fs(), the per-cgroup switch
 * (msq_kernel_dropbehind_cgroup_state(), msq_cgroup2_path(),
 * msq_kernel_dropbehind_for()) against fixture procfs and cgroupfs trees
 * written in a temporary directory.  Exit 0 on success.
 */
#include "kernel_switch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;

#define CHECK(cond)                                                        \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: check failed: %s\n",       \
				__FILE__, __LINE__, #cond);                \
			failures++;                                        \
		}                                                          \
	} while (0)

static char root[256];

static void put(const char *rel, const char *content)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/sys/vm/%s", root, rel);
	f = fopen(path, "w");
	if (!f || fputs(content, f) < 0 || fclose(f)) {
		perror(path);
		exit(2);
	}
}

/* Writes root/rel (any file of the fixture), making its directories. */
static void put_at(const char *rel, const char *content)
{
	char path[512];
	FILE *f;

	for (const char *p = strchr(rel, '/'); p; p = strchr(p + 1, '/')) {
		snprintf(path, sizeof(path), "%s/%.*s", root, (int)(p - rel), rel);
		mkdir(path, 0755);
	}
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	if (!f || fputs(content, f) < 0 || fclose(f)) {
		perror(path);
		exit(2);
	}
}

static void rm_at(const char *rel)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	if (unlink(path))
		rmdir(path);
}

/* The per-cgroup switch, against the fixture's cg/ and proc/ trees. */
static void test_cgroup_switch(void)
{
	char cgroot[512], procroot[512], buf[256];
	bool by_cg = true;

	snprintf(cgroot, sizeof(cgroot), "%s/cg", root);
	snprintf(procroot, sizeof(procroot), "%s/proc", root);

	/* No file anywhere: a kernel without the series (or cgroup v1). */
	put_at("cg/system.slice/web.service/cgroup.procs", "");
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, "/system.slice/web.service") == -ENOENT);
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, "/") == -ENOENT);

	/* The files as the kernel has them: every non-root cgroup, 0 by default. */
	put_at("cg/system.slice/memory.seq_read_dropbehind", "0\n");
	put_at("cg/system.slice/web.service/memory.seq_read_dropbehind", "0\n");
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, "/system.slice/web.service") == 0);
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, "/system.slice") == 0);

	/* On for the cgroup itself. */
	put_at("cg/system.slice/web.service/memory.seq_read_dropbehind", "1\n");
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, "/system.slice/web.service") == 1);
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, "/system.slice/web.service/") == 1);
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, "/system.slice") == 0);

	/* On for an ancestor: inherited by everything below it. */
	put_at("cg/system.slice/web.service/memory.seq_read_dropbehind", "0\n");
	put_at("cg/system.slice/memory.seq_read_dropbehind", "1\n");
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, "/system.slice/web.service") == 1);
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, "/system.slice") == 1);
	/* ... but not by a sibling tree. */
	put_at("cg/user.slice/memory.seq_read_dropbehind", "0\n");
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, "/user.slice") == 0);

	/* A cgroup whose file is missing (memory controller not enabled
	 * there) is not covered, whatever its ancestors say. */
	put_at("cg/system.slice/nomem.service/cgroup.procs", "");
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, "/system.slice/nomem.service") == -ENOENT);

	/* Bad paths and content. */
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, "system.slice") == -EINVAL);
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, "/system.slice/..") == -EINVAL);
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, "/a/../system.slice") == -EINVAL);
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, NULL) == -EINVAL);
	put_at("cg/user.slice/memory.seq_read_dropbehind", "yes\n");
	CHECK(msq_kernel_dropbehind_cgroup_state(cgroot, "/user.slice") == -EINVAL);

	/* /proc/PID/cgroup: the v2 line, among v1 ones or alone. */
	put_at("proc/self/cgroup", "12:memory:/v1/path\n0::/system.slice/web.service\n");
	CHECK(msq_cgroup2_path(procroot, 0, buf, sizeof(buf)) == 0);
	CHECK(!strcmp(buf, "/system.slice/web.service"));
	CHECK(msq_cgroup2_path(procroot, 0, buf, 10) == -ENAMETOOLONG);
	put_at("proc/42/cgroup", "0::/user.slice\n");
	CHECK(msq_cgroup2_path(procroot, 42, buf, sizeof(buf)) == 0);
	CHECK(!strcmp(buf, "/user.slice"));
	put_at("proc/43/cgroup", "4:memory:/only/v1\n");
	CHECK(msq_cgroup2_path(procroot, 43, buf, sizeof(buf)) == -ENOENT);
	CHECK(msq_cgroup2_path(procroot, 44, buf, sizeof(buf)) == -ENOENT);

	/* The decision for a process: the sysctl, else its cgroup. */
	put_at("proc/sys/vm/seq_read_dropbehind", "0\n");
	CHECK(msq_kernel_dropbehind_for(procroot, cgroot, 0, &by_cg) == 1);
	CHECK(by_cg);
	/* (An unreadable cgroup file: the sysctl's answer.) */
	CHECK(msq_kernel_dropbehind_for(procroot, cgroot, 42, &by_cg) == 0);
	put_at("cg/user.slice/memory.seq_read_dropbehind", "0\n");
	CHECK(msq_kernel_dropbehind_for(procroot, cgroot, 42, &by_cg) == 0);
	CHECK(!by_cg);
	put_at("proc/sys/vm/seq_read_dropbehind", "1\n");
	CHECK(msq_kernel_dropbehind_for(procroot, cgroot, 42, &by_cg) == 1);
	CHECK(!by_cg);
	CHECK(msq_kernel_dropbehind_for(procroot, cgroot, 43, NULL) == 1);
	/* No sysctl, no cgroup file: not this kernel. */
	rm_at("proc/sys/vm/seq_read_dropbehind");
	CHECK(msq_kernel_dropbehind_for(procroot, cgroot, 43, &by_cg) == -ENOENT);
	/* The cgroup file without the sysctl still counts. */
	CHECK(msq_kernel_dropbehind_for(procroot, cgroot, 0, &by_cg) == 1);
	CHECK(by_cg);
	CHECK(msq_kernel_dropbehind_for(procroot, cgroot, 42, &by_cg) == 0);

	/* Clean up the fixture, deepest first. */
	rm_at("proc/self/cgroup");
	rm_at("proc/self");
	rm_at("proc/42/cgroup");
	rm_at("proc/42");
	rm_at("proc/43/cgroup");
	rm_at("proc/43");
	rm_at("proc/sys/vm");
	rm_at("proc/sys");
	rm_at("proc");
	rm_at("cg/system.slice/nomem.service/cgroup.procs");
	rm_at("cg/system.slice/nomem.service");
	rm_at("cg/system.slice/web.service/memory.seq_read_dropbehind");
	rm_at("cg/system.slice/web.service/cgroup.procs");
	rm_at("cg/system.slice/web.service");
	rm_at("cg/system.slice/memory.seq_read_dropbehind");
	rm_at("cg/system.slice");
	rm_at("cg/user.slice/memory.seq_read_dropbehind");
	rm_at("cg/user.slice");
	rm_at("cg");
}

static void rm(const char *rel)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/sys/vm/%s", root, rel);
	unlink(path);
}

int main(void)
{
	char dir[512];
	uint64_t lag = 42;
	const char *tmp = getenv("TMPDIR");

	snprintf(root, sizeof(root), "%s/msq-kswitch-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 2;
	}

	/* No sys/ at all, then an empty sys/vm/: an unpatched kernel. */
	CHECK(msq_kernel_dropbehind_state(root) == -ENOENT);
	snprintf(dir, sizeof(dir), "%s/sys", root);
	mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/sys/vm", root);
	mkdir(dir, 0755);
	CHECK(msq_kernel_dropbehind_state(root) == -ENOENT);
	CHECK(msq_kernel_dropbehind_lag(root, &lag) == -ENOENT);
	CHECK(lag == 42);

	/* Present, as the kernel prints it. */
	put("seq_read_dropbehind", "0\n");
	CHECK(msq_kernel_dropbehind_state(root) == 0);
	put("seq_read_dropbehind", "1\n");
	CHECK(msq_kernel_dropbehind_state(root) == 1);
	put("seq_read_dropbehind", "1");
	CHECK(msq_kernel_dropbehind_state(root) == 1);

	/* Malformed content. */
	put("seq_read_dropbehind", "");
	CHECK(msq_kernel_dropbehind_state(root) == -EINVAL);
	put("seq_read_dropbehind", "on\n");
	CHECK(msq_kernel_dropbehind_state(root) == -EINVAL);
	put("seq_read_dropbehind", "-1\n");
	CHECK(msq_kernel_dropbehind_state(root) == -EINVAL);
	put("seq_read_dropbehind", "1 2\n");
	CHECK(msq_kernel_dropbehind_state(root) == -EINVAL);

	/* Lag in KiB -> bytes. */
	put("seq_read_dropbehind_lag_kb", "16384\n");
	CHECK(msq_kernel_dropbehind_lag(root, &lag) == 0);
	CHECK(lag == 16ULL << 20);
	put("seq_read_dropbehind_lag_kb", "99999999999999999999999\n");
	lag = 7;
	CHECK(msq_kernel_dropbehind_lag(root, &lag) == -EINVAL);
	CHECK(lag == 7);

	/* A directory where the file should be: not readable as a number. */
	rm("seq_read_dropbehind");
	snprintf(dir, sizeof(dir), "%s/sys/vm/seq_read_dropbehind", root);
	mkdir(dir, 0755);
	CHECK(msq_kernel_dropbehind_state(root) < 0);
	rmdir(dir);

	/* errno is preserved. */
	errno = 1234;
	CHECK(msq_kernel_dropbehind_state(root) == -ENOENT);
	CHECK(errno == 1234);

	/* NULL means the real /proc: any of the documented answers. */
	{
		int s = msq_kernel_dropbehind_state(NULL);

		CHECK(s == 0 || s == 1 || s == -ENOENT || s == -EACCES);
	}

	CHECK(msq_kernel_dropbehind_covers_fs(0xEF53));	 /* ext4 */
	CHECK(!msq_kernel_dropbehind_covers_fs(0x01021994)); /* tmpfs */
	CHECK(!msq_kernel_dropbehind_covers_fs(0x58465342)); /* xfs */

	test_cgroup_switch();

	rm("seq_read_dropbehind_lag_kb");
	snprintf(dir, sizeof(dir), "%s/sys/vm", root);
	rmdir(dir);
	snprintf(dir, sizeof(dir), "%s/sys", root);
	rmdir(dir);
	rmdir(root);

	if (failures)
		fprintf(stderr, "test_kernel_switch: %d failures\n", failures);
	else
		printf("test_kernel_switch: all checks passed\n");
	return failures != 0;
}

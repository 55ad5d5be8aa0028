/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * msq_kernel_dropbehind_state()/_lag()/_covers_fs() against fixture procfs
 * trees written in a temporary directory.  Exit 0 on success.
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

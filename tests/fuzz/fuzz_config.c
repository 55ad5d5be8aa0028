/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer harness for madvseqd's configuration parser: each input is a
 * madvseqd.conf, loaded the way --check-config and SIGHUP load one (by
 * path: a memfd seen through /proc/self/fd), then printed and resolved
 * against a few cgroup paths when it parses.  What it finds: crashes,
 * memory errors and undefined behaviour (the sanitizers), leaks, and
 * inputs slower than -timeout.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd = -1;
static char path[64];
static FILE *devnull;

static const char *const cgroups[] = {
	"/", "/batch.slice/job1", "/user.slice/user-1000.slice/session-3.scope",
	"/system.slice/postgresql@15.service", "/a/b/c",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct msqd_conf c;

	if (memfd < 0) {
		memfd = memfd_create("fuzz-config", MFD_CLOEXEC);
		devnull = fopen("/dev/null", "we");
		if (memfd < 0 || !devnull)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	}
	if (ftruncate(memfd, 0) < 0 || (size && pwrite(memfd, data, size, 0) != (ssize_t)size))
		abort();
	msqd_conf_init(&c);
	if (msqd_conf_load(&c, path, false) == 0) {
		msqd_conf_print(&c, devnull);
		for (size_t i = 0; i < sizeof(cgroups) / sizeof(cgroups[0]); i++) {
			const char *sec;
			char buf[256];

			msqd_policy_format(msqd_conf_resolve(&c, cgroups[i], &sec), buf, sizeof(buf));
		}
		(void)msqd_conf_any_discover(&c);
	} else if (!c.error[0] || !strstr(c.error, path)) {
		abort(); /* every rejection names the file */
	}
	msqd_conf_free(&c);
	return 0;
}

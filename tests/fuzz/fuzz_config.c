/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer harness for madvseqd's configuration parser: each input is a
 * madvseqd.conf, parsed as --check-config and SIGHUP parse one
 * (msqd_conf_parse(), the parser of msqd_conf_load(), on the input as a
 * memory stream: no system call per input), then printed and resolved
 * against a few cgroup paths when it parses.  What it finds: crashes,
 * memory errors and undefined behaviour (the sanitizers), leaks, and
 * inputs slower than -timeout.  Opening the file (a directory, a FIFO)
 * is the tests' (daemon-check-config), not this harness's.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NAME "fuzz.conf"

static FILE *devnull;

static const char *const cgroups[] = {
	"/", "/batch.slice/job1", "/user.slice/user-1000.slice/session-3.scope",
	"/system.slice/postgresql@15.service", "/a/b/c",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct msqd_conf c;
	FILE *f;

	if (!devnull && !(devnull = fopen("/dev/null", "we")))
		abort();
	if (size == 0)
		return 0; /* (fmemopen refuses an empty buffer; an empty file is valid) */
	f = fmemopen((void *)data, size, "r");
	if (!f)
		abort();
	msqd_conf_init(&c);
	if (msqd_conf_parse(&c, f, NAME) == 0) {
		msqd_conf_print(&c, devnull);
		for (size_t i = 0; i < sizeof(cgroups) / sizeof(cgroups[0]); i++) {
			const char *sec;
			char buf[256];

			msqd_policy_format(msqd_conf_resolve(&c, cgroups[i], &sec), buf, sizeof(buf));
		}
		(void)msqd_conf_any_discover(&c);
	} else if (strncmp(c.error, NAME ":", strlen(NAME ":"))) {
		abort(); /* every rejection names the file and the line */
	}
	fclose(f);
	msqd_conf_free(&c);
	return 0;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* daemon/log.c: level names ("notice" is "notice") and the journald check
 * (JOURNAL_STREAM must name stderr's own device and inode). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

static int fails;

#define CHECK(c, what)                                                     \
	do {                                                                \
		printf("%s: %s\n", (c) ? "ok" : "FAIL", what);              \
		fails += !(c);                                              \
	} while (0)

int main(void)
{
	char path[] = "/tmp/msq-test-log.XXXXXX", js[64], line[256] = "";
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	struct stat st;
	FILE *f;

	if (fd < 0 || saved < 0 || fstat(fd, &st) < 0)
		return 77;
	CHECK(!strcmp(msqd_log_level_name(LOG_NOTICE), "notice"), "LOG_NOTICE is named notice");
	snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	CHECK(msqd_log_stderr_is_journal(js, fd), "JOURNAL_STREAM naming the fd: journal");
	CHECK(!msqd_log_stderr_is_journal(js, saved) || fstat(saved, &st) < 0,
	      "JOURNAL_STREAM naming another file: not the journal");
	CHECK(!msqd_log_stderr_is_journal("1:2x", fd) && !msqd_log_stderr_is_journal("", fd) &&
		      !msqd_log_stderr_is_journal(NULL, fd),
	      "malformed or missing JOURNAL_STREAM: not the journal");

	/* A notice, logged to a plain file. */
	unsetenv("JOURNAL_STREAM");
	dup2(fd, STDERR_FILENO);
	msqd_log_init("madvseqd");
	log_notice("something to notice");
	dup2(saved, STDERR_FILENO);
	f = fopen(path, "re");
	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
	}
	CHECK(!strcmp(line, "madvseqd: notice: something to notice\n"), "a notice prints as notice");
	if (fails)
		printf("got: %s", line);
	/* The same with stderr being the journal stream: the <5> prefix. */
	setenv("JOURNAL_STREAM", js, 1);
	dup2(fd, STDERR_FILENO);
	msqd_log_init("madvseqd");
	log_notice("to the journal");
	dup2(saved, STDERR_FILENO);
	f = fopen(path, "re");
	if (f) {
		while (fgets(line, sizeof(line), f))
			;
		fclose(f);
	}
	CHECK(!strcmp(line, "<5>to the journal\n"), "under journald: <5> prefix");
	unlink(path);
	close(fd);
	return fails ? 1 : 0;
}

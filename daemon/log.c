/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int msqd_log_level = LOG_INFO;
static const char *g_prog = "madvseqd";
static bool g_journal;

static const char *const names[] = {
	[LOG_ERR] = "err", [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
	[LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

/* Whether stderr is the journal's stream: JOURNAL_STREAM ("DEV:INODE",
 * systemd.exec(5)) names the stream systemd connected, and it is inherited
 * by children whose stderr is something else (a terminal, a file), where
 * "<N>" prefixes would be noise.  So it must match stderr itself. */
bool msqd_log_stderr_is_journal(const char *journal_stream, int fd)
{
	unsigned long long dev, ino;
	struct stat st;
	int end = 0;

	if (!journal_stream || sscanf(journal_stream, "%llu:%llu%n", &dev, &ino, &end) != 2 ||
	    journal_stream[end] != '\0')
		return false;
	return fstat(fd, &st) == 0 && (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

void msqd_log_init(const char *prog)
{
	g_prog = prog;
	g_journal = msqd_log_stderr_is_journal(getenv("JOURNAL_STREAM"), STDERR_FILENO);
}

const char *msqd_log_level_name(int level)
{
	return level >= LOG_ERR && level <= LOG_DEBUG && names[level] ? names[level] : "?";
}

int msqd_parse_log_level(const char *s)
{
	for (int i = LOG_ERR; i <= LOG_DEBUG; i++)
		if (names[i] && !strcasecmp(s, names[i]))
			return i;
	if (!strcasecmp(s, "error"))
		return LOG_ERR;
	if (!strcasecmp(s, "warn"))
		return LOG_WARNING;
	if (s[0] >= '3' && s[0] <= '7' && !s[1])
		return s[0] - '0';
	return -EINVAL;
}

void msqd_log(int level, const char *fmt, ...)
{
	char buf[2048];
	int n, saved = errno;
	va_list ap;

	if (level > msqd_log_level)
		return;
	if (g_journal)
		n = snprintf(buf, sizeof(buf), "<%d>", level);
	else if (msqd_log_level >= LOG_DEBUG) {
		/* Debugging timing: seconds on the monotonic clock. */
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		n = snprintf(buf, sizeof(buf), "%s: [%ld.%03ld] %s: ", g_prog, (long)ts.tv_sec,
			     ts.tv_nsec / 1000000, msqd_log_level_name(level));
	} else
		n = snprintf(buf, sizeof(buf), "%s: %s: ", g_prog, msqd_log_level_name(level));
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, (size_t)n) < 0) {
		/* nowhere else to say it */
	}
	errno = saved;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Logging to stderr with levels.  When stderr is journald's stream
 * (JOURNAL_STREAM names its device and inode) each line starts with a
 * "<N>" syslog priority prefix, which journald turns into the entry's
 * priority; elsewhere it reads "madvseqd: warning: ...".
 */
#ifndef MSQD_LOG_H
#define MSQD_LOG_H

#include <stdbool.h>
#include <syslog.h>

extern int msqd_log_level; /* LOG_ERR .. LOG_DEBUG; default LOG_INFO */

void msqd_log_init(const char *prog);
/* Whether fd is the stream JOURNAL_STREAM's "DEV:INODE" names. */
bool msqd_log_stderr_is_journal(const char *journal_stream, int fd);
void msqd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "err", "warning", "notice", "info", "debug" (or 3..7); -EINVAL if not. */
int msqd_parse_log_level(const char *s);
const char *msqd_log_level_name(int level);

#define log_err(...) msqd_log(LOG_ERR, __VA_ARGS__)
#define log_warn(...) msqd_log(LOG_WARNING, __VA_ARGS__)
#define log_notice(...) msqd_log(LOG_NOTICE, __VA_ARGS__)
#define log_info(...) msqd_log(LOG_INFO, __VA_ARGS__)
#define log_debug(...) msqd_log(LOG_DEBUG, __VA_ARGS__)

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * madvseq-helper: the parts of the `madvseq` wrapper that a shell cannot do
 * well or that must agree exactly with the library.  One file per command:
 *   check-env    validate MADVSEQ_* with the library's own parsers (envcheck.c)
 *   preloadable  can ld.so preload a library into PROGRAM? (preloadable.c)
 *   report       run a command, then sum up its stats files (report.c)
 *   stat         a per-file page-cache view, with the daemon's (stat.c)
 * It is installed next to the library, not in PATH: `madvseq` calls it.
 */
#ifndef MSQ_HELPER_H
#define MSQ_HELPER_H

extern const char *msq_prog; /* "madvseq": messages speak as the wrapper */

int msq_cmd_check_env(int argc, char **argv);
int msq_cmd_preloadable(int argc, char **argv);
int msq_cmd_report(int argc, char **argv);
int msq_cmd_stat(int argc, char **argv);

/* Asks the daemon at sock for its status in JSON (daemon_query.c).
 * Returns a malloc'd NUL-terminated text, or NULL with errno set. */
char *msq_query_daemon_status(const char *sock);

#endif

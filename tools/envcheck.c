/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check-env: every MADVSEQ_* variable the library reads, parsed by the
 * library's own functions (common/config.c), so the wrapper and the
 * library cannot disagree about what is valid.  A bad value is reported
 * here, once for the whole process tree, and replaced by the value the
 * library would have used: the wrapper exports the lines printed on
 * stdout ("NAME=VALUE"), so the library never sees the bad value and
 * stays silent in every process.
 *
 * A stats path that cannot be written is reported before the program
 * starts (exit 1): at exit the program may have closed its stderr.
 *
 * Exit: 0 all usable (possibly with replacements), 1 unusable stats path.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <madvseq/policy.h>
#include <madvseq/protocol.h>

#include "../common/config.h"
#include "helper.h"

static int p_bool(const char *s)
{
	bool b;
	return msq_parse_bool(s, &b);
}
static int p_size(const char *s)
{
	uint64_t v;
	return msq_parse_size(s, &v);
}
static int p_duration(const char *s)
{
	uint64_t v;
	return msq_parse_duration_ns(s, &v);
}
static int p_mode(const char *s)
{
	enum msq_mode m;
	return msq_parse_mode(s, &m);
}
static int p_read(const char *s)
{
	enum msq_read_mode m;
	return msq_parse_read_mode(s, &m);
}

/* The library's variables, what each takes and what a bad value gives way
 * to (preload/shim.c, readpath.c, daemon_client.c): the library's default,
 * or madvseq run's own where it has one (MADVSEQ_READ, MADVSEQ_WRITE_FREE):
 * only madvseq run checks them here. */
static const struct var {
	const char *name;
	int (*parse)(const char *);
	const char *what, *fallback;
} vars[] = {
	{ "MADVSEQ_MODE", p_mode, "a mode (pageout, cold or off)", "pageout" },
	{ "MADVSEQ_LAG", p_size, "a size (e.g. 16M)", "16M" },
	{ "MADVSEQ_INTERVAL", p_duration, "a duration from 100us to 1h (e.g. 20ms)", "20ms" },
	{ "MADVSEQ_READ", p_read, "a read mode (advised, noreuse, all or off)", "all" },
	{ "MADVSEQ_DONTCACHE", p_bool, "a boolean (yes/true/on/1 or no/false/off/0)", "0" },
	{ "MADVSEQ_WRITE_FREE", p_size, "a size (e.g. 64M, or 0)", "0" },
	{ "MADVSEQ_DEBUG", p_bool, "a boolean (yes/true/on/1 or no/false/off/0)", "0" },
	{ "MADVSEQ_DAEMON", p_bool, "a boolean (yes/true/on/1 or no/false/off/0)", "1" },
	{ "MADVSEQ_PAGEMAP_SCAN", p_bool, "a boolean (yes/true/on/1 or no/false/off/0)", "1" },
};

/* The stats path as the library will expand it, %p with a sample pid. */
static int check_stats(const char *path)
{
	char dir[PATH_MAX], file[PATH_MAX];
	size_t n = 0;
	struct stat st;

	if (strlen(path) >= 4096) { /* msq_cfg.stats_path in preload/settings.h */
		fprintf(stderr, "%s: --stats: path too long (at most 4095 bytes)\n", msq_prog);
		return -ENAMETOOLONG;
	}
	for (const char *p = path; *p && n < sizeof(file) - 12; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			n += (size_t)snprintf(file + n, sizeof(file) - n, "%d", (int)getpid());
			p++;
		} else {
			file[n++] = *p;
		}
	}
	file[n] = '\0';
	snprintf(dir, sizeof(dir), "%s", file);
	char *slash = strrchr(dir, '/');
	if (!slash)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "%s: --stats: cannot write %s: directory %s %s\n", msq_prog, path, dir,
			errno == ENOENT || S_ISDIR(st.st_mode) ? "does not exist" : "is not a directory");
		return -ENOENT;
	}
	if (stat(file, &st) == 0 ? access(file, W_OK) < 0 || S_ISDIR(st.st_mode)
				 : access(dir, W_OK | X_OK) < 0) {
		fprintf(stderr, "%s: --stats: cannot write %s: %s\n", msq_prog, path,
			S_ISDIR(st.st_mode) && errno != EACCES ? "is a directory" : strerror(EACCES));
		return -EACCES;
	}
	return 0;
}

int msq_cmd_check_env(int argc, char **argv)
{
	const char *v;
	int rc = 0;

	for (size_t i = 0; i < sizeof(vars) / sizeof(*vars); i++) {
		v = getenv(vars[i].name);
		if (!v || !*v || vars[i].parse(v) == 0)
			continue;
		fprintf(stderr, "%s: %s='%s' is not %s; using %s\n", msq_prog, vars[i].name, v,
			vars[i].what, vars[i].fallback);
		printf("%s=%s\n", vars[i].name, vars[i].fallback);
	}
	/* The library rounds a lag below one 2 MiB drop chunk up to it. */
	uint64_t lag;
	v = getenv("MADVSEQ_LAG");
	if (v && *v && msq_parse_size(v, &lag) == 0 && lag < MSQ_CHUNK) {
		fprintf(stderr, "%s: MADVSEQ_LAG=%s is below the 2M drop granularity; using 2M\n",
			msq_prog, v);
		printf("MADVSEQ_LAG=2M\n");
	}
	v = getenv("MADVSEQ_SOCKET");
	if (v && *v && strlen(v) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		fprintf(stderr, "%s: MADVSEQ_SOCKET is too long for a socket path; not using the daemon\n",
			msq_prog);
		printf("MADVSEQ_SOCKET=\nMADVSEQ_DAEMON=0\n");
	}
	v = getenv("MADVSEQ_STATS");
	if (v && *v && check_stats(v) < 0)
		rc = 1;
	else if (v && *v && !strstr(v, "%p"))
		/* Each process writes its own totals at exit, to the same name. */
		fprintf(stderr, "%s: --stats=%s has no %%p: each process of the tree writes its totals "
				"there and the last to exit wins (FILE.%%p keeps them all; --report sums them)\n",
			msq_prog, v);
	(void)argc;
	(void)argv;
	return fflush(stdout) == 0 ? rc : 1;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * stat [--json] [-s SOCKET] FILE...: what of each file is in the page cache
 * now, from cachestat(2) (Linux 6.5+): cached, dirty and under writeback
 * bytes, and pages evicted since the file was first cached (evicted) of
 * which the kernel still remembers the recent ones (recently evicted: a
 * refault now would count as thrashing).  Like fincore(1) and vmtouch(8),
 * whose cached figures it matches; unlike them it also asks a running
 * madvseqd which processes stream the file and what the daemon dropped.
 *
 * cachestat needs a raw syscall, which is why this is C and not part of
 * the shell wrapper.  It answers EPERM for files the caller may not write
 * unless the caller owns them or is privileged (as mincore does): the
 * figures are then missing, and said to be.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <madvseq/protocol.h>

#include "../common/iec.h"
#include "../common/sys.h"
#include "helper.h"

/* One stream of the daemon's JSON status ("streams": one object a line,
 * numbers first; daemon/metrics.c writes them in this order). */
struct stream_line {
	int pid;
	uint64_t dev, ino, dropped;
	char command[64];
};

static void json_string_at(const char *line, const char *key, char *out, size_t len)
{
	const char *p = strstr(line, key);
	size_t n = 0;

	out[0] = '\0';
	if (!p)
		return;
	for (p += strlen(key); *p && *p != '"' && n + 1 < len; p++) {
		if (*p == '\\' && p[1])
			p++;
		out[n++] = *p;
	}
	out[n] = '\0';
}

static int parse_stream(const char *line, struct stream_line *s)
{
	if (sscanf(line, " {\"pid\":%d,\"dev\":%" SCNu64 ",\"ino\":%" SCNu64 ",\"dropped_bytes\":%" SCNu64,
		   &s->pid, &s->dev, &s->ino, &s->dropped) != 4)
		return -EINVAL;
	json_string_at(line, "\"command\":\"", s->command, sizeof(s->command));
	return 0;
}

static void put_json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			printf("\\u%04x", c); /* bytes, not text: valid JSON either way */
		else
			putchar(c);
	}
	putchar('"');
}

static int stat_one(const char *path, const char *daemon, bool json, bool first)
{
	struct msq_cachestat_range all = { 0, 0 };
	struct msq_cachestat cs;
	long page = sysconf(_SC_PAGESIZE);
	char a[MSQ_IEC_LEN], b[MSQ_IEC_LEN], c[MSQ_IEC_LEN], d[MSQ_IEC_LEN], e[MSQ_IEC_LEN],
		f[MSQ_IEC_LEN];
	struct stat st;
	int fd, err = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "%s: stat: %s: %s\n", msq_prog, path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "%s: stat: %s: not a regular file\n", msq_prog, path);
		close(fd);
		return -1;
	}
	if (msq_cachestat(fd, &all, &cs) < 0)
		err = errno;
	close(fd);
	if (json) {
		printf("%s{\"file\":", first ? "" : ",\n");
		put_json_string(path);
		printf(",\"size\":%lld", (long long)st.st_size);
		if (!err)
			printf(",\"cached\":%" PRIu64 ",\"dirty\":%" PRIu64 ",\"writeback\":%" PRIu64
			       ",\"evicted\":%" PRIu64 ",\"recently_evicted\":%" PRIu64,
			       cs.nr_cache * page, cs.nr_dirty * page, cs.nr_writeback * page,
			       cs.nr_evicted * page, cs.nr_recently_evicted * page);
		else
			printf(",\"error\":\"cachestat: %s\"", strerror(err));
	} else if (!err) {
		printf("%s: %s, cached %s (%.1f%%), dirty %s, writeback %s, evicted %s, recently evicted %s\n",
		       path, msq_format_iec((uint64_t)st.st_size, a), msq_format_iec(cs.nr_cache * page, b),
		       st.st_size ? 100.0 * (double)(cs.nr_cache * page) /
				     (double)(((uint64_t)st.st_size + page - 1) / page * page) : 0.0,
		       msq_format_iec(cs.nr_dirty * page, c), msq_format_iec(cs.nr_writeback * page, d),
		       msq_format_iec(cs.nr_evicted * page, e),
		       msq_format_iec(cs.nr_recently_evicted * page, f));
	} else {
		printf("%s: %s, page cache unknown (cachestat: %s%s)\n", path,
		       msq_format_iec((uint64_t)st.st_size, a), strerror(err),
		       err == EPERM ? "; it needs write access or root" : "");
	}
	/* The daemon's streams over this file. */
	if (json)
		printf(",\"streams\":%s", daemon ? "[" : "null");
	bool any = false;
	for (const char *l = daemon; l && *l;) {
		const char *nl = strchr(l, '\n');
		struct stream_line s;

		if (parse_stream(l, &s) == 0 && s.dev == (uint64_t)st.st_dev && s.ino == (uint64_t)st.st_ino) {
			if (json) {
				printf("%s{\"pid\":%d,\"command\":", any ? "," : "", s.pid);
				put_json_string(s.command);
				printf(",\"dropped\":%" PRIu64 "}", s.dropped);
			} else {
				printf("  streamed by pid %d (%s), madvseqd dropped %s\n", s.pid, s.command,
				       msq_format_iec(s.dropped, a));
			}
			any = true;
		}
		l = nl ? nl + 1 : NULL;
	}
	if (json)
		printf("%s}", daemon ? "]" : "");
	return err ? 1 : 0;
}

int msq_cmd_stat(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "socket", required_argument, NULL, 's' },
		{ 0 },
	};
	const char *sock = getenv("MADVSEQ_SOCKET");
	bool json = false;
	char *daemon;
	int opt, rc = 0;

	if (!sock || !*sock)
		sock = MSQ_DEFAULT_SOCKET;
	while ((opt = getopt_long(argc, argv, "+js:", opts, NULL)) != -1) {
		switch (opt) {
		case 'j': json = true; break;
		case 's': sock = optarg; break;
		default: return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: %s stat [--json] [--socket=PATH] FILE...\n", msq_prog);
		return 2;
	}
	/* No daemon, or not allowed to ask it (status is for root): the
	 * page-cache view alone. */
	daemon = msq_query_daemon_status(sock);
	if (json)
		printf("{\"daemon\":%s,\"files\":[\n", daemon ? "true" : "false");
	for (int i = optind; i < argc; i++) {
		int r = stat_one(argv[i], daemon, json, i == optind);

		if (r < 0)
			rc = 1;
		else if (r > 0 && !rc)
			rc = 1;
	}
	if (json)
		printf("\n]}\n");
	free(daemon);
	return fflush(stdout) == 0 ? rc : 1;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * report [-v] [--preload LIST] -- COMMAND [ARG]...: runs COMMAND with
 * LD_PRELOAD=LIST and MADVSEQ_STATS pointing into a private temporary
 * directory (one file per process: "%p"), waits for it, and prints one
 * summary for the whole process tree on this process's stderr, which the
 * command cannot close.  Exits as COMMAND did (re-raising its signal).
 *
 * The library writes the stats file of each process at exit() or _exit();
 * a process killed by a signal writes none, and the summary says how many
 * files it found.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/iec.h"
#include "helper.h"

struct totals {
	unsigned procs;
	uint64_t regions, dropped, kept, errors, read_files, read_dropped;
	uint64_t read_streamed, read_kept, read_written;
};

static volatile sig_atomic_t g_child;

static void forward(int sig)
{
	if (g_child > 0)
		kill((pid_t)g_child, sig);
}

/* Reads one stats file ("key=value" lines, preload/engine_thread.c). */
static int read_stats(int dirfd, const char *name, struct totals *t, bool verbose)
{
	char line[256];
	uint64_t regions = 0, dropped = 0, kept = 0, errors = 0, rfiles = 0, rdropped = 0, v;
	uint64_t rstreamed = 0, rkept = 0, rwritten = 0;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;

	if (!f) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	if (verbose)
		fprintf(stderr, "  pid %s:\n", name);
	while (fgets(line, sizeof(line), f)) {
		uint64_t fs, fd_, fk, fw;
		char key[64], path[160];

		/* One line per file: "file=STREAMED DROPPED KEPT WRITTEN PATH". */
		if (sscanf(line, "file=%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %159[^\n]", &fs,
			   &fd_, &fk, &fw, path) == 5) {
			char a[MSQ_IEC_LEN], b[MSQ_IEC_LEN], c[MSQ_IEC_LEN], w[MSQ_IEC_LEN];

			if (verbose)
				fprintf(stderr, "    %s: %s streamed, %s dropped, %s kept (cached before), "
						"%s written behind\n",
					path, msq_format_iec(fs, a), msq_format_iec(fd_, b),
					msq_format_iec(fk, c), msq_format_iec(fw, w));
			continue;
		}
		if (sscanf(line, "%63[^=]=%" SCNu64, key, &v) != 2)
			continue;
		if (!strcmp(key, "regions"))
			regions = v;
		else if (!strcmp(key, "bytes_dropped"))
			dropped = v;
		else if (!strcmp(key, "bytes_kept"))
			kept = v;
		else if (!strcmp(key, "errors"))
			errors = v;
		else if (!strcmp(key, "read_files"))
			rfiles = v;
		else if (!strcmp(key, "read_bytes_advised"))
			rdropped = v;
		else if (!strcmp(key, "read_bytes_streamed"))
			rstreamed = v;
		else if (!strcmp(key, "read_bytes_kept"))
			rkept = v;
		else if (!strcmp(key, "read_bytes_written_behind"))
			rwritten = v;
	}
	fclose(f);
	t->procs++;
	t->regions += regions;
	t->dropped += dropped;
	t->kept += kept;
	t->errors += errors;
	t->read_files += rfiles;
	t->read_dropped += rdropped;
	t->read_streamed += rstreamed;
	t->read_kept += rkept;
	t->read_written += rwritten;
	if (verbose) {
		char a[MSQ_IEC_LEN], b[MSQ_IEC_LEN];

		fprintf(stderr, "    in all: read() %" PRIu64 " file%s, %s dropped; mmap %" PRIu64
				" region%s, %s dropped\n",
			rfiles, rfiles == 1 ? "" : "s", msq_format_iec(rdropped, a), regions,
			regions == 1 ? "" : "s", msq_format_iec(dropped, b));
	}
	return 0;
}

static void summarize(const char *dir, const char *cmd, int status, bool verbose)
{
	char a[MSQ_IEC_LEN], b[MSQ_IEC_LEN], c[MSQ_IEC_LEN], w[MSQ_IEC_LEN], how[64];
	struct totals t = { 0 };
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *e;

	if (WIFEXITED(status))
		snprintf(how, sizeof(how), "exited %d", WEXITSTATUS(status));
	else
		snprintf(how, sizeof(how), "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	fprintf(stderr, "%s: report: %s %s\n", msq_prog, cmd, how);
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		read_stats(dfd, e->d_name, &t, verbose);
		unlinkat(dfd, e->d_name, 0);
	}
	if (d)
		closedir(d);
	else if (dfd >= 0)
		close(dfd);
	rmdir(dir);
	fprintf(stderr, "  processes with the library: %u\n", t.procs);
	/* The kernel's count of the tree's block I/O (every descendant that
	 * was waited for): how much the stream read from disk. */
	struct rusage ru;

	if (getrusage(RUSAGE_CHILDREN, &ru) == 0)
		fprintf(stderr, "  disk I/O of the tree: %s read, %s written\n",
			msq_format_iec((uint64_t)ru.ru_inblock * 512, a),
			msq_format_iec((uint64_t)ru.ru_oublock * 512, b));
	/* Files each process managed: one file read by two processes is two. */
	fprintf(stderr, "  read() streams: %" PRIu64 " managed, %s streamed, %s dropped behind the "
			"readers, %s kept (cached before), %s of it written behind\n",
		t.read_files, msq_format_iec(t.read_streamed, a), msq_format_iec(t.read_dropped, b),
		msq_format_iec(t.read_kept, c), msq_format_iec(t.read_written, w));
	fprintf(stderr, "  mmap regions: %" PRIu64 ", %s dropped, %s kept (mapped or used elsewhere)\n",
		t.regions, msq_format_iec(t.dropped, a), msq_format_iec(t.kept, b));
	fprintf(stderr, "  total dropped: %s%s\n", msq_format_iec(t.dropped + t.read_dropped, a),
		t.errors ? "" : ", no errors");
	if (t.errors)
		fprintf(stderr, "  errors: %" PRIu64 " (run with --debug to see them)\n", t.errors);
}

int msq_cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "preload", required_argument, NULL, 'p' },
		{ 0 },
	};
	const char *preload = NULL, *tmp = getenv("TMPDIR");
	char dir[4096], stats[4200];
	bool verbose = false;
	int opt, status;
	struct sigaction sa = { .sa_handler = forward }, ign = { .sa_handler = SIG_IGN }, oint, oquit;
	pid_t pid;

	while ((opt = getopt_long(argc, argv, "+vp:", opts, NULL)) != -1) {
		switch (opt) {
		case 'v': verbose = true; break;
		case 'p': preload = optarg; break;
		default: return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: madvseq-helper report [-v] [--preload LIST] -- COMMAND...\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "%s/madvseq-report.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		fprintf(stderr, "%s: --report: cannot create a directory in %s: %s\n", msq_prog,
			tmp && *tmp ? tmp : "/tmp", strerror(errno));
		return 1;
	}
	snprintf(stats, sizeof(stats), "%s/%%p", dir);
	/* Like system(3): the terminal's ^C and ^\ reach the whole process
	 * group, the command included; other signals sent to the wrapper
	 * are passed on. */
	sigaction(SIGINT, &ign, &oint);
	sigaction(SIGQUIT, &ign, &oquit);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "%s: fork: %s\n", msq_prog, strerror(errno));
		rmdir(dir);
		return 1;
	}
	if (pid == 0) {
		struct sigaction dfl = { .sa_handler = SIG_DFL };

		sigaction(SIGINT, &oint, NULL);
		sigaction(SIGQUIT, &oquit, NULL);
		sigaction(SIGTERM, &dfl, NULL);
		sigaction(SIGHUP, &dfl, NULL);
		sigaction(SIGUSR1, &dfl, NULL);
		sigaction(SIGUSR2, &dfl, NULL);
		if (setenv("MADVSEQ_STATS", stats, 1) < 0 ||
		    (preload && *preload && setenv("LD_PRELOAD", preload, 1) < 0))
			_exit(127);
		execvp(argv[optind], argv + optind);
		fprintf(stderr, "%s: %s: %s\n", msq_prog, argv[optind], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	g_child = pid;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			status = 1 << 8;
			break;
		}
	g_child = 0;
	summarize(dir, argv[optind], status, verbose);
	if (WIFSIGNALED(status)) {
		struct sigaction dfl = { .sa_handler = SIG_DFL };
		sigset_t one;

		sigaction(WTERMSIG(status), &dfl, NULL);
		sigemptyset(&one);
		sigaddset(&one, WTERMSIG(status));
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		fflush(NULL);
		raise(WTERMSIG(status));
		return 128 + WTERMSIG(status);
	}
	return WEXITSTATUS(status);
}

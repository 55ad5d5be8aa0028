/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "conf.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <ini.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/config.h"
#include <madvseq/protocol.h>

#include "log.h"

static const struct msqd_policy builtin = {
	.mode = MSQ_MODE_PAGEOUT,
	.read = MSQ_READ_ADVISED,
	.lag = MSQ_DEFAULT_LAG,
	.discover = false,
	.strong_refs = true,
};

void msqd_policy_default(struct msqd_policy *p)
{
	*p = builtin;
}

void msqd_conf_init(struct msqd_conf *c)
{
	*c = (struct msqd_conf){
		.interval_ns = MSQ_DEFAULT_INTERVAL_NS,
		.discover_interval_ns = UINT64_C(2) * 1000 * 1000 * 1000,
		.discover_watch_ns = UINT64_C(20) * 1000 * 1000,
		.discover_trigger = UINT64_C(32) << 20,
		.hello_timeout_ns = UINT64_C(5) * 1000 * 1000 * 1000,
		.max_clients = 4096,
		/* Limits on what clients may cost (see madvseqd.conf(5)): with
		 * these, a flood from one user stays far below the unit's
		 * MemoryMax (64 clients x 512 KiB of bookkeeping). */
		.max_clients_per_uid = 64,
		.max_regions_per_client = 1024,
		.max_client_bytes = UINT64_C(16) << 40,
		.max_client_memory = UINT64_C(512) << 10,
		.max_discovered = 256,
		.walk_budget_ns = UINT64_C(2) * 1000 * 1000,
		.log_level = -1,
	};
}

void msqd_conf_free(struct msqd_conf *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->sec[i].glob);
		if (c->sec[i].kube)
			msqd_kubematch_free(c->sec[i].kube);
		free(c->sec[i].kube);
	}
	free(c->sec);
	free(c->path);
	c->sec = NULL;
	c->n = 0;
	c->path = NULL;
}

struct parse {
	struct msqd_conf *c;
	const char *file;
	FILE *f;
	int read_errno;  /* the stream's error, if reading failed */
	int line;        /* of the line inih is handling: counted by our reader */
	bool failed;
	int fail_line;   /* of the first error we found ourselves */
	bool after_key;  /* inih's "prev_name": an indented line would continue its value */
	unsigned opened; /* section headers read so far */
	unsigned seen;   /* ...of which the last one had a key handled */
	int section_line;
};

/* Records the first error (the one reported) and stops the parse: the
 * reader returns no more lines once one failed. */
__attribute__((format(printf, 3, 4))) static int fail(struct parse *p, int line, const char *fmt, ...)
{
	char what[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (!p->failed) {
		snprintf(p->c->error, sizeof(p->c->error), "%s:%d: %s", p->file, line, what);
		p->fail_line = line;
	}
	p->failed = true;
	return 0; /* inih: stop counting this line as good */
}

static int parse_percent(const char *v, unsigned *out)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || end == v || (*end && strcmp(end, "%")) || x > 100)
		return -EINVAL;
	*out = (unsigned)x;
	return 0;
}

static int parse_psi(const char *v, double *out)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(v, &end);
	if (errno || end == v || *end || !(x >= 0 && x <= 100))
		return -EINVAL;
	*out = x;
	return 0;
}

static int on_daemon_key(struct parse *p, const char *k, const char *v, int line)
{
	struct msqd_conf *c = p->c;
	int lvl;
	uint64_t u;

	if (!strcmp(k, "socket")) {
		if (v[0] != '/' || strlen(v) >= sizeof(c->socket))
			return fail(p, line, "socket: '%s' is not an absolute path shorter than 108 bytes", v);
		strcpy(c->socket, v);
	} else if (!strcmp(k, "interval")) {
		if (msq_parse_duration_ns(v, &c->interval_ns) < 0)
			return fail(p, line, "interval: '%s' is not a duration from 100us to 1h", v);
	} else if (!strcmp(k, "discover_interval")) {
		if (msq_parse_duration_ns(v, &c->discover_interval_ns) < 0)
			return fail(p, line, "discover_interval: '%s' is not a duration from 100us to 1h", v);
	} else if (!strcmp(k, "discover_watch")) {
		if (msq_parse_duration_ns(v, &c->discover_watch_ns) < 0)
			return fail(p, line, "discover_watch: '%s' is not a duration from 100us to 1h", v);
	} else if (!strcmp(k, "discover_trigger")) {
		if (msq_parse_size(v, &u) < 0)
			return fail(p, line, "discover_trigger: '%s' is not a size (0: off)", v);
		c->discover_trigger = u;
	} else if (!strcmp(k, "hello_timeout")) {
		if (msq_parse_duration_ns(v, &c->hello_timeout_ns) < 0)
			return fail(p, line, "hello_timeout: '%s' is not a duration from 100us to 1h", v);
	} else if (!strcmp(k, "max_clients")) {
		if (msq_parse_size(v, &u) < 0 || u < 1 || u > 1000000)
			return fail(p, line, "max_clients: '%s' is not a number from 1 to 1000000", v);
		c->max_clients = (unsigned)u;
	} else if (!strcmp(k, "max_clients_per_uid") || !strcmp(k, "max_regions_per_client") ||
		   !strcmp(k, "max_discovered")) {
		unsigned *to = !strcmp(k, "max_clients_per_uid") ? &c->max_clients_per_uid
			       : !strcmp(k, "max_discovered") ? &c->max_discovered
			       : &c->max_regions_per_client;

		if (msq_parse_size(v, &u) < 0 || u < 1 || u > 1000000)
			return fail(p, line, "%s: '%s' is not a number from 1 to 1000000", k, v);
		*to = (unsigned)u;
	} else if (!strcmp(k, "max_client_bytes") || !strcmp(k, "max_client_memory")) {
		if (msq_parse_size(v, &u) < 0 || u < 4096)
			return fail(p, line, "%s: '%s' is not a size of at least 4K", k, v);
		*(!strcmp(k, "max_client_bytes") ? &c->max_client_bytes : &c->max_client_memory) = u;
	} else if (!strcmp(k, "walk_budget")) {
		if (msq_parse_duration_ns(v, &c->walk_budget_ns) < 0)
			return fail(p, line, "walk_budget: '%s' is not a duration from 100us to 1h", v);
	} else if (!strcmp(k, "log_level")) {
		if ((lvl = msqd_parse_log_level(v)) < 0)
			return fail(p, line, "log_level: '%s' is not one of err, warning, notice, info, debug", v);
		c->log_level = lvl;
	} else {
		return fail(p, line, "unknown key '%s' in [daemon]", k);
	}
	return 1;
}

static int on_policy_key(struct parse *p, struct msqd_policy *pol, const char *k, const char *v,
			 int line)
{
	if (!strcmp(k, "mode")) {
		if (msq_parse_mode(v, &pol->mode) < 0)
			return fail(p, line, "mode: '%s' is not pageout, cold or off", v);
	} else if (!strcmp(k, "lag")) {
		uint64_t lag;

		if (msq_parse_size(v, &lag) < 0 || lag < MSQ_CHUNK || lag % 4096)
			return fail(p, line, "lag: '%s' is not a size of at least 2M in whole pages", v);
		pol->lag = lag;
	} else if (!strcmp(k, "discover")) {
		if (msq_parse_bool(v, &pol->discover) < 0)
			return fail(p, line, "discover: '%s' is not a boolean (yes/no)", v);
	} else if (!strcmp(k, "strong_refs")) {
		if (msq_parse_bool(v, &pol->strong_refs) < 0)
			return fail(p, line, "strong_refs: '%s' is not a boolean (yes/no)", v);
	} else if (!strcmp(k, "read")) {
		if (msq_parse_read_mode(v, &pol->read) < 0)
			return fail(p, line, "read: '%s' is not noreuse, advised, all or off", v);
	} else if (!strcmp(k, "pressure")) {
		if (parse_percent(v, &pol->pressure_pct) < 0)
			return fail(p, line, "pressure: '%s' is not a percentage from 0%% to 100%%", v);
	} else if (!strcmp(k, "psi")) {
		if (parse_psi(v, &pol->psi_some_avg10) < 0)
			return fail(p, line, "psi: '%s' is not a memory PSI 'some avg10' level from 0 to 100", v);
	} else {
		return fail(p, line, "unknown key '%s'", k);
	}
	return 1;
}

static int new_section(struct parse *p, const char *glob)
{
	struct msqd_conf *c = p->c;
	struct msqd_section *s = realloc(c->sec, (c->n + 1) * sizeof(*s));

	if (!s)
		return fail(p, p->line, "out of memory");
	c->sec = s;
	s = &c->sec[c->n];
	*s = (struct msqd_section){ .glob = strdup(glob), .line = (unsigned)p->section_line };
	msqd_policy_default(&s->p);
	if (!s->glob)
		return fail(p, p->line, "out of memory");
	c->n++;
	return 1;
}

static bool is_kube_key(const char *k)
{
	return !strcmp(k, "pod") || !strcmp(k, "qos");
}

/* pod = UID... / qos = CLASS... of a pod section (kubepods.h). */
static int on_kube_key(struct parse *p, struct msqd_kubematch *m, const char *k, const char *v,
		       int line)
{
	char bad[80];
	int rc = !strcmp(k, "pod") ? msqd_kubematch_add_pods(m, v, bad, sizeof(bad))
				   : msqd_kubematch_add_qos(m, v, bad, sizeof(bad));

	if (rc == -ENOMEM)
		return fail(p, line, "out of memory");
	if (rc < 0 && !strcmp(k, "pod"))
		return fail(p, line, "pod: '%s' is not a pod uid (a uuid, or a static pod's 32 hex digits)",
			    bad[0] ? bad : v);
	if (rc < 0)
		return fail(p, line, "qos: '%s' is not guaranteed, burstable or besteffort", bad[0] ? bad : v);
	return 1;
}

/*
 * inih calls this once per key, with the name of the section it is in.
 * Which header opened that section the reader knows (inih does not say
 * when a section repeats): the first key after each header starts a new
 * cgroup section, so a repeated name is a section of its own (the later
 * wins on equal specificity).
 */
static int on_entry(void *user, const char *section, const char *k, const char *v)
{
	struct parse *p = user;
	struct msqd_conf *c = p->c;
	int line = p->line;
	bool first = p->seen != p->opened;

	p->seen = p->opened;
	if (!p->opened)
		return fail(p, line, "key '%s' before any section: start with [daemon], "
			    "[/cgroup/glob] or [label] and match = GLOB", k);
	if (!strcmp(section, "daemon"))
		return on_daemon_key(p, k, v, line);
	if (section[0] == '/') {
		if (is_kube_key(k))
			return fail(p, line, "%s: only in a section whose first key is pod or qos", k);
		if (first && !new_section(p, section))
			return 0;
		return on_policy_key(p, &c->sec[c->n - 1].p, k, v, line);
	}
	/* [label] + match = GLOB: for globs longer than a section name may be
	 * (libinih keeps 49 characters of it). */
	if (first && is_kube_key(k)) {
		struct msqd_section *s;

		if (!new_section(p, section))
			return 0;
		s = &c->sec[c->n - 1];
		if (!(s->kube = calloc(1, sizeof(*s->kube))))
			return fail(p, line, "out of memory");
		return on_kube_key(p, s->kube, k, v, line);
	}
	if (first) {
		if (strcmp(k, "match"))
			return fail(p, line, "section [%s] is neither [daemon] nor a cgroup path glob "
				    "starting with '/', and has no 'match = GLOB', 'pod = UID' or "
				    "'qos = CLASS' as its first key", section);
		if (v[0] != '/')
			return fail(p, line, "match: '%s' is not a cgroup path glob starting with '/'", v);
		return new_section(p, v);
	}
	if (is_kube_key(k) && c->sec[c->n - 1].kube)
		return on_kube_key(p, c->sec[c->n - 1].kube, k, v, line);
	if (is_kube_key(k))
		return fail(p, line, "%s: only in a section whose first key is pod or qos", k);
	return on_policy_key(p, &c->sec[c->n - 1].p, k, v, line);
}

static bool is_blank(int ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/*
 * The structure of one line, checked before inih sees it, for the causes
 * inih would not tell apart ("error on line N" is all it gives) or would
 * accept silently: an unterminated or empty section name, one longer than
 * inih keeps, text after ']', and an indented line after a key (inih
 * appends it to that key's value as a second value).  Classifies the line
 * the way inih's ini_parse_stream() does: blank or comment, continuation,
 * section, key.
 */
static void check_line(struct parse *p, char *line)
{
	char *b = line, *e;

	if (p->line == 1 && !strncmp(b, "\xEF\xBB\xBF", 3))
		b += 3; /* inih skips a UTF-8 byte order mark */
	while (is_blank((unsigned char)*b))
		b++;
	if (!*b || *b == ';' || *b == '#')
		return;
	if (b > line && p->after_key) {
		fail(p, p->line, "indented line after a key: continuation lines are not supported");
		return;
	}
	if (*b != '[') {
		p->after_key = true;
		return;
	}
	p->after_key = false;
	/* inih's end of a section name: ']', or an inline comment (';' after
	 * a blank) that leaves the name unterminated */
	for (e = b + 1; *e && *e != ']' && !(*e == ';' && is_blank((unsigned char)e[-1])); e++)
		;
	if (*e != ']') {
		fail(p, p->line, "section name not closed by ']'");
		return;
	}
	if (e == b + 1) {
		fail(p, p->line, "empty section name '[]'");
		return;
	}
	/* libinih silently cuts section names to 49 characters */
	if (e - b - 1 > 49) {
		fail(p, p->line, "section name longer than 49 characters: use [label] with "
			 "match = %.*s as its first key", (int)(e - b - 1), b + 1);
		return;
	}
	for (const char *t = e + 1; *t; t++) {
		if (*t == ';' || *t == '#')
			break;
		if (!is_blank((unsigned char)*t)) {
			int len = (int)strlen(t);

			while (len > 0 && is_blank((unsigned char)t[len - 1]))
				len--;
			fail(p, p->line, "text after the section name's ']': '%.*s'", len, t);
			return;
		}
	}
	p->opened++;
	p->section_line = p->line;
}

/* One line for inih (fgets, counting lines so errors can name theirs),
 * or none once an error was found: the first error is the one reported. */
static char *reader(char *str, int num, void *stream)
{
	struct parse *p = stream;
	int n = 0, ch = EOF;

	if (p->failed || num < 3)
		return NULL;
	while (n < num - 1 && (ch = getc(p->f)) != EOF) {
		if (ch == '\0') {
			fail(p, p->line + 1, "NUL byte: not a text file");
			return NULL;
		}
		str[n++] = (char)ch;
		if (ch == '\n')
			break;
	}
	if (ferror(p->f)) {
		p->read_errno = errno ? errno : EIO;
		return NULL;
	}
	if (n == 0)
		return NULL;
	str[n] = '\0';
	p->line++;
	if (str[n - 1] != '\n' && ch != EOF) {
		/* inih would split the line and parse the rest as a line of
		 * its own: only a newline (or the end) may follow */
		ch = getc(p->f);
		if (ch != '\n' && ch != EOF) {
			fail(p, p->line, "line longer than %d characters", num - 2);
			return NULL;
		}
	}
	check_line(p, str);
	return p->failed ? NULL : str;
}

int msqd_conf_load(struct msqd_conf *c, const char *path, bool missing_ok)
{
	struct stat st;
	FILE *f;
	int fd, rc;

	/* O_NONBLOCK: a FIFO given as the file must not hang the open (nor a
	 * device that waits for a carrier) */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ENOENT && missing_ok) {
			c->path = strdup(path);
			return 0;
		}
		snprintf(c->error, sizeof(c->error), "%s: %s", path, strerror(-rc));
		return rc;
	}
	/* a directory reads as empty: refused, as anything but a file (or a
	 * character device such as /dev/null, an empty configuration) */
	if (fstat(fd, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode))) {
		rc = fstat(fd, &st) < 0 ? -errno : S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		snprintf(c->error, sizeof(c->error), "%s: %s", path,
			 rc == -EISDIR ? "is a directory, not a configuration file"
			 : rc == -EINVAL ? "not a regular file" : strerror(-rc));
		close(fd);
		return rc;
	}
	f = fdopen(fd, "r");
	if (!f) {
		rc = -errno;
		close(fd);
		snprintf(c->error, sizeof(c->error), "%s: %s", path, strerror(-rc));
		return rc;
	}
	rc = msqd_conf_parse(c, f, path);
	fclose(f);
	if (rc == 0)
		c->path = strdup(path);
	return rc;
}

int msqd_conf_parse(struct msqd_conf *c, FILE *f, const char *name)
{
	struct parse p = { .c = c, .file = name, .f = f };
	int rc = ini_parse_stream(reader, &p, on_entry, &p);

	if (p.read_errno && (!p.failed || p.fail_line > p.line)) {
		snprintf(c->error, sizeof(c->error), "%s:%d: read error: %s", name, p.line + 1,
			 strerror(p.read_errno));
		return -p.read_errno;
	}
	/* inih's own error: the first line that is neither a section, a key
	 * nor a comment, or one our handler refused (then p.fail_line) */
	if (rc > 0 && (!p.failed || rc < p.fail_line))
		snprintf(c->error, sizeof(c->error), "%s:%d: not a 'key = value' line or '[section]'", name, rc);
	else if (rc < 0 && !p.failed)
		snprintf(c->error, sizeof(c->error), "%s: out of memory", name);
	if (rc != 0 || p.failed)
		return rc < 0 && !p.failed ? -ENOMEM : -EINVAL;
	return 0;
}

static unsigned specificity(const char *glob)
{
	unsigned n = 0;

	for (const char *g = glob; *g; g++)
		if (*g != '*' && *g != '?' && *g != '[' && *g != ']')
			n++;
	return n;
}

const struct msqd_policy *msqd_conf_resolve(const struct msqd_conf *c, const char *cgroup,
					    const char **section)
{
	const struct msqd_section *best = NULL;
	unsigned best_score = 0;
	struct msqd_kubepod kp;
	int pod = -1; /* cgroup parsed as a pod's: 1 yes, 0 no, -1 not yet */

	for (size_t i = 0; i < c->n; i++) {
		const struct msqd_kubematch *m = c->sec[i].kube;
		unsigned sc;

		if (m) {
			if (pod < 0)
				pod = msqd_kubepods_parse(cgroup, &kp) == 0;
			if (!pod || !msqd_kubematch_test(m, &kp))
				continue;
			/* above any glob's count of literal characters */
			sc = m->nuid ? UINT_MAX : UINT_MAX - 1;
		} else if (fnmatch(c->sec[i].glob, cgroup, 0) != 0) {
			continue;
		} else {
			sc = specificity(c->sec[i].glob);
		}
		if (!best || sc >= best_score) {
			best = &c->sec[i];
			best_score = sc;
		}
	}
	if (section)
		*section = best ? best->glob : NULL;
	return best ? &best->p : &builtin;
}

void msqd_policy_format(const struct msqd_policy *p, char *buf, size_t len)
{
	char lag[32], psi[32] = "off", pr[16] = "off";

	if (p->pressure_pct)
		snprintf(pr, sizeof(pr), "%u%%", p->pressure_pct);
	if (p->psi_some_avg10 > 0)
		snprintf(psi, sizeof(psi), "%g", p->psi_some_avg10);
	snprintf(buf, len, "mode=%s lag=%s discover=%s read=%s strong_refs=%s pressure=%s psi=%s",
		 msq_mode_name(p->mode), msq_format_size(p->lag, lag, sizeof(lag)),
		 p->discover ? "yes" : "no", msq_read_mode_name(p->read),
		 p->strong_refs ? "yes" : "no", pr, psi);
}

void msqd_conf_print(const struct msqd_conf *c, FILE *f)
{
	char buf[256], trig[32];

	fprintf(f, "# %s\n[daemon]\nsocket = %s\ninterval = %llums\ndiscover_interval = %llums\n"
		   "discover_watch = %llums\ndiscover_trigger = %s\n"
		   "hello_timeout = %llums\nmax_clients = %u\nlog_level = %s\n",
		c->path ? c->path : "(built-in)", c->socket[0] ? c->socket : MSQ_DEFAULT_SOCKET,
		(unsigned long long)(c->interval_ns / 1000000),
		(unsigned long long)(c->discover_interval_ns / 1000000),
		(unsigned long long)(c->discover_watch_ns / 1000000),
		msq_format_size(c->discover_trigger, trig, sizeof(trig)),
		(unsigned long long)(c->hello_timeout_ns / 1000000), c->max_clients,
		msqd_log_level_name(c->log_level >= 0 ? c->log_level : LOG_INFO));
	msqd_policy_format(&builtin, buf, sizeof(buf));
	fprintf(f, "# cgroups no section matches: %s\n", buf);
	for (size_t i = 0; i < c->n; i++) {
		char kube[512] = "";

		if (c->sec[i].kube)
			msqd_kubematch_format(c->sec[i].kube, kube, sizeof(kube));
		msqd_policy_format(&c->sec[i].p, buf, sizeof(buf));
		fprintf(f, "[%s] # line %u\n%s%s\n", c->sec[i].glob, c->sec[i].line, kube, buf);
	}
}

bool msqd_conf_any_discover(const struct msqd_conf *c)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->sec[i].p.discover && c->sec[i].p.mode != MSQ_MODE_OFF)
			return true;
	return false;
}

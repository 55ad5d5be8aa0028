/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What `madvseqctl status` and `madvseqctl stats` print.  The Prometheus
 * form follows the node_exporter textfile-collector format (HELP/TYPE
 * lines, one sample per line, label values escaped).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/iec.h"
#include "../common/kernel_switch.h"
#include "fdshow.h"
#include "msqd.h"
#include "outbuf.h"
#include "metrics.h"
#include "kubepods.h"
#include "refs.h"

static void self_usage(double *cpu_s, uint64_t *rss)
{
	struct rusage ru;
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	struct timespec ts;

	/* The scheduler's exact count, not the tick-sampled rusage split. */
	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0) {
		*cpu_s = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	} else {
		getrusage(RUSAGE_SELF, &ru);
		*cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
			 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	}
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	*rss = (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* The client's command name (/proc/PID/comm, 15 bytes at most); "?" when
 * it is gone or unreadable. */
static const char *comm_of(const struct msqd *d, pid_t pid, char *buf, size_t len)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%d/comm", d->set.proc_root, (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, len - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0) {
		snprintf(buf, len, "?");
		return buf;
	}
	if (buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
	return buf;
}

static const char *gate_name(const struct msqd_cg *g)
{
	return !g->pol->pressure_pct && g->pol->psi_some_avg10 <= 0 ? "none"
	       : g->gate_open				     ? "open"
							     : "closed";
}

/* Whether g's gate has read the cgroup's pressure: its figures (g->pr)
 * are then what the last decision was made on. */
static bool gate_read(const struct msqd_cg *g)
{
	return (g->pol->pressure_pct || g->pol->psi_some_avg10 > 0) && g->gate_checked_ns;
}

/*
 * The counters, once: each with its Prometheus name, type and help (NULL
 * name: not exported there), its sample's label, its key in the JSON
 * status ("a.b": key b of object a; NULL: not there), its unit, and how
 * it is read.  Prometheus and the JSON status render the table in its
 * order; the text status and each cgroup's JSON name counters by id in
 * their templates ("${id}").  A new counter is one row here (and a ${id}
 * where the text should say it).
 */
enum unit {
	U_COUNT,  /* integer */
	U_BYTES,  /* integer; text: IEC */
	U_STATE,  /* signed integer (-1 absent, 0 off, 1 on) */
	U_NS_MS,  /* nanoseconds; text: ms, Prometheus: seconds */
	U_NS_S,   /* nanoseconds; text and Prometheus: seconds */
	U_CPU_S,  /* seconds */
	U_INFO,   /* Prometheus: the sample 1, its label holding the string */
};

enum filter {
	F_ALL,
	F_LISTED,  /* cgroups the status lists: clients, or something dropped or read */
	F_READ,    /* cgroups whose shims reported read() streams */
	F_MANAGED, /* cgroups with clients, or something dropped */
	F_CLIENTS, /* cgroups with clients */
};

/* What is read at each render: the state, and what is measured then. */
struct view {
	struct msqd *d;
	double cpu;
	uint64_t rss;
	unsigned ncg;
};

struct val {
	uint64_t u;
	int64_t i;
	double f;
	const char *s;
};

#define V_COUNT(e) ((struct val){ .u = (uint64_t)(e) })
#define V_BYTES(e) V_COUNT(e)
#define V_NS_MS(e) V_COUNT(e)
#define V_NS_S(e) V_COUNT(e)
#define V_STATE(e) ((struct val){ .i = (int64_t)(e) })
#define V_CPU_S(e) ((struct val){ .f = (double)(e) })
#define V_INFO(e) ((struct val){ .s = (e) })

/* X(id, prometheus name, type, help, label, json key, unit, filter, value):
 * the value an expression of v (struct view *) and, for per-cgroup rows,
 * g (struct msqd_cg *). */
#define GLOBAL_COUNTERS(X) \
	X(clients_shim, "madvseq_clients", "gauge", "Processes whose memory madvseqd manages.", \
	  "kind=\"shim\"", "clients.shim", COUNT, F_ALL, v->d->cl.nshim) \
	X(clients_discovered, "madvseq_clients", NULL, NULL, "kind=\"discovered\"", \
	  "clients.discovered", COUNT, F_ALL, v->d->cl.ndiscovered) \
	X(clients_total, NULL, NULL, NULL, NULL, NULL, COUNT, F_ALL, \
	  v->d->cl.nshim + v->d->cl.ndiscovered) \
	X(regions, "madvseq_regions", "gauge", "Managed MADV_SEQUENTIAL regions.", NULL, "regions", \
	  COUNT, F_ALL, v->d->rg.n) \
	X(exit_drops_pending, "madvseq_exit_drops_pending", "gauge", \
	  "Regions of exited programs whose cached pages are still to be dropped.", NULL, \
	  "exit_drops_pending", COUNT, F_ALL, v->d->xd.n) \
	X(kernel_dropbehind, "madvseq_kernel_dropbehind", "gauge", \
	  "The kernel's own drop-behind switch: 1 on, 0 off, -1 absent.", NULL, NULL, STATE, F_ALL, \
	  v->d->ks.state < 0 ? -1 : v->d->ks.state) \
	X(kernel_regions, NULL, NULL, NULL, NULL, NULL, COUNT, F_ALL, v->d->cyc.kernel_regions) \
	X(fidelity, "madvseq_fidelity_info", "gauge", "The fidelity level in use (label level).", \
	  "level", NULL, INFO, F_ALL, msqd_fidelity(v->d)) \
	X(cycles, "madvseq_cycles_total", "counter", "Management cycles run.", NULL, "cycles", COUNT, \
	  F_ALL, v->d->cyc.n) \
	X(cycle_last, "madvseq_cycle_seconds", "gauge", "Duration of management cycles (last, max).", \
	  "stat=\"last\"", NULL, NS_MS, F_ALL, v->d->cyc.last_ns) \
	X(cycle_max, "madvseq_cycle_seconds", NULL, NULL, "stat=\"max\"", NULL, NS_MS, F_ALL, \
	  v->d->cyc.max_ns) \
	X(protocol_errors, "madvseq_protocol_errors_total", "counter", \
	  "Clients disconnected for breaking the protocol.", NULL, "protocol_errors", COUNT, F_ALL, \
	  v->d->cnt.proto_errors) \
	X(regions_refused, "madvseq_regions_refused_total", "counter", \
	  "Registrations that /proc/PID/maps did not confirm.", NULL, "regions_refused", COUNT, F_ALL, \
	  v->d->cnt.refused_regions) \
	X(connections_refused, NULL, NULL, NULL, NULL, NULL, COUNT, F_ALL, v->d->srv.refused) \
	X(clients_denied, NULL, NULL, NULL, NULL, NULL, COUNT, F_ALL, v->d->cl.denied) \
	X(discover_refused, NULL, NULL, NULL, NULL, NULL, COUNT, F_ALL, v->d->disc.refused) \
	X(exit_drops_skipped, NULL, NULL, NULL, NULL, NULL, COUNT, F_ALL, v->d->xd.skipped) \
	X(cgroups_known, NULL, NULL, NULL, NULL, NULL, COUNT, F_ALL, v->ncg) \
	X(cgroups_forgotten, NULL, NULL, NULL, NULL, NULL, COUNT, F_ALL, v->d->cgs.freed) \
	X(dropped, NULL, NULL, NULL, NULL, "dropped_bytes", BYTES, F_ALL, v->d->cnt.dropped) \
	X(asked, "madvseq_asked_bytes_total", "counter", \
	  "Bytes of the cycles' drops that madvseqd asked programs with the library to make " \
	  "themselves, on their reader's CPU (counted as dropped when asked).", NULL, "asked_bytes", \
	  BYTES, F_ALL, v->d->cnt.asked) \
	X(kept_strong, NULL, NULL, NULL, NULL, "kept_strong_bytes", BYTES, F_ALL, \
	  v->d->cnt.kept_strong) \
	X(read_files, NULL, NULL, NULL, NULL, "read_path.files", COUNT, F_ALL, v->d->cnt.read.files) \
	X(read_streamed, NULL, NULL, NULL, NULL, "read_path.streamed_bytes", BYTES, F_ALL, \
	  v->d->cnt.read.streamed) \
	X(read_dropped, NULL, NULL, NULL, NULL, "read_path.dropped_bytes", BYTES, F_ALL, \
	  v->d->cnt.read.dropped) \
	X(read_kept, NULL, NULL, NULL, NULL, "read_path.kept_bytes", BYTES, F_ALL, \
	  v->d->cnt.read.kept) \
	X(scans_periodic, "madvseq_discovery_scans_total", "counter", \
	  "Discovery scans of smaps (reason: the periodic full scan, or a cgroup's page-cache intake).", \
	  "reason=\"periodic\"", NULL, COUNT, F_ALL, v->d->disc.scans) \
	X(scans_intake, "madvseq_discovery_scans_total", NULL, NULL, "reason=\"intake\"", NULL, COUNT, \
	  F_ALL, v->d->disc.triggered) \
	X(reader_cpu_follows, "madvseq_reader_cpu_follows_total", "counter", \
	  "Times the daemon bound itself to the CPU of a reader it drops behind.", NULL, \
	  "reader_cpu_follows", COUNT, F_ALL, v->d->cyc.follows) \
	X(kpageflags_reads, "madvseq_kpageflags_reads_total", "counter", \
	  "Page frames whose /proc/kpageflags entry the strong-reference check read.", NULL, NULL, \
	  COUNT, F_ALL, v->d->refs.flag_reads) \
	X(cpu, "madvseq_daemon_cpu_seconds_total", "counter", "CPU time used by madvseqd (user+system).", \
	  NULL, "daemon_cpu_seconds", CPU_S, F_ALL, v->cpu) \
	X(advice_cpu, "madvseq_daemon_advice_cpu_seconds_total", "counter", \
	  "CPU time madvseqd spent inside process_madvise: the reclaim MADV_PAGEOUT does in its context.", \
	  NULL, NULL, NS_S, F_ALL, v->d->cyc.advice_cpu_ns) \
	X(rss, "madvseq_daemon_rss_bytes", "gauge", "Resident memory of madvseqd.", NULL, \
	  "daemon_rss_bytes", BYTES, F_ALL, v->rss) \
	MSQD_FDWATCH_COUNTERS(X)

/* Per cgroup: Prometheus labels each sample with the cgroup, for the
 * cgroups its filter lets through. */
#define CGROUP_COUNTERS(X) \
	X(cg_dropped_all, "madvseq_dropped_bytes_total", "counter", \
	  "Page cache bytes dropped behind readers, per cgroup: by madvseqd in mappings, plus " \
	  "what the shims' read paths report (madvseq_read_dropped_bytes_total).", NULL, NULL, BYTES, \
	  F_LISTED, g->dropped + g->read.dropped) \
	X(cg_read_streamed, "madvseq_read_streamed_bytes_total", "counter", \
	  "Bytes programs moved through read()/write() streams the shim manages, as the shims report, per cgroup.", \
	  NULL, NULL, BYTES, F_READ, g->read.streamed) \
	X(cg_read_dropped, "madvseq_read_dropped_bytes_total", "counter", \
	  "Bytes the shims' read paths advised away behind read()/write() streams, as they report, per cgroup.", \
	  NULL, NULL, BYTES, F_READ, g->read.dropped) \
	X(cg_read_kept, "madvseq_read_kept_bytes_total", "counter", \
	  "Bytes the shims' read paths left cached because they were cached before, as they report, per cgroup.", \
	  NULL, NULL, BYTES, F_READ, g->read.kept) \
	X(cg_kept_strong, "madvseq_kept_strong_bytes_total", "counter", \
	  "Bytes not dropped because kpageflags/kpagecount showed another user, per cgroup (counted at each check).", \
	  NULL, NULL, BYTES, F_MANAGED, g->kept_strong) \
	X(cg_kept_mapped, "madvseq_kept_mapped_bytes_total", "counter", \
	  "Bytes still mapped after MADV_PAGEOUT (mapped by another process, dirty or locked), per cgroup.", \
	  NULL, NULL, BYTES, F_MANAGED, g->kept_mapped) \
	X(cg_gate_open, "madvseq_cgroup_gate_open", "gauge", \
	  "1 when the cgroup's pressure gate lets madvseqd act.", NULL, NULL, STATE, F_CLIENTS, \
	  !g->pol->pressure_pct && g->pol->psi_some_avg10 <= 0 ? 1 : g->gate_open) \
	X(cg_clients, NULL, NULL, NULL, NULL, NULL, COUNT, F_ALL, g->clients) \
	X(cg_regions, NULL, NULL, NULL, NULL, NULL, COUNT, F_ALL, g->regions) \
	X(cg_dropped, NULL, NULL, NULL, NULL, NULL, BYTES, F_ALL, g->dropped) \
	X(cg_kernel, NULL, NULL, NULL, NULL, NULL, STATE, F_ALL, msqd_kernel_covers(v->d, g)) \
	X(cg_read_files, NULL, NULL, NULL, NULL, NULL, COUNT, F_ALL, g->read.files)

struct counter {
	const char *id, *prom, *type, *help, *label, *json;
	enum unit unit;
	enum filter filter;
	struct val (*get)(const struct view *v, struct msqd_cg *g);
};

#define GETTER(id, prom, type, help, label, json, unit, filter, expr) \
	static struct val get_##id(const struct view *v, struct msqd_cg *g) \
	{ \
		(void)v; \
		(void)g; \
		return V_##unit(expr); \
	}
GLOBAL_COUNTERS(GETTER)
CGROUP_COUNTERS(GETTER)
#undef GETTER

#define ROW(id, prom, type, help, label, json, unit, filter, expr) \
	{ #id, prom, type, help, label, json, U_##unit, filter, get_##id },
static const struct counter global_counters[] = { GLOBAL_COUNTERS(ROW) };
static const struct counter cgroup_counters[] = { CGROUP_COUNTERS(ROW) };
#undef ROW

#define NCOUNTERS(t) (sizeof(t) / sizeof((t)[0]))

static bool listed(enum filter f, const struct msqd_cg *g)
{
	switch (f) {
	case F_ALL: return true;
	case F_LISTED: return g->clients || g->dropped || g->read.streamed;
	case F_READ: return g->read.streamed;
	case F_MANAGED: return g->clients || g->dropped;
	case F_CLIENTS: return g->clients;
	}
	return false;
}

enum format { FMT_TEXT, FMT_JSON, FMT_PROM };

static void put_value(struct msqd_out *o, enum unit u, struct val x, enum format f)
{
	char iec[MSQ_IEC_LEN];

	switch (u) {
	case U_BYTES:
		if (f == FMT_TEXT) {
			msqd_put(o, "%s", msq_format_iec(x.u, iec));
			break;
		}
		/* fall through */
	case U_COUNT:
		msqd_put(o, "%llu", (unsigned long long)x.u);
		break;
	case U_STATE:
		msqd_put(o, "%lld", (long long)x.i);
		break;
	case U_NS_MS:
		if (f == FMT_TEXT)
			msqd_put(o, "%.3f", (double)x.u / 1e6);
		else
			msqd_put(o, "%.6f", (double)x.u / 1e9);
		break;
	case U_NS_S:
		msqd_put(o, f == FMT_TEXT ? "%.3f" : "%.6f", (double)x.u / 1e9);
		break;
	case U_CPU_S:
		msqd_put(o, "%.3f", x.f);
		break;
	case U_INFO:
		msqd_put(o, "%s", f == FMT_PROM ? "1" : x.s);
		break;
	}
}

static const struct counter *find_counter(const char *id, size_t n)
{
	for (size_t i = 0; i < NCOUNTERS(global_counters); i++)
		if (!strncmp(global_counters[i].id, id, n) && !global_counters[i].id[n])
			return &global_counters[i];
	for (size_t i = 0; i < NCOUNTERS(cgroup_counters); i++)
		if (!strncmp(cgroup_counters[i].id, id, n) && !cgroup_counters[i].id[n])
			return &cgroup_counters[i];
	return NULL;
}

/* tmpl with each ${id} replaced by that counter's value (of cgroup g, for
 * the per-cgroup ones) in format f.  An unknown id is a bug: -EINVAL. */
static void render(struct msqd_out *o, const char *tmpl, const struct view *v, struct msqd_cg *g,
		   enum format f)
{
	for (const char *p = tmpl; *p;) {
		const char *open = strstr(p, "${"), *close;
		const struct counter *c;

		if (!open) {
			msqd_put(o, "%s", p);
			return;
		}
		msqd_put(o, "%.*s", (int)(open - p), p);
		close = strchr(open, '}');
		c = close ? find_counter(open + 2, (size_t)(close - open - 2)) : NULL;
		if (!c) {
			o->err = -EINVAL;
			return;
		}
		put_value(o, c->unit, c->get(v, g), f);
		p = close + 1;
	}
}

static void view_init(struct view *v, struct msqd *d)
{
	v->d = d;
	v->ncg = 0;
	for (struct msqd_cg *g = d->cgs.list; g; g = g->next)
		v->ncg++;
	self_usage(&v->cpu, &v->rss);
}

/* The table's JSON keys, in its order, each ",key:value" ("a.b": in an
 * object "a"). */
static void json_counters(struct msqd_out *o, const struct view *v)
{
	const char *group = NULL; /* the open object's name */
	size_t glen = 0;
	bool first_in_group = false;

	for (size_t i = 0; i < NCOUNTERS(global_counters); i++) {
		const struct counter *c = &global_counters[i];
		const char *dot = c->json ? strchr(c->json, '.') : NULL;

		if (!c->json)
			continue;
		if (group && (!dot || (size_t)(dot - c->json) != glen || strncmp(c->json, group, glen))) {
			msqd_put(o, "}");
			group = NULL;
		}
		if (dot && !group) {
			group = c->json;
			glen = (size_t)(dot - c->json);
			msqd_put(o, ",\"%.*s\":{", (int)glen, group);
			first_in_group = true;
		}
		msqd_put(o, "%s\"%s\":", group && first_in_group ? "" : ",", dot ? dot + 1 : c->json);
		first_in_group = false;
		put_value(o, c->unit, c->get(v, NULL), FMT_JSON);
	}
	if (group)
		msqd_put(o, "}");
}

/* Every row with a Prometheus name: HELP and TYPE once per name, then
 * its samples (per cgroup: one for each cgroup the filter lets through). */
static void prom_counters(struct msqd_out *o, const struct view *v, const struct counter *t, size_t n,
			  bool per_cgroup)
{
	char e[1024];

	for (size_t i = 0; i < n; i++) {
		const struct counter *c = &t[i];

		if (!c->prom)
			continue;
		if (c->help)
			msqd_put(o, "# HELP %s %s\n# TYPE %s %s\n", c->prom, c->help, c->prom, c->type);
		if (!per_cgroup) {
			struct val x = c->get(v, NULL);

			msqd_put(o, "%s", c->prom);
			/* (An INFO row's label is the key its string goes in.) */
			if (c->label && c->unit == U_INFO)
				msqd_put(o, "{%s=\"%s\"}", c->label, x.s);
			else if (c->label)
				msqd_put(o, "{%s}", c->label);
			msqd_put(o, " ");
			put_value(o, c->unit, x, FMT_PROM);
			msqd_put(o, "\n");
			continue;
		}
		for (struct msqd_cg *g = v->d->cgs.list; g; g = g->next) {
			if (!listed(c->filter, g))
				continue;
			msqd_put(o, "%s{cgroup=\"%s\"} ", c->prom, msqd_prom_esc(g->path, e, sizeof(e)));
			put_value(o, c->unit, c->get(v, g), FMT_PROM);
			msqd_put(o, "\n");
		}
	}
}

int msqd_status_text(struct msqd *d, char **buf, size_t *len)
{
	struct msqd_out o = { 0 };
	char a[MSQ_IEC_LEN], b[MSQ_IEC_LEN], pol[256], comm[32];
	struct view v;

	msqd_kernel_recheck(d);
	view_init(&v, d);
	msqd_put(&o, "madvseqd %s, pid %d, up %llus\n", MSQD_VERSION, (int)getpid(),
	    (unsigned long long)((d->now_ns - d->started_ns) / 1000000000));
	msqd_put(&o, "fidelity: %s (%s)\n", msqd_fidelity(d),
	    d->refs.ok ? "pages mapped elsewhere, active or referenced through read() are kept"
		       : "no kpageflags: keeps pages cached before and pages still mapped after "
			 "pageout; cannot see read() users");
	msqd_put(&o, "kernel drop-behind: %s\n",
	    d->ks.state == 1 ? "on (" MSQ_KERNEL_DROPBEHIND_SYSCTL " = 1): MADV_SEQUENTIAL mappings of "
				   "page-cache files are left to the kernel, which is exact"
	    : d->ks.state == 0 ? "off (" MSQ_KERNEL_DROPBEHIND_SYSCTL " = 0)"
				   : "absent (a kernel without the libmadvseq patch series)");
	if (d->ks.state != 1) {
		unsigned on = 0;

		for (struct msqd_cg *g = d->cgs.list; g; g = g->next)
			on += msqd_kernel_covers(d, g);
		if (on)
			msqd_put(&o, "  on through %s in %u cgroup%s (see below)\n", MSQ_KERNEL_DROPBEHIND_CGFILE,
			    on, on == 1 ? "" : "s");
	}
	if (d->ks.state == 1 || d->cyc.kernel_regions)
		render(&o, "  regions left to the kernel: ${kernel_regions}\n", &v, NULL, FMT_TEXT);
	msqd_put(&o, "config: %s (%zu cgroup section%s)\n", d->set.conf.path ? d->set.conf.path : "(built-in)",
	    d->set.conf.n, d->set.conf.n == 1 ? "" : "s");
	render(&o, "clients: ${clients_total} (${clients_shim} shim, ${clients_discovered} discovered), "
		   "regions: ${regions}\n", &v, NULL, FMT_TEXT);
	if (d->rg.nsnapping)
		msqd_put(&o, "snapshots pending: %u region%s (not acted on until done)\n", d->rg.nsnapping,
		    d->rg.nsnapping == 1 ? "" : "s");
	if (d->xd.n)
		msqd_put(&o, "exit drops pending: %u region%s of exited programs\n", d->xd.n,
		    d->xd.n == 1 ? "" : "s");
	render(&o,
	       "cycles: ${cycles}, last ${cycle_last} ms, max ${cycle_max} ms; "
	       "protocol errors: ${protocol_errors}, regions refused: ${regions_refused}\n"
	       "refused: ${connections_refused} connections (limits, identity), ${clients_denied} "
	       "clients (exec or credentials since HELLO), ${discover_refused} discovered processes "
	       "(max_discovered); exit drops skipped: ${exit_drops_skipped} (no descriptor held: "
	       "files are never opened by path)\n"
	       "cgroups: ${cgroups_known} known, ${cgroups_forgotten} removed ones forgotten\n"
	       "discovery scans: ${scans_periodic} full, ${scans_intake} started by a cgroup's "
	       "page-cache intake\n"
	       "daemon: cpu ${cpu} s (${advice_cpu} s of it inside process_madvise: reclaim), "
	       "rss ${rss}; moved to a reader's CPU ${reader_cpu_follows} times\n"
	       "dropped: ${dropped} (${asked} of it by the shims, asked), kept (strong references): "
	       "${kept_strong}; page flags read: "
	       "${kpageflags_reads} frames\n"
	       "read() streams (the shims' own read paths, as they report): ${read_files} files, "
	       "${read_streamed} streamed, ${read_dropped} dropped behind, ${read_kept} kept "
	       "(cached before)\n",
	       &v, NULL, FMT_TEXT);
	if (msqd_conf_any_discover(&d->set.conf)) {
		render(&o, "fd streams (read()/write() of programs without the library, discover = yes): "
			   "${fd_followed} followed, ${fd_processes} processes watched; ${fd_found} found, "
			   "${fd_streamed} streamed, ${fd_dropped} dropped, ${fd_kept} kept (cached before), "
			   "${fd_unknown} passed before a snapshot, ${fd_writeback} given to writeback; "
			   "${fd_swapped} swapped under the daemon, ${fd_refused} refused, ${fd_library} left "
			   "to their library; look last ${fd_look_last} ms, max ${fd_look_max} ms, "
			   "${fd_cut_short} cut short\n"
			   "  closed by watched writers: ${fd_closed_files} files, ${fd_closed_dropped} "
			   "dropped, ${fd_closed_left} left; ${fd_closed_marks} filesystems marked, "
			   "${fd_closed_ignored} closes not theirs or of files older than their writer, "
			   "${fd_closed_overflows} overflows\n", &v, NULL, FMT_TEXT);
		msqd_put(&o, "  fidelity (fd streams): %s\n", MSQD_FDWATCH_FIDELITY);
		msqd_fdshow_text(&o, d);
	}
	for (struct msqd_cg *g = d->cgs.list; g; g = g->next) {
		if (!listed(F_LISTED, g))
			continue;
		msqd_policy_format(g->pol, pol, sizeof(pol));
		msqd_put(&o, "\ncgroup %s (v%d) [%s]\n  %s\n", g->path, (int)g->layout,
		    g->section ? g->section : "built-in", pol);
		render(&o, "  clients ${cg_clients}, regions ${cg_regions}, dropped ${cg_dropped}, "
			   "kept strong ${cg_kept_strong}, kept mapped ${cg_kept_mapped}, ", &v, g, FMT_TEXT);
		msqd_put(&o, "gate %s\n", gate_name(g));
		if (d->ks.state != 1 && msqd_kernel_covers(d, g))
			msqd_put(&o, "  kernel drop-behind: on for this cgroup (%s = 1 here or above): "
				"MADV_SEQUENTIAL mappings of page-cache files are left to the kernel\n",
			    MSQ_KERNEL_DROPBEHIND_CGFILE);
		/* What the decision was made on, so that it can be checked
		 * against memory.current, memory.max and memory.pressure. */
		if (gate_read(g))
			msqd_put(&o, "  gate read %.1f s ago: usage %s of limit %s, memory PSI some avg10 %.2f\n",
			    (double)(d->now_ns - g->gate_checked_ns) / 1e9, msq_format_iec(g->pr.usage, a),
			    g->pr.limit ? msq_format_iec(g->pr.limit, b) : "none", g->pr.some_avg10);
		if (g->read.streamed)
			render(&o, "  read() streams: ${cg_read_files} files, ${cg_read_streamed} streamed, "
				   "${cg_read_dropped} dropped behind, ${cg_read_kept} kept\n", &v, g, FMT_TEXT);
		for (struct msqd_client *c = d->cl.list; c; c = c->next) {
			uint64_t dr = 0, cy = 0, er = 0;
			int last = 0;

			if (c->cg != g || c->ctl)
				continue;
			for (size_t i = 0; i < c->nr; i++) {
				dr += c->r[i]->s.st.dropped;
				cy += c->r[i]->s.st.cycles;
				er += c->r[i]->s.st.errors;
				if (c->r[i]->s.st.last_error)
					last = c->r[i]->s.st.last_error;
			}
			/* One line per process (command, pid, cgroup), then one per file. */
			msqd_put(&o, "  pid %d %s (%s) in %s: %zu region%s, dropped %s, %llu cycles, %llu errors%s%s%s\n",
			    (int)c->pid, c->fd >= 0 ? "shim" : "discovered",
			    comm_of(d, c->pid, comm, sizeof(comm)), g->path, c->nr, c->nr == 1 ? "" : "s",
			    msq_format_iec(dr, a), (unsigned long long)cy,
			    (unsigned long long)er, last ? " (last: " : "", last ? strerror(-last) : "", last ? ")" : "");
			for (size_t i = 0; i < c->nr; i++)
				msqd_put(&o, "    %s: dropped %s\n",
				    c->r[i]->s.path ? c->r[i]->s.path : "(file without a path)",
				    msq_format_iec(c->r[i]->s.st.dropped, a));
		}
	}
	return msqd_out_finish(&o, buf, len);
}

/* The status as one JSON document.  "streams" holds one object a line,
 * numbers first, so that line-oriented readers (madvseq stat) need no
 * JSON parser; every reader may also parse the whole. */
static int status_json(struct msqd *d, char **buf, size_t *len)
{
	struct msqd_out o = { 0 };
	char comm[32];
	struct view v;
	bool first = true;

	msqd_kernel_recheck(d);
	view_init(&v, d);
	msqd_put(&o, "{\"version\":");
	msqd_json_str(&o, MSQD_VERSION);
	msqd_put(&o, ",\"pid\":%d,\"uptime_seconds\":%llu,\"fidelity\":", (int)getpid(),
	    (unsigned long long)((d->now_ns - d->started_ns) / 1000000000));
	msqd_json_str(&o, msqd_fidelity(d));
	msqd_put(&o, ",\"kernel_dropbehind\":%d,\"config\":", d->ks.state < 0 ? -1 : d->ks.state);
	if (d->set.conf.path)
		msqd_json_str(&o, d->set.conf.path);
	else
		msqd_put(&o, "null");
	json_counters(&o, &v);
	msqd_put(&o, ",\n\"cgroups\":[");
	for (struct msqd_cg *g = d->cgs.list; g; g = g->next) {
		if (!listed(F_LISTED, g))
			continue;
		msqd_put(&o, "%s\n{\"path\":", first ? "" : ",");
		msqd_json_str(&o, g->path);
		msqd_put(&o, ",\"section\":");
		if (g->section)
			msqd_json_str(&o, g->section);
		else
			msqd_put(&o, "null");
		render(&o, ",\"clients\":${cg_clients},\"regions\":${cg_regions},"
			   "\"dropped_bytes\":${cg_dropped},\"kept_strong_bytes\":${cg_kept_strong},"
			   "\"kept_mapped_bytes\":${cg_kept_mapped},", &v, g, FMT_JSON);
		msqd_put(&o, "\"gate\":\"%s\"", gate_name(g));
		render(&o, ",\"kernel_dropbehind\":${cg_kernel},\"read_path\":{\"files\":${cg_read_files},"
			   "\"streamed_bytes\":${cg_read_streamed},\"dropped_bytes\":${cg_read_dropped},"
			   "\"kept_bytes\":${cg_read_kept}}", &v, g, FMT_JSON);
		/* What the gate decided on, when it read the cgroup's pressure. */
		if (gate_read(g))
			msqd_put(&o, ",\"gate_read\":{\"age_ms\":%llu,\"usage_bytes\":%llu,\"limit_bytes\":%llu,"
				"\"psi_some_avg10\":%.2f}",
			    (unsigned long long)((d->now_ns - g->gate_checked_ns) / 1000000),
			    (unsigned long long)g->pr.usage, (unsigned long long)g->pr.limit,
			    g->pr.some_avg10);
		msqd_put(&o, "}");
		first = false;
	}
	msqd_put(&o, "],\n\"streams\":[");
	first = true;
	for (struct msqd_client *c = d->cl.list; c; c = c->next) {
		if (c->ctl)
			continue;
		comm_of(d, c->pid, comm, sizeof(comm));
		for (size_t i = 0; i < c->nr; i++) {
			const struct msq_stream *s = &c->r[i]->s;

			msqd_put(&o, "%s\n{\"pid\":%d,\"dev\":%llu,\"ino\":%llu,\"dropped_bytes\":%llu,"
				"\"cycles\":%llu,\"errors\":%llu,\"kind\":\"%s\",\"command\":",
			    first ? "" : ",", (int)c->pid, (unsigned long long)s->dev,
			    (unsigned long long)s->ino, (unsigned long long)s->st.dropped,
			    (unsigned long long)s->st.cycles, (unsigned long long)s->st.errors,
			    c->fd >= 0 ? "shim" : "discovered");
			msqd_json_str(&o, comm);
			msqd_put(&o, ",\"cgroup\":");
			msqd_json_str(&o, c->cg ? c->cg->path : NULL);
			msqd_put(&o, ",\"file\":");
			if (s->path)
				msqd_json_str(&o, s->path);
			else
				msqd_put(&o, "null");
			msqd_put(&o, "}");
			first = false;
		}
	}
	msqd_fdshow_json(&o, d, first);
	msqd_put(&o, "]}\n");
	return msqd_out_finish(&o, buf, len);
}

/* The per-pod families: the cgroups kubelet made for pods (kubepods.h),
 * labelled by what their paths say; cgroups below one container are
 * summed into its series.  (Not rows of the counter tables: a series
 * here is a sum over cgroups, not one cgroup's counter.) */
static bool pod_active(const struct msqd_cg *g, struct msqd_kubepod *kp)
{
	return (g->clients || g->dropped || g->streamed || g->read.streamed) &&
	       msqd_kubepods_parse(g->path, kp) == 0;
}

static void pod_families(struct msqd_out *o, struct msqd *d)
{
	static const struct {
		const char *name, *help;
	} fam[] = {
		{ "madvseq_pod_streamed_bytes_total",
		  "Bytes a pod's container streamed: how far its mapped readers moved on, plus what its shims' read paths report." },
		{ "madvseq_pod_dropped_bytes_total",
		  "Page cache bytes dropped behind a pod's container's readers (mappings and read paths)." },
		{ "madvseq_pod_kept_bytes_total",
		  "Bytes a pod's container streamed that stayed cached: used by others (strong references, still mapped) or cached before." },
	};

	for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
		msqd_put(o, "# HELP %s %s\n# TYPE %s counter\n", fam[f].name, fam[f].help, fam[f].name);
		for (struct msqd_cg *g = d->cgs.list; g; g = g->next) {
			struct msqd_kubepod kp, kq;
			uint64_t v = 0;
			bool first = true;

			if (!pod_active(g, &kp))
				continue;
			for (struct msqd_cg *h = d->cgs.list; h && first; h = h->next) {
				if (h == g)
					break;
				first = !(pod_active(h, &kq) && !strcmp(kq.pod_uid, kp.pod_uid) &&
					  !strcmp(kq.container_id, kp.container_id));
			}
			if (!first)
				continue; /* summed into an earlier cgroup's series */
			for (struct msqd_cg *h = g; h; h = h->next) {
				if (h != g && !(pod_active(h, &kq) && !strcmp(kq.pod_uid, kp.pod_uid) &&
						!strcmp(kq.container_id, kp.container_id)))
					continue;
				v += f == 0 ? h->streamed + h->read.streamed
				   : f == 1 ? h->dropped + h->read.dropped
					    : h->kept_strong + h->kept_mapped + h->read.kept;
			}
			msqd_put(o, "%s{pod_uid=\"%s\",qos=\"%s\",container_id=\"%s\"} %llu\n", fam[f].name,
			    kp.pod_uid, msqd_qos_name(kp.qos), kp.container_id, (unsigned long long)v);
		}
	}
}

int msqd_stats_text(struct msqd *d, uint32_t format, char **buf, size_t *len)
{
	struct msqd_out o = { 0 };
	struct view v;

	if (format == MSQ_STATS_JSON)
		return status_json(d, buf, len);
	if (format != MSQ_STATS_PROMETHEUS)
		return msqd_status_text(d, buf, len);
	msqd_kernel_recheck(d);
	view_init(&v, d);
	prom_counters(&o, &v, global_counters, NCOUNTERS(global_counters), false);
	prom_counters(&o, &v, cgroup_counters, NCOUNTERS(cgroup_counters), true);
	pod_families(&o, d);
	return msqd_out_finish(&o, buf, len);
}

void msqd_notify_status(struct msqd *d)
{
	static char last[256];
	static uint64_t last_ns;
	char buf[256], a[MSQ_IEC_LEN], b[MSQ_IEC_LEN];

	/* At most once a second, and only what changed (or once a minute,
	 * after a reload's own STATUS= line). */
	if (last_ns && d->now_ns - last_ns < 1000000000ull)
		return;
	snprintf(buf, sizeof(buf), "STATUS=%u clients (%u shim, %u discovered), %llu regions; "
				   "dropped %s, kept %s (strong references)",
		 d->cl.nshim + d->cl.ndiscovered, d->cl.nshim, d->cl.ndiscovered, (unsigned long long)d->rg.n,
		 msq_format_iec(d->cnt.dropped + d->cnt.read.dropped, a),
		 msq_format_iec(d->cnt.kept_strong, b));
	if (!strcmp(buf, last) && d->now_ns - last_ns < 60 * 1000000000ull)
		return;
	last_ns = d->now_ns;
	memcpy(last, buf, sizeof(last));
	sd_notify(0, buf);
}

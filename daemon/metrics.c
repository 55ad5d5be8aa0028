/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What `madvseqctl status` and `madvseqctl stats` print.  The Prometheus
 * form follows the node_exporter textfile-collector format (HELP/TYPE
 * lines, one sample per line, label values escaped).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/iec.h"
#include "../common/kernel_switch.h"
#include "daemon.h"
#include "cycle.h"
#include "fdwatch.h"
#include "metrics.h"
#include "kubepods.h"
#include "refs.h"

struct out {
	char *buf;
	size_t len, cap;
	int err;
};

__attribute__((format(printf, 2, 3))) static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->err)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(o->buf ? o->buf + o->len : NULL, o->buf ? o->cap - o->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			o->err = -EINVAL;
			return;
		}
		if (o->buf && o->len + (size_t)n < o->cap) {
			o->len += (size_t)n;
			return;
		}
		size_t cap = o->cap ? o->cap * 2 : 16384;
		while (cap < o->len + (size_t)n + 1)
			cap *= 2;
		char *b = realloc(o->buf, cap);
		if (!b) {
			o->err = -ENOMEM;
			return;
		}
		o->buf = b;
		o->cap = cap;
	}
}

static int finish(struct out *o, char **buf, size_t *len)
{
	if (o->err) {
		free(o->buf);
		return o->err;
	}
	*buf = o->buf;
	*len = o->len;
	return 0;
}

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

	snprintf(path, sizeof(path), "%s/%d/comm", d->proc_root, (int)pid);
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

int msqd_status_text(struct msqd *d, char **buf, size_t *len)
{
	struct out o = { 0 };
	char a[MSQ_IEC_LEN], b[MSQ_IEC_LEN], e[MSQ_IEC_LEN], pol[256], comm[32];
	double cpu;
	uint64_t rss;

	msqd_kernel_recheck(d);
	self_usage(&cpu, &rss);
	put(&o, "madvseqd %s, pid %d, up %llus\n", MSQD_VERSION, (int)getpid(),
	    (unsigned long long)((d->now_ns - d->started_ns) / 1000000000));
	put(&o, "fidelity: %s (%s)\n", msqd_fidelity(d),
	    d->refs_ok ? "pages mapped elsewhere, active or referenced through read() are kept"
		       : "no kpageflags: keeps pages cached before and pages still mapped after "
			 "pageout; cannot see read() users");
	put(&o, "kernel drop-behind: %s\n",
	    d->kernel_state == 1 ? "on (" MSQ_KERNEL_DROPBEHIND_SYSCTL " = 1): MADV_SEQUENTIAL mappings of "
				   "page-cache files are left to the kernel, which is exact"
	    : d->kernel_state == 0 ? "off (" MSQ_KERNEL_DROPBEHIND_SYSCTL " = 0)"
				   : "absent (a kernel without the libmadvseq patch series)");
	if (d->kernel_state != 1) {
		unsigned on = 0;

		for (struct msqd_cg *g = d->cgs; g; g = g->next)
			on += msqd_kernel_covers(d, g);
		if (on)
			put(&o, "  on through %s in %u cgroup%s (see below)\n", MSQ_KERNEL_DROPBEHIND_CGFILE,
			    on, on == 1 ? "" : "s");
	}
	if (d->kernel_state == 1 || d->kernel_regions)
		put(&o, "  regions left to the kernel: %llu\n", (unsigned long long)d->kernel_regions);
	put(&o, "config: %s (%zu cgroup section%s)\n", d->conf.path ? d->conf.path : "(built-in)",
	    d->conf.n, d->conf.n == 1 ? "" : "s");
	put(&o, "clients: %u (%u shim, %u discovered), regions: %llu\n", d->nshim + d->ndiscovered,
	    d->nshim, d->ndiscovered, (unsigned long long)d->nregions);
	if (d->nsnapping)
		put(&o, "snapshots pending: %u region%s (not acted on until done)\n", d->nsnapping,
		    d->nsnapping == 1 ? "" : "s");
	if (d->nleftovers)
		put(&o, "exit drops pending: %u region%s of exited programs\n", d->nleftovers,
		    d->nleftovers == 1 ? "" : "s");
	put(&o, "cycles: %llu, last %.3f ms, max %.3f ms; protocol errors: %llu, regions refused: %llu\n",
	    (unsigned long long)d->cycles, (double)d->last_cycle_ns / 1e6, (double)d->max_cycle_ns / 1e6,
	    (unsigned long long)d->proto_errors, (unsigned long long)d->refused_regions);
	put(&o, "refused: %llu connections (limits, identity), %llu clients (exec or credentials "
		"since HELLO), %llu discovered processes (max_discovered); exit drops skipped: %llu "
		"(no descriptor held: files are never opened by path)\n",
	    (unsigned long long)d->refused_clients, (unsigned long long)d->denied_clients,
	    (unsigned long long)d->discover_refused, (unsigned long long)d->exit_drops_skipped);
	{
		unsigned ncg = 0;

		for (struct msqd_cg *g = d->cgs; g; g = g->next)
			ncg++;
		put(&o, "cgroups: %u known, %llu removed ones forgotten\n", ncg,
		    (unsigned long long)d->cgs_freed);
	}
	put(&o, "discovery scans: %llu full, %llu started by a cgroup's page-cache intake\n",
	    (unsigned long long)d->discover_scans, (unsigned long long)d->discover_triggered);
	put(&o, "daemon: cpu %.3f s (%.3f s of it inside process_madvise: reclaim), rss %s\n", cpu,
	    (double)d->advice_cpu_ns / 1e9, msq_format_iec(rss, a));
	put(&o, "dropped: %s, kept (strong references): %s; page flags read: %llu frames\n",
	    msq_format_iec(d->dropped_total, a), msq_format_iec(d->kept_strong_total, b),
	    (unsigned long long)d->kpageflags_reads);
	put(&o, "read() streams (the shims' own read paths, as they report): %llu files, %s streamed, "
		"%s dropped behind, %s kept (cached before)\n",
	    (unsigned long long)d->read_total.files, msq_format_iec(d->read_total.streamed, a),
	    msq_format_iec(d->read_total.dropped, b), msq_format_iec(d->read_total.kept, e));
	if (msqd_conf_any_discover(&d->conf)) {
		char *fd = msqd_fdwatch_status_text(d->fdwatch, d);

		if (!fd)
			o.err = -ENOMEM;
		else
			put(&o, "%s", fd);
		free(fd);
	}
	for (struct msqd_cg *g = d->cgs; g; g = g->next) {
		if (!g->clients && !g->dropped && !g->read.streamed)
			continue;
		msqd_policy_format(g->pol, pol, sizeof(pol));
		put(&o, "\ncgroup %s (v%d) [%s]\n  %s\n  clients %u, regions %u, dropped %s, kept strong %s, "
			"kept mapped %s, gate %s\n",
		    g->path, (int)g->layout, g->section ? g->section : "built-in", pol, g->clients,
		    g->regions, msq_format_iec(g->dropped, a), msq_format_iec(g->kept_strong, b),
		    msq_format_iec(g->kept_mapped, e), gate_name(g));
		if (d->kernel_state != 1 && msqd_kernel_covers(d, g))
			put(&o, "  kernel drop-behind: on for this cgroup (%s = 1 here or above): "
				"MADV_SEQUENTIAL mappings of page-cache files are left to the kernel\n",
			    MSQ_KERNEL_DROPBEHIND_CGFILE);
		/* What the decision was made on, so that it can be checked
		 * against memory.current, memory.max and memory.pressure. */
		if (gate_read(g))
			put(&o, "  gate read %.1f s ago: usage %s of limit %s, memory PSI some avg10 %.2f\n",
			    (double)(d->now_ns - g->gate_checked_ns) / 1e9, msq_format_iec(g->pr.usage, a),
			    g->pr.limit ? msq_format_iec(g->pr.limit, b) : "none", g->pr.some_avg10);
		if (g->read.streamed)
			put(&o, "  read() streams: %llu files, %s streamed, %s dropped behind, %s kept\n",
			    (unsigned long long)g->read.files, msq_format_iec(g->read.streamed, a),
			    msq_format_iec(g->read.dropped, b), msq_format_iec(g->read.kept, e));
		for (struct msqd_client *c = d->clients; c; c = c->next) {
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
			put(&o, "  pid %d %s (%s) in %s: %zu region%s, dropped %s, %llu cycles, %llu errors%s%s%s\n",
			    (int)c->pid, c->fd >= 0 ? "shim" : "discovered",
			    comm_of(d, c->pid, comm, sizeof(comm)), g->path, c->nr, c->nr == 1 ? "" : "s",
			    msq_format_iec(dr, a), (unsigned long long)cy,
			    (unsigned long long)er, last ? " (last: " : "", last ? strerror(-last) : "", last ? ")" : "");
			for (size_t i = 0; i < c->nr; i++)
				put(&o, "    %s: dropped %s\n",
				    c->r[i]->s.path ? c->r[i]->s.path : "(file without a path)",
				    msq_format_iec(c->r[i]->s.st.dropped, a));
		}
	}
	return finish(&o, buf, len);
}

/* A JSON string: quotes, backslashes and control characters escaped, valid
 * UTF-8 kept, any other byte (file names are bytes) as U+FFFD. */
static void json_str(struct out *o, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	put(o, "\"");
	while (*p) {
		unsigned n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2
			   : (*p & 0xf8) == 0xf0 ? 3 : 4;
		unsigned k = 1;

		if (n == 0) {
			if (*p == '"' || *p == '\\')
				put(o, "\\%c", *p);
			else if (*p < 0x20 || *p == 0x7f)
				put(o, "\\u%04x", *p);
			else
				put(o, "%c", *p);
			p++;
			continue;
		}
		while (n < 4 && k <= n && (p[k] & 0xc0) == 0x80)
			k++;
		if (n < 4 && k == n + 1 && !(n == 1 && *p < 0xc2)) {
			put(o, "%.*s", (int)k, (const char *)p);
			p += k;
		} else {
			put(o, "\\ufffd");
			p++;
		}
	}
	put(o, "\"");
}

/* The status as one JSON document.  "streams" holds one object a line,
 * numbers first, so that line-oriented readers (madvseq stat) need no
 * JSON parser; every reader may also parse the whole. */
static int status_json(struct msqd *d, char **buf, size_t *len)
{
	struct out o = { 0 };
	char comm[32];
	double cpu;
	uint64_t rss;
	bool first = true;

	msqd_kernel_recheck(d);
	self_usage(&cpu, &rss);
	put(&o, "{\"version\":");
	json_str(&o, MSQD_VERSION);
	put(&o, ",\"pid\":%d,\"uptime_seconds\":%llu,\"fidelity\":", (int)getpid(),
	    (unsigned long long)((d->now_ns - d->started_ns) / 1000000000));
	json_str(&o, msqd_fidelity(d));
	put(&o, ",\"kernel_dropbehind\":%d,\"config\":", d->kernel_state < 0 ? -1 : d->kernel_state);
	if (d->conf.path)
		json_str(&o, d->conf.path);
	else
		put(&o, "null");
	put(&o, ",\"clients\":{\"shim\":%u,\"discovered\":%u},\"regions\":%llu,"
		"\"exit_drops_pending\":%u,\"cycles\":%llu,\"protocol_errors\":%llu,"
		"\"regions_refused\":%llu,\"dropped_bytes\":%llu,\"kept_strong_bytes\":%llu,"
		"\"read_path\":{\"files\":%llu,\"streamed_bytes\":%llu,\"dropped_bytes\":%llu,"
		"\"kept_bytes\":%llu},"
		"\"daemon_cpu_seconds\":%.3f,\"daemon_rss_bytes\":%llu,\"fd_streams\":",
	    d->nshim, d->ndiscovered, (unsigned long long)d->nregions, d->nleftovers,
	    (unsigned long long)d->cycles, (unsigned long long)d->proto_errors,
	    (unsigned long long)d->refused_regions, (unsigned long long)d->dropped_total,
	    (unsigned long long)d->kept_strong_total, (unsigned long long)d->read_total.files,
	    (unsigned long long)d->read_total.streamed, (unsigned long long)d->read_total.dropped,
	    (unsigned long long)d->read_total.kept, cpu, (unsigned long long)rss);
	{
		char *fd = msqd_fdwatch_json_summary(d->fdwatch);

		if (!fd)
			o.err = -ENOMEM;
		else
			put(&o, "%s,\n\"cgroups\":[", fd);
		free(fd);
	}
	for (struct msqd_cg *g = d->cgs; g; g = g->next) {
		if (!g->clients && !g->dropped && !g->read.streamed)
			continue;
		put(&o, "%s\n{\"path\":", first ? "" : ",");
		json_str(&o, g->path);
		put(&o, ",\"section\":");
		if (g->section)
			json_str(&o, g->section);
		else
			put(&o, "null");
		put(&o, ",\"clients\":%u,\"regions\":%u,\"dropped_bytes\":%llu,\"kept_strong_bytes\":%llu,"
			"\"kept_mapped_bytes\":%llu,\"gate\":\"%s\",\"kernel_dropbehind\":%d,"
			"\"read_path\":{\"files\":%llu,"
			"\"streamed_bytes\":%llu,\"dropped_bytes\":%llu,\"kept_bytes\":%llu}",
		    g->clients, g->regions, (unsigned long long)g->dropped,
		    (unsigned long long)g->kept_strong, (unsigned long long)g->kept_mapped, gate_name(g),
		    msqd_kernel_covers(d, g), (unsigned long long)g->read.files, (unsigned long long)g->read.streamed,
		    (unsigned long long)g->read.dropped, (unsigned long long)g->read.kept);
		/* What the gate decided on, when it read the cgroup's pressure. */
		if (gate_read(g))
			put(&o, ",\"gate_read\":{\"age_ms\":%llu,\"usage_bytes\":%llu,\"limit_bytes\":%llu,"
				"\"psi_some_avg10\":%.2f}",
			    (unsigned long long)((d->now_ns - g->gate_checked_ns) / 1000000),
			    (unsigned long long)g->pr.usage, (unsigned long long)g->pr.limit,
			    g->pr.some_avg10);
		put(&o, "}");
		first = false;
	}
	put(&o, "],\n\"streams\":[");
	first = true;
	for (struct msqd_client *c = d->clients; c; c = c->next) {
		if (c->ctl)
			continue;
		comm_of(d, c->pid, comm, sizeof(comm));
		for (size_t i = 0; i < c->nr; i++) {
			const struct msq_stream *s = &c->r[i]->s;

			put(&o, "%s\n{\"pid\":%d,\"dev\":%llu,\"ino\":%llu,\"dropped_bytes\":%llu,"
				"\"cycles\":%llu,\"errors\":%llu,\"kind\":\"%s\",\"command\":",
			    first ? "" : ",", (int)c->pid, (unsigned long long)s->dev,
			    (unsigned long long)s->ino, (unsigned long long)s->st.dropped,
			    (unsigned long long)s->st.cycles, (unsigned long long)s->st.errors,
			    c->fd >= 0 ? "shim" : "discovered");
			json_str(&o, comm);
			put(&o, ",\"cgroup\":");
			json_str(&o, c->cg ? c->cg->path : NULL);
			put(&o, ",\"file\":");
			if (s->path)
				json_str(&o, s->path);
			else
				put(&o, "null");
			put(&o, "}");
			first = false;
		}
	}
	{
		char *fd = msqd_fdwatch_json_streams(d->fdwatch, d, first);

		if (!fd)
			o.err = -ENOMEM;
		else
			put(&o, "%s", fd);
		free(fd);
	}
	put(&o, "]}\n");
	return finish(&o, buf, len);
}

/* Label values: backslash, double quote and newline escaped. */
static const char *esc(const char *s, char *buf, size_t len)
{
	size_t n = 0;

	for (; *s && n + 3 < len; s++) {
		if (*s == '\\' || *s == '"') {
			buf[n++] = '\\';
			buf[n++] = *s;
		} else if (*s == '\n') {
			buf[n++] = '\\';
			buf[n++] = 'n';
		} else {
			buf[n++] = *s;
		}
	}
	buf[n] = '\0';
	return buf;
}

static void prom_head(struct out *o, const char *name, const char *type, const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The per-pod families: the cgroups kubelet made for pods (kubepods.h),
 * labelled by what their paths say; cgroups below one container are
 * summed into its series. */
static bool pod_active(const struct msqd_cg *g, struct msqd_kubepod *kp)
{
	return (g->clients || g->dropped || g->streamed || g->read.streamed) &&
	       msqd_kubepods_parse(g->path, kp) == 0;
}

static void pod_families(struct out *o, struct msqd *d)
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
		prom_head(o, fam[f].name, "counter", fam[f].help);
		for (struct msqd_cg *g = d->cgs; g; g = g->next) {
			struct msqd_kubepod kp, kq;
			uint64_t v = 0;
			bool first = true;

			if (!pod_active(g, &kp))
				continue;
			for (struct msqd_cg *h = d->cgs; h && first; h = h->next) {
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
			put(o, "%s{pod_uid=\"%s\",qos=\"%s\",container_id=\"%s\"} %llu\n", fam[f].name,
			    kp.pod_uid, msqd_qos_name(kp.qos), kp.container_id, (unsigned long long)v);
		}
	}
}

int msqd_stats_text(struct msqd *d, uint32_t format, char **buf, size_t *len)
{
	struct out o = { 0 };
	char e[1024];
	double cpu;
	uint64_t rss;

	if (format == MSQ_STATS_JSON)
		return status_json(d, buf, len);
	if (format != MSQ_STATS_PROMETHEUS)
		return msqd_status_text(d, buf, len);
	msqd_kernel_recheck(d);
	self_usage(&cpu, &rss);
	prom_head(&o, "madvseq_clients", "gauge", "Processes whose memory madvseqd manages.");
	put(&o, "madvseq_clients{kind=\"shim\"} %u\nmadvseq_clients{kind=\"discovered\"} %u\n",
	    d->nshim, d->ndiscovered);
	prom_head(&o, "madvseq_regions", "gauge", "Managed MADV_SEQUENTIAL regions.");
	put(&o, "madvseq_regions %llu\n", (unsigned long long)d->nregions);
	prom_head(&o, "madvseq_exit_drops_pending", "gauge",
		  "Regions of exited programs whose cached pages are still to be dropped.");
	put(&o, "madvseq_exit_drops_pending %u\n", d->nleftovers);
	prom_head(&o, "madvseq_kernel_dropbehind", "gauge",
		  "The kernel's own drop-behind switch: 1 on, 0 off, -1 absent.");
	put(&o, "madvseq_kernel_dropbehind %d\n", d->kernel_state < 0 ? -1 : d->kernel_state);
	prom_head(&o, "madvseq_fidelity_info", "gauge", "The fidelity level in use (label level).");
	put(&o, "madvseq_fidelity_info{level=\"%s\"} 1\n", msqd_fidelity(d));
	prom_head(&o, "madvseq_cycles_total", "counter", "Management cycles run.");
	put(&o, "madvseq_cycles_total %llu\n", (unsigned long long)d->cycles);
	prom_head(&o, "madvseq_cycle_seconds", "gauge", "Duration of management cycles (last, max).");
	put(&o, "madvseq_cycle_seconds{stat=\"last\"} %.6f\nmadvseq_cycle_seconds{stat=\"max\"} %.6f\n",
	    (double)d->last_cycle_ns / 1e9, (double)d->max_cycle_ns / 1e9);
	prom_head(&o, "madvseq_protocol_errors_total", "counter", "Clients disconnected for breaking the protocol.");
	put(&o, "madvseq_protocol_errors_total %llu\n", (unsigned long long)d->proto_errors);
	prom_head(&o, "madvseq_regions_refused_total", "counter", "Registrations that /proc/PID/maps did not confirm.");
	put(&o, "madvseq_regions_refused_total %llu\n", (unsigned long long)d->refused_regions);
	prom_head(&o, "madvseq_discovery_scans_total", "counter",
		  "Discovery scans of smaps (reason: the periodic full scan, or a cgroup's page-cache intake).");
	put(&o, "madvseq_discovery_scans_total{reason=\"periodic\"} %llu\n"
		"madvseq_discovery_scans_total{reason=\"intake\"} %llu\n",
	    (unsigned long long)d->discover_scans, (unsigned long long)d->discover_triggered);
	prom_head(&o, "madvseq_kpageflags_reads_total", "counter",
		  "Page frames whose /proc/kpageflags entry the strong-reference check read.");
	put(&o, "madvseq_kpageflags_reads_total %llu\n", (unsigned long long)d->kpageflags_reads);
	prom_head(&o, "madvseq_daemon_cpu_seconds_total", "counter", "CPU time used by madvseqd (user+system).");
	put(&o, "madvseq_daemon_cpu_seconds_total %.3f\n", cpu);
	prom_head(&o, "madvseq_daemon_advice_cpu_seconds_total", "counter",
		  "CPU time madvseqd spent inside process_madvise: the reclaim MADV_PAGEOUT does in its context.");
	put(&o, "madvseq_daemon_advice_cpu_seconds_total %.6f\n", (double)d->advice_cpu_ns / 1e9);
	prom_head(&o, "madvseq_daemon_rss_bytes", "gauge", "Resident memory of madvseqd.");
	put(&o, "madvseq_daemon_rss_bytes %llu\n", (unsigned long long)rss);
	prom_head(&o, "madvseq_dropped_bytes_total", "counter",
		  "Page cache bytes dropped behind readers, per cgroup: by madvseqd in mappings, plus "
		  "what the shims' read paths report (madvseq_read_dropped_bytes_total).");
	for (struct msqd_cg *g = d->cgs; g; g = g->next)
		if (g->clients || g->dropped || g->read.streamed)
			put(&o, "madvseq_dropped_bytes_total{cgroup=\"%s\"} %llu\n", esc(g->path, e, sizeof(e)),
			    (unsigned long long)(g->dropped + g->read.dropped));
	prom_head(&o, "madvseq_read_streamed_bytes_total", "counter",
		  "Bytes programs moved through read()/write() streams the shim manages, as the shims report, per cgroup.");
	for (struct msqd_cg *g = d->cgs; g; g = g->next)
		if (g->read.streamed)
			put(&o, "madvseq_read_streamed_bytes_total{cgroup=\"%s\"} %llu\n",
			    esc(g->path, e, sizeof(e)), (unsigned long long)g->read.streamed);
	prom_head(&o, "madvseq_read_dropped_bytes_total", "counter",
		  "Bytes the shims' read paths advised away behind read()/write() streams, as they report, per cgroup.");
	for (struct msqd_cg *g = d->cgs; g; g = g->next)
		if (g->read.streamed)
			put(&o, "madvseq_read_dropped_bytes_total{cgroup=\"%s\"} %llu\n",
			    esc(g->path, e, sizeof(e)), (unsigned long long)g->read.dropped);
	prom_head(&o, "madvseq_read_kept_bytes_total", "counter",
		  "Bytes the shims' read paths left cached because they were cached before, as they report, per cgroup.");
	for (struct msqd_cg *g = d->cgs; g; g = g->next)
		if (g->read.streamed)
			put(&o, "madvseq_read_kept_bytes_total{cgroup=\"%s\"} %llu\n",
			    esc(g->path, e, sizeof(e)), (unsigned long long)g->read.kept);
	prom_head(&o, "madvseq_kept_strong_bytes_total", "counter",
		  "Bytes not dropped because kpageflags/kpagecount showed another user, per cgroup (counted at each check).");
	for (struct msqd_cg *g = d->cgs; g; g = g->next)
		if (g->clients || g->dropped)
			put(&o, "madvseq_kept_strong_bytes_total{cgroup=\"%s\"} %llu\n", esc(g->path, e, sizeof(e)),
			    (unsigned long long)g->kept_strong);
	prom_head(&o, "madvseq_kept_mapped_bytes_total", "counter",
		  "Bytes still mapped after MADV_PAGEOUT (mapped by another process, dirty or locked), per cgroup.");
	for (struct msqd_cg *g = d->cgs; g; g = g->next)
		if (g->clients || g->dropped)
			put(&o, "madvseq_kept_mapped_bytes_total{cgroup=\"%s\"} %llu\n", esc(g->path, e, sizeof(e)),
			    (unsigned long long)g->kept_mapped);
	prom_head(&o, "madvseq_cgroup_gate_open", "gauge", "1 when the cgroup's pressure gate lets madvseqd act.");
	for (struct msqd_cg *g = d->cgs; g; g = g->next)
		if (g->clients)
			put(&o, "madvseq_cgroup_gate_open{cgroup=\"%s\"} %d\n", esc(g->path, e, sizeof(e)),
			    !g->pol->pressure_pct && g->pol->psi_some_avg10 <= 0 ? 1 : g->gate_open);
	{
		char *fd = msqd_fdwatch_prometheus(d->fdwatch);

		if (!fd)
			o.err = -ENOMEM;
		else
			put(&o, "%s", fd);
		free(fd);
	}
	pod_families(&o, d);
	return finish(&o, buf, len);
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
		 d->nshim + d->ndiscovered, d->nshim, d->ndiscovered, (unsigned long long)d->nregions,
		 msq_format_iec(d->dropped_total + d->read_total.dropped, a),
		 msq_format_iec(d->kept_strong_total, b));
	if (!strcmp(buf, last) && d->now_ns - last_ns < 60 * 1000000000ull)
		return;
	last_ns = d->now_ns;
	memcpy(last, buf, sizeof(last));
	sd_notify(0, buf);
}

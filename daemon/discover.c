/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Discovery: programs the shim cannot reach (static, setuid, started
 * before the daemon) still say MADV_SEQUENTIAL to the kernel, which shows
 * it as "sr" in the VmFlags of /proc/PID/smaps.  For processes in cgroups
 * with discover = yes, such file-backed VMAs are managed like registered
 * regions; VMAs that went away are forgotten.  Processes whose shim is
 * connected are left to their registrations.
 *
 * When to look: a stream read from a warm disk moves a gigabyte a second
 * and fills a cgroup long before a periodic scan comes round.  So besides
 * the full scan every discover_interval (which also finds new cgroups),
 * a cheap watch reads each known discover cgroup's intake counter (pages
 * charged to it) every discover_watch, and once discover_trigger bytes
 * came in since the cgroup's last scan, scans that cgroup's processes at
 * once.  A busy cgroup whose intake has another cause (a read() stream,
 * a managed stream) is not rescanned every time: the gap between such
 * scans doubles while they find nothing new, up to discover_interval, and
 * goes back to SCAN_GAP_MIN_NS once the intake quiets down.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/fault.h"
#include "../common/maps.h"
#include "../common/sys.h"
#include "client.h"
#include "msqd.h"
#include "discover.h"
#include "exitdrop.h"
#include "log.h"
#include "regions.h"
#include "util.h"

#define MAX_SR 256
#define MAX_QUIET 65536 /* processes remembered as quiet (24 bytes each) */
#define SMAPS_MAX (UINT64_C(64) << 20)
#define SCAN_GAP_MIN_NS (UINT64_C(100) * 1000 * 1000)
/* A scan reads smaps for at most this long per turn of the event loop
 * (hundreds of processes take a second): the rest next turn. */
#define SCAN_SLICE_NS (UINT64_C(10) * 1000 * 1000)
/* The watch slows down after this many looks saw no counter move... */
#define QUIET_WATCHES 5
/* ...to this many times discover_watch: a look is cheap, and a longer
 * pause lets a fast stream fill much of its cgroup before the scan
 * starts (tests/bench/RESULTS.md). */
#define QUIET_FACTOR 2

struct sr_vma {
	uint64_t start, end, off, dev, ino;
	bool shared, writable;
	char *path;
};

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return x < y ? -1 : x > y;
}

/* Reads the whole file; *buf is malloc'd and NUL-terminated. */
static int slurp(const char *path, char **buf, size_t *len)
{
	_cleanup_close_ int fd = -1;
	size_t cap = 1 << 16, n = 0;
	char *b = NULL, *nb;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t got;

		if (!b || n + 4096 > cap) {
			if (b)
				cap *= 2;
			if (cap > SMAPS_MAX || !(nb = realloc(b, cap))) {
				free(b);
				return -ENOMEM;
			}
			b = nb;
		}
		got = read(fd, b + n, cap - n - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int e = -errno;

			free(b);
			return e;
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}

static bool has_flag(const char *flags, const char *f)
{
	size_t fl = strlen(f);

	for (const char *p = flags; (p = strstr(p, f)); p += fl)
		if ((p == flags || p[-1] == ' ') && (p[fl] == ' ' || p[fl] == '\n' || !p[fl]))
			return true;
	return false;
}

/* The file-backed VMAs advised MADV_SEQUENTIAL in an smaps text.
 * *complete: whether out holds all of them (not cut at max, no memory
 * shortage on the way). */
static size_t parse_smaps(char *text, struct sr_vma *out, size_t max, bool *complete)
{
	struct msq_vma *v = malloc(sizeof(*v));
	bool have = false;
	size_t n = 0;

	*complete = v != NULL;
	if (!v)
		return 0;
	for (char *l = text, *nl; *l && n < max; l = nl ? nl + 1 : l + strlen(l)) {
		nl = strchr(l, '\n');
		if (nl)
			*nl = '\0';
		if (!strncmp(l, "VmFlags:", 8)) {
			bool sr = have && v->ino && v->path[0] == '/' && v->read && has_flag(l + 8, "sr");

			if (sr && !(out[n].path = strdup(v->path))) {
				*complete = false;
			} else if (sr) {
				out[n].start = v->start;
				out[n].end = v->end;
				out[n].off = v->off;
				out[n].dev = (uint64_t)v->dev;
				out[n].ino = v->ino;
				out[n].shared = v->shared;
				out[n].writable = v->write;
				n++;
			}
			have = false;
		} else if (((l[0] >= '0' && l[0] <= '9') || (l[0] >= 'a' && l[0] <= 'f')) &&
			   msq_maps_parse_line(l, v) == 0) {
			/* VMA lines start with a lowercase hex address; keys
			 * ("Anonymous:") start uppercase, and a failed parse
			 * would clear v. */
			have = true;
		}
		if (!nl)
			break;
	}
	free(v);
	if (n == max)
		*complete = false;
	return n;
}

static struct msqd_client *find_discovered(struct msqd *d, pid_t pid)
{
	for (struct msqd_client *c = d->cl.list; c; c = c->next)
		if (c->fd < 0 && c->pid == pid)
			return c;
	return NULL;
}

/* Returns how many regions it newly manages.  complete: v holds every
 * MADV_SEQUENTIAL mapping smaps showed (parse_smaps). */
static unsigned reconcile(struct msqd *d, struct msqd_client *c, struct sr_vma *v, size_t n,
			  bool complete)
{
	unsigned added = 0;

	for (size_t i = 0; i < c->nr; i++)
		c->r[i]->seen = false;
	for (size_t j = 0; j < n; j++) {
		bool found = false;

		for (size_t i = 0; i < c->nr && !found; i++) {
			struct msq_stream *s = &c->r[i]->s;

			if (s->start == v[j].start && s->end == v[j].end && s->file_off == v[j].off &&
			    (uint64_t)s->dev == v[j].dev && (uint64_t)s->ino == v[j].ino)
				found = c->r[i]->seen = true;
		}
		if (found)
			continue;
		if (msqd_region_add(d, c, 0, v[j].start, v[j].end - v[j].start, v[j].dev, v[j].ino,
				    v[j].off, true, v[j].path, v[j].shared, v[j].writable, NULL, 0) == 0) {
			c->r[c->nr - 1]->seen = true;
			added++;
			log_debug("pid %d: discovered %#llx-%#llx %s", (int)c->pid,
				  (unsigned long long)v[j].start, (unsigned long long)v[j].end, v[j].path);
		}
	}
	/* A mapping gone from smaps was unmapped, or the process is exiting
	 * (its address space is torn down before its pidfd turns readable):
	 * either way nothing of it is the reader's any more, and what it left
	 * cached goes as an exited client's would.  Removed without that,
	 * the lag stayed cached whenever a scan came between the munmap and
	 * the exit.  From an incomplete list (cut at MAX_SR, short of
	 * memory), one not seen may still be mapped: it is only forgotten. */
	for (size_t i = c->nr; i-- > 0;) {
		if (c->r[i]->seen)
			continue;
		if (!complete) {
			msqd_region_remove(d, c, i);
			continue;
		}
		log_debug("pid %d: %#llx-%#llx no longer mapped: dropping what it left cached",
			  (int)c->pid, (unsigned long long)c->r[i]->s.start,
			  (unsigned long long)c->r[i]->s.end);
		msqd_region_exited(d, c, i);
	}
	return added;
}

/* /proc/PID/stat's minflt + majflt (the whole thread group's) and
 * starttime. */
static int proc_faults(const char *proc_root, pid_t pid, uint64_t *faults, uint64_t *start)
{
	char path[128], buf[1024];
	_cleanup_close_ int fd = -1;
	unsigned long long v[20];
	const char *p;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%d/stat", proc_root, (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
		return -errno;
	if ((n = read(fd, buf, sizeof(buf) - 1)) <= 0)
		return n < 0 ? -errno : -EINVAL;
	buf[n] = '\0';
	/* (After the command's closing parenthesis: the command may hold
	 * any character.) */
	if (!(p = strrchr(buf, ')')))
		return -EINVAL;
	p++;
	for (int i = 0; i < 20; i++) {
		char *end;

		while (*p == ' ')
			p++;
		if (i == 0) { /* the state, a letter */
			v[i] = 0;
			p = *p ? p + 1 : p;
			continue;
		}
		v[i] = strtoull(p, &end, 10);
		if (end == p)
			return -EINVAL;
		p = end;
	}
	*faults = v[7] + v[9];
	*start = v[19];
	return 0;
}

static size_t quiet_index(const struct msqd_discovery *q, pid_t pid, bool *found)
{
	size_t lo = 0, hi = q->nquiet;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (q->quiet[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < q->nquiet && q->quiet[lo].pid == pid;
	return lo;
}

/* Remembers pid as quiet (n == 0: smaps showed nothing to manage) or
 * forgets it. */
static void quiet_note(struct msqd_discovery *q, pid_t pid, uint64_t start, uint64_t faults, bool quiet)
{
	bool found;
	size_t i = quiet_index(q, pid, &found);

	if (!quiet) {
		if (found)
			memmove(&q->quiet[i], &q->quiet[i + 1], (q->nquiet - i - 1) * sizeof(*q->quiet));
		q->nquiet -= found;
		return;
	}
	if (!found) {
		if (q->nquiet >= MAX_QUIET) {
			/* (Exited pids are never removed otherwise: start
			 * again, which costs one more smaps read each.) */
			q->nquiet = 0;
			i = 0;
		}
		if (!q->quiet) {
			q->quiet = malloc(MAX_QUIET * sizeof(*q->quiet));
			if (!q->quiet)
				return;
		}
		memmove(&q->quiet[i + 1], &q->quiet[i], (q->nquiet - i) * sizeof(*q->quiet));
		q->nquiet++;
	}
	q->quiet[i] = (struct msqd_quiet_proc){ .pid = pid, .start = start, .faults = faults };
}

/* Returns how many regions of pid it newly manages. */
static unsigned scan_pid(struct msqd *d, pid_t pid, struct sr_vma *v)
{
	char path[4096], file[256];
	enum msqd_cg_layout layout;
	struct msqd_client *c = find_discovered(d, pid);
	struct msqd_cg *g;
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int own_pidfd = -1;
	size_t len, n;
	unsigned added = 0;
	bool over, complete, have_faults = false;
	uint64_t faults = 0, start = 0;
	int pidfd;

	if (msqd_cgroup_of(d->set.proc_root, pid, path, sizeof(path), &layout) < 0)
		return 0;
	g = msqd_cg_get(d, path, layout);
	if (!g || !g->pol->discover || g->pol->mode == MSQ_MODE_OFF) {
		if (c)
			msqd_client_drop(d, c, "its cgroup no longer asks for discovery");
		return 0;
	}
	/* A process that has not faulted since its smaps showed nothing has
	 * not streamed through a mapping since: its smaps are not read (they
	 * walk its page tables, a thousand idle processes' cost a core). */
	if (!c && proc_faults(d->set.proc_root, pid, &faults, &start) == 0) {
		bool found;
		size_t i = quiet_index(&d->disc, pid, &found);

		have_faults = true;
		if (found && d->disc.quiet[i].start == start && d->disc.quiet[i].faults == faults) {
			d->disc.quiet_skips++;
			return 0;
		}
	}
	/* The pidfd first: smaps read while it is alive are that process's. */
	if (c) {
		pidfd = c->pidfd;
	} else {
		if ((own_pidfd = msq_pidfd_open(pid)) < 0)
			return 0;
		pidfd = own_pidfd;
	}
	snprintf(file, sizeof(file), "%s/%d/smaps", d->set.proc_root, (int)pid);
	if (MSQ_FAULT("madvseq/daemon/proc/smaps") || slurp(file, &text, &len) < 0)
		return 0;
	if (!msqd_pidfd_alive(pidfd))
		return 0;
	n = parse_smaps(text, v, MAX_SR, &complete);
	if (have_faults)
		quiet_note(&d->disc, pid, start, faults, n == 0 && complete);
	over = !c && n && (d->cl.ndiscovered >= d->set.conf.max_discovered ||
			   d->cl.n >= d->set.conf.max_clients);
	if (over) {
		/* (max_discovered: a flood of such processes costs the
		 * daemon no more than that many clients) */
		if (!d->disc.limit_warned)
			log_warn("%u processes managed through discovery: leaving pid %d and more "
				 "alone (max_discovered, max_clients)", d->cl.ndiscovered, (int)pid);
		d->disc.limit_warned = true;
		d->disc.refused++;
	}
	if (!c && n && !over) {
		c = msqd_client_new(d, -1, own_pidfd, pid, 0);
		if (c) {
			own_pidfd = -1;
			if (msqd_client_attach(d, c) < 0) {
				msqd_client_drop(d, c, "cannot open its pagemap");
				c = NULL;
			} else {
				log_info("pid %d: managing %zu MADV_SEQUENTIAL mapping%s found in smaps "
					 "(cgroup %s)", (int)pid, n, n == 1 ? "" : "s", path);
			}
		}
	}
	if (c)
		added = reconcile(d, c, v, n, complete);
	for (size_t i = 0; i < n; i++)
		free(v[i].path);
	return added;
}

/* One scan's scratch: the pids of connected shims (sorted) and room for
 * one process's VMAs. */
struct scan {
	pid_t *shims;
	size_t ns;
	struct sr_vma *v;
	pid_t self;
};

static int scan_begin(struct msqd *d, struct scan *sc)
{
	*sc = (struct scan){ .self = getpid() };
	if (!(sc->shims = malloc((d->cl.n + 1) * sizeof(*sc->shims))) ||
	    !(sc->v = calloc(MAX_SR, sizeof(*sc->v)))) {
		free(sc->shims);
		return -ENOMEM;
	}
	for (struct msqd_client *c = d->cl.list; c; c = c->next)
		if (c->fd >= 0 && c->hello && !c->ctl)
			sc->shims[sc->ns++] = c->pid;
	qsort(sc->shims, sc->ns, sizeof(*sc->shims), cmp_pid);
	return 0;
}

static void scan_end(struct scan *sc)
{
	free(sc->shims);
	free(sc->v);
}

static unsigned scan_one(struct msqd *d, struct scan *sc, pid_t pid)
{
	if (pid <= 0 || pid == sc->self)
		return 0;
	if (bsearch(&pid, sc->shims, sc->ns, sizeof(*sc->shims), cmp_pid)) {
		/* Its shim registers what it reads: stop discovering it. */
		struct msqd_client *c = find_discovered(d, pid);

		if (c)
			msqd_client_drop(d, c, "its shim connected");
		return 0;
	}
	return scan_pid(d, pid, sc->v);
}

/* The machine's reads from disk so far, in pages (/proc/vmstat pgpgin,
 * which counts KiB). */
static int disk_intake(struct msqd *d, uint64_t *pages)
{
	char file[256];
	int rc;

	snprintf(file, sizeof(file), "%s/vmstat", d->set.proc_root);
	if ((rc = msqd_stat_file_value(file, &d->disc.disk_intake.fd, "pgpgin", pages)) < 0)
		return rc;
	*pages /= 4;
	/* Streams already managed read from disk what the daemon drops: not
	 * news (and a managed stream would otherwise keep starting scans). */
	*pages -= *pages > d->cnt.dropped / 4096 ? d->cnt.dropped / 4096 : *pages;
	return 0;
}

static int cgroup_intake(struct msqd *d, struct msqd_cg *g, uint64_t *pages)
{
	int rc = msqd_cgroup_intake(d->set.cg_root, g->path, g->layout, &g->intake.fd, pages);

	/* v1 counts every charge, the pages of managed streams too: less
	 * what the daemon dropped there.  (v2's file + pgsteal already
	 * nets out what MADV_PAGEOUT takes away.) */
	if (rc == 0 && g->layout == MSQD_CG_V1)
		*pages -= *pages > g->dropped / 4096 ? g->dropped / 4096 : *pages;
	return rc;
}

/* Whether a watched counter, now at v, asks for a scan. */
static bool intake_due(struct msqd *d, struct msqd_intake *w, uint64_t v)
{
	if (!w->known || v < w->base) {
		/* First look, or a counter that went down (a v2 cgroup's
		 * files deleted): a new baseline. */
		w->base = v;
		w->known = true;
		return false;
	}
	if (v - w->base < d->set.conf.discover_trigger / 4096) {
		/* Quiet for a whole gap: the next burst is news again. */
		if (w->gap_ns > SCAN_GAP_MIN_NS && d->now_ns - w->scanned_ns >= w->gap_ns)
			w->gap_ns = SCAN_GAP_MIN_NS;
		return false;
	}
	if (w->gap_ns < SCAN_GAP_MIN_NS)
		w->gap_ns = SCAN_GAP_MIN_NS;
	return !w->scanned_ns || d->now_ns - w->scanned_ns >= w->gap_ns;
}

/* After a scan: a new baseline; a scan the watch started and that found
 * nothing doubles the gap to the next. */
static void intake_scanned(struct msqd *d, struct msqd_intake *w, int rc, uint64_t v,
			   bool triggered, unsigned added)
{
	w->scanned_ns = d->now_ns;
	if (rc == 0) {
		w->base = v;
		w->known = true;
	}
	if (!triggered)
		return;
	w->gap_ns = added ? SCAN_GAP_MIN_NS : w->gap_ns * 2;
	if (w->gap_ns > d->set.conf.discover_interval_ns)
		w->gap_ns = d->set.conf.discover_interval_ns;
}

static unsigned full_scan(struct msqd *d)
{
	struct scan sc;
	struct dirent *de;
	unsigned added = 0;
	DIR *dir;

	uint64_t until = msqd_now_ns() + SCAN_SLICE_NS;
	bool whole = true;

	if (!d->disc.resume_pid)
		d->disc.scans++;
	if (scan_begin(d, &sc) < 0)
		return 0;
	/* /proc lists pids in increasing order: a scan cut short at the
	 * slice's end goes on after the last pid it read, next turn. */
	if ((dir = opendir(d->set.proc_root))) {
		while ((de = readdir(dir))) {
			char *end;
			long pid = strtol(de->d_name, &end, 10);

			if (*end || pid <= d->disc.resume_pid || pid <= 0 || pid >= INT_MAX)
				continue;
			added += scan_one(d, &sc, (pid_t)pid);
			if (msqd_now_ns() >= until) {
				d->disc.resume_pid = (pid_t)pid;
				whole = false;
				break;
			}
		}
		closedir(dir);
	}
	if (whole)
		d->disc.resume_pid = 0;
	scan_end(&sc);
	return added;
}

/* Counters read before a full scan become the baselines after it. */
static unsigned full_scan_noting(struct msqd *d, bool triggered)
{
	uint64_t v = 0;
	int rc = disk_intake(d, &v);
	unsigned added;

	for (struct msqd_cg *g = d->cgs.list; g; g = g->next)
		if (g->pol->discover)
			g->intake.known = cgroup_intake(d, g, &g->intake.base) == 0;
	added = full_scan(d);
	d->now_ns = msqd_now_ns();
	intake_scanned(d, &d->disc.disk_intake, rc, v, triggered, added);
	for (struct msqd_cg *g = d->cgs.list; g; g = g->next)
		if (g->pol->discover)
			g->intake.scanned_ns = d->now_ns;
	return added;
}

unsigned msqd_discover(struct msqd *d)
{
	return full_scan_noting(d, false);
}

/* Scans the processes of one cgroup (its cgroup.procs).  Returns how many
 * regions it newly manages. */
static unsigned scan_cgroup(struct msqd *d, struct msqd_cg *g)
{
	char dir[4096], file[4200];
	_cleanup_free_ char *text = NULL;
	unsigned added = 0;
	struct scan sc;
	size_t len;
	uint64_t until = msqd_now_ns() + SCAN_SLICE_NS;

	msqd_cgroup_dir(d->set.cg_root, g->path, g->layout, dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/cgroup.procs", dir);
	if (MSQ_FAULT("madvseq/daemon/proc/read") || slurp(file, &text, &len) < 0 ||
	    scan_begin(d, &sc) < 0)
		return 0;
	for (char *p = text, *end; *p; p = end) {
		long pid = strtol(p, &end, 10);

		if (end == p)
			break;
		if (pid > 0 && pid < INT_MAX)
			added += scan_one(d, &sc, (pid_t)pid);
		if (msqd_now_ns() >= until)
			break; /* the rest: the next scan */
	}
	scan_end(&sc);
	return added;
}

/* Whether a counter moved since the last look: by more than a 32nd of
 * the trigger (1 MiB by default: 50 MB/s at the default period). */
static bool intake_moved(struct msqd *d, struct msqd_intake *w, uint64_t v)
{
	bool moved = v > w->last && v - w->last >= d->set.conf.discover_trigger / 4096 / 32;

	w->last = v;
	return moved;
}

uint64_t msqd_discover_watch(struct msqd *d)
{
	uint64_t v;
	unsigned added;
	bool moved = false;

	if (!d->set.conf.discover_trigger)
		return d->set.conf.discover_watch_ns;
	/* Cgroups seen before: each is watched, and scanned alone. */
	for (struct msqd_cg *g = d->cgs.list; g; g = g->next) {
		if (!g->pol->discover || g->pol->mode == MSQ_MODE_OFF || cgroup_intake(d, g, &v) < 0)
			continue;
		moved |= intake_moved(d, &g->intake, v);
		if (!intake_due(d, &g->intake, v))
			continue;
		d->disc.triggered++;
		added = scan_cgroup(d, g);
		d->now_ns = msqd_now_ns();
		if (added)
			log_debug("cgroup %s: %llu MiB came into its memory since its last scan; "
				  "found %u mapping%s", g->path, (unsigned long long)((v - g->intake.base) >> 8),
				  added, added == 1 ? "" : "s");
		intake_scanned(d, &g->intake, cgroup_intake(d, g, &v), v, true, added);
	}
	/* A cgroup not seen yet (a service just started): the machine's
	 * reads from disk start a full scan. */
	if (disk_intake(d, &v) == 0) {
		uint64_t grew = v - d->disc.disk_intake.base;

		moved |= intake_moved(d, &d->disc.disk_intake, v);
		if (intake_due(d, &d->disc.disk_intake, v)) {
			d->disc.triggered++;
			added = full_scan_noting(d, true);
			if (added)
				log_debug("%llu MiB read from disk since the last scan; found %u "
					  "mapping%s", (unsigned long long)(grew >> 8), added,
					  added == 1 ? "" : "s");
		}
	}
	/* Reading the counters fifty times a second is most of what an idle
	 * daemon does: after QUIET_WATCHES still looks, look QUIET_FACTOR
	 * times less often, until one moves. */
	d->disc.quiet_watches = moved ? 0 : d->disc.quiet_watches + 1;
	return d->set.conf.discover_watch_ns * (d->disc.quiet_watches >= QUIET_WATCHES ? QUIET_FACTOR : 1);
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fault.h"
#include "../common/kernel_switch.h"
#include "msqd.h"
#include "log.h"

/* Reads a small file into buf (NUL-terminated) through a descriptor kept
 * in *fd: opened on first use, and closed when a read fails (the cgroup
 * went away), to be opened again by path next time.  A watch reads its
 * files fifty times a second; looking their paths up each time was a
 * large share of an idle daemon's CPU.  Returns length or -errno. */
static ssize_t read_kept(const char *path, int *fd, char *buf, size_t len)
{
	ssize_t n;

	if (MSQ_FAULT("madvseq/daemon/proc/read"))
		return -EIO;
	if (*fd < 0 && (*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
		return -errno;
	n = pread(*fd, buf, len - 1, 0);
	if (n < 0) {
		n = -errno;
		close(*fd);
		*fd = -1;
		return n;
	}
	buf[n] = '\0';
	return n;
}

/* read_kept(), for a file read once. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
	int fd = -1;
	ssize_t n = read_kept(path, &fd, buf, len);

	if (fd >= 0)
		close(fd);
	return n;
}

int msqd_cgroup_of(const char *proc_root, pid_t pid, char *path, size_t len,
		   enum msqd_cg_layout *layout)
{
	char file[256], buf[8192], *save = NULL, *v2 = NULL;
	ssize_t n;

	snprintf(file, sizeof(file), "%s/%d/cgroup", proc_root, (int)pid);
	if ((n = read_small(file, buf, sizeof(buf))) < 0)
		return (int)n;
	for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		/* "hierarchy-ID:controller-list:path" */
		char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

		if (!c2)
			continue;
		*c2 = '\0';
		if (!strcmp(l, "0:") && c1[1] == '\0') {
			v2 = c2 + 1;
			continue;
		}
		for (char *ctl = c1 + 1, *s2 = NULL, *t; (t = strtok_r(ctl, ",", &s2)); ctl = NULL)
			if (!strcmp(t, "memory")) {
				if (strlen(c2 + 1) >= len)
					return -ENAMETOOLONG;
				strcpy(path, c2 + 1);
				*layout = MSQD_CG_V1;
				return 0;
			}
	}
	if (!v2)
		return -ENOENT;
	if (strlen(v2) >= len)
		return -ENAMETOOLONG;
	strcpy(path, v2);
	*layout = MSQD_CG_V2;
	return 0;
}

static int read_u64(const char *path, uint64_t *v, bool *is_max)
{
	char buf[64], *end;
	ssize_t n = read_small(path, buf, sizeof(buf));

	if (n < 0)
		return (int)n;
	*is_max = !strncmp(buf, "max", 3);
	if (*is_max) {
		*v = UINT64_MAX;
		return 0;
	}
	errno = 0;
	*v = strtoull(buf, &end, 10);
	return errno || end == buf ? -EINVAL : 0;
}

static double read_psi_some_avg10(const char *path)
{
	char buf[512], *p;

	if (read_small(path, buf, sizeof(buf)) < 0 || !(p = strstr(buf, "some avg10=")))
		return -1;
	return strtod(p + 11, NULL);
}

void msqd_cgroup_dir(const char *cg_root, const char *path, enum msqd_cg_layout layout, char *buf,
		     size_t len)
{
	const char *rel = strcmp(path, "/") ? path : "";

	if (layout == MSQD_CG_V1)
		snprintf(buf, len, "%s/memory%s", cg_root, rel);
	else
		snprintf(buf, len, "%s%s", cg_root, rel);
}

/* The value of "key N" in a memory.stat text; false if absent. */
static bool stat_value(const char *text, const char *key, uint64_t *v)
{
	size_t kl = strlen(key);

	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (!strncmp(l, key, kl) && l[kl] == ' ') {
			*v = strtoull(l + kl + 1, NULL, 10);
			return true;
		}
	return false;
}

int msqd_stat_file_value(const char *file, int *fd, const char *key, uint64_t *v)
{
	char buf[16384];
	ssize_t n = read_kept(file, fd, buf, sizeof(buf));

	if (n < 0)
		return (int)n;
	return stat_value(buf, key, v) ? 0 : -ENOENT;
}

/* The cgroup's memory.stat, read through *fd (opened at the first call,
 * kept open), into buf. */
static ssize_t read_memory_stat(const char *cg_root, const char *path, enum msqd_cg_layout layout,
				int *fd, char *buf, size_t len)
{
	char dir[4096], file[4200] = "";

	if (*fd < 0) {
		msqd_cgroup_dir(cg_root, path, layout, dir, sizeof(dir));
		snprintf(file, sizeof(file), "%s/memory.stat", dir);
	}
	return read_kept(file, fd, buf, len);
}

/* A v1 counter: the hierarchy's total_KEY where there is one, else KEY. */
static bool v1_value(const char *buf, const char *key, uint64_t *v)
{
	char total[64];

	snprintf(total, sizeof(total), "total_%s", key);
	return stat_value(buf, total, v) || stat_value(buf, key, v);
}

int msqd_cgroup_intake(const char *cg_root, const char *path, enum msqd_cg_layout layout,
		       int *fd, uint64_t *pages)
{
	char buf[8192];
	uint64_t a = 0, b = 0;
	ssize_t n;

	if ((n = read_memory_stat(cg_root, path, layout, fd, buf, sizeof(buf))) < 0)
		return (int)n;
	if (layout == MSQD_CG_V1) {
		if (!v1_value(buf, "pgpgin", &a))
			return -EINVAL;
	} else {
		if (!stat_value(buf, "file", &a) || !stat_value(buf, "pgsteal", &b))
			return -EINVAL;
		a /= 4096;
	}
	*pages = a + b;
	return 0;
}

int msqd_cgroup_filestat(const char *cg_root, const char *path, enum msqd_cg_layout layout,
			 int *fd, struct msqd_cg_filestat *out)
{
	char buf[8192];
	struct msqd_cg_filestat st = { 0 };
	uint64_t steal = 0;
	ssize_t n;

	if ((n = read_memory_stat(cg_root, path, layout, fd, buf, sizeof(buf))) < 0)
		return (int)n;
	if (layout == MSQD_CG_V1) {
		if (!v1_value(buf, "pgpgin", &st.charges) || !v1_value(buf, "pgfault", &st.faults) ||
		    !v1_value(buf, "cache", &st.cache))
			return -EINVAL;
	} else {
		if (!stat_value(buf, "file", &st.cache) || !stat_value(buf, "pgsteal", &steal))
			return -EINVAL;
		st.charges = st.cache / 4096 + steal;
	}
	*out = st;
	return 0;
}

int msqd_cgroup_pressure(const char *cg_root, const char *proc_root, const char *path,
			 enum msqd_cg_layout layout, struct msqd_pressure *out)
{
	char dir[4096], file[4200];
	struct msqd_pressure p = { .some_avg10 = -1 };
	bool is_max;
	uint64_t v;
	int rc;

	msqd_cgroup_dir(cg_root, path, layout, dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/%s", dir, layout == MSQD_CG_V1 ? "memory.usage_in_bytes" : "memory.current");
	if ((rc = read_u64(file, &p.usage, &is_max)) < 0)
		return rc;
	/* The tightest limit from here up: a child without its own limit is
	 * bounded by its parent's. */
	for (;;) {
		char *slash;

		snprintf(file, sizeof(file), "%s/%s", dir, layout == MSQD_CG_V1 ? "memory.limit_in_bytes" : "memory.max");
		if (read_u64(file, &v, &is_max) == 0 && !is_max && v < (UINT64_C(1) << 62) &&
		    (!p.limit || v < p.limit))
			p.limit = v;
		slash = strrchr(dir, '/');
		if (!slash || (size_t)(slash - dir) < strlen(cg_root) + (layout == MSQD_CG_V1 ? 7 : 0))
			break;
		*slash = '\0';
	}
	if (layout == MSQD_CG_V2) {
		snprintf(file, sizeof(file), "%s%s/memory.pressure", cg_root, strcmp(path, "/") ? path : "");
		p.some_avg10 = read_psi_some_avg10(file);
	} else {
		snprintf(file, sizeof(file), "%s/pressure/memory", proc_root);
		p.some_avg10 = read_psi_some_avg10(file);
	}
	*out = p;
	return 0;
}

#define GATE_RECHECK_NS (UINT64_C(1000) * 1000 * 1000)

struct msqd_cg *msqd_cg_get(struct msqd *d, const char *path, enum msqd_cg_layout layout)
{
	struct msqd_cg *g;

	for (g = d->cgs.list; g; g = g->next)
		if (g->layout == layout && !strcmp(g->path, path))
			return g;
	if (MSQ_FAULT("madvseq/alloc") || !(g = calloc(1, sizeof(*g))))
		return NULL;
	if (!(g->path = strdup(path))) {
		free(g);
		return NULL;
	}
	g->layout = layout;
	g->intake.fd = -1;
	g->pol = msqd_conf_resolve(&d->set.conf, path, &g->section);
	g->next = d->cgs.list;
	d->cgs.list = g;
	return g;
}

void msqd_cg_reresolve(struct msqd *d)
{
	for (struct msqd_cg *g = d->cgs.list; g; g = g->next) {
		g->pol = msqd_conf_resolve(&d->set.conf, g->path, &g->section);
		g->gate_checked_ns = 0;
	}
}

bool msqd_gate_decide(const struct msqd_policy *p, const struct msqd_pressure *pr)
{
	if (!p->pressure_pct && p->psi_some_avg10 <= 0)
		return true;
	if (p->pressure_pct && pr->limit && pr->usage * 100 >= (uint64_t)p->pressure_pct * pr->limit)
		return true;
	return p->psi_some_avg10 > 0 && pr->some_avg10 >= p->psi_some_avg10;
}

/* The pressure gate: is this cgroup's memory tight enough to act? */
bool msqd_gate_open(struct msqd *d, struct msqd_cg *g)
{
	const struct msqd_policy *p = g->pol;
	bool open = false;

	if (!p->pressure_pct && p->psi_some_avg10 <= 0)
		return true;
	if (g->gate_checked_ns && d->now_ns - g->gate_checked_ns < GATE_RECHECK_NS)
		return g->gate_open;
	g->gate_checked_ns = d->now_ns;
	if (msqd_cgroup_pressure(d->set.cg_root, d->set.proc_root, g->path, g->layout, &g->pr) < 0) {
		/* Cannot tell: act, as without a gate. */
		g->gate_open = true;
		return true;
	}
	open = msqd_gate_decide(p, &g->pr);
	if (open != g->gate_open)
		log_debug("cgroup %s: pressure gate %s", g->path, open ? "open" : "closed");
	g->gate_open = open;
	return open;
}

/*
 * Forgets cgroups that were removed (rmdir) and that nothing refers to
 * any more: no client, no region, no queued exit drop.  Hosts that make
 * a cgroup per job would otherwise grow the list, and the status, for
 * good.  Looked at once per REAP_NS.
 */
#define REAP_NS (UINT64_C(1000) * 1000 * 1000)

void msqd_cg_reap(struct msqd *d)
{
	char dir[4096];
	struct stat st;

	if (d->now_ns - d->cgs.reaped_ns < REAP_NS)
		return;
	d->cgs.reaped_ns = d->now_ns;
	for (struct msqd_cg **pp = &d->cgs.list, *g; (g = *pp);) {
		if (g->clients || g->regions || g->leftovers) {
			pp = &g->next;
			continue;
		}
		msqd_cgroup_dir(d->set.cg_root, g->path, g->layout, dir, sizeof(dir));
		if (stat(dir, &st) == 0 || errno != ENOENT) {
			pp = &g->next;
			continue;
		}
		log_debug("cgroup %s: removed; forgetting it", g->path);
		*pp = g->next;
		if (g->intake.fd >= 0)
			close(g->intake.fd);
		free(g->path);
		free(g);
		d->cgs.freed++;
	}
}

void msqd_kernel_recheck(struct msqd *d)
{
	/* The patched kernel's own drop-behind, checked once a second: with it
	 * on, MADV_SEQUENTIAL mappings of the filesystems it covers are its. */
	if (d->now_ns - d->ks.checked_ns >= UINT64_C(1000000000) || !d->ks.checked_ns) {
		int k = msq_kernel_dropbehind_state(d->set.proc_root);

		if (k != d->ks.state && d->ks.checked_ns)
			log_info("kernel drop-behind (%s) is now %s", MSQ_KERNEL_DROPBEHIND_SYSCTL,
				 k == 1 ? "on: covered mappings are left to the kernel" : "off");
		d->ks.state = k;
		d->ks.checked_ns = d->now_ns;
	}
}

bool msqd_kernel_covers(struct msqd *d, struct msqd_cg *g)
{
	if (d->ks.state == 1)
		return true;
	if (!g || g->layout != MSQD_CG_V2)
		return false; /* the per-cgroup file is cgroup v2's */
	if (d->now_ns - g->kernel_checked_ns >= UINT64_C(1000000000) || !g->kernel_checked_ns) {
		int k = msq_kernel_dropbehind_cgroup_state(d->set.cg_root, g->path);

		if ((k == 1) != (g->kernel_state == 1) && (g->kernel_checked_ns || k == 1))
			log_info("cgroup %s: kernel drop-behind (%s) is now %s", g->path,
				 MSQ_KERNEL_DROPBEHIND_CGFILE,
				 k == 1 ? "on: covered mappings are left to the kernel" : "off");
		g->kernel_state = k;
		g->kernel_checked_ns = d->now_ns;
	}
	return g->kernel_state == 1;
}

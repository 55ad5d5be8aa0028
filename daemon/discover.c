/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Discovery: programs the shim cannot reach (static, setuid, started
 * before the daemon) still say MADV_SEQUENTIAL to the kernel, which shows
 * it as "sr" in the VmFlags of /proc/PID/smaps.  For processes in cgroups
 * with discover = yes, every discover_interval, such file-backed VMAs are
 * managed like registered regions; VMAs that went away are forgotten.
 * Processes whose shim is connected are left to their registrations.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/fault.h"
#include "../common/maps.h"
#include "../common/sys.h"
#include "daemon.h"
#include "log.h"

#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#define MAX_SR 256
#define SMAPS_MAX (UINT64_C(64) << 20)

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

	if (MSQ_FAULT("madvseq/daemon/proc/smaps"))
		return -EIO;
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

/* The file-backed VMAs advised MADV_SEQUENTIAL in an smaps text. */
static size_t parse_smaps(char *text, struct sr_vma *out, size_t max)
{
	struct msq_vma *v = malloc(sizeof(*v));
	bool have = false;
	size_t n = 0;

	if (!v)
		return 0;
	for (char *l = text, *nl; *l && n < max; l = nl ? nl + 1 : l + strlen(l)) {
		nl = strchr(l, '\n');
		if (nl)
			*nl = '\0';
		if (!strncmp(l, "VmFlags:", 8)) {
			if (have && v->ino && v->path[0] == '/' && v->read && has_flag(l + 8, "sr") &&
			    (out[n].path = strdup(v->path))) {
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
	return n;
}

static struct msqd_client *find_discovered(struct msqd *d, pid_t pid)
{
	for (struct msqd_client *c = d->clients; c; c = c->next)
		if (c->fd < 0 && c->pid == pid)
			return c;
	return NULL;
}

static void reconcile(struct msqd *d, struct msqd_client *c, struct sr_vma *v, size_t n)
{
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
				    v[j].off, true, v[j].path, v[j].shared, v[j].writable) == 0) {
			c->r[c->nr - 1]->seen = true;
			log_debug("pid %d: discovered %#llx-%#llx %s", (int)c->pid,
				  (unsigned long long)v[j].start, (unsigned long long)v[j].end, v[j].path);
		}
	}
	for (size_t i = c->nr; i-- > 0;)
		if (!c->r[i]->seen)
			msqd_region_remove(d, c, i);
}

static void scan_pid(struct msqd *d, pid_t pid, struct sr_vma *v)
{
	char path[4096], file[256];
	enum msqd_cg_layout layout;
	struct msqd_client *c = find_discovered(d, pid);
	struct msqd_cg *g;
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int own_pidfd = -1;
	size_t len, n;
	int pidfd;

	if (msqd_cgroup_of(d->proc_root, pid, path, sizeof(path), &layout) < 0)
		return;
	g = msqd_cg_get(d, path, layout);
	if (!g || !g->pol->discover || g->pol->mode == MSQ_MODE_OFF) {
		if (c)
			msqd_client_drop(d, c, "its cgroup no longer asks for discovery");
		return;
	}
	/* The pidfd first: smaps read while it is alive are that process's. */
	if (c) {
		pidfd = c->pidfd;
	} else {
		if ((own_pidfd = msq_pidfd_open(pid)) < 0)
			return;
		pidfd = own_pidfd;
	}
	snprintf(file, sizeof(file), "%s/%d/smaps", d->proc_root, (int)pid);
	if (slurp(file, &text, &len) < 0)
		return;
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
		return;
	n = parse_smaps(text, v, MAX_SR);
	if (!c && n) {
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
		reconcile(d, c, v, n);
	for (size_t i = 0; i < n; i++)
		free(v[i].path);
}

void msqd_discover(struct msqd *d)
{
	_cleanup_free_ pid_t *shims = NULL;
	_cleanup_free_ struct sr_vma *v = NULL;
	size_t ns = 0;
	struct dirent *de;
	DIR *dir;
	pid_t self = getpid();

	d->discover_scans++;
	if (!(shims = malloc((d->nclients + 1) * sizeof(*shims))) ||
	    !(v = calloc(MAX_SR, sizeof(*v))))
		return;
	for (struct msqd_client *c = d->clients; c; c = c->next)
		if (c->fd >= 0 && c->hello && !c->ctl)
			shims[ns++] = c->pid;
	qsort(shims, ns, sizeof(*shims), cmp_pid);
	if (!(dir = opendir(d->proc_root)))
		return;
	while ((de = readdir(dir))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0 || pid == self)
			continue;
		if (bsearch(&(pid_t){ (pid_t)pid }, shims, ns, sizeof(*shims), cmp_pid)) {
			/* Its shim registers what it reads: stop discovering it. */
			struct msqd_client *c = find_discovered(d, (pid_t)pid);

			if (c)
				msqd_client_drop(d, c, "its shim connected");
			continue;
		}
		scan_pid(d, (pid_t)pid, v);
	}
	closedir(dir);
}

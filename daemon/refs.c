/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Strong references, page by page: before a planned drop, the client's
 * /proc/PID/pagemap gives each page's frame number (PFN, visible to
 * CAP_SYS_ADMIN only), and /proc/kpageflags and /proc/kpagecount tell
 * whether anything besides the streamer uses the page:
 *   - mapped by more than one page table (kpagecount > 1);
 *   - ACTIVE or REFERENCED: someone touched it through read() or another
 *     mapping (faults of MADV_SEQUENTIAL mappings set neither).
 * Such pages are kept (and looked at again a second later).  Without the
 * privilege the daemon says so once and keeps the shim's rules: pages it
 * saw cached before the stream started, and pages still mapped after
 * MADV_PAGEOUT.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/fault.h"
#include "../common/sys.h"
#include "daemon.h"
#include "log.h"

#define KPF_REFERENCED 2
#define KPF_ACTIVE 6
#define BATCH 512
#define SPAN 1024

struct frame {
	uint64_t pfn;
	uint32_t idx; /* page index in the batch */
};

static int cmp_frame(const void *a, const void *b)
{
	const struct frame *x = a, *y = b;

	return x->pfn < y->pfn ? -1 : x->pfn > y->pfn;
}

void msqd_refs_init(struct msqd *d)
{
	char p[256];
	uint64_t v;
	int rc = 0;

	d->refs_ok = false;
	d->kpageflags_fd = d->kpagecount_fd = -1;
	snprintf(p, sizeof(p), "%s/kpageflags", d->proc_root);
	d->kpageflags_fd = open(p, O_RDONLY | O_CLOEXEC);
	if (d->kpageflags_fd < 0)
		rc = -errno;
	snprintf(p, sizeof(p), "%s/kpagecount", d->proc_root);
	if (rc == 0 && (d->kpagecount_fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		rc = -errno;
	/* Readable, not just openable (a fixture or a lockdown kernel). */
	if (rc == 0 && pread(d->kpageflags_fd, &v, sizeof(v), 0) != sizeof(v))
		rc = -EPERM;
	if (rc < 0) {
		log_warn("no strong-reference checks: %s/kpageflags: %s (needs CAP_SYS_ADMIN); "
			 "falling back to the shim's rules (pages cached before, pages still mapped)",
			 d->proc_root, strerror(-rc));
		d->refs_warned = true;
		return;
	}
	d->refs_ok = true;
}

const char *msqd_fidelity(const struct msqd *d)
{
	return d->refs_ok ? "daemon+kpageflags" : "daemon";
}

static void refs_lost(struct msqd *d, const char *why)
{
	if (!d->refs_warned)
		log_warn("strong-reference checks off: %s; falling back to the shim's rules", why);
	d->refs_warned = true;
	d->refs_ok = false;
}

/* Reads n 64-bit entries at index idx of fd. */
static int read_entries(int fd, uint64_t idx, uint64_t *v, size_t n)
{
	ssize_t got;

	if (MSQ_FAULT("madvseq/daemon/proc/kpageflags"))
		return -EIO;
	got = pread(fd, v, n * sizeof(*v), (off_t)(idx * sizeof(*v)));
	if (got < 0)
		return -errno;
	if ((size_t)got != n * sizeof(*v))
		return -EIO;
	return 0;
}

int msqd_refs_filter(struct msq_engine *e, struct msq_stream *s, struct msq_extents *drop, void *arg)
{
	struct msqd *d = arg;
	struct msqd_client *c = d->cur;
	static uint64_t pm[BATCH], fl[SPAN], cnt[SPAN];
	static struct frame fr[BATCH];
	uint64_t kept = 0;
	size_t nf;
	struct msq_extents keep = MSQ_EXTENTS_INIT;
	int rc = 0;

	if (!c)
		return 0;
	for (size_t i = 0; i < drop->n && rc == 0; i++) {
		for (uint64_t a = drop->v[i].start; a < drop->v[i].end && rc == 0;) {
			size_t n = (size_t)((drop->v[i].end - a) / 4096);
			uint64_t unknown = 0; /* pages not checked: keep them this time */
			ssize_t got;

			if (n > BATCH)
				n = BATCH;
			got = MSQ_FAULT("madvseq/daemon/proc/pagemap") ? -1
			      : pread(e->pm.fd, pm, n * 8, (off_t)(a / 4096 * 8));
			if (got != (ssize_t)(n * 8))
				unknown = a;
			/* Frames of a file read in order lie close together: sort
			 * this batch's frames and read each kpage file once per
			 * span of up to SPAN frames, not once per page. */
			nf = 0;
			for (size_t j = 0; j < n && !unknown; j++) {
				uint64_t pfn = pm[j] & MSQ_PM_PFN_MASK;

				if (!(pm[j] & MSQ_PM_PRESENT) || !(pm[j] & MSQ_PM_FILE))
					continue;
				if (!pfn) {
					refs_lost(d, "page frame numbers are hidden (needs CAP_SYS_ADMIN)");
					goto out;
				}
				fr[nf++] = (struct frame){ pfn, (uint32_t)j };
			}
			qsort(fr, nf, sizeof(*fr), cmp_frame);
			for (size_t j = 0; j < nf && !unknown && rc == 0;) {
				uint64_t first = fr[j].pfn;
				size_t k = j + 1, span;

				while (k < nf && fr[k].pfn - first < SPAN)
					k++;
				span = (size_t)(fr[k - 1].pfn - first + 1);
				if (read_entries(d->kpageflags_fd, first, fl, span) < 0 ||
				    read_entries(d->kpagecount_fd, first, cnt, span) < 0) {
					unknown = a;
					break;
				}
				for (size_t x = j; x < k; x++) {
					uint64_t f = fl[fr[x].pfn - first];
					uint64_t pa = a + (uint64_t)fr[x].idx * 4096;

					if (cnt[fr[x].pfn - first] > 1 || f & (1ULL << KPF_ACTIVE) ||
					    f & (1ULL << KPF_REFERENCED)) {
						if ((rc = msq_extents_add(&keep, pa, pa + 4096)) < 0)
							break;
						kept += 4096;
					}
				}
				j = k;
			}
			/* A read that failed leaves the batch unchecked: keep it
			 * rather than drop what may be in use. */
			if (unknown && rc == 0)
				rc = msq_extents_add(&keep, a, a + n * 4096);
			a += n * 4096;
		}
	}
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < keep.n && rc == 0; i++) {
		if ((rc = msq_extents_remove(drop, keep.v[i].start, keep.v[i].end)) < 0)
			break;
		if (!s->kept.n)
			s->kept_until_ns = d->now_ns + e->kept_retry_ns;
		rc = msq_extents_add(&s->kept, keep.v[i].start, keep.v[i].end);
	}
	if (c->cg)
		c->cg->kept_strong += kept;
	d->kept_strong_total += kept;
out:
	msq_extents_free(&keep);
	return rc;
}

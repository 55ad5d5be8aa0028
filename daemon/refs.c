/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Strong references, folio by folio: before a planned drop, the client's
 * /proc/PID/pagemap gives each page's frame number (PFN, visible to
 * CAP_SYS_ADMIN only) and whether the page is mapped by this process
 * alone, and /proc/kpageflags whether anything else touched it:
 *   - not exclusively mapped: another page table maps it too;
 *   - ACTIVE or REFERENCED: someone touched it through read() or another
 *     mapping (faults of MADV_SEQUENTIAL mappings set neither).
 * Such pages are kept (and looked at again a second later).  Without the
 * privilege the daemon says so once and keeps the shim's rules: pages it
 * saw cached before the stream started, and pages still mapped after
 * MADV_PAGEOUT.
 *
 * Cost.  Reading kpageflags costs the kernel a copy of the page's struct
 * per frame, a large part of the daemon's CPU time on a fast stream
 * (tests/bench/RESULTS.md).  But
 * flags and reclaim are per folio, and files on filesystems with large
 * folios are cached (and often PMD-mapped) in folios of up to 2 MiB.  A
 * run of pages at consecutive frames from a frame aligned to 2^k is one
 * folio exactly when the frame half-way, p + 2^(k-1), is a compound tail
 * (folios are naturally aligned, so a folio holding that tail must start
 * at p): one probe and one read of the head's flags then stand for the
 * whole folio.  Other pages are read in spans of nearby frames (a stream's
 * first megabytes are cached in single pages, before read-ahead grows its
 * folios; their frames are scattered).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/fault.h"
#include "../common/sys.h"
#include "msqd.h"
#include "refs.h"
#include "log.h"

#define KPF_REFERENCED 2
#define KPF_ACTIVE 6
#define KPF_COMPOUND_TAIL 16
#define BATCH 512
#define SPAN 1024
#define SPAN_GAP 16
#define MAX_FOLIO_ORDER 9   /* PMD-sized */
#define MIN_PROBE_ORDER 2   /* smaller runs: not worth a probe */
#define PROBE_BUDGET 32     /* per batch of 512 pages, for folios below the largest */

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

	d->refs.ok = false;
	snprintf(p, sizeof(p), "%s/kpageflags", d->set.proc_root);
	d->refs.kpageflags_fd = open(p, O_RDONLY | O_CLOEXEC);
	if (d->refs.kpageflags_fd < 0)
		rc = -errno;
	/* Readable, not just openable (a fixture or a lockdown kernel). */
	if (rc == 0 && pread(d->refs.kpageflags_fd, &v, sizeof(v), 0) != sizeof(v))
		rc = -EPERM;
	if (rc < 0) {
		log_warn("no strong-reference checks: %s/kpageflags: %s (needs CAP_SYS_ADMIN); "
			 "falling back to the shim's rules (pages cached before, pages still mapped)",
			 d->set.proc_root, strerror(-rc));
		d->refs.warned = true;
		return;
	}
	d->refs.ok = true;
}

const char *msqd_fidelity(const struct msqd *d)
{
	return d->refs.ok ? "daemon+kpageflags" : "daemon";
}

static void refs_lost(struct msqd *d, const char *why)
{
	if (!d->refs.warned)
		log_warn("strong-reference checks off: %s; falling back to the shim's rules", why);
	d->refs.warned = true;
	d->refs.ok = false;
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

static bool in_use(uint64_t flags)
{
	return flags & (1ULL << KPF_ACTIVE) || flags & (1ULL << KPF_REFERENCED);
}

/* Pages of one pagemap batch, and what to keep of them. */
struct batch {
	struct msqd *d;
	uint64_t a;      /* address of page 0 */
	size_t n;
	uint64_t *pm;
	bool *done;
	struct msq_extents *keep;
	uint64_t kept;
	uint64_t flag_reads; /* frames whose flags were read */
};

static int keep_pages(struct batch *b, size_t j, size_t n)
{
	b->kept += n * 4096;
	return msq_extents_add(b->keep, b->a + j * 4096, b->a + (j + n) * 4096);
}

/* Pages whose flags could not be read: kept rather than dropped while they
 * may be in use, and retried with the kept ones (not counted as strong
 * references).  Only those pages: a batch holds 512, and one read in a
 * hundred failing must not keep whole batches. */
static int unchecked(struct batch *b, size_t j, size_t n)
{
	for (size_t x = j; x < j + n; x++)
		b->done[x] = true;
	return msq_extents_add(b->keep, b->a + j * 4096, b->a + (j + n) * 4096);
}

static bool framed(const struct batch *b, size_t j)
{
	return (b->pm[j] & MSQ_PM_PRESENT) && (b->pm[j] & MSQ_PM_FILE) && !b->done[j];
}

/* Pages [j, j + n) of the batch are one folio whose head is frame p: its
 * head's flags, and whether any of its pages is mapped elsewhere.  Returns
 * 0 or -ENOMEM. */
static int check_folio(struct batch *b, size_t j, size_t n, uint64_t p)
{
	uint64_t fl;
	bool keep;

	if (read_entries(b->d->refs.kpageflags_fd, p, &fl, 1) < 0)
		return unchecked(b, j, n);
	b->flag_reads++;
	keep = in_use(fl);
	for (size_t x = j; x < j + n; x++) {
		keep |= !(b->pm[x] & MSQ_PM_EXCLUSIVE);
		b->done[x] = true;
	}
	return keep ? keep_pages(b, j, n) : 0;
}

/* Large folios: one probe and one head read per folio.  Returns 0 or
 * -ENOMEM. */
static int check_folios(struct batch *b)
{
	uint64_t fl;
	/* Probes this batch may spend looking for smaller folios where a
	 * larger one was not found: many while the last batch found folios,
	 * one per aligned block where it found none (files cached in single
	 * pages), whose pages go to the span reads. */
	unsigned budget = b->d->refs.found_folios ? PROBE_BUDGET : 0;
	bool found = false;

	for (size_t j = 0; j < b->n;) {
		uint64_t p0 = b->pm[j] & MSQ_PM_PFN_MASK;
		size_t run = 1, end;
		int cap = MAX_FOLIO_ORDER;

		if (!framed(b, j)) {
			j++;
			continue;
		}
		while (j + run < b->n && framed(b, j + run) && (b->pm[j + run] & MSQ_PM_PFN_MASK) == p0 + run)
			run++;
		/* Walk the run in the largest aligned blocks it holds. */
		for (end = j + run; j < end;) {
			uint64_t p = b->pm[j] & MSQ_PM_PFN_MASK;
			size_t len;
			int k = 0, rc;

			while (k < cap && !(p & (UINT64_C(1) << k)) && (UINT64_C(2) << k) <= end - j)
				k++;
			len = (size_t)1 << k;
			if (k < MIN_PROBE_ORDER) {
				j += len;
				cap = MAX_FOLIO_ORDER;
				continue;
			}
			rc = read_entries(b->d->refs.kpageflags_fd, p + len / 2, &fl, 1);
			b->flag_reads += rc == 0;
			if (rc == 0 && !(fl & (1ULL << KPF_COMPOUND_TAIL))) {
				/* Not one folio: its first half may be, at one
				 * order less. */
				if (k > MIN_PROBE_ORDER && budget) {
					budget--;
					cap = k - 1;
				} else {
					j += len;
					cap = MAX_FOLIO_ORDER;
				}
				continue;
			}
			/* One folio, or not known: the probe failed. */
			found |= rc == 0;
			rc = rc == 0 ? check_folio(b, j, len, p) : unchecked(b, j, len);
			if (rc < 0)
				return rc;
			j += len;
			cap = MAX_FOLIO_ORDER;
		}
	}
	b->d->refs.found_folios = found;
	return 0;
}

/* Everything else: frames sorted, flags read once per span of up to SPAN
 * frames, none more than SPAN_GAP after the last. */
static int check_pages(struct batch *b)
{
	static uint64_t fl[SPAN];
	static struct frame fr[BATCH];
	size_t nf = 0;

	for (size_t j = 0; j < b->n; j++)
		if (framed(b, j))
			fr[nf++] = (struct frame){ b->pm[j] & MSQ_PM_PFN_MASK, (uint32_t)j };
	qsort(fr, nf, sizeof(*fr), cmp_frame);
	for (size_t j = 0; j < nf;) {
		uint64_t first = fr[j].pfn;
		size_t k = j + 1, span;

		/* Each frame read costs the kernel a page snapshot: a span
		 * takes in a gap of a few frames, not hundreds. */
		while (k < nf && fr[k].pfn - first < SPAN && fr[k].pfn - fr[k - 1].pfn <= SPAN_GAP)
			k++;
		span = (size_t)(fr[k - 1].pfn - first + 1);
		if (read_entries(b->d->refs.kpageflags_fd, first, fl, span) < 0) {
			for (size_t x = j; x < k; x++)
				if (unchecked(b, fr[x].idx, 1) < 0)
					return -ENOMEM;
			j = k;
			continue;
		}
		b->flag_reads += span;
		for (size_t x = j; x < k; x++) {
			size_t i = fr[x].idx;

			if ((in_use(fl[fr[x].pfn - first]) || !(b->pm[i] & MSQ_PM_EXCLUSIVE)) &&
			    keep_pages(b, i, 1) < 0)
				return -ENOMEM;
		}
		j = k;
	}
	return 0;
}

int msqd_refs_filter(struct msq_engine *e, struct msq_stream *s, struct msq_extents *drop, void *arg)
{
	const struct msqd_refs_check *chk = arg;
	struct msqd *d = chk->d;
	struct msqd_cg *g = chk->cg;
	static uint64_t pm[BATCH];
	static bool done[BATCH];
	struct msq_extents keep = MSQ_EXTENTS_INIT;
	struct batch b = { .d = d, .pm = pm, .done = done, .keep = &keep };
	int rc = 0;

	if (!g)
		return 0;
	for (size_t i = 0; i < drop->n && rc == 0; i++) {
		for (uint64_t a = drop->v[i].start; a < drop->v[i].end && rc == 0;) {
			/* Rounded up: a range that ends inside a page still
			 * advances (validate.c keeps client ranges whole pages;
			 * this loop must not depend on it). */
			size_t n = (size_t)((drop->v[i].end - a + 4095) / 4096);
			bool unknown;

			if (n > BATCH)
				n = BATCH;
			unknown = MSQ_FAULT("madvseq/daemon/proc/pagemap") ||
				  pread(e->pm.fd, pm, n * 8, (off_t)(a / 4096 * 8)) != (ssize_t)(n * 8);
			for (size_t j = 0; j < n && !unknown; j++)
				if ((pm[j] & MSQ_PM_PRESENT) && (pm[j] & MSQ_PM_FILE) &&
				    !(pm[j] & MSQ_PM_PFN_MASK)) {
					refs_lost(d, "page frame numbers are hidden (needs CAP_SYS_ADMIN)");
					goto out;
				}
			b.a = a;
			b.n = n;
			memset(done, 0, n * sizeof(*done));
			if (!unknown) {
				rc = check_folios(&b);
				if (rc == 0)
					rc = check_pages(&b);
			}
			/* A pagemap read that failed leaves the batch unchecked:
			 * keep it rather than drop what may be in use. */
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
	g->kept_strong += b.kept;
	d->cnt.kept_strong += b.kept;
	d->refs.flag_reads += b.flag_reads;
out:
	msq_extents_free(&keep);
	return rc;
}

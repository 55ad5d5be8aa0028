/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "stream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"
#include "plan.h"
#include "sys.h"

#define PAGE 4096u
/* Each cycle also reads this much of the region round-robin, to find
 * readers that started since the last cycle. */
#define SWEEP_BYTES (UINT64_C(32) << 20)
/* With PAGEMAP_SCAN: how often the whole region is read (find_present). */
#define FULL_SCAN_NS (UINT64_C(100) * 1000 * 1000)
#define MAX_WINDOWS 16
/* Without PAGEMAP_SCAN (before 6.7) pagemap is read entry by entry, 8
 * bytes a page, holes included: 32 GiB for the 16 TiB a client may map.
 * There a flush reads a whole region only up to this size (8 MiB of
 * entries); a larger one, as a cycle does (find_present). */
#define WHOLE_READ_MAX (UINT64_C(4) << 30)
#define MAX_IOV 1024 /* UIO_MAXIOV */

void msq_engine_init(struct msq_engine *e, int pidfd, uint64_t lag)
{
	*e = (struct msq_engine){
		.pm = { .fd = -1 },
		.pidfd = pidfd,
		.lag = lag,
		.kept_retry_ns = UINT64_C(1000) * 1000 * 1000,
	};
}

void msq_engine_free(struct msq_engine *e)
{
	msq_extents_free(&e->present);
	msq_extents_free(&e->anon);
	msq_extents_free(&e->drop);
	msq_extents_free(&e->after);
	msq_extents_free(&e->retry);
}

const char *msq_drop_how_name(enum msq_drop_how how)
{
	switch (how) {
	case MSQ_DROP_PAGEOUT: return "pageout";
	case MSQ_DROP_UNMAP_FADVISE: return "unmap+fadvise";
	case MSQ_DROP_COLD: return "cold";
	case MSQ_DROP_NONE: return "none";
	}
	return "?";
}

int msq_stream_init(struct msq_stream *s, uint64_t start, uint64_t end, uint64_t file_off,
		    dev_t dev, ino_t ino, const char *path, bool shared, bool writable,
		    enum msq_mode mode, bool may_write)
{
	char *p = NULL;

	if (path) {
		if (MSQ_FAULT("madvseq/alloc"))
			return -ENOMEM;
		p = strdup(path);
		if (!p)
			return -ENOMEM;
	}
	*s = (struct msq_stream){
		.start = start, .end = end, .file_off = file_off,
		.dev = dev, .ino = ino, .path = p,
		.shared = shared, .writable = writable,
		.sweep = start,
	};
	if (mode == MSQ_MODE_OFF)
		s->how = MSQ_DROP_NONE;
	else if (mode == MSQ_MODE_COLD)
		s->how = MSQ_DROP_COLD;
	else if (shared && !writable && path)
		/* Zapping our own PTEs and then dropping from the file what
		 * nobody maps costs the machine less than MADV_PAGEOUT's
		 * reclaim (no reverse-map walk, a TLB flush per range rather
		 * than per batch), and no data can be lost: a shared mapping
		 * holds no copy-on-write pages, and a dirty one hands its
		 * dirty bits to the file. */
		s->how = MSQ_DROP_UNMAP_FADVISE;
	else if (may_write)
		s->how = MSQ_DROP_PAGEOUT;
	else if ((shared || !writable) && path)
		/* MADV_PAGEOUT silently skips file pages of files we may not
		 * write.  Zapping our own PTEs is safe where no copy-on-write
		 * data can appear (shared, or private and read-only; a private
		 * mapping made writable is untracked first). */
		s->how = MSQ_DROP_UNMAP_FADVISE;
	else
		s->how = MSQ_DROP_COLD;
	return 0;
}

void msq_stream_free(struct msq_stream *s)
{
	free(s->path);
	msq_extents_free(&s->precached);
	msq_extents_free(&s->kept);
	msq_extents_free(&s->cursors);
	msq_extents_free(&s->written);
	memset(s, 0, sizeof(*s));
}

static int copy_shifted(struct msq_stream *dst, const struct msq_stream *src, uint64_t start,
			uint64_t end, int64_t delta)
{
	struct msq_stream n = *src;
	int rc;

	n.path = NULL;
	n.precached = n.kept = n.cursors = n.written = MSQ_EXTENTS_INIT;
	if (src->path && (MSQ_FAULT("madvseq/alloc") || !(n.path = strdup(src->path)))) {
		rc = -ENOMEM;
		goto fail;
	}
	if ((rc = msq_extents_copy_clip(&n.precached, &src->precached, start, end, delta)) < 0 ||
	    (rc = msq_extents_copy_clip(&n.kept, &src->kept, start, end, delta)) < 0 ||
	    (rc = msq_extents_copy_clip(&n.cursors, &src->cursors, start, end + 1, delta)) < 0)
		goto fail;
	n.start = start + (uint64_t)delta;
	n.end = end + (uint64_t)delta;
	n.file_off = src->file_off + (start - src->start);
	n.sweep = n.start;
	n.full_scan_ns = 0;
	/* The part read front to back, as far as it lies inside the piece;
	 * a piece that begins past it has no such part yet. */
	n.rt.through = start == src->start && src->rt.through > start ?
			       (src->rt.through < end ? src->rt.through : end) + (uint64_t)delta :
			       n.start;
	n.rt.seen = 0;
	n.rt.dropped = n.start; /* (what went is planned again: a no-op) */
	n.news_ns = 0;
	n.next_look_ns = 0;
	memset(&n.st, 0, sizeof(n.st));
	*dst = n;
	return 0;
fail:
	msq_stream_free(&n);
	return rc;
}

int msq_stream_clip(struct msq_stream *dst, const struct msq_stream *src, uint64_t start,
		    uint64_t end)
{
	return copy_shifted(dst, src, start, end, 0);
}

int msq_stream_move(struct msq_stream *dst, const struct msq_stream *src, uint64_t new_start,
		    uint64_t new_end)
{
	int rc = copy_shifted(dst, src, src->start, src->end, (int64_t)(new_start - src->start));

	if (rc == 0)
		dst->end = new_end;
	return rc;
}

/*
 * Reads present pages of [ws, we), extending past we while a run goes on,
 * and before ws while one goes on there: runs are read whole.  A run read
 * from its middle would be cut in two by the drop, and its first part, cut
 * off from the reader, taken for a reader of its own next time (a backlog
 * that a failed cycle left, or a lag made shorter).
 */
static int scan_window(struct msq_engine *e, struct msq_stream *s, uint64_t ws, uint64_t we)
{
	struct msq_extents *anon = s->shared ? NULL : &e->anon;
	uint64_t lo = ws, grow = 4 * MSQ_CHUNK;
	int rc;

	for (;;) {
		rc = msq_present_ranges(&e->pm, ws, we, &e->present, anon);
		if (rc < 0 || we >= s->end || !msq_extents_overlaps(&e->present, we - PAGE, we))
			break;
		ws = we;
		we = we + grow < s->end ? we + grow : s->end;
		grow *= 2;
	}
	for (grow = 4 * MSQ_CHUNK; rc == 0 && lo > s->start;) {
		uint64_t a = lo - s->start > grow ? lo - grow : s->start;

		if (!msq_extents_overlaps(&e->present, lo, lo + PAGE))
			break;
		rc = msq_present_ranges(&e->pm, a, lo, &e->present, anon);
		lo = a;
		grow *= 2;
	}
	return rc;
}

/*
 * A mapping read with no advice, between two whole reads (PAGEMAP_SCAN,
 * FULL_SCAN_NS): the part read front to back lies behind `through', and
 * what of it did not go with a drop (rt.dropped) is taken as present
 * unread.  Only the rest of the mapping is read, from the chunk where the
 * part ends.  A table file read at a gigabyte a second is looked at five
 * or six times while it is read: read whole each time, its pages were
 * walked three times over (the largest part of the looks' cost next to a
 * LevelDB scan).  What reclaim took from the part meanwhile is advised
 * again, a no-op; a page read again behind the part waits for the next
 * whole read.  Only where the drop never discards: MADV_PAGEOUT, or
 * MADV_DONTNEED of a shared mapping.  A copy-on-write page in the part (a
 * private mapping made writable by a raw mprotect) is not seen here to be
 * kept out of the advice.
 */
static int find_present_past_through(struct msq_engine *e, struct msq_stream *s)
{
	uint64_t lo = msq_chunk_floor(s->rt.through, s->start, s->file_off);
	uint64_t gone = s->rt.dropped > s->start ? s->rt.dropped : s->start;
	int rc;

	if (lo < s->start)
		lo = s->start;
	if (gone < lo && (rc = msq_extents_add(&e->present, gone, lo)) < 0)
		return rc;
	for (size_t i = 0; i < e->retry.n; i++)
		if ((rc = scan_window(e, s, e->retry.v[i].start, e->retry.v[i].end)) < 0)
			return rc;
	return msq_present_ranges(&e->pm, lo, s->end, &e->present, NULL);
}

/*
 * Where the region's pages are present.  Reading all of it costs in
 * proportion to its size (and to the page tables the stream left behind:
 * 76 us a cycle for 2 GiB streamed, with PAGEMAP_SCAN), so most cycles
 * read windows around the readers seen last time and a slice of the rest
 * (the sweep), which finds new readers.  With PAGEMAP_SCAN the whole region
 * is still read every FULL_SCAN_NS, and whenever the readers are too many
 * to look at one by one, or none is known yet: a reader that starts
 * elsewhere waits at most that long to be seen, and the first reader of a
 * new stream is seen in its first cycle (a sweep moving through a cold
 * region misses a reader that a gigabyte-a-second stream moves ahead of
 * it; 100 ms of such a stream is 100 MiB cached).  Reading a region with
 * no reader costs little: PAGEMAP_SCAN skips page tables that hold nothing.
 * Without it a whole read costs 8 bytes a page: only a small region is
 * read whole for a flush; a larger one as in a cycle, and where it kept
 * pages (what lies far from every reader ever seen then stays).
 */
static int find_present(struct msq_engine *e, struct msq_stream *s, uint64_t now_ns, bool whole)
{
	int rc;

	msq_extents_clear(&e->present);
	msq_extents_clear(&e->anon);
	if (whole && !e->pm.scan && s->end - s->start > WHOLE_READ_MAX)
		whole = false;
	if (!whole && e->pm.scan && s->unadvised &&
	    (s->how == MSQ_DROP_PAGEOUT || (s->how == MSQ_DROP_UNMAP_FADVISE && s->shared)) &&
	    s->rt.through > s->start &&
	    now_ns - s->full_scan_ns < FULL_SCAN_NS) {
		if ((rc = find_present_past_through(e, s)) < 0)
			return rc;
	} else if (whole || (e->pm.scan && (s->cursors.n == 0 || s->cursors.n > MAX_WINDOWS ||
					    now_ns - s->full_scan_ns >= FULL_SCAN_NS))) {
		rc = msq_present_ranges(&e->pm, s->start, s->end, &e->present,
					s->shared ? NULL : &e->anon);
		if (rc < 0)
			return rc;
		s->full_scan_ns = now_ns;
	} else {
		/* Windows around the readers seen last time... */
		for (size_t i = 0; i < s->cursors.n; i++) {
			uint64_t c = s->cursors.v[i].start;
			uint64_t back = e->lag + 2 * MSQ_CHUNK;
			uint64_t ws = c - s->start > back ? c - back : s->start;
			uint64_t we = c + 2 * MSQ_CHUNK < s->end ? c + 2 * MSQ_CHUNK : s->end;

			if ((rc = scan_window(e, s, ws, we)) < 0)
				return rc;
		}
		/* ...kept pages due for a retry, which lie where a reader was:
		 * unread, they would be forgotten as kept and taken for a
		 * reader once the sweep comes across them... */
		for (size_t i = 0; i < e->retry.n; i++)
			if ((rc = scan_window(e, s, e->retry.v[i].start, e->retry.v[i].end)) < 0)
				return rc;
		/* ...and a slice of the rest, to find new ones. */
		if (s->sweep >= s->end || s->sweep < s->start)
			s->sweep = s->start;
		rc = scan_window(e, s, s->sweep,
				 s->end - s->sweep > SWEEP_BYTES ? s->sweep + SWEEP_BYTES : s->end);
		s->sweep += SWEEP_BYTES;
		if (rc < 0)
			return rc;
	}
	msq_extents_clear(&s->cursors);
	for (size_t i = 0; i < e->present.n; i++)
		if ((rc = msq_extents_add(&s->cursors, e->present.v[i].end, e->present.v[i].end + 1)) < 0)
			return rc;
	return 0;
}

static int advise(struct msq_engine *e, const struct msq_extents *set, int advice)
{
	struct iovec iov[MAX_IOV];
	size_t n = 0, want = 0;

	if (MSQ_FAULT("madvseq/madvise"))
		return -EAGAIN;
	for (size_t i = 0; i < set->n; i++) {
		void *a = (void *)(uintptr_t)set->v[i].start;
		size_t len = (size_t)(set->v[i].end - set->v[i].start);

		if (e->pidfd < 0) {
			int r = msq_sys_madvise(a, len, advice);

			if (r < 0)
				return r;
			continue;
		}
		iov[n++] = (struct iovec){ a, len };
		want += len;
		if (n == MAX_IOV || i + 1 == set->n) {
			struct timespec t0, t1;
			ssize_t got;
			int rc = 0;

			/* The CPU the call costs us: mostly the reclaim
			 * MADV_PAGEOUT does in the caller's context. */
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
			got = msq_process_madvise(e->pidfd, iov, n, advice);
			if (got < 0)
				rc = -errno;
			else if ((size_t)got < want)
				/* The kernel stopped at a range it could not
				 * advise and returns what it did before: the
				 * rest was not advised.  A failed cycle, not
				 * pages that "stayed mapped" (kept). */
				rc = -EAGAIN;
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
			e->advice_cpu_ns += (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000L +
						       (t1.tv_nsec - t0.tv_nsec));
			if (rc < 0)
				return rc;
			n = 0;
			want = 0;
		}
	}
	return 0;
}

/* Opens the mapped file by path, checking it is still the same file. */
int msq_open_same_file(const char *path, dev_t dev, ino_t ino, bool noatime, struct stat *st)
{
	int fd = -1;

	if (!path)
		return -ENOENT;
	if (noatime)
		fd = msq_sys_open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOATIME);
	if (fd < 0) /* (O_NOATIME needs the file's owner or CAP_FOWNER) */
		fd = msq_sys_open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return fd;
	if (fstat(fd, st) < 0 || st->st_dev != dev || st->st_ino != ino) {
		msq_sys_close(fd); /* renamed or replaced: not the file we map */
		return -ESTALE;
	}
	return fd;
}

static int open_mapped_file(const struct msq_stream *s)
{
	struct stat st;

	return msq_open_same_file(s->path, s->dev, s->ino, false, &st);
}

static int fadvise_range(int fd, const struct msq_stream *s, uint64_t start, uint64_t end)
{
	uint64_t off = s->file_off + (start - s->start);

	/* The raw syscall: the shim's own posix_fadvise wrapper must not see it. */
	return msq_sys_fadvise(fd, off, end - start, POSIX_FADV_DONTNEED);
}

static int keep_for_retry(const struct msq_engine *e, struct msq_stream *s, const struct msq_extents *set,
			  uint64_t now_ns);

/*
 * Adds to out the parts of set (addresses of s, open as fd) still in the
 * page cache: pages another process maps, dirty or locked ones, after
 * POSIX_FADV_DONTNEED.  cachestat says whether a range holds any (cheap on
 * a range just emptied); mincore of our own mapping says which (where our
 * page tables hold nothing it looks the page cache up).  Only where
 * mincore tells the truth (s->precached_known: a file we may write).
 */
static int still_cached(int fd, const struct msq_stream *s, const struct msq_extents *set,
			struct msq_extents *out)
{
	unsigned char vec[4096]; /* (16 MiB a call) */

	for (size_t i = 0; i < set->n; i++) {
		struct msq_cachestat_range cr = { s->file_off + (set->v[i].start - s->start),
						  set->v[i].end - set->v[i].start };
		struct msq_cachestat cs;
		int rc;

		if (msq_sys_cachestat(fd, &cr, &cs) == 0 && cs.nr_cache == 0)
			continue;
		if ((rc = msq_cached_ranges(set->v[i].start, set->v[i].end, vec, sizeof(vec), out)) < 0)
			return rc;
	}
	return 0;
}

/*
 * POSIX_FADV_DONTNEED of set (our PTEs of it gone): the file drops what
 * nobody maps.  What stays (still_cached) is kept and tried again after
 * kept_retry_ns, as MADV_PAGEOUT's leftovers are; its bytes in *left.
 */
static int fadvise_and_keep(struct msq_engine *e, struct msq_stream *s, int fd,
			    const struct msq_extents *set, uint64_t now_ns, uint64_t *left)
{
	int rc;

	*left = 0;
	if (MSQ_FAULT("madvseq/fadvise"))
		return -EIO;
	for (size_t i = 0; i < set->n; i++)
		if ((rc = fadvise_range(fd, s, set->v[i].start, set->v[i].end)) < 0)
			return rc;
	if (!s->precached_known)
		return 0; /* (mincore would call every page cached) */
	msq_extents_clear(&e->after);
	if ((rc = still_cached(fd, s, set, &e->after)) < 0)
		return rc;
	*left = msq_extents_total(&e->after);
	return keep_for_retry(e, s, &e->after, now_ns);
}

/*
 * Write-behind for streams written through a shared mapping: MADV_PAGEOUT
 * unmaps dirty pages but reclaim leaves them cached until written back.
 * fadvise(DONTNEED) starts that writeback and drops what is clean; ranges
 * stay pending, retried each cycle, until nothing of them is cached.
 * Never waits for I/O, never loses data: dirty pages are only written.
 */
static int write_behind(struct msq_stream *s)
{
	int fd, rc = 0;

	if (!s->written.n)
		return 0;
	if (MSQ_FAULT("madvseq/fadvise"))
		return -EIO;
	if ((fd = open_mapped_file(s)) < 0) {
		msq_extents_clear(&s->written);
		return fd;
	}
	for (size_t i = 0; i < s->written.n && rc == 0;) {
		struct msq_range r = s->written.v[i];
		struct msq_cachestat_range cr = { s->file_off + (r.start - s->start), r.end - r.start };
		struct msq_cachestat cs;

		rc = fadvise_range(fd, s, r.start, r.end);
		if (rc == 0 && (msq_sys_cachestat(fd, &cr, &cs) < 0 || cs.nr_cache == 0))
			rc = msq_extents_remove(&s->written, r.start, r.end); /* done (or unknowable) */
		else
			i++;
	}
	msq_sys_close(fd);
	return rc;
}

/* Whether the drop set holds pages retried (e->retry): kept, or asked of
 * the client a while ago and still there.  Those are dropped from here:
 * a client that does not make the drops it is asked still loses them. */
static bool asked_before(const struct msq_engine *e)
{
	for (size_t i = 0; i < e->drop.n; i++)
		if (msq_extents_covered(&e->retry, e->drop.v[i].start, e->drop.v[i].end))
			return true;
	return false;
}

/* Remembers set as kept pages of s: left out of its plans until
 * kept_retry_ns has passed, then planned again. */
static int keep_for_retry(const struct msq_engine *e, struct msq_stream *s, const struct msq_extents *set,
			  uint64_t now_ns)
{
	if (set->n && !s->kept.n)
		s->kept_until_ns = now_ns + e->kept_retry_ns;
	return msq_extents_add_all(&s->kept, set);
}

/* Drops e->drop of s the way `how' says (s->how, or COLD for an ask). */
static int drop(struct msq_engine *e, struct msq_stream *s, enum msq_drop_how how, uint64_t now_ns,
		uint64_t *dropped)
{
	uint64_t before = 0, left = 0;
	int fd, rc;

	for (size_t i = 0; i < e->drop.n; i++)
		before += msq_extents_covered(&e->present, e->drop.v[i].start, e->drop.v[i].end);
	if (before == 0)
		return 0;
	s->st.advice_calls++;
	if (e->ask && (how == MSQ_DROP_PAGEOUT || how == MSQ_DROP_COLD) && !asked_before(e)) {
		rc = e->ask(e, &e->drop, how == MSQ_DROP_COLD ? MSQ_MODE_COLD : MSQ_MODE_PAGEOUT,
			    e->ask_arg);
		if (rc == 0) {
			/* Not looked at again before the client had its time:
			 * what it could not drop is asked again then. */
			if ((rc = keep_for_retry(e, s, &e->drop, now_ns)) < 0)
				return rc;
			*dropped = before;
			return 0;
		}
		if (rc != -EAGAIN)
			return rc;
	}
again:
	switch (how) {
	case MSQ_DROP_NONE:
		return 0;
	case MSQ_DROP_COLD:
		/* Cold pages stay mapped: remember them so they are not advised
		 * again every cycle. */
		if ((rc = advise(e, &e->drop, MADV_COLD)) < 0)
			return rc;
		if ((rc = keep_for_retry(e, s, &e->drop, now_ns)) < 0)
			return rc;
		*dropped = before;
		return 0;
	case MSQ_DROP_UNMAP_FADVISE:
		if (e->pidfd >= 0)
			return -EPERM; /* process_madvise has no DONTNEED */
		/* The file first: once our PTEs are gone, pages a file
		 * deleted or replaced since left cached are seen by nothing.
		 * Such a mapping is paged out from now on. */
		if ((fd = open_mapped_file(s)) < 0) {
			how = s->how = s->precached_known ? MSQ_DROP_PAGEOUT : MSQ_DROP_COLD;
			goto again;
		}
		if ((rc = advise(e, &e->drop, MADV_DONTNEED)) == 0)
			rc = fadvise_and_keep(e, s, fd, &e->drop, now_ns, &left);
		msq_sys_close(fd);
		s->st.kept += left;
		*dropped = rc == 0 && before > left ? before - left : 0;
		return rc;
	case MSQ_DROP_PAGEOUT:
		if ((rc = advise(e, &e->drop, MADV_PAGEOUT)) < 0)
			return rc;
		/* Verify: what is still mapped is referenced elsewhere (mapped by
		 * another process), dirty, or locked.  Keep it. */
		msq_extents_clear(&e->after);
		for (size_t i = 0; i < e->drop.n; i++)
			if ((rc = msq_present_ranges(&e->pm, e->drop.v[i].start, e->drop.v[i].end,
						     &e->after, NULL)) < 0)
				return rc;
		if (s->shared && s->writable && (rc = msq_extents_add_all(&s->written, &e->drop)) < 0)
			return rc;
		left = msq_extents_total(&e->after);
		if ((rc = keep_for_retry(e, s, &e->after, now_ns)) < 0)
			return rc;
		s->st.kept += left;
		*dropped = before > left ? before - left : 0;
		return 0;
	}
	return 0;
}

/*
 * The last drop of a read-only mapping read with no advice (munmap, exit):
 * MADV_PAGEOUT takes only mapped pages, and the reclaim it runs may unmap
 * a folio it then cannot free (seen on a 96 MiB file read through at a
 * gigabyte a second: 4-18 MiB so left cached in 5 runs of 6).  No look
 * sees such pages (looks read page tables), and after munmap nothing
 * looks at all.  So the part read front to back, less what was cached
 * before, goes from the file too: POSIX_FADV_DONTNEED, which leaves any
 * page still mapped, here or in another process.
 */
static void fadvise_read_through(const struct msq_stream *s)
{
	uint64_t a = s->start, end = msq_read_through_limit(s->start, s->end, s->file_off,
							     s->rt.through);
	int fd;

	if (MSQ_FAULT("madvseq/fadvise") || a >= end || (fd = open_mapped_file(s)) < 0)
		return;
	for (size_t i = 0; i <= s->precached.n && a < end; i++) {
		uint64_t b = i < s->precached.n ? s->precached.v[i].start : end;

		if (a < (b < end ? b : end))
			(void)fadvise_range(fd, s, a, b < end ? b : end);
		if (i < s->precached.n)
			a = s->precached.v[i].end;
	}
	msq_sys_close(fd);
}

/*
 * Kept pages of a stream dropped with MADV_DONTNEED (left cached because
 * another process mapped them) are no longer in our page tables, so no
 * look sees them.  At their retry the file is asked again to drop them:
 * what is still mapped elsewhere stays kept, the rest goes.  Those our own
 * reader mapped again are left to the plan, as all present pages are.
 */
static int retry_unmapped(struct msq_engine *e, struct msq_stream *s, uint64_t now_ns,
			  uint64_t *dropped)
{
	uint64_t before = 0, left;
	int fd, rc;

	if ((rc = msq_extents_remove_all(&e->retry, &e->present)) < 0)
		return rc;
	if (!e->retry.n || (fd = open_mapped_file(s)) < 0)
		return 0; /* (gone: the next drop pages out instead) */
	for (size_t i = 0; i < e->retry.n; i++) {
		struct msq_cachestat_range cr = { s->file_off + (e->retry.v[i].start - s->start),
						  e->retry.v[i].end - e->retry.v[i].start };
		struct msq_cachestat cs;

		before += msq_sys_cachestat(fd, &cr, &cs) == 0 ? cs.nr_cache * PAGE : cr.len;
	}
	rc = fadvise_and_keep(e, s, fd, &e->retry, now_ns, &left);
	msq_sys_close(fd);
	if (rc == 0 && before > left)
		*dropped += before - left;
	s->st.kept += left;
	return rc;
}

/* Removes from e->drop whole chunks around the anonymous pages in e->anon. */
static int keep_out_anon(struct msq_engine *e, const struct msq_stream *s)
{
	int rc;

	/* Copy-on-write data lives in anonymous pages of private mappings:
	 * keep whole chunks around it out of any advice. */
	for (size_t i = 0; i < e->anon.n; i++) {
		uint64_t lo = msq_chunk_floor(e->anon.v[i].start, s->start, s->file_off);
		uint64_t hi = msq_chunk_floor(e->anon.v[i].end + MSQ_CHUNK - 1, s->start, s->file_off);

		if ((rc = msq_extents_remove(&e->drop, lo, hi)) < 0)
			return rc;
	}
	return 0;
}

/* When to look at a mapping read with no advice again (struct msq_stream). */
static void pace_unadvised(struct msq_stream *s, uint64_t now_ns, bool found)
{
	uint64_t quiet;
	bool fresh;

	if (!s->first_look_ns)
		s->first_look_ns = now_ns;
	fresh = !s->ever_read && now_ns - s->first_look_ns < MSQ_FRESH_NS;
	s->ever_read |= found;
	if (!s->rt.idle || !s->news_ns)
		s->news_ns = now_ns;
	quiet = now_ns - s->news_ns;
	s->next_look_ns = 0;
	if (!fresh && quiet >= MSQ_QUIET_NS)
		s->next_look_ns = now_ns + (quiet < MSQ_QUIET_LOOK_MAX_NS ? quiet : MSQ_QUIET_LOOK_MAX_NS);
}

int64_t msq_stream_cycle(struct msq_engine *e, struct msq_stream *s, uint64_t now_ns, bool flush)
{
	struct msq_plan_in in = {
		.present = &e->present, .keep = &s->precached, .retry = &e->retry,
		.start = s->start, .end = s->end, .file_off = s->file_off,
		.lag = e->lag, .flush = flush,
	};
	uint64_t dropped = 0;
	int rc;

	if (s->how == MSQ_DROP_NONE)
		return 0;
	if (s->unadvised && !flush && now_ns < s->next_look_ns)
		return 0; /* nothing moved in it lately */
	s->st.cycles++;
	msq_extents_clear(&e->retry);
	if (s->kept.n && (flush || now_ns >= s->kept_until_ns)) {
		/* Strong references may be gone: plan the kept pages again.
		 * The reader has usually moved on, so they lie apart from its
		 * run; only as a retry are they not taken for a reader that
		 * stopped (and kept as its lag for as long as the mapping). */
		struct msq_extents t = e->retry;

		e->retry = s->kept;
		s->kept = t;
		msq_extents_clear(&s->kept);
	}
	if (s->written.n && e->pidfd < 0 && (rc = write_behind(s)) < 0)
		goto fail;
	if ((rc = find_present(e, s, now_ns, flush)) < 0)
		goto fail;
	msq_extents_clear(&e->drop);
	if ((rc = s->unadvised ? msq_plan_read_through(&in, &s->rt, &e->drop) :
				 msq_plan(&in, &e->drop)) < 0)
		goto fail;
	if (s->unadvised)
		pace_unadvised(s, now_ns, e->present.n != 0);
	if ((rc = msq_extents_remove_all(&e->drop, &s->kept)) < 0)
		goto fail;
	if ((rc = keep_out_anon(e, s)) < 0)
		goto fail;
	if (e->filter && e->drop.n && (rc = e->filter(e, s, &e->drop, e->filter_arg)) < 0)
		goto fail;
	if ((rc = drop(e, s, s->how, now_ns, &dropped)) < 0)
		goto fail;
	if (s->unadvised && s->rt.limit > s->rt.dropped)
		s->rt.dropped = s->rt.limit;
	if (s->how == MSQ_DROP_UNMAP_FADVISE && e->retry.n && (rc = retry_unmapped(e, s, now_ns, &dropped)) < 0)
		goto fail;
	if (flush && s->unadvised && e->pidfd < 0 &&
	    (s->how == MSQ_DROP_PAGEOUT || s->how == MSQ_DROP_UNMAP_FADVISE))
		fadvise_read_through(s);
	s->st.dropped += dropped;
	return (int64_t)dropped;
fail:
	s->st.errors++;
	s->st.last_error = rc;
	s->st.dropped += dropped;
	return rc;
}

int64_t msq_stream_drop_asked(struct msq_engine *e, struct msq_stream *s, uint64_t start,
			      uint64_t end, enum msq_mode mode, uint64_t now_ns)
{
	uint64_t dropped = 0;
	int rc;

	if (start < s->start)
		start = s->start;
	if (end > s->end)
		end = s->end;
	if (start >= end || s->how == MSQ_DROP_NONE)
		return 0;
	msq_extents_clear(&e->present);
	msq_extents_clear(&e->anon);
	msq_extents_clear(&e->drop);
	if ((rc = msq_present_ranges(&e->pm, start, end, &e->present, s->shared ? NULL : &e->anon)) < 0 ||
	    (rc = msq_extents_add_all(&e->drop, &e->present)) < 0)
		goto fail;
	if ((rc = msq_extents_remove_all(&e->drop, &s->precached)) < 0 ||
	    (rc = keep_out_anon(e, s)) < 0 ||
	    (rc = drop(e, s, mode == MSQ_MODE_COLD ? MSQ_DROP_COLD : s->how, now_ns, &dropped)) < 0)
		goto fail;
	/* (not in s->st.dropped: the manager that decided counts it) */
	return (int64_t)dropped;
fail:
	s->st.errors++;
	s->st.last_error = rc;
	return rc;
}

int msq_stream_drop_all_on_exit(const struct msq_stream *s)
{
	int advice = s->how == MSQ_DROP_COLD ? MADV_COLD :
		     s->how == MSQ_DROP_UNMAP_FADVISE ? MADV_DONTNEED : MADV_PAGEOUT;
	uint64_t a = s->start;
	int fd = -1, rc = 0;
	/* A mapping read with no advice: only what was read front to back. */
	uint64_t end = s->unadvised ? msq_read_through_limit(s->start, s->end, s->file_off,
							      s->rt.through)
				    : s->end;

	if (s->how == MSQ_DROP_NONE)
		return 0;
	/* (A file deleted or replaced since: paged out, as a cycle would.) */
	if (s->how == MSQ_DROP_UNMAP_FADVISE && (fd = open_mapped_file(s)) < 0)
		advice = s->precached_known ? MADV_PAGEOUT : MADV_COLD;
	/* What reclaim unmapped but left cached (fadvise_read_through). */
	if (s->unadvised && s->how == MSQ_DROP_PAGEOUT && !MSQ_FAULT("madvseq/fadvise"))
		fd = open_mapped_file(s);
	for (size_t i = 0; i <= s->precached.n && a < end; i++) {
		uint64_t b = i < s->precached.n ? s->precached.v[i].start : end;

		if (b > end)
			b = end;
		if (a < b) {
			int r = msq_sys_madvise((void *)(uintptr_t)a, (size_t)(b - a), advice);

			if (r < 0)
				rc = r;
		}
		if (a < b && fd >= 0)
			fadvise_range(fd, s, a, b);
		if (i < s->precached.n)
			a = s->precached.v[i].end;
	}
	if (fd >= 0)
		msq_sys_close(fd);
	return rc;
}

uint64_t msq_stream_progress(const struct msq_stream *s)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < s->cursors.n; i++)
		sum += s->cursors.v[i].end;
	return sum;
}

uint64_t msq_next_period(uint64_t period_ns, uint64_t dropped, uint64_t moved, uint64_t target,
			 uint64_t min_ns, uint64_t max_ns)
{
	uint64_t work = dropped > moved ? dropped : moved;

	if (work > target)
		period_ns = period_ns * target / work;
	else if (!moved && dropped < target / 2)
		period_ns *= 2;
	if (period_ns < min_ns)
		period_ns = min_ns;
	if (period_ns > max_ns)
		period_ns = max_ns;
	return period_ns;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One engine cycle against the real kernel: what lies behind the reader
 * leaves the page cache; pages cached before, and pages another process
 * maps, stay. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "stream.h"
#include "sys.h"

#define M (UINT64_C(1) << 20)
#define SIZE (64 * M)
/* What the other process maps beyond what it touched: fault-around (64 KiB),
 * or the rest of a large folio (ext4 has them since 6.16), up to 2 MiB. */
#define FAULT_AROUND (2 * M)

/* Bytes of [off, off+len) of fd in the page cache. */
static uint64_t cached(int fd, uint64_t off, uint64_t len)
{
	struct msq_cachestat_range r = { off, len };
	struct msq_cachestat cs;

	if (msq_cachestat(fd, &r, &cs) < 0) {
		perror("cachestat");
		exit(77);
	}
	return cs.nr_cache * 4096;
}

static void touch(const unsigned char *p, uint64_t from, uint64_t to)
{
	volatile unsigned sum = 0;

	for (uint64_t i = from; i < to; i += 4096)
		sum += p[i];
	(void)sum;
}

/* A sparse 256 MiB file, mapped shared with MADV_SEQUENTIAL, and a
 * stream over the mapping with nothing cached before. */
struct sparse_stream {
	char path[32];
	int fd;
	unsigned char *p;
	struct msq_stream s;
};

#define SPARSE_SIZE (256 * M)

static void sparse_stream_open(struct sparse_stream *t, bool advised)
{
	struct stat st;

	snprintf(t->path, sizeof(t->path), "stream-test-XXXXXX");
	t->fd = mkstemp(t->path);
	CHECK(t->fd >= 0);
	CHECK(ftruncate(t->fd, (off_t)SPARSE_SIZE) == 0);
	t->p = mmap(NULL, SPARSE_SIZE, PROT_READ, MAP_SHARED, t->fd, 0);
	CHECK(t->p != MAP_FAILED);
	CHECK(!advised || madvise(t->p, SPARSE_SIZE, MADV_SEQUENTIAL) == 0);
	CHECK(fstat(t->fd, &st) == 0);
	CHECK(msq_stream_init(&t->s, (uintptr_t)t->p, (uintptr_t)t->p + SPARSE_SIZE, 0, st.st_dev,
			      st.st_ino, t->path, true, false, MSQ_MODE_PAGEOUT, true) == 0);
	t->s.precached_known = true;
	t->s.unadvised = !advised;
}

static void sparse_stream_close(struct sparse_stream *t)
{
	msq_stream_free(&t->s);
	munmap(t->p, SPARSE_SIZE);
	close(t->fd);
	unlink(t->path);
}

/* A new stream's first reader is seen in the first cycle after it starts,
 * wherever it starts.  A slice-by-slice sweep through a region with no
 * known reader misses one that moves ahead of it, and a gigabyte-a-second
 * stream caches 100 MiB before the next whole read of the region. */
static void first_reader_seen_at_once(struct msq_engine *e)
{
	struct sparse_stream t;
	struct msq_stream *s = &t.s;
	unsigned char *p;
	int fd;

	sparse_stream_open(&t, true);
	p = t.p;
	fd = t.fd;
	if (!e->pm.scan) {
		printf("# no PAGEMAP_SCAN (Linux 6.7+): readers are found by the sweep; "
		       "first-reader check skipped\n");
	} else {
		CHECK_EQ(msq_stream_cycle(e, s, 1, false), 0); /* nobody reads yet */
		touch(p, 160 * M, 200 * M);
		CHECK(msq_stream_cycle(e, s, 2, false) > 0);
		CHECK_EQ(cached(fd, 160 * M, 16 * M), 0);
		CHECK(cached(fd, 184 * M, 16 * M) >= 14 * M); /* the lag stays */
	}
	sparse_stream_close(&t);
}

/* A backlog behind the reader longer than the window read around it (a
 * cycle failed, or the lag was made shorter) is read and dropped whole:
 * cut in two, its first part would be taken for a reader that stopped and
 * stay as that reader's lag. */
static void backlog_before_the_window(struct msq_engine *e)
{
	const uint64_t lag = e->lag;
	struct sparse_stream t;
	struct msq_stream *s = &t.s;
	unsigned char *p;
	int fd;

	sparse_stream_open(&t, true);
	p = t.p;
	fd = t.fd;
	if (!e->pm.scan) {
		printf("# no PAGEMAP_SCAN (Linux 6.7+): every cycle reads the whole region; "
		       "backlog check skipped\n");
	} else {
		e->lag = 64 * M;
		touch(p, 0, 96 * M);
		CHECK(msq_stream_cycle(e, s, 1, false) > 0); /* whole read: no reader known */
		CHECK_EQ(cached(fd, 0, 32 * M), 0);
		CHECK(cached(fd, 32 * M, 64 * M) >= 62 * M);
		/* The lag shrinks to 16M; the reader moves 4M.  The window read
		 * around it starts 20M behind it; the sweep is elsewhere. */
		e->lag = lag;
		touch(p, 96 * M, 100 * M);
		s->sweep = s->start + 192 * M;
		CHECK(msq_stream_cycle(e, s, 2, false) > 0);
		CHECK_EQ(cached(fd, 32 * M, 52 * M), 0);
		CHECK(cached(fd, 84 * M, 16 * M) >= 14 * M); /* the lag stays */
	}
	e->lag = lag;
	sparse_stream_close(&t);
}

/* A mapping read with no advice whose reader pauses for a cycle (a table
 * scan went on with another table for a millisecond) is looked at again
 * at the next cycle: left for 100 ms, a gigabyte-a-second reader reads
 * whole tables in the meantime, and they stay cached until then.  Only
 * once quiet for MSQ_QUIET_NS are its looks spaced, as far apart as it
 * has been quiet. */
static void unadvised_reader_pauses(struct msq_engine *e)
{
	const uint64_t ms = 1000 * 1000, lag = e->lag;
	struct sparse_stream t;
	struct msq_stream *s = &t.s;
	uint64_t looks;

	sparse_stream_open(&t, false);
	touch(t.p, 0, 8 * M);
	CHECK_EQ(msq_stream_cycle(e, s, 1 * ms, false), 0); /* within the lag */
	CHECK_EQ(s->rt.through - s->start, 8 * M);
	CHECK_EQ(msq_stream_cycle(e, s, 2 * ms, false), 0);
	CHECK(s->rt.idle);
	CHECK_EQ(s->next_look_ns, 0); /* quiet for 1 ms only */
	/* It reads the rest: the next cycle sees it, and the one after,
	 * finding nothing new in a mapping read through, drops it all. */
	touch(t.p, 8 * M, SPARSE_SIZE);
	CHECK(msq_stream_cycle(e, s, 3 * ms, false) > 0);
	CHECK_EQ(s->rt.through, s->end);
	CHECK(cached(t.fd, 0, SPARSE_SIZE - lag) == 0);
	CHECK(msq_stream_cycle(e, s, 4 * ms, false) > 0);
	CHECK_EQ(cached(t.fd, 0, SPARSE_SIZE), 0);
	/* Quiet since the look at 3 ms: looked at every cycle for
	 * MSQ_QUIET_NS... */
	CHECK_EQ(msq_stream_cycle(e, s, 5 * ms, false), 0);
	CHECK(s->rt.idle && s->next_look_ns == 0);
	/* ...then as far apart as it has been quiet. */
	CHECK_EQ(msq_stream_cycle(e, s, 3 * ms + MSQ_QUIET_NS, false), 0);
	CHECK_EQ(s->next_look_ns, 3 * ms + 2 * MSQ_QUIET_NS);
	looks = s->st.cycles;
	CHECK_EQ(msq_stream_cycle(e, s, 4 * ms + MSQ_QUIET_NS, false), 0);
	CHECK_EQ(s->st.cycles, looks); /* not looked at */
	CHECK_EQ(msq_stream_cycle(e, s, 3 * ms + 2 * MSQ_QUIET_NS, false), 0);
	CHECK_EQ(s->st.cycles, looks + 1);
	CHECK_EQ(s->next_look_ns, 3 * ms + 4 * MSQ_QUIET_NS);
	/* (at most MSQ_QUIET_LOOK_MAX_NS apart) */
	CHECK_EQ(msq_stream_cycle(e, s, 10000 * ms, false), 0);
	CHECK_EQ(s->next_look_ns, 10000 * ms + MSQ_QUIET_LOOK_MAX_NS);
	sparse_stream_close(&t);
}

/* Between two whole reads a look at a mapping read with no advice reads
 * only past the part read front to back; what of the part did not go is
 * taken as present.  A page read again behind the part goes at the next
 * whole read; one read past it is seen at once, and stays while the part
 * does not reach it. */
static void unadvised_look_past_the_part(struct msq_engine *e)
{
	const uint64_t ms = 1000 * 1000;
	struct sparse_stream t;
	struct msq_stream *s = &t.s;

	sparse_stream_open(&t, false);
	touch(t.p, 0, 8 * M);
	CHECK_EQ(msq_stream_cycle(e, s, 1 * ms, false), 0); /* whole: no part yet */
	CHECK_EQ(s->full_scan_ns, 1 * ms);
	touch(t.p, 8 * M, 8 * M + 2 * e->lag);
	CHECK(msq_stream_cycle(e, s, 2 * ms, false) > 0);
	CHECK_EQ(s->full_scan_ns, 1 * ms); /* read past the part only */
	CHECK_EQ(s->rt.through - s->start, 8 * M + 2 * e->lag);
	CHECK_EQ(cached(t.fd, 0, 8 * M + e->lag - MSQ_CHUNK), 0);
	CHECK_EQ(s->rt.dropped, s->rt.limit);
	CHECK(s->rt.dropped - s->start >= 8 * M + e->lag - MSQ_CHUNK);

	/* Read again behind the part: left to the next whole read. */
	touch(t.p, 0, MSQ_CHUNK);
	touch(t.p, 200 * M, 200 * M + 4096);
	CHECK(msq_stream_cycle(e, s, 3 * ms, false) >= 0);
	CHECK_EQ(cached(t.fd, 0, MSQ_CHUNK), MSQ_CHUNK);
	CHECK_EQ(cached(t.fd, 200 * M, 4096), 4096); /* seen, not in the part */
	CHECK_EQ(s->rt.through - s->start, 8 * M + 2 * e->lag);
	CHECK(msq_stream_cycle(e, s, 1 * ms + 100 * ms, false) >= 0);
	CHECK_EQ(s->full_scan_ns, 101 * ms);
	CHECK_EQ(cached(t.fd, 0, MSQ_CHUNK), 0);
	CHECK_EQ(cached(t.fd, 200 * M, 4096), 4096);

	/* Read through: all of it goes once a look finds nothing new. */
	touch(t.p, 8 * M + 2 * e->lag, SPARSE_SIZE);
	CHECK(msq_stream_cycle(e, s, 102 * ms, false) > 0);
	CHECK_EQ(s->rt.through, s->end);
	CHECK(msq_stream_cycle(e, s, 103 * ms, false) > 0);
	/* (What the kernel read ahead of the read again behind the part was
	 * never mapped and may stay: up to 6 MiB here.) */
	CHECK_EQ(cached(t.fd, 0, MSQ_CHUNK), 0);
	CHECK_EQ(cached(t.fd, 16 * M, SPARSE_SIZE - 16 * M), 0);
	sparse_stream_close(&t);
}

/* The ask hook (madvseqd asking its client to drop): records what it is
 * handed, or fails with -EAGAIN (a client whose socket is full). */
struct asked {
	uint64_t bytes;
	int calls;
	int rc;
};

static int record_ask(struct msq_engine *e, const struct msq_extents *set, enum msq_mode mode,
		      void *arg)
{
	struct asked *a = arg;

	(void)e;
	CHECK_EQ(mode, MSQ_MODE_PAGEOUT);
	a->calls++;
	if (a->rc)
		return a->rc;
	a->bytes += msq_extents_total(set);
	return 0;
}

/* With an ask hook the cycle hands its drop set over and drops nothing
 * itself; what it asked and finds still mapped after kept_retry_ns it
 * drops itself (a client that does not do as asked); a hook that cannot
 * ask (-EAGAIN) has the set dropped at once. */
static void asks_then_drops_what_stays(struct msq_engine *e)
{
	struct asked a = { 0 };
	struct sparse_stream t;
	struct msq_stream *s = &t.s;

	sparse_stream_open(&t, true);
	s->how = MSQ_DROP_PAGEOUT; /* (as madvseqd's cycle sets it) */
	e->ask = record_ask;
	e->ask_arg = &a;
	touch(t.p, 0, 64 * M);
	CHECK(msq_stream_cycle(e, s, 1, false) > 0);
	CHECK_EQ(a.calls, 1);
	CHECK(a.bytes >= 40 * M && a.bytes <= 48 * M);
	CHECK(cached(t.fd, 0, 40 * M) >= 38 * M); /* asked, not dropped */
	/* Before the retry: not asked again. */
	touch(t.p, 64 * M, 66 * M);
	msq_stream_cycle(e, s, 2, false);
	CHECK(cached(t.fd, 0, 40 * M) >= 38 * M);
	/* At the retry, still there: dropped from here. */
	s->full_scan_ns = 0;
	CHECK(msq_stream_cycle(e, s, 3 + e->kept_retry_ns, false) > 0);
	CHECK(cached(t.fd, 0, 40 * M) <= FAULT_AROUND);
	/* A hook that cannot ask: dropped at once. */
	a.rc = -EAGAIN;
	touch(t.p, 66 * M, 128 * M);
	CHECK(msq_stream_cycle(e, s, 4 + e->kept_retry_ns, false) > 0);
	CHECK(cached(t.fd, 66 * M, 40 * M) <= FAULT_AROUND);
	e->ask = NULL;
	e->ask_arg = NULL;
	sparse_stream_close(&t);
}

/* What the client makes of an ask (msq_stream_drop_asked): present pages
 * of the range go, but nothing cached before and no chunk holding
 * copy-on-write data, whose bytes stay as written. */
static void asked_drop_keeps_cow_and_precached(struct msq_engine *e)
{
	char path[] = "stream-test-XXXXXX";
	int fd = mkstemp(path);
	unsigned char *p;
	struct msq_stream s;

	CHECK(fd >= 0 && ftruncate(fd, (off_t)(32 * M)) == 0);
	p = mmap(NULL, 32 * M, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	CHECK(p != MAP_FAILED);
	CHECK(msq_stream_init(&s, (uintptr_t)p, (uintptr_t)p + 32 * M, 0, 0, 0, path, false, true,
			      MSQ_MODE_PAGEOUT, true) == 0);
	msq_extents_add(&s.precached, (uintptr_t)p + 24 * M, (uintptr_t)p + 26 * M);
	s.precached_known = true;
	touch(p, 0, 32 * M);
	p[5 * M + 100] = 0xa5; /* copy-on-write: an anonymous page in [4M, 6M) */
	CHECK(msq_stream_drop_asked(e, &s, (uintptr_t)p, (uintptr_t)p + 32 * M, MSQ_MODE_PAGEOUT, 1) > 0);
	CHECK(cached(fd, 0, 4 * M) <= FAULT_AROUND);
	CHECK_EQ(cached(fd, 4 * M, 2 * M), 2 * M);   /* the chunk around the copy */
	CHECK_EQ(cached(fd, 24 * M, 2 * M), 2 * M);  /* cached before */
	CHECK(cached(fd, 6 * M, 18 * M) <= FAULT_AROUND);
	CHECK_EQ(p[5 * M + 100], 0xa5);
	/* Outside the stream: nothing. */
	CHECK_EQ(msq_stream_drop_asked(e, &s, (uintptr_t)p + 32 * M, (uintptr_t)p + 40 * M,
				       MSQ_MODE_PAGEOUT, 2), 0);
	msq_stream_free(&s);
	munmap(p, 32 * M);
	close(fd);
	unlink(path);
}

/*
 * Strong references, both ways of dropping: MADV_PAGEOUT (a private
 * read-only mapping of a file we may write) and MADV_DONTNEED of our own
 * PTEs then POSIX_FADV_DONTNEED (a shared read-only one).  Pages another
 * process maps stay, also at their retry, and go at the retry after it
 * lets go; what was cached before stays; a flush leaves only that.
 */
static void strong_references(const char *path, int fd, bool shared)
{
	unsigned char *p, buf[4096];
	struct msq_engine e;
	struct msq_stream s;
	struct stat st;
	int up[2], down[2];
	pid_t child;
	int64_t d;

	printf("strong references, %s mapping\n", shared ? "shared" : "private");
	posix_fadvise(fd, 0, SIZE, POSIX_FADV_DONTNEED);
	CHECK(cached(fd, 0, SIZE) <= 4 * M);
	/* Cached before tracking: [40M, 44M). */
	for (uint64_t i = 0; i < 4 * M; i += sizeof(buf))
		CHECK(pread(fd, buf, sizeof(buf), (off_t)(40 * M + i)) == (ssize_t)sizeof(buf));
	p = mmap(NULL, SIZE, PROT_READ, shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
	CHECK(p != MAP_FAILED);
	CHECK(madvise(p, SIZE, MADV_SEQUENTIAL) == 0);
	msq_engine_init(&e, -1, 16 * M);
	CHECK(msq_pagemap_open(&e.pm, "/proc", 0, 0) == 0);
	CHECK(fstat(fd, &st) == 0);
	CHECK(msq_stream_init(&s, (uintptr_t)p, (uintptr_t)p + SIZE, 0, st.st_dev, st.st_ino, path,
			      shared, false, MSQ_MODE_PAGEOUT, true) == 0);
	CHECK(s.how == (shared ? MSQ_DROP_UNMAP_FADVISE : MSQ_DROP_PAGEOUT));
	msq_extents_add(&s.precached, (uintptr_t)p + 40 * M, (uintptr_t)p + 44 * M);
	s.precached_known = true;

	/* Another process maps and holds [8M, 10M). */
	CHECK(pipe(up) == 0 && pipe(down) == 0);
	child = fork();
	if (child == 0) {
		char c;

		touch(p, 8 * M, 10 * M);
		if (write(up[1], "x", 1) != 1 || read(down[0], &c, 1) < 0) /* until the parent is done */
			_exit(1);
		_exit(0);
	}
	{
		char c;

		CHECK(read(up[0], &c, 1) == 1);
	}

	/* The reader is at 48M. */
	touch(p, 0, 48 * M);
	d = msq_stream_cycle(&e, &s, 1, false);
	CHECK(d > 0);
	CHECK(s.how == (shared ? MSQ_DROP_UNMAP_FADVISE : MSQ_DROP_PAGEOUT)); /* (no fallback) */
	/* Behind the lag (below 32M): gone, but for the other process's range. */
	CHECK(cached(fd, 0, 8 * M) == 0);
	CHECK_EQ(cached(fd, 8 * M, 2 * M), 2 * M);
	/* (fault-around or a large folio may have mapped more into the other process) */
	CHECK(cached(fd, 10 * M, 22 * M) <= FAULT_AROUND);
	/* Within the lag: still there.  Cached before: still there. */
	CHECK_EQ(cached(fd, 32 * M, 8 * M), 8 * M);
	CHECK_EQ(cached(fd, 40 * M, 4 * M), 4 * M);
	CHECK(s.st.kept >= 2 * M && s.st.kept <= 2 * M + FAULT_AROUND);
	CHECK(s.kept.n >= 1);

	/* The reader moves on: the kept range lies apart from its run now,
	 * and stays while the other process holds it, also once retried. */
	touch(p, 48 * M, 52 * M);
	CHECK(msq_stream_cycle(&e, &s, 2, false) >= 0);
	CHECK_EQ(cached(fd, 8 * M, 2 * M), 2 * M);
	CHECK(msq_stream_cycle(&e, &s, 2 + e.kept_retry_ns, false) >= 0);
	CHECK_EQ(cached(fd, 8 * M, 2 * M), 2 * M);
	CHECK(s.kept.n >= 1);

	/* The other process lets go: at the next retry the range goes,
	 * though no reader is near it (a run of its own is not a reader). */
	CHECK(write(down[1], "x", 1) == 1);
	CHECK(waitpid(child, NULL, 0) == child);
	/* (a cycle that reads only around the reader and the sweep's slice,
	 * as most do: the kept range is read because it is due) */
	s.full_scan_ns = 3 + 2 * e.kept_retry_ns;
	s.sweep = s.start + 32 * M;
	CHECK(msq_stream_cycle(&e, &s, 3 + 2 * e.kept_retry_ns, false) >= 0);
	CHECK(cached(fd, 8 * M, 2 * M) == 0);
	CHECK_EQ(s.kept.n, 0);

	/* The reader finishes: a flush leaves only what was cached before. */
	touch(p, 52 * M, SIZE);
	d = msq_stream_cycle(&e, &s, 4 + 2 * e.kept_retry_ns, true);
	CHECK(d > 0);
	CHECK(cached(fd, 0, SIZE) >= 4 * M && cached(fd, 0, SIZE) <= 4 * M + FAULT_AROUND);
	CHECK_EQ(cached(fd, 40 * M, 4 * M), 4 * M);

	/* Data still reads back intact. */
	for (uint64_t i = 0; i < SIZE; i += 4096)
		if (p[i] != 0x5a) {
			CHECK(p[i] == 0x5a);
			break;
		}
	msq_stream_free(&s);
	msq_pagemap_close(&e.pm);
	msq_engine_free(&e);
	munmap(p, SIZE);
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
}

/* A file deleted while mapped cannot be opened to drop from: once our
 * PTEs went, what it kept cached would be seen by nothing.  Its mapping
 * is paged out instead, and still leaves nothing behind. */
static void deleted_file_pages_out(struct msq_engine *e)
{
	struct sparse_stream t;
	int64_t d;

	sparse_stream_open(&t, true);
	CHECK(t.s.how == MSQ_DROP_UNMAP_FADVISE);
	CHECK(unlink(t.path) == 0);
	touch(t.p, 0, 64 * M);
	d = msq_stream_cycle(e, &t.s, 1, false);
	CHECK(d >= (int64_t)(40 * M) && d <= (int64_t)(48 * M));
	CHECK(t.s.how == MSQ_DROP_PAGEOUT);
	CHECK(cached(t.fd, 0, 40 * M) <= FAULT_AROUND);
	CHECK_EQ(cached(t.fd, 48 * M, 16 * M), 16 * M); /* the lag */
	sparse_stream_close(&t);
}

int main(void)
{
	char path[] = "stream-test-XXXXXX";
	struct msq_engine e;
	unsigned char *buf = malloc(M);
	int fd = mkstemp(path);

	CHECK(fd >= 0 && buf);
	/* One cycle is to take everything behind the reader.  MADV_PAGEOUT
	 * drains only this CPU's batch of pages waiting to join the LRU: a
	 * page faulted in while the test ran on another CPU may sit in that
	 * CPU's batch, cannot be isolated, and stays (a later cycle would
	 * take it).  Staying on one CPU keeps the one cycle whole. */
	{
		cpu_set_t one;
		int cpu = sched_getcpu();

		CPU_ZERO(&one);
		CPU_SET(cpu < 0 ? 0 : cpu, &one);
		sched_setaffinity(0, sizeof(one), &one);
	}
	memset(buf, 0x5a, M);
	for (int i = 0; i < 64; i++)
		CHECK(write(fd, buf, M) == (ssize_t)M);
	fsync(fd);
	posix_fadvise(fd, 0, SIZE, POSIX_FADV_DONTNEED);
	if (cached(fd, 0, SIZE) > 4 * M) {
		printf("cannot evict the test file; skipping\n");
		unlink(path);
		return 77;
	}
	strong_references(path, fd, true);
	strong_references(path, fd, false);
	msq_engine_init(&e, -1, 16 * M);
	CHECK(msq_pagemap_open(&e.pm, "/proc", 0, 0) == 0);
	first_reader_seen_at_once(&e);
	backlog_before_the_window(&e);
	unadvised_reader_pauses(&e);
	unadvised_look_past_the_part(&e);
	asks_then_drops_what_stays(&e);
	asked_drop_keeps_cow_and_precached(&e);
	deleted_file_pages_out(&e);
	msq_pagemap_close(&e.pm);
	msq_engine_free(&e);
	close(fd);
	unlink(path);
	free(buf);
	CHECK_DONE();
}

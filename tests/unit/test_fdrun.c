/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The read path's decisions (preload/fdrun.c) against a fake page cache. */
#include <string.h>

#include "check.h"
#include "fdrun.h"

#define M (UINT64_C(1) << 20)
#define CH MSQ_CHUNK
#define NCH 256 /* a 512 MiB file */
#define PAGES_PER_CHUNK (CH / 4096)

/* Per chunk: cached pages, dirty pages; what the ops were asked. */
static struct fake {
	uint64_t cached[NCH], dirty[NCH];
	bool stay_dirty[NCH]; /* dontneed leaves it: someone dirties it again */
	int fail_cachestat;   /* cachestat fails from now on */
	unsigned ncachestat, ndontneed, nwriteback, nnap;
	uint64_t advised, advised_w, kept, noted;
	unsigned clean_after_naps; /* naps before dirty chunks turn clean (0: never) */
} f;

static int fk_cachestat(void *arg, uint64_t off, uint64_t len, struct msq_cachestat *cs)
{
	(void)arg;
	f.ncachestat++;
	if (f.fail_cachestat)
		return -1;
	memset(cs, 0, sizeof(*cs));
	for (uint64_t k = off / CH; k < NCH && k * CH < off + len; k++) {
		cs->nr_cache += f.cached[k];
		cs->nr_dirty += f.dirty[k];
	}
	return 0;
}

static int fk_dontneed(void *arg, uint64_t off, uint64_t len)
{
	(void)arg;
	f.ndontneed++;
	for (uint64_t k = off / CH; k < NCH && k * CH < off + len; k++)
		if (!f.dirty[k])
			f.cached[k] = 0;
	return 0;
}

static void fk_writeback(void *arg, uint64_t off, uint64_t len)
{
	(void)arg;
	(void)off;
	(void)len;
	f.nwriteback++;
}

static void fk_nap(void *arg)
{
	(void)arg;
	if (++f.nnap == f.clean_after_naps)
		for (int k = 0; k < NCH; k++)
			f.dirty[k] = 0;
}

static void fk_advised(void *arg, uint64_t n, bool writing)
{
	(void)arg;
	f.advised += n;
	if (writing)
		f.advised_w += n;
}

static void fk_kept(void *arg, uint64_t n)
{
	(void)arg;
	f.kept += n;
}

static void fk_note(void *arg, uint64_t lo, uint64_t hi, uint64_t pages, uint64_t reader)
{
	(void)arg;
	(void)lo;
	(void)hi;
	(void)reader;
	f.noted += pages;
}

static const struct msq_run_ops ops = { fk_cachestat, fk_dontneed, fk_writeback, fk_nap,
					fk_advised, fk_kept, fk_note };

static struct msq_stream st;
static struct msq_run_ctx ctx;

static void reset(void)
{
	memset(&f, 0, sizeof(f));
	memset(&st, 0, sizeof(st));
	msq_run_init(&st);
	st.snap_ahead = MSQ_SNAP_AHEAD_MIN;
	st.snap_ok = true;
	ctx = (struct msq_run_ctx){ .ops = &ops, .lag = 16 * M, .wb_due = true };
}

static uint64_t cached_chunks(uint64_t lo, uint64_t hi)
{
	uint64_t n = 0;

	for (uint64_t k = lo / CH; k < hi / CH && k < NCH; k++)
		n += f.cached[k] != 0;
	return n;
}

/* A reader (or writer) moves [from, to) in pieces of `piece`; the kernel
 * caches (writes dirty) what it moves.  Returns how many transfers had
 * something to do. */
static unsigned stream(struct msq_dir *d, uint64_t from, uint64_t to, uint64_t piece, bool writing)
{
	unsigned busy = 0;

	for (uint64_t off = from; off < to; off += piece) {
		uint64_t k = off / CH;

		f.cached[k] = PAGES_PER_CHUNK;
		if (writing)
			f.dirty[k] = f.cached[k];
		ctx.streamed += piece;
		if (msq_run_quiet(d, off, off + piece)) {
			d->next = off + piece;
			continue;
		}
		busy++;
		msq_run_advance(&ctx, &st, d, off, off + piece, writing);
	}
	return busy;
}

static void test_cold_read(void)
{
	unsigned busy;

	reset();
	msq_run_start(&ctx, &st, &st.rd, 0, true, NCH * CH);
	busy = stream(&st.rd, 0, 128 * M, 128 << 10, false);
	/* Behind the lag nothing stays; at most the lag and a chunk ahead. */
	CHECK_EQ(cached_chunks(0, 128 * M - 16 * M - CH), 0);
	CHECK(cached_chunks(0, NCH * CH) <= 16 * M / CH + 1);
	CHECK_EQ(f.advised, 128 * M - 16 * M);
	CHECK_EQ(f.kept, 0);
	/* Most transfers do nothing: about one per chunk, and one per
	 * snapshot refill, does any work. */
	printf("cold read: %u of %u transfers did work\n", busy, (unsigned)(128 * M / (128 << 10)));
	CHECK(busy <= 2 * (128 * M / CH) + 2);
	CHECK(msq_run_is_stream(&st.rd, MSQ_RUN_MIN, false));
	/* At close: the rest goes, up to the reader's end. */
	msq_run_final_read(&ctx, &st, 128 * M, true);
	CHECK_EQ(cached_chunks(0, NCH * CH), 0);
}

static void test_cached_before(void)
{
	reset();
	for (int k = 10; k < 20; k++)
		f.cached[k] = PAGES_PER_CHUNK;
	msq_run_start(&ctx, &st, &st.rd, 0, true, NCH * CH);
	stream(&st.rd, 0, 100 * M, 1 * M, false);
	CHECK_EQ(cached_chunks(20 * M, 40 * M), 10); /* chunks 10..19 stay */
	CHECK_EQ(f.kept, 10 * CH);
	CHECK(f.noted >= 10 * PAGES_PER_CHUNK);
	CHECK_EQ(cached_chunks(0, 20 * M), 0);
	CHECK_EQ(cached_chunks(40 * M, 100 * M - 16 * M - CH), 0);
}

static void test_random_reader(void)
{
	static const uint64_t offs[] = { 300 * M, 7 * M, 150 * M, 2 * M, 400 * M, 64 * M };

	reset();
	msq_run_start(&ctx, &st, &st.rd, 0, false, UINT64_MAX);
	for (unsigned i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		f.cached[offs[i] / CH] = 1;
		msq_run_advance(&ctx, &st, &st.rd, offs[i], offs[i] + 8192, false);
		CHECK_EQ(st.rd.run_start, offs[i]); /* each jump starts a run */
	}
	/* Runs under MSQ_RUN_MIN: no snapshot, nothing dropped. */
	CHECK_EQ(f.ncachestat, 0);
	CHECK_EQ(f.ndontneed, 0);
	CHECK(!msq_run_is_stream(&st.rd, MSQ_RUN_MIN, false));
	/* A gap up to MSQ_SEQ_SLACK continues the run. */
	msq_run_advance(&ctx, &st, &st.rd, 64 * M + 8192 + MSQ_SEQ_SLACK, 64 * M + 3 * CH, false);
	CHECK_EQ(st.rd.run_start, 64 * M);
}

static void test_late_snapshot(void)
{
	/* A run found later (no snapshot at classification): what it read
	 * before its snapshot counts as cached before, the rest goes. */
	reset();
	msq_run_start(&ctx, &st, &st.rd, 0, false, UINT64_MAX);
	stream(&st.rd, 0, 64 * M, 64 << 10, false);
	CHECK(st.rd.snapping);
	CHECK(cached_chunks(0, CH) <= 1);
	CHECK_EQ(cached_chunks(CH, 64 * M - 16 * M - CH), 0);
}

static void test_dirty_retry(void)
{
	reset();
	msq_run_start(&ctx, &st, &st.rd, 0, true, NCH * CH);
	stream(&st.rd, 0, 20 * M, 1 * M, false);
	/* Chunk 2 is dirtied behind the reader before the drop reaches it. */
	f.dirty[2] = 4;
	stream(&st.rd, 20 * M, 24 * M, 1 * M, false);
	CHECK(f.cached[2] != 0);
	CHECK_EQ(st.rd.nretry, 1);
	/* Clean a moment later: retried once a lag of transfers went by. */
	f.dirty[2] = 0;
	stream(&st.rd, 24 * M, 30 * M, 1 * M, false);
	CHECK(f.cached[2] != 0); /* not due yet */
	stream(&st.rd, 30 * M, 44 * M, 1 * M, false);
	CHECK_EQ(f.cached[2], 0);
	CHECK_EQ(st.rd.nretry, 0);

	/* Dirty all along: given up chunk by chunk after MSQ_RETRY_TRIES looks. */
	reset();
	msq_run_start(&ctx, &st, &st.rd, 0, true, NCH * CH);
	f.dirty[0] = 4;
	stream(&st.rd, 0, 20 * M, 1 * M, false);
	CHECK_EQ(st.rd.nretry, 1);
	stream(&st.rd, 20 * M, 20 * M + (MSQ_RETRY_TRIES + 1) * 16 * M, 1 * M, false);
	CHECK_EQ(st.rd.nretry, 0);
	CHECK(f.cached[0] != 0);

	/* At close every remembered chunk is tried once more, then forgotten. */
	reset();
	msq_run_start(&ctx, &st, &st.rd, 0, true, NCH * CH);
	f.dirty[1] = 4;
	stream(&st.rd, 0, 20 * M, 1 * M, false);
	CHECK_EQ(st.rd.nretry, 1);
	f.dirty[1] = 0;
	msq_run_final_read(&ctx, &st, 20 * M, false);
	CHECK_EQ(f.cached[1], 0);
	CHECK_EQ(st.rd.nretry, 0);
}

static void test_many_retries(void)
{
	reset();
	msq_run_start(&ctx, &st, &st.rd, 0, true, NCH * CH);
	/* Every other chunk dirty: more ranges than the list holds. */
	for (int k = 0; k < 40; k += 2)
		f.dirty[k] = 1;
	stream(&st.rd, 0, 96 * M, 2 * M, false);
	CHECK_EQ(st.rd.nretry, MSQ_RETRY_MAX);
}

static void test_blind_and_failures(void)
{
	/* Blind: no snapshot, and what was cached before goes too. */
	reset();
	st.blind = true;
	f.cached[5] = PAGES_PER_CHUNK;
	msq_run_start(&ctx, &st, &st.rd, 0, true, NCH * CH);
	stream(&st.rd, 0, 64 * M, 1 * M, false);
	CHECK_EQ(f.cached[5], 0);
	CHECK_EQ(f.kept, 0);

	/* A snapshot that fails: hands off, nothing dropped from then on. */
	reset();
	f.cached[3] = 1;
	f.cached[9] = 1; /* partly cached window: chunk by chunk */
	f.fail_cachestat = 1;
	msq_run_start(&ctx, &st, &st.rd, 0, true, NCH * CH);
	CHECK(!st.snap_ok);
	stream(&st.rd, 0, 64 * M, 1 * M, false);
	CHECK_EQ(f.ndontneed, 0);

	/* More cached islands than the snapshot holds: fail safe. */
	reset();
	st.snap_ahead = NCH * CH;
	for (int k = 0; k < 2 * MSQ_PRE_MAX + 4; k += 2)
		f.cached[k] = 1;
	msq_run_start(&ctx, &st, &st.rd, 0, true, NCH * CH);
	CHECK(!st.snap_ok);

	/* RWF_DONTCACHE reads: the kernel drops, the shim does nothing. */
	reset();
	st.dontcache = true;
	msq_run_start(&ctx, &st, &st.rd, 0, true, NCH * CH);
	stream(&st.rd, 0, 64 * M, 1 * M, false);
	CHECK_EQ(f.ncachestat, 0);
	CHECK_EQ(f.ndontneed, 0);
}

static void test_small_file(void)
{
	/* A file of one chunk, fully cached before: one cachestat, all kept. */
	reset();
	f.cached[0] = 100;
	msq_run_start(&ctx, &st, &st.rd, 0, true, 400 << 10);
	CHECK_EQ(f.ncachestat, 1);
	CHECK(st.rd.snapping);
	msq_run_final_read(&ctx, &st, 400 << 10, true);
	CHECK_EQ(f.cached[0], 100);
	CHECK_EQ(f.kept, CH);
}

static void test_writer(void)
{
	/* Write-behind: writeback started behind the writer, chunks dropped
	 * once clean. */
	reset();
	msq_run_start(&ctx, &st, &st.wr, 0, true, 0);
	stream(&st.wr, 0, 32 * M, 1 * M, true);
	CHECK(f.nwriteback > 0);
	CHECK_EQ(f.advised_w, 0); /* all dirty still, and within two lags */
	for (int k = 0; k < NCH; k++)
		f.dirty[k] = 0;
	stream(&st.wr, 32 * M, 40 * M, 1 * M, true);
	CHECK(f.advised_w > 0);
	CHECK_EQ(cached_chunks(0, 40 * M - 16 * M - CH), 0);

	/* A writer far ahead of its oldest dirty chunk waits (naps) for it. */
	reset();
	msq_run_start(&ctx, &st, &st.wr, 0, true, 0);
	ctx.wb_due = false;
	stream(&st.wr, 0, 8 * M, 1 * M, true); /* not due yet: nothing */
	CHECK_EQ(f.nwriteback, 0);
	ctx.wb_due = true;
	f.clean_after_naps = 3;
	stream(&st.wr, 8 * M, 64 * M, 1 * M, true);
	CHECK(f.nnap >= 3);
	CHECK(f.advised_w > 0);

	/* Dirty for good: at most MSQ_WB_POLLS naps per call. */
	reset();
	msq_run_start(&ctx, &st, &st.wr, 0, true, 0);
	st.wr.backlog = 0;
	stream(&st.wr, 0, 40 * M, 1 * M, true);
	f.nnap = 0;
	msq_run_advance(&ctx, &st, &st.wr, 40 * M, 41 * M, true);
	CHECK(f.nnap <= MSQ_WB_POLLS);

	/* At close: clean chunks go, dirty ones stay for the kernel. */
	reset();
	msq_run_start(&ctx, &st, &st.wr, 0, true, 0);
	stream(&st.wr, 0, 8 * M, 1 * M, true);
	f.dirty[0] = f.dirty[1] = 0;
	msq_run_final_write(&ctx, &st);
	CHECK_EQ(f.cached[0], 0);
	CHECK_EQ(f.cached[1], 0);
	CHECK(f.cached[2] != 0);

	/* cachestat failing mid-stream: left to the kernel. */
	reset();
	msq_run_start(&ctx, &st, &st.wr, 0, true, 0);
	stream(&st.wr, 0, 20 * M, 1 * M, true);
	f.fail_cachestat = 1;
	stream(&st.wr, 20 * M, 60 * M, 1 * M, true);
	CHECK_EQ(f.advised_w, 0);
}

static void test_is_stream(void)
{
	struct msq_dir d = { .started = true, .snapping = true, .run_start = 0, .next = 100 << 10 };

	CHECK(!msq_run_is_stream(&d, MSQ_RUN_MIN, false));
	CHECK(msq_run_is_stream(&d, MSQ_RUN_MIN, true));
	d.next = MSQ_RUN_MIN;
	CHECK(msq_run_is_stream(&d, MSQ_RUN_MIN, false));
	d.snapping = false;
	CHECK(!msq_run_is_stream(&d, MSQ_RUN_MIN, true));
}

int main(void)
{
	test_cold_read();
	test_cached_before();
	test_random_reader();
	test_late_snapshot();
	test_dirty_retry();
	test_many_retries();
	test_blind_and_failures();
	test_small_file();
	test_writer();
	test_is_stream();
	CHECK_DONE();
}

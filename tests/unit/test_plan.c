/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "check.h"
#include "plan.h"

#define M (UINT64_C(1) << 20)
#define BASE (UINT64_C(0x7f0000000000)) /* 2 MiB aligned */

static struct msq_extents run(uint64_t a, uint64_t b)
{
	struct msq_extents e = MSQ_EXTENTS_INIT;

	msq_extents_add(&e, a, b);
	return e;
}

int main(void)
{
	struct msq_extents present = MSQ_EXTENTS_INIT, drop = MSQ_EXTENTS_INIT, keep = MSQ_EXTENTS_INIT;
	struct msq_plan_in in = { .present = &present, .start = BASE, .end = BASE + 1024 * M,
				  .file_off = 0, .lag = 16 * M };

	/* One reader at 100 MiB, pages present from 0: drop [0, 84M). */
	present = run(BASE, BASE + 100 * M);
	CHECK(msq_plan(&in, &drop) == 0);
	CHECK_EQ(drop.n, 1);
	CHECK_EQ(drop.v[0].start, BASE);
	CHECK_EQ(drop.v[0].end, BASE + 84 * M);

	/* Cursor not on a chunk boundary: the chunk holding cursor - lag goes. */
	msq_extents_free(&present);
	msq_extents_clear(&drop);
	present = run(BASE + 70 * M, BASE + 101 * M);
	CHECK(msq_plan(&in, &drop) == 0);
	CHECK_EQ(drop.v[0].start, BASE + 70 * M);
	CHECK_EQ(drop.v[0].end, BASE + 86 * M);

	/* Within the lag: nothing. */
	msq_extents_free(&present);
	msq_extents_clear(&drop);
	present = run(BASE + 90 * M, BASE + 100 * M);
	CHECK(msq_plan(&in, &drop) == 0);
	CHECK_EQ(drop.n, 0);

	/* Two readers, each keeps its own lag. */
	msq_extents_add(&present, BASE + 400 * M, BASE + 500 * M);
	CHECK(msq_plan(&in, &drop) == 0);
	CHECK_EQ(drop.n, 1);
	CHECK_EQ(drop.v[0].start, BASE + 400 * M);
	CHECK_EQ(drop.v[0].end, BASE + 484 * M);

	/* Strong references are never planned. */
	msq_extents_clear(&drop);
	msq_extents_add(&keep, BASE + 410 * M, BASE + 411 * M);
	in.keep = &keep;
	CHECK(msq_plan(&in, &drop) == 0);
	CHECK_EQ(drop.n, 2);
	CHECK_EQ(drop.v[0].end, BASE + 410 * M);
	CHECK_EQ(drop.v[1].start, BASE + 411 * M);
	in.keep = NULL;

	/* Kept pages retried: a run lying wholly inside them is no reader and
	 * goes whole (exactly the run); a run only partly inside is a reader
	 * and keeps its lag. */
	{
		struct msq_extents retry = MSQ_EXTENTS_INIT;

		msq_extents_free(&present);
		msq_extents_clear(&drop);
		present = run(BASE + 9 * M, BASE + 10 * M);         /* kept, left behind */
		msq_extents_add(&present, BASE + 200 * M, BASE + 210 * M); /* a reader within its lag */
		msq_extents_add(&retry, BASE + 8 * M, BASE + 10 * M);
		msq_extents_add(&retry, BASE + 205 * M, BASE + 206 * M);
		CHECK(msq_plan(&in, &drop) == 0);
		CHECK_EQ(drop.n, 0); /* without retry: the run looks like a reader */
		in.retry = &retry;
		CHECK(msq_plan(&in, &drop) == 0);
		CHECK_EQ(drop.n, 1);
		CHECK_EQ(drop.v[0].start, BASE + 9 * M);
		CHECK_EQ(drop.v[0].end, BASE + 10 * M);
		in.retry = NULL;
		msq_extents_free(&retry);
	}

	/* Chunks follow file offsets: a mapping at file offset 1 MiB. */
	msq_extents_free(&present);
	msq_extents_clear(&drop);
	in.file_off = 1 * M;
	present = run(BASE, BASE + 40 * M);
	CHECK(msq_plan(&in, &drop) == 0);
	CHECK_EQ(drop.v[0].start, BASE);
	CHECK_EQ(drop.v[0].end, BASE + 25 * M); /* file offset 26M: chunk boundary */
	CHECK_EQ(msq_chunk_floor(BASE + 6 * M, BASE, 1 * M), BASE + 5 * M); /* file offset 6M */

	/* Flush: everything present, whole chunks, clipped to the region. */
	msq_extents_clear(&drop);
	in.file_off = 0;
	in.flush = true;
	in.end = BASE + 39 * M;
	msq_extents_free(&present);
	present = run(BASE + 30 * M + 4096, BASE + 39 * M);
	CHECK(msq_plan(&in, &drop) == 0);
	CHECK_EQ(drop.v[0].start, BASE + 30 * M);
	CHECK_EQ(drop.v[0].end, BASE + 39 * M);

	/* A mapping read with no advice (msq_plan_read_through). */
	{
		struct msq_plan_in u = { .present = &present, .start = BASE, .end = BASE + 64 * M,
					 .file_off = 0, .lag = 16 * M, .keep = &keep };
		struct msq_through t = { 0 };

		msq_extents_clear(&keep);
		/* At random: runs that do not begin at the start are no stream,
		 * whatever their length, and stay at a flush too. */
		msq_extents_free(&present);
		msq_extents_clear(&drop);
		present = run(BASE + 4 * M, BASE + 40 * M);
		msq_extents_add(&present, BASE + 50 * M, BASE + 51 * M);
		CHECK(msq_plan_read_through(&u, &t, &drop) == 0);
		CHECK_EQ(drop.n, 0);
		CHECK_EQ(t.through, BASE);
		u.flush = true;
		CHECK(msq_plan_read_through(&u, &t, &drop) == 0);
		CHECK_EQ(drop.n, 0);
		u.flush = false;

		/* Front to back, 30 MiB in: a lag behind it goes, as for a run. */
		t = (struct msq_through){ 0 };
		msq_extents_free(&present);
		present = run(BASE, BASE + 30 * M);
		msq_extents_add(&present, BASE + 63 * M, BASE + 64 * M); /* an index at the end */
		CHECK(msq_plan_read_through(&u, &t, &drop) == 0);
		CHECK_EQ(t.through, BASE + 30 * M);
		CHECK(!t.idle);
		CHECK_EQ(drop.n, 1);
		CHECK_EQ(drop.v[0].start, BASE);
		CHECK_EQ(drop.v[0].end, BASE + 14 * M);

		/* The part goes on past what was dropped; still not through. */
		msq_extents_free(&present);
		msq_extents_clear(&drop);
		present = run(BASE + 14 * M, BASE + 40 * M);
		msq_extents_add(&present, BASE + 63 * M, BASE + 64 * M);
		CHECK(msq_plan_read_through(&u, &t, &drop) == 0);
		CHECK_EQ(t.through, BASE + 40 * M);
		CHECK_EQ(drop.v[0].end, BASE + 24 * M);

		/* Read through (three quarters): kept a lag while it moves... */
		msq_extents_free(&present);
		msq_extents_clear(&drop);
		present = run(BASE + 24 * M, BASE + 49 * M);
		msq_extents_add(&present, BASE + 63 * M, BASE + 64 * M);
		CHECK(msq_plan_read_through(&u, &t, &drop) == 0);
		CHECK(msq_read_through(u.start, u.end, t.through));
		CHECK_EQ(drop.n, 1);
		CHECK_EQ(drop.v[0].end, BASE + 34 * M);
		/* ...and all of it (less what was cached before) once a look
		 * finds nothing new: pages gone since (that drop) are not
		 * news... */
		msq_extents_free(&present);
		msq_extents_clear(&drop);
		msq_extents_add(&keep, BASE + 40 * M, BASE + 42 * M);
		present = run(BASE + 34 * M, BASE + 49 * M);
		msq_extents_add(&present, BASE + 63 * M, BASE + 64 * M);
		CHECK(msq_plan_read_through(&u, &t, &drop) == 0);
		CHECK(t.idle);
		CHECK_EQ(drop.n, 3);
		CHECK_EQ(drop.v[0].start, BASE + 34 * M);
		CHECK_EQ(drop.v[0].end, BASE + 40 * M);
		CHECK_EQ(drop.v[1].start, BASE + 42 * M);
		CHECK_EQ(drop.v[1].end, BASE + 50 * M);
		CHECK_EQ(drop.v[2].start, BASE + 62 * M);
		CHECK_EQ(drop.v[2].end, BASE + 64 * M);
		/* ...nor pages a drop left (the same again: all of it, again). */
		msq_extents_clear(&drop);
		CHECK(msq_plan_read_through(&u, &t, &drop) == 0);
		CHECK(t.idle);
		CHECK_EQ(drop.n, 3);
		/* A page that appears is news. */
		msq_extents_clear(&drop);
		msq_extents_add(&present, BASE + 60 * M, BASE + 60 * M + 4096);
		CHECK(msq_plan_read_through(&u, &t, &drop) == 0);
		CHECK(!t.idle);
		msq_extents_clear(&keep);

		/* A reader gone halfway (flush): what it read front to back. */
		t = (struct msq_through){ 0 };
		msq_extents_free(&present);
		msq_extents_clear(&drop);
		present = run(BASE, BASE + 10 * M + 4096);
		msq_extents_add(&present, BASE + 30 * M, BASE + 31 * M);
		u.flush = true;
		CHECK(msq_plan_read_through(&u, &t, &drop) == 0);
		CHECK_EQ(drop.n, 1);
		CHECK_EQ(drop.v[0].start, BASE);
		CHECK_EQ(drop.v[0].end, BASE + 12 * M);
	}

	msq_extents_free(&present);
	msq_extents_free(&drop);
	msq_extents_free(&keep);
	CHECK_DONE();
}

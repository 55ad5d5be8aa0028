/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* madvseqd's fd-stream decisions (daemon/fdseq.c), alone. */
#include "check.h"
#include "fdseq.h"

#define M (UINT64_C(1) << 20)
#define G (UINT64_C(1) << 30)

static void test_observe(void)
{
	struct msqd_fdseq q = { 0 };

	CHECK_EQ(msqd_fdseq_observe(&q, 0), MSQD_FDSEQ_FIRST);
	CHECK(!q.stream);
	CHECK_EQ(msqd_fdseq_observe(&q, 0), MSQD_FDSEQ_STILL);
	/* One step, however long, is not yet a stream. */
	CHECK_EQ(msqd_fdseq_observe(&q, 64 * M), MSQD_FDSEQ_FORWARD);
	CHECK(!q.stream);
	CHECK_EQ(msqd_fdseq_observe(&q, 96 * M), MSQD_FDSEQ_FORWARD);
	CHECK(q.stream);
	/* A pause keeps it a stream. */
	CHECK_EQ(msqd_fdseq_observe(&q, 96 * M), MSQD_FDSEQ_STILL);
	CHECK(q.stream);
	/* Backwards: over, a new run from there. */
	CHECK_EQ(msqd_fdseq_observe(&q, 10 * M), MSQD_FDSEQ_RESTART);
	CHECK(!q.stream);
	CHECK_EQ(q.from, 10 * M);
	/* A jump of terabytes (lseek on a sparse file) is a seek. */
	CHECK_EQ(msqd_fdseq_observe(&q, 4096ULL * G), MSQD_FDSEQ_RESTART);
	CHECK(!q.stream);
	/* Small steps: a stream once 4 MiB were covered in two steps or more. */
	q = (struct msqd_fdseq){ 0 };
	msqd_fdseq_observe(&q, 100);
	for (int i = 1; i <= 3; i++)
		msqd_fdseq_observe(&q, 100 + (uint64_t)i * M);
	CHECK(!q.stream);
	msqd_fdseq_observe(&q, 100 + 4 * M);
	CHECK(q.stream);
	/* Near the top of the offset space: no overflow. */
	q = (struct msqd_fdseq){ 0 };
	msqd_fdseq_observe(&q, UINT64_MAX - 10);
	CHECK_EQ(msqd_fdseq_observe(&q, UINT64_MAX), MSQD_FDSEQ_FORWARD);
	CHECK_EQ(msqd_fdseq_observe(&q, 0), MSQD_FDSEQ_RESTART);
}

static void test_snap_window(void)
{
	uint64_t a, b;

	/* First look at 10 MiB: from past the read-ahead margin, 64 MiB on. */
	msqd_fdseq_snap_window(10 * M, 0, 4 * G, 64 * M, &a, &b);
	CHECK_EQ(a, 18 * M);
	CHECK_EQ(b, 74 * M);
	/* In time: goes on where the last one ended. */
	msqd_fdseq_snap_window(20 * M, 74 * M, 4 * G, 64 * M, &a, &b);
	CHECK_EQ(a, 74 * M);
	CHECK_EQ(b, 84 * M);
	/* Overtaken: the part the stream passed is skipped. */
	msqd_fdseq_snap_window(100 * M, 84 * M, 4 * G, 64 * M, &a, &b);
	CHECK_EQ(a, 108 * M);
	CHECK_EQ(b, 164 * M);
	/* Clipped to the file (rounded up to a chunk). */
	msqd_fdseq_snap_window(100 * M, 108 * M, 129 * M, 64 * M, &a, &b);
	CHECK_EQ(a, 108 * M);
	CHECK_EQ(b, 130 * M);
	/* Past the end: nothing. */
	msqd_fdseq_snap_window(200 * M, 130 * M, 129 * M, 64 * M, &a, &b);
	CHECK(a >= b);
	/* Huge positions: no overflow. */
	msqd_fdseq_snap_window(UINT64_MAX - M, 0, UINT64_MAX, 64 * M, &a, &b);
	CHECK(a >= b);
}

static void test_plan(void)
{
	struct msq_extents known = MSQ_EXTENTS_INIT, pre = MSQ_EXTENTS_INIT, drop = MSQ_EXTENTS_INIT;
	struct msqd_fdseq_plan_in in = { .pos = 100 * M, .lag = 16 * M, .done = 18 * M, .size = 4 * G,
					 .known = &known, .precached = &pre };
	uint64_t next = 0;

	msq_extents_add(&known, 18 * M, 164 * M);
	/* Behind the lag, within what is known. */
	CHECK(msqd_fdseq_plan(&in, &drop, &next) == 0);
	CHECK_EQ(drop.n, 1);
	CHECK_EQ(drop.v[0].start, 18 * M);
	CHECK_EQ(drop.v[0].end, 84 * M);
	CHECK_EQ(next, 84 * M);
	/* Not a chunk boundary: rounded up, at most lag stays. */
	msq_extents_clear(&drop);
	in.pos = 101 * M;
	CHECK(msqd_fdseq_plan(&in, &drop, &next) == 0);
	CHECK_EQ(drop.v[0].end, 86 * M);
	/* Pages cached before stay, to the page. */
	msq_extents_clear(&drop);
	msq_extents_add(&pre, 30 * M, 30 * M + 4096);
	msq_extents_add(&pre, 40 * M, 50 * M);
	CHECK(msqd_fdseq_plan(&in, &drop, &next) == 0);
	CHECK_EQ(drop.n, 3);
	CHECK_EQ(drop.v[0].end, 30 * M);
	CHECK_EQ(drop.v[1].start, 30 * M + 4096);
	CHECK_EQ(drop.v[1].end, 40 * M);
	CHECK_EQ(drop.v[2].start, 50 * M);
	CHECK_EQ(msq_extents_total(&drop), 86 * M - 18 * M - 10 * M - 4096);
	/* What is not known stays (the stream passed it before the snapshot). */
	msq_extents_clear(&drop);
	msq_extents_clear(&pre);
	msq_extents_clear(&known);
	msq_extents_add(&known, 18 * M, 40 * M);
	msq_extents_add(&known, 60 * M, 164 * M);
	CHECK(msqd_fdseq_plan(&in, &drop, &next) == 0);
	CHECK_EQ(msq_extents_total(&drop), (40 - 18) * M + (86 - 60) * M);
	CHECK(!msq_extents_overlaps(&drop, 40 * M, 60 * M));
	/* A bounded step: at most max from done. */
	msq_extents_clear(&drop);
	in.max = 8 * M;
	CHECK(msqd_fdseq_plan(&in, &drop, &next) == 0);
	CHECK_EQ(next, 26 * M);
	CHECK_EQ(msq_extents_total(&drop), 8 * M);
	in.max = 0;
	/* Inside the lag, or done already: nothing, done unchanged. */
	msq_extents_clear(&drop);
	in.pos = 20 * M;
	CHECK(msqd_fdseq_plan(&in, &drop, &next) == 0);
	CHECK_EQ(drop.n, 0);
	CHECK_EQ(next, 18 * M);
	/* A lag under a chunk never plans the reader's own chunk. */
	in.pos = 101 * M;
	in.lag = 4096;
	CHECK(msqd_fdseq_plan(&in, &drop, &next) == 0);
	CHECK_EQ(next, 100 * M);
	/* At the end, the lag goes too (up to the end's chunk). */
	msq_extents_clear(&drop);
	in = (struct msqd_fdseq_plan_in){ .pos = 129 * M, .lag = 16 * M, .done = 100 * M,
					  .size = 129 * M, .at_end = true, .known = &known };
	CHECK(msqd_fdseq_plan(&in, &drop, &next) == 0);
	CHECK_EQ(next, 130 * M);
	CHECK_EQ(drop.v[drop.n - 1].end, 130 * M);
	msq_extents_free(&known);
	msq_extents_free(&pre);
	msq_extents_free(&drop);
}

int main(void)
{
	test_observe();
	test_snap_window();
	test_plan();
	CHECK_DONE();
}

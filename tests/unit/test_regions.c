/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The region table: insert/merge/split/remove/move, and lock-free lookups
 * that never see a torn table while writers change it. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "regions.h"

#ifdef FIU_ENABLE
#include <fiu-control.h>
#include <fiu.h>
#endif

#define M (UINT64_C(1) << 20)
#define BASE UINT64_C(0x7f0000000000)

static struct msq_region *mk(uint64_t start, uint64_t end, uint64_t off, ino_t ino)
{
	struct msq_region *r = calloc(1, sizeof(*r));

	msq_stream_init(&r->s, start, end, off, 1, ino, "/f", true, false, MSQ_MODE_PAGEOUT, true);
	return r;
}

static uint64_t retired_bytes;
static void on_retire(struct msq_region *part, void *arg)
{
	(void)arg;
	retired_bytes += part->s.end - part->s.start;
}

static volatile int stop;
static volatile long bad_lookups, lookups;

static void *reader(void *arg)
{
	(void)arg;
	while (!stop) {
		/* The sentinel is tracked the whole time; the hole never is. */
		if (!msq_regions_overlap(BASE + 4096 * M, BASE + 4097 * M))
			__atomic_add_fetch(&bad_lookups, 1, __ATOMIC_RELAXED);
		if (msq_regions_overlap(BASE + 8192 * M, BASE + 8193 * M))
			__atomic_add_fetch(&bad_lookups, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&lookups, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

int main(void)
{
	pthread_t th[2];
	struct msq_region *r;

	CHECK(!msq_regions_any());
	msq_regions_lock();
	CHECK(msq_regions_insert(mk(BASE, BASE + 64 * M, 0, 1)) == 0);
	CHECK(msq_regions_any());
	CHECK(msq_regions_overlap(BASE + 10 * M, BASE + 11 * M));
	CHECK(!msq_regions_overlap(BASE + 64 * M, BASE + 65 * M));
	CHECK(!msq_regions_overlap(BASE - M, BASE));
	CHECK(msq_regions_contain(BASE, BASE + 64 * M));
	CHECK(msq_regions_contain(BASE + M, BASE + 2 * M));
	CHECK(!msq_regions_contain(BASE + 63 * M, BASE + 65 * M));

	/* Adjacent, same file, consistent offset: merges. */
	CHECK(msq_regions_insert(mk(BASE + 64 * M, BASE + 128 * M, 64 * M, 1)) == 0);
	CHECK_EQ(msq_regions_count(), 1);
	r = msq_regions_at(0);
	CHECK_EQ(r->s.start, BASE);
	CHECK_EQ(r->s.end, BASE + 128 * M);
	CHECK_EQ(r->s.file_off, 0);

	/* Adjacent, other file: stays separate. */
	CHECK(msq_regions_insert(mk(BASE + 128 * M, BASE + 130 * M, 0, 2)) == 0);
	CHECK_EQ(msq_regions_count(), 2);

	/* Overlapping, other file (a MAP_FIXED replacement): trims the old one. */
	CHECK(msq_regions_insert(mk(BASE + 100 * M, BASE + 110 * M, 0, 3)) == 0);
	CHECK_EQ(msq_regions_count(), 4);
	CHECK_EQ(msq_regions_at(0)->s.end, BASE + 100 * M);
	CHECK_EQ(msq_regions_at(2)->s.start, BASE + 110 * M);
	CHECK_EQ(msq_regions_at(2)->s.file_off, 110 * M);

	/* Partial removal in the middle splits; retire sees only the middle. */
	retired_bytes = 0;
	CHECK(msq_regions_remove(BASE + 10 * M, BASE + 20 * M, on_retire, NULL) == 0);
	CHECK_EQ(retired_bytes, 10 * M);
	CHECK_EQ(msq_regions_count(), 5);
	CHECK_EQ(msq_regions_at(1)->s.start, BASE + 20 * M);
	CHECK_EQ(msq_regions_at(1)->s.file_off, 20 * M);
	CHECK(!msq_regions_overlap(BASE + 10 * M, BASE + 20 * M));

	/* A removal spanning several regions. */
	retired_bytes = 0;
	CHECK(msq_regions_remove(BASE + 5 * M, BASE + 129 * M, on_retire, NULL) == 0);
	CHECK_EQ(retired_bytes, (10 - 5 + 100 - 20 + 10 + 18 + 1) * M);
	CHECK_EQ(msq_regions_count(), 2);

	/* mremap: move [BASE, BASE+5M) elsewhere and grow it. */
	CHECK(msq_regions_move(BASE, 5 * M, BASE + 1024 * M, 8 * M, false) == 0);
	CHECK(!msq_regions_overlap(BASE, BASE + 5 * M));
	CHECK(msq_regions_overlap(BASE + 1031 * M, BASE + 1032 * M));
	r = msq_regions_at(1);
	CHECK_EQ(r->s.start, BASE + 1024 * M);
	CHECK_EQ(r->s.end, BASE + 1032 * M);
	CHECK_EQ(r->s.file_off, 0);

	/* Concurrent readers while the writer churns. */
	CHECK(msq_regions_insert(mk(BASE + 4096 * M, BASE + 4098 * M, 0, 9)) == 0);
	msq_regions_unlock();
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, reader, NULL);
	/* At least 3000 changes, and on until the readers have looked 10,000
	 * times while the writer churns: on a loaded machine they may get no
	 * CPU during the first 3000 (bounded: 60 s). */
	time_t give_up = time(NULL) + 60;

	for (int i = 0; i < 3000 || (__atomic_load_n(&lookups, __ATOMIC_RELAXED) < 10000 &&
				     time(NULL) < give_up); i++) {
		uint64_t a = BASE + (uint64_t)(rand() % 2048) * M;

		msq_regions_lock();
		if (i % 3 == 2)
			CHECK(msq_regions_remove(a, a + (uint64_t)(rand() % 64 + 1) * M, NULL, NULL) == 0);
		else
			CHECK(msq_regions_insert(mk(a, a + (uint64_t)(rand() % 64 + 1) * M, a - BASE, 1 + (ino_t)(i % 2))) == 0);
		msq_regions_unlock();
	}
	stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	CHECK(lookups >= 10000);
	CHECK_EQ(bad_lookups, 0);

#ifdef FIU_ENABLE
	/* Allocation failures: a failed change leaves the table as it was. */
	fiu_init(0);
	fiu_enable_random("madvseq/alloc", 1, NULL, 0, 0.3);
	int failed_changes = 0;

	for (int i = 0; i < 2000; i++) {
		uint64_t a = BASE + (uint64_t)(rand() % 2048) * M, before[64][2];
		size_t n;
		int rc;

		msq_regions_lock();
		/* As the mremap wrapper does: whatever was at a move's target
		 * goes first (a failure here just skips this round's move). */
		if (i % 3 == 1 && msq_regions_remove(a + 4096 * M, a + 4112 * M, NULL, NULL) < 0) {
			msq_regions_unlock();
			continue;
		}
		n = msq_regions_count() < 64 ? msq_regions_count() : 64;
		for (size_t k = 0; k < n; k++) {
			before[k][0] = msq_regions_at(k)->s.start;
			before[k][1] = msq_regions_at(k)->s.end;
		}
		if (i % 3 == 2) {
			rc = msq_regions_remove(a, a + (uint64_t)(rand() % 64 + 1) * M, NULL, NULL);
		} else if (i % 3 == 1) {
			rc = msq_regions_move(a, 8 * M, a + 4096 * M, 16 * M, false);
		} else {
			struct msq_region *nr = calloc(1, sizeof(*nr));

			if (!nr)
				break;
			msq_stream_init(&nr->s, a, a + 8 * M, a - BASE, 1, 1, NULL, true, false,
					MSQ_MODE_PAGEOUT, true);
			rc = msq_regions_insert(nr);
			if (rc < 0) {
				msq_stream_free(&nr->s);
				free(nr);
			}
		}
		if (rc < 0) {
			failed_changes++;
			CHECK(rc == -ENOMEM);
			CHECK(msq_regions_count() >= n);
			for (size_t k = 0; k < n; k++)
				CHECK(msq_regions_at(k)->s.start == before[k][0] &&
				      msq_regions_at(k)->s.end == before[k][1]);
		}
		msq_regions_unlock();
	}
	fiu_disable("madvseq/alloc");
	CHECK(failed_changes > 0);
#endif

	/* The table stays sorted and disjoint. */
	msq_regions_lock();
	for (size_t i = 1; i < msq_regions_count(); i++)
		CHECK(msq_regions_at(i - 1)->s.end <= msq_regions_at(i)->s.start);
	msq_regions_clear(NULL, NULL);
	CHECK(!msq_regions_any());
	msq_regions_unlock();
	CHECK_DONE();
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>

#include "check.h"
#include "extents.h"

/* A reference model: one byte per unit over a small universe. */
#define U 256

static void model_check(const struct msq_extents *e, const unsigned char *m)
{
	unsigned char got[U] = { 0 };

	for (size_t i = 0; i < e->n; i++) {
		CHECK(e->v[i].start < e->v[i].end);
		if (i)
			CHECK(e->v[i - 1].end < e->v[i].start); /* disjoint, not adjacent */
		for (uint64_t x = e->v[i].start; x < e->v[i].end && x < U; x++)
			got[x] = 1;
	}
	for (int x = 0; x < U; x++)
		if (got[x] != m[x]) {
			CHECK(got[x] == m[x]);
			return;
		}
}

int main(void)
{
	struct msq_extents e = MSQ_EXTENTS_INIT, c = MSQ_EXTENTS_INIT;
	unsigned char m[U] = { 0 };

	CHECK(msq_extents_add(&e, 10, 20) == 0);
	CHECK(msq_extents_add(&e, 30, 40) == 0);
	CHECK(msq_extents_add(&e, 20, 30) == 0); /* bridges both: one range */
	CHECK_EQ(e.n, 1);
	CHECK_EQ(e.v[0].start, 10);
	CHECK_EQ(e.v[0].end, 40);
	CHECK(msq_extents_remove(&e, 15, 25) == 0); /* splits */
	CHECK_EQ(e.n, 2);
	CHECK_EQ(msq_extents_total(&e), 20);
	CHECK(msq_extents_overlaps(&e, 14, 15));
	CHECK(!msq_extents_overlaps(&e, 15, 25));
	CHECK_EQ(msq_extents_covered(&e, 0, 100), 20);
	CHECK_EQ(msq_extents_covered(&e, 12, 30), 3 + 5);
	CHECK(msq_extents_copy_clip(&c, &e, 12, 30, 100) == 0);
	CHECK_EQ(c.n, 2);
	CHECK_EQ(c.v[0].start, 112);
	CHECK_EQ(c.v[1].end, 130);
	/* A difference: [10, 15) and [25, 40) less [12, 14) and [28, 35). */
	msq_extents_clear(&c);
	CHECK(msq_extents_add(&c, 12, 14) == 0);
	CHECK(msq_extents_add(&c, 28, 35) == 0);
	CHECK(msq_extents_remove_all(&e, &c) == 0);
	CHECK_EQ(e.n, 4);
	CHECK_EQ(msq_extents_total(&e), 20 - 2 - 7);
	CHECK(!msq_extents_overlaps(&e, 12, 14));
	CHECK(!msq_extents_overlaps(&e, 28, 35));
	CHECK_EQ(e.v[3].start, 35);
	msq_extents_free(&c);
	msq_extents_clear(&e);

	/* Random operations against the model. */
	srand(1);
	for (int i = 0; i < 20000; i++) {
		uint64_t a = (uint64_t)(rand() % U), b = a + (uint64_t)(rand() % 24);

		if (b > U)
			b = U;
		if (rand() % 3) {
			CHECK(msq_extents_add(&e, a, b) == 0);
			for (uint64_t x = a; x < b; x++)
				m[x] = 1;
		} else {
			CHECK(msq_extents_remove(&e, a, b) == 0);
			for (uint64_t x = a; x < b; x++)
				m[x] = 0;
		}
		if (i % 97 == 0) {
			uint64_t cov = 0;

			for (uint64_t x = a; x < b; x++)
				cov += m[x];
			CHECK_EQ(msq_extents_covered(&e, a, b), cov);
			CHECK(msq_extents_overlaps(&e, a, b) == (cov > 0));
		}
		model_check(&e, m);
		if (check_failures)
			break;
	}
	msq_extents_free(&e);
	CHECK_DONE();
}

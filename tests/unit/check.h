/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Minimal test assertions: print where and what, count, exit 1 at the end. */
#ifndef MSQ_CHECK_H
#define MSQ_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static int check_failures;

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			check_failures++;                                            \
		}                                                                    \
	} while (0)

#define CHECK_EQ(a, b)                                                               \
	do {                                                                         \
		uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                     \
		if (a_ != b_) {                                                      \
			fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%#" PRIx64 " != %#" PRIx64 ")\n", \
				__FILE__, __LINE__, #a, #b, a_, b_);                 \
			check_failures++;                                            \
		}                                                                    \
	} while (0)

#define CHECK_DONE()                                                                 \
	do {                                                                         \
		if (check_failures)                                                  \
			fprintf(stderr, "%d check(s) failed\n", check_failures);     \
		return check_failures ? 1 : 0;                                       \
	} while (0)

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A set of byte ranges kept as a sorted array of disjoint, non-adjacent
 * half-open ranges.  Used for "pages cached before", "pages kept as
 * strongly referenced" and plan outputs.  Not thread-safe: the owner
 * serialises access.  Functions returning int give 0 or -ENOMEM; on
 * -ENOMEM the set is unchanged.
 */
#ifndef MSQ_EXTENTS_H
#define MSQ_EXTENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct msq_range {
	uint64_t start, end; /* [start, end) */
};

struct msq_extents {
	struct msq_range *v;
	size_t n, cap;
	bool fixed; /* v is the owner's storage of cap ranges: never reallocated */
};

#define MSQ_EXTENTS_INIT ((struct msq_extents){ 0 })

/* A set kept in the caller's storage (cap ranges): it never allocates,
 * for code that must stay async-signal-safe; adding past cap gives
 * -ENOMEM, as an allocation failure would. */
void msq_extents_init_fixed(struct msq_extents *e, struct msq_range *storage, size_t cap);
void msq_extents_free(struct msq_extents *e);
void msq_extents_clear(struct msq_extents *e);
/* Adds [start, end), merging with neighbours. */
int msq_extents_add(struct msq_extents *e, uint64_t start, uint64_t end);
/* Adds every range of src (a union). */
int msq_extents_add_all(struct msq_extents *dst, const struct msq_extents *src);
/* Removes [start, end); may split one range in two. */
int msq_extents_remove(struct msq_extents *e, uint64_t start, uint64_t end);
/* Removes every range of src (a difference). */
int msq_extents_remove_all(struct msq_extents *dst, const struct msq_extents *src);
/* True if any byte of [start, end) is in the set. */
bool msq_extents_overlaps(const struct msq_extents *e, uint64_t start, uint64_t end);
/* Bytes of [start, end) covered by the set. */
uint64_t msq_extents_covered(const struct msq_extents *e, uint64_t start, uint64_t end);
/* Sum of all range lengths. */
uint64_t msq_extents_total(const struct msq_extents *e);
/* dst = src ∩ [start, end), shifted by delta (added to every bound). */
int msq_extents_copy_clip(struct msq_extents *dst, const struct msq_extents *src,
			  uint64_t start, uint64_t end, int64_t delta);
/* Index of the first range whose end is > addr (n if none). */
size_t msq_extents_lower_bound(const struct msq_extents *e, uint64_t addr);

#endif

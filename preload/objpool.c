/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "objpool.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "../common/fault.h"
#include "../common/sys.h"

#define PER_BLOCK 64

struct msq_pool_block {
	struct msq_pool_block *next;
	uint64_t used; /* bit i: object i is taken */
	size_t bytes;  /* of the whole block, for the bounds check */
	char obj[] __attribute__((aligned(16)));
};

static void *object(struct msq_pool *p, struct msq_pool_block *b, unsigned i)
{
	return b->obj + (size_t)i * p->size;
}

/* Claims a free object of b, or NULL. */
static void *claim(struct msq_pool *p, struct msq_pool_block *b)
{
	uint64_t u = __atomic_load_n(&b->used, __ATOMIC_ACQUIRE);

	while (u != UINT64_MAX) {
		unsigned i = (unsigned)__builtin_ctzll(~u);

		if (__atomic_compare_exchange_n(&b->used, &u, u | (UINT64_C(1) << i), false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			void *o = object(p, b, i);

			memset(o, 0, p->size);
			return o;
		}
	}
	return NULL;
}

void *msq_pool_alloc(struct msq_pool *p)
{
	struct msq_pool_block *b, *head;
	size_t bytes;
	void *o;

	if (MSQ_FAULT("madvseq/alloc"))
		return NULL;
	for (b = __atomic_load_n(&p->blocks, __ATOMIC_ACQUIRE); b; b = b->next)
		if ((o = claim(p, b)))
			return o;
	bytes = (sizeof(*b) + PER_BLOCK * p->size + 4095) & ~(size_t)4095;
	if (!(b = msq_sys_map_anon(bytes)))
		return NULL;
	b->bytes = bytes;
	b->used = 1; /* object 0 is ours; mmap gave zeroes */
	head = __atomic_load_n(&p->blocks, __ATOMIC_ACQUIRE);
	do
		b->next = head;
	while (!__atomic_compare_exchange_n(&p->blocks, &head, b, false, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE));
	return object(p, b, 0);
}

void msq_pool_free(struct msq_pool *p, void *obj)
{
	if (!obj)
		return;
	for (struct msq_pool_block *b = __atomic_load_n(&p->blocks, __ATOMIC_ACQUIRE); b;
	     b = b->next) {
		uintptr_t lo = (uintptr_t)b->obj, hi = (uintptr_t)b + b->bytes;

		if ((uintptr_t)obj >= lo && (uintptr_t)obj < hi) {
			unsigned i = (unsigned)(((uintptr_t)obj - lo) / p->size);

			__atomic_and_fetch(&b->used, ~(UINT64_C(1) << i), __ATOMIC_RELEASE);
			return;
		}
	}
}

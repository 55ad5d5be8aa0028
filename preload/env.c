/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "env.h"

#include <stdlib.h>
#include <sys/auxv.h>

static int g_secure = -1; /* unknown until first asked */

bool msq_secure_execution(void)
{
	int s = __atomic_load_n(&g_secure, __ATOMIC_RELAXED);

	if (s < 0) {
		/* getauxval only reads the auxiliary vector: no allocation,
		 * no lock.  A racing thread computes the same answer. */
		s = getauxval(AT_SECURE) != 0;
		__atomic_store_n(&g_secure, s, __ATOMIC_RELAXED);
	}
	return s;
}

const char *msq_env(const char *name)
{
	const char *v;

	if (msq_secure_execution())
		return NULL;
	v = getenv(name);
	return v && *v ? v : NULL;
}

#ifdef MSQ_TEST_HOOKS
const char *msq_test_env(const char *name)
{
	return msq_env(name);
}
#endif

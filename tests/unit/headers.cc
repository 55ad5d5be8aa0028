/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Every public header compiles on its own, as C and as C++ (this file is
 * built both ways), with warnings as errors. */
#include <madvseq/policy.h>
#include <madvseq/protocol.h>

int main(void)
{
	struct msq_policy p = MSQ_POLICY_DEFAULT;

	return p.mode == MSQ_MODE_PAGEOUT && p.lag == MSQ_DEFAULT_LAG ? 0 : 1;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Configure-time probe: does clang link a libFuzzer harness with the
 * sanitizers the harnesses use? */
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	(void)data;
	(void)size;
	return 0;
}

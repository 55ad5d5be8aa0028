/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "iec.h"

#include <stdio.h>

char *msq_format_iec(uint64_t bytes, char *buf)
{
	static const char units[] = "KMGTPE";
	uint64_t scale = 1;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, MSQ_IEC_LEN, "%u B", (unsigned)bytes);
		return buf;
	}
	while (u < 5 && bytes / scale >= 1024) {
		scale *= 1024;
		u++;
	}
	/* Tenths, rounded to nearest, computed in integers (no 2^64 loss). */
	uint64_t whole = bytes / scale, tenths = ((bytes % scale) * 10 + scale / 2) / scale;

	if (tenths == 10) {
		whole++;
		tenths = 0;
	}
	/* whole <= 1024 and tenths <= 9; the moduli only tell the compiler,
	 * whose -O3 truncation warning cannot see it. */
	snprintf(buf, MSQ_IEC_LEN, "%u.%u %ciB", (unsigned)(whole % 10000), (unsigned)(tenths % 10),
		 units[u]);
	return buf;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "utf8.h"

/* The length of the sequence a lead byte starts (lead >= 0xc0). */
static size_t seq_len(unsigned char lead)
{
	return lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
}

size_t msq_utf8_trim(const char *s, size_t n)
{
	size_t i;
	unsigned char lead;

	if (n == 0)
		return 0;
	i = n - 1;
	while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80)
		i--;
	lead = (unsigned char)s[i];
	if (lead >= 0xc0 && n - i < seq_len(lead))
		return i;
	return n;
}

void msq_name_printable(char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 32 || s[i] == 127)
			s[i] = '?';
}

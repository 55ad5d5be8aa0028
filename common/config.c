/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Parses a decimal number; *end gets the first unparsed character. */
static int parse_u64(const char *s, uint64_t *out, const char **end)
{
	uint64_t v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*out = v;
	*end = p;
	return 0;
}

int msq_parse_size(const char *s, uint64_t *out)
{
	uint64_t v, mult = 1;
	const char *p;

	if (!s || parse_u64(s, &v, &p) < 0)
		return -EINVAL;
	switch (*p) {
	case 'k': case 'K': mult = UINT64_C(1) << 10; p++; break;
	case 'm': case 'M': mult = UINT64_C(1) << 20; p++; break;
	case 'g': case 'G': mult = UINT64_C(1) << 30; p++; break;
	case 't': case 'T': mult = UINT64_C(1) << 40; p++; break;
	default: break;
	}
	if (mult > 1 && (*p == 'i' || *p == 'I'))
		p++;
	if (*p == 'b' || *p == 'B')
		p++;
	if (*p != '\0')
		return -EINVAL;
	if (v > (UINT64_C(1) << 60) / mult)
		return -EINVAL;
	*out = v * mult;
	return 0;
}

int msq_parse_duration_ns(const char *s, uint64_t *out)
{
	uint64_t v, mult = 1000 * 1000; /* bare numbers are milliseconds */
	const char *p;

	if (!s || parse_u64(s, &v, &p) < 0)
		return -EINVAL;
	if (!strcmp(p, "us"))
		mult = 1000;
	else if (!strcmp(p, "ms") || !*p)
		mult = 1000 * 1000;
	else if (!strcmp(p, "s"))
		mult = 1000 * 1000 * 1000;
	else if (!strcmp(p, "min"))
		mult = UINT64_C(60) * 1000 * 1000 * 1000;
	else if (!strcmp(p, "h"))
		mult = UINT64_C(3600) * 1000 * 1000 * 1000;
	else
		return -EINVAL;
	if (v > UINT64_MAX / mult)
		return -EINVAL;
	v *= mult;
	if (v < 100 * 1000 || v > UINT64_C(3600) * 1000 * 1000 * 1000)
		return -EINVAL;
	*out = v;
	return 0;
}

static const char *const mode_names[] = {
	[MSQ_MODE_OFF] = "off",
	[MSQ_MODE_COLD] = "cold",
	[MSQ_MODE_PAGEOUT] = "pageout",
};

static const char *const read_mode_names[] = {
	[MSQ_READ_OFF] = "off",
	[MSQ_READ_NOREUSE] = "noreuse",
	[MSQ_READ_ADVISED] = "advised",
	[MSQ_READ_ALL] = "all",
};

int msq_parse_mode(const char *s, enum msq_mode *out)
{
	for (unsigned i = 0; s && i < sizeof(mode_names) / sizeof(*mode_names); i++)
		if (!strcasecmp(s, mode_names[i])) {
			*out = (enum msq_mode)i;
			return 0;
		}
	return -EINVAL;
}

int msq_parse_read_mode(const char *s, enum msq_read_mode *out)
{
	for (unsigned i = 0; s && i < sizeof(read_mode_names) / sizeof(*read_mode_names); i++)
		if (!strcasecmp(s, read_mode_names[i])) {
			*out = (enum msq_read_mode)i;
			return 0;
		}
	return -EINVAL;
}

int msq_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "yes", "true", "on" };
	static const char *const no[] = { "0", "no", "false", "off" };

	for (unsigned i = 0; s && i < 4; i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

const char *msq_mode_name(enum msq_mode m)
{
	return (unsigned)m < 3 ? mode_names[m] : "?";
}

const char *msq_read_mode_name(enum msq_read_mode m)
{
	return (unsigned)m < 4 ? read_mode_names[m] : "?";
}

char *msq_format_size(uint64_t bytes, char *buf, unsigned len)
{
	static const char units[] = "KMGT";
	int u = -1;

	while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
		bytes /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%llu", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)bytes, units[u]);
	return buf;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Parsing of the values users write in MADVSEQ_* variables and in
 * madvseqd.conf.  Pure functions: no allocation, no logging, no errno
 * changes.  Each returns 0 on success or -EINVAL, leaving *out untouched
 * on failure.
 */
#ifndef MSQ_CONFIG_H
#define MSQ_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include <madvseq/policy.h>

/* "16M", "512k", "1G", "4096", "2MiB"; binary multiples, at most 1 EiB. */
int msq_parse_size(const char *s, uint64_t *out);
/* "20ms", "1s", "500us", "20" (milliseconds); 100 us .. 1 hour. */
int msq_parse_duration_ns(const char *s, uint64_t *out);
/* "pageout", "cold", "off". */
int msq_parse_mode(const char *s, enum msq_mode *out);
/* "noreuse", "advised", "all", "off". */
int msq_parse_read_mode(const char *s, enum msq_read_mode *out);
/* "1/yes/true/on", "0/no/false/off". */
int msq_parse_bool(const char *s, bool *out);

const char *msq_mode_name(enum msq_mode m);
const char *msq_read_mode_name(enum msq_read_mode m);
/* Writes "16M"-style text (exact when possible) into buf; returns buf. */
char *msq_format_size(uint64_t bytes, char *buf, unsigned len);

#endif

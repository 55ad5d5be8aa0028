/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * File names as the stats file prints them (utf8.c): one record a line,
 * a name cut short at a sequence boundary.  Pure and async-signal-safe.
 */
#ifndef MSQ_UTF8_H
#define MSQ_UTF8_H

#include <stddef.h>

/* s held more than its first n bytes: how many of them to keep so that a
 * UTF-8 sequence is not cut in the middle (n, or where that sequence
 * starts).  Bytes that are not UTF-8 are kept as they are. */
size_t msq_utf8_trim(const char *s, size_t n);
/* Control characters (and DEL) in s[0, n) made '?'. */
void msq_name_printable(char *s, size_t n);

#endif

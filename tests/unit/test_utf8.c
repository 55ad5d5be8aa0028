/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* File names cut short for the stats file (preload/utf8.c). */
#include <string.h>

#include "check.h"
#include "utf8.h"

static size_t trim(const char *s)
{
	return msq_utf8_trim(s, strlen(s));
}

int main(void)
{
	char name[] = "a\tb\nc\x7f" "d";

	CHECK_EQ(msq_utf8_trim("", 0), 0);
	CHECK_EQ(trim("plain"), 5);
	CHECK_EQ(trim("caf\xc3\xa9"), 5);           /* é whole */
	CHECK_EQ(trim("caf\xc3"), 3);               /* é cut after its lead byte */
	CHECK_EQ(trim("x\xe2\x82\xac"), 4);         /* € whole */
	CHECK_EQ(trim("x\xe2\x82"), 1);             /* € cut after two of three */
	CHECK_EQ(trim("x\xe2"), 1);
	CHECK_EQ(trim("x\xf0\x9f\x98\x80"), 5);     /* an emoji whole */
	CHECK_EQ(trim("x\xf0\x9f\x98"), 1);         /* cut after three of four */
	CHECK_EQ(trim("\xf0\x9f"), 0);              /* nothing left but the cut one */
	CHECK_EQ(trim("ab\x80\x80"), 4);            /* stray continuation bytes: kept */
	CHECK_EQ(trim("\x80\x80"), 2);
	CHECK_EQ(trim("a\xff"), 1);                 /* a byte that can only lead: cut */
	msq_name_printable(name, strlen(name));
	CHECK(strcmp(name, "a?b?c?d") == 0);
	CHECK_DONE();
}

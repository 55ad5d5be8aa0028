/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Sizes for people: "512.0 MiB", "4.0 KiB", "0 B".  Binary (IEC) units,
 * one decimal from KiB up, as systemd and util-linux print them.  Pure:
 * no allocation, no errno change.
 */
#ifndef MSQ_IEC_H
#define MSQ_IEC_H

#include <stdint.h>

#define MSQ_IEC_LEN 16 /* "1023.9 EiB" and a NUL fit */

/* Writes the size into buf (at least MSQ_IEC_LEN bytes); returns buf. */
char *msq_format_iec(uint64_t bytes, char *buf);

#endif

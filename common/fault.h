/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fault points (libfiu).  Names are hierarchical, "madvseq/<area>/<what>",
 * and compile to nothing unless the build enables fault injection
 * (meson -Dfiu=enabled), so release builds pay nothing.
 * Points: madvseq/alloc, madvseq/pagemap/open, madvseq/pagemap/read,
 * madvseq/madvise, madvseq/fadvise, madvseq/thread/create,
 * madvseq/proc/maps, madvseq/daemon/... (see daemon/).
 */
#ifndef MSQ_FAULT_H
#define MSQ_FAULT_H

#ifdef FIU_ENABLE
#include <fiu.h>
#define MSQ_FAULT(name) (fiu_fail(name) != 0)
#else
#define MSQ_FAULT(name) 0
#endif

#endif

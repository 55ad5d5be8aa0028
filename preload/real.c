/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "real.h"

struct msq_real_fns msq_real;

void msq_real_resolve(void)
{
#define MSQ_WRAP(symbol, field, ret, params) msq_real.field = msq_next_symbol(#symbol);
#include "wrapped.def"
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "../common/sys.h"
#include "env.h"

static bool g_debug;

void msq_log_set_debug(bool on)
{
	g_debug = on;
}

static void vlog(const char *fmt, va_list ap)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "libmadvseq[%d]: ", (int)getpid());

	if (n < 0 || msq_secure_execution())
		return;
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	/* The raw syscall, not stdio (no locks, no buffers shared with the
	 * program) nor the library's own write wrapper. */
	msq_sys_write_all(STDERR_FILENO, buf, (size_t)n);
}

void msq_warn(const char *fmt, ...)
{
	va_list ap;
	MSQ_PROTECT_ERRNO;

	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

void msq_debug(const char *fmt, ...)
{
	va_list ap;
	MSQ_PROTECT_ERRNO;

	if (!g_debug)
		return;
	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

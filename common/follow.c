/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "follow.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int msq_proc_stat_parse(const char *buf, struct msq_proc_stat *st)
{
	/* After the command name, which may hold spaces and parentheses, the
	 * fields from the third (state) on: minflt is the 10th, majflt the
	 * 12th, num_threads the 20th, processor the 39th. */
	const char *p = strrchr(buf, ')');
	unsigned long long minflt = 0, majflt = 0;
	int field = 2;

	if (!p)
		return -EINVAL;
	*st = (struct msq_proc_stat){ .cpu = -1 };
	for (p++; *p && field < 39;) {
		char *end;

		while (*p == ' ')
			p++;
		if (!*p || *p == '\n')
			break;
		field++;
		if (field == 10 || field == 12 || field == 20 || field == 39) {
			unsigned long long v;

			errno = 0;
			v = strtoull(p, &end, 10);
			if (end == p || errno)
				return -EINVAL;
			if (field == 10)
				minflt = v;
			else if (field == 12)
				majflt = v;
			else if (field == 20)
				st->threads = (long)v;
			else
				st->cpu = v < CPU_SETSIZE ? (int)v : -1;
			p = end;
		} else {
			while (*p && *p != ' ')
				p++;
		}
	}
	if (field < 39 || st->threads <= 0)
		return -EINVAL;
	st->faults = minflt + majflt;
	return 0;
}

void msq_follow_init(struct msq_follow *f)
{
	f->bound = -1;
	f->ok = sched_getaffinity(0, sizeof(f->own), &f->own) == 0 && CPU_COUNT(&f->own) > 1;
}

void msq_follow_cpu(struct msq_follow *f, int cpu)
{
	int e = errno;

	if (!f->ok || cpu == f->bound)
		return;
	if (f->bound >= 0) {
		cpu_set_t now;

		/* Someone set our affinity meanwhile (taskset -a, a cpuset):
		 * that is our own now. */
		if (sched_getaffinity(0, sizeof(now), &now) == 0 &&
		    (CPU_COUNT(&now) != 1 || !CPU_ISSET(f->bound, &now))) {
			f->own = now;
			f->bound = -1;
			f->ok = CPU_COUNT(&now) > 1;
		}
	}
	if (cpu >= 0 && f->ok && CPU_ISSET(cpu, &f->own)) {
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (sched_setaffinity(0, sizeof(one), &one) == 0)
			f->bound = cpu;
	} else if (f->bound >= 0 && sched_setaffinity(0, sizeof(f->own), &f->own) == 0) {
		f->bound = -1;
	}
	errno = e;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* common/follow.c: /proc/PID/stat parsing, and binding a thread to a CPU
 * and back to its own affinity. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "follow.h"

static void test_parse(void)
{
	/* A command name with spaces and parentheses; fields 3-52. */
	const char *line = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 1000 0 23 0 5 6 0 0 20 0 "
			   "2 0 100 1000000 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 "
			   "1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
	struct msq_proc_stat st;
	char buf[1024];
	ssize_t n;
	int fd;

	CHECK_EQ(msq_proc_stat_parse(line, &st), 0);
	CHECK_EQ(st.faults, 1023);
	CHECK_EQ(st.threads, 2);
	CHECK_EQ(st.cpu, 1);
	CHECK_EQ(msq_proc_stat_parse("4242 (a S 1 2 3", &st), (uint64_t)-EINVAL);
	CHECK_EQ(msq_proc_stat_parse("4242 (a) S 1 4242 4242 0 -1 4194560 1000 0 23 0\n", &st),
		 (uint64_t)-EINVAL);
	CHECK_EQ(msq_proc_stat_parse("4242 (a) S 1 4242 4242 0 -1 4194560 x 0 23 0 5 6 0 0 20 0 "
				     "2 0 100 1000000 300 1 1 1 0 0 0 0 0 0 0 0 0 0 17 1\n", &st),
		 (uint64_t)-EINVAL);

	/* Our own: one thread, on a CPU we may run on. */
	fd = open("/proc/self/stat", O_RDONLY);
	CHECK(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	CHECK(n > 0);
	buf[n > 0 ? n : 0] = '\0';
	CHECK_EQ(msq_proc_stat_parse(buf, &st), 0);
	CHECK_EQ(st.threads, 1);
	CHECK(st.cpu >= 0 && st.cpu < CPU_SETSIZE);
	CHECK(st.faults > 0);
}

static bool only(int cpu)
{
	cpu_set_t s;

	return sched_getaffinity(0, sizeof(s), &s) == 0 && CPU_COUNT(&s) == 1 && CPU_ISSET(cpu, &s);
}

static bool equal_to(const cpu_set_t *want)
{
	cpu_set_t s;

	return sched_getaffinity(0, sizeof(s), &s) == 0 && CPU_EQUAL(&s, want);
}

static int test_follow(void)
{
	struct msq_follow f;
	cpu_set_t own, two;
	int a = -1, b = -1;

	if (sched_getaffinity(0, sizeof(own), &own) < 0)
		return 1;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &own)) {
			if (a < 0)
				a = i;
			b = i;
		}
	if (a == b) {
		printf("SKIP the binding cases: one CPU to run on\n");
		return 0;
	}
	msq_follow_init(&f);
	CHECK(f.ok);
	CHECK_EQ(f.bound, (uint64_t)-1);
	msq_follow_cpu(&f, a);
	CHECK(only(a));
	CHECK_EQ(f.bound, a);
	msq_follow_cpu(&f, b);
	CHECK(only(b));
	msq_follow_cpu(&f, -1);
	CHECK(equal_to(&own));
	CHECK_EQ(f.bound, (uint64_t)-1);
	/* A CPU outside its affinity: not bound. */
	msq_follow_cpu(&f, CPU_SETSIZE - 1 == b ? 0 : CPU_SETSIZE - 1);
	CHECK(equal_to(&own));

	/* Someone else sets the affinity while it is bound: that set is its
	 * own from then on. */
	msq_follow_cpu(&f, a);
	CPU_ZERO(&two);
	CPU_SET(a, &two);
	CPU_SET(b, &two);
	CHECK(sched_setaffinity(0, sizeof(two), &two) == 0);
	msq_follow_cpu(&f, b);
	CHECK(only(b));
	msq_follow_cpu(&f, -1);
	CHECK(equal_to(&two));
	sched_setaffinity(0, sizeof(own), &own);

	/* Started on one CPU only: it never moves. */
	CPU_ZERO(&two);
	CPU_SET(a, &two);
	CHECK(sched_setaffinity(0, sizeof(two), &two) == 0);
	msq_follow_init(&f);
	CHECK(!f.ok);
	msq_follow_cpu(&f, b);
	CHECK(only(a));
	sched_setaffinity(0, sizeof(own), &own);
	return 0;
}

int main(void)
{
	test_parse();
	if (test_follow())
		CHECK(!"sched_getaffinity");
	CHECK_DONE();
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "config.h"

int main(void)
{
	uint64_t v = 7;
	enum msq_mode m = MSQ_MODE_OFF;
	enum msq_read_mode r = MSQ_READ_OFF;
	bool b = false;
	char buf[32];

	CHECK(msq_parse_size("16M", &v) == 0 && v == 16u << 20);
	CHECK(msq_parse_size("16MiB", &v) == 0 && v == 16u << 20);
	CHECK(msq_parse_size("512k", &v) == 0 && v == 512u << 10);
	CHECK(msq_parse_size("1G", &v) == 0 && v == 1u << 30);
	CHECK(msq_parse_size("2T", &v) == 0 && v == 2ull << 40);
	CHECK(msq_parse_size("4096", &v) == 0 && v == 4096);
	CHECK(msq_parse_size("100B", &v) == 0 && v == 100);
	v = 7;
	CHECK(msq_parse_size("", &v) == -EINVAL && v == 7);
	CHECK(msq_parse_size("M", &v) == -EINVAL && v == 7);
	CHECK(msq_parse_size("-1M", &v) == -EINVAL && v == 7);
	CHECK(msq_parse_size("16 M", &v) == -EINVAL && v == 7);
	CHECK(msq_parse_size("16X", &v) == -EINVAL && v == 7);
	CHECK(msq_parse_size("99999999999999999999", &v) == -EINVAL && v == 7);
	CHECK(msq_parse_size("2000000000T", &v) == -EINVAL && v == 7);
	CHECK(msq_parse_size(NULL, &v) == -EINVAL && v == 7);

	CHECK(msq_parse_duration_ns("20ms", &v) == 0 && v == 20000000);
	CHECK(msq_parse_duration_ns("20", &v) == 0 && v == 20000000);
	CHECK(msq_parse_duration_ns("1s", &v) == 0 && v == 1000000000);
	CHECK(msq_parse_duration_ns("500us", &v) == 0 && v == 500000);
	CHECK(msq_parse_duration_ns("30min", &v) == 0 && v == UINT64_C(1800) * 1000000000);
	CHECK(msq_parse_duration_ns("1h", &v) == 0 && v == UINT64_C(3600) * 1000000000);
	v = 7;
	CHECK(msq_parse_duration_ns("50us", &v) == -EINVAL && v == 7); /* below 100 us */
	CHECK(msq_parse_duration_ns("2h", &v) == -EINVAL && v == 7);
	CHECK(msq_parse_duration_ns("3601s", &v) == -EINVAL && v == 7);
	CHECK(msq_parse_duration_ns("ms", &v) == -EINVAL && v == 7);

	CHECK(msq_parse_mode("pageout", &m) == 0 && m == MSQ_MODE_PAGEOUT);
	CHECK(msq_parse_mode("COLD", &m) == 0 && m == MSQ_MODE_COLD);
	CHECK(msq_parse_mode("off", &m) == 0 && m == MSQ_MODE_OFF);
	CHECK(msq_parse_mode("page", &m) == -EINVAL && m == MSQ_MODE_OFF);
	CHECK(msq_parse_read_mode("all", &r) == 0 && r == MSQ_READ_ALL);
	CHECK(msq_parse_read_mode("noreuse", &r) == 0 && r == MSQ_READ_NOREUSE);
	CHECK(msq_parse_read_mode("advised", &r) == 0 && r == MSQ_READ_ADVISED);
	CHECK(msq_parse_read_mode("sometimes", &r) == -EINVAL && r == MSQ_READ_ADVISED);
	CHECK(msq_parse_bool("yes", &b) == 0 && b);
	CHECK(msq_parse_bool("0", &b) == 0 && !b);
	CHECK(msq_parse_bool("2", &b) == -EINVAL && !b);

	CHECK(!strcmp(msq_format_size(16u << 20, buf, sizeof(buf)), "16M"));
	CHECK(!strcmp(msq_format_size(1536, buf, sizeof(buf)), "1536"));
	CHECK(!strcmp(msq_format_size(3u << 30, buf, sizeof(buf)), "3G"));
	CHECK(!strcmp(msq_mode_name(MSQ_MODE_COLD), "cold"));
	CHECK_DONE();
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <string.h>

#include "helper.h"

const char *msq_prog = "madvseq";

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "check-env", msq_cmd_check_env },
		{ "preloadable", msq_cmd_preloadable },
		{ "report", msq_cmd_report },
		{ "stat", msq_cmd_stat },
	};

	if (argc >= 2 && !strcmp(argv[1], "--version")) {
		printf("madvseq-helper %s\n", MSQ_VERSION);
		return 0;
	}
	for (size_t i = 0; argc >= 2 && i < sizeof(cmds) / sizeof(*cmds); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "madvseq-helper: usage: madvseq-helper check-env|preloadable|report|stat ...\n"
			"(called by madvseq(1); see there)\n");
	return 2;
}

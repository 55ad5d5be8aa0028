/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer harness for madvseqd's message handler: each input is a short
 * conversation of one live client with the real handler (daemon/handle.c,
 * validate.c, client.c, regions.c, ...), followed by a management cycle,
 * the pending snapshot and exit-drop walks, and the client's end.
 *
 * The client is this process itself, connected through a socketpair, with
 * a pidfd of its own: REGISTER can name real mappings.  A file of
 * FILE_PAGES pages is mapped at FIXED_ADDR, so that inputs (and the seed
 * corpus) can aim at it; a REGISTER whose dev and ino are both 0 gets
 * that file's (otherwise every register would be refused at the
 * /proc/PID/maps check, which the fuzzer cannot guess).
 *
 * Input: byte 0 picks the client's uid (even: root, odd: nobody, whose
 * every action must be refused as this process is root's); then
 * messages, each a 16-bit little-endian length and that many bytes.
 *
 * Built with clang beside the project's own compiler (tests/fuzz/meson.build);
 * seeds in tests/fuzz/handler/seeds, past crashes in handler/crashes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>

#include <madvseq/protocol.h>

#include "../../daemon/client.h"
#include "../../daemon/cycle.h"
#include "../../daemon/msqd.h"
#include "../../daemon/exitdrop.h"
#include "../../daemon/handle.h"
#include "../../daemon/log.h"
#include "../../daemon/refs.h"
#include "../../daemon/regions.h"
#include "../../daemon/server.h"
#include "../../daemon/util.h"

#define FIXED_ADDR UINT64_C(0x200000000000)
#define FILE_PAGES 64

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct msqd d;
static struct stat file_st;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[] = "/tmp/msq-fuzz-XXXXXX";
	static char buf[FILE_PAGES * 4096];
	int fd = mkstemp(path);

	(void)argc;
	(void)argv;
	if (fd < 0 || write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf) || fstat(fd, &file_st) < 0 ||
	    mmap((void *)(uintptr_t)FIXED_ADDR, sizeof(buf), PROT_READ, MAP_SHARED | MAP_FIXED_NOREPLACE,
		 fd, 0) == MAP_FAILED) {
		perror("fuzz setup");
		abort();
	}
	unlink(path);
	close(fd);
	msqd_log_level = LOG_CRIT; /* quiet: the fuzzer's own output matters */
	d = (struct msqd){ .set = { .proc_root = "/proc", .cg_root = "/sys/fs/cgroup" },
			   .srv = { .lfd = -1, .sigfd = -1, .spare_fd = -1 },
			   .disc = { .disk_intake = { .fd = -1 } }, .rg = { .fd_budget = 256 } };
	msqd_conf_init(&d.set.conf);
	d.set.conf.walk_budget_ns = 1000000;
	d.srv.epfd = epoll_create1(EPOLL_CLOEXEC);
	msqd_refs_init(&d);
	d.started_ns = d.now_ns = msqd_now_ns();
	d.cyc.sleep_ns = d.set.conf.interval_ns;
	return 0;
}

static void drain(int fd)
{
	static char sink[MSQ_MSG_MAX + 64];

	while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t msg[MSQ_MSG_MAX] __attribute__((aligned(16)));
	struct msqd_client *c;
	int sv[2], pidfd;
	size_t at = 1;

	if (size < 1)
		return 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (pidfd < 0)
		abort();
	d.now_ns = msqd_now_ns();
	c = msqd_client_new(&d, sv[0], pidfd, getpid(), data[0] & 1 ? 65534 : 0);
	if (!c)
		abort();
	while (at + 2 <= size) {
		size_t n = (size_t)data[at] | (size_t)data[at + 1] << 8;
		int rc;

		at += 2;
		if (n > size - at)
			n = size - at;
		if (n > sizeof(msg))
			n = sizeof(msg);
		memcpy(msg, data + at, n);
		at += n;
		if (n >= sizeof(struct msq_msg_register) &&
		    ((struct msq_msg_hdr *)msg)->type == MSQ_MSG_REGISTER) {
			struct msq_msg_register *r = (struct msq_msg_register *)msg;

			if (!r->dev && !r->ino) {
				r->dev = file_st.st_dev;
				r->ino = file_st.st_ino;
			}
		}
		d.now_ns = msqd_now_ns();
		{
			struct msqd_reply reply = { 0 };
			int sent;

			rc = msqd_handle(&d, c, msg, n, &reply);
			sent = msqd_server_send_reply(c, &reply);
			if (rc == 0)
				rc = sent;
		}
		drain(sv[1]);
		if (rc < 0 || c->closing_ns)
			break;
	}
	/* What the daemon does between messages: a cycle, the walks. */
	d.now_ns = msqd_now_ns();
	msqd_cycle(&d);
	msqd_snapshots(&d, msqd_now_ns() + d.set.conf.walk_budget_ns);
	msqd_exit_drops(&d, msqd_now_ns() + d.set.conf.walk_budget_ns);
	msqd_client_drop(&d, c, "fuzz input done");
	msqd_exit_drops(&d, UINT64_MAX);
	close(sv[1]);
	return 0;
}

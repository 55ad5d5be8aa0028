/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * daemon-sandbox: runs a program under the seccomp filter and capability
 * bounding set that systemd builds from madvseqd.service, for tests on
 * hosts where systemd is not PID 1 (no systemd-run).  sandbox.py reads
 * the unit and turns it into these options; this program only installs
 * what it is told, as systemd 252 does (src/shared/seccomp-util.c):
 *
 *   -s NR,NR,...  SystemCallFilter= (allow list, already expanded to
 *                 numbers; SystemCallArchitectures=native: any other
 *                 architecture, x32 included, is refused)
 *   -e ERRNO      SystemCallErrorNumber=: what the others return.  Without
 *                 it they kill the process (SIGSYS), systemd's default.
 *   -a FAM,FAM,.. RestrictAddressFamilies= (an allow list, numbers):
 *                 socket() of any other family returns EAFNOSUPPORT
 *   -w            MemoryDenyWriteExecute=yes: mmap() writable and
 *                 executable, mprotect()/pkey_mprotect() executable: EPERM
 *   -c CAP,CAP,.. CapabilityBoundingSet= (numbers; "-": none)
 *   -n            NoNewPrivileges=yes (set anyway when a filter is loaded
 *                 by a process without CAP_SYS_ADMIN)
 *
 * then execs the program.  Exits 2 on bad usage, 77 where seccomp filters
 * cannot be loaded here (not x86-64, or the kernel refuses), 127 when the
 * exec fails.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PR_CAPBSET_DROP
#define PR_CAPBSET_DROP 24
#endif
#define MAX_INSNS 4096 /* BPF_MAXINSNS */
#define CAP_COUNT 64   /* capability numbers are < 64 */

struct prog {
	struct sock_filter insn[MAX_INSNS];
	unsigned n;
};

static void emit(struct prog *p, struct sock_filter f)
{
	if (p->n == MAX_INSNS) {
		fprintf(stderr, "daemon-sandbox: filter longer than %d instructions\n", MAX_INSNS);
		exit(2);
	}
	p->insn[p->n++] = f;
}

#define STMT(code, k) ((struct sock_filter)BPF_STMT(code, k))
#define JUMP(code, k, jt, jf) ((struct sock_filter)BPF_JUMP(code, k, jt, jf))
#define LOAD_NR STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define LOAD_ARG(i) STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[i]))
#define RET(v) STMT(BPF_RET | BPF_K, v)

/* Parses "N,N,..." into out (at most max); returns the count or -1. */
static int numbers(const char *s, long *out, int max)
{
	int n = 0;

	while (*s) {
		char *end;
		long v;

		errno = 0;
		v = strtol(s, &end, 10);
		if (errno || end == s || v < 0 || (*end && *end != ',') || n == max)
			return -1;
		out[n++] = v;
		s = *end ? end + 1 : end;
	}
	return n;
}

static void usage(void)
{
	fprintf(stderr, "usage: daemon-sandbox -s NR,... [-e ERRNO] [-a FAMILY,...] [-w] [-c CAP,...|-] [-n] "
			"-- PROGRAM [ARG]...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static struct prog p;
	static long nrs[MAX_INSNS / 2];
	long caps[CAP_COUNT], fams[8];
	const char *allow = NULL, *capset = NULL, *famset = NULL;
	long err = -1;
	bool mdwe = false, nnp = false;
	int n, ncaps = -1, nfams = 0, opt;

	while ((opt = getopt(argc, argv, "s:e:a:wc:n")) != -1) {
		switch (opt) {
		case 's': allow = optarg; break;
		case 'e': err = strtol(optarg, NULL, 10); break;
		case 'a': famset = optarg; break;
		case 'w': mdwe = true; break;
		case 'c': capset = optarg; break;
		case 'n': nnp = true; break;
		default: usage();
		}
	}
	if (!allow || optind >= argc || err == 0 || err > 4095)
		usage();
#if !defined(__x86_64__)
	fprintf(stderr, "daemon-sandbox: only x86-64 filters are written here\n");
	return 77;
#else
	if ((n = numbers(allow, nrs, MAX_INSNS / 2 - 32)) < 0)
		usage();
	if (capset && strcmp(capset, "-") && (ncaps = numbers(capset, caps, CAP_COUNT)) < 0)
		usage();
	if (capset && !strcmp(capset, "-"))
		ncaps = 0;
	if (famset && (nfams = numbers(famset, fams, 8)) <= 0)
		usage();

	/* The architecture first: numbers mean nothing across them. */
	emit(&p, STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
	emit(&p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0));
	emit(&p, RET(SECCOMP_RET_KILL_PROCESS));
	emit(&p, LOAD_NR);
	/* x32 calls are x86-64 numbers with bit 30 set: another ABI */
	emit(&p, JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1));
	emit(&p, RET(err > 0 ? SECCOMP_RET_ERRNO | (unsigned)err : SECCOMP_RET_KILL_PROCESS));
	if (nfams > 0) {
		/* socket(): each allowed family jumps to the reload of the
		 * number; falling through all of them is EAFNOSUPPORT. */
		emit(&p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, (unsigned)nfams + 2));
		emit(&p, LOAD_ARG(0));
		for (int i = 0; i < nfams; i++)
			emit(&p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)fams[i], (unsigned)(nfams - i), 0));
		emit(&p, RET(SECCOMP_RET_ERRNO | EAFNOSUPPORT));
		emit(&p, LOAD_NR);
	}
	if (mdwe) {
		emit(&p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 4));
		emit(&p, LOAD_ARG(2));
		emit(&p, STMT(BPF_ALU | BPF_AND | BPF_K, PROT_WRITE | PROT_EXEC));
		emit(&p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_WRITE | PROT_EXEC, 0, 1));
		emit(&p, RET(SECCOMP_RET_ERRNO | EPERM));
		emit(&p, LOAD_NR);
		static const unsigned prot_calls[] = { SYS_mprotect, SYS_pkey_mprotect };

		for (size_t i = 0; i < 2; i++) {
			emit(&p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, prot_calls[i], 0, 4));
			emit(&p, LOAD_ARG(2));
			emit(&p, JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 1));
			emit(&p, RET(SECCOMP_RET_ERRNO | EPERM));
			emit(&p, LOAD_NR);
		}
	}
	/* The allow list: two instructions each, so no jump is longer than
	 * BPF's 255 however long the list. */
	for (int i = 0; i < n; i++) {
		emit(&p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nrs[i], 0, 1));
		emit(&p, RET(SECCOMP_RET_ALLOW));
	}
	emit(&p, RET(err > 0 ? SECCOMP_RET_ERRNO | (unsigned)err : SECCOMP_RET_KILL_PROCESS));

	if (ncaps >= 0) {
		for (long cap = 0; cap < CAP_COUNT; cap++) {
			bool keep = false;

			for (int i = 0; i < ncaps; i++)
				keep |= caps[i] == cap;
			if (!keep && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) {
				perror("daemon-sandbox: PR_CAPBSET_DROP");
				return 1;
			}
		}
	}
	if ((nnp || geteuid() != 0) && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		perror("daemon-sandbox: PR_SET_NO_NEW_PRIVS");
		return 1;
	}
	{
		struct sock_fprog fp = { .len = (unsigned short)p.n, .filter = p.insn };

		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) < 0) {
			fprintf(stderr, "daemon-sandbox: seccomp: %s\n", strerror(errno));
			return 77;
		}
	}
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "daemon-sandbox: %s: %s\n", argv[optind], strerror(errno));
	return 127;
#endif
}

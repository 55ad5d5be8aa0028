/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Hostile and odd clients of madvseqd, one per subcommand:
 *
 *   hostile SOCKET malformed|truncated|oversized|out-of-order|bad-version|bad-snapshot|garbage
 *       sends one bad message; passes if the daemon hangs up.
 *   hostile SOCKET lie-region FILE
 *       registers ranges that are not what it maps; all must be refused,
 *       the true one accepted.
 *   hostile SOCKET lie-pid PID ADDR LEN FILE
 *       claims (SCM_CREDENTIALS, allowed to root) to be PID and registers
 *       PID's mapping of FILE at ADDR: must be refused.
 *   hostile SOCKET silent MAX_MS
 *       connects and says nothing: the daemon must hang up within MAX_MS.
 *   hostile SOCKET many N FILE
 *       N connections at once, each registering a region.
 *   hostile SOCKET exit-mid N FILE
 *       N processes that exit in the middle of registering.
 *   hostile SOCKET pid-reuse FILE
 *       a client exits while a child keeps its socket; a new process gets
 *       its pid: the daemon must have dropped the client and the child's
 *       messages must go nowhere.
 *
 * Run as an unprivileged user (the attacks of issue 10):
 *
 *   hostile SOCKET unaligned-unregister FILE
 *       UNREGISTER FINAL of a range that starts inside a page: EINVAL or a
 *       hang-up, never a daemon spinning in a page loop.
 *   hostile SOCKET snapshot-ranges FILE
 *       REGISTERs whose snapshot is unaligned, unsorted, or outside the
 *       region: each EINVAL; a true one is accepted.
 *   hostile SOCKET second-hello
 *       HELLO twice: the daemon hangs up.
 *   hostile SOCKET status-nonroot
 *       madvseqctl's HELLO from another user: EPERM.
 *   hostile SOCKET never-reads
 *       pipelines requests and reads no answer: the daemon hangs up.
 *   hostile SOCKET conn-flood N
 *       N connections, each saying HELLO; prints how many were welcomed,
 *       then holds them until its stdin ends.
 *   hostile SOCKET region-flood FILE N
 *       N one-page regions from one client; prints accepted and refused.
 *   hostile SOCKET sparse FILE N
 *       N REGISTERs of the whole mapping of FILE (a huge sparse file), then,
 *       a second later, an UNREGISTER FINAL of it: prints how long its
 *       answer took.
 *   hostile SOCKET exec-setuid FILE PROG
 *       a process connects and says HELLO through a child that keeps the
 *       socket, then execs PROG (a setuid-root copy of this program,
 *       "hold FILE"); the child aims REGISTER and UNREGISTER FINAL at
 *       the setuid process's mapping: both must be EPERM.
 *   hostile SOCKET reuse-connect
 *       connects, leaves the socket to a child and exits; the child prints
 *       "pid=N", reads "ADDR LEN DEV INO" (the mapping of the process that
 *       took pid N) from stdin, then tries HELLO, REGISTER and UNREGISTER
 *       FINAL on it: none may be accepted.
 *   hostile - hold FILE
 *       maps FILE, reads every page, prints "pid=N map=ADDR len=LEN dev=D
 *       ino=I" and sleeps (a victim).
 *
 * Each prints what it saw; exit 0 pass, 1 fail, 77 cannot run here.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <madvseq/protocol.h>

#include "status_request.h"

static const char *g_sock;
static uint32_t g_seq;

static int conn(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", g_sock);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("connect");
		exit(1);
	}
	return fd;
}

static int msg(int fd, void *m, uint16_t type, uint32_t size)
{
	struct msq_msg_hdr *h = m;

	*h = (struct msq_msg_hdr){ MSQ_PROTO_MAGIC, MSQ_PROTO_VERSION, type, size, ++g_seq };
	return send(fd, m, size, MSG_NOSIGNAL) == (ssize_t)size ? 0 : -errno;
}

/* Next message, or 0 on hang-up, -errno on error/timeout. */
static ssize_t reply(int fd, void *buf, size_t len, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	ssize_t n;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = recv(fd, buf, len, 0);
	return n < 0 ? -errno : n;
}

static int hello_flags(int fd, uint32_t flags)
{
	struct msq_msg_hello h = { .flags = flags };
	char buf[256];
	ssize_t n;

	if (msg(fd, &h, MSQ_MSG_HELLO, sizeof(h)) < 0)
		return -EPIPE;
	n = reply(fd, buf, sizeof(buf), 5000);
	if (n < (ssize_t)sizeof(struct msq_msg_hdr) || ((struct msq_msg_hdr *)buf)->type != MSQ_MSG_WELCOME)
		return -EPROTO;
	return 0;
}

static int hello(int fd)
{
	return hello_flags(fd, MSQ_HELLO_SHIM);
}

static int reg(int fd, uint64_t id, uint64_t start, uint64_t len, uint64_t dev, uint64_t ino,
	       uint64_t off, bool wait)
{
	struct msq_msg_register m = { .id = id, .start = start, .length = len, .dev = dev,
				      .ino = ino, .offset = off, .flags = MSQ_REGION_SHARED };
	struct msq_msg_result r;
	ssize_t n;

	if (msg(fd, &m, MSQ_MSG_REGISTER, sizeof(m)) < 0)
		return -EPIPE;
	if (!wait)
		return 0;
	n = reply(fd, &r, sizeof(r), 5000);
	if (n == 0)
		return -ECONNRESET;
	if (n != sizeof(r) || r.h.type != MSQ_MSG_RESULT || r.id != id)
		return -EPROTO;
	return r.status;
}

/* True if the daemon hangs up within ms (an ERROR reply first is fine). */
static bool hung_up(int fd, int ms)
{
	char buf[256];

	for (;;) {
		ssize_t n = reply(fd, buf, sizeof(buf), ms);

		if (n == 0 || n == -ECONNRESET)
			return true;
		if (n < 0)
			return false;
		if (((struct msq_msg_hdr *)buf)->type != MSQ_MSG_ERROR)
			return false;
	}
}

static long clients(void)
{
	char *s = msq_test_status(conn(), 10000), *p;

	if (!s || !(p = strstr(s, "clients: ")))
		return -1;
	return strtol(p + 9, NULL, 10);
}

struct mapped {
	void *p;
	size_t len;
	struct stat st;
};

static struct mapped map_file(const char *path)
{
	struct mapped m;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &m.st) < 0) {
		perror(path);
		exit(1);
	}
	m.len = (size_t)m.st.st_size & ~(size_t)4095;
	m.p = mmap(NULL, m.len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m.p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return m;
}

static int bad_message(const char *what)
{
	int fd = conn();
	union {
		struct msq_msg_hello h;
		struct msq_msg_register r;
		char big[MSQ_MSG_MAX + 4096];
	} m;
	size_t size = sizeof(m.h);

	memset(&m, 0, sizeof(m));
	m.h.flags = MSQ_HELLO_SHIM;
	m.h.h = (struct msq_msg_hdr){ MSQ_PROTO_MAGIC, MSQ_PROTO_VERSION, MSQ_MSG_HELLO, sizeof(m.h), 1 };
	if (!strcmp(what, "malformed")) {
		m.h.h.magic = 0xdeadbeef;
	} else if (!strcmp(what, "truncated")) {
		size = sizeof(m.h.h) + 2; /* a HELLO cut short */
		m.h.h.size = (uint32_t)size;
	} else if (!strcmp(what, "oversized")) {
		size = sizeof(m.big);
		m.h.h.size = (uint32_t)size;
	} else if (!strcmp(what, "out-of-order")) {
		m.r.h = (struct msq_msg_hdr){ MSQ_PROTO_MAGIC, MSQ_PROTO_VERSION, MSQ_MSG_REGISTER,
					      sizeof(m.r), 1 };
		m.r.start = 0x10000;
		m.r.length = 4096;
		size = sizeof(m.r);
	} else if (!strcmp(what, "bad-snapshot")) {
		/* A REGISTER whose snapshot count and size disagree. */
		m.r.h = (struct msq_msg_hdr){ MSQ_PROTO_MAGIC, MSQ_PROTO_VERSION, MSQ_MSG_REGISTER, 0, 1 };
		m.r.start = 0x10000;
		m.r.length = 4096;
		m.r.flags = MSQ_REGION_SNAPSHOT;
		m.r.nprecached = 3;
		size = sizeof(m.r) + 2 * sizeof(struct msq_wire_range);
		m.r.h.size = (uint32_t)size;
	} else if (!strcmp(what, "bad-version")) {
		m.h.h.version = 99;
	} else if (!strcmp(what, "garbage")) {
		for (size_t i = 0; i < 100; i++)
			((char *)&m)[i] = (char)(i * 37 + 11);
		size = 100;
	}
	/* Oversized sends may need a bigger buffer than the default. */
	int sz = 1 << 20;
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	if (send(fd, &m, size, MSG_NOSIGNAL) != (ssize_t)size) {
		printf("%s: send: %s (the kernel refused it: nothing reached the daemon)\n", what,
		       strerror(errno));
		return 0;
	}
	if (!hung_up(fd, 3000)) {
		printf("%s: the daemon kept the connection\n", what);
		return 1;
	}
	printf("%s: the daemon hung up\n", what);
	return 0;
}

static int lie_region(const char *file)
{
	struct mapped m = map_file(file);
	void *anon = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t a = (uintptr_t)m.p, dev = m.st.st_dev, ino = m.st.st_ino;
	int fd = conn(), fails = 0, rc;
	struct {
		const char *what;
		uint64_t start, len, dev, ino, off;
		int want;
	} cases[] = {
		{ "unmapped range", 0x10000, 1 << 20, dev, ino, 0, -EINVAL },
		{ "anonymous memory", (uintptr_t)anon, 1 << 20, dev, ino, 0, -EINVAL },
		{ "wrong inode", a, m.len, dev, ino + 1, 0, -EINVAL },
		{ "wrong device", a, m.len, dev + 1, ino, 0, -EINVAL },
		{ "wrong offset", a, m.len, dev, ino, 4096, -EINVAL },
		{ "past the mapping", a, m.len + (64 << 20), dev, ino, 0, -EINVAL },
		{ "unaligned", a + 1, 4096, dev, ino, 0, -EINVAL },
		{ "wrapping around", UINT64_MAX - 4095, 8192, dev, ino, 0, -EINVAL },
		{ "kernel address", 0xffff800000000000ull, 4096, dev, ino, 0, -EINVAL },
		{ "the truth", a, m.len, dev, ino, 0, 0 },
	};

	if (hello(fd) < 0) {
		printf("no welcome\n");
		return 1;
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		rc = reg(fd, i + 1, cases[i].start, cases[i].len, cases[i].dev, cases[i].ino, cases[i].off, true);
		printf("%-18s -> %s%s\n", cases[i].what, rc ? strerror(-rc) : "accepted",
		       rc == cases[i].want ? "" : "  (WRONG)");
		fails += rc != cases[i].want;
	}
	return fails ? 1 : 0;
}

/* Root may put any pid in SCM_CREDENTIALS; the daemon must not care. */
static int lie_pid(pid_t pid, uint64_t addr, uint64_t len, const char *file)
{
	struct stat st;
	int fd = conn(), on = 1, rc;
	struct msq_msg_hello h = { .flags = MSQ_HELLO_SHIM };
	char cbuf[CMSG_SPACE(sizeof(struct ucred))];
	struct iovec iov = { &h, sizeof(h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	char buf[256];

	if (stat(file, &st) < 0)
		return 1;
	setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_CREDENTIALS;
	c->cmsg_len = CMSG_LEN(sizeof(struct ucred));
	memcpy(CMSG_DATA(c), &(struct ucred){ pid, 0, 0 }, sizeof(struct ucred));
	h.h = (struct msq_msg_hdr){ MSQ_PROTO_MAGIC, MSQ_PROTO_VERSION, MSQ_MSG_HELLO, sizeof(h), 1 };
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) < 0) {
		printf("sendmsg with forged credentials: %s (kernel refused)\n", strerror(errno));
		return 0;
	}
	if (reply(fd, buf, sizeof(buf), 5000) <= 0) {
		printf("no welcome\n");
		return 1;
	}
	rc = reg(fd, 1, addr, len, st.st_dev, st.st_ino, 0, true);
	printf("registering pid %d's mapping while claiming to be pid %d -> %s\n", (int)pid, (int)pid,
	       rc ? strerror(-rc) : "accepted");
	return rc == -EINVAL ? 0 : 1;
}

static int silent(int max_ms)
{
	struct timespec t0, t1;
	int fd = conn();
	char b;
	ssize_t n;
	long ms;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	n = reply(fd, &b, 1, max_ms + 2000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	printf("silent client: %s after %ld ms\n", n == 0 ? "hung up" : "still connected", ms);
	return n == 0 && ms <= max_ms ? 0 : 1;
}

static int many(int n, const char *file)
{
	struct mapped m = map_file(file);
	struct rlimit rl = { (rlim_t)n + 64, (rlim_t)n + 64 };
	int *fds = calloc((size_t)n, sizeof(int)), ok = 0;
	long c;

	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		printf("cannot raise RLIMIT_NOFILE to %d\n", n + 64);
		return 77;
	}
	for (int i = 0; i < n; i++) {
		fds[i] = conn();
		struct msq_msg_hello h = { .flags = MSQ_HELLO_SHIM };
		msg(fds[i], &h, MSQ_MSG_HELLO, sizeof(h));
	}
	/* All at once: every HELLO is out before any answer is read. */
	for (int i = 0; i < n; i++) {
		char buf[256];

		if (reply(fds[i], buf, sizeof(buf), 10000) <= 0)
			continue;
		if (reg(fds[i], 1, (uintptr_t)m.p, m.len, m.st.st_dev, m.st.st_ino, 0, true) == 0)
			ok++;
	}
	c = clients();
	printf("%d/%d clients registered; daemon reports %ld clients\n", ok, n, c);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
	return ok == n && c >= n ? 0 : 1;
}

static int exit_mid(int n, const char *file)
{
	long c;

	for (int i = 0; i < n; i++) {
		pid_t p = fork();

		if (p == 0) {
			struct mapped m = map_file(file);
			int fd = conn();
			struct msq_msg_hello h = { .flags = MSQ_HELLO_SHIM };

			msg(fd, &h, MSQ_MSG_HELLO, sizeof(h));
			for (int j = 0; j < 5; j++)
				reg(fd, (uint64_t)j + 1, (uintptr_t)m.p + (uint64_t)j * 4096, 4096,
				    m.st.st_dev, m.st.st_ino, (uint64_t)j * 4096, false);
			if (i % 2)
				kill(getpid(), SIGKILL);
			_exit(0);
		}
	}
	while (wait(NULL) > 0)
		;
	usleep(500 * 1000);
	c = clients();
	printf("after %d clients exited mid-registration the daemon answers and reports %ld clients\n", n, c);
	return c == 0 ? 0 : 1;
}

static int pid_reuse(const char *file)
{
	int sv[2], status;
	pid_t a, reused;
	char buf[256];
	FILE *f;
	long c;

	if (pipe(sv) < 0)
		return 1;
	a = fork();
	if (a == 0) {
		struct mapped m = map_file(file);
		int fd = conn();
		pid_t g;

		if (hello(fd) < 0 || reg(fd, 1, (uintptr_t)m.p, m.len, m.st.st_dev, m.st.st_ino, 0, true) != 0)
			_exit(1);
		g = fork();
		if (g == 0) {
			/* The grandchild keeps A's socket, and later talks on it. */
			char x;
			int rc;

			close(sv[1]);
			if (read(sv[0], &x, 1) != 1)
				_exit(3);
			rc = reg(fd, 2, (uintptr_t)m.p, m.len, m.st.st_dev, m.st.st_ino, 0, true);
			printf("the exited client's socket, used by its child: %s\n",
			       rc == -EPIPE || rc == -ECONNRESET ? "closed by the daemon" : strerror(-rc));
			fflush(stdout);
			_exit(rc == -EPIPE || rc == -ECONNRESET ? 0 : 2);
		}
		_exit(0);
	}
	close(sv[0]);
	waitpid(a, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		printf("client A could not register\n");
		return 1;
	}
	/* A new process with A's pid. */
	f = fopen("/proc/sys/kernel/ns_last_pid", "w");
	if (!f) {
		printf("cannot write ns_last_pid: pid reuse cannot be forced here\n");
		return 77;
	}
	fprintf(f, "%d", (int)a - 1);
	fclose(f);
	reused = fork();
	if (reused == 0) {
		struct mapped m = map_file(file);
		volatile char s = 0;

		for (size_t i = 0; i < m.len; i += 4096)
			s += ((char *)m.p)[i];
		pause();
		_exit(0);
	}
	if (reused != a) {
		kill(reused, SIGKILL);
		waitpid(reused, NULL, 0);
		printf("pid %d was not reused (got %d)\n", (int)a, (int)reused);
		return 77;
	}
	usleep(300 * 1000);
	c = clients();
	if (write(sv[1], "x", 1) != 1)
		return 1;
	usleep(300 * 1000);
	snprintf(buf, sizeof(buf), "pid %d", (int)a);
	{
		char *s = msq_test_status(conn(), 10000);

		printf("pid %d reused; daemon reports %ld clients%s\n", (int)a, c,
		       s && strstr(s, buf) ? ", and still lists that pid (WRONG)" : "");
		kill(reused, SIGKILL);
		waitpid(reused, NULL, 0);
		return c == 0 && s && !strstr(s, buf) ? 0 : 1;
	}
}

static int result(int fd, uint32_t *seq_out)
{
	struct msq_msg_result r;
	ssize_t n = reply(fd, &r, sizeof(r), 3000);

	if (n == 0 || n == -ECONNRESET)
		return -ECONNRESET;
	if (n < (ssize_t)sizeof(struct msq_msg_hdr))
		return n < 0 ? (int)n : -EPROTO;
	if (r.h.type == MSQ_MSG_ERROR)
		return ((struct msq_msg_error *)&r)->status;
	if (n != sizeof(r) || r.h.type != MSQ_MSG_RESULT)
		return -EPROTO;
	if (seq_out)
		*seq_out = r.h.seq;
	return r.status;
}

static int unregister(int fd, uint64_t start, uint64_t len, uint32_t flags)
{
	struct msq_msg_unregister u = { .start = start, .length = len, .flags = flags };

	if (msg(fd, &u, MSQ_MSG_UNREGISTER, sizeof(u)) < 0)
		return -EPIPE;
	return result(fd, NULL);
}

static int unaligned_unregister(const char *file)
{
	struct mapped m = map_file(file);
	uint64_t a = (uintptr_t)m.p;
	int fd = conn(), rc;

	if (hello(fd) < 0 || reg(fd, 1, a, 4096, m.st.st_dev, m.st.st_ino, 0, true) != 0) {
		printf("could not register one page\n");
		return 1;
	}
	/* The page resident, so that the final drop has it to check. */
	(void)*(volatile char *)m.p;
	rc = unregister(fd, a + 0xa00, 4096, MSQ_UNREGISTER_FINAL);
	printf("UNREGISTER FINAL of page + 0xa00 -> %s\n", rc == -ECONNRESET ? "hang-up" : strerror(-rc));
	return rc == -EINVAL || rc == -ECONNRESET ? 0 : 1;
}

static int snapshot_ranges(const char *file)
{
	struct mapped m = map_file(file);
	uint64_t a = (uintptr_t)m.p, P = 4096;
	int fd = conn(), fails = 0;
	struct {
		const char *what;
		struct msq_wire_range v[2];
		int want;
	} cases[] = {
		{ "unaligned", { { a + 0x10, a + P }, { 0, 0 } }, -EINVAL },
		{ "unsorted", { { a + 2 * P, a + 3 * P }, { a, a + P } }, -EINVAL },
		{ "outside the region", { { a + 16 * P, a + 17 * P }, { 0, 0 } }, -EINVAL },
		{ "empty range", { { a + P, a + P }, { 0, 0 } }, -EINVAL },
		{ "the truth", { { a, a + P }, { a + 2 * P, a + 3 * P } }, 0 },
	};

	if (hello(fd) < 0)
		return 1;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct {
			struct msq_msg_register r;
			struct msq_wire_range v[2];
		} q = { .r = { .id = i + 1, .start = a, .length = 8 * P, .dev = m.st.st_dev,
			       .ino = m.st.st_ino, .flags = MSQ_REGION_SHARED | MSQ_REGION_SNAPSHOT,
			       .nprecached = cases[i].v[1].end ? 2 : 1 } };
		uint32_t size = (uint32_t)(sizeof(q.r) + q.r.nprecached * sizeof(q.v[0]));
		int rc;

		memcpy(q.v, cases[i].v, sizeof(q.v));
		if (msg(fd, &q, MSQ_MSG_REGISTER, size) < 0)
			return 1;
		rc = result(fd, NULL);
		printf("snapshot %-18s -> %s%s\n", cases[i].what, rc ? strerror(-rc) : "accepted",
		       rc == cases[i].want ? "" : "  (WRONG)");
		fails += rc != cases[i].want;
	}
	return fails ? 1 : 0;
}

static int second_hello(void)
{
	int fd = conn();
	struct msq_msg_hello h = { .flags = MSQ_HELLO_SHIM };

	if (hello(fd) < 0) {
		printf("no welcome\n");
		return 1;
	}
	msg(fd, &h, MSQ_MSG_HELLO, sizeof(h));
	if (!hung_up(fd, 3000)) {
		printf("second HELLO: the daemon kept the connection\n");
		return 1;
	}
	printf("second HELLO: the daemon hung up\n");
	return 0;
}

static int status_nonroot(void)
{
	int fd = conn();
	struct msq_msg_hello h = { .flags = MSQ_HELLO_CTL };
	char buf[256];
	ssize_t n;

	msg(fd, &h, MSQ_MSG_HELLO, sizeof(h));
	n = reply(fd, buf, sizeof(buf), 3000);
	if (n >= (ssize_t)sizeof(struct msq_msg_error) && ((struct msq_msg_hdr *)buf)->type == MSQ_MSG_ERROR) {
		printf("status HELLO as uid %u -> %s\n", (unsigned)getuid(),
		       strerror(-((struct msq_msg_error *)buf)->status));
		return ((struct msq_msg_error *)buf)->status == -EPERM ? 0 : 1;
	}
	printf("status HELLO as uid %u -> %s\n", (unsigned)getuid(), n > 0 ? "welcomed (WRONG)" : "hang-up");
	return n > 0 ? 1 : 0;
}

static int never_reads(void)
{
	int fd = conn(), sent = 0, sz = 4096;
	struct msq_msg_register r = { .start = 0x10001, .length = 4096 }; /* refused: EINVAL */
	char buf[256];

	if (hello(fd) < 0)
		return 1;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	for (; sent < 1000000; sent++) {
		r.id = (uint64_t)sent;
		r.h = (struct msq_msg_hdr){ MSQ_PROTO_MAGIC, MSQ_PROTO_VERSION, MSQ_MSG_REGISTER, sizeof(r), ++g_seq };
		if (send(fd, &r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(r)) {
			if (errno == EAGAIN) {
				usleep(10000);
				if (send(fd, &r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(r))
					continue;
				if (errno == EAGAIN)
					continue;
			}
			break;
		}
	}
	/* Whatever answers were queued, then the end. */
	for (int i = 0; i < 1000000; i++) {
		ssize_t n = reply(fd, buf, sizeof(buf), 5000);

		if (n == 0 || n == -ECONNRESET) {
			printf("sent %d requests without reading: the daemon hung up\n", sent);
			return 0;
		}
		if (n < 0)
			break;
	}
	printf("sent %d requests without reading: still connected (WRONG)\n", sent);
	return 1;
}

/*
 * Says it makes the drops it is asked (MSQ_HELLO_DROPS), registers its
 * mapping of file, reads it front to back, and never reads its socket:
 * the daemon's asks pile up unread.  Prints "read" and waits for stdin to
 * close; the test meanwhile sees whether the pages went anyway.
 */
static int ignores_drops(const char *file)
{
	int fd = conn(), ffd = open(file, O_RDONLY | O_CLOEXEC);
	volatile unsigned char sum = 0;
	struct stat st;
	unsigned char *p;
	char c;
	int rc;

	if (ffd < 0 || fstat(ffd, &st) < 0 || hello_flags(fd, MSQ_HELLO_SHIM | MSQ_HELLO_DROPS) < 0) {
		printf("HELLO with MSQ_HELLO_DROPS not welcomed\n");
		return 1;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, ffd, 0);
	if (p == MAP_FAILED)
		return 1;
	madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL);
	if ((rc = reg(fd, 1, (uint64_t)(uintptr_t)p, (uint64_t)st.st_size, (uint64_t)st.st_dev,
		      (uint64_t)st.st_ino, 0, true)) < 0) {
		printf("REGISTER -> %s\n", strerror(-rc));
		return 1;
	}
	/* 4 MiB every 20 ms: the daemon's cycles see the reader move. */
	for (off_t o = 0; o < st.st_size; o += 4096) {
		sum += p[o];
		if (o % (4 << 20) == 0)
			usleep(20000);
	}
	printf("read %lld MiB, registered, socket never read\n", (long long)(st.st_size >> 20));
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	return 0;
}

static int conn_flood(int n)
{
	struct rlimit rl;
	int welcomed = 0, refused = 0;
	char line[16];

	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	for (int i = 0; i < n; i++) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		struct msq_msg_hello h = { .flags = MSQ_HELLO_SHIM };

		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", g_sock);
		if (fd < 0)
			break;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
		    msg(fd, &h, MSQ_MSG_HELLO, sizeof(h)) < 0) {
			refused++;
			close(fd);
			continue;
		}
		/* (left open: the flood) */
	}
	/* Answers: a WELCOME, or the connection closed. */
	for (int fd = 3; fd < (int)rl.rlim_cur && fd < n + 64; fd++) {
		char buf[256];
		ssize_t r = reply(fd, buf, sizeof(buf), 50);

		if (r > 0 && ((struct msq_msg_hdr *)buf)->type == MSQ_MSG_WELCOME)
			welcomed++;
	}
	printf("%d connections tried: %d welcomed, %d refused at connect\nholding\n", n, welcomed, refused);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}

static int region_flood(const char *file, int n)
{
	struct mapped m = map_file(file);
	int fd = conn(), ok = 0, nospc = 0, other = 0;

	if (hello(fd) < 0)
		return 1;
	if ((size_t)n * 8192 > m.len)
		n = (int)(m.len / 8192);
	/* Pipelined 32 at a time, answers read (a client that reads). */
	for (int i = 0; i < n; i += 32) {
		int k = n - i < 32 ? n - i : 32;

		for (int j = 0; j < k; j++)
			reg(fd, (uint64_t)(i + j) + 1, (uintptr_t)m.p + (uint64_t)(i + j) * 8192, 4096,
			    m.st.st_dev, m.st.st_ino, (uint64_t)(i + j) * 8192, false);
		for (int j = 0; j < k; j++) {
			int rc = result(fd, NULL);

			ok += rc == 0;
			nospc += rc == -ENOSPC;
			other += rc != 0 && rc != -ENOSPC;
			if (rc == -ECONNRESET) {
				printf("hang-up after %d\n", i + j);
				i = n;
				break;
			}
		}
	}
	printf("%d regions asked: %d accepted, %d refused (ENOSPC), %d other\n", n, ok, nospc, other);
	return 0;
}

static int sparse(const char *file, int n)
{
	struct mapped m = map_file(file);
	int fd = conn(), ok = 0, nospc = 0, other = 0;

	if (hello(fd) < 0)
		return 1;
	for (int i = 0; i < n; i += 20) {
		int k = n - i < 20 ? n - i : 20;

		for (int j = 0; j < k; j++)
			reg(fd, (uint64_t)(i + j) + 1, (uintptr_t)m.p, m.len, m.st.st_dev, m.st.st_ino, 0, false);
		for (int j = 0; j < k; j++) {
			int rc = result(fd, NULL);

			ok += rc == 0;
			nospc += rc == -ENOSPC;
			other += rc != 0 && rc != -ENOSPC;
		}
	}
	printf("%d REGISTERs of %zu GiB: %d accepted, %d refused (ENOSPC), %d other\n", n,
	       m.len >> 30, ok, nospc, other);
	if (ok) {
		struct timespec t0, t1;
		int rc;

		/* (after the daemon's walk of what was cached before, done in
		 * slices: until then a final drop has nothing to do) */
		sleep(1);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		rc = unregister(fd, (uintptr_t)m.p, m.len, MSQ_UNREGISTER_FINAL);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		printf("final drop answered in %.1f ms (%s)\n",
		       (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
		       rc == 0 ? "ok" : strerror(-rc));
	}
	return other ? 1 : 0;
}

static __attribute__((noreturn)) void hold(const char *file)
{
	struct mapped m = map_file(file);
	volatile char s = 0;

	for (size_t i = 0; i < m.len; i += 4096)
		s += ((char *)m.p)[i];
	printf("pid=%d map=%#llx len=%zu dev=%llu ino=%llu\n", (int)getpid(),
	       (unsigned long long)(uintptr_t)m.p, m.len, (unsigned long long)m.st.st_dev,
	       (unsigned long long)m.st.st_ino);
	fflush(stdout);
	for (;;)
		pause();
}

/* The victim's mapping, as hold printed it. */
static bool parse_hold(const char *line, pid_t *pid, uint64_t *a, uint64_t *len, uint64_t *dev,
		       uint64_t *ino)
{
	int p;
	unsigned long long x, l, d, i;

	if (sscanf(line, "pid=%d map=%llx len=%llu dev=%llu ino=%llu", &p, &x, &l, &d, &i) != 5)
		return false;
	*pid = p;
	*a = x;
	*len = l;
	*dev = d;
	*ino = i;
	return true;
}

/* REGISTER and UNREGISTER FINAL aimed at another's mapping: how many were
 * accepted (0 to pass). */
static int aim(int fd, uint64_t a, uint64_t len, uint64_t dev, uint64_t ino)
{
	int r1 = reg(fd, 7, a, len, dev, ino, 0, true);
	int r2 = r1 == -ECONNRESET ? -ECONNRESET : unregister(fd, a, len, MSQ_UNREGISTER_FINAL);

	printf("REGISTER of its mapping -> %s\nUNREGISTER FINAL -> %s\n",
	       r1 == -ECONNRESET ? "hang-up" : r1 ? strerror(-r1) : "accepted",
	       r2 == -ECONNRESET ? "hang-up" : r2 ? strerror(-r2) : "accepted");
	return (r1 == 0) + (r2 == 0);
}

static int exec_setuid(const char *file, const char *prog)
{
	int go[2], out[2], fd = conn(), status;
	pid_t child;
	char line[256];
	FILE *f;

	if (pipe(go) < 0 || pipe(out) < 0)
		return 1;
	child = fork();
	if (child == 0) {
		pid_t pid;
		uint64_t a, len, dev, ino;
		int bad;

		close(go[0]);
		close(out[1]);
		/* HELLO for the parent (still this user's), then let it exec. */
		if (hello(fd) < 0) {
			printf("no welcome before the exec\n");
			_exit(1);
		}
		if (write(go[1], "x", 1) != 1)
			_exit(1);
		f = fdopen(out[0], "r");
		if (!f || !fgets(line, sizeof(line), f) || !parse_hold(line, &pid, &a, &len, &dev, &ino)) {
			printf("the setuid program did not start\n");
			_exit(1);
		}
		printf("setuid victim: %s", line);
		bad = aim(fd, a, len, dev, ino);
		_exit(bad ? 1 : 0);
	}
	close(go[1]);
	close(out[0]);
	if (read(go[0], line, 1) != 1)
		_exit(1);
	dup2(out[1], 1);
	execl(prog, prog, "-", "hold", file, (char *)NULL);
	perror(prog);
	waitpid(child, &status, 0);
	return 1;
}

static int reuse_connect(void)
{
	int fd = conn();
	pid_t me = getpid(), c = fork();
	char line[256];

	if (c < 0)
		return 1;
	if (c > 0)
		_exit(0); /* the connected process is gone; its pid is free */
	{
		pid_t pid;
		uint64_t a, len, dev, ino;
		struct msq_msg_hello h = { .flags = MSQ_HELLO_SHIM };
		char buf[256];
		ssize_t n;

		printf("pid=%d\n", (int)me);
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin) || !parse_hold(line, &pid, &a, &len, &dev, &ino)) {
			printf("no victim\n");
			return 1;
		}
		msg(fd, &h, MSQ_MSG_HELLO, sizeof(h));
		n = reply(fd, buf, sizeof(buf), 5000);
		if (n <= 0 || ((struct msq_msg_hdr *)buf)->type != MSQ_MSG_WELCOME) {
			printf("HELLO for pid %d (now another process) -> %s\n", (int)pid,
			       n <= 0 ? "hang-up" : strerror(-((struct msq_msg_error *)buf)->status));
			return 0;
		}
		printf("HELLO for pid %d (now another process) -> welcomed\n", (int)pid);
		return aim(fd, a, len, dev, ino) ? 1 : 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 3) {
		fprintf(stderr, "usage: hostile SOCKET CASE [ARGS]\n");
		return 2;
	}
	g_sock = argv[1];
	cmd = argv[2];
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(cmd, "lie-region") && argc == 4)
		return lie_region(argv[3]);
	if (!strcmp(cmd, "lie-pid") && argc == 7)
		return lie_pid((pid_t)atoi(argv[3]), strtoull(argv[4], NULL, 0), strtoull(argv[5], NULL, 0), argv[6]);
	if (!strcmp(cmd, "silent") && argc == 4)
		return silent(atoi(argv[3]));
	if (!strcmp(cmd, "many") && argc == 5)
		return many(atoi(argv[3]), argv[4]);
	if (!strcmp(cmd, "exit-mid") && argc == 5)
		return exit_mid(atoi(argv[3]), argv[4]);
	if (!strcmp(cmd, "pid-reuse") && argc == 4)
		return pid_reuse(argv[3]);
	if (!strcmp(cmd, "unaligned-unregister") && argc == 4)
		return unaligned_unregister(argv[3]);
	if (!strcmp(cmd, "snapshot-ranges") && argc == 4)
		return snapshot_ranges(argv[3]);
	if (!strcmp(cmd, "second-hello") && argc == 3)
		return second_hello();
	if (!strcmp(cmd, "status-nonroot") && argc == 3)
		return status_nonroot();
	if (!strcmp(cmd, "never-reads") && argc == 3)
		return never_reads();
	if (!strcmp(cmd, "conn-flood") && argc == 4)
		return conn_flood(atoi(argv[3]));
	if (!strcmp(cmd, "region-flood") && argc == 5)
		return region_flood(argv[3], atoi(argv[4]));
	if (!strcmp(cmd, "sparse") && argc == 5)
		return sparse(argv[3], atoi(argv[4]));
	if (!strcmp(cmd, "exec-setuid") && argc == 5)
		return exec_setuid(argv[3], argv[4]);
	if (!strcmp(cmd, "ignores-drops") && argc == 4)
		return ignores_drops(argv[3]);
	if (!strcmp(cmd, "reuse-connect") && argc == 3)
		return reuse_connect();
	if (!strcmp(cmd, "hold") && argc == 4)
		hold(argv[3]);
	if (argc == 3)
		return bad_message(cmd);
	fprintf(stderr, "hostile: bad arguments\n");
	return 2;
}

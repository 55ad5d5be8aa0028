/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "daemon_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <madvseq/protocol.h>

#include "../common/config.h"
#include "../common/fault.h"
#include "../common/sys.h"
#include "env.h"
#include "log.h"
#include "regions.h"
#include "self.h"

/* Away from the numbers programs use (the pagemap descriptor sits at 512). */
#define HIGH_FD 520
#define RETRY_MIN_NS (UINT64_C(1000) * 1000 * 1000)
#define RETRY_MAX_NS (UINT64_C(8) * 1000 * 1000 * 1000)
/* Registrations sent before their answers are read. */
#define MAX_IN_FLIGHT 32
/* How long munmap/exit waits for the daemon's final drop of a range (it
 * pages out at most a lag, a few milliseconds), and the first advised
 * file waits for the cgroup's policy. */
#define FINAL_WAIT_NS (UINT64_C(50) * 1000 * 1000)
#define POLICY_WAIT_NS (UINT64_C(20) * 1000 * 1000)
/* Answers remembered for threads that wait for one (see await_reply). */
#define ANSWERED 64
#define PAGE 4096u

enum { ST_OFF, ST_HELLO, ST_READY };
enum { E_SENT, E_ACKED, E_REFUSED };

struct entry {
	uint64_t id, start, end;
	uint32_t seq;
	int state;
};

/*
 * The connection and the registrations, protected by g.lock.  The lock is
 * held only for non-blocking socket calls and bookkeeping, never while
 * waiting for the daemon: a thread that waits for an answer polls the
 * socket without it (lock order: see locks.h).
 */
static struct {
	pthread_mutex_t lock;
	bool disabled;
	char path[108];
	int fd;
	dev_t dev;
	ino_t ino;
	int state;       /* also read without the lock (msq_daemon_ready) */
	uint64_t conn;   /* connection number: a waiter notices a new one */
	uint32_t seq;
	uint64_t next_try_ns, backoff_ns;
	struct entry *e;
	size_t n, cap;
	uint32_t answered[ANSWERED]; /* seqs of the last RESULT/POLICY replies */
	int32_t answer_status[ANSWERED]; /* and their status (0 for POLICY) */
	unsigned nanswered;
	uint32_t policy_seq;
	bool policy_asked, policy_known;
	struct msq_daemon_totals reported; /* the read path's totals as last sent */
	struct msq_daemon_ask asks[MSQ_DAEMON_ASKS_MAX]; /* drops asked, not yet taken */
	size_t nasks;
	struct msq_daemon_hooks hooks;
} g = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

void msq_daemon_init(const struct msq_daemon_hooks *hooks)
{
	const char *p = msq_env("MADVSEQ_SOCKET");
	bool on = true;
	const char *v = msq_env("MADVSEQ_DAEMON");

	if (v && msq_parse_bool(v, &on) < 0)
		msq_warn("MADVSEQ_DAEMON='%s' is not a boolean (yes or no); using 1", v);
	g.disabled = !on;
	g.hooks = *hooks;
	if (!p)
		p = MSQ_DEFAULT_SOCKET;
	if (strlen(p) >= sizeof(g.path)) {
		msq_warn("MADVSEQ_SOCKET is too long for a socket path; not using the daemon");
		g.disabled = true;
		return;
	}
	strcpy(g.path, p);
}

/*
 * Whether the listener on fd is a daemon the shim may hand its regions to:
 * one that runs as root, or, for a private daemon the user started, as
 * the process's own real uid.  Under secure execution (a setuid program
 * run by someone else) only root's counts: the caller's daemon would learn
 * the privileged process's address space.
 */
static bool uid_trusted(uid_t uid)
{
	return uid == 0 || (!msq_secure_execution() && uid == getuid());
}

static bool peer_trusted(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (MSQ_SYSCALL(SYS_getsockopt, fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 ||
	    len != sizeof(cr))
		return false;
	return uid_trusted(cr.uid);
}

/* A socket file of another user's is not worth a connection (which would
 * tell its listener our pid); the listener's credentials decide anyway. */
static bool path_trusted(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && uid_trusted(st.st_uid);
}

bool msq_daemon_ready(void)
{
	return __atomic_load_n(&g.state, __ATOMIC_ACQUIRE) == ST_READY;
}

static void set_state(int st)
{
	__atomic_store_n(&g.state, st, __ATOMIC_RELEASE);
}

/* Our socket is still the descriptor we opened (programs close fds). */
static bool fd_is_ours(void)
{
	struct stat st;

	return g.fd >= 0 && fstat(g.fd, &st) == 0 && st.st_dev == g.dev && st.st_ino == g.ino;
}

/* Locked.  Regions marked delegated are the engine's again from its next
 * cycle: msq_daemon_ready() says no from now on. */
static void disconnect(const char *why, uint64_t retry_ns)
{
	if (fd_is_ours())
		msq_sys_close(g.fd);
	g.fd = -1;
	if (g.state == ST_READY)
		msq_debug("madvseqd: %s; managing regions in-process", why);
	set_state(ST_OFF);
	g.n = 0;
	g.nanswered = 0;
	g.nasks = 0;
	g.next_try_ns = msq_now_ns() + retry_ns;
}

static int send_msg(void *m, uint16_t type, uint32_t size)
{
	struct msq_msg_hdr *h = m;
	ssize_t n;

	*h = (struct msq_msg_hdr){ MSQ_PROTO_MAGIC, MSQ_PROTO_VERSION, type, size, ++g.seq };
	if (MSQ_FAULT("madvseq/daemon/client/send"))
		return -EPIPE;
	n = MSQ_SYSCALL(SYS_sendto, g.fd, m, size, MSG_NOSIGNAL | MSG_DONTWAIT, NULL, 0);
	if (n < 0)
		return (int)n;
	return n == (ssize_t)size ? 0 : -EPIPE;
}

/* Locked. */
static void try_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct msq_msg_hello hello = { .flags = MSQ_HELLO_SHIM | MSQ_HELLO_DROPS };
	struct msq_msg_hdr pol;
	struct stat st;
	int fd, hfd;

	g.backoff_ns = g.backoff_ns ? g.backoff_ns * 2 : RETRY_MIN_NS;
	if (g.backoff_ns > RETRY_MAX_NS)
		g.backoff_ns = RETRY_MAX_NS;
	g.next_try_ns = msq_now_ns() + g.backoff_ns;
	if (MSQ_FAULT("madvseq/daemon/client/connect") || !path_trusted(g.path))
		return;
	strcpy(sa.sun_path, g.path);
	/* Opened at a low number, then moved up: not while the program
	 * dup2()s (locks.h); the backoff above tries again. */
	if (!msq_lowfd_begin())
		return;
	fd = (int)MSQ_SYSCALL(SYS_socket, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd >= 0) {
		hfd = msq_sys_fcntl(fd, F_DUPFD_CLOEXEC, HIGH_FD);
		if (hfd >= 0) {
			msq_sys_close(fd);
			fd = hfd;
		}
	}
	msq_lowfd_end();
	if (fd < 0)
		return;
	/* Non-blocking: a full backlog fails at once (EAGAIN) instead of waiting. */
	if (MSQ_SYSCALL(SYS_connect, fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		msq_sys_close(fd);
		return;
	}
	if (!peer_trusted(fd)) {
		msq_debug("%s: not madvseqd (runs as another user); managing regions in-process",
			  g.path);
		msq_sys_close(fd);
		g.next_try_ns = msq_now_ns() + RETRY_MAX_NS;
		return;
	}
	if (fstat(fd, &st) < 0) {
		msq_sys_close(fd);
		return;
	}
	g.fd = fd;
	g.dev = st.st_dev;
	g.ino = st.st_ino;
	g.conn++;
	set_state(ST_HELLO);
	g.n = 0;
	g.nanswered = 0;
	if (send_msg(&hello, MSQ_MSG_HELLO, sizeof(hello)) < 0 ||
	    send_msg(&pol, MSQ_MSG_POLICY_GET, sizeof(pol)) < 0)
		disconnect("cannot talk to it", g.backoff_ns);
	else
		g.policy_seq = g.seq;
}

/* The cgroup's policy for the read path, which the shim runs itself. */
static void apply_policy(const struct msq_msg_policy *p)
{
	if (p->read > MSQ_READ_ALL)
		return;
	g.hooks.read_policy((enum msq_read_mode)p->read);
}

static struct entry *find_seq(uint32_t seq)
{
	for (size_t i = 0; i < g.n; i++)
		if (g.e[i].seq == seq)
			return &g.e[i];
	return NULL;
}

static void answered(uint32_t seq, int32_t status)
{
	g.answer_status[g.nanswered % ANSWERED] = status;
	g.answered[g.nanswered++ % ANSWERED] = seq;
}

static bool was_answered(uint32_t seq, int32_t *status)
{
	unsigned n = g.nanswered < ANSWERED ? g.nanswered : ANSWERED;

	for (unsigned i = 0; i < n; i++)
		if (g.answered[i] == seq) {
			*status = g.answer_status[i];
			return true;
		}
	return false;
}

/*
 * Locked.  Keeps the drops of a DROP message for the engine thread, which
 * makes them only where they lie in a region handed over (engine_thread.c):
 * here only their form is checked.  A malformed one is ignored, as a
 * range that is not ours will be: a daemon cannot make the library do
 * anything its own engine would not do to its own regions.
 */
static void keep_asks(const struct msq_msg_drop *m, size_t n)
{
	uint64_t prev = 0;

	if (n < sizeof(*m) || m->n == 0 || m->n > MSQ_DROP_MAX_RANGES ||
	    n != sizeof(*m) + m->n * sizeof(m->r[0]) ||
	    (m->mode != MSQ_MODE_PAGEOUT && m->mode != MSQ_MODE_COLD))
		return;
	for (uint32_t i = 0; i < m->n; i++) {
		const struct msq_wire_range *r = &m->r[i];

		if (r->start < prev || r->end <= r->start || (r->start | r->end) % PAGE)
			return;
		prev = r->end;
	}
	for (uint32_t i = 0; i < m->n; i++) {
		if (g.nasks == MSQ_DAEMON_ASKS_MAX)
			return;
		g.asks[g.nasks++] = (struct msq_daemon_ask){ m->id, m->r[i].start, m->r[i].end,
							     (enum msq_mode)m->mode };
	}
}

size_t msq_daemon_take_asks(struct msq_daemon_ask out[MSQ_DAEMON_ASKS_MAX])
{
	size_t n;

	pthread_mutex_lock(&g.lock);
	n = g.nasks;
	memcpy(out, g.asks, n * sizeof(*out));
	g.nasks = 0;
	pthread_mutex_unlock(&g.lock);
	return n;
}

/* Locked.  Reads what the daemon said; false when the connection is gone. */
static bool read_replies(void)
{
	union {
		struct msq_msg_hdr h;
		struct msq_msg_welcome w;
		struct msq_msg_result r;
		struct msq_msg_policy p;
		struct msq_msg_error e;
		struct msq_msg_drop d;
		char raw[sizeof(struct msq_msg_drop) +
			 MSQ_DROP_MAX_RANGES * sizeof(struct msq_wire_range)];
	} m;

	for (;;) {
		ssize_t n = MSQ_SYSCALL(SYS_recvfrom, g.fd, &m, sizeof(m), MSG_DONTWAIT, NULL, NULL);

		if (n == -EAGAIN || n == -EINTR)
			return true;
		if (n <= 0 || MSQ_FAULT("madvseq/daemon/client/recv")) {
			disconnect("the daemon went away", RETRY_MIN_NS);
			g.backoff_ns = 0;
			return false;
		}
		if ((size_t)n < sizeof(m.h) || m.h.magic != MSQ_PROTO_MAGIC || m.h.size != (uint32_t)n) {
			disconnect("unexpected message from the daemon", RETRY_MAX_NS);
			return false;
		}
		switch (m.h.type) {
		case MSQ_MSG_WELCOME:
			if (g.state == ST_HELLO && n == sizeof(m.w) && m.w.flags & MSQ_WELCOME_DELEGATE) {
				set_state(ST_READY);
				g.backoff_ns = 0;
				msq_debug("madvseqd at %s does the work", g.path);
			}
			break;
		case MSQ_MSG_ERROR:
			/* Refused (another protocol version, or it cannot manage
			 * this process): carry on alone, ask again much later. */
			msq_debug("madvseqd refused: %s", n == sizeof(m.e) ? strerror(-m.e.status) : "?");
			disconnect("the daemon refused", RETRY_MAX_NS);
			return false;
		case MSQ_MSG_RESULT: {
			struct entry *e = n == sizeof(m.r) ? find_seq(m.h.seq) : NULL;

			answered(m.h.seq, n == sizeof(m.r) ? m.r.status : -EPROTO);
			if (e && e->id == m.r.id)
				e->state = m.r.status == 0 ? E_ACKED : E_REFUSED;
			break;
		}
		case MSQ_MSG_POLICY:
			if (n == sizeof(m.p)) {
				msq_debug("madvseqd policy for this cgroup: mode=%s lag=%llu read=%s",
					  msq_mode_name((enum msq_mode)m.p.mode),
					  (unsigned long long)m.p.lag,
					  m.p.read <= MSQ_READ_ALL ? msq_read_mode_name((enum msq_read_mode)m.p.read) : "?");
				apply_policy(&m.p);
				g.policy_known = true;
			}
			answered(m.h.seq, 0);
			break;
		case MSQ_MSG_DROP:
			if (g.state == ST_READY)
				keep_asks(&m.d, (size_t)n);
			break;
		default:
			break;
		}
	}
}

static struct entry *find(const struct msq_region *r)
{
	for (size_t i = 0; i < g.n; i++)
		if (g.e[i].id == r->id && g.e[i].start == r->s.start && g.e[i].end == r->s.end)
			return &g.e[i];
	return NULL;
}

static int register_region(struct msq_region *r)
{
	union {
		struct msq_msg_register m;
		char raw[sizeof(struct msq_msg_register) +
			 MSQ_REGISTER_MAX_PRECACHED * sizeof(struct msq_wire_range)];
	} u;
	struct msq_msg_register *m = &u.m;
	uint32_t size = sizeof(*m);
	int rc;

	*m = (struct msq_msg_register){
		.id = r->id, .start = r->s.start, .length = r->s.end - r->s.start,
		.dev = (uint64_t)r->s.dev, .ino = (uint64_t)r->s.ino, .offset = r->s.file_off,
		.flags = (r->s.shared ? MSQ_REGION_SHARED : 0) | (r->s.writable ? MSQ_REGION_WRITABLE : 0) |
			 (r->s.unadvised ? MSQ_REGION_UNADVISED : 0),
	};
	/* What was cached before the program read this range, as seen when
	 * it advised it: the daemon's own look would come later, and count
	 * the stream's read-ahead as cached before. */
	if (r->s.precached_known && r->s.precached.n <= MSQ_REGISTER_MAX_PRECACHED) {
		m->flags |= MSQ_REGION_SNAPSHOT;
		m->nprecached = (uint32_t)r->s.precached.n;
		for (size_t i = 0; i < r->s.precached.n; i++)
			m->precached[i] = (struct msq_wire_range){ r->s.precached.v[i].start,
							      r->s.precached.v[i].end };
		size += m->nprecached * (uint32_t)sizeof(struct msq_wire_range);
	}

	if (g.n == g.cap) {
		size_t cap = g.cap ? g.cap * 2 : 16;
		struct entry *v;

		if (MSQ_FAULT("madvseq/alloc") || !(v = realloc(g.e, cap * sizeof(*v))))
			return -ENOMEM;
		g.e = v;
		g.cap = cap;
	}
	if ((rc = send_msg(m, MSQ_MSG_REGISTER, size)) < 0)
		return rc;
	g.e[g.n++] = (struct entry){ r->id, r->s.start, r->s.end, g.seq, E_SENT };
	return 0;
}

/* Locked.  Whether there is a connection: one the program did not close,
 * or, if may_connect and a retry is due, a new one. */
static bool connected(bool may_connect)
{
	if (g.fd >= 0 && !fd_is_ours()) {
		g.fd = -1; /* the program closed it: not ours to close again */
		disconnect("lost the daemon's socket", RETRY_MIN_NS);
	}
	if (g.fd < 0 && may_connect && msq_now_ns() >= g.next_try_ns)
		try_connect();
	return g.fd >= 0;
}

/* Locked, connection ready: sends what the read path did since the last
 * report, if anything; returns the report's seq, or 0. */
static bool nothing_to_report(const struct msq_daemon_totals *t)
{
	return t->files == g.reported.files && t->streamed == g.reported.streamed &&
	       t->dropped == g.reported.dropped && t->kept == g.reported.kept;
}

static uint32_t send_read_report(void)
{
	struct msq_daemon_totals t;
	struct msq_msg_read_report m;

	g.hooks.totals(&t);
	if (nothing_to_report(&t))
		return 0;
	m = (struct msq_msg_read_report){
		.files = t.files - g.reported.files, .streamed = t.streamed - g.reported.streamed,
		.dropped = t.dropped - g.reported.dropped, .kept = t.kept - g.reported.kept,
	};
	if (send_msg(&m, MSQ_MSG_READ_REPORT, sizeof(m)) < 0)
		return 0; /* the next try sends the sum */
	g.reported = t;
	return m.h.seq;
}

void msq_daemon_sync(void)
{
	size_t in_flight = 0;

	if (g.disabled)
		return;
	pthread_mutex_lock(&g.lock);
	if (!connected(msq_regions_count() > 0) || !read_replies() || g.state != ST_READY)
		goto out;
	for (size_t i = 0; i < g.n; i++)
		in_flight += g.e[i].state == E_SENT;
	for (size_t i = 0;; i++) {
		struct msq_region *r = msq_regions_at(i);
		struct entry *e;

		if (!r)
			break;
		e = find(r);
		if (!e && in_flight < MAX_IN_FLIGHT) {
			int rc = register_region(r);

			if (rc == -EAGAIN) {
				break; /* the daemon is busy: the rest next cycle */
			} else if (rc < 0 && rc != -ENOMEM) {
				disconnect("cannot talk to it", RETRY_MIN_NS);
				goto out;
			}
			in_flight++;
		}
		/* A mapping read with no advice is the daemon's from the moment it
		 * is sent: the part read front to back is found from the start
		 * (msq_plan_read_through), and a daemon that began after the
		 * engine had dropped some of it would never find that part. */
		r->delegated = e ? e->state == E_ACKED || (e->state == E_SENT && r->s.unadvised)
				 : r->s.unadvised;
	}
	send_read_report();
out:
	pthread_mutex_unlock(&g.lock);
}

/*
 * Waits up to wait_ns for the answer to request seq of connection conn,
 * reading the other replies meanwhile.  The lock is taken only to read;
 * the wait itself (poll) holds none.  False on timeout or a lost
 * connection; else the answer's status goes to *status.  No allocation.
 */
static bool await_reply(uint64_t conn, uint32_t seq, uint64_t wait_ns, int32_t *status)
{
	uint64_t deadline = msq_now_ns() + wait_ns;

	for (;;) {
		struct pollfd pfd = { .events = POLLIN };
		bool done, alive;
		uint64_t now;

		pthread_mutex_lock(&g.lock);
		alive = g.fd >= 0 && g.conn == conn && read_replies();
		done = alive && was_answered(seq, status);
		pfd.fd = g.fd;
		pthread_mutex_unlock(&g.lock);
		if (done || !alive)
			return done;
		if ((now = msq_now_ns()) >= deadline)
			return false;
		/* Another thread may read our answer meanwhile: wake up often
		 * enough to see it in the list. */
		MSQ_SYSCALL(SYS_poll, &pfd, 1, 2);
	}
}

bool msq_daemon_forget(uint64_t start, uint64_t end, bool final)
{
	struct msq_msg_unregister m = { .start = start, .length = end - start };
	size_t j = 0;
	bool any = false, acked = false, wait;
	int32_t status = 0;
	uint64_t conn;

	if (g.disabled)
		return false;
	pthread_mutex_lock(&g.lock);
	if (g.fd < 0 || g.state != ST_READY) {
		pthread_mutex_unlock(&g.lock);
		return false;
	}
	for (size_t i = 0; i < g.n; i++) {
		if (g.e[i].start < end && g.e[i].end > start) {
			any = true;
			acked |= g.e[i].state == E_ACKED;
			continue;
		}
		g.e[j++] = g.e[i];
	}
	g.n = j;
	if (!any) {
		pthread_mutex_unlock(&g.lock);
		return false;
	}
	/* The daemon's regions: it drops their last lag, with its checks,
	 * before the range goes. */
	if (final && acked)
		m.flags = MSQ_UNREGISTER_FINAL;
	/* Told before the range goes.  If the message cannot be sent, closing
	 * the connection is what stops the daemon (it forgets all of ours). */
	if (!fd_is_ours() || send_msg(&m, MSQ_MSG_UNREGISTER, sizeof(m)) < 0) {
		disconnect("cannot tell it about an unmapped range", RETRY_MIN_NS);
		pthread_mutex_unlock(&g.lock);
		return false;
	}
	wait = m.flags != 0;
	conn = g.conn;
	pthread_mutex_unlock(&g.lock);
	if (!wait)
		return false;
	if (!await_reply(conn, m.h.seq, FINAL_WAIT_NS, &status)) {
		msq_debug("madvseqd did not confirm the final drop of %#llx-%#llx in time: "
			  "dropping it here", (unsigned long long)start, (unsigned long long)end);
		return false;
	}
	if (status < 0) {
		msq_debug("madvseqd could not make the final drop of %#llx-%#llx (%s): "
			  "dropping it here", (unsigned long long)start, (unsigned long long)end,
			  strerror(-status));
		return false;
	}
	return true;
}

bool msq_daemon_release_all(void)
{
	uint64_t lo = UINT64_MAX, hi = 0;

	if (g.disabled)
		return false;
	pthread_mutex_lock(&g.lock);
	for (size_t i = 0; i < g.n; i++) {
		if (g.e[i].start < lo)
			lo = g.e[i].start;
		if (g.e[i].end > hi)
			hi = g.e[i].end;
	}
	pthread_mutex_unlock(&g.lock);
	return lo < hi && msq_daemon_forget(lo, hi, true);
}

/* Waits up to wait_ns, with no lock held, for connection conn to be
 * welcomed. */
static bool await_ready(uint64_t conn, uint64_t wait_ns)
{
	uint64_t deadline = msq_now_ns() + wait_ns;

	for (;;) {
		struct pollfd pfd = { .events = POLLIN };
		bool ready, alive;

		pthread_mutex_lock(&g.lock);
		alive = g.fd >= 0 && g.conn == conn && read_replies();
		ready = alive && g.state == ST_READY;
		pfd.fd = g.fd;
		pthread_mutex_unlock(&g.lock);
		if (ready || !alive)
			return ready;
		if (msq_now_ns() >= deadline)
			return false;
		MSQ_SYSCALL(SYS_poll, &pfd, 1, 2);
	}
}

void msq_daemon_report_at_exit(void)
{
	struct msq_daemon_totals t;
	uint64_t conn;
	uint32_t seq = 0;
	bool fresh = false;

	if (g.disabled)
		return;
	g.hooks.totals(&t);
	if (nothing_to_report(&t))
		return;
	pthread_mutex_lock(&g.lock);
	if (!connected(false)) {
		/* A program with no mapped streams never connected: once now,
		 * whatever the back-off, so its savings reach the metrics. */
		try_connect();
		fresh = true;
	}
	conn = g.conn;
	pthread_mutex_unlock(&g.lock);
	if (g.fd < 0 || (fresh && !await_ready(conn, POLICY_WAIT_NS)))
		return;
	pthread_mutex_lock(&g.lock);
	if (g.conn == conn && g.state == ST_READY)
		seq = send_read_report();
	pthread_mutex_unlock(&g.lock);
	/* Answered before the connection closes with the process, so the
	 * daemon has counted it. */
	if (seq)
		await_reply(conn, seq, POLICY_WAIT_NS, &(int32_t){ 0 });
}

void msq_daemon_ask_policy(void)
{
	bool wait = false;
	uint64_t conn = 0;
	uint32_t seq = 0;

	if (g.disabled || __atomic_load_n(&g.policy_asked, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&g.lock);
	if (!g.policy_asked) {
		__atomic_store_n(&g.policy_asked, true, __ATOMIC_RELEASE);
		if (connected(true) && !g.policy_known) {
			wait = true;
			conn = g.conn;
			seq = g.policy_seq;
		}
	}
	pthread_mutex_unlock(&g.lock);
	if (wait)
		await_reply(conn, seq, POLICY_WAIT_NS, &(int32_t){ 0 });
}

bool msq_daemon_atfork_prepare(void)
{
	return msq_lock_bounded(&g.lock, MSQ_FORK_LOCK_NS);
}

void msq_daemon_atfork_parent(bool locked)
{
	if (locked)
		pthread_mutex_unlock(&g.lock);
}

void msq_daemon_atfork_child(bool locked)
{
	/* The connection stays the parent's: the daemon knows it as the
	 * parent's pid.  The child connects itself when it tracks regions.
	 * If the lock could not be had, another thread was changing the
	 * registrations: the child forgets them without freeing. */
	pthread_mutex_init(&g.lock, NULL);
	if (!locked) {
		g.e = NULL;
		g.cap = 0;
	}
	if (g.fd >= 0 && fd_is_ours())
		msq_sys_close(g.fd);
	g.fd = -1;
	set_state(ST_OFF);
	g.n = 0;
	g.nanswered = 0;
	g.nasks = 0; /* the parent's */
	g.next_try_ns = 0;
	g.backoff_ns = 0;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * madvseqd: command line, configuration (re)loading, signals, systemd
 * notification and the event loop.  See madvseqd(8).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include <madvseq/protocol.h>

#include "../common/kernel_switch.h"
#include "client.h"
#include "cycle.h"
#include "msqd.h"
#include "discover.h"
#include "exitdrop.h"
#include "fdwatch.h"
#include "hostns.h"
#include "log.h"
#include "kubepods.h"
#include "metrics.h"
#include "refs.h"
#include "regions.h"
#include "server.h"
#include "util.h"

#define DEFAULT_CONFIG "/etc/madvseq/madvseqd.conf"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: madvseqd [OPTION]...\n"
		"Drops page cache behind MADV_SEQUENTIAL readers, per cgroup policy.\n\n"
		"  -c, --config FILE       configuration (default " DEFAULT_CONFIG ")\n"
		"  -s, --socket PATH       listening socket (default " MSQ_DEFAULT_SOCKET ")\n"
		"  -l, --log-level LEVEL   err, warning, notice, info (default), debug\n"
		"      --check-config FILE print the effective policy per section, or the error\n"
		"      --resolve PID       print PID's cgroup, its policy and pressure, then exit\n"
		"      --proc-root DIR     where /proc is (tests)\n"
		"      --cgroup-root DIR   where cgroupfs is (default /sys/fs/cgroup)\n"
		"      --own-cgroupns      do not enter PID 1's cgroup namespace (tests)\n"
		"  -h, --help              this text\n"
		"  -V, --version           version\n");
}

/* A pid as the kernel has them: decimal digits only, 1 to INT_MAX.
 * Returns it, or -EINVAL. */
static long parse_pid(const char *s)
{
	char *end;
	long v;

	if (*s < '0' || *s > '9')
		return -EINVAL; /* strtol would take blanks, signs, and "" as 0 */
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 1 || v > INT_MAX)
		return -EINVAL;
	return v;
}

static int load_config(struct msqd *d, struct msqd_conf *c)
{
	bool is_default = !strcmp(d->set.config_path, DEFAULT_CONFIG);
	int rc;

	msqd_conf_init(c);
	rc = msqd_conf_load(c, d->set.config_path, is_default);
	if (rc < 0)
		log_err("%s", c->error);
	return rc;
}

static void apply_daemon_settings(struct msqd *d, const char *socket_arg, int level_arg)
{
	if (socket_arg)
		snprintf(d->set.socket, sizeof(d->set.socket), "%s", socket_arg);
	else if (d->set.conf.socket[0])
		snprintf(d->set.socket, sizeof(d->set.socket), "%s", d->set.conf.socket);
	else
		snprintf(d->set.socket, sizeof(d->set.socket), "%s", MSQ_DEFAULT_SOCKET);
	if (level_arg >= 0)
		msqd_log_level = level_arg;
	else if (d->set.conf.log_level >= 0)
		msqd_log_level = d->set.conf.log_level;
}

static void reload(struct msqd *d, const char *socket_arg, int level_arg)
{
	struct msqd_conf c;
	char old_socket[sizeof(d->set.socket)];

	sd_notify(0, "RELOADING=1");
	if (load_config(d, &c) < 0) {
		log_err("reload failed; keeping the previous configuration");
		msqd_conf_free(&c);
		sd_notify(0, "READY=1\nSTATUS=reload failed; previous configuration in use");
		return;
	}
	/* Policies point into the configuration: swap, re-resolve, then free. */
	{
		struct msqd_conf old = d->set.conf;

		d->set.conf = c;
		msqd_cg_reresolve(d);
		msqd_conf_free(&old);
	}
	strcpy(old_socket, d->set.socket);
	apply_daemon_settings(d, socket_arg, level_arg);
	if (strcmp(old_socket, d->set.socket)) {
		log_warn("socket path changes need a restart; still listening on %s", old_socket);
		strcpy(d->set.socket, old_socket);
	}
	d->cyc.sleep_ns = d->set.conf.interval_ns;
	log_info("configuration reloaded from %s (%zu cgroup sections)", d->set.config_path, d->set.conf.n);
	sd_notify(0, "READY=1\nSTATUS=configuration reloaded");
}

static int resolve_pid(struct msqd *d, pid_t pid)
{
	char path[4096], pol[256];
	enum msqd_cg_layout layout;
	const char *sec;
	const struct msqd_policy *p;
	struct msqd_pressure pr;
	int rc = msqd_cgroup_of(d->set.proc_root, pid, path, sizeof(path), &layout);

	if (rc < 0) {
		fprintf(stderr, "madvseqd: pid %d: %s\n", (int)pid, strerror(-rc));
		return 1;
	}
	p = msqd_conf_resolve(&d->set.conf, path, &sec);
	msqd_policy_format(p, pol, sizeof(pol));
	printf("pid %d cgroup %s (v%d)\nsection %s\npolicy %s\n", (int)pid, path, (int)layout,
	       sec ? sec : "built-in", pol);
	{
		struct msqd_kubepod kp;

		if (msqd_kubepods_parse(path, &kp) == 0)
			printf("pod %s qos %s container %s driver %s\n", kp.pod_uid, msqd_qos_name(kp.qos),
			       kp.container_id[0] ? kp.container_id : "-", msqd_kube_driver_name(kp.driver));
	}
	if (msqd_cgroup_pressure(d->set.cg_root, d->set.proc_root, path, layout, &pr) == 0) {
		char lim[32] = "unlimited"; /* no limit up to the root: pr.limit 0 */

		if (pr.limit)
			snprintf(lim, sizeof(lim), "%llu", (unsigned long long)pr.limit);
		printf("usage %llu limit %s psi_some_avg10 %.2f\ngate %s\n", (unsigned long long)pr.usage,
		       lim, pr.some_avg10, msqd_gate_decide(p, &pr) ? "open" : "closed");
	}
	else
		printf("gate %s\n", !p->pressure_pct && p->psi_some_avg10 <= 0 ? "open" : "unknown (acts)");
	{
		/* The kernel's drop-behind for this process: the sysctl, else
		 * the cgroup v2 switch (as msqd_kernel_covers() decides). */
		int k = msq_kernel_dropbehind_state(d->set.proc_root);
		int kc = layout == MSQD_CG_V2 ? msq_kernel_dropbehind_cgroup_state(d->set.cg_root, path)
					      : -ENOENT;

		printf("kernel drop-behind %s\n",
		       k == 1	 ? "on (" MSQ_KERNEL_DROPBEHIND_SYSCTL ")"
		       : kc == 1 ? "on (" MSQ_KERNEL_DROPBEHIND_CGFILE ")"
		       : k == 0 || kc == 0 ? "off"
					   : "absent");
	}
	return 0;
}

/* Five descriptors per client (socket, pidfd, pagemap, stat, schedstat),
 * and the mapped file of each region while half the limit allows
 * (d->rg.fd_budget: beyond it, files are opened by path when needed). */
static void raise_nofile(struct msqd *d)
{
	struct rlimit rl, more = { 65536, 65536 };

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_max < more.rlim_max && setrlimit(RLIMIT_NOFILE, &more) == 0) {
		rl = more; /* (with CAP_SYS_RESOURCE) */
	} else if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	d->rg.fd_budget = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > UINT32_MAX
				      ? UINT32_MAX / 2 : (unsigned)(rl.rlim_cur / 2);
}

/*
 * What the loop runs between events: each subsystem says when it is due
 * next (UINT64_MAX: not at all now) and does its work when that time has
 * come, in this order.  One that does not wake sets no timeout: it runs
 * when something else woke the loop, and limits itself (a second between
 * looks, say).  A new subsystem is one entry here and its module's step.
 */
struct subsystem {
	const char *name;
	bool wakes;
	uint64_t (*next)(const struct msqd *d);
	void (*run)(struct msqd *d);
};

/* Management cycles, only while there is something to manage, or the
 * daemon still runs on a reader's CPU (a cycle takes it back). */
static uint64_t cycle_next(const struct msqd *d)
{
	return d->rg.n || (d->cyc.follow_ready && d->cyc.follow.bound >= 0) ? d->cyc.next_ns
									     : UINT64_MAX;
}

static void cycle_run(struct msqd *d)
{
	msqd_cycle(d);
	d->now_ns = msqd_now_ns();
	d->cyc.next_ns = d->now_ns + d->cyc.sleep_ns;
}

static uint64_t discover_next(const struct msqd *d)
{
	return msqd_conf_any_discover(&d->set.conf) ? d->disc.next_ns : UINT64_MAX;
}

static void discover_run(struct msqd *d)
{
	msqd_discover(d);
	d->now_ns = msqd_now_ns();
	/* (A scan cut short goes on at once.) */
	d->disc.next_ns = d->disc.resume_pid ? d->now_ns : d->now_ns + d->set.conf.discover_interval_ns;
}

static uint64_t watch_next(const struct msqd *d)
{
	return msqd_conf_any_discover(&d->set.conf) && d->set.conf.discover_trigger
		       ? d->disc.next_watch_ns : UINT64_MAX;
}

static void watch_run(struct msqd *d)
{
	uint64_t wait = msqd_discover_watch(d);

	d->now_ns = msqd_now_ns();
	d->disc.next_watch_ns = d->now_ns + wait;
}

/* read()/write() streams of programs without the library, in the same
 * discover = yes cgroups (fdwatch.c); after a reload that turned
 * discovery off, until the closed-file marks are given up (fdclosed.c). */
static uint64_t fdwatch_next(const struct msqd *d)
{
	return msqd_conf_any_discover(&d->set.conf) || d->fdc.nfs ? d->fdw.next_ns : UINT64_MAX;
}

static void fdwatch_run(struct msqd *d)
{
	uint64_t wait = msqd_fdwatch_step(d);

	d->now_ns = msqd_now_ns();
	d->fdw.next_ns = d->now_ns + wait;
}

static uint64_t every_turn(const struct msqd *d)
{
	return 0;
}

/* (At most once a second; a status request wakes an idle daemon, and the
 * one after it no longer lists the cgroup.) */
static void reap_run(struct msqd *d)
{
	msqd_cg_reap(d);
}

/* The clients' timeouts, only while there are clients. */
#define TIMEOUTS_NS (200 * UINT64_C(1000000))

static uint64_t timeouts_next(const struct msqd *d)
{
	return d->cl.list ? d->srv.next_timeouts_ns : UINT64_MAX;
}

static void timeouts_run(struct msqd *d)
{
	msqd_server_timeouts(d);
	d->srv.next_timeouts_ns = d->now_ns + TIMEOUTS_NS;
}

/* File walks (snapshots, exit drops), a slice at a time: clients keep
 * their answers and streams their cycles while many programs exit at once
 * or a client maps terabytes.  Due at once while any is pending. */
static uint64_t walks_next(const struct msqd *d)
{
	return d->xd.queue || d->rg.nsnapping ? 0 : UINT64_MAX;
}

static void walks_run(struct msqd *d)
{
	uint64_t until = msqd_now_ns() + d->set.conf.walk_budget_ns;

	if (!msqd_snapshots(d, until))
		msqd_exit_drops(d, until);
}

static void notify_run(struct msqd *d)
{
	msqd_notify_status(d);
}

static const struct subsystem subsystems[] = {
	{ "cycle", true, cycle_next, cycle_run },
	{ "discover", true, discover_next, discover_run },
	{ "discover-watch", true, watch_next, watch_run },
	{ "fd-watch", true, fdwatch_next, fdwatch_run },
	{ "cgroup-reap", false, every_turn, reap_run },
	{ "timeouts", true, timeouts_next, timeouts_run },
	{ "walks", true, walks_next, walks_run },
	{ "notify", false, every_turn, notify_run },
};

/* The epoll_wait timeout in ms until the first subsystem that wakes is
 * due; -1: none is.  An idle daemon sleeps until a client or the
 * discovery watch needs it. */
static int loop_timeout(const struct msqd *d)
{
	uint64_t wake = UINT64_MAX;

	for (size_t i = 0; i < sizeof(subsystems) / sizeof(subsystems[0]); i++) {
		uint64_t t = subsystems[i].wakes ? subsystems[i].next(d) : UINT64_MAX;

		if (t < wake)
			wake = t;
	}
	return wake == UINT64_MAX ? -1
	       : wake > d->now_ns ? (int)((wake - d->now_ns + 999999) / 1000000) : 0;
}

/* The event loop, until a signal ends it (or epoll fails). */
static void run(struct msqd *d, const char *socket_arg, int level_arg, struct msqd_watch *listen_watch)
{
	for (;;) {
		struct epoll_event ev[64];
		int n;

		d->now_ns = msqd_now_ns();
		n = epoll_wait(d->srv.epfd, ev, 64, loop_timeout(d));
		if (n < 0 && errno != EINTR) {
			log_err("epoll_wait: %s", strerror(errno));
			return;
		}
		d->now_ns = msqd_now_ns();
		for (int i = 0; i < n; i++) {
			struct msqd_watch *w = ev[i].data.ptr;

			switch (w->kind) {
			case MSQD_W_LISTEN:
				msqd_server_accept(d);
				break;
			case MSQD_W_SIGNAL: {
				struct signalfd_siginfo si;

				while (read(d->srv.sigfd, &si, sizeof(si)) == sizeof(si)) {
					if (si.ssi_signo == SIGHUP) {
						reload(d, socket_arg, level_arg);
					} else {
						log_info("signal %d: exiting", (int)si.ssi_signo);
						return;
					}
				}
				break;
			}
			case MSQD_W_SOCK:
			case MSQD_W_PIDFD:
				/* One event per client per round: a drop by one event
				 * must not leave the other pointing at freed memory. */
				for (int j = i + 1; j < n; j++) {
					struct msqd_watch *o = ev[j].data.ptr;

					if ((o->kind == MSQD_W_SOCK || o->kind == MSQD_W_PIDFD) && o->c == w->c)
						ev[j].data.ptr = listen_watch; /* handled below as accept: harmless */
				}
				if (w->kind == MSQD_W_PIDFD)
					msqd_client_drop(d, w->c, "exited");
				else
					msqd_server_readable(d, w->c);
				break;
			}
		}
		for (size_t i = 0; i < sizeof(subsystems) / sizeof(subsystems[0]); i++) {
			d->now_ns = msqd_now_ns();
			if (d->now_ns >= subsystems[i].next(d))
				subsystems[i].run(d);
		}
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "check-config", required_argument, NULL, 'C' },
		{ "resolve", required_argument, NULL, 'R' },
		{ "proc-root", required_argument, NULL, 'P' },
		{ "cgroup-root", required_argument, NULL, 'G' },
		{ "own-cgroupns", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	struct msqd d = {
		.set = { .proc_root = "/proc", .cg_root = "/sys/fs/cgroup", .config_path = DEFAULT_CONFIG },
		.srv = { .epfd = -1, .lfd = -1, .sigfd = -1, .spare_fd = -1 },
		.disc = { .disk_intake = { .fd = -1 } },
	};
	const char *socket_arg = NULL, *check = NULL;
	struct msqd_watch wl = { MSQD_W_LISTEN, NULL }, ws = { MSQD_W_SIGNAL, NULL };
	int level_arg = -1, opt, rc;
	bool own_cgroupns = false;
	long resolve = 0; /* 0: not asked */
	sigset_t mask;

	msqd_log_init("madvseqd");
	while ((opt = getopt_long(argc, argv, "c:s:l:hV", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': d.set.config_path = optarg; break;
		case 's':
			socket_arg = optarg;
			if (!*optarg || strlen(optarg) >= sizeof(d.set.socket)) {
				fprintf(stderr, "madvseqd: --socket: '%s' is not a path shorter than %zu bytes\n",
					optarg, sizeof(d.set.socket));
				return 2;
			}
			break;
		case 'l':
			if ((level_arg = msqd_parse_log_level(optarg)) < 0) {
				fprintf(stderr, "madvseqd: --log-level: '%s' is not err, warning, notice, info or debug\n", optarg);
				return 2;
			}
			break;
		case 'C': check = optarg; break;
		case 'R':
			if ((resolve = parse_pid(optarg)) < 0) {
				fprintf(stderr, "madvseqd: --resolve: '%s' is not a process id (1 or more)\n", optarg);
				return 2;
			}
			break;
		case 'P': d.set.proc_root = optarg; break;
		case 'G': d.set.cg_root = optarg; break;
		case 'N': own_cgroupns = true; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("madvseqd %s (protocol %d)\n", MSQD_VERSION, MSQ_PROTO_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	if (check) {
		struct msqd_conf c;

		msqd_conf_init(&c);
		if (msqd_conf_load(&c, check, false) < 0) {
			fprintf(stderr, "%s\n", c.error);
			msqd_conf_free(&c);
			return 1;
		}
		msqd_conf_print(&c, stdout);
		msqd_conf_free(&c);
		return 0;
	}
	if (load_config(&d, &d.set.conf) < 0)
		return 1;
	apply_daemon_settings(&d, socket_arg, level_arg);
	msqd_hostns_enter(d.set.proc_root, own_cgroupns); /* before any cgroup is read */
	if (resolve > 0) {
		rc = resolve_pid(&d, (pid_t)resolve);
		msqd_conf_free(&d.set.conf);
		return rc;
	}

	raise_nofile(&d);
	d.srv.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	sigemptyset(&mask);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	d.srv.sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	d.srv.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (d.srv.sigfd < 0 || d.srv.epfd < 0) {
		log_err("signalfd/epoll: %s", strerror(errno));
		return 1;
	}
	if ((rc = msqd_server_listen(&d)) < 0) {
		log_err("cannot listen on %s: %s", d.set.socket, strerror(-rc));
		return 1;
	}
	epoll_ctl(d.srv.epfd, EPOLL_CTL_ADD, d.srv.lfd, &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &wl });
	epoll_ctl(d.srv.epfd, EPOLL_CTL_ADD, d.srv.sigfd, &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &ws });
	msqd_refs_init(&d);
	d.started_ns = d.now_ns = msqd_now_ns();
	d.ks.state = msq_kernel_dropbehind_state(d.set.proc_root);
	d.ks.checked_ns = d.now_ns;
	if (d.ks.state == 1)
		log_info("the kernel's own drop-behind (%s) is on: MADV_SEQUENTIAL mappings of the "
			 "filesystems it covers are left to it", MSQ_KERNEL_DROPBEHIND_SYSCTL);
	d.cyc.sleep_ns = d.set.conf.interval_ns;
	d.cyc.next_ns = d.now_ns + d.cyc.sleep_ns;
	d.disc.next_ns = d.now_ns;
	log_info("listening on %s; %s; config %s (%zu cgroup sections)", d.set.socket, msqd_fidelity(&d),
		 d.set.config_path, d.set.conf.n);
	sd_notifyf(0, "READY=1\nSTATUS=listening on %s\nMAINPID=%d", d.set.socket, (int)getpid());

	run(&d, socket_arg, level_arg, &wl);
	sd_notify(0, "STOPPING=1");
	while (d.cl.list)
		msqd_client_drop(&d, d.cl.list, "daemon exiting");
	msqd_exit_drops(&d, UINT64_MAX);
	msqd_fdwatch_free(&d.fdw);
	msqd_fdclosed_free(&d.fdc);
	unlink(d.set.socket);
	close(d.srv.lfd);
	if (d.disc.disk_intake.fd >= 0)
		close(d.disc.disk_intake.fd);
	free(d.disc.quiet);
	msqd_conf_free(&d.set.conf);
	for (struct msqd_cg *g = d.cgs.list, *next; g; g = next) {
		next = g->next;
		if (g->intake.fd >= 0)
			close(g->intake.fd);
		free(g->path);
		free(g);
	}
	return 0;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * madvseqd's state: one member per module, each of a type that module's
 * header defines and that module alone changes (others read it).  The
 * daemon is one thread: an epoll loop (main.c) that serves the socket
 * (server.c), hands each message, once validate.c has checked it, to
 * handle.c; keeps its clients (client.c) and their regions (regions.c);
 * runs management cycles (cycle.c) and exit drops (exitdrop.c) under each
 * cgroup's policy and pressure gate (cgroup.c); rescans processes of
 * discover = yes cgroups (discover.c), follows their read()/write()
 * streams (fdwatch.c) and the files they close (fdclosed.c), and answers status queries
 * (metrics.c, whose counters are listed once, in its table).
 */
#ifndef MSQD_MSQD_H
#define MSQD_MSQD_H

#include <stdint.h>

#include "cgroup.h"
#include "client.h"
#include "conf.h"
#include "counters.h"
#include "cycle.h"
#include "discover.h"
#include "exitdrop.h"
#include "fdclosed.h"
#include "fdwatch.h"
#include "refs.h"
#include "regions.h"
#include "server.h"

struct msqd {
	struct msqd_settings set;
	uint64_t now_ns, started_ns; /* the loop's clock (main.c), and the start */
	struct msqd_server srv;
	struct msqd_clients cl;
	struct msqd_regions rg;
	struct msqd_cgroups cgs;
	struct msqd_kernel_switch ks;
	struct msqd_cycles cyc;
	struct msqd_discovery disc;
	struct msqd_fdwatch fdw;
	struct msqd_fdclosed fdc;
	struct msqd_refs refs;
	struct msqd_exitdrops xd;
	struct msqd_counters cnt;
};

#endif

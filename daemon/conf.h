/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * madvseqd.conf: INI (libinih).  [daemon] holds the service's own
 * settings; every section whose name starts with '/' is a glob (fnmatch,
 * '*' also crosses '/') over cgroup paths: v2 paths, or the memory
 * controller's v1 paths on hosts where v2 has no memory controller.  The
 * most specific matching section wins (most literal characters; on a tie,
 * the later one); keys a section does not set keep their built-in default.
 * A [label] section whose first key is pod = UID... or qos = CLASS...
 * matches Kubernetes pods' cgroups instead (kubepods.h): it ranks above
 * every glob, and one with pod = above one with only qos =.
 */
#ifndef MSQD_CONF_H
#define MSQD_CONF_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <madvseq/policy.h>

#include "kubepods.h"

struct msqd_policy {
	enum msq_mode mode;
	enum msq_read_mode read;
	uint64_t lag;
	bool discover;        /* find 'sr' VMAs (smaps) and read()/write() streams (fdinfo) of unshimmed programs */
	bool strong_refs;     /* check kpageflags/kpagecount before dropping */
	unsigned pressure_pct;/* act only above this % of the memory limit (0: always) */
	double psi_some_avg10;/* ...or only above this memory PSI "some avg10" (0: off) */
};

struct msqd_section {
	char *glob;                  /* a pod section: its label */
	struct msqd_kubematch *kube; /* pod/qos matcher; NULL: glob */
	unsigned line;
	struct msqd_policy p;
};

struct msqd_conf {
	char *path;
	struct msqd_section *sec;
	size_t n;
	/* [daemon] */
	char socket[108];
	uint64_t interval_ns;
	uint64_t discover_interval_ns;
	uint64_t discover_watch_ns; /* how often discover cgroups' intake is read */
	uint64_t discover_trigger;  /* bytes of intake that start a scan at once; 0: off */
	uint64_t hello_timeout_ns;
	unsigned max_clients;
	unsigned max_clients_per_uid;    /* connections of one uid (root: see server.c) */
	unsigned max_regions_per_client;
	uint64_t max_client_bytes;       /* sum of one client's region lengths */
	uint64_t max_client_memory;      /* the daemon's bookkeeping for one client */
	unsigned max_discovered;         /* processes managed through discovery */
	uint64_t walk_budget_ns;         /* snapshot and exit-drop walks, per turn */
	int log_level; /* -1: not set */
	/* the first error: "FILE:LINE: what" */
	char error[512];
};

void msqd_policy_default(struct msqd_policy *p);
void msqd_conf_init(struct msqd_conf *c);
void msqd_conf_free(struct msqd_conf *c);
/*
 * Parses path into c (initialised by the caller).  A missing file is an
 * empty configuration when missing_ok.  Returns 0, or -errno with
 * c->error set to "FILE:LINE: reason".
 */
int msqd_conf_load(struct msqd_conf *c, const char *path, bool missing_ok);
/* The parser of msqd_conf_load(), on an open stream (errors name it
 * name).  Returns 0, or -errno with c->error set; c->path is left alone. */
int msqd_conf_parse(struct msqd_conf *c, FILE *f, const char *name);
/* The effective policy for a cgroup path; *section gets the winning
 * section's glob (NULL: built-in defaults). */
const struct msqd_policy *msqd_conf_resolve(const struct msqd_conf *c, const char *cgroup,
					    const char **section);
/* One line "mode=... lag=..." for p. */
void msqd_policy_format(const struct msqd_policy *p, char *buf, size_t len);
/* --check-config output: every section's effective policy. */
void msqd_conf_print(const struct msqd_conf *c, FILE *f);
/* True if any section has discover = yes. */
bool msqd_conf_any_discover(const struct msqd_conf *c);

/* What the daemon runs with: where /proc and cgroupfs are, its socket,
 * and the configuration in use (swapped whole by a reload, main.c). */
struct msqd_settings {
	const char *proc_root, *cg_root, *config_path;
	char socket[108];
	struct msqd_conf conf;
};

#endif

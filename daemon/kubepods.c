/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "kubepods.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const qos_names[] = {
	[MSQD_QOS_GUARANTEED] = "guaranteed",
	[MSQD_QOS_BURSTABLE] = "burstable",
	[MSQD_QOS_BESTEFFORT] = "besteffort",
};

const char *msqd_qos_name(enum msqd_qos q)
{
	return q >= MSQD_QOS_GUARANTEED && q <= MSQD_QOS_BESTEFFORT ? qos_names[q] : "?";
}

const char *msqd_kube_driver_name(enum msqd_kube_driver d)
{
	return d == MSQD_KUBE_SYSTEMD ? "systemd" : d == MSQD_KUBE_CGROUPFS ? "cgroupfs" : "?";
}

int msqd_qos_parse(const char *s, enum msqd_qos *q)
{
	for (int i = MSQD_QOS_GUARANTEED; i <= MSQD_QOS_BESTEFFORT; i++)
		if (!strcasecmp(s, qos_names[i])) {
			*q = (enum msqd_qos)i;
			return 0;
		}
	return -EINVAL;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/*
 * A uuid (8-4-4-4-12 hex digits, '-' or the systemd driver's '_' between)
 * or a static pod's 32 hex digits.  Anything else is refused, so that a
 * typo in the configuration is an error, not a section that never matches.
 */
int msqd_pod_uid_parse(const char *s, size_t len, char *out)
{
	char u[MSQD_POD_UID_MAX + 1];

	if (len == 36) {
		for (size_t i = 0; i < 36; i++) {
			bool sep = i == 8 || i == 13 || i == 18 || i == 23;

			if (sep ? (s[i] != '-' && s[i] != '_') : hexval(s[i]) < 0)
				return -EINVAL;
			u[i] = sep ? '-' : (char)(s[i] | 0x20); /* hex digits: lowercase */
		}
	} else if (len == 32) {
		for (size_t i = 0; i < 32; i++) {
			if (hexval(s[i]) < 0)
				return -EINVAL;
			u[i] = (char)(s[i] | 0x20);
		}
	} else {
		return -EINVAL;
	}
	memcpy(out, u, len);
	out[len] = '\0';
	return 0;
}

/* A container id: 1 to 64 hex digits (runtimes use 64). */
static int container_id_parse(const char *s, size_t len, char *out)
{
	if (len < 1 || len > MSQD_CONTAINER_ID_MAX)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if (hexval(s[i]) < 0)
			return -EINVAL;
	for (size_t i = 0; i < len; i++)
		out[i] = (char)(s[i] | 0x20);
	out[len] = '\0';
	return 0;
}

struct comp {
	const char *s;
	size_t len;
};

/* The next path component after *at ('/'s skipped); false at the end. */
static bool next_comp(const char **at, struct comp *c)
{
	const char *p = *at;

	while (*p == '/')
		p++;
	if (!*p)
		return false;
	c->s = p;
	while (*p && *p != '/')
		p++;
	c->len = (size_t)(p - c->s);
	*at = p;
	return true;
}

static bool comp_is(const struct comp *c, const char *lit)
{
	return c->len == strlen(lit) && !memcmp(c->s, lit, c->len);
}

static bool has_prefix(const struct comp *c, const char *pre, size_t prelen)
{
	return c->len >= prelen && !memcmp(c->s, pre, prelen);
}

static bool has_suffix(const struct comp *c, const char *suf)
{
	size_t n = strlen(suf);

	return c->len >= n && !memcmp(c->s + c->len - n, suf, n);
}

/*
 * A container's component: "<runtime>-<id>.scope" (systemd), "<id>" or
 * "<runtime>-<id>" (cgroupfs).  The id is what follows the last '-'
 * (crio-conmon-<id> included).
 */
static int container_parse(const struct comp *c, bool scope, char *out)
{
	size_t len = c->len;
	const char *s = c->s, *dash;

	if (scope) {
		if (!has_suffix(c, ".scope"))
			return -EINVAL;
		len -= strlen(".scope");
	}
	dash = memrchr(s, '-', len);
	if (dash) {
		len -= (size_t)(dash + 1 - s);
		s = dash + 1;
	} else if (scope) {
		return -EINVAL;
	}
	return container_id_parse(s, len, out);
}

static int parse_systemd(const char *at, const struct comp *root, struct msqd_kubepod *kp)
{
	/* the stem every slice name below starts with: "kubepods" or
	 * "<prefix>-kubepods" */
	char pre[256];
	size_t stem = root->len - strlen(".slice"), n;
	struct comp c, pod;
	enum msqd_qos q = MSQD_QOS_GUARANTEED;

	if (stem + 32 > sizeof(pre))
		return -ENOENT;
	memcpy(pre, root->s, stem);
	if (!next_comp(&at, &c))
		return -ENOENT;
	for (int i = MSQD_QOS_BURSTABLE; i <= MSQD_QOS_BESTEFFORT; i++) {
		n = (size_t)snprintf(pre + stem, sizeof(pre) - stem, "-%s.slice", qos_names[i]);
		if (c.len == stem + n && !memcmp(c.s, pre, c.len)) {
			q = (enum msqd_qos)i;
			if (!next_comp(&at, &c))
				return -ENOENT; /* the QoS class's own slice */
			break;
		}
	}
	if (q == MSQD_QOS_GUARANTEED)
		n = (size_t)snprintf(pre + stem, sizeof(pre) - stem, "-pod");
	else
		n = (size_t)snprintf(pre + stem, sizeof(pre) - stem, "-%s-pod", qos_names[q]);
	n += stem;
	if (!has_prefix(&c, pre, n) || !has_suffix(&c, ".slice"))
		return -ENOENT;
	pod.s = c.s + n;
	pod.len = c.len - n - strlen(".slice");
	if (c.len < n + strlen(".slice") || msqd_pod_uid_parse(pod.s, pod.len, kp->pod_uid) < 0)
		return -EINVAL;
	kp->qos = q;
	kp->container_id[0] = '\0';
	if (next_comp(&at, &c) && container_parse(&c, true, kp->container_id) < 0)
		return -EINVAL;
	return 0;
}

static int parse_cgroupfs(const char *at, struct msqd_kubepod *kp)
{
	struct comp c;
	enum msqd_qos q = MSQD_QOS_GUARANTEED;

	if (!next_comp(&at, &c))
		return -ENOENT;
	if (comp_is(&c, "burstable") || comp_is(&c, "besteffort")) {
		q = comp_is(&c, "burstable") ? MSQD_QOS_BURSTABLE : MSQD_QOS_BESTEFFORT;
		if (!next_comp(&at, &c))
			return -ENOENT;
	}
	if (!has_prefix(&c, "pod", 3))
		return -ENOENT;
	if (msqd_pod_uid_parse(c.s + 3, c.len - 3, kp->pod_uid) < 0)
		return -EINVAL;
	kp->qos = q;
	kp->container_id[0] = '\0';
	if (next_comp(&at, &c) && container_parse(&c, false, kp->container_id) < 0)
		return -EINVAL;
	return 0;
}

int msqd_kubepods_parse(const char *path, struct msqd_kubepod *out)
{
	struct msqd_kubepod kp;
	const char *at = path;
	struct comp c;

	/* The first kubepods cgroup on the way down: a --cgroup-root (or a
	 * node that is itself a container) may put others above it. */
	while (next_comp(&at, &c)) {
		int rc;

		if (comp_is(&c, "kubepods")) {
			kp.driver = MSQD_KUBE_CGROUPFS;
			rc = parse_cgroupfs(at, &kp);
		} else if (comp_is(&c, "kubepods.slice") || has_suffix(&c, "-kubepods.slice")) {
			kp.driver = MSQD_KUBE_SYSTEMD;
			rc = parse_systemd(at, &c, &kp);
		} else {
			continue;
		}
		if (rc == 0)
			*out = kp;
		return rc;
	}
	return -ENOENT;
}

static bool is_sep(char ch)
{
	return ch == ' ' || ch == '\t' || ch == ',';
}

/* Calls add(m, word, len) for each word of list; stops at the first
 * that fails.  Returns 0, or what add returned (*bad: the word). */
static int each_word(struct msqd_kubematch *m, const char *list, char *bad, size_t badlen,
		     int (*add)(struct msqd_kubematch *, const char *, size_t))
{
	const char *p = list;
	bool any = false;

	for (;;) {
		const char *w;
		int rc;

		while (is_sep(*p))
			p++;
		if (!*p)
			break;
		w = p;
		while (*p && !is_sep(*p))
			p++;
		rc = add(m, w, (size_t)(p - w));
		if (rc < 0) {
			snprintf(bad, badlen, "%.*s", (int)(p - w), w);
			return rc;
		}
		any = true;
	}
	if (!any) {
		snprintf(bad, badlen, "%s", "");
		return -EINVAL;
	}
	return 0;
}

static int add_pod(struct msqd_kubematch *m, const char *w, size_t len)
{
	char u[MSQD_POD_UID_MAX + 1];
	char(*v)[MSQD_POD_UID_MAX + 1];

	if (msqd_pod_uid_parse(w, len, u) < 0)
		return -EINVAL;
	v = realloc(m->uid, (m->nuid + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	m->uid = v;
	memcpy(m->uid[m->nuid++], u, sizeof(u));
	return 0;
}

static int add_qos(struct msqd_kubematch *m, const char *w, size_t len)
{
	char name[16];
	enum msqd_qos q;

	if (len >= sizeof(name))
		return -EINVAL;
	memcpy(name, w, len);
	name[len] = '\0';
	if (msqd_qos_parse(name, &q) < 0)
		return -EINVAL;
	m->qos_mask |= 1u << q;
	return 0;
}

int msqd_kubematch_add_pods(struct msqd_kubematch *m, const char *list, char *bad, size_t badlen)
{
	size_t before = m->nuid;
	int rc = each_word(m, list, bad, badlen, add_pod);

	if (rc < 0)
		m->nuid = before;
	return rc;
}

int msqd_kubematch_add_qos(struct msqd_kubematch *m, const char *list, char *bad, size_t badlen)
{
	unsigned before = m->qos_mask;
	int rc = each_word(m, list, bad, badlen, add_qos);

	if (rc < 0)
		m->qos_mask = before;
	return rc;
}

bool msqd_kubematch_test(const struct msqd_kubematch *m, const struct msqd_kubepod *kp)
{
	bool uid_ok = m->nuid == 0;

	if (m->qos_mask && !(m->qos_mask & (1u << kp->qos)))
		return false;
	for (size_t i = 0; i < m->nuid && !uid_ok; i++)
		uid_ok = !strcmp(m->uid[i], kp->pod_uid);
	return uid_ok;
}

void msqd_kubematch_free(struct msqd_kubematch *m)
{
	free(m->uid);
	*m = (struct msqd_kubematch){ 0 };
}

void msqd_kubematch_format(const struct msqd_kubematch *m, char *buf, size_t len)
{
	size_t n = 0;

	if (!len)
		return;
	buf[0] = '\0';
#define PUT(...)                                                             \
	do {                                                                 \
		int w_ = snprintf(buf + n, len - n, __VA_ARGS__);            \
		n = w_ < 0 ? n : n + (size_t)w_ >= len ? len - 1 : n + (size_t)w_; \
	} while (0)
	if (m->nuid) {
		PUT("pod =");
		for (size_t i = 0; i < m->nuid; i++)
			PUT(" %s", m->uid[i]);
		PUT("\n");
	}
	if (m->qos_mask) {
		PUT("qos =");
		for (int q = MSQD_QOS_GUARANTEED; q <= MSQD_QOS_BESTEFFORT; q++)
			if (m->qos_mask & (1u << q))
				PUT(" %s", qos_names[q]);
		PUT("\n");
	}
#undef PUT
}

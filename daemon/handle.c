/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What each message does: HELLO, REGISTER, UNREGISTER, POLICY_GET,
 * READ_REPORT, STATUS, STATS.  Nothing a message says is trusted beyond what
 * validate.c checked and /proc/PID/maps confirms (regions.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <madvseq/protocol.h>

#include "client.h"
#include "cycle.h"
#include "msqd.h"
#include "handle.h"
#include "log.h"
#include "metrics.h"
#include "regions.h"
#include "validate.h"

/* The answers a handler gives: one message, or an error. */
static int reply_msg(struct msqd_reply *r, const void *msg, uint16_t type, uint32_t size,
		     uint32_t seq)
{
	r->kind = MSQD_REPLY_MSG;
	r->type = type;
	r->size = size;
	r->seq = seq;
	memcpy(&r->msg, msg, size);
	return 0;
}

static void reply_error(struct msqd_reply *r, uint32_t seq, int status)
{
	struct msq_msg_error m = { .status = status, .version = MSQ_PROTO_VERSION };

	reply_msg(r, &m, MSQ_MSG_ERROR, sizeof(m), seq);
}

/* An action the client has no right to (any more): its regions go
 * undropped, and the answer is EPERM. */
static int refused(struct msqd *d, struct msqd_client *c, int rc)
{
	if (rc == -EPERM)
		msqd_client_deny(d, c, "credentials or address space changed since HELLO");
	return rc == -ESRCH ? -ESRCH : -EPERM;
}

static int on_hello(struct msqd *d, struct msqd_client *c, const struct msq_msg_hello *m,
			struct msqd_reply *r)
{
	struct msq_msg_welcome w = { 0 };
	int rc;

	if ((rc = msqd_valid_hello(m)) < 0)
		return rc;
	c->hello = true;
	if (m->flags & MSQ_HELLO_CTL) {
		/* Status names processes and cgroups: root or the daemon's user. */
		if (c->uid != 0 && c->uid != geteuid()) {
			reply_error(r, m->h.seq, -EPERM);
			return -EPERM;
		}
		c->ctl = true;
	} else {
		if ((rc = msqd_client_attach(d, c)) < 0) {
			log_info("pid %d: cannot manage it (%s); it goes on by itself", (int)c->pid,
				 strerror(-rc));
			reply_error(r, m->h.seq, rc);
			return rc;
		}
		d->cl.nshim++;
		c->counted = true;
		c->takes_drops = m->flags & MSQ_HELLO_DROPS;
		w.flags = MSQ_WELCOME_DELEGATE;
		log_debug("pid %d (uid %u) registered, cgroup %s", (int)c->pid, (unsigned)c->uid,
			  c->cg->path);
	}
	return reply_msg(r, &w, MSQ_MSG_WELCOME, sizeof(w), m->h.seq);
}

static int on_register(struct msqd *d, struct msqd_client *c, const struct msq_msg_register *m,
			struct msqd_reply *r)
{
	struct msq_msg_result res = { .id = m->id };
	int rc = msqd_valid_register(m);

	if (rc == -EBADMSG)
		return rc;
	if (rc < 0)
		res.status = rc;
	else if ((rc = msqd_client_may_act(d, c)) < 0)
		res.status = refused(d, c, rc);
	else if (c->nr >= d->set.conf.max_regions_per_client ||
		 c->bytes + m->length > d->set.conf.max_client_bytes || c->mem >= d->set.conf.max_client_memory)
		res.status = -ENOSPC;
	else
		res.status = msqd_region_add(d, c, m->id, m->start, m->length, m->dev, m->ino,
					     m->offset, false, NULL, false, false,
					     m->flags & MSQ_REGION_SNAPSHOT ? m->precached : NULL,
					     m->nprecached);
	if (res.status == 0 && m->flags & MSQ_REGION_UNADVISED) {
		struct msqd_region *added = c->r[c->nr - 1];

		added->s.unadvised = true;
		added->kernel_fs = false; /* the kernel drops behind advised faults only */
	}
	if (res.status < 0) {
		d->cnt.refused_regions++;
		log_debug("pid %d: region %#llx+%#llx refused: %s", (int)c->pid,
			  (unsigned long long)m->start, (unsigned long long)m->length,
			  strerror(-res.status));
	}
	return reply_msg(r, &res, MSQ_MSG_RESULT, sizeof(res), m->h.seq);
}

static int on_unregister(struct msqd *d, struct msqd_client *c, const struct msq_msg_unregister *m,
			struct msqd_reply *r)
{
	struct msq_msg_result res = { 0 };
	uint64_t end = m->start + m->length; /* (validated: no wrap) */
	int rc = msqd_valid_unregister(m);
	int64_t got;

	if (rc == -EBADMSG)
		return rc;
	if (rc < 0) {
		res.status = rc;
		return reply_msg(r, &res, MSQ_MSG_RESULT, sizeof(res), m->h.seq);
	}
	/* A client that lost its rights gets EPERM for any final drop, even
	 * with nothing left to drop. */
	if (m->flags & MSQ_UNREGISTER_FINAL && c->denied) {
		res.status = -EPERM;
		return reply_msg(r, &res, MSQ_MSG_RESULT, sizeof(res), m->h.seq);
	}
	for (size_t i = c->nr; i-- > 0;) {
		if (c->r[i]->s.start >= end || c->r[i]->s.end <= m->start)
			continue;
		/* Still mapped: the client waits for this answer to unmap.
		 * (Unless it gave up waiting and exited: then through the
		 * file.) */
		if (m->flags & MSQ_UNREGISTER_FINAL) {
			if ((rc = msqd_client_may_act(d, c)) == -ESRCH) {
				/* Exiting: its regions wait for the exit drop. */
				c->dead = true;
				msqd_client_closing(d, c);
				continue;
			}
			if (rc < 0) {
				res.status = refused(d, c, rc);
				break; /* (and its regions are gone) */
			}
			/* Advice that failed is the client's to give (it
			 * still maps the range): told by the status. */
			got = msqd_region_final_drop(d, c, i, m->start, end);
			if (got < 0 && !res.status)
				res.status = (int32_t)got;
			if (c->dead)
				continue; /* through the file, once it has exited */
		}
		msqd_region_remove(d, c, i);
	}
	if (c->dead)
		return 0; /* and it waits for no answer */
	return reply_msg(r, &res, MSQ_MSG_RESULT, sizeof(res), m->h.seq);
}

static int on_policy(struct msqd *d, struct msqd_client *c, const struct msq_msg_hdr *h,
			struct msqd_reply *r)
{
	const struct msqd_policy *p = c->cg->pol;
	struct msq_msg_policy m = {
		.mode = p->mode, .read = p->read, .lag = p->lag,
		.interval_ns = d->set.conf.interval_ns, .flags = MSQ_WELCOME_DELEGATE,
	};

	return reply_msg(r, &m, MSQ_MSG_POLICY, sizeof(m), h->seq);
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static void add_read(struct msqd_read_counts *to, const struct msq_msg_read_report *m)
{
	to->files = sat_add(to->files, m->files);
	to->streamed = sat_add(to->streamed, m->streamed);
	to->dropped = sat_add(to->dropped, m->dropped);
	to->kept = sat_add(to->kept, m->kept);
}

/* The shim's read path says what it did: counted for the client, its
 * cgroup and the totals (status, metrics).  Nothing is acted on. */
static int on_read_report(struct msqd *d, struct msqd_client *c, const struct msq_msg_read_report *m,
			struct msqd_reply *r)
{
	struct msq_msg_result res = { 0 };
	int rc = msqd_valid_read_report(m);

	if (rc < 0)
		return rc;
	add_read(&c->read, m);
	add_read(&c->cg->read, m);
	add_read(&d->cnt.read, m);
	return reply_msg(r, &res, MSQ_MSG_RESULT, sizeof(res), m->h.seq);
}

static int on_text(struct msqd *d, const struct msq_msg_hdr *h, bool stats, uint32_t format,
		   struct msqd_reply *r)
{
	char *buf = NULL;
	size_t len = 0;
	int rc;

	rc = stats ? msqd_stats_text(d, format, &buf, &len)
		   : msqd_status_text(d, &buf, &len);
	if (rc < 0) {
		reply_error(r, h->seq, rc);
		r->send_may_fail = true;
		return 0;
	}
	r->kind = MSQD_REPLY_TEXT;
	r->seq = h->seq;
	r->text = buf;
	r->len = len;
	return 0;
}

int msqd_handle(struct msqd *d, struct msqd_client *c, const void *buf, size_t n,
		struct msqd_reply *r)
{
	const struct msq_msg_hdr *h = buf;

	if (n < sizeof(*h) || h->magic != MSQ_PROTO_MAGIC)
		return -EBADMSG;
	if (h->version != MSQ_PROTO_VERSION) {
		reply_error(r, h->seq, -EPROTONOSUPPORT);
		return -EPROTONOSUPPORT;
	}
	if (h->size != n || !msqd_valid_size(h->type, buf, n))
		return -EBADMSG; /* truncated, padded, or of an unknown type */
	if (!c->hello && h->type != MSQ_MSG_HELLO)
		return -EPROTO;
	switch (h->type) {
	case MSQ_MSG_HELLO:
		if (c->hello)
			return -EPROTO;
		return on_hello(d, c, buf, r);
	case MSQ_MSG_REGISTER:
		return c->ctl ? -EPROTO : on_register(d, c, buf, r);
	case MSQ_MSG_UNREGISTER:
		return c->ctl ? -EPROTO : on_unregister(d, c, buf, r);
	case MSQ_MSG_POLICY_GET:
		return c->ctl ? -EPROTO : on_policy(d, c, buf, r);
	case MSQ_MSG_READ_REPORT:
		return c->ctl ? -EPROTO : on_read_report(d, c, buf, r);
	case MSQ_MSG_STATUS:
		return !c->ctl ? -EPROTO : on_text(d, buf, false, 0, r);
	case MSQ_MSG_STATS:
		if (c->ctl && msqd_valid_stats(buf) < 0)
			return -EBADMSG;
		return !c->ctl ? -EPROTO : on_text(d, buf, true, ((const struct msq_msg_stats_req *)buf)->format, r);
	}
	return -EBADMSG;
}

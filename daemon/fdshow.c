/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The per-stream lines of the fd watch (see fdshow.h). */
#include <fcntl.h>
#include <inttypes.h>

#include "../common/iec.h"
#include "fdproc.h"
#include "fdshow.h"
#include "msqd.h"

static uint64_t kept_before(const struct fdw_file *f)
{
	return f->done > f->start ? msq_extents_covered(&f->pre, f->start, f->done) : 0;
}

static const char *direction(const struct fdw_file *f)
{
	return (f->flags & O_ACCMODE) == O_RDONLY ? "read" : "write";
}

void msqd_fdshow_text(struct msqd_out *o, const struct msqd *d)
{
	char a[MSQ_IEC_LEN], c[MSQ_IEC_LEN], e[MSQ_IEC_LEN], u[MSQ_IEC_LEN], k[MSQ_IEC_LEN], name[32];
	const struct msqd_fdwatch *w = &d->fdw;

	for (size_t i = 0; i < w->np; i++) {
		const struct fdw_proc *p = w->p[i];

		for (size_t j = 0; j < p->nf; j++) {
			const struct fdw_file *f = &p->f[j];

			if (!f->started || !f->seq.stream)
				continue; /* (a snapshot begun, not a stream yet) */
			msqd_fdproc_comm(d->set.proc_root, p->pid, name, sizeof(name));
			msqd_put(o, "  pid %d fd (%s) in %s: fd %d %s %s: at %s, streamed %s, dropped %s, "
				    "kept %s, unknown %s\n",
				 (int)p->pid, name, p->cg->path, f->fd, direction(f),
				 f->path ? f->path : "(no path)", msq_format_iec(f->seq.pos, a),
				 msq_format_iec(f->streamed, c), msq_format_iec(f->dropped, e),
				 msq_format_iec(kept_before(f), u), msq_format_iec(f->unknown, k));
		}
	}
}

bool msqd_fdshow_json(struct msqd_out *o, const struct msqd *d, bool first)
{
	const struct msqd_fdwatch *w = &d->fdw;
	char name[32];

	for (size_t i = 0; i < w->np; i++) {
		const struct fdw_proc *p = w->p[i];

		for (size_t j = 0; j < p->nf; j++) {
			const struct fdw_file *f = &p->f[j];

			if (!f->started || !f->seq.stream)
				continue; /* (a snapshot begun, not a stream yet) */
			msqd_fdproc_comm(d->set.proc_root, p->pid, name, sizeof(name));
			/* (numbers first, as madvseq stat reads them) */
			msqd_put(o, "%s\n{\"pid\":%d,\"dev\":%" PRIu64 ",\"ino\":%" PRIu64
				    ",\"dropped_bytes\":%" PRIu64 ",\"fd\":%d,\"position\":%" PRIu64
				    ",\"streamed_bytes\":%" PRIu64 ",\"kept_bytes\":%" PRIu64
				    ",\"unknown_bytes\":%" PRIu64 ",\"found_at\":%" PRIu64
				    ",\"found_ms_ago\":%" PRIu64 ",\"kind\":\"fd\",\"direction\":\"%s\","
				    "\"command\":",
				 first ? "" : ",", (int)p->pid, f->dev, f->ino, f->dropped, f->fd,
				 f->seq.pos, f->streamed, kept_before(f), f->unknown, f->found_pos,
				 (d->now_ns - f->found_ns) / 1000000, direction(f));
			msqd_json_str(o, name);
			msqd_put(o, ",\"cgroup\":");
			msqd_json_str(o, p->cg->path);
			msqd_put(o, ",\"file\":");
			if (f->path)
				msqd_json_str(o, f->path);
			else
				msqd_put(o, "null");
			msqd_put(o, "}");
			first = false;
		}
	}
	return first;
}

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Kubernetes pods in cgroup paths.  kubelet names a pod's cgroup after
 * its QoS class and uid, and the container runtime names each container's
 * below it, in one of two shapes (its cgroup driver):
 *
 *   systemd:  /kubepods.slice/kubepods-burstable.slice/
 *               kubepods-burstable-pod<uid with '_' for '-'>.slice/
 *               cri-containerd-<id>.scope           (crio-<id>, docker-<id>)
 *   cgroupfs: /kubepods/burstable/pod<uid>/<id>
 *
 * Guaranteed pods sit directly below the kubepods cgroup (no QoS level);
 * burstable and besteffort ones below their class's.  The same paths are
 * seen on cgroup v2 and below v1's memory controller.  A kubelet with a
 * --cgroup-root puts a prefix before them (systemd: a prefix of every slice
 * name as well, "kubelet-kubepods.slice"); both are accepted.
 *
 * A path holds no namespace, pod name or label: only what is here.
 * Pure functions: no I/O, no allocation but where said.
 */
#ifndef MSQD_KUBEPODS_H
#define MSQD_KUBEPODS_H

#include <stdbool.h>
#include <stddef.h>

enum msqd_qos {
	MSQD_QOS_GUARANTEED = 1,
	MSQD_QOS_BURSTABLE = 2,
	MSQD_QOS_BESTEFFORT = 3,
};

enum msqd_kube_driver {
	MSQD_KUBE_SYSTEMD = 1,
	MSQD_KUBE_CGROUPFS = 2,
};

/* A pod uid as kubelet has it: an RFC 4122 uuid, or a static pod's
 * 32-digit hash; kept lowercase, with '-' (the systemd driver's '_'
 * turned back). */
#define MSQD_POD_UID_MAX 64
#define MSQD_CONTAINER_ID_MAX 64

struct msqd_kubepod {
	enum msqd_kube_driver driver;
	enum msqd_qos qos;
	char pod_uid[MSQD_POD_UID_MAX + 1];
	char container_id[MSQD_CONTAINER_ID_MAX + 1]; /* "": the pod's own cgroup */
};

/*
 * Parses a cgroup path ("/a/b/c") into out.  Returns 0; -ENOENT when the
 * path is not a pod's or below one (the kubepods and QoS cgroups
 * themselves included); -EINVAL when it has kubepods' shape with a pod
 * uid or container id that is not one.  out is untouched on failure.
 */
int msqd_kubepods_parse(const char *path, struct msqd_kubepod *out);

const char *msqd_qos_name(enum msqd_qos q);           /* "guaranteed", ... */
const char *msqd_kube_driver_name(enum msqd_kube_driver d); /* "systemd", "cgroupfs" */
/* "guaranteed", "burstable" or "besteffort" (any case).  0 or -EINVAL. */
int msqd_qos_parse(const char *s, enum msqd_qos *q);
/* A pod uid as a user writes it (either separator, any case) into out
 * (MSQD_POD_UID_MAX + 1 bytes), canonical.  0 or -EINVAL. */
int msqd_pod_uid_parse(const char *s, size_t len, char *out);

/*
 * A config section's pod matcher: a set of pod uids and a set of QoS
 * classes; a path matches when it is a pod's and both sets (those not
 * empty) hold its value.
 */
struct msqd_kubematch {
	char (*uid)[MSQD_POD_UID_MAX + 1]; /* malloc'd */
	size_t nuid;
	unsigned qos_mask; /* 1 << enum msqd_qos; 0: any class */
};

/* Adds the uids (or classes) of a list separated by blanks or commas.
 * Returns 0, -EINVAL (nothing added; *bad gets the offending word, cut to
 * badlen) or -ENOMEM. */
int msqd_kubematch_add_pods(struct msqd_kubematch *m, const char *list, char *bad, size_t badlen);
int msqd_kubematch_add_qos(struct msqd_kubematch *m, const char *list, char *bad, size_t badlen);
bool msqd_kubematch_test(const struct msqd_kubematch *m, const struct msqd_kubepod *kp);
void msqd_kubematch_free(struct msqd_kubematch *m);
/* "pod = a b\nqos = burstable\n" (only the sets not empty), cut to len. */
void msqd_kubematch_format(const struct msqd_kubematch *m, char *buf, size_t len);

#endif

/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* kubepods cgroup paths: both drivers, every QoS class, and the matcher
 * config sections use. */
#include <errno.h>
#include <string.h>

#include "../../daemon/kubepods.h"
#include "check.h"

#define UID "1b7a4e2c-93d0-4f5e-8a61-0c2d3e4f5a6b"
#define UIDU "1b7a4e2c_93d0_4f5e_8a61_0c2d3e4f5a6b"
#define CID "3f9e1c0d2b4a59687f6e5d4c3b2a19080f1e2d3c4b5a69788796a5b4c3d2e1f0"

static void expect(const char *path, enum msqd_kube_driver drv, enum msqd_qos q, const char *uid,
		   const char *cid)
{
	struct msqd_kubepod kp;
	int rc = msqd_kubepods_parse(path, &kp);

	if (rc != 0) {
		fprintf(stderr, "%s: %d\n", path, rc);
		CHECK(rc == 0);
		return;
	}
	CHECK_EQ(kp.driver, drv);
	CHECK_EQ(kp.qos, q);
	CHECK(!strcmp(kp.pod_uid, uid));
	CHECK(!strcmp(kp.container_id, cid));
}

static void expect_rc(const char *path, int want)
{
	struct msqd_kubepod kp = { .qos = 0 };
	int rc = msqd_kubepods_parse(path, &kp);

	if (rc != want)
		fprintf(stderr, "%s: %d, not %d\n", path, rc, want);
	CHECK_EQ(rc, want);
	CHECK_EQ(kp.qos, 0); /* untouched */
}

static void test_systemd(void)
{
	expect("/kubepods.slice/kubepods-pod" UIDU ".slice/cri-containerd-" CID ".scope",
	       MSQD_KUBE_SYSTEMD, MSQD_QOS_GUARANTEED, UID, CID);
	expect("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU
	       ".slice/cri-containerd-" CID ".scope",
	       MSQD_KUBE_SYSTEMD, MSQD_QOS_BURSTABLE, UID, CID);
	expect("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDU
	       ".slice/crio-" CID ".scope",
	       MSQD_KUBE_SYSTEMD, MSQD_QOS_BESTEFFORT, UID, CID);
	/* conmon's scope, docker's, and the pod's own slice */
	expect("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDU
	       ".slice/crio-conmon-" CID ".scope",
	       MSQD_KUBE_SYSTEMD, MSQD_QOS_BESTEFFORT, UID, CID);
	expect("/kubepods.slice/kubepods-pod" UIDU ".slice/docker-" CID ".scope", MSQD_KUBE_SYSTEMD,
	       MSQD_QOS_GUARANTEED, UID, CID);
	expect("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU ".slice",
	       MSQD_KUBE_SYSTEMD, MSQD_QOS_BURSTABLE, UID, "");
	/* below the container: still that container's */
	expect("/kubepods.slice/kubepods-pod" UIDU ".slice/cri-containerd-" CID ".scope/init",
	       MSQD_KUBE_SYSTEMD, MSQD_QOS_GUARANTEED, UID, CID);
	/* a --cgroup-root, in the path and in every slice's name */
	expect("/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/"
	       "kubelet-kubepods-burstable-pod" UIDU ".slice/cri-containerd-" CID ".scope",
	       MSQD_KUBE_SYSTEMD, MSQD_QOS_BURSTABLE, UID, CID);
	/* a static pod's uid: 32 hex digits */
	expect("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
	       "0123456789ABCDEF0123456789abcdef.slice",
	       MSQD_KUBE_SYSTEMD, MSQD_QOS_BURSTABLE, "0123456789abcdef0123456789abcdef", "");
	/* not pods */
	expect_rc("/kubepods.slice", -ENOENT);
	expect_rc("/kubepods.slice/kubepods-burstable.slice", -ENOENT);
	expect_rc("/kubepods.slice/kubepods-besteffort.slice/", -ENOENT);
	expect_rc("/system.slice/kubepods-pod" UIDU ".slice", -ENOENT);
	expect_rc("/kubepods.slice/other.slice", -ENOENT);
	/* a class's pod under another class's slice is not a pod of either */
	expect_rc("/kubepods.slice/kubepods-burstable.slice/kubepods-besteffort-pod" UIDU ".slice",
		  -ENOENT);
	/* kubepods' shape, but no uid or container id */
	expect_rc("/kubepods.slice/kubepods-podxyz.slice", -EINVAL);
	expect_rc("/kubepods.slice/kubepods-pod.slice", -EINVAL);
	expect_rc("/kubepods.slice/kubepods-pod" UIDU "x.slice", -EINVAL);
	expect_rc("/kubepods.slice/kubepods-pod" UIDU ".slice/cri-containerd-xyz.scope", -EINVAL);
	expect_rc("/kubepods.slice/kubepods-pod" UIDU ".slice/" CID ".scope", -EINVAL);
	expect_rc("/kubepods.slice/kubepods-pod" UIDU ".slice/cri-containerd-" CID, -EINVAL);
}

static void test_cgroupfs(void)
{
	expect("/kubepods/pod" UID "/" CID, MSQD_KUBE_CGROUPFS, MSQD_QOS_GUARANTEED, UID, CID);
	expect("/kubepods/burstable/pod" UID "/" CID, MSQD_KUBE_CGROUPFS, MSQD_QOS_BURSTABLE, UID, CID);
	expect("/kubepods/besteffort/pod" UID "/" CID, MSQD_KUBE_CGROUPFS, MSQD_QOS_BESTEFFORT, UID, CID);
	expect("/kubepods/besteffort/pod" UID "/crio-" CID, MSQD_KUBE_CGROUPFS, MSQD_QOS_BESTEFFORT, UID,
	       CID);
	expect("/kubepods/besteffort/pod" UID, MSQD_KUBE_CGROUPFS, MSQD_QOS_BESTEFFORT, UID, "");
	expect("//kubepods//burstable//pod" UID "//" CID, MSQD_KUBE_CGROUPFS, MSQD_QOS_BURSTABLE, UID,
	       CID);
	/* under a --cgroup-root, and a node that is itself a container */
	expect("/docker/" CID "/kubepods/burstable/pod" UID "/" CID, MSQD_KUBE_CGROUPFS,
	       MSQD_QOS_BURSTABLE, UID, CID);
	/* uppercase hex, '_' separators: canonical */
	expect("/kubepods/pod1B7A4E2C_93D0_4F5E_8A61_0C2D3E4F5A6B", MSQD_KUBE_CGROUPFS,
	       MSQD_QOS_GUARANTEED, UID, "");
	expect_rc("/", -ENOENT);
	expect_rc("", -ENOENT);
	expect_rc("/kubepods", -ENOENT);
	expect_rc("/kubepods/burstable", -ENOENT);
	expect_rc("/kubepods/besteffort/other", -ENOENT);
	expect_rc("/kubepods2/pod" UID, -ENOENT);
	expect_rc("/user.slice/user-1000.slice", -ENOENT);
	expect_rc("/kubepods/pod" UID "0", -EINVAL);
	expect_rc("/kubepods/pod", -EINVAL);
	expect_rc("/kubepods/pod1b7a4e2c-93d0-4f5e-8a61_0c2d3e4f5a6z", -EINVAL);
	expect_rc("/kubepods/pod1b7a4e2c93d0-4f5e-8a61-0c2d3e4f5a6b0", -EINVAL);
	expect_rc("/kubepods/burstable/pod" UID "/not-hex!", -EINVAL);
}

static void test_uid_and_names(void)
{
	char u[MSQD_POD_UID_MAX + 1] = "untouched";
	enum msqd_qos q = 0;

	CHECK(msqd_pod_uid_parse(UIDU, strlen(UIDU), u) == 0 && !strcmp(u, UID));
	CHECK(msqd_pod_uid_parse("x", 1, u) == -EINVAL && !strcmp(u, UID));
	CHECK(msqd_pod_uid_parse(UID, 35, u) == -EINVAL);
	CHECK(msqd_qos_parse("BestEffort", &q) == 0 && q == MSQD_QOS_BESTEFFORT);
	CHECK(msqd_qos_parse("best", &q) == -EINVAL && q == MSQD_QOS_BESTEFFORT);
	CHECK(!strcmp(msqd_qos_name(MSQD_QOS_GUARANTEED), "guaranteed"));
	CHECK(!strcmp(msqd_qos_name(0), "?"));
	CHECK(!strcmp(msqd_kube_driver_name(MSQD_KUBE_CGROUPFS), "cgroupfs"));
}

static void test_match(void)
{
	struct msqd_kubematch m = { 0 };
	struct msqd_kubepod a = { .qos = MSQD_QOS_BESTEFFORT, .pod_uid = UID };
	struct msqd_kubepod b = { .qos = MSQD_QOS_BURSTABLE, .pod_uid = "0123456789abcdef0123456789abcdef" };
	char bad[64], buf[256];

	/* empty: every pod */
	CHECK(msqd_kubematch_test(&m, &a) && msqd_kubematch_test(&m, &b));
	CHECK(msqd_kubematch_add_qos(&m, "besteffort", bad, sizeof(bad)) == 0);
	CHECK(msqd_kubematch_test(&m, &a) && !msqd_kubematch_test(&m, &b));
	CHECK(msqd_kubematch_add_qos(&m, "Burstable, guaranteed", bad, sizeof(bad)) == 0);
	CHECK(msqd_kubematch_test(&m, &b));
	/* a bad word: nothing of the list is added */
	CHECK(msqd_kubematch_add_pods(&m, UIDU " nope", bad, sizeof(bad)) == -EINVAL);
	CHECK(!strcmp(bad, "nope") && m.nuid == 0);
	CHECK(msqd_kubematch_add_pods(&m, " , ", bad, sizeof(bad)) == -EINVAL);
	CHECK(msqd_kubematch_add_qos(&m, "all", bad, sizeof(bad)) == -EINVAL && !strcmp(bad, "all"));
	CHECK(msqd_kubematch_add_pods(&m, UIDU ",0123456789ABCDEF0123456789abcdef", bad, sizeof(bad)) == 0);
	CHECK_EQ(m.nuid, 2);
	CHECK(msqd_kubematch_test(&m, &a) && msqd_kubematch_test(&m, &b));
	b.pod_uid[0] = '9';
	CHECK(!msqd_kubematch_test(&m, &b));
	msqd_kubematch_format(&m, buf, sizeof(buf));
	CHECK(!strcmp(buf, "pod = " UID " 0123456789abcdef0123456789abcdef\n"
			   "qos = guaranteed burstable besteffort\n"));
	msqd_kubematch_format(&m, buf, 10); /* cut, terminated */
	CHECK(strlen(buf) == 9);
	msqd_kubematch_free(&m);
	CHECK(m.nuid == 0 && m.uid == NULL && m.qos_mask == 0);
}

int main(void)
{
	test_systemd();
	test_cgroupfs();
	test_uid_and_names();
	test_match();
	CHECK_DONE();
}

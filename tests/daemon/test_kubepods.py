#!/usr/bin/env python3
"""madvseqd on Kubernetes nodes: per-pod sections resolved against fixture
trees of both cgroup drivers on v1 and v2 (tests/fixtures/kubepods), the
manifests of contrib/kubernetes checked for the privileges and mounts they
must have, and metrics labelled by pod from a real daemon managing a stream
in a kubepods-shaped memory cgroup made under this test's own; and the
daemon of a pod with its own cgroup namespace, which enters the node's to
read other pods' paths as the node does.

    test_kubepods.py fixture|manifests|metrics|cgroupns"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "preload"))
from msqtest import (M, Cgroup, Workdir, cached, check, done, evict, plain_env, rate, skip,  # noqa: E402
                     warm)

ROOT = os.path.dirname(os.path.dirname(HERE))
KUBE = os.path.join(ROOT, "contrib", "kubernetes")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "kubepods")
UID_DB = "5d1f7a3e-0b2c-4e6d-9f8a-1c2b3d4e5f60"      # guaranteed: [database]
UID_BACKUP = "8e2a6c4b-7d1f-4a3e-b5c9-2d4f6a8b0c1e"  # burstable: [backup-jobs]
UID_OTHER = "c3b1a2d4-e5f6-4788-99aa-bbccddeeff00"   # besteffort: [besteffort]


def tool(var):
    p = os.environ.get(var)
    if not p or not os.path.exists(p):
        skip("%s not set (run through meson test)" % var)
    return p


def yaml_docs(name):
    try:
        import yaml
    except ImportError:
        skip("python3-yaml is not installed")
    with open(os.path.join(KUBE, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def configmap_conf(wd):
    """The ConfigMap's madvseqd.conf, as a file."""
    cm = [d for d in yaml_docs("configmap.yaml") if d["kind"] == "ConfigMap"][0]
    path = os.path.join(wd, "madvseqd.conf")
    with open(path, "w") as f:
        f.write(cm["data"]["madvseqd.conf"])
    return path


def case_fixture():
    d = tool("MADVSEQD")
    wd = tempfile.mkdtemp(prefix="msq-kube-")
    try:
        conf = configmap_conf(wd)
        p = subprocess.run([d, "--check-config", conf], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        check(p.returncode == 0 and "[database] # line" in p.stdout and "pod = " + UID_DB in p.stdout
              and "qos = besteffort" in p.stdout,
              "the ConfigMap's configuration is valid and --check-config shows its pod sections")
        if p.returncode:
            print(p.stderr)
        cids = {"guaranteed": "a1" * 32, "burstable": "b2" * 32, "besteffort": "c3" * 32}
        want = {"301": ("guaranteed", UID_DB, "database", "mode=off"),
                "302": ("burstable", UID_BACKUP, "backup-jobs", "discover=yes"),
                "303": ("besteffort", UID_OTHER, "besteffort", "discover=yes")}
        for tree in ("systemd-v1", "systemd-v2", "cgroupfs-v1", "cgroupfs-v2"):
            t = os.path.join(FIXTURES, tree)
            driver, layout = tree.split("-")
            for pid, (qos, uid, sec, pol) in sorted(want.items()):
                p = subprocess.run([d, "--proc-root", t + "/proc", "--cgroup-root", t + "/cgroup", "-c", conf,
                                    "--resolve", pid], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                print("--- %s pid %s\n%s" % (tree, pid, p.stdout.strip()))
                expect = ["(%s)" % layout, "section %s\n" % sec, pol,
                          "pod %s qos %s container %s driver %s" % (uid, qos, cids[qos], driver),
                          "usage %d " % ((100 + int(pid) - 301) * M)]
                for w in expect:
                    check(w in p.stdout, "%s pid %s: '%s'" % (tree, pid, w.strip()))
        # A mistyped uid or class is an error with its line, not a section
        # that never matches.
        for body, err in (("[x]\npod = 5d1f7a3e-0b2c\n", ":2: pod: '5d1f7a3e-0b2c' is not a pod uid"),
                          ("[x]\nqos = gold\n", ":2: qos: 'gold' is not guaranteed"),
                          ("[/kubepods*]\nqos = burstable\n", ":2: qos: only in a section whose first key"),
                          ("[x]\nmode = off\npod = " + UID_DB + "\n", ":2: section [x] is neither")):
            bad = os.path.join(wd, "bad.conf")
            with open(bad, "w") as f:
                f.write(body)
            p = subprocess.run([d, "--check-config", bad], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
            check(p.returncode != 0 and err in p.stderr, "rejected: %s (%s)" % (body.replace("\n", " | "),
                                                                                p.stderr.strip()))
    finally:
        shutil.rmtree(wd)
    done()


def case_manifests():
    docs = yaml_docs("daemonset.yaml")
    ds = [d for d in docs if d["kind"] == "DaemonSet"][0]
    spec = ds["spec"]["template"]["spec"]
    check(spec.get("hostPID") is True, "hostPID")
    check(not spec.get("hostNetwork"), "no hostNetwork")
    c = [x for x in spec["containers"] if x["name"] == "madvseqd"][0]
    sc = c["securityContext"]
    check(not sc.get("privileged") and sc.get("allowPrivilegeEscalation") is False, "not privileged")
    caps = sc["capabilities"]
    check(caps.get("drop") == ["ALL"], "all capabilities dropped first")
    check({"SYS_ADMIN", "SYS_NICE", "SYS_PTRACE"} <= set(caps.get("add", [])),
          "CAP_SYS_ADMIN (kpageflags), CAP_SYS_NICE and CAP_SYS_PTRACE (process_madvise, pidfd_getfd)")
    unit = open(os.path.join(ROOT, "contrib", "systemd", "madvseqd.service.in")).read()
    bset = set(re.search(r"^CapabilityBoundingSet=(.*)$", unit, re.M).group(1).replace("CAP_", "").split())
    check(set(caps["add"]) <= bset, "no capability the unit's bounding set lacks (%s)" % " ".join(sorted(bset)))
    text = open(os.path.join(KUBE, "daemonset.yaml")).read()
    for cap in caps["add"]:
        # the comment lines right above each capability say why
        m = re.search(r"((?:^ *#.*\n)+) *- %s\n" % cap, text, re.M)
        check(m is not None, "capability %s is explained in a comment" % cap)
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in spec["volumes"]}
    check(mounts["cgroup"]["mountPath"] == "/sys/fs/cgroup" and mounts["cgroup"].get("readOnly") is True
          and vols["cgroup"]["hostPath"]["path"] == "/sys/fs/cgroup", "/sys/fs/cgroup read-only from the node")
    check(mounts["socket"]["mountPath"] == "/run/madvseq" and vols["socket"]["hostPath"]["path"] == "/run/madvseq",
          "the socket directory is a hostPath")
    check(vols["config"]["configMap"]["name"] == "madvseqd-config" and mounts["config"]["mountPath"] == "/etc/madvseq"
          and mounts["config"].get("readOnly") is True, "madvseqd.conf from the ConfigMap, read-only")
    cms = [d for d in yaml_docs("configmap.yaml") if d["kind"] == "ConfigMap"]
    check(cms and cms[0]["metadata"]["name"] == "madvseqd-config" and "madvseqd.conf" in cms[0]["data"],
          "the ConfigMap holds madvseqd.conf")
    probe = c["livenessProbe"]["exec"]["command"]
    check(probe[0] == "madvseqctl" and probe[-1] == "status", "liveness probe: madvseqctl status")
    m = re.search(r"^MemoryMax=(\d+)M$", unit, re.M)
    lim = c["resources"]["limits"]["memory"]
    req = c["resources"]["requests"]["memory"]
    mi = lambda s: int(s[:-2]) if s.endswith("Mi") else int(s) // M  # noqa: E731
    check(m and mi(req) <= mi(lim) <= int(m.group(1)),
          "memory request %s <= limit %s <= the unit's MemoryMax %sM" % (req, lim, m and m.group(1)))
    check("cpu" in c["resources"]["requests"] and "cpu" in c["resources"]["limits"], "CPU request and limit")
    ann = ds["spec"]["template"]["metadata"]["annotations"]
    check(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == "9464",
          "scrape annotations on the metrics port")
    mc = [x for x in spec["containers"] if x["name"] == "metrics"][0]
    check(mc["ports"][0]["containerPort"] == 9464 and mc["securityContext"]["capabilities"]["drop"] == ["ALL"]
          and "add" not in mc["securityContext"]["capabilities"], "the metrics container has no capability")
    sm = [d for d in yaml_docs("servicemonitor.yaml") if d["kind"] == "ServiceMonitor"]
    check(sm and sm[0]["spec"]["endpoints"][0]["port"] == "metrics", "a ServiceMonitor on the metrics port")
    import json
    dash = json.load(open(os.path.join(KUBE, "grafana-dashboard.json")))
    exprs = " ".join(t["expr"] for p in dash["panels"] for t in p["targets"])
    check("madvseq_pod_dropped_bytes_total" in exprs and "node_memory_Active_file_bytes" in exprs,
          "the dashboard shows per-pod savings and the node's cache composition")
    done()


def kube_cgroup(parent_cg, *parts):
    """A cgroup directory below parent_cg (a Cgroup), made level by level."""
    path = parent_cg.path
    for p in parts:
        path = os.path.join(path, p)
        os.makedirs(path, exist_ok=True)
    return path


def rm_tree(top):
    for dirpath, dirs, _ in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
        try:
            os.rmdir(dirpath)
        except OSError:
            pass


def case_metrics():
    if os.geteuid() != 0:
        skip("needs root (the daemon, memory cgroups)")
    d_bin, ctl = tool("MADVSEQD"), tool("MADVSEQCTL")
    static = os.environ.get("STREAMER_STATIC")
    if not static or not os.path.exists(static):
        skip("no static streamer (static linking unavailable)")
    cg = Cgroup("kubepods", 512 * M)
    pod = None
    uid = UID_OTHER
    cid = "c3" * 32
    try:
        if cg.v2:
            parts = ("kubepods.slice", "kubepods-besteffort.slice",
                     "kubepods-besteffort-pod%s.slice" % uid.replace("-", "_"), "cri-containerd-%s.scope" % cid)
        else:
            parts = ("kubepods", "besteffort", "pod" + uid, cid)
        pod = kube_cgroup(cg, *parts)
        with Workdir("kube-metrics") as wd:
            data = wd.file("stream", 256 * M)
            evict(data)
            sock = os.path.join(wd.path, "d.sock")
            conf = os.path.join(wd.path, "d.conf")
            with open(conf, "w") as f:
                f.write("[daemon]\nsocket = %s\n[/*]\nmode = off\n[besteffort]\nqos = besteffort\n"
                        "discover = yes\n" % sock)
            log = open(os.path.join(wd.path, "d.log"), "w")
            dp = subprocess.Popen([d_bin, "-c", conf, "-l", "debug"], stdout=log, stderr=log, env=plain_env())
            for _ in range(100):
                if os.path.exists(sock):
                    break
                time.sleep(0.05)
            sp = subprocess.run(["sh", "-c", 'echo $$ > "$0"/cgroup.procs && exec "$@"', pod, static, data,
                                 rate(200), "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                timeout=300)
            time.sleep(0.5)
            out = subprocess.run([ctl, "-s", sock, "stats", "--format=prometheus"], stdout=subprocess.PIPE,
                                 text=True).stdout
            st = subprocess.run([ctl, "-s", sock, "status"], stdout=subprocess.PIPE, text=True).stdout
            dp.terminate()
            dp.wait(timeout=30)
            log.close()
            check(sp.returncode == 0, "the streamer ran in the pod's cgroup")
            lines = [l for l in out.splitlines() if l.startswith("madvseq_pod_")]
            print("\n".join(lines))
            labels = '{pod_uid="%s",qos="besteffort",container_id="%s"}' % (uid, cid)
            vals = {}
            for name in ("streamed", "dropped", "kept"):
                m = re.search(r"^madvseq_pod_%s_bytes_total%s (\d+)$" % (name, re.escape(labels)), out, re.M)
                vals[name] = int(m.group(1)) if m else -1
            check(vals["streamed"] >= 128 * M, "pod streamed bytes counted (%dM)" % (vals["streamed"] // M))
            check(vals["dropped"] >= 128 * M, "pod dropped bytes counted (%dM)" % (vals["dropped"] // M))
            check(vals["kept"] >= 0, "pod kept bytes present (%d)" % vals["kept"])
            check(cached(data) <= 4 * M, "the daemon dropped the stream's file (%dK left)" % (cached(data) // 1024))
            promtool = shutil.which("promtool")
            if promtool:
                p = subprocess.run([promtool, "check", "metrics"], input=out, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
                print("promtool check metrics: rc %d %s" % (p.returncode, p.stdout.strip() or "(clean)"))
                check(p.returncode == 0 and not p.stdout.strip(), "promtool check metrics is clean")
            else:
                print("promtool not installed: its check skipped (apt-get install prometheus)")
            if vals["dropped"] < 128 * M:
                print(st)
                print(open(os.path.join(wd.path, "d.log")).read()[-3000:])
    finally:
        if pod:
            rm_tree(os.path.join(cg.path, "kubepods.slice" if cg.v2 else "kubepods"))
        cg.remove()
    done()


def case_cgroupns():
    """madvseqd in a cgroup namespace of its own, made (unshare -C) in a
    burstable pod's container cgroup as a DaemonSet's pod is: a BestEffort
    pod's process reads "/../../besteffort/pod.../ID" from there.  It enters
    the node's namespace and resolves the pod's real path, section and pod;
    with --own-cgroupns, or without CAP_SYS_ADMIN, it warns, and the path is
    the relative one no section or pod matcher matches."""
    if os.geteuid() != 0:
        skip("needs root (cgroup namespaces, memory cgroups)")
    d_bin = tool("MADVSEQD")
    if not shutil.which("unshare") or not shutil.which("capsh"):
        skip("unshare (util-linux) or capsh (libcap2-bin) is not installed")
    if not os.path.exists("/proc/self/ns/cgroup"):
        skip("the kernel has no cgroup namespaces")
    cg = Cgroup("cgroupns", 256 * M)
    sleeper = None
    daemon_uid = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    try:
        if cg.v2:
            top = "kubepods.slice"
            own = (top, "kubepods-burstable.slice",
                   "kubepods-burstable-pod%s.slice" % daemon_uid.replace("-", "_"),
                   "cri-containerd-%s.scope" % ("d0" * 32))
            other = (top, "kubepods-besteffort.slice",
                     "kubepods-besteffort-pod%s.slice" % UID_OTHER.replace("-", "_"),
                     "cri-containerd-%s.scope" % ("c3" * 32))
        else:
            top = "kubepods"
            own = (top, "burstable", "pod" + daemon_uid, "d0" * 32)
            other = (top, "besteffort", "pod" + UID_OTHER, "c3" * 32)
        own_dir, other_dir = kube_cgroup(cg, *own), kube_cgroup(cg, *other)
        root = "/sys/fs/cgroup" if cg.v2 else "/sys/fs/cgroup/memory"
        host_path = other_dir[len(root):]
        sleeper = subprocess.Popen(["sh", "-c", 'echo $$ > "$0"/cgroup.procs && exec sleep 60', other_dir])
        for _ in range(100):
            if os.path.exists("/proc/%d/cgroup" % sleeper.pid) and \
                    host_path in open("/proc/%d/cgroup" % sleeper.pid).read():
                break
            time.sleep(0.02)
        with Workdir("kube-cgroupns") as wd:
            conf = configmap_conf(wd.path)

            def resolve(*extra, caps=None):
                cmd = [d_bin, "-c", conf, "--resolve", str(sleeper.pid)] + list(extra)
                if caps:
                    cmd = ["capsh", caps, "--", "-c", " ".join(cmd)]
                # (sh: joins the container cgroup first, then its own namespace)
                r = subprocess.run(["sh", "-c", 'echo $$ > "$0"/cgroup.procs && exec unshare -C "$@"',
                                    own_dir] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env=plain_env(), timeout=60)
                print("$ madvseqd --resolve %d %s%s\n%s%s" % (sleeper.pid, " ".join(extra),
                                                              " (" + caps + ")" if caps else "",
                                                              r.stderr, r.stdout))
                return r

            r = resolve()
            check(r.returncode == 0, "--resolve in a cgroup namespace of its own answers")
            check("entered the cgroup namespace of" in r.stderr, "the daemon says it entered the node's")
            check("cgroup %s (v%d)" % (host_path, 2 if cg.v2 else 1) in r.stdout,
                  "the BestEffort pod's process resolves to its cgroup as the node sees it")
            check("section besteffort" in r.stdout and ("pod %s qos besteffort" % UID_OTHER) in r.stdout,
                  "its section and its pod are the ones the node's path names")
            check("usage " in r.stdout, "its memory usage is read from the node's cgroup tree")
            for extra, caps, what in ((["--own-cgroupns"], None, "--own-cgroupns"),
                                      ([], "--drop=cap_sys_admin", "without CAP_SYS_ADMIN")):
                r = resolve(*extra, caps=caps)
                m = re.search(r"^pid \d+ cgroup (\S+) ", r.stdout, re.M)
                rel = m.group(1) if m else ""
                check(r.returncode == 0 and "warning:" in r.stderr and "do not match" in r.stderr,
                      "%s: one warning, which says what does not match" % what)
                check(rel.startswith("/..") and rel != host_path and "pod " not in r.stdout and
                      "section besteffort" not in r.stdout,
                      "%s: the path is relative to the daemon's own cgroup (%s), no pod, no section" % (what, rel))
            # A fixture has no namespace files: nothing to compare, no warning.
            fx = os.path.join(FIXTURES, "cgroupfs-v1")
            r = subprocess.run([d_bin, "-c", conf, "--proc-root", os.path.join(fx, "proc"), "-l", "debug",
                                "--cgroup-root", os.path.join(fx, "cgroup"), "--resolve", "1"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            check("nothing to compare" in r.stderr and "warning" not in r.stderr,
                  "a --proc-root fixture is left alone (%s)" % r.stderr.strip().splitlines()[:1])
    finally:
        if sleeper:
            sleeper.kill()
            sleeper.wait()
        rm_tree(os.path.join(cg.path, "kubepods.slice" if cg.v2 else "kubepods"))
        cg.remove()
    done()


CASES = {"fixture": case_fixture, "manifests": case_manifests, "metrics": case_metrics,
         "cgroupns": case_cgroupns}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: test_kubepods.py " + "|".join(sorted(CASES)))
        sys.exit(2)
    CASES[sys.argv[1]]()

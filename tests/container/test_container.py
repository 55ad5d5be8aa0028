#!/usr/bin/env python3
"""The madvseqd image (contrib/container/build-image.sh) run with podman as
the DaemonSet runs it: --pid=host, the DaemonSet's capabilities only, the
node's /sys/fs/cgroup read-only, the socket directory and the ConfigMap's
madvseqd.conf as volumes.  A victim pod's file is warmed and a BestEffort
pod streams a bigger file through a mapping (a static program: found by
discovery, as the ConfigMap says), both in a kubepods-shaped memory cgroup
tree made under this test's own cgroup; first with the kernel alone, then
under the containerised daemon.  The victim must keep >= 0.99 of its file.

Then again with the daemon's container in a cgroup namespace of its own
(--cgroupns=private: containerd's default on cgroup v2), placed as a
DaemonSet's pod is, in a burstable pod's cgroup of the same kubepods tree:
from there the BestEffort pod's /proc/PID/cgroup reads
"/../../../besteffort/pod...".  madvseqd enters the node's cgroup namespace
and the victim keeps >= 0.99 again; with --own-cgroupns (the step skipped)
it resolves the relative path, no section matches and the stream is not
managed.  Exits 77 where podman or debootstrap cannot run."""
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "preload"))
sys.path.insert(0, os.path.join(ROOT, "tests", "daemon"))
from msqtest import M, Cgroup, Workdir, cached, check, done, evict, rate, skip, warm  # noqa: E402
from test_kubepods import KUBE, configmap_conf, rm_tree, yaml_docs  # noqa: E402

VICTIM_UID = "5d1f7a3e-0b2c-4e6d-9f8a-1c2b3d4e5f60"
STREAM_UID = "c3b1a2d4-e5f6-4788-99aa-bbccddeeff00"
DAEMON_UID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"


def podman_opts():
    """What build-image.sh uses too: runc where crun refuses hybrid cgroup
    hosts; rlimits root may set without CAP_SYS_RESOURCE."""
    opts = []
    rt = os.environ.get("MADVSEQ_PODMAN_RUNTIME")
    if not rt and os.path.isdir("/sys/fs/cgroup/memory") and " cgroup2 " in open("/proc/self/mounts").read() \
            and shutil.which("runc"):
        rt = "runc"
    if rt:
        opts += ["--runtime", rt]
    import resource
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1] % (1 << 62), 32768)
    return opts, ["--ulimit", "nofile=%d:%d" % (nofile, nofile), "--ulimit", "nproc=%d:%d" % (nproc, nproc)]


def run_in(cgdir, argv, popen=False, **kw):
    cmd = ["sh", "-c", 'echo $$ > "$0"/cgroup.procs && exec "$@"', cgdir] + argv
    return subprocess.Popen(cmd, **kw) if popen else subprocess.run(cmd, **kw)


def kube_dirs(top, parts):
    p = top
    for x in parts:
        p = os.path.join(p, x)
        os.makedirs(p, exist_ok=True)
    return p


def hierarchy_tops(rel):
    """Where the runtime will make the cgroup rel ("/a/b") in each mounted
    hierarchy (v1: every controller's, not only memory's): the first
    directory on the way that is missing now, to be removed afterwards."""
    tops = []
    for line in open("/proc/self/mounts"):
        f = line.split()
        if f[2] not in ("cgroup", "cgroup2"):
            continue
        p = f[1]
        for x in rel.strip("/").split("/"):
            p = os.path.join(p, x)
            if not os.path.isdir(p):
                tops.append(p)
                break
    return tops


def main():
    if os.geteuid() != 0:
        skip("needs root (podman, debootstrap, memory cgroups)")
    static = os.environ.get("STREAMER_STATIC")
    if not static or not os.path.exists(static):
        skip("no static streamer (static linking unavailable)")
    t0 = time.time()
    # A tag of this run's own: another checkout's build must not retag the
    # image under it.
    tag = "localhost/madvseqd-test:%d" % os.getpid()
    b = subprocess.run([os.path.join(ROOT, "contrib", "container", "build-image.sh"), "--tag", tag],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stdout.write(b.stderr)
    if b.returncode == 77:
        skip(b.stderr.strip().splitlines()[-1])
    check(b.returncode == 0, "the image was built (%.0f s)" % (time.time() - t0))
    if b.returncode:
        done()
    m = re.search(r"^image: (\S+) (\d+) MiB$", b.stdout, re.M)
    image = m.group(1)
    print(b.stdout.strip())
    ds = [d for d in yaml_docs("daemonset.yaml") if d["kind"] == "DaemonSet"][0]
    c = [x for x in ds["spec"]["template"]["spec"]["containers"] if x["name"] == "madvseqd"][0]
    caps = c["securityContext"]["capabilities"]["add"]
    rt, ul = podman_opts()
    cg = Cgroup("kube-ct", 320 * M)
    name = "msq-test-madvseqd-%d" % os.getpid()
    made, sleeper = [], None

    def podman(*a):
        return subprocess.run(["podman"] + rt + list(a), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)

    try:
        cgroot = "/sys/fs/cgroup" if cg.v2 else "/sys/fs/cgroup/memory"
        if not cg.v2:
            top = "kubepods"
            vict_parts = (top, "pod" + VICTIM_UID, "a1" * 32)
            strm_parts = (top, "besteffort", "pod" + STREAM_UID, "c3" * 32)
            dpod_parts = (top, "burstable", "pod" + DAEMON_UID)
        else:
            top = "kubepods.slice"
            vict_parts = (top, "kubepods-pod%s.slice" % VICTIM_UID.replace("-", "_"),
                          "cri-containerd-%s.scope" % ("a1" * 32))
            strm_parts = (top, "kubepods-besteffort.slice",
                          "kubepods-besteffort-pod%s.slice" % STREAM_UID.replace("-", "_"),
                          "cri-containerd-%s.scope" % ("c3" * 32))
            dpod_parts = (top, "kubepods-burstable.slice",
                          "kubepods-burstable-pod%s.slice" % DAEMON_UID.replace("-", "_"))
        vdir, sdir = kube_dirs(cg.path, vict_parts), kube_dirs(cg.path, strm_parts)
        made.append(os.path.join(cg.path, top))
        # (the container's own cgroup below it is the runtime's to make)
        made += hierarchy_tops(os.path.join(cg.path, *dpod_parts)[len(cgroot):])
        dpod = kube_dirs(cg.path, dpod_parts)
        with Workdir("container") as wd:
            victim = wd.file("victim", 128 * M)
            stream = wd.file("stream", 1024 * M)
            sockdir = os.path.join(wd.path, "run")
            confdir = os.path.join(wd.path, "etc")
            os.makedirs(sockdir)
            os.makedirs(confdir)
            configmap_conf(confdir)

            def scenario(label):
                evict(victim)
                evict(stream)
                run_in(vdir, ["cat", victim], stdout=subprocess.DEVNULL, check=True)
                before = cached(victim)
                p = run_in(sdir, [static, stream, rate(400), "0"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=600)
                after = cached(victim)
                frac = after / before if before else 0
                print("%s: victim resident %.4f (%dM of %dM), stream left %dM cached; %s"
                      % (label, frac, after // M, before // M, cached(stream) // M, p.stdout.strip()))
                return frac, p.returncode

            def ct_run(ns, args, detach=True):
                """podman run of the image as the DaemonSet runs it, in the
                cgroup namespace ns: "host", or "private" in the burstable
                pod's cgroup.  /sys/fs/cgroup is the node's whole tree
                whatever the namespace: podman's -v, as kubelet's hostPath,
                is a recursive bind of the host's mounts (v1's controllers
                too)."""
                glob, ns_opts = [], ["--cgroupns=" + ns]
                if ns == "private":
                    # (podman's cgroupfs manager takes any directory as the parent)
                    glob = ["--cgroup-manager=cgroupfs"]
                    ns_opts.append("--cgroup-parent=" + dpod[len(cgroot):])
                return ["podman"] + glob + rt + ["run", "--rm"] + (["-d", "--name", name] if detach else []) + \
                    ul + ["--pid=host", "--network=none", "--cap-drop=all"] + \
                    ["--cap-add=" + x for x in caps] + ns_opts + [
                    "--security-opt=no-new-privileges", "--read-only",
                    "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro",
                    "-v", sockdir + ":/run/madvseq",
                    "-v", confdir + ":/etc/madvseq:ro",
                    "--memory=%s" % c["resources"]["limits"]["memory"].replace("Mi", "m"),
                    image] + list(args)

            def daemon_run(label, ns, extra_args=()):
                """The daemon in a container of ct_run().  Returns the
                victim's residency, whether the BestEffort pod's stream was
                dropped behind (by its pod_uid), and the daemon's log."""
                cmd = ct_run(ns, c["args"] + list(extra_args))
                print(" ".join(cmd))
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if r.returncode:
                    check(False, "podman run: %s" % r.stderr.strip())
                    done()
                try:
                    probe = ["podman"] + rt + ["exec", name] + c["livenessProbe"]["exec"]["command"]
                    for _ in range(100):
                        if subprocess.run(probe, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL).returncode == 0:
                            break
                        time.sleep(0.1)
                    st = subprocess.run(probe, stdout=subprocess.PIPE, text=True)
                    check(st.returncode == 0, "%s: the liveness probe's madvseqctl status answers" % label)
                    print("\n".join(st.stdout.splitlines()[:6]))
                    frac, rc = scenario(label)
                    check(rc == 0, "%s: the stream ran" % label)
                    out = podman("exec", name, "madvseqctl", "stats", "--format=prometheus").stdout
                    pods = [l for l in out.splitlines() if l.startswith("madvseq_pod_") and STREAM_UID in l]
                    print("\n".join(pods))
                    dropped = any(l.startswith("madvseq_pod_dropped_bytes_total") and not l.endswith(" 0")
                                  for l in pods)
                    logs = podman("logs", name).stderr
                    print("\n".join(l for l in logs.splitlines() if "cgroup namespace" in l))
                    return frac, dropped, logs
                finally:
                    podman("rm", "-f", "-t", "2", name)

            def resolve(pid, *extra):
                """--resolve in a container of its own with a private cgroup
                namespace (podman exec, through runc, does not join the
                container's cgroup namespace)."""
                r = subprocess.run(ct_run("private", c["args"] + list(extra) + ["--resolve", str(pid)],
                                          detach=False), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
                print("$ madvseqd %s--resolve %d (in a container, --cgroupns=private)\n%s%s"
                      % ("".join(x + " " for x in extra), pid, r.stderr, r.stdout))
                m = re.search(r"^pid \d+ cgroup (\S+) ", r.stdout, re.M)
                return (m.group(1) if m else ""), r.stdout

            alone, rc = scenario("kernel alone")
            check(rc == 0, "the stream ran with the kernel alone")

            under, dropped, logs = daemon_run("containerised madvseqd", "host")
            print("victim residency: %.4f under the containerised daemon, %.4f with the kernel alone"
                  % (under, alone))
            check(under >= 0.99, "the victim kept >= 0.99 of its file (%.4f)" % under)
            check(dropped, "the daemon dropped behind the BestEffort pod's stream, by its pod_uid")
            if under < 0.99:
                print(logs[-3000:])

            # A process that stays in the BestEffort pod's cgroup, for --resolve.
            sleeper = run_in(sdir, ["sleep", "600"], popen=True)
            host_path = sdir[len(cgroot):]
            under_ns, dropped, logs = daemon_run("private cgroup namespace", "private")
            print("victim residency: %.4f under the daemon in a private cgroup namespace, %.4f with the "
                  "kernel alone" % (under_ns, alone))
            check("entered the cgroup namespace of" in logs,
                  "private cgroup namespace: the daemon said it entered the node's")
            check(under_ns >= 0.99, "private cgroup namespace: the victim kept >= 0.99 of its file (%.4f)"
                  % under_ns)
            check(dropped, "private cgroup namespace: the daemon dropped behind the BestEffort pod's "
                  "stream, by its pod_uid")
            if under_ns < 0.99 or not dropped:
                print(logs[-3000:])
            fixed, out = resolve(sleeper.pid)
            own, out_own = resolve(sleeper.pid, "--own-cgroupns")
            check(fixed == host_path and ("pod %s qos besteffort" % STREAM_UID) in out,
                  "--resolve there names the pod's cgroup as the node sees it, and its pod")
            check(own.startswith("/..") and own != host_path and "pod " not in out_own,
                  "with --own-cgroupns it names a path relative to the container's own (%s), no pod" % own)

            # The step skipped: the stream's section is not matched, it is
            # not discovered, and the kernel alone decides.
            under_own, dropped, logs = daemon_run("private, --own-cgroupns", "private", ["--own-cgroupns"])
            print("victim residency: %.4f under the daemon kept in its own cgroup namespace "
                  "(--own-cgroupns), %.4f with the kernel alone" % (under_own, alone))
            check("warning: staying in this container's own cgroup namespace" in logs,
                  "--own-cgroupns: the daemon warned")
            check(not dropped, "--own-cgroupns: the BestEffort pod's stream was not managed")
    finally:
        podman("rm", "-f", "-t", "2", name)
        if sleeper:
            sleeper.kill()
            sleeper.wait()
        for t in made:
            rm_tree(t)
        cg.remove()
        podman("rmi", "-f", tag)
    done()


if __name__ == "__main__":
    main()

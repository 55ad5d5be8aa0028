#!/usr/bin/env python3
"""The madvseqd image (contrib/container/build-image.sh) run with podman as
the DaemonSet runs it: --pid=host, the DaemonSet's capabilities only, the
node's /sys/fs/cgroup read-only, the socket directory and the ConfigMap's
madvseqd.conf as volumes.  A victim pod's file is warmed and a BestEffort
pod streams a bigger file through a mapping (a static program: found by
discovery, as the ConfigMap says), both in a kubepods-shaped memory cgroup
tree made under this test's own cgroup; first with the kernel alone, then
under the containerised daemon.  The victim must keep >= 0.99 of its file.
Exits 77 where podman or debootstrap cannot run."""
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


def run_in(cgdir, argv, **kw):
    return subprocess.run(["sh", "-c", 'echo $$ > "$0"/cgroup.procs && exec "$@"', cgdir] + argv, **kw)


def main():
    if os.geteuid() != 0:
        skip("needs root (podman, debootstrap, memory cgroups)")
    static = os.environ.get("STREAMER_STATIC")
    if not static or not os.path.exists(static):
        skip("no static streamer (static linking unavailable)")
    t0 = time.time()
    b = subprocess.run([os.path.join(ROOT, "contrib", "container", "build-image.sh")],
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
    try:
        v1 = not cg.v2
        if v1:
            vict_parts = ("kubepods", "pod" + VICTIM_UID, "a1" * 32)
            strm_parts = ("kubepods", "besteffort", "pod" + STREAM_UID, "c3" * 32)
        else:
            vict_parts = ("kubepods.slice", "kubepods-pod%s.slice" % VICTIM_UID.replace("-", "_"),
                          "cri-containerd-%s.scope" % ("a1" * 32))
            strm_parts = ("kubepods.slice", "kubepods-besteffort.slice",
                          "kubepods-besteffort-pod%s.slice" % STREAM_UID.replace("-", "_"),
                          "cri-containerd-%s.scope" % ("c3" * 32))
        dirs = []
        for parts in (vict_parts, strm_parts):
            p = cg.path
            for x in parts:
                p = os.path.join(p, x)
                os.makedirs(p, exist_ok=True)
            dirs.append(p)
        vdir, sdir = dirs
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

            alone, rc = scenario("kernel alone")
            check(rc == 0, "the stream ran with the kernel alone")
            cmd = ["podman"] + rt + ["run", "-d", "--rm", "--name", name] + ul + [
                "--pid=host", "--network=none", "--cap-drop=all"] + \
                ["--cap-add=" + x for x in caps] + [
                "--security-opt=no-new-privileges", "--read-only",
                "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro",
                "-v", sockdir + ":/run/madvseq",
                "-v", confdir + ":/etc/madvseq:ro",
                "--memory=%s" % c["resources"]["limits"]["memory"].replace("Mi", "m"),
                image] + c["args"]
            print(" ".join(cmd))
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if r.returncode:
                check(False, "podman run: %s" % r.stderr.strip())
                done()
            probe = ["podman"] + rt + ["exec", name] + c["livenessProbe"]["exec"]["command"]
            for _ in range(100):
                if subprocess.run(probe, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
                    break
                time.sleep(0.1)
            st = subprocess.run(probe, stdout=subprocess.PIPE, text=True)
            check(st.returncode == 0, "the liveness probe's madvseqctl status answers")
            print("\n".join(st.stdout.splitlines()[:6]))
            under, rc = scenario("containerised madvseqd")
            check(rc == 0, "the stream ran under the containerised daemon")
            out = subprocess.run(["podman"] + rt + ["exec", name, "madvseqctl", "stats", "--format=prometheus"],
                                 stdout=subprocess.PIPE, text=True).stdout
            pods = [l for l in out.splitlines() if l.startswith("madvseq_pod_") and STREAM_UID in l]
            print("\n".join(pods))
            print("victim residency: %.4f under the containerised daemon, %.4f with the kernel alone"
                  % (under, alone))
            check(under >= 0.99, "the victim kept >= 0.99 of its file (%.4f)" % under)
            check(any(l.startswith("madvseq_pod_dropped_bytes_total") and not l.endswith(" 0") for l in pods),
                  "the daemon dropped behind the BestEffort pod's stream, by its pod_uid")
            if under < 0.99:
                print(subprocess.run(["podman"] + rt + ["logs", name], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True).stdout[-3000:])
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "2", name], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        rm_tree(os.path.join(cg.path, "kubepods" if not cg.v2 else "kubepods.slice"))
        cg.remove()
    done()


if __name__ == "__main__":
    main()

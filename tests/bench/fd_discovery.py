#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""fd-stream discovery (madvseqd, discover = yes) against the kernel alone:
real programs without the library next to a victim with a warm working set,
in one 1 GiB memory cgroup: the issue's shape, a fixed 5,000 4 KiB reads/s
with Zipf keys over a 768 MiB file, and a 4 GiB stream, so that the kernel
alone loses the victim.  Prints, per program: the victim's residency at
the lowest and at the end, its disk reads, the stream's speed, each as
madvseqd / kernel alone; how long a stream runs before the daemon finds it
(median, p95, MiB and ms); the daemon's CPU per GB/s of streams; and its CPU
while 1,000 idle processes with 100 descriptors each are watched.

Run as root from the build directory's parent:
  python3 tests/bench/fd_discovery.py [--build build] [--programs pv,busybox-cat]
The daemon's CPU is its /proc/PID/stat utime + stime, which a loaded
machine inflates less than wall-clock figures."""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "daemon"))
sys.path.insert(0, os.path.join(HERE, "..", "preload"))

M = 1 << 20
HZ = os.sysconf("SC_CLK_TCK")
VICTIM = 768 * M

# A service: 5,000 4 KiB preads/s, keys Zipf-distributed (s = 1) over its
# file's pages, the hot ones scattered through it.  Warmed with pread (its
# own reads, which no file position shows as a stream).
VICTIM_PY = r"""
import bisect, os, random, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
off = 0
while off < size:
    os.pread(fd, 1 << 20, off)
    off += 1 << 20
pages = size // 4096
rng = random.Random(1)
cdf, t = [], 0.0
for k in range(1, pages + 1):
    t += 1.0 / k
    cdf.append(t)
where = list(range(pages))
rng.shuffle(where)
print("warm", flush=True)
t0 = time.time(); n = 0
while True:
    for _ in range(25):
        k = bisect.bisect_left(cdf, rng.random() * t)
        os.pread(fd, 4096, where[min(k, pages - 1)] * 4096)
    n += 25
    d = t0 + n / 5000.0 - time.time()
    if d > 0:
        time.sleep(d)
"""


def cpu_s(pid):
    f = open("/proc/%d/stat" % pid).read()
    v = f[f.rindex(")") + 2:].split()
    return (int(v[11]) + int(v[12])) / HZ


def read_bytes(pid):
    for line in open("/proc/%d/io" % pid):
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return 0


def argv_for(name, wd, src, out):
    if name == "busybox-cat":
        return ["sh", "-c", 'busybox cat "$0" > "$1"', src, out]
    if name == "busybox-dd":
        return ["sh", "-c", 'busybox dd if="$0" of="$1" bs=1M 2>/dev/null', src, out]
    if name == "pv":
        return ["sh", "-c", 'pv -q "$0" > "$1"', src, out]
    if name == "rclone":
        os.makedirs(os.path.join(wd, "dst"), exist_ok=True)
        return ["rclone", "copy", "--config", "/dev/null", "--transfers", "1", os.path.dirname(src),
                os.path.join(wd, "dst")]
    if name == "restic":
        return ["restic", "--repo", os.path.join(wd, "repo"), "backup",
                os.path.dirname(src)]
    raise SystemExit("unknown program %s" % name)


def one_run(T, name, wd, src, vfile, cg, daemon):
    """One run; returns the figures."""
    from msqtest import cached, evict
    out = os.path.join(wd, "out")
    env = dict(os.environ, RESTIC_PASSWORD="x")
    if name == "restic":
        shutil.rmtree(os.path.join(wd, "repo"), ignore_errors=True)
        subprocess.run(["restic", "--repo", os.path.join(wd, "repo"), "init"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    shutil.rmtree(os.path.join(wd, "dst"), ignore_errors=True)
    if os.path.exists(out):
        os.unlink(out)
    evict(src)
    evict(vfile)
    victim = subprocess.Popen(cg.prefix() + ["python3", "-c", VICTIM_PY, vfile], stdout=subprocess.PIPE,
                              text=True)
    victim.stdout.readline()
    time.sleep(0.5)
    v0, rb0 = cached(vfile), read_bytes(victim.pid)
    low, stop = [v0], []

    def sample():
        while not stop:
            low[0] = min(low[0], cached(vfile))
            time.sleep(0.02)
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    found = []

    def watch():
        while not stop and daemon:
            js = daemon.ctl("stats", "--format=json", check_rc=False).stdout
            for line in js.splitlines():
                if '"kind":"fd"' in line and os.path.basename(src) in line:
                    # (One object a line; the last of a list is followed
                    # by the list's and the document's closing brackets.)
                    o, _ = json.JSONDecoder().raw_decode(line.strip().lstrip(",["))
                    found.append((o["found_at"], time.time() - o["found_ms_ago"] / 1000.0))
                    return
            time.sleep(0.01)
    tw = threading.Thread(target=watch, daemon=True)
    dcpu0 = cpu_s(daemon.pid) if daemon else 0
    t0 = time.time()
    tw.start()
    p = subprocess.run(cg.prefix() + argv_for(name, wd, src, out), env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    el = time.time() - t0
    dcpu = (cpu_s(daemon.pid) - dcpu0) if daemon else 0
    time.sleep(0.3)
    stop.append(1)
    th.join()
    tw.join(timeout=1)
    # What the program wrote, still cached a second after it ended (the
    # daemon drops the files a writer closed at its next looks).
    time.sleep(1.0)
    written = {"restic": os.path.join(wd, "repo"), "rclone": os.path.join(wd, "dst")}.get(name, out)
    left = sum(cached(os.path.join(r_, f)) for r_, _, fs in os.walk(written) for f in fs) \
        if os.path.isdir(written) else (cached(written) if os.path.exists(written) else 0)
    r = {"rc": p.returncode, "low": low[0] / v0, "end": cached(vfile) / v0,
         "disk": read_bytes(victim.pid) - rb0, "speed": os.path.getsize(src) / el, "cpu": dcpu,
         "secs": el, "left": left}
    if found:
        r["found_mib"] = found[0][0] / M
        r["found_ms"] = max(0.0, (found[0][1] - t0) * 1000)
    victim.kill()
    victim.wait()
    return r


def idle_cpu(T, wd, cg, secs=10, fast_scan=False):
    """The daemon's CPU while 1,000 sleeping processes with 100 open
    descriptors each are in its discover cgroup."""
    procs = []
    files = [T.__dict__["Workdir"] and os.path.join(wd, "small")]
    with open(files[0], "wb") as f:
        f.write(b"x" * 65536)
    # One process opens the 100 descriptors and forks the other 999, which
    # inherit them: 1,000 processes for the memory of a few (copy on write).
    code = ("import os,sys,time\nfds=[os.open(sys.argv[1],os.O_RDONLY) for _ in range(100)]\n"
            "for _ in range(999):\n    if os.fork() == 0:\n        time.sleep(3600); os._exit(0)\n"
            "time.sleep(3600)")
    # (The daemon's own intervals: the tests' conf_for makes the mmap
    # discovery's full scan come every 200 ms.)
    conf = T.conf_for(cg) if fast_scan else T.conf_for(cg).replace("discover_interval = 200ms\n", "")
    d = T.Daemon(wd, conf, name="idle")
    try:
        procs.append(subprocess.Popen(cg.prefix() + ["python3", "-c", code, files[0]],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True))
        time.sleep(15)  # started and asleep
        n = len(open(os.path.join(cg.path, "cgroup.procs")).read().split())
        print("idle: %d processes in the watched cgroup" % n)
        c0 = cpu_s(d.pid)
        time.sleep(secs)
        return (cpu_s(d.pid) - c0) / secs
    finally:
        for p in procs:
            os.killpg(p.pid, 9)
        for p in procs:
            p.wait()
        d.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--programs", default="busybox-cat,busybox-dd,pv,rclone,restic")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--stream-mib", type=int, default=4096)
    ap.add_argument("--no-idle", action="store_true")
    ap.add_argument("--pause-damon", action="store_true",
                    help="stop the host's DAMON pageout schemes for the run (they evict a warm "
                    "victim's tail, stream or not)")
    a = ap.parse_args()
    if a.pause_damon:
        from msqtest import damon_pageout_paused
        with damon_pageout_paused():
            return run(a)
    return run(a)


def run(a):
    b = os.path.abspath(a.build)
    os.environ.setdefault("MADVSEQD", os.path.join(b, "daemon", "madvseqd"))
    os.environ.setdefault("MADVSEQCTL", os.path.join(b, "daemon", "madvseqctl"))
    os.environ.setdefault("MADVSEQ_TEST_DIR", os.path.join(b, "tests", "daemon"))
    import test_fdstreams as T
    from msqtest import Cgroup, Workdir
    T.Workdir = Workdir
    rows, det, cpu_per = [], [], []
    with Workdir("fd-bench") as w:
        os.mkdir(os.path.join(w.path, "src"))
        src = w.file("src/stream", a.stream_mib * M)
        vfile = w.file("victim", VICTIM)
        for name in a.programs.split(","):
            if not shutil.which(name.split("-")[0]):
                print("%s: not installed, skipped" % name)
                continue
            res = {"kernel": [], "daemon": []}
            for i in range(a.runs):
                for v in ("kernel", "daemon"):
                    cg = Cgroup("fdb-%s-%s-%d" % (name, v, i), 1 << 30)
                    try:
                        d = T.Daemon(w.path, T.conf_for(cg), name="b%d" % i) if v == "daemon" else None
                        res[v].append(one_run(T, name, w.path, src, vfile, cg, d))
                        if d:
                            d.stop()
                    finally:
                        cg.remove()
            k = {x: statistics.median(r[x] for r in res["kernel"]) for x in ("low", "end", "disk", "speed", "left")}
            m = {x: statistics.median(r[x] for r in res["daemon"]) for x in ("low", "end", "disk", "speed", "left")}
            rows.append((name, k, m, [r["rc"] for r in res["kernel"] + res["daemon"]]))
            for v in ("kernel", "daemon"):
                for r in res[v]:
                    print("  %s %s: victim lowest %.1f%% end %.1f%%, disk reads %.1f MiB, stream %.0f MiB/s, "
                          "output cached %.0f MiB, daemon CPU %.2f s, exit %d"
                          % (name, v, 100 * r["low"], 100 * r["end"], r["disk"] / M, r["speed"] / M,
                             r["left"] / M, r["cpu"], r["rc"]), flush=True)
            for r in res["daemon"]:
                if "found_mib" in r:
                    det.append((r["found_mib"], r["found_ms"]))
                if r["cpu"] and r["secs"]:
                    cpu_per.append(r["cpu"] / r["secs"] / (r["speed"] / 1e9))
        print("\nvictim: %d MiB file, 5,000 Zipf 4 KiB preads/s, warm; stream %d MiB; 1 GiB memcg; "
              "median of %d runs; kernel alone / madvseqd (madvseqd x the kernel alone)"
              % (VICTIM // M, a.stream_mib, a.runs))
        print("| program | victim lowest | victim end | victim disk reads MiB | "
              "stream MiB/s | output cached at the end, MiB | exit codes |")
        print("|---|---|---|---|---|---|---|")
        for name, k, m, rcs in rows:
            ratio = (lambda x, y: "%.2fx" % (y / x) if x else "-")
            print("| %s | %.1f%% / %.1f%% (%s) | %.1f%% / %.1f%% (%s) | %.1f / %.1f (%s) | %.0f / %.0f (%s) | "
                  "%.0f / %.0f | %s |"
                  % (name, 100 * k["low"], 100 * m["low"], ratio(k["low"], m["low"]), 100 * k["end"],
                     100 * m["end"], ratio(k["end"], m["end"]), k["disk"] / M, m["disk"] / M,
                     ratio(k["disk"], m["disk"]),
                     k["speed"] / M, m["speed"] / M, ratio(k["speed"], m["speed"]),
                     k["left"] / M, m["left"] / M,
                     ",".join(str(x) for x in sorted(set(rcs)))))
        if det:
            mib = sorted(x[0] for x in det)
            ms = sorted(x[1] for x in det)
            p95 = lambda v: v[min(len(v) - 1, int(round(0.95 * (len(v) - 1))))]
            print("detection (%d streams): median %.0f MiB / %.0f ms, p95 %.0f MiB / %.0f ms "
                  "(position when first acted on; time from the program's start)"
                  % (len(det), statistics.median(mib), statistics.median(ms), p95(mib), p95(ms)))
        if cpu_per:
            print("daemon CPU per GB/s of discovered fd streams: median %.3f CPU (%.1f%% of a core; "
                  "utime + stime)" % (statistics.median(cpu_per), 100 * statistics.median(cpu_per)))
        if not a.no_idle:
            cg = Cgroup("fdb-idle", 8 << 30)
            try:
                for fast in (False, True):
                    c = idle_cpu(T, w.path, cg, fast_scan=fast)
                    print("daemon CPU with 1,000 idle processes x 100 fds watched: %.4f CPU (%.2f%% of a "
                          "core; utime + stime over 10 s; %s)"
                          % (c, 100 * c, "discover_interval = 200ms, the tests' config" if fast
                             else "the default intervals"), flush=True)
            finally:
                cg.remove()


if __name__ == "__main__":
    main()

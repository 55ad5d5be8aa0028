#!/usr/bin/env python3
"""pgbench select-only next to a backup of the whole cluster, in one memory
cgroup (see tests/bench/README.md).

A scratch PostgreSQL 15 cluster (initdb, pg_ctl; unix socket only, in a
private directory; small shared_buffers so that the page cache holds the
data) runs inside a memory cgroup with two databases: "bench", made by
pgbench -i and small enough to stay cached, and "cold", a much larger one
that only the backup reads.  The victim is `pgbench -S`; the stream is
`pg_basebackup` (its walsender, a server process, reads the files) or
`pg_dumpall` (server backends read the tables for COPY).

Variants: the libmadvseq and madvseqd rows preload the library into the
server (where the walsender and the backends read) and into the backup
client (which writes the copy); nocache wraps the same two; isolation runs
the client in a 64 MiB cgroup and moves the server processes that serve the
backup there as soon as they appear.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
from benchlib import MiB, log  # noqa: E402

PGBIN = "/usr/lib/postgresql/15/bin"


class Cluster:
    def __init__(self, h, a):
        self.h, self.a = h, a
        self.root = os.path.join(h.scratch, "pg")
        self.data = os.path.join(self.root, "data")
        self.sock = os.path.join(self.root, "sock")
        self.port = str(a.port)
        self.running = False
        os.makedirs(self.sock)
        shutil.chown(self.root, "postgres", "postgres")
        shutil.chown(self.sock, "postgres", "postgres")

    def pg(self, tool, *args, **kw):
        return [os.path.join(PGBIN, tool), "-h", self.sock, "-p", self.port, "-U", "postgres"] + list(args)

    def initdb(self):
        self.h.run([os.path.join(PGBIN, "initdb"), "-D", self.data, "-A", "trust", "-U", "postgres",
                    "--no-sync"], user="postgres")
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write("\n# benchmark cluster: unix socket only, data in the page cache\n"
                    "listen_addresses = ''\nunix_socket_directories = '%s'\nport = %s\n"
                    "shared_buffers = %s\nmax_wal_senders = 4\nfsync = off\n"
                    "synchronous_commit = off\nfull_page_writes = off\n"
                    "checkpoint_timeout = 1h\nmax_wal_size = 4GB\nautovacuum = off\n"
                    % (self.sock, self.port, self.a.shared_buffers))

    def start(self, env=None):
        argv = [os.path.join(PGBIN, "pg_ctl"), "-D", self.data, "-l",
                os.path.join(self.root, "server.log"), "-w", "-t", "300", "start"]
        self.h.run(argv, env=env, user="postgres")
        self.running = True
        self.postmaster = int(open(os.path.join(self.data, "postmaster.pid")).readline())

    def stop(self, mode="fast"):
        if self.running:
            subprocess.run([os.path.join(PGBIN, "pg_ctl"), "-D", self.data, "-m", mode, "-w", "stop"],
                           user="postgres", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.running = False

    def sql(self, db, q):
        return subprocess.run(self.pg("psql", "-d", db, "-Atc", q), capture_output=True,
                              text=True, check=True).stdout.strip()

    def children(self):
        """(pid, title) of the postmaster's children."""
        out = []
        for pid, st in B.proc_stats():
            try:
                if int(st.rsplit(")", 1)[1].split()[1]) != self.postmaster:
                    continue
                out.append((pid, open("/proc/%d/cmdline" % pid).read().replace("\0", " ").strip()))
            except (OSError, ValueError, IndexError):
                continue
        return out


class LineCounter:
    """Lines written so far to pgbench's transaction logs (its progress)."""

    def __init__(self, prefix):
        self.prefix, self.off, self.n = prefix, {}, 0

    def __call__(self):
        d = os.path.dirname(self.prefix)
        for fn in os.listdir(d):
            p = os.path.join(d, fn)
            if not p.startswith(self.prefix + "."):
                continue
            with open(p, "rb") as f:
                f.seek(self.off.get(p, 0))
                data = f.read()
            self.off[p] = self.off.get(p, 0) + len(data)
            self.n += data.count(b"\n")
        return self.n


def pgbench_result(prefix, t0_wall, t1_wall):
    """TPS and latency percentiles (ms) of the transactions that ended in
    [t0_wall, t1_wall], from pgbench's per-transaction logs."""
    lat = []
    d = os.path.dirname(prefix)
    for fn in os.listdir(d):
        p = os.path.join(d, fn)
        if not p.startswith(prefix + "."):
            continue
        for line in open(p):
            f = line.split()
            if len(f) < 6:
                continue
            end = int(f[4]) + int(f[5]) / 1e6
            if t0_wall <= end <= t1_wall:
                lat.append(int(f[2]) / 1000.0)
    if not lat:
        return None, (None, None, None)
    return len(lat) / (t1_wall - t0_wall), tuple(B.pct(lat, q) for q in (50, 99, 99.9))


def setup(h, a):
    c = Cluster(h, a)
    h.cleanups.append(lambda: c.stop("immediate"))
    log("initdb in %s" % c.data)
    c.initdb()
    c.start()
    h.run(c.pg("createdb", "bench"))
    h.run(c.pg("createdb", "cold"))
    log("pgbench -i -s %d bench (the victim's database)" % a.scale)
    h.run(c.pg("pgbench", "-i", "-q", "-s", str(a.scale), "bench"))
    log("pgbench -i -s %d -I dtG cold (read by the backup only)" % a.cold_scale)
    h.run(c.pg("pgbench", "-i", "-q", "-I", "dtG", "-s", str(a.cold_scale), "cold"))
    h.run(c.pg("psql", "-d", "bench", "-qc", "checkpoint"))
    c.bench_dir = os.path.join(c.data, "base", c.sql("bench", "select oid from pg_database where datname='bench'"))
    c.cold_dir = os.path.join(c.data, "base", c.sql("bench", "select oid from pg_database where datname='cold'"))
    # The victim's working set: the main forks of pgbench's tables and
    # indexes, which `pgbench -S` reads.  Not the rest of its database
    # directory: the system catalogs, free space and visibility maps (3 MiB
    # at scale 5) are read at connection time and never again, and the LRU
    # rightly reclaims them first under any policy.
    rels = c.sql("bench", "select pg_relation_filepath(oid) from pg_class "
                          "where relname like 'pgbench%' and relkind in ('r', 'i')").split()
    c.victim_rels = [os.path.join(c.data, r) for r in rels]
    c.stop()
    sz = lambda d: sum(os.path.getsize(f) for f in B.files_under([d]))  # noqa: E731
    log("cluster %s: bench %s, cold %s" % (B.fmt_bytes(sz(c.data)), B.fmt_bytes(sz(c.bench_dir)),
                                           B.fmt_bytes(sz(c.cold_dir))))
    c.cluster_bytes = sz(c.data)
    return c


def pin(pid, cpus):
    """Pins every thread of pid to cpus (a process that has gone: ignored)."""
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            os.sched_setaffinity(int(tid), cpus)
    except OSError:
        pass


def phase(h, a, c, kind, variant):
    res = {"variant": variant}
    tag = B.phase_tag(a, kind or "alone", variant)
    out = os.path.join(h.scratch, "backup")
    argv = env = None
    if kind == "basebackup":
        cmd = c.pg("pg_basebackup", "-D", out, "-X", "fetch", "-c", "fast")
    elif kind == "odirect":
        # What pg_basebackup reads: the cluster but its WAL (-X fetch
        # copies only the segments the backup needs).
        wal = os.path.join(c.data, "pg_wal") + os.sep
        cmd = B.odirect_copy_argv([f for f in B.files_under([c.data]) if not f.startswith(wal)], out)
    else:
        cmd = c.pg("pg_dumpall", "-f", out + ".sql")
    if kind:
        argv, env, why = h.wrap(variant, cmd, None, tag)
        if why:
            res["skip"] = why
            return res
        env["PGAPPNAME"] = "madvseq-backup"
    senv = None
    if variant in ("shim", "daemon", "nocache"):
        sargv, senv, _ = h.wrap(variant, ["x"], None, tag + "-server")
        if variant == "nocache":
            senv["LD_PRELOAD"] = _nocache_lib()
    subprocess.run(["rm", "-rf", out, out + ".sql"])
    hd = h.start_daemon(variant, tag)
    try:
        c.start(senv)
        for f in B.files_under([c.data]):
            B.evict(f)
        h.run(["sh", "-c", 'cat "$1"/* > /dev/null', "sh", c.bench_dir])
        bench_files = B.files_under([c.bench_dir])
        victim_files = [f for f in bench_files
                        if any(f == r or f.startswith(r + ".") for r in c.victim_rels)]
        res["victim_bytes"] = B.cached_sum(victim_files)
        prefix = os.path.join(a.log_dir, tag + ".pgbench")
        vargs = c.pg("pgbench", "-S", "-n", "-c", str(a.clients), "-j", "1", "-T", "3600",
                     "-l", "--log-prefix", prefix, "bench")
        log("phase %s %s" % (kind or "", B.LABELS[variant]))
        verr = open(os.path.join(a.log_dir, tag + ".pgbench.stderr"), "w")
        v = h.spawn(vargs, stderr=verr, cpus=a.victim_cpus)
        counter = LineCounter(prefix)
        B.wait_ready(counter, v)    # connected, past its first transactions
        victim_backends = {p for p, _ in c.children()}
        if a.victim_cpus:
            # The backends serving pgbench run with it; the server's own
            # processes (checkpointer, walwriter, ...) where they like.
            for pid, title in c.children():
                if "[local]" in title:
                    pin(pid, a.victim_cpus)
        m = B.Meter(h)
        smp = B.Sampler(h, victim_files, [c.data, out, out + ".sql"], counter,
                        a.sample_ms / 1000.0, exclude=bench_files)
        m.start()
        smp.start()
        t0, w0 = time.monotonic(), time.time()
        moved = set()
        if argv:
            errp = os.path.join(a.log_dir, tag + ".stderr")
            with open(errp, "w") as err:
                # The client writes the copy: on the stream's CPUs, as
                # every other benchmark's stream (benchlib.finish_args).
                s = h.spawn(argv, env=env, cg=h.stream_cg(variant), cpus=a.stream_cpus,
                            stderr=err)
                while s.poll() is None:
                    # The server reads for the backup: its walsender or the
                    # backends pg_dumpall talks to.  They run on the
                    # stream's CPUs, and in the isolation variant in the
                    # stream's cgroup.
                    for pid, title in c.children():
                        if pid in moved or pid in victim_backends:
                            continue
                        if "walsender" in title or "[local]" in title:
                            try:
                                if variant == "isolation":
                                    h.iso.enter(pid)
                                if a.stream_cpus:
                                    pin(pid, a.stream_cpus)
                                moved.add(pid)
                            except OSError:
                                pass
                    time.sleep(0.05)
            if s.returncode:
                raise RuntimeError("%s exited %d: %s" % (kind, s.returncode, open(errp).read()[-500:]))
        else:
            time.sleep(a.alone_seconds)
        t1, w1 = time.monotonic(), time.time()
        res["samples"] = smp.stop()
        res["meter"] = m.stop()
        v.send_signal(signal.SIGINT)
        v.wait(timeout=30)
        verr.close()
        if argv and a.cpu_phase and variant in B.CPU_VARIANTS and kind != "odirect":
            def prepare():
                subprocess.run(["rm", "-rf", out, out + ".sql"])
                for f in B.files_under([c.data]):
                    if not f.startswith(c.bench_dir + os.sep):
                        B.evict(f)

            sa = h.stream_alone(variant, argv, env, tag, kind, h.scratch, prepare)
            sa_bytes = sum(os.path.getsize(f) for f in B.files_under([out, out + ".sql"]))
            res["stream_alone"], res["stream_alone_bytes"] = sa, sa_bytes
    finally:
        h.kill_all()
        c.stop()
        h.stop_daemon(hd)
    tps, lat = pgbench_result(prefix, w0, w1)
    if tps is None:
        raise RuntimeError("pgbench logged nothing: %s" % open(verr.name).read()[-500:])
    bytes_out = sum(os.path.getsize(f) for f in B.files_under([out, out + ".sql"])) if argv else None
    res.update({"victim_thr": tps, "lat": lat, "stream_s": t1 - t0,
                "stream_bytes": bytes_out, "moved": len(moved)})
    if variant in ("shim", "daemon"):
        res["shim_stats"] = h.shim_stats(tag) or None
        res["server_stats"] = h.shim_stats(tag + "-server") or None
    res["out_cached_end"] = B.cached_sum(B.files_under([out, out + ".sql"])) if argv else None
    subprocess.run(["rm", "-rf", out, out + ".sql"])
    log("  pgbench %.0f TPS p99 %.2fms%s" % (tps, lat[1], ", backup %s in %.1fs" % (
        B.fmt_bytes(bytes_out), t1 - t0) if argv else ""))
    return res


def _nocache_lib():
    for p in ("/usr/lib/x86_64-linux-gnu/nocache/nocache.so", "/usr/lib/nocache/nocache.so"):
        if os.path.exists(p):
            return p
    out = subprocess.run(["sh", "-c", "dpkg -L nocache | grep 'nocache.so$' | head -1"],
                         capture_output=True, text=True).stdout.strip()
    return out


def body(h, a):
    c = setup(h, a)
    odirect, allres = B.repeated_phases(a, lambda kind, v: phase(h, a, c, kind, v), a.backups)
    for kind, res in allres:
        print()
        what = "pg_basebackup -X fetch (the walsender reads)" if kind == "basebackup" else \
            "pg_dumpall -f FILE (backends read for COPY)"
        print("pg_backup: %s of a %s cluster next to pgbench -S -c %d on a warm scale-%d database; "
              "cgroup %s, shared_buffers %s; stream GB = backup output; "
              "stream's files = the cluster but the victim's database, and the output" % (
                  what, B.fmt_bytes(c.cluster_bytes), a.clients, a.scale, B.fmt_bytes(a.limit),
                  a.shared_buffers))
        B.report(res, "TPS", "ms", thr_target=(0.9, "pgbench TPS"), odirect=odirect,
                 note="O_DIRECT reference (the cluster but its WAL, %s, read and written "
                 "with O_DIRECT): pgbench %.0f TPS, p99 %.2f ms, stream %.0f MB/s\n" % (
                     B.fmt_bytes(odirect["stream_bytes"]), odirect["victim_thr"], odirect["lat"][1],
                     odirect["stream_bytes"] / odirect["stream_s"] / 1e6) +
                 "backup output cached at the end: " + ", ".join(
                     "%s %s" % (B.LABELS[r["variant"]], B.fmt_bytes(r.get("out_cached_end")))
                     for r in res if not r.get("skip") and r.get("stream_bytes")))
        if a.png:
            root, ext = os.path.splitext(a.png)
            path = a.png if len(a.backups) == 1 else "%s-%s%s" % (root, kind, ext or ".png")
            B.plot(res, path, "pgbench -S while %s copies the cluster, cgroup %s" % (
                "pg_basebackup" if kind == "basebackup" else "pg_dumpall", B.fmt_bytes(a.limit)), "TPS")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    B.add_common_args(ap, 384 * MiB, "small cluster, pg_basebackup only (~3 minutes)")
    ap.add_argument("--backups", default=None, help="basebackup,dump (default both; quick basebackup)")
    ap.add_argument("--scale", type=int, default=None, help="pgbench scale of the victim's database (10; quick 5)")
    ap.add_argument("--cold-scale", type=int, default=None,
                    help="pgbench scale of the cold database (150 = ~2.2 GB; quick 40)")
    ap.add_argument("--clients", type=int, default=2, help="pgbench clients (2)")
    ap.add_argument("--shared-buffers", default="16MB", help="server shared_buffers (16MB)")
    ap.add_argument("--port", type=int, default=5400 + os.getpid() % 1000,
                    help="port number (names the unix socket; no TCP)")
    ap.add_argument("--alone-seconds", type=int, default=None, help="pgbench alone (15; quick 8)")
    a = ap.parse_args()
    q = a.quick
    if q and a.limit == 384 * MiB:
        a.limit = 256 * MiB
    a.backups = [k for k in (a.backups or ("basebackup" if q else "basebackup,dump")).split(",") if k]
    for k in a.backups:
        if k not in ("basebackup", "dump"):
            raise SystemExit("unknown backup %r" % k)
    a.scale = a.scale or (5 if q else 10)
    a.cold_scale = a.cold_scale or (40 if q else 150)
    a.alone_seconds = a.alone_seconds or (8 if q else 15)
    if not os.path.exists(os.path.join(PGBIN, "postgres")):
        raise SystemExit("needs postgresql-15 (scripts/bench-deps.sh)")
    B.finish_args(a)
    return B.main_wrapper(a, "pg", lambda h: body(h, a))


if __name__ == "__main__":
    sys.exit(main())

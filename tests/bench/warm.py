#!/usr/bin/env python3
"""Warm working sets at a fixed request rate next to a stream, in one memory
cgroup (see tests/bench/README.md, "warm.py").

A victim serves a fixed rate of requests whose keys follow a Zipf law, over
a working set that fills most of the cgroup and is fully cached at the
start: a hot head it touches all the time and a long tail it touches now
and then.  Next to it a stream (a backup, an archive, a scan) reads far more
than the cgroup holds.  Every LRU keeps a hot set; the tail of a warm one is
what a stream takes.  Victims (--victim):

  pread   a Python service making 4 KiB pread()s over one file
  pg      PostgreSQL 15, pgbench --rate with random_zipfian keys
  kv      LevelDB (python3-plyvel) GETs with Zipf 0.99 keys (YCSB-C)
  nginx   Debian's nginx over many small files, Zipf popularity, driven by
          a fixed-rate HTTP client of this script's own

Each phase warms the working set from inside the cgroup, starts the victim,
runs the stream to its end in one variant, then keeps the victim running
for --after seconds: what it costs to fetch back what it lost.
"""

import argparse
import array
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
import interference as I  # noqa: E402
from benchlib import GiB, KiB, MiB, log  # noqa: E402

VARIANTS = ["kernel", "nocache", "isolation", "shim", "daemon", "discovery"]
B.LABELS.update({"shim": "madvseq run", "daemon": "madvseqd registered",
                 "discovery": "madvseqd discovery"})
MANAGED = ("shim", "daemon", "discovery")

# The targets of the warm scenario, for the rows with libmadvseq or madvseqd.
TARGETS = {"resident": 0.99, "disk_vs_kernel": 0.02, "p99_vs_odirect": 1.2,
           "stream_vs_kernel": 0.98, "cpu_vs_kernel": 1.00}

# --------------------------------------------------------------------------
# The fixed-rate victim for the pread and kv kinds.  Keys are ranks of a
# Zipf law mapped to places by a fixed permutation, so that the hot head is
# spread over the whole working set (and is the same in every phase), not
# packed into its first pages.  Requests are due at a fixed rate; one that
# falls behind is made at once (the backlog a real queue would hold).  At
# SIGINT it writes, per request, its end (wall clock) and its service time
# in microseconds.  Progress goes to a file every 256 requests.
VICTIM = r"""
import signal
stop = []
signal.signal(signal.SIGINT, lambda s, f: stop.append(1))
import array, itertools, os, random, sys, time
kind, target, nkeys, theta, rate, prog, out = sys.argv[1:8]
nkeys, theta, rate = int(nkeys), float(theta), float(rate)
rnd = random.Random(26)
perm = list(range(nkeys))
rnd.shuffle(perm)
cdf = list(itertools.accumulate(1.0 / (i + 1) ** theta for i in range(nkeys)))
rnd = random.Random()
if kind == "pread":
    fd = os.open(target, os.O_RDONLY | os.O_CLOEXEC)
    pread = os.pread
    def op(k):
        if len(pread(fd, 4096, k * 4096)) != 4096:
            raise SystemExit("short read at page %d" % k)
else:
    import plyvel
    db = plyvel.DB(target)
    get = db.get
    def op(k):
        if get(b"key%012d" % k) is None:
            raise SystemExit("key %d missing" % k)
pf = os.open(prog, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
ends, lats = array.array("d"), array.array("d")
clock, sleep = time.monotonic, time.sleep
step = 1.0 / rate
nxt = clock()
keys = []
n = 0
while not stop:
    now = clock()
    if now < nxt:
        sleep(nxt - now)
        continue
    if not keys:
        keys = rnd.choices(perm, cum_weights=cdf, k=4096)
    k = keys.pop()
    t = clock()
    op(k)
    e = clock()
    ends.append(e)
    lats.append((e - t) * 1e6)
    nxt += step
    n += 1
    if n % 256 == 0:
        os.pwrite(pf, b"%14d\n" % n, 0)
off = time.time() - clock()
ends = array.array("d", (x + off for x in ends))
with open(out, "wb") as f:
    array.array("d", [len(ends)]).tofile(f)
    ends.tofile(f)
    lats.tofile(f)
"""


def read_latencies(path):
    """(ends, latencies in us) written by VICTIM or the HTTP client."""
    with open(path, "rb") as f:
        n = array.array("d")
        n.fromfile(f, 1)
        n = int(n[0])
        ends, lats = array.array("d"), array.array("d")
        ends.fromfile(f, n)
        lats.fromfile(f, n)
    return list(zip(ends, lats))


def window(recs, w0, w1):
    lat = [l for e, l in recs if w0 <= e <= w1]
    if not lat:
        return 0, (None, None, None)
    return len(lat), tuple(B.pct(lat, q) for q in (50, 99, 99.9))


def io_read_bytes(pids):
    """Bytes the processes made the kernel read from storage so far
    (/proc/PID/io read_bytes: the block reads submitted in their context,
    readahead and page faults included): their page-cache misses."""
    tot = 0
    for p in pids:
        try:
            for line in open("/proc/%d/io" % p):
                if line.startswith("read_bytes:"):
                    tot += int(line.split()[1])
        except OSError:
            pass
    return tot


def write_data(path, size):
    """size bytes of incompressible data, fast: one random MiB with a
    counter in its first bytes, so that no two MiB are the same."""
    blk = bytearray(os.urandom(MiB))
    with open(path, "wb") as f:
        for i in range(size // MiB):
            blk[:8] = i.to_bytes(8, "little")
            f.write(blk)
        f.write(os.urandom(size % MiB))
        os.fsync(f.fileno())
    B.evict(path)


class Stream:
    """One stream kind: argv(out) for a run writing its output (if any) to
    out, the paths it reads, whether it maps with MADV_SEQUENTIAL (what
    discovery finds) and the bytes it reads."""

    def __init__(self, what, argv, paths, nbytes, mmap=False):
        self.what, self.argv, self.paths, self.nbytes, self.mmap = what, argv, paths, nbytes, mmap


# The mmap stream: Python through a MADV_SEQUENTIAL mapping, 1 MiB slices
# copied into a buffer through a memoryview (loader.py's, as training-data
# loaders read).
MMAP_STREAM = r"""
import mmap, os, sys
buf = bytearray(1 << 20)
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    n = os.fstat(fd).st_size
    m = mmap.mmap(fd, n, prot=mmap.PROT_READ)
    m.madvise(mmap.MADV_SEQUENTIAL)
    with memoryview(m) as mv:
        for off in range(0, n, 1 << 20):
            with mv[off:off + (1 << 20)] as chunk:
                buf[:len(chunk)] = chunk
    m.close()
    os.close(fd)
"""


# --------------------------------------------------------------------------
# Victims.  Each knows its data, its working set's files, how to start and
# stop itself, the processes whose disk reads are its own, and its streams.

class PreadVictim:
    name, unit = "pread", "req/s"

    def __init__(self, h, a):
        self.h, self.a = h, a
        d = os.path.join(h.scratch, "data")
        os.makedirs(d)
        self.file = os.path.join(d, "victim.dat")
        self.src = os.path.join(d, "src")
        os.makedirs(self.src)
        self.sfile = os.path.join(self.src, "stream.dat")
        log("writing the victim's %s and the stream's %s" % (B.fmt_bytes(a.ws_size),
                                                            B.fmt_bytes(a.stream_size)))
        write_data(self.file, a.ws_size)
        write_data(self.sfile, a.stream_size)
        self.ws_files = [self.file]
        self.exclude = ()
        n, k = a.stream_size * a.passes, a.passes
        times = " x%d" % k if k > 1 else ""
        self.streams = {
            "tar": Stream("tar -cf - | wc -c" + times, lambda out: [
                "sh", "-c", 'for i in $(seq "$2"); do tar -cf - -C "$1" stream.dat | wc -c; done '
                '> /dev/null', "sh", self.src, str(k)], [self.src], n),
            "mmap": Stream("Python mmap + MADV_SEQUENTIAL" + times, lambda out: [
                sys.executable, "-c", MMAP_STREAM] + [self.sfile] * k, [self.src], n, mmap=True),
        }
        self.odirect = Stream("dd iflag=direct" + times, lambda out: [
            "sh", "-c", 'for i in $(seq "$2"); do dd if="$1" of=/dev/null bs=1M iflag=direct '
            'status=none; done', "sh", self.sfile, str(k)], [self.src], n)
        self.describe = "a Python service making %d 4 KiB pread()/s, Zipf(%.2f) over a %s file" % (
            a.rate, a.theta, B.fmt_bytes(a.ws_size))

    def start(self, variant, tag, senv):
        for f in (self.file, self.sfile):
            B.evict(f)
        self.h.run(["cat", self.file])          # charged to the cgroup that reads it
        self.prog = os.path.join(self.a.shm, "victim.progress")
        self.progress = B.progress_counter(self.prog)
        self.out = os.path.join(self.a.log_dir, tag + ".victim.lat")
        self.err = open(os.path.join(self.a.log_dir, tag + ".victim.stderr"), "w")
        self.proc = self.h.spawn([sys.executable, "-c", VICTIM, "pread", self.file,
                                  str(self.a.ws_size // 4096), str(self.a.theta), str(self.a.rate),
                                  self.prog, self.out], stderr=self.err, cpus=self.a.victim_cpus)
        B.wait_ready(self.progress, self.proc)
        self.pids = [self.proc.pid]

    def run_stream(self, variant, argv, env, tag, what):
        self.h.stream(variant, argv, env, tag, what)

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        self.err.close()
        if not os.path.exists(self.out):
            raise RuntimeError("victim wrote no result: %s" % open(self.err.name).read()[-500:])
        return read_latencies(self.out)

    def end_phase(self):
        pass

    def clean_output(self, out):
        subprocess.run(["rm", "-rf", out])


# The PostgreSQL victim: point SELECTs on pgbench_accounts at a fixed rate,
# keys from random_zipfian spread over the table by permute() (the hot rows
# would otherwise share a few pages at the table's start).
PG_SCRIPT = """\\set r random_zipfian(1, :naccounts, :theta)
\\set aid permute(:r - 1, :naccounts) + 1
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
"""


def pgbench_records(prefix):
    """(end, latency us) of every transaction in pgbench's logs (with
    --rate the latency leaves the schedule lag out: the service time)."""
    out = []
    d = os.path.dirname(prefix)
    for fn in os.listdir(d):
        p = os.path.join(d, fn)
        if not p.startswith(prefix + "."):
            continue
        for line in open(p):
            f = line.split()
            if len(f) >= 6 and f[2].isdigit():
                out.append((int(f[4]) + int(f[5]) / 1e6, float(f[2])))
    return out


class PgVictim:
    """pgbench --rate over a scratch PostgreSQL 15 cluster (pg_backup.py's),
    shared_buffers small so that the page cache holds the data.  Its
    working set: pgbench_accounts and its primary key.  Streams:
    pg_basebackup (the walsender reads the cluster), pg_dumpall (backends
    read the tables for COPY), tar of an unrelated directory.  The cluster
    holds a database "cold" that only the backups read."""
    name, unit = "pg", "tx/s"

    def __init__(self, h, a):
        import pg_backup as PG
        self.PG, self.h, self.a = PG, h, a
        c = self.c = PG.Cluster(h, a)
        h.cleanups.append(lambda: c.stop("immediate"))
        log("initdb in %s" % c.data)
        c.initdb()
        c.start()
        h.run(c.pg("createdb", "bench"))
        h.run(c.pg("createdb", "cold"))
        log("pgbench -i -s %d bench (the victim's database)" % a.scale)
        h.run(c.pg("pgbench", "-i", "-q", "-I", "dtGvp", "-s", str(a.scale), "bench"))
        log("pgbench -i -s %d cold (read by the backups only)" % a.cold_scale)
        h.run(c.pg("pgbench", "-i", "-q", "-I", "dtG", "-s", str(a.cold_scale), "cold"))
        h.run(c.pg("psql", "-d", "bench", "-qc", "checkpoint"))
        oid = c.sql("bench", "select oid from pg_database where datname='bench'")
        self.bench_dir = os.path.join(c.data, "base", oid)
        rels = c.sql("bench", "select pg_relation_filepath(oid) from pg_class where relname in "
                              "('pgbench_accounts', 'pgbench_accounts_pkey')").split()
        c.stop()
        files = B.files_under([self.bench_dir])
        rels = [os.path.join(c.data, r) for r in rels]
        self.ws_files = [f for f in files if any(f == r or f.startswith(r + ".") for r in rels)]
        self.bench_files = files
        self.exclude = files
        self.naccounts = a.scale * 100000
        self.src = os.path.join(h.scratch, "tree")
        os.makedirs(self.src)
        log("writing %s of unrelated files for tar" % B.fmt_bytes(a.stream_size))
        for i in range(max(1, a.stream_size // (64 * MiB))):
            write_data(os.path.join(self.src, "f%03d" % i), 64 * MiB)
        self.script = os.path.join(h.scratch, "zipf.sql")
        with open(self.script, "w") as f:
            f.write(PG_SCRIPT)
        os.chmod(h.scratch, 0o755)
        wal = os.path.join(c.data, "pg_wal") + os.sep
        self.cluster = [f for f in B.files_under([c.data]) if not f.startswith(wal)]
        ws = sum(os.path.getsize(f) for f in self.ws_files)
        cl = sum(os.path.getsize(f) for f in self.cluster)
        log("working set %s (accounts + pkey), cluster %s" % (B.fmt_bytes(ws), B.fmt_bytes(cl)))
        outsize = lambda out: sum(os.path.getsize(f) for f in B.files_under(  # noqa: E731
            [out, out + ".sql", out + ".tar"]))
        self.streams = {
            "basebackup": Stream("pg_basebackup -X fetch", lambda out: c.pg(
                "pg_basebackup", "-D", out, "-X", "fetch", "-c", "fast"), [c.data], outsize),
            "dump": Stream("pg_dumpall -f FILE", lambda out: c.pg("pg_dumpall", "-f", out + ".sql"),
                           [c.data], outsize),
            "tar": Stream("tar -cf of an unrelated directory", lambda out: [
                "tar", "-cf", out + ".tar", "-C", self.src, "."], [self.src], a.stream_size),
        }
        self.odirect = Stream("O_DIRECT copy of the cluster but its WAL", lambda out: B.odirect_copy_argv(
            self.cluster, out), [c.data], cl)
        self.describe = ("pgbench --rate %d, %d clients, random_zipfian(%.2f) point SELECTs over "
                         "%s of pgbench_accounts + pkey (scale %d), shared_buffers %s" % (
                             a.rate, a.clients, a.theta, B.fmt_bytes(ws), a.scale, a.shared_buffers))

    def start(self, variant, tag, senv):
        c, h, a = self.c, self.h, self.a
        if variant == "nocache" and senv is not None:
            senv["LD_PRELOAD"] = self.PG._nocache_lib()
        c.start(senv)
        for f in B.files_under([c.data, self.src]):
            B.evict(f)
        h.run(["sh", "-c", 'cat "$1"/* > /dev/null', "sh", self.bench_dir])
        self.prefix = os.path.join(a.shm, tag + ".pgbench")
        self.err = open(os.path.join(a.log_dir, tag + ".pgbench.stderr"), "w")
        self.proc = h.spawn(c.pg("pgbench", "-n", "-c", str(a.clients), "-j", "1", "-R", "%g" % a.rate,
                                 "-T", "3600", "-f", self.script, "-D", "naccounts=%d" % self.naccounts,
                                 "-D", "theta=%g" % a.theta, "-l", "--log-prefix", self.prefix, "bench"),
                            stderr=self.err, cpus=a.victim_cpus)
        self.progress = self.PG.LineCounter(self.prefix)
        B.wait_ready(self.progress, self.proc)
        self.pids = [p for p, t in c.children() if "[local]" in t]
        if a.victim_cpus:
            for p in self.pids:
                self.PG.pin(p, a.victim_cpus)

    def run_stream(self, variant, argv, env, tag, what):
        """The backup client on the stream's CPUs (in the isolation variant
        in the stream's cgroup), and so are the server processes that read
        for it, the walsender or pg_dumpall's backends, as they appear."""
        h, a, c = self.h, self.a, self.c
        env = dict(env, PGAPPNAME="madvseq-backup")
        errp = os.path.join(a.log_dir, tag + ".stderr")
        moved = set(self.pids)
        with open(errp, "w") as err:
            s = h.spawn(argv, env=env, cg=h.stream_cg(variant), cpus=a.stream_cpus, stderr=err)
            while s.poll() is None:
                for pid, title in c.children():
                    if pid not in moved and ("walsender" in title or "[local]" in title):
                        try:
                            if variant == "isolation":
                                h.iso.enter(pid)
                            if a.stream_cpus:
                                self.PG.pin(pid, a.stream_cpus)
                            moved.add(pid)
                        except OSError:
                            pass
                time.sleep(0.05)
        if s.returncode:
            raise RuntimeError("%s exited %d: %s" % (what, s.returncode, open(errp).read()[-500:]))

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        self.err.close()
        recs = pgbench_records(self.prefix)
        for fn in os.listdir(self.a.shm):
            if fn.startswith(os.path.basename(self.prefix) + "."):
                os.unlink(os.path.join(self.a.shm, fn))
        if not recs:
            raise RuntimeError("pgbench logged nothing: %s" % open(self.err.name).read()[-500:])
        return recs

    def end_phase(self):
        self.c.stop()

    def clean_output(self, out):
        subprocess.run(["rm", "-rf", out, out + ".sql", out + ".tar"])


# The KV store: LevelDB through python3-plyvel.  The victim's keys
# ("key" + 12 digits, --value-size bytes each) come first in key order;
# "zcold" keys (64 KiB values) after them are data the victim never
# reads, there so that a scan of the whole store reads more than the
# cgroup holds.
KV_BUILD = r"""
import os, sys
import plyvel
db_path, nkeys, vsize, cold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
db = plyvel.DB(db_path, create_if_missing=True, compression=None)
blk = os.urandom(1 << 20)
def val(i, n):
    o = (i * 7919) % ((1 << 20) - n)
    return blk[o:o + n]
for i in range(0, nkeys, 4000):
    with db.write_batch() as wb:
        for k in range(i, min(nkeys, i + 4000)):
            wb.put(b"key%012d" % k, val(k, vsize))
for i in range(0, cold, 200):
    with db.write_batch() as wb:
        for k in range(i, min(cold, i + 200)):
            wb.put(b"zcold%010d" % k, os.urandom(65536))
db.compact_range()
db.close()
"""

# Which table files hold the victim's keys: read its key range once from
# cold files; the files that got cached are its working set.
KV_HOT = r"""
import sys
import plyvel
db = plyvel.DB(sys.argv[1])
for _ in db.iterator(stop=b"key%012d" % int(sys.argv[2]), fill_cache=False):
    pass
db.close()
"""

# GET-SCAN: a second process iterates over the whole store.  LevelDB lets
# one process open a database; the scan opens a directory of hard links to
# the same table files (the same inodes, so the same page cache) with its
# own copy of the metadata.
KV_SCAN = r"""
import sys
import plyvel
db = plyvel.DB(sys.argv[1])
n = 0
for k, v in db.iterator(fill_cache=False):
    n += len(v)
db.close()
"""


class KvVictim:
    """GETs at a fixed rate with Zipf keys (YCSB-C) on a warm LevelDB
    store.  LevelDB maps its table files: a GET that misses the page cache
    is a major fault.  Streams: tar and rsync -a of the store's directory
    (a backup), and a scan of the whole store by a second process."""
    name, unit = "kv", "GET/s"

    def __init__(self, h, a):
        self.h, self.a = h, a
        self.src = os.path.join(h.scratch, "src")
        self.db = os.path.join(self.src, "db")
        os.makedirs(self.src)
        self.nkeys = a.ws_size // (a.value_size + 40)
        cold = a.stream_size // 65536
        log("building LevelDB %s: %d keys of %d bytes for the victim, %s the victim never reads" % (
            self.db, self.nkeys, a.value_size, B.fmt_bytes(cold * 65536)))
        h.run([sys.executable, "-c", KV_BUILD, self.db, str(self.nkeys), str(a.value_size), str(cold)])
        subprocess.run(["sync"])
        tables = [f for f in B.files_under([self.db]) if f.endswith((".ldb", ".sst"))]
        for f in tables:
            B.evict(f)
        h.run([sys.executable, "-c", KV_HOT, self.db, str(self.nkeys)])
        self.ws_files = [f for f in tables if B.cached_bytes(f) > 0]
        for f in tables:
            B.evict(f)
        self.exclude = ()
        self.scan_dir = os.path.join(h.scratch, "scan")
        os.makedirs(self.scan_dir)
        for f in os.listdir(self.db):
            p = os.path.join(self.db, f)
            if f.endswith((".ldb", ".sst")):
                os.link(p, os.path.join(self.scan_dir, f))
            elif f == "CURRENT" or f.startswith("MANIFEST-") or f.endswith(".log"):
                shutil.copy(p, os.path.join(self.scan_dir, f))
        ws = sum(os.path.getsize(f) for f in self.ws_files)
        total = sum(os.path.getsize(f) for f in tables)
        log("store %s in %d tables, the victim's %s in %d" % (
            B.fmt_bytes(total), len(tables), B.fmt_bytes(ws), len(self.ws_files)))
        n = sum(os.path.getsize(f) for f in B.files_under([self.src]))
        self.streams = {
            "tar": Stream("tar -cf of the store's directory", lambda out: [
                "tar", "-cf", out + ".tar", "-C", self.src, "."], [self.src], n),
            "rsync": Stream("rsync -a of the store's directory", lambda out: [
                "rsync", "-a", self.src + "/", out + "/"], [self.src], n),
            "scan": Stream("a second process iterating over the whole store (GET-SCAN)", lambda out: [
                sys.executable, "-c", KV_SCAN, self.scan_dir], [self.src], total),
        }
        self.odirect = Stream("O_DIRECT copy of the store's directory", lambda out: B.odirect_copy_argv(
            B.files_under([self.src]), out), [self.src], n)
        self.describe = "%d GET/s, Zipf(%.2f) keys, on a %s LevelDB store (the victim's part %s)" % (
            a.rate, a.theta, B.fmt_bytes(total), B.fmt_bytes(ws))

    def start(self, variant, tag, senv):
        for f in B.files_under([self.src]):
            B.evict(f)
        self.h.run(["cat"] + self.ws_files)
        self.prog = os.path.join(self.a.shm, "victim.progress")
        self.progress = B.progress_counter(self.prog)
        self.out = os.path.join(self.a.log_dir, tag + ".victim.lat")
        self.err = open(os.path.join(self.a.log_dir, tag + ".victim.stderr"), "w")
        self.proc = self.h.spawn([sys.executable, "-c", VICTIM, "kv", self.db, str(self.nkeys),
                                  str(self.a.theta), str(self.a.rate), self.prog, self.out],
                                 stderr=self.err, cpus=self.a.victim_cpus)
        B.wait_ready(self.progress, self.proc)
        self.pids = [self.proc.pid]

    run_stream = PreadVictim.run_stream
    stop = PreadVictim.stop
    end_phase = PreadVictim.end_phase

    def clean_output(self, out):
        subprocess.run(["rm", "-rf", out, out + ".tar"])


# The web server's client: one keep-alive HTTP/1.1 connection, GETs due at
# a fixed rate, URLs drawn from a Zipf law over the files (ranks mapped to
# files by a fixed permutation).  Its latency is from the request's send
# to the last byte of the response.  Output as VICTIM's.
HTTP_CLIENT = r"""
import signal
stop = []
signal.signal(signal.SIGINT, lambda s, f: stop.append(1))
import array, itertools, os, random, socket, sys, time
port, nfiles, theta, rate, prog, out = sys.argv[1:7]
nfiles, theta, rate = int(nfiles), float(theta), float(rate)
rnd = random.Random(26)
perm = list(range(nfiles))
rnd.shuffle(perm)
cdf = list(itertools.accumulate(1.0 / (i + 1) ** theta for i in range(nfiles)))
rnd = random.Random()
s = socket.create_connection(("127.0.0.1", int(port)))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
buf = bytearray(1 << 17)
mv = memoryview(buf)
def get(k):
    s.sendall(b"GET /d%02d/f%06d HTTP/1.1\r\nHost: x\r\n\r\n" % (k % 100, k))
    have = 0
    while True:
        n = s.recv_into(mv[have:])
        if n == 0:
            raise SystemExit("connection closed")
        have += n
        h = buf.find(b"\r\n\r\n", 0, have)
        if h >= 0:
            break
    head = bytes(buf[:h]).lower()
    if not head.startswith(b"http/1.1 200"):
        raise SystemExit("file %d: %r" % (k, head[:40]))
    i = head.index(b"content-length:")
    want = h + 4 + int(head[i + 15:].split(b"\r\n")[0])
    while have < want:
        n = s.recv_into(mv[have:], min(want - have, len(buf) - have))
        if n == 0:
            raise SystemExit("connection closed")
        have += n
pf = os.open(prog, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
ends, lats = array.array("d"), array.array("d")
clock, sleep = time.monotonic, time.sleep
step = 1.0 / rate
nxt = clock()
keys = []
n = 0
while not stop:
    now = clock()
    if now < nxt:
        sleep(nxt - now)
        continue
    if not keys:
        keys = rnd.choices(perm, cum_weights=cdf, k=4096)
    t = clock()
    get(keys.pop())
    e = clock()
    ends.append(e)
    lats.append((e - t) * 1e6)
    nxt += step
    n += 1
    if n % 64 == 0:
        os.pwrite(pf, b"%14d\n" % n, 0)
off = time.time() - clock()
ends = array.array("d", (x + off for x in ends))
with open(out, "wb") as f:
    array.array("d", [len(ends)]).tofile(f)
    ends.tofile(f)
    lats.tofile(f)
"""

NGINX_CONF = """\
daemon off;
master_process on;
worker_processes 1;
user www-data;
pid %(root)s/nginx.pid;
error_log %(logs)s/nginx.error.log warn;
events { worker_connections 64; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000000;
    keepalive_timeout 3600s;
    open_file_cache max=100000 inactive=3600s;
    client_body_temp_path %(root)s/tmp;
    proxy_temp_path %(root)s/tmp;
    fastcgi_temp_path %(root)s/tmp;
    uwsgi_temp_path %(root)s/tmp;
    scgi_temp_path %(root)s/tmp;
    types { }
    default_type application/octet-stream;
    server {
        listen 127.0.0.1:%(port)d;
        root %(docs)s;
    }
}
"""


class NginxVictim:
    """Debian's nginx over --files small files (4-64 KiB) in 100
    directories, their popularity Zipf, driven at a fixed rate by
    HTTP_CLIENT.  Its disk reads are the worker's (sendfile reads in the
    worker's context).  Stream: rsync -a of another tree."""
    name, unit = "nginx", "req/s"

    def __init__(self, h, a):
        self.h, self.a = h, a
        self.nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        root = self.root = os.path.join(h.scratch, "www")
        self.docs = os.path.join(root, "docs")
        os.makedirs(os.path.join(root, "tmp"))
        mean = a.ws_size // a.files
        hi = max(4 * KiB, min(64 * KiB, 2 * mean - 4 * KiB))
        rnd = __import__("random").Random(26)
        blk = os.urandom(64 * KiB)
        self.ws_files = []
        log("writing %d files of 4-%d KiB for nginx" % (a.files, hi // KiB))
        for d in range(100):
            os.makedirs(os.path.join(self.docs, "d%02d" % d))
        for k in range(a.files):
            p = os.path.join(self.docs, "d%02d" % (k % 100), "f%06d" % k)
            with open(p, "wb") as f:
                f.write(k.to_bytes(8, "little") + blk[8:rnd.randrange(4 * KiB, hi + 1, 4 * KiB)])
            self.ws_files.append(p)
        self.src = os.path.join(h.scratch, "tree")
        log("writing the other tree (%s)" % B.fmt_bytes(a.stream_size))
        for i in range(a.stream_size // (16 * MiB)):
            d = os.path.join(self.src, "d%02d" % (i % 16))
            os.makedirs(d, exist_ok=True)
            write_data(os.path.join(d, "f%04d" % i), 16 * MiB)
        subprocess.run(["sync"])
        for f in self.ws_files:
            B.evict(f)
        self.exclude = ()
        self.port = a.port
        with open(os.path.join(root, "nginx.conf"), "w") as f:
            f.write(NGINX_CONF % {"root": root, "logs": a.log_dir, "port": self.port, "docs": self.docs})
        subprocess.run(["chmod", "-R", "a+rX", root])
        ws = sum(os.path.getsize(f) for f in self.ws_files)
        n = sum(os.path.getsize(f) for f in B.files_under([self.src]))
        self.streams = {"rsync": Stream("rsync -a of another tree", lambda out: [
            "rsync", "-a", self.src + "/", out + "/"], [self.src], n)}
        self.odirect = Stream("O_DIRECT copy of the other tree", lambda out: B.odirect_copy_argv(
            B.files_under([self.src]), out), [self.src], n)
        self.describe = "nginx, %d GET/s over %d files (%s), Zipf(%.2f) popularity" % (
            a.rate, a.files, B.fmt_bytes(ws), a.theta)

    def start(self, variant, tag, senv):
        h, a = self.h, self.a
        for f in self.ws_files + B.files_under([self.src]):
            B.evict(f)
        # Warm from inside the cgroup, all of it: the victim's set is every file.
        h.run(["sh", "-c", 'find "$1" -type f -print0 | xargs -0 cat > /dev/null', "sh", self.docs])
        self.err = open(os.path.join(a.log_dir, tag + ".nginx.stderr"), "w")
        self.server = h.spawn([self.nginx, "-p", self.root, "-c", os.path.join(self.root, "nginx.conf")],
                              stderr=self.err, cpus=a.victim_cpus)
        pidf = os.path.join(self.root, "nginx.pid")
        for _ in range(200):
            if os.path.exists(pidf) and self.workers():
                break
            if self.server.poll() is not None:
                raise RuntimeError("nginx exited: %s" % open(self.err.name).read()[-500:])
            time.sleep(0.05)
        self.pids = self.workers()
        self.prog = os.path.join(a.shm, "victim.progress")
        self.progress = B.progress_counter(self.prog)
        self.out = os.path.join(a.log_dir, tag + ".victim.lat")
        self.cerr = open(os.path.join(a.log_dir, tag + ".client.stderr"), "w")
        self.proc = h.spawn([sys.executable, "-c", HTTP_CLIENT, str(self.port), str(a.files),
                             str(a.theta), str(a.rate), self.prog, self.out],
                            stderr=self.cerr, cpus=a.victim_cpus)
        B.wait_ready(self.progress, self.proc)

    def workers(self):
        return [p for p, st in B.proc_stats()
                if "(nginx)" in st and int(st.rsplit(")", 1)[1].split()[1]) == self.server.pid]

    run_stream = PreadVictim.run_stream

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        self.cerr.close()
        self.err.close()
        if not os.path.exists(self.out):
            raise RuntimeError("client wrote no result: %s" % open(self.cerr.name).read()[-500:])
        return read_latencies(self.out)

    def end_phase(self):
        if self.server.poll() is None:
            self.server.send_signal(signal.SIGQUIT)

    def clean_output(self, out):
        subprocess.run(["rm", "-rf", out])


VICTIMS = {"pread": PreadVictim, "pg": PgVictim, "kv": KvVictim, "nginx": NginxVictim}


# --------------------------------------------------------------------------
# A phase

def stream_argv(h, a, V, kind, variant, tag, out):
    """(argv, env, None) of the phase's stream, or (None, None, why)."""
    if kind == "odirect":
        return V.odirect.argv(out), dict(os.environ), None
    st = V.streams[kind]
    if variant == "discovery":
        if not a.daemon or not os.path.exists(a.daemon):
            return None, None, "madvseqd not built"
        if not st.mmap:
            return None, None, "discovery finds MADV_SEQUENTIAL mappings (in a program's maps); " \
                "%s %s" % (st.what, "maps its files with no advice, which the " \
                "daemon follows through the library only" if kind == "scan" else "uses read()")
        return st.argv(out), dict(os.environ), None
    return h.wrap(variant, st.argv(out), None, tag)


def phase(h, a, V, kind, variant):
    res = {"variant": variant}
    tag = B.phase_tag(a, kind or "alone", variant)
    out = os.path.join(h.scratch, "out")
    argv = env = None
    if kind:
        argv, env, why = stream_argv(h, a, V, kind, variant, tag, out)
        if why:
            res["skip"] = why
            return res
    st = (V.odirect if kind == "odirect" else V.streams[kind]) if kind else None
    # The server side of a stream (PostgreSQL's walsender and backends read
    # for the backup) runs under the same variant as its client.
    senv = None
    if variant in ("shim", "daemon", "nocache") and kind and kind != "odirect":
        _, senv, _ = h.wrap(variant, ["x"], None, tag + "-server")
    V.clean_output(out)
    hd = None

    def daemon():
        hd = I.start_daemon(a, h.cg, os.path.join(a.log_dir, tag), variant == "discovery")
        h.acct.enter(hd[0].pid)
        return hd
    # A registered daemon runs before the victim and the server the stream
    # reads from start under the library, which registers with it.  A
    # discovering one starts after: it would find the victim's warm-up
    # (cat of its files, a read() stream) and drop behind it, and the phase
    # would start with the victim's set half cached.
    if variant == "daemon" and kind and kind != "odirect":
        hd = daemon()
    try:
        V.start(variant, tag, senv)
        if variant == "discovery" and kind and kind != "odirect":
            hd = daemon()
        log("phase %s %s" % (kind or "", B.LABELS[variant]))
        time.sleep(a.settle)            # at its rate, past its start-up
        smp = B.Sampler(h, V.ws_files, (st.paths if st else []) + [out], V.progress,
                        a.sample_ms / 1000.0, exclude=V.exclude)
        m = B.Meter(h)
        res["victim_bytes"] = B.cached_sum(V.ws_files)
        d0 = io_read_bytes(V.pids)
        m.start()
        smp.start()
        t0, w0 = time.monotonic(), time.time()
        if argv:
            V.run_stream(variant, argv, env, tag, kind)
        else:
            time.sleep(a.alone_seconds)
        t1, w1 = time.monotonic(), time.time()
        d1 = io_read_bytes(V.pids)
        split = t1 - smp.t0
        res["meter"] = m.stop()
        time.sleep(max(0.0, a.after - (time.monotonic() - t1)))
        w2 = time.time()
        d2 = io_read_bytes(V.pids)
        samples = smp.stop()
        recs = V.stop()
        nbytes = (st.nbytes(out) if callable(st.nbytes) else st.nbytes) if argv else None
        if argv and a.cpu_phase and variant in B.CPU_VARIANTS + ("discovery",) and kind != "odirect":
            def prepare():
                V.clean_output(out)
                for f in B.files_under(st.paths):
                    if f not in V.ws_files:
                        B.evict(f)
            res["stream_alone"] = h.stream_alone(variant, argv, env, tag, kind, h.scratch, prepare)
    finally:
        h.kill_all()
        V.end_phase()
        I.stop_daemon(hd)
    n, lat = window(recs, w0, w1)
    na, alat = window(recs, w1, w2)
    res["p99_series"] = p99_series(recs, w0 - (t0 - smp.t0))
    during = [s for s in samples if s[0] <= split] or samples[:1]
    vb = res["victim_bytes"] or 1
    res.update({
        "samples": samples, "split": split,
        "rate": n / (w1 - w0) if w1 > w0 else None, "p50": lat[0], "p99": lat[1], "p999": lat[2],
        "after_p50": alat[0], "after_p99": alat[1], "after_p999": alat[2],
        "disk": d1 - d0, "after_disk": d2 - d1,
        "res_min": min(s[1] for s in samples) / vb, "res_end": during[-1][1] / vb,
        "res_after": samples[-1][1] / vb,
        "stream_s": t1 - t0, "stream_bytes": nbytes,
        "stream_peak": max(s[2] for s in during) if during else None,
    })
    if variant in MANAGED:
        res["shim_stats"] = h.shim_stats(tag) or None
        res["server_stats"] = h.shim_stats(tag + "-server") or None
    V.clean_output(out)
    log("  p99 %s us, disk %s + %s after, resident least %.1f%%%s" % (
        B._f(lat[1]), B.fmt_bytes(d1 - d0), B.fmt_bytes(d2 - d1), 100 * res["res_min"],
        ", stream %.0f MB/s" % (nbytes / (t1 - t0) / 1e6) if argv else ""))
    return res


def p99_series(recs, wall0, width=1.0):
    """The victim's p99 latency (us) per `width` seconds, at times counted
    as the Sampler's (wall0: the wall clock at its zero)."""
    bins = {}
    for e, l in recs:
        if e >= wall0:
            bins.setdefault(int((e - wall0) / width), []).append(l)
    return [((k + 0.5) * width, B.pct(v, 99)) for k, v in sorted(bins.items())]


def plot(res, path, title):
    """One column per row: the victim's p99 per second above (log scale),
    the cgroup's page cache split into the working set, the stream's files
    and the rest below; a dotted line where the stream ended."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("no matplotlib (apt-get install python3-matplotlib): no picture")
        return
    rs = [r for r in res if not r.get("skip") and r.get("samples")]
    if not rs:
        return
    n = len(rs)
    fig, ax = plt.subplots(2, n, figsize=(3.0 * n + 0.8, 5.6), sharex="col", squeeze=False,
                           gridspec_kw={"height_ratios": [1, 1.3]})
    ymax_c = max(max(s[3] for s in r["samples"]) for r in rs) / MiB * 1.1 or 1
    lat = [v for r in rs for _, v in r.get("p99_series") or [] if v]
    lo, hi = (min(lat) / 2, max(lat) * 2) if lat else (1, 10)
    for i, r in enumerate(rs):
        s = r["samples"]
        a0, a1 = ax[0][i], ax[1][i]
        ps = r.get("p99_series") or []
        a0.step([t for t, _ in ps], [v for _, v in ps], where="mid", color="tab:blue", lw=1)
        a0.set_yscale("log")
        a0.set_ylim(lo, hi)
        a0.set_title(B.LABELS.get(r["variant"], r["variant"]), fontsize=10)
        a0.grid(alpha=0.3)
        t = [x[0] for x in s]
        a1.stackplot(t, [x[1] / MiB for x in s], [x[2] / MiB for x in s],
                     [max(0.0, (x[3] - x[1] - x[2]) / MiB) for x in s],
                     colors=["tab:green", "tab:red", "lightgray"],
                     labels=["working set", "stream's files", "other"])
        a1.set_ylim(0, ymax_c)
        a1.set_xlabel("seconds")
        a1.grid(alpha=0.3)
        if r.get("split") and r.get("stream_bytes"):
            for a_ in (a0, a1):
                a_.axvline(r["split"], color="black", ls=":", lw=1)
        if i == 0:
            a0.set_ylabel("victim p99 per second, us")
            a1.set_ylabel("page cache, MiB")
    ax[1][0].legend(loc="lower left", fontsize=7, framealpha=0.8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    log("picture: %s" % path)


# --------------------------------------------------------------------------
# The report

def _row(res, variant):
    for r in res:
        if r["variant"] == variant and not r.get("skip"):
            return r
    return None


PERF_PARTS = ("reclaim", "drops", "cachestat", "wb_program", "wb_flusher", "own", "madvseqd", "copy")


def report(res, odirect, title, unit, damon_note, what, judge="all"):
    f, R = B._f, B._ratio
    P = ["", title, ""]
    alone = _row(res, "alone")
    kern = _row(res, "kernel")
    iso = _row(res, "isolation")
    vres = res[:1] + [dict(odirect, variant="odirect")] + res[1:] if odirect else res
    rows = []
    skipped = []
    for r in vres:
        lab = B.LABELS.get(r["variant"], r["variant"])
        if r.get("skip"):
            skipped.append("  %s: skipped: %s" % (lab, r["skip"]))
            continue
        rows.append([lab, f(r.get("rate")), f(r["p50"]), f(r["p99"]), f(r["p999"]),
                     f(R(r["p99"], odirect and odirect["p99"]), "%.2f"),
                     B.fmt_bytes(r["disk"]), "%.1f%%" % (100 * r["res_min"]),
                     "%.1f%%" % (100 * r["res_end"]), B.fmt_bytes(r["after_disk"]),
                     f(r["after_p99"]), "%.1f%%" % (100 * r["res_after"]),
                     B.fmt_bytes(r["samples"][-1][3]) if r.get("samples") else "-"])
    P += B.table("victim (%s achieved; latency us; 'after:' the seconds after the stream ended, while "
                 "the victim fetches back what it lost)" % unit,
        ["variant", unit, "p50", "p99", "p99.9", "p99 x O_DIRECT", "disk reads", "res. least",
         "res. end", "after: disk", "after: p99", "after: res.", "cg cache"], rows) + skipped
    P.append("")
    rows = []
    ok = [r for r in vres if not r.get("skip") and r.get("stream_bytes")]
    for r in ok:
        m = r["meter"]
        gb = r["stream_bytes"] / 1e9
        r["_mbs"] = r["stream_bytes"] / r["stream_s"] / 1e6
        r["_mcpu"] = m["machine_cpu_s"] / gb
        r["_bcpu"] = m["bench_cpu_s"] / gb
        sa = r.get("stream_alone")
        r["_acpu"] = sa["machine_cpu_s"] / (gb * sa["runs"]) if sa else None
    for r in ok:
        rows.append([B.LABELS.get(r["variant"], r["variant"]), f(r["stream_bytes"] / 1e9, "%.2f"),
                     f(r["stream_s"], "%.1f"), f(r["_mbs"]), f(R(r["_mbs"], kern and kern.get("_mbs")), "%.3f"),
                     f(R(r["_mbs"], iso and iso.get("_mbs")), "%.2f"), B.fmt_bytes(r.get("stream_peak")),
                     f(r["_mcpu"], "%.3f"), f(R(r["_mcpu"], kern and kern.get("_mcpu")), "%.2f"),
                     f(r["_bcpu"], "%.3f"), f(R(r["_bcpu"], kern and kern.get("_bcpu")), "%.2f"),
                     f(r["_acpu"], "%.3f"), f(R(r["_acpu"], kern and kern.get("_acpu")), "%.2f")])
    P += B.table("stream (CPU-s/GB: machine = /proc/stat over the stream, every process and kernel "
                 "thread, the victim's included; bench = the benchmark's processes + madvseqd + "
                 "kswapd; alone = machine CPU of the stream run again without its victim)",
                 ["variant", "GB", "s", "MB/s", "x kernel", "x isolation", "strm cache peak",
                  "machine CPU-s/GB", "x kernel", "bench CPU-s/GB", "x kernel", "alone CPU-s/GB",
                  "x kernel"], rows)
    P.append("")
    rows = []
    for r in [x for x in vres if not x.get("skip")]:
        vm, ms = r["meter"]["vmstat"], r["meter"]["memstat"]
        rows.append([B.LABELS.get(r["variant"], r["variant"]), f(r["meter"]["seconds"], "%.1f"),
                     f(ms.get("refault_file"), "%d"), f(ms.get("pgmajfault"), "%d"),
                     f(ms.get("pgscan"), "%d"), f(vm.get("pgscan"), "%d"), f(vm.get("refault_file"), "%d"),
                     B.fmt_bytes(r["meter"].get("damon_pageout"))
                     if r["meter"].get("damon_pageout") is not None else "-"])
    P += B.table("reclaim over the stream (memory.stat of the benchmark's cgroups | /proc/vmstat, "
                 "whole machine; cgroup v1 has no pgscan in memory.stat)",
                 ["variant", "s", "cg wsrefault file", "cg pgmajfault", "cg pgscan", "| pgscan",
                  "wsrefault file", "DAMON pageout"], rows)
    prows = []
    for r in ok:
        sp = (r.get("stream_alone") or {}).get("perf")
        if sp and r.get("_acpu"):
            prows.append([B.LABELS.get(r["variant"], r["variant"]), f(r["_acpu"], "%.3f")] +
                         [f(r["_acpu"] * sp[k] / 100, "%.3f") for k in PERF_PARTS])
    if prows:
        P += B.table("where the stream's CPU went (--perf: the stream alone --cpu-runs times more, under "
                     "perf record -a -g; CPU-s/GB = the part's share of the machine's busy samples x alone "
                     "CPU-s/GB; reclaim: do_try_to_free_pages, kswapd; drops: fadvise, madvise, "
                     "process_madvise; writeback: started by the program (sync_file_range) | by the "
                     "flusher threads; library: libmadvseq.so and liburcu in any process; madvseqd: "
                     "its process, kernel included, its drops also under drops)",
                     ["variant", "alone CPU-s/GB", "reclaim", "drops", "cachestat", "wb program",
                      "wb flusher", "library", "madvseqd", "copying"], prows)
        P.append("")
    for r in ok:
        for key, who in (("shim_stats", ""), ("server_stats", " (server)")):
            s = r.get(key)
            if s:
                P.append("  %s MADVSEQ_STATS%s: %d process(es); read()/write() streams dropped %s, "
                         "kept %s; regions dropped %s (and %s on madvseqd's ask); %d errors" % (
                             B.LABELS[r["variant"]], who, s.get("processes", 0),
                             B.fmt_bytes(s.get("read_bytes_advised", 0)),
                             B.fmt_bytes(s.get("read_bytes_kept", 0)),
                             B.fmt_bytes(s.get("bytes_dropped", 0)),
                             B.fmt_bytes(s.get("bytes_dropped_asked", 0)), s.get("errors", 0)))
    if damon_note:
        P.append(damon_note)
    P.append("")
    P += sentence(res, alone, kern)
    P += verdicts(res, odirect, alone, kern, iso, damon_note, judge)
    print("\n".join(P), flush=True)
    return P


def _beside(rows, fn):
    """The figure of the kernel alone, nocache and isolation rows, for the
    verdict lines: what the others got."""
    out = []
    for r in rows:
        if r is not None:
            v = fn(r)
            out.append("%s %s" % (B.LABELS[r["variant"]], v if v is not None else "-"))
    return "; ".join(out) or "no other rows"


def sentence(res, alone, kern):
    """What changed, in one plain sentence: the kernel alone against
    madvseq run (or the first managed row that ran)."""
    m = next((r for v in MANAGED for r in res if r["variant"] == v and not r.get("skip")), None)
    if not (alone and kern and m):
        return []
    f = B._f

    def part(r):
        return "kept %.1f%% of its working set at the least, read %s from disk during and after " \
            "it, and its p99 was %s us" % (100 * r["res_min"], B.fmt_bytes(r["disk"] + r["after_disk"]),
                                           f(r["p99"]))
    return ["In short: alone, the victim's p99 was %s us; next to the stream with the kernel alone it "
            "%s; under %s it %s." % (f(alone["p99"]), part(kern), B.LABELS[m["variant"]], part(m)), ""]


def verdicts(res, odirect, alone, kern, iso, damon_active, judge="all"):
    """PASS/MISS lines for the rows with libmadvseq or madvseqd.  judge
    "cache" leaves out the stream's speed and CPU: what one short run on a
    shared machine cannot tell to a few per cent."""
    f, R = B._f, B._ratio
    others = [kern, _row(res, "nocache"), iso]
    V = []
    for r in res:
        if r["variant"] not in MANAGED or r.get("skip"):
            continue
        L = B.LABELS[r["variant"]]
        # Where DAMON pages out idle pages and was not paused, the victim with
        # no stream over as long is the reference of what a policy can keep.
        ref = alone["res_min"] if damon_active and alone else 1.0
        lo, end = min(1.0, R(r["res_min"], ref)), min(1.0, R(r["res_end"], ref))
        V.append((lo >= TARGETS["resident"] and end >= TARGETS["resident"],
                  "%s: working set resident least %.3f, end %.3f (target >= %.2f%s; %s)" % (
                      L, lo, end, TARGETS["resident"],
                      ", / the victim alone's least %.3f: DAMON ran" % ref if ref != 1.0 else "",
                      _beside(others, lambda o: "%.3f/%.3f" % (o["res_min"], o["res_end"])))))
        if kern:
            kd = kern["disk"] + kern["after_disk"]
            md = r["disk"] + r["after_disk"]
            if kd > 0:
                V.append((md <= TARGETS["disk_vs_kernel"] * kd,
                          "%s: victim disk reads during + after the stream %s = %.4f x the kernel "
                          "alone's %s (target <= %.2f; %s)" % (
                              L, B.fmt_bytes(md), md / kd, B.fmt_bytes(kd), TARGETS["disk_vs_kernel"],
                              _beside(others[1:], lambda o: B.fmt_bytes(o["disk"] + o["after_disk"])))))
            else:
                V.append((md == 0, "%s: victim disk reads %s; the kernel alone's were 0" % (
                    L, B.fmt_bytes(md))))
        if odirect and odirect.get("p99") and r.get("p99"):
            x = r["p99"] / odirect["p99"]
            V.append((x <= TARGETS["p99_vs_odirect"],
                      "%s: victim p99 %s us = %.2f x next to the O_DIRECT copy (%s us) (target <= %.1f; "
                      "after the stream %s us; %s)" % (
                          L, f(r["p99"]), x, f(odirect["p99"]), TARGETS["p99_vs_odirect"],
                          f(r["after_p99"]), _beside(others, lambda o: "%s us" % f(o["p99"])))))
        if judge == "cache":
            continue
        x = R(r.get("_mbs"), kern and kern.get("_mbs"))
        if x is not None:
            xi = R(r.get("_mbs"), iso and iso.get("_mbs"))
            V.append((x >= TARGETS["stream_vs_kernel"] and (xi is None or xi > 1.0),
                      "%s: stream %.0f MB/s = %.3f x the kernel alone's (target >= %.2f) and %s x "
                      "the isolation cgroup's (target > 1)" % (
                          L, r["_mbs"], x, TARGETS["stream_vs_kernel"], f(xi, "%.2f"))))
        key = "_acpu" if r.get("_acpu") and kern and kern.get("_acpu") else "_mcpu"
        x = R(r.get(key), kern and kern.get(key))
        if x is not None:
            V.append((x <= TARGETS["cpu_vs_kernel"],
                      "%s: machine CPU per GB streamed%s = %.3f x the kernel alone's (target <= %.2f; "
                      "the benchmark's own processes + kswapd: %s; %s)" % (
                          L, " (the stream without its victim)" if key == "_acpu" else "", x,
                          TARGETS["cpu_vs_kernel"], f(R(r.get("_bcpu"), kern.get("_bcpu")), "%.2f"),
                          _beside(others[1:], lambda o: f(R(o.get(key), kern.get(key)), "%.2f")))))
    return ["%s  %s" % ("PASS" if good else "MISS", text) for good, text in V]


# --------------------------------------------------------------------------

def body(h, a):
    # What the victims write while they serve (their progress counters,
    # pgbench's transaction logs) goes to memory: a write into the page
    # cache of the disk the stream writes to can wait in the kernel's
    # dirty-page throttling, which is no cost of a cache policy.
    a.shm = os.path.join("/dev/shm", h.name)
    os.makedirs(a.shm)
    h.cleanups.insert(0, lambda: shutil.rmtree(a.shm, ignore_errors=True))
    V = VICTIMS[a.victim](h, a)
    damon = bool(B.damon_pageout_kdamonds())
    damon_note = ("DAMON pageout schemes run on this machine (not paused: --pause-damon); the "
                  "residency target is judged against the victim alone's") if damon else None
    kinds = a.streams or list(V.streams)
    for k in kinds:
        if k not in V.streams:
            raise SystemExit("victim %s has no stream %r (%s)" % (a.victim, k, ",".join(V.streams)))
    odirect, allres = B.repeated_phases(a, lambda kind, v: phase(h, a, V, kind, v), kinds)
    out = []
    for kind, res in allres:
        st = V.streams[kind]
        title = ("warm %s: %s, next to %s (%s) in a %s memory cgroup; %s after; O_DIRECT "
                 "reference: %s" % (a.victim, V.describe, kind, st.what, B.fmt_bytes(a.limit),
                                     "%d s" % a.after, V.odirect.what))
        if a.reps > 1:
            title += "; medians of %d repetitions" % a.reps
        out += report(res, odirect, title, V.unit, damon_note, kind, a.judge)
        if a.png:
            root, ext = os.path.splitext(a.png)
            path = a.png if len(kinds) == 1 else "%s-%s%s" % (root, kind, ext or ".png")
            plot([r for r in res[:1]] + ([dict(odirect, variant="odirect")] if odirect else []) + res[1:-1],
                 path, "%s\nnext to %s, cgroup %s (dotted: the stream's end)" % (
                     V.describe, V.streams[kind].what, B.fmt_bytes(a.limit)))
    if a.summary:
        with open(a.summary, "w") as fo:
            fo.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    B.add_common_args(ap, GiB, "smaller sets, shorter phases, fewer variants")
    ap.set_defaults(variants=",".join(VARIANTS))
    ap.add_argument("--victim", default="pread", choices=sorted(VICTIMS))
    ap.add_argument("--streams", default=None, help="comma list of the victim's streams (default all)")
    ap.add_argument("--rate", type=float, default=None,
                    help="the victim's requests per second (pread 5000, pg 2000, kv 3000, nginx 1000)")
    ap.add_argument("--theta", type=float, default=None,
                    help="Zipf exponent of the keys (pread 0.9, pg 1.01: random_zipfian's least, "
                         "kv 0.99, nginx 0.9)")
    ap.add_argument("--ws-size", type=B.parse_size, default=None,
                    help="the victim's working set, pread and kv (768M; quick 384M)")
    ap.add_argument("--stream-size", type=B.parse_size, default=None,
                    help="what the stream reads besides the victim's data (4G; quick 2G)")
    ap.add_argument("--passes", type=int, default=None,
                    help="pread: the stream reads its file this many times (2; quick 1)")
    ap.add_argument("--after", type=float, default=None,
                    help="seconds the victim runs on after the stream (30; quick 10)")
    ap.add_argument("--alone-seconds", type=float, default=None,
                    help="the victim alone's 'stream' window (10; quick 6)")
    ap.add_argument("--settle", type=float, default=2.0,
                    help="seconds at its rate before the stream starts (2)")
    ap.add_argument("--summary", metavar="FILE", help="also write the tables and verdicts to FILE")
    ap.add_argument("--judge", choices=("all", "cache"), default="all",
                    help="cache: PASS/MISS lines for the victim's cache only (residency, disk reads, "
                         "p99), not the stream's speed and CPU (all)")
    g = ap.add_argument_group("kv and nginx")
    g.add_argument("--value-size", type=int, default=1000, help="kv: bytes per value (1000)")
    g.add_argument("--files", type=int, default=None,
                   help="nginx: files served (30000; quick 20000)")
    g = ap.add_argument_group("pg")
    g.add_argument("--scale", type=int, default=None,
                   help="pgbench scale of the victim's database (48 = ~720 MiB of accounts + pkey; "
                        "quick 24)")
    g.add_argument("--cold-scale", type=int, default=None,
                   help="pgbench scale of the database only the backups read (150; quick 60)")
    g.add_argument("--clients", type=int, default=2, help="pgbench clients (2)")
    g.add_argument("--shared-buffers", default="32MB", help="server shared_buffers (32MB)")
    g.add_argument("--port", type=int, default=5400 + os.getpid() % 1000,
                   help="port number (names the unix socket; no TCP)")
    a = ap.parse_args()
    if a.cpu_runs < 1:
        ap.error("--cpu-runs must be at least 1 (the CPU target is judged on the stream run alone)")
    q = a.quick
    if q and a.limit == GiB:
        a.limit = 512 * MiB
    if q:
        a.cpu_phase = False
    a.streams = [s for s in (a.streams or "").split(",") if s] or None
    a.rate = a.rate or {"pread": 5000, "pg": 2000, "kv": 3000, "nginx": 1000}[a.victim]
    a.theta = a.theta or {"pread": 0.9, "pg": 1.01, "kv": 0.99, "nginx": 0.9}[a.victim]
    a.ws_size = a.ws_size or (384 * MiB if q else 768 * MiB)
    a.stream_size = a.stream_size or (2 * GiB if q else 4 * GiB)
    a.after = a.after if a.after is not None else (10 if q else 30)
    a.passes = a.passes or (1 if q else 2)
    a.alone_seconds = a.alone_seconds or (6 if q else 10)
    a.scale = a.scale or (24 if q else 48)
    a.files = a.files or (20000 if q else 30000)
    if a.victim == "nginx" and a.sample_ms == 250:
        a.sample_ms = 1000      # a residency sample is one cachestat(2) per file
    if a.victim == "nginx" and not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")):
        raise SystemExit("needs nginx (scripts/bench-deps.sh installs nginx-light)")
    a.cold_scale = a.cold_scale or (60 if q else 150)
    if a.victim == "pg" and not os.path.exists("/usr/lib/postgresql/15/bin/postgres"):
        raise SystemExit("needs postgresql-15 (scripts/bench-deps.sh)")
    if a.victim == "kv" and importlib.util.find_spec("plyvel") is None:
        raise SystemExit("needs python3-plyvel, for /usr/bin/python3 (scripts/bench-deps.sh)")
    variants = [v for v in a.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            raise SystemExit("unknown variant %r (one of %s)" % (v, ",".join(VARIANTS)))
    a.variants = ",".join(v for v in variants if v in B.VARIANTS) or "kernel"
    B.finish_args(a)
    a.variants = variants
    return B.main_wrapper(a, "warm", lambda h: body(h, a))


if __name__ == "__main__":
    sys.exit(main())

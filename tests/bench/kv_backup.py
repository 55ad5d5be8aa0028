#!/usr/bin/env python3
"""A key-value store serving random GETs while its directory is backed up,
in one memory cgroup (see tests/bench/README.md).

The store is LevelDB through python3-plyvel: a database of --db-size, warm
in the page cache, read by a victim process doing random GETs (LevelDB maps
its table files, so every GET that misses the page cache is a major fault).
Next to it, a backup reads the database's directory plus a larger set of cold
files (--cold-size): `tar -cf ARCHIVE`, `rsync -a` to a copy, or
`sha256sum`.  The stream is the backup; the victim is the GETs.
"""

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
from benchlib import GiB, MiB, log  # noqa: E402

# The victim: random GETs until SIGINT, then its latencies (us) as JSON.
# Progress (GETs done) goes to a file every 256 GETs for the sampler.
VICTIM = r"""
import signal
stop = []
signal.signal(signal.SIGINT, lambda s, f: stop.append(1))
import json, os, random, sys, time
import plyvel
db_path, nkeys, prog, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
db = plyvel.DB(db_path)
fd = os.open(prog, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
lat = []
rnd = random.Random()
clock = time.monotonic_ns
t0 = clock()
while not stop:
    k = b"key%012d" % rnd.randrange(nkeys)
    t = clock()
    v = db.get(k)
    lat.append((clock() - t) / 1000.0)
    if v is None:
        sys.exit("key %r missing" % k)
    if len(lat) % 256 == 0:
        os.pwrite(fd, b"%14d\n" % len(lat), 0)
t1 = clock()
db.close()
lat.sort()
def p(q):
    return lat[min(len(lat) - 1, int(q / 100.0 * len(lat)))]
json.dump({"n": len(lat), "s": (t1 - t0) / 1e9, "p50": p(50), "p99": p(99), "p999": p(99.9)},
          open(out, "w"))
"""

BUILD = r"""
import os, sys
import plyvel
db_path, nkeys, vsize = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
db = plyvel.DB(db_path, create_if_missing=True, compression=None)
batch = 2000
for i in range(0, nkeys, batch):
    with db.write_batch() as wb:
        for k in range(i, min(nkeys, i + batch)):
            wb.put(b"key%012d" % k, os.urandom(vsize))
db.compact_range()
db.close()
"""

STREAMERS = {
    "tar": lambda a, out: ["tar", "-cf", out + ".tar", "-C", a.src, "."],
    "rsync": lambda a, out: ["rsync", "-a", a.src + "/", out + "/"],
    "sha256sum": lambda a, out: ["sh", "-c", 'find "$1" -type f -print0 | xargs -0 sha256sum > /dev/null',
                                 "sh", a.src],
}


def phase(h, a, kind, variant):
    res = {"variant": variant, "victim_bytes": None}
    tag = B.phase_tag(a, kind or "alone", variant)
    out = os.path.join(h.scratch, "backup")
    argv = env = None
    if kind == "odirect":
        argv, env = B.odirect_copy_argv(B.files_under([a.src]), out), dict(os.environ)
    elif kind:
        argv, env, why = h.wrap(variant, STREAMERS[kind](a, out), None, tag)
        if why:
            res["skip"] = why
            return res
    subprocess.run(["rm", "-rf", out, out + ".tar"])
    for f in B.files_under([a.src]):
        B.evict(f)
    h.run(["sh", "-c", 'cat "$1"/* > /dev/null', "sh", a.db])      # warm, charged to the cgroup
    res["victim_bytes"] = B.cached_sum(a.db_files)
    prog = os.path.join(h.scratch, "victim.progress")
    progress = B.progress_counter(prog)
    vout = os.path.join(a.log_dir, tag + ".victim.json")
    hd = h.start_daemon(variant, tag)
    m = B.Meter(h)
    log("phase %s %s" % (kind or "", B.LABELS[variant]))
    try:
        verr = open(os.path.join(a.log_dir, tag + ".victim.stderr"), "w")
        v = h.spawn([sys.executable, "-c", VICTIM, a.db, str(a.nkeys), prog, vout], stderr=verr,
                    cpus=a.victim_cpus)
        B.wait_ready(progress, v)
        smp = B.Sampler(h, a.db_files, [a.src, out, out + ".tar"], progress, a.sample_ms / 1000.0)
        m.start()
        smp.start()
        t0 = time.monotonic()
        if argv:
            h.stream(variant, argv, env, tag, kind)
        else:
            time.sleep(a.alone_seconds)
        t1 = time.monotonic()
        v.send_signal(signal.SIGINT)
        v.wait(timeout=60)
        res["samples"] = smp.stop()
        res["meter"] = m.stop()
        verr.close()
        if argv and a.cpu_phase and variant in B.CPU_VARIANTS and kind != "odirect":
            def prepare():
                subprocess.run(["rm", "-rf", out, out + ".tar"])
                for f in B.files_under([a.src]):
                    if f not in a.db_files:
                        B.evict(f)
            res["stream_alone"] = h.stream_alone(variant, argv, env, tag, kind, h.scratch, prepare)
    finally:
        h.stop_daemon(hd)
        h.kill_all()
    if not os.path.exists(vout):
        raise RuntimeError("victim wrote no result: %s" % open(verr.name).read()[-500:])
    j = json.load(open(vout))
    res.update({"victim_thr": j["n"] / j["s"], "lat": (j["p50"], j["p99"], j["p999"]),
                "stream_bytes": a.src_bytes if argv else None, "stream_s": t1 - t0})
    if variant in ("shim", "daemon"):
        res["shim_stats"] = h.shim_stats(tag)
    end = B.cached_sum(B.files_under([out, out + ".tar"])) if argv else None
    res["out_cached_end"] = end
    subprocess.run(["rm", "-rf", out, out + ".tar"])
    log("  victim %.0f GET/s p99 %.1fus%s" % (res["victim_thr"], j["p99"],
                                             ", stream %.0f MB/s, output cached at end %s" % (
                                                 a.src_bytes / (t1 - t0) / 1e6, B.fmt_bytes(end))
                                             if argv else ""))
    return res


def body(h, a):
    a.src = os.path.join(h.scratch, "src")
    a.db = os.path.join(a.src, "db")
    cold = os.path.join(a.src, "cold")
    os.makedirs(cold)
    a.nkeys = a.db_size // (a.value_size + 24)
    log("building LevelDB %s (%d keys of %d bytes)" % (a.db, a.nkeys, a.value_size))
    h.run([sys.executable, "-c", BUILD, a.db, str(a.nkeys), str(a.value_size)])
    log("writing %s of cold files" % B.fmt_bytes(a.cold_size))
    n = max(1, a.cold_size // (64 * MiB))
    for i in range(n):
        with open(os.path.join(cold, "f%03d" % i), "wb") as f:
            for _ in range(64):
                f.write(os.urandom(MiB))
    subprocess.run(["sync"])
    a.db_files = [f for f in B.files_under([a.db]) if f.endswith((".ldb", ".sst"))]
    a.src_bytes = sum(os.path.getsize(f) for f in B.files_under([a.src]))
    log("database %s in %d tables; backup source %s" % (
        B.fmt_bytes(sum(os.path.getsize(f) for f in a.db_files)), len(a.db_files), B.fmt_bytes(a.src_bytes)))
    odirect, allres = B.repeated_phases(a, lambda kind, v: phase(h, a, kind, v), a.streamers)
    for kind, res in allres:
        print()
        print("kv_backup: %s of the LevelDB directory + %s cold files (%s) next to random GETs "
              "(python3-plyvel) on a warm %s database, cgroup %s" % (
                  kind, B.fmt_bytes(a.cold_size), B.fmt_bytes(a.src_bytes), B.fmt_bytes(a.db_size),
                  B.fmt_bytes(a.limit)))
        note = "O_DIRECT reference (the same files read and written with O_DIRECT): " \
            "victim %.0f GET/s, p99 %.1f us, stream %.0f MB/s" % (
                odirect["victim_thr"], odirect["lat"][1], odirect["stream_bytes"] / odirect["stream_s"] / 1e6)
        if kind != "sha256sum":
            note += "\nbackup output cached at the end: " + ", ".join(
                "%s %s" % (B.LABELS[r["variant"]], B.fmt_bytes(r.get("out_cached_end")))
                for r in res if not r.get("skip") and r.get("stream_bytes"))
        B.report(res, "GET/s", "us", odirect=odirect, note=note)
        if a.png:
            root, ext = os.path.splitext(a.png)
            path = a.png if len(a.streamers) == 1 else "%s-%s%s" % (root, kind, ext or ".png")
            B.plot(res, path, "LevelDB random GETs while %s backs up its directory, cgroup %s" % (
                kind, B.fmt_bytes(a.limit)), "GET/s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    B.add_common_args(ap, 512 * MiB, "tar only, smaller database and file set (~3 minutes)")
    ap.add_argument("--streamers", default=None,
                    help="comma list of %s (default all; quick tar)" % ",".join(STREAMERS))
    ap.add_argument("--db-size", type=B.parse_size, default=None, help="database (256M; quick 128M)")
    ap.add_argument("--value-size", type=int, default=1000, help="bytes per value (1000)")
    ap.add_argument("--cold-size", type=B.parse_size, default=None, help="cold files (2G; quick 1G)")
    ap.add_argument("--alone-seconds", type=int, default=None, help="victim alone (10; quick 5)")
    a = ap.parse_args()
    q = a.quick
    if q and a.limit == 512 * MiB:
        a.limit = 384 * MiB
    a.streamers = [s for s in (a.streamers or ("tar" if q else ",".join(STREAMERS))).split(",") if s]
    for s in a.streamers:
        if s not in STREAMERS:
            raise SystemExit("unknown streamer %r" % s)
    a.db_size = a.db_size or (128 * MiB if q else 256 * MiB)
    a.cold_size = a.cold_size or (GiB if q else 2 * GiB)
    a.alone_seconds = a.alone_seconds or (5 if q else 10)
    B.finish_args(a)
    if importlib.util.find_spec("plyvel") is None:
        raise SystemExit("needs python3-plyvel (scripts/bench-deps.sh)")
    return B.main_wrapper(a, "kv", lambda h: body(h, a))


if __name__ == "__main__":
    sys.exit(main())

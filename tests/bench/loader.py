#!/usr/bin/env python3
"""A data-loader-style scan next to a random-read victim, in one memory
cgroup (see tests/bench/README.md).

The loader is Python going through a set of large files from start to end,
as training-data loaders do: either mmap + madvise(MADV_SEQUENTIAL) and
1 MiB slices copied into a buffer, or plain read() into a 1 MiB buffer.  The
victim is interference.py's: fio psync 4 KiB random reads over a warm file.
Each loader kind runs in every variant; an O_DIRECT read of the same files
(fio --direct=1) is the reference for what any stream costs the victim in
CPU and disk time alone.
"""

import argparse
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
from benchlib import GiB, MiB, log  # noqa: E402

LOADER = r"""
import mmap, os, sys
kind, bs, files = sys.argv[1], 1 << 20, sys.argv[2:]
buf = bytearray(bs)
for path in files:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    n = os.fstat(fd).st_size
    if kind == "mmap":
        m = mmap.mmap(fd, n, prot=mmap.PROT_READ)
        m.madvise(mmap.MADV_SEQUENTIAL)
        # Through a memoryview: m[a:b] would make a new 1 MiB bytes object
        # each time, whose anonymous pages glibc maps, faults in and unmaps
        # again, and that was most of the loader's CPU in every variant.
        with memoryview(m) as mv:
            for off in range(0, n, bs):
                with mv[off:off + bs] as chunk:
                    buf[:len(chunk)] = chunk
        m.close()
    else:
        with os.fdopen(fd, "rb", buffering=0, closefd=False) as f:
            while f.readinto(buf):
                pass
    os.close(fd)
"""

KINDS = {"mmap": "Python mmap+MADV_SEQUENTIAL", "read": "Python read() 1 MiB"}


def write_file(path, size):
    log("writing %s (%s)" % (path, B.fmt_bytes(size)))
    with open(path, "wb") as f:
        for _ in range(size // MiB):
            f.write(os.urandom(MiB))
        os.fsync(f.fileno())
    B.evict(path)


def tree_syscr(pid):
    """read syscalls of pid and its children: fio's job process does the
    reads, one per 4 KiB."""
    tot = 0
    for p, st in B.proc_stats():
        try:
            if p != pid and int(st.rsplit(")", 1)[1].split()[1]) != pid:
                continue
            for line in open("/proc/%d/io" % p):
                if line.startswith("syscr:"):
                    tot += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return tot


def victim_argv(a, out, runtime):
    return ["fio", "--name=victim", "--ioengine=psync", "--rw=randread", "--bs=4k",
            "--filename=%s" % a.victim_file, "--size=%d" % a.victim_size, "--invalidate=0",
            "--norandommap", "--randrepeat=0", "--time_based", "--runtime=%d" % runtime,
            "--output-format=json", "--output=%s" % out]


def fio_job(path):
    s = open(path).read()
    return json.loads(s[s.find("{"):])["jobs"][0]


def phase(h, a, kind, variant):
    res = {"variant": variant, "kind": kind, "victim_bytes": a.victim_size}
    tag = B.phase_tag(a, kind or "alone", variant)
    argv = env = None
    if kind == "odirect":
        argv = ["fio", "--name=odirect", "--ioengine=psync", "--rw=read", "--direct=1", "--bs=1M",
                "--filename=%s" % ":".join(a.stream_files), "--output=/dev/null"]
    elif kind:
        argv, env, why = h.wrap(variant, [sys.executable, "-c", LOADER, kind] + a.stream_files, None, tag)
        if why:
            res["skip"] = why
            return res
    for f in a.stream_files + [a.victim_file]:
        B.evict(f)
    # Warm the victim from inside the cgroup: cache is charged to the
    # cgroup that first reads it.
    h.run(["cat", a.victim_file], stdout=None)
    hd = h.start_daemon(variant, tag)
    m = B.Meter(h)
    vout = os.path.join(a.log_dir, tag + ".victim.json")
    log("phase %s %s" % (KINDS.get(kind, kind or ""), B.LABELS.get(variant, variant)))
    try:
        runtime = a.alone_seconds if variant in B.ALONE else 3600
        v = h.spawn(victim_argv(a, vout, runtime), cpus=a.victim_cpus)
        B.wait_ready(lambda: tree_syscr(v.pid) > 1000, v)
        smp = B.Sampler(h, [a.victim_file], a.stream_files, lambda: tree_syscr(v.pid),
                        a.sample_ms / 1000.0)
        m.start()
        smp.start()
        t0 = time.monotonic()
        if argv:
            h.stream(variant, argv, env, tag, kind)
            t1 = time.monotonic()
            v.send_signal(signal.SIGINT)
        v.wait(timeout=120)
        t1 = time.monotonic() if not argv else t1
        res["samples"] = smp.stop()
        res["meter"] = m.stop()
        if argv and a.cpu_phase and variant in B.CPU_VARIANTS and kind != "odirect":
            def prepare():
                for f in a.stream_files:
                    B.evict(f)
            res["stream_alone"] = h.stream_alone(variant, argv, env, tag, kind, h.scratch, prepare)
    finally:
        h.stop_daemon(hd)
        h.kill_all()
    job = fio_job(vout)
    r = job["read"]
    p = r["clat_ns"]["percentile"]
    res.update({"victim_thr": r["iops"], "victim_disk": None,
                "lat": (p["50.000000"] / 1e3, p["99.000000"] / 1e3, p["99.900000"] / 1e3),
                "stream_bytes": a.stream_total if argv else None, "stream_s": t1 - t0})
    if variant in ("shim", "daemon"):
        res["shim_stats"] = h.shim_stats(tag)
    log("  victim %.0f IOPS p99 %.1fus%s" % (r["iops"], res["lat"][1],
                                            ", stream %.0f MB/s" % (a.stream_total / (t1 - t0) / 1e6)
                                            if argv else ""))
    return res


def body(h, a):
    a.victim_file = os.path.join(h.scratch, "victim.dat")
    a.stream_files = [os.path.join(h.scratch, "shard%02d.dat" % i) for i in range(a.files)]
    write_file(a.victim_file, a.victim_size)
    for f in a.stream_files:
        write_file(f, a.file_size)
    a.stream_total = a.files * a.file_size
    odirect, allres = B.repeated_phases(a, lambda kind, v: phase(h, a, kind, v), a.kinds)
    for kind, res in allres:
        print()
        print("loader: %s over %d x %s next to fio 4 KiB random reads over a warm %s, cgroup %s" % (
            KINDS[kind], a.files, B.fmt_bytes(a.file_size), B.fmt_bytes(a.victim_size),
            B.fmt_bytes(a.limit)))
        B.report(res, "IOPS", "us", odirect=odirect,
                 note="O_DIRECT reference (fio --direct=1 over the same files): victim %.0f IOPS, "
                 "p99 %.1f us, stream %.0f MB/s" % (
                     odirect["victim_thr"], odirect["lat"][1],
                     odirect["stream_bytes"] / odirect["stream_s"] / 1e6))
        if a.png:
            root, ext = os.path.splitext(a.png)
            path = a.png if len(allres) == 1 else "%s-%s%s" % (root, kind, ext or ".png")
            B.plot(res, path, "loader (%s) next to fio random reads, cgroup %s" % (
                KINDS[kind], B.fmt_bytes(a.limit)), "victim IOPS")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    B.add_common_args(ap, GiB, "smaller files, shorter phases (~3 minutes)")
    ap.add_argument("--kinds", default="mmap,read", help="loader kinds: mmap,read (default both)")
    ap.add_argument("--victim-size", type=B.parse_size, default=None, help="victim's file (512M; quick 256M)")
    ap.add_argument("--files", type=int, default=None, help="files the loader reads (4; quick 2)")
    ap.add_argument("--file-size", type=B.parse_size, default=None, help="size of each (1G; quick 512M)")
    ap.add_argument("--alone-seconds", type=int, default=None, help="victim alone (10; quick 5)")
    a = ap.parse_args()
    q = a.quick
    if q and a.limit == GiB:
        a.limit = 512 * MiB
    a.victim_size = a.victim_size or (256 * MiB if q else 512 * MiB)
    a.files = a.files or (2 if q else 4)
    a.file_size = a.file_size or (512 * MiB if q else GiB)
    a.alone_seconds = a.alone_seconds or (5 if q else 10)
    a.kinds = [k for k in a.kinds.split(",") if k]
    for k in a.kinds:
        if k not in KINDS:
            raise SystemExit("unknown kind %r" % k)
    B.finish_args(a)
    return B.main_wrapper(a, "loader", lambda h: body(h, a))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Anonymous-memory churn next to a file stream, in one memory cgroup
(see tests/bench/README.md).

The scenario of the 2011 memcg async-reclaim thread: in a 300 MiB cgroup a
program maps 200 MiB of anonymous memory, writes every page and unmaps it,
again and again, while `cat` loops over a 1 GiB file that is cold at the
start.  Every page cat reads is charged to the cgroup, so the churning
program's page faults find the cgroup full and reclaim cat's cache in their
own context.  The two are pinned to different CPUs so that what is measured
is memory (reclaim in the fault path), not CPU sharing.  The figure is the
program's time for a fixed number of rounds with the stream / alone.
"""

import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402
from benchlib import GiB, MiB, log  # noqa: E402

# The churning program: one line per round (seconds), progress in a file the
# sampler reads.  memset through ctypes: every page faulted at C speed.
CHURN = r"""
import ctypes, mmap, os, sys, time
size, rounds, prog = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
fd = os.open(prog, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
out = []
for i in range(rounds):
    t = time.monotonic()
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    ctypes.memset(ctypes.addressof(ctypes.c_char.from_buffer(m)), 1, size)
    m.close()
    out.append(time.monotonic() - t)
    os.pwrite(fd, b"%12d\n" % (i + 1), 0)
print("\n".join("%.6f" % x for x in out))
"""


# cat, its output through pv when --stream-rate limits it (pv reads a pipe,
# which the library leaves alone).
STREAM_SH = 'if [ "$3" = 0 ]; then cat "$2" > /dev/null; else cat "$2" | pv -q -L "$3" > /dev/null; fi'


def stream_argv(a):
    return ["sh", "-c", STREAM_SH, "sh", "-", a.file, a.rate]


def cat_progress(sh_pid):
    """Bytes the running cat under sh_pid has read (rchar), 0 if gone."""
    try:
        for tid in os.listdir("/proc/%d/task" % sh_pid):
            for child in open("/proc/%d/task/%s/children" % (sh_pid, tid)).read().split():
                if open("/proc/%s/comm" % child).read().strip() == "cat":
                    for line in open("/proc/%s/io" % child):
                        if line.startswith("rchar:"):
                            return int(line.split()[1])
    except OSError:
        pass
    return 0


def phase(h, a, variant):
    res = {"variant": variant, "victim_bytes": None}
    tag = B.phase_tag(a, "churn", variant)
    cat_argv, env, why = (None, None, None)
    if variant not in B.ALONE:
        cat_argv, env, why = h.wrap(variant, stream_argv(a), None, tag)
        if why:
            res["skip"] = why
            return res
    left = B.evict(a.file)
    if left:
        log("warning: %s of the file still cached" % B.fmt_bytes(left))
    prog = os.path.join(h.scratch, "churn.progress")
    progress = B.progress_counter(prog)
    hd = h.start_daemon(variant, tag)
    m = B.Meter(h)
    log("phase %s" % B.LABELS[variant])
    try:
        m.start()
        smp = B.Sampler(h, [], [a.file], progress, a.sample_ms / 1000.0)
        smp.start()
        outp = os.path.join(a.log_dir, tag + ".out")
        with open(outp, "w") as out:
            churn = h.spawn([sys.executable, "-c", CHURN, str(a.anon), str(a.rounds), prog],
                            cpus=a.victim_cpus, stdout=out)
            streamed, cat, t0 = 0, None, time.monotonic()
            while churn.poll() is None:
                if cat_argv and (cat is None or cat.poll() is not None):
                    if cat is not None:
                        if cat.returncode:
                            raise RuntimeError("cat exited %d" % cat.returncode)
                        streamed += a.file_size
                    cat = h.spawn(cat_argv, env=env, cg=h.stream_cg(variant),
                                  cpus=a.stream_cpus)
                time.sleep(0.05)
            t1 = time.monotonic()
            if cat is not None:
                streamed += cat_progress(cat.pid)
        res["samples"] = smp.stop()
        res["meter"] = m.stop()
        if churn.returncode:
            raise RuntimeError("churn program exited %d" % churn.returncode)
        if cat_argv and a.cpu_phase and variant in B.CPU_VARIANTS:
            # cat without the program, for CPU per GB of its own: each run
            # from a cold file, and without pv, whose pipe copy stands in
            # for a disk's pace next to the program and, the same in every
            # variant, would otherwise be most of the figure.
            h.kill_all()
            cat_alone = h.wrap(variant, ["sh", "-c", 'cat "$1" > /dev/null', "sh", a.file], None, tag)
            res["stream_alone"] = h.stream_alone(variant, cat_alone[0], cat_alone[1], tag, "cat",
                                                 h.scratch, lambda: B.evict(a.file))
            res["stream_alone_bytes"] = a.file_size      # per run
    finally:
        h.stop_daemon(hd)
        h.kill_all()
    rounds = [float(x) for x in open(outp).read().split()]
    tot = sum(rounds)
    res.update({"victim_thr": len(rounds) / tot, "total_s": tot,
                "lat": tuple(B.pct(rounds, q) * 1000 for q in (50, 99, 99.9)),
                "stream_bytes": streamed if cat_argv else None, "stream_s": t1 - t0})
    if variant in ("shim", "daemon"):
        res["shim_stats"] = h.shim_stats(tag)
    log("  %d rounds in %.2fs; streamed %s" % (len(rounds), tot, B.fmt_bytes(streamed)))
    return res


def body(h, a):
    a.file = os.path.join(h.scratch, "stream.dat")
    log("writing %s (%s)" % (a.file, B.fmt_bytes(a.file_size)))
    with open(a.file, "wb") as f:
        chunk = os.urandom(MiB)
        for _ in range(a.file_size // MiB):
            f.write(chunk)
        os.fsync(f.fileno())
    _, [(_, res)] = B.repeated_phases(a, lambda kind, v: phase(h, a, v), ["cat"], odirect=False)
    print()
    print("anon_churn: %d rounds of mmap %s anonymous + write every page + munmap, cgroup %s; "
          "cat over a %s file (cold at start) looping on another CPU" % (
              a.rounds, B.fmt_bytes(a.anon), B.fmt_bytes(a.limit), B.fmt_bytes(a.file_size)))
    B.report(res, "rounds/s", "ms per round")
    alone = min((r for r in res if r["variant"] in B.ALONE), key=lambda r: r["total_s"])
    for r in res:
        if r.get("skip") or r["variant"] in B.ALONE:
            continue
        x = r["total_s"] / alone["total_s"]
        line = "%s: anonymous-memory program's time with the stream / alone = %.3f (%.2fs / %.2fs)" % (
            B.LABELS[r["variant"]], x, r["total_s"], alone["total_s"])
        if r["variant"] in ("shim", "daemon"):
            print("%s  %s (target <= 1.05)" % ("PASS" if x <= 1.05 else "MISS", line))
        else:
            print("      %s" % line)
    if a.png:
        B.plot(res, a.png, "anon churn (%s anon, cgroup %s) next to cat looping over %s" % (
            B.fmt_bytes(a.anon), B.fmt_bytes(a.limit), B.fmt_bytes(a.file_size)), "rounds/s",
               stall_s=float("inf"))     # progress comes once per round


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    B.add_common_args(ap, 300 * MiB, "fewer rounds (~2 minutes in all)")
    ap.add_argument("--anon", type=B.parse_size, default=200 * MiB, help="anonymous memory per round (200M)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds per phase (default 100; quick 25)")
    ap.add_argument("--file-size", type=B.parse_size, default=GiB, help="the streamed file (1G)")
    ap.add_argument("--stream-rate", default="500M",
                    help="cat's output rate through pv -L, the same in every variant (500M; 0: "
                    "unlimited).  A virtual disk served from the host's cache streams at memory "
                    "speed, and a faster stream then costs the program memory bandwidth")
    a = ap.parse_args()
    a.rate = "0" if a.stream_rate in ("0", "") else str(B.parse_size(a.stream_rate))
    if a.rate != "0" and not shutil.which("pv"):
        raise SystemExit("--stream-rate needs pv (scripts/bench-deps.sh), or --stream-rate 0")
    B.finish_args(a)
    a.rounds = a.rounds or (25 if a.quick else 100)
    if not a.victim_cpus:      # benchlib pins them apart when it can
        raise SystemExit("needs 2 CPUs and no --no-pin: the program and the stream are pinned apart")
    return B.main_wrapper(a, "churn", lambda h: body(h, a))


if __name__ == "__main__":
    sys.exit(main())

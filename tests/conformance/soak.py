#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Soak: the corpus and long-lived streaming hosts under the shim for N
minutes.  Not part of `meson test` (it takes half an hour by default).

    soak.py [--minutes 30] [--sample 10]

Needs the same environment as the conformance tests (MADVSEQ_LIB or
MADVSEQ_PRELOAD, MADVSEQD and MADVSEQCTL, MADVSEQ_TEST_DIR), e.g.
    meson devenv -C build true  # or export them by hand, see meson.build

Runs at the same time:
  - host 'threads' (soak_host.py) under MADVSEQ_READ=all with a madvseqd
    on a private socket: threads streaming through mmap+MADV_SEQUENTIAL and
    read(), SIGALRM every 3 ms, forked children leaving by _exit and exit,
    children started by fork+exec and posix_spawn;
  - host 'threads' again, MADVSEQ_READ=advised, the engine in-process,
    MADVSEQ_LAG=2M (the engine drops behind every stream);
  - host 'exec' under MADVSEQ_READ=all and MADVSEQ_LAG=2M: a round of
    streams, then it execs itself (same pid);
  - the corpus in a loop, each case in turn under the next read mode
    (off, advised, all, all with madvseqd), compared with its run without
    the shim made at the start.
Every --sample seconds it reads each host's descriptor count
(/proc/PID/fd), VmRSS and RssAnon.  It reports hangs (a host with no round for
180 s, a corpus run past its timeout), crashes (a host or program ended
by a signal, or a host that exited), output differences, and growth:
descriptors at the end more than 2 above those after the first minute, or
anonymous resident memory (RssAnon: VmRSS also counts the pages of the
file being streamed) grown by more than 10% + 8 MiB.  Exit 0 when there is none of
these, 1 otherwise."""

import argparse
import hashlib
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

import corpus
import corpus_data
from conformance import HERE, PLAIN, Daemon, scratch, shim_env, stats_dir

HOST_STALL = 180


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def proc_sample(pid):
    """(descriptors, VmRSS KiB, RssAnon KiB) of a live process, or None."""
    try:
        fds = len(os.listdir("/proc/%d/fd" % pid))
        rss = anon = 0
        for line in open("/proc/%d/status" % pid):
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("RssAnon:"):
                anon = int(line.split()[1])
        return fds, rss, anon
    except (FileNotFoundError, ProcessLookupError):
        return None


class Host:
    def __init__(self, name, mode, env, files, wd):
        self.name, self.mode, self.env, self.files = name, mode, env, files
        self.log = os.path.join(wd, "host-%s.log" % name)
        self.rounds = self.bad = self.crashes = self.hangs = self.restarts = 0
        self.samples = []  # (seconds since start, fds, VmRSS KiB, RssAnon KiB)
        self.problems = []
        self.last_round = time.monotonic()
        self.start()

    def start(self):
        args = ["%s:%s" % f for f in self.files]
        self.p = subprocess.Popen([corpus_data.PYTHON, os.path.join(HERE, "soak_host.py"), self.mode]
                                  + args, env=self.env, stdout=subprocess.PIPE,
                                  stderr=open(self.log, "a"), text=True, start_new_session=True)
        self.last_round = time.monotonic()
        self.reader = threading.Thread(target=self._read, args=(self.p,), daemon=True)
        self.reader.start()

    def _read(self, p):
        for line in p.stdout:
            line = line.rstrip("\n")
            if line.startswith("round "):
                self.rounds += 1
                self.last_round = time.monotonic()
                if " BAD " in line:
                    self.bad += 1
                    self.problems.append("%s: %s" % (self.name, line))
            elif line:
                self.problems.append("%s said: %s" % (self.name, line))

    def check(self, t0):
        """Called every sample period: liveness, crash, sample."""
        rc = self.p.poll()
        if rc is not None:
            self.crashes += 1
            self.problems.append("%s ended with status %d (%s) after %d rounds; stderr in %s" % (
                self.name, rc, "signal %d" % -rc if rc < 0 else "exit", self.rounds, self.log))
            self.restarts += 1
            self.start()
            return
        if time.monotonic() - self.last_round > HOST_STALL:
            self.hangs += 1
            stacks = []
            for tid in os.listdir("/proc/%d/task" % self.p.pid):
                try:
                    stacks.append("%s %s" % (tid, open("/proc/%d/task/%s/wchan" % (self.p.pid, tid)).read()))
                except OSError:
                    pass
            self.problems.append("%s: no round for %d s (hang); threads' wchan: %s" % (
                self.name, HOST_STALL, ", ".join(stacks)))
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
            self.restarts += 1
            self.start()
            return
        s = proc_sample(self.p.pid)
        if s:
            self.samples.append((time.monotonic() - t0,) + s)

    def stop(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
        self.p.wait()

    def growth(self):
        """Medians over the first and last fifth of the samples (the first
        minute left out): (fds, fds', fd max, VmRSS, VmRSS', RssAnon,
        RssAnon', grew?).  VmRSS counts the mapped file pages of the
        stream of the moment; growth is judged on RssAnon (the heap)."""
        s = [x for x in self.samples if x[0] >= 60] or self.samples
        if len(s) < 4:
            return None
        k = max(2, len(s) // 5)

        def med(i, part):
            return statistics.median(x[i] for x in part)
        first, last = s[:k], s[-k:]
        fd0, fd1, r0, r1, a0, a1 = (med(1, first), med(1, last), med(2, first), med(2, last),
                                    med(3, first), med(3, last))
        # (a round holds a few descriptors for a while: a leak of one per
        # round shows as hundreds; exec starts a new heap each round)
        grew = fd1 > fd0 + 2 or (self.mode == "threads" and a1 > a0 * 1.10 + 8192)
        return fd0, fd1, max(x[1] for x in s), r0, r1, a0, a1, grew


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--sample", type=float, default=10)
    a = ap.parse_args()

    data = corpus_data.ensure()
    wd = scratch("soak")
    print("scratch: %s" % wd, flush=True)
    stats = stats_dir(wd)
    daemon = Daemon(wd)
    files = [(os.path.join(data, n), sha256(os.path.join(data, n)))
             for n in ("blob.bin", "text.txt", "tree/big.bin")]

    cases = [n for n in corpus.CASES if not corpus.available(n)]
    print("corpus cases: %s" % " ".join(cases), flush=True)
    ref = {n: corpus.run_case(n, data, wd, corpus.env_for(PLAIN, daemon, stats), "ref") for n in cases}

    hosts = [
        Host("threads-all-daemon", "threads",
             shim_env("all", stats=stats, socket=daemon.sock), files, wd),
        # (the smallest lag: the engine drops behind every stream of these)
        Host("threads-advised", "threads", shim_env("advised", stats=stats, MADVSEQ_LAG="2M"),
             files, wd),
        Host("exec-all", "exec", shim_env("all", stats=stats, MADVSEQ_LAG="2M"), files, wd),
    ]
    t0 = time.monotonic()
    end = t0 + a.minutes * 60
    stop = threading.Event()

    def sampler():
        while not stop.wait(a.sample):
            for h in hosts:
                h.check(t0)
    threading.Thread(target=sampler, daemon=True).start()

    modes = ["off", "advised", "all", "all+daemon"]
    runs = diffs = hangs = crashes = 0
    problems = []
    i = 0
    while time.monotonic() < end:
        n = cases[i % len(cases)]
        m = modes[(i // len(cases)) % len(modes)]
        i += 1
        r = corpus.run_case(n, data, wd, corpus.env_for(m, daemon, stats), "soak")
        runs += 1
        if r.rc is None:
            hangs += 1
            problems.append("corpus %s under %s: hang (killed after %d s)" % (n, m, corpus.TIMEOUT))
        elif r.rc < 0:
            crashes += 1
            problems.append("corpus %s under %s: killed by signal %d" % (n, m, -r.rc))
        elif r.key() != ref[n].key():
            diffs += 1
            problems.append("corpus %s under %s: exit %d (without: %d), output %s (without: %s)" % (
                n, m, r.rc, ref[n].rc, r.digest[:12], ref[n].digest[:12]))
        if runs % 20 == 0:
            print("%4.0f s: %d corpus runs; host rounds %s" % (
                time.monotonic() - t0, runs, ", ".join("%s %d" % (h.name, h.rounds) for h in hosts)),
                flush=True)
    stop.set()
    time.sleep(0.1)
    for h in hosts:
        h.check(t0)
        h.stop()
    problem = daemon.stop()
    if problem:
        problems.append(problem)

    print("\nsoak: %.1f minutes" % ((time.monotonic() - t0) / 60))
    print("corpus: %d runs of %d cases, %d hangs, %d crashes, %d differences" % (
        runs, len(cases), hangs, crashes, diffs))
    grew = False
    print("%-20s %6s %4s %5s %7s %13s %6s %19s %19s" % (
        "host", "rounds", "bad", "hangs", "crashes", "fds first-last", "max", "VmRSS first-last",
        "RssAnon first-last"))
    for h in hosts:
        g = h.growth()
        problems.extend(h.problems)
        if g:
            grew |= g[7]
            print("%-20s %6d %4d %5d %7d %6.0f - %4.0f %6d %7.0fK - %7.0fK %7.0fK - %7.0fK%s" % (
                h.name, h.rounds, h.bad, h.hangs, h.crashes, g[0], g[1], g[2], g[3], g[4], g[5],
                g[6], "  GROWTH" if g[7] else ""))
        else:
            print("%-20s %6d %4d %5d %7d   (too few samples)" % (h.name, h.rounds, h.bad, h.hangs,
                                                             h.crashes))
    bad = hangs + crashes + diffs + sum(h.bad + h.hangs + h.crashes for h in hosts) + grew + bool(problem)
    for p in problems[:50]:
        print("PROBLEM " + p)
    print("\n%d problem(s)" % bad)
    if not bad:
        subprocess.run(["rm", "-rf", wd])
    else:
        print("logs kept in %s" % wd)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

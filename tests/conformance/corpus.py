#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Real programs on real data, with and without the shim.

    corpus.py [CASE...] [--reps N] [--list]

Each case runs one program (cp, tar, rsync, git, sqlite3, gzip, xz, zstd,
perl, python, java, node, make, sort, ...) on generated data of a few tens
of MiB: without the shim, then under it with MADVSEQ_READ=off, advised and
all (the engine in-process), and with MADVSEQ_READ=all handing its regions
to a madvseqd on a private socket.  Every run must give the same exit code
and byte-identical output (a SHA-256 over the files it wrote and its
stdout) as the run without the shim, within a timeout (a hang fails).
The case is run once more without the shim first, untimed: it warms the
page cache and proves the case itself is deterministic.

The time of each run is printed, and two ratios to the runs without the
shim: of the medians and of the fastest of --reps runs (interleaved, each
repetition starting with another mode, after a sync).  Timing is noisy
on a shared machine: a ratio of fastest runs above 1.2 is flagged in the
table but does not fail.

Exit 0 when every case that ran is identical, 1 when one differs or
hangs, 77 when no case could run (the programs it needs are missing)."""

import argparse
import difflib
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import time

from conformance import (PLAIN, READ_MODES, Daemon, fmt_totals, plain_env, scratch, shim_env, skip,
                         stats_dir, stats_totals)
import corpus_data

TIMEOUT = 180          # seconds for one run: beyond it, the run hangs
SLOW = 1.2             # the ratio flagged in the table

# name: (programs it needs, shell command).  $D is the data directory
# (read-only for the programs), $O the run's output directory (its cwd).
CASES = {
    "cp": (["cp"], "cp $D/blob.bin $O/blob.bin && cp -r $D/tree $O/tree"),
    "sha256sum": (["sha256sum"], "sha256sum $D/blob.bin $D/text.txt $D/tree.tar"),
    "tar-create": (["tar"], "tar -C $D --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner "
                            "-cf $O/tree.tar tree"),
    "tar-extract": (["tar"], "tar -C $O -xf $D/tree.tar && tar -tvf $D/tree.tar | wc -l"),
    "rsync": (["rsync"], "rsync -a $D/tree/ $O/tree/ && rsync -a --checksum --itemize-changes "
                         "$D/tree/ $O/tree/"),
    "gzip": (["gzip"], "gzip -n -1 -c $D/text.txt > $O/text.gz && gzip -dc $O/text.gz | sha256sum"),
    "xz": (["xz"], "xz -T1 -0 -c $D/text-8m.txt > $O/text.xz && xz -dc $O/text.xz | sha256sum"),
    "zstd": (["zstd"], "zstd -q -T1 -3 -c $D/text.txt > $O/text.zst && "
                       "zstd -q -dc $O/text.zst | sha256sum"),
    "bzip2": (["bzip2"], "bzip2 -1 -c $D/text-8m.txt > $O/text.bz2 && bzip2 -dc $O/text.bz2 | sha256sum"),
    # (.git holds times and pack names that change from run to run: its
    # result is what git prints of it, and the checked-out files)
    "git": (["git"], "git clone -q --no-local $D/repo $O/clone && cd $O/clone && "
                     "git -c pack.threads=1 gc -q && git fsck --full --no-progress && "
                     "git rev-list --objects --all && "
                     "git archive --format=tar HEAD | sha256sum && git log --format='%H %s' && "
                     "git status --porcelain && find . -path ./.git -prune -o -type f -print | "
                     "sort | xargs sha256sum | sha256sum && cd $O && rm -rf clone"),
    "sqlite3": (["sqlite3"], "sqlite3 $D/db.sqlite .dump > $O/dump.sql && cp $D/db.sqlite $O/v.sqlite && "
                             "sqlite3 $O/v.sqlite 'DELETE FROM words WHERE n % 3 = 0; VACUUM;' && "
                             "sqlite3 $O/v.sqlite 'PRAGMA integrity_check; SELECT count(*), sum(n) FROM words;'"),
    "perl": (["perl"], "perl $D/scripts/words.pl $D/text.txt"),
    "python": ([corpus_data.PYTHON], corpus_data.PYTHON + " $D/scripts/mmapsum.py $D/blob.bin $D/text.txt"),
    # System calls at their edges (overlapping copy_file_range, EBADF,
    # EISDIR, ESPIPE, O_APPEND, past EOF) on a copy of text.txt.
    "edges": ([corpus_data.PYTHON], corpus_data.PYTHON + " $D/scripts/edges.py $D/text.txt $O/work"),
    "java": (["java", "javac"], "java -Xshare:auto -cp $D/java Sum $D/blob.bin $D/text.txt"),
    "node": (["node"], "node $D/scripts/sum.js $D/blob.bin $D/text.txt $O/text.gz"),
    "make": (["make", "gzip"], "make -s -j2 -f $D/make/Makefile D=$D"),
    "sort": (["sort"], "LC_ALL=C sort -S 8M --parallel=2 -T $O $D/text-16m.txt | sha256sum"),
    "dd": (["dd"], "dd if=$D/blob.bin of=$O/dd.bin bs=64k status=none && "
                   "dd if=$D/text.txt bs=1M status=none | sha256sum"),
}

# The runs of one case: name, environment maker (called with the daemon).
MODES = [PLAIN] + list(READ_MODES) + ["all+daemon"]


def env_for(mode, daemon, stats):
    if mode == PLAIN:
        return plain_env(LC_ALL="C")
    if mode == "all+daemon":
        return shim_env("all", stats=stats, socket=daemon.sock, LC_ALL="C")
    return shim_env(mode, stats=stats, LC_ALL="C")


def tree_digest(top):
    """SHA-256 over the names, kinds and contents of everything under top
    (not times or owners: a rerun of the same program changes those)."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(top):
        dirs.sort()
        for n in sorted(files) + [d + "/" for d in dirs]:
            p = os.path.join(root, n.rstrip("/"))
            rel = os.path.relpath(p, top)
            h.update(rel.encode() + b"\0")
            if os.path.islink(p):
                h.update(b"L" + os.readlink(p).encode())
            elif n.endswith("/"):
                h.update(b"D")
            else:
                h.update(b"F%o" % (os.stat(p).st_mode & 0o111))
                with open(p, "rb") as f:
                    for b in iter(lambda: f.read(1 << 20), b""):
                        h.update(b)
            h.update(b"\0")
    return h.hexdigest()


class Run:
    def __init__(self, rc, out_digest, stdout, stderr, secs):
        self.rc, self.digest, self.stdout, self.stderr, self.secs = rc, out_digest, stdout, stderr, secs

    def key(self):
        return (self.rc, self.digest, hashlib.sha256(self.stdout).hexdigest())


def run_case(name, data, wd, env, tag):
    """One run of a case in a fresh output directory; rc None: a hang."""
    out = os.path.join(wd, "%s.%s" % (name, tag))
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cmd = CASES[name][1].replace("$D", data).replace("$O", out)
    # The previous run's output is written back now, not in this run's
    # time (tar -x leaves 50 MiB dirty).
    os.sync()
    t = time.monotonic()
    # A session of its own, so that a hang is killed with all it started.
    p = subprocess.Popen(["sh", "-c", "set -e; " + cmd], cwd=out, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        so, se = p.communicate(timeout=TIMEOUT)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        so, se = p.communicate()
        rc = None
    secs = time.monotonic() - t
    digest = tree_digest(out)
    shutil.rmtree(out, ignore_errors=True)
    return Run(rc, digest, so, se, secs)


def available(name):
    missing = [p for p in CASES[name][0] if not shutil.which(p)]
    return missing


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        print("\n".join(CASES))
        return
    names = a.cases or list(CASES)
    for n in names:
        if n not in CASES:
            print("unknown case %s; cases: %s" % (n, " ".join(CASES)))
            sys.exit(2)
    runnable = []
    for n in names:
        missing = available(n)
        if missing:
            print("SKIP %s: %s not installed (scripts/deps.sh installs it)" % (n, " ".join(missing)))
        else:
            runnable.append(n)
    if not runnable:
        skip("no case can run")

    data = corpus_data.ensure()
    wd = scratch("corpus")
    stats = stats_dir(wd)
    daemon = Daemon(wd)
    failed = []
    rows = []
    try:
        for n in runnable:
            warm = run_case(n, data, wd, env_for(PLAIN, daemon, stats), "warm")
            runs = {m: [] for m in MODES}
            for rep in range(a.reps):
                # Each repetition starts with another mode: the first run
                # after the previous case's clean-up is slower, whichever
                # it is.
                for m in MODES[rep % len(MODES):] + MODES[:rep % len(MODES)]:
                    runs[m].append(run_case(n, data, wd, env_for(m, daemon, stats), m))
            ref = runs[PLAIN][0]
            if warm.key() != ref.key():
                print("FAIL %s is not deterministic without the shim: exit %s/%s, output %s/%s"
                      % (n, warm.rc, ref.rc, warm.digest[:12], ref.digest[:12]))
                failed.append(n + " (not deterministic)")
            if ref.rc != 0:
                print("note: %s exits %s without the shim:\n%s" % (n, ref.rc, ref.stderr.decode(errors="replace")[-2000:]))
            base = statistics.median(r.secs for r in runs[PLAIN])
            fastest = min(r.secs for r in runs[PLAIN])
            for m in MODES:
                same = all(r.key() == ref.key() for r in runs[m])
                hung = any(r.rc is None for r in runs[m])
                med = statistics.median(r.secs for r in runs[m])
                ratio = med / base if base > 0 else 0.0
                fratio = min(r.secs for r in runs[m]) / fastest if fastest > 0 else 0.0
                rcs = ",".join("hang" if r.rc is None else str(r.rc) for r in runs[m])
                rows.append((n, m, "yes" if same else "NO", rcs, med, ratio, fratio))
                if m != PLAIN and (not same or hung):
                    bad = next(r for r in runs[m] if r.key() != ref.key() or r.rc is None)
                    failed.append("%s/%s" % (n, m))
                    print("FAIL %s under MADVSEQ_READ=%s: %s" % (
                        n, m, "hang (killed after %d s)" % TIMEOUT if bad.rc is None else
                        "exit %s (without: %s), output %s (without: %s), stdout %s" % (
                            bad.rc, ref.rc, bad.digest[:12], ref.digest[:12],
                            "same" if bad.stdout == ref.stdout else "differs")))
                    print("  its stderr: %s" % bad.stderr.decode(errors="replace")[-2000:])
                    if bad.stdout != ref.stdout:
                        diff = difflib.unified_diff(
                            ref.stdout.decode(errors="replace").splitlines(),
                            bad.stdout.decode(errors="replace").splitlines(),
                            "stdout without the shim", "stdout with it", n=0, lineterm="")
                        print("\n".join("  " + l for l in list(diff)[:40]))
            print("%s: done (%s)" % (n, ", ".join(
                "%s %.2fs" % (m, statistics.median(r.secs for r in runs[m])) for m in MODES)), flush=True)
    finally:
        problem = daemon.stop()
    if problem:
        print("FAIL " + problem)
        failed.append("madvseqd")

    # Two ratios to the runs without the shim: of the medians, and of the
    # fastest runs.  Noise on a shared machine only adds time, so the
    # fastest run is the nearest to a program's own cost: "(slow)" marks
    # a ratio of fastest runs above SLOW.
    print("\n%-12s %-11s %-10s %-10s %8s %8s %8s" % ("program", "mode", "identical", "exit", "median s",
                                                     "x median", "x fastest"))
    for n, m, same, rcs, med, ratio, fratio in rows:
        print("%-12s %-11s %-10s %-10s %8.3f %7.2fx %7.2fx%s" % (
            n, m, same, rcs, med, ratio, fratio, "  (slow)" if fratio > SLOW and m != PLAIN else ""))
    shimmed = [r for r in rows if r[1] != PLAIN]
    if shimmed:
        worst_f = max(shimmed, key=lambda r: r[6])
        worst_m = max(shimmed, key=lambda r: r[5])
        print("\nslowest under the shim: %.2fx by fastest runs (%s, %s), %.2fx by medians (%s, %s); "
              "flagged above %.1fx" % (worst_f[6], worst_f[0], worst_f[1], worst_m[5], worst_m[0], worst_m[1],
                                       SLOW))
    print("\nunder the shim, " + fmt_totals(stats_totals(stats)))
    print("%d case(s) ran, %d run(s) each (%s), %d failure(s)%s" % (
        len(runnable), a.reps, ", ".join(MODES), len(failed), (": " + ", ".join(failed)) if failed else ""))
    if failed:
        print("outputs kept in %s" % wd)
    else:
        shutil.rmtree(wd, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""CPython's own regression tests, with and without the shim.

    cpython.py [--set ci|asan|full] [--modules test_a,test_b] [-j N]
               [--baseline-runs N] [--keep]

Runs `python3.11 -m test` (Debian's interpreter and its package
libpython3.11-testsuite, which match) over a set of test modules: first
without the shim, then with it preloaded (MADVSEQ_READ=all, MADVSEQ_STATS
set, a madvseqd on a private socket), and compares the outcome of every
test case (pass, fail, error, skip, expected failure, unexpected success,
by test id from --junit-xml) and of every module.  Exit 0 when the sets
are the same, 1 when not (the differing ids are printed), 77 when the test
suite or the daemon is missing.

A test that is flaky on its own must not pass for the shim's fault, nor
the shim be blamed for it.  Every id whose outcome differs is run again on
its own (regrtest --match), twice without the shim and twice with it:
  - it changed without the shim too: FLAKY, reported, not a failure;
  - it differs under the shim only: a FAILURE (also when the reruns under
    the shim did not repeat it: nothing shows it happens without us).
--baseline-runs 2 runs the whole baseline twice first, and reports every
id whose outcome differed between them as flaky.  Ids known to be flaky on
their own are listed, with the reason, in flaky.txt; their differences are
reported and not counted.

The sets: full is the list the project promises; ci the part of it that
runs in a few minutes on two shared cores; asan the part that runs under
the sanitizer runtimes in that time (see README.md for which and why)."""

import argparse
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

from conformance import (HERE, Daemon, fmt_totals, plain_env, sanitized, scratch, shim_env, skip,
                         stats_dir, stats_totals)

# Debian's interpreter: libpython3.11-testsuite is its own test suite.
PYTHON = "/usr/bin/python3.11"

SETS = {
    "full": ["test_mmap", "test_io", "test_fileio", "test_os", "test_posix", "test_subprocess",
             "test_signal", "test_threading", "test_shutil", "test_tarfile", "test_zipfile",
             "test_tempfile", "test_sqlite3", "test_gzip", "test_bz2", "test_lzma",
             "test_concurrent_futures", "test_multiprocessing_forkserver"],
    "ci": ["test_mmap", "test_fileio", "test_io", "test_os", "test_posix", "test_subprocess",
           "test_shutil", "test_tempfile", "test_sqlite3", "test_gzip", "test_bz2"],
    "asan": ["test_mmap", "test_fileio", "test_shutil", "test_tempfile", "test_gzip"],
}

# Module results as regrtest prints them ("[ 3/18] test_os passed (12 sec)").
_MODULE_LINE = re.compile(r"\[\s*\d+/\d+(?:/\d+)?\] (test_\w+) (.*?)\s*$")
_MODULE_STATES = ["failed (env changed)", "failed (uncaught exception)", "failed",
                  "skipped (resource denied)", "skipped", "passed", "crashed", "timed out",
                  "ran no tests", "interrupted", "finished"]


def module_results(log):
    out = {}
    for line in log.splitlines():
        m = _MODULE_LINE.search(line)
        if not m:
            continue
        rest = m.group(2)
        for state in _MODULE_STATES:
            if rest.startswith(state):
                out[m.group(1)] = state
                break
    return out


def case_results(xml_path):
    """{test id: outcome} from regrtest's --junit-xml file.  A test case
    whose subtests failed carries no name there (the runner records only
    whole-test outcomes); it is counted, per module, as 'unnamed'."""
    out = {}
    if not os.path.exists(xml_path):
        return out
    unnamed = 0
    for tc in ET.parse(xml_path).getroot().iter("testcase"):
        name = tc.get("name")
        if not name:
            unnamed += 1
            out["<testcase without a name #%d: a failed subtest>" % unnamed] = "subtest-fail"
            continue
        tags = {c.tag for c in tc}
        if "error" in tags:
            r = "error"
        elif "failure" in tags:
            r = "fail"
        elif "skipped" in tags:
            r = "skip"
        elif "output" in tags:
            r = "xfail"
        elif tc.find("outcome") is not None or tc.get("outcome") == "UNEXPECTED_SUCCESS":
            r = "xpass"
        else:
            r = "pass"
        # A parametrised id can repeat: keep the worst outcome.
        if out.get(name) not in ("error", "fail"):
            out[name] = r
    return out


def regrtest(wd, tag, env, modules, jobs, match=None, timeout=3600):
    """One regrtest run; returns (module results, case results, seconds)."""
    xml = os.path.join(wd, tag + ".xml")
    logp = os.path.join(wd, tag + ".log")
    tmp = os.path.join(wd, tag + ".tmp")
    cmd = [PYTHON, "-m", "test", "--timeout", "900", "--junit-xml", xml, "--tempdir", tmp]
    if jobs > 1:
        cmd += ["-j", str(jobs)]
    for m in match or ():
        cmd += ["--match", m]
    cmd += modules
    t = time.monotonic()
    with open(logp, "w") as log:
        try:
            subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=wd,
                           timeout=timeout)
        except subprocess.TimeoutExpired:
            log.write("\nHARNESS: regrtest did not finish in %d s (hang)\n" % timeout)
    secs = time.monotonic() - t
    text = open(logp, errors="replace").read()
    subprocess.run(["rm", "-rf", tmp])
    return module_results(text), case_results(xml), secs, text


def counts(cases, module):
    c = {}
    prefix = "test." + module + "."
    for k, v in cases.items():
        if k.startswith(prefix):
            c[v] = c.get(v, 0) + 1
    return c


def fmt_counts(c):
    return " ".join("%s=%d" % (k, c[k]) for k in sorted(c)) or "-"


def known_flaky():
    out = {}
    path = os.path.join(HERE, "flaky.txt")
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#"):
            tid, _, why = line.partition(" ")
            out[tid] = why.strip()
    return out


def module_of(tid):
    parts = tid.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "test" else None


def main():
    global PYTHON
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", choices=sorted(SETS),
                    help="default: asan under the sanitizer runtimes, else ci")
    ap.add_argument("--modules")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--baseline-runs", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the logs and XML files")
    ap.add_argument("--python", default=PYTHON,
                    help="the interpreter (its own test suite is run); default " + PYTHON)
    a = ap.parse_args()
    PYTHON = a.python
    a.set = a.set or ("asan" if sanitized() else "ci")
    modules = a.modules.split(",") if a.modules else SETS[a.set]

    if not os.path.exists(PYTHON):
        skip("%s is not installed" % PYTHON)
    if subprocess.run([PYTHON, "-c", "import test.test_mmap, test.libregrtest"],
                      env=plain_env(), capture_output=True).returncode != 0:
        skip("CPython's test suite is not installed (Debian package libpython3.11-testsuite)")

    # Debian's libpython3.11-testsuite does not ship every module (it has
    # no test_sqlite3): such a module is left out, and said so.
    present = []
    for m in modules:
        if subprocess.run([PYTHON, "-c", "import test.%s" % m], env=plain_env(),
                          capture_output=True).returncode == 0:
            present.append(m)
        else:
            print("NOT RUN %s: not in %s's test suite (for test_sqlite3: Debian does not ship it; "
                  "--python can name a CPython 3.11 whose test suite has it)" % (m, PYTHON))
    modules = present
    if not modules:
        skip("none of the modules is in %s's test suite" % PYTHON)

    wd = scratch("cpython")
    stats = stats_dir(wd)  # (before the first run: it opens wd to all users)
    print("scratch: %s" % wd)
    print("modules (%d, set %s): %s" % (len(modules), a.set if not a.modules else "-",
                                        " ".join(modules)), flush=True)

    base_runs = []
    for i in range(a.baseline_runs):
        mr, cr, secs, _ = regrtest(wd, "plain%d" % (i + 1), plain_env(), modules, a.j)
        print("without the shim, run %d: %d test ids in %.0f s" % (i + 1, len(cr), secs), flush=True)
        base_runs.append((mr, cr))

    daemon = Daemon(os.path.join(wd))
    senv = shim_env("all", stats=stats, socket=daemon.sock)
    smr, scr, secs, stext = regrtest(wd, "shim", senv, modules, a.j)
    daemon_alive = daemon.alive()
    daemon_problem = daemon.stop()
    totals = stats_totals(stats)
    nstats = totals["processes"]
    print("with the shim (MADVSEQ_READ=all, MADVSEQ_STATS, madvseqd): %d test ids in %.0f s; %s"
          % (len(scr), secs, fmt_totals(totals)), flush=True)

    bmr, bcr = base_runs[0]
    failed = []
    flaky = {}
    known = known_flaky()
    for i in range(1, len(base_runs)):
        for tid in set(bcr) | set(base_runs[i][1]):
            if bcr.get(tid) != base_runs[i][1].get(tid):
                flaky[tid] = "baseline runs differ: %s / %s" % (bcr.get(tid, "missing"),
                                                                base_runs[i][1].get(tid, "missing"))

    print("\n%-34s %-14s %-14s %s" % ("module", "without", "with shim", "test cases without | with"))
    for m in modules:
        print("%-34s %-14s %-14s %s | %s" % (m, bmr.get(m, "missing"), smr.get(m, "missing"),
                                             fmt_counts(counts(bcr, m)), fmt_counts(counts(scr, m))))

    differing = sorted(t for t in set(bcr) | set(scr) if bcr.get(t) != scr.get(t))
    # Ids that only the failed-subtest marker names cannot be rerun alone.
    rerun = [t for t in differing if module_of(t) and t not in flaky and t not in known]
    if rerun:
        print("\n%d ids differ: rerunning each alone, twice without and twice with the shim"
              % len(rerun), flush=True)
    verdict = {}
    for tid in rerun:
        mod = module_of(tid)
        plain_seen, shim_seen = [], []
        for rep in range(2):
            _, cr, _, _ = regrtest(wd, "rerun-plain", plain_env(), [mod], 1, match=[tid])
            plain_seen.append(cr.get(tid, "missing"))
            d = Daemon(wd)
            _, cr, _, _ = regrtest(wd, "rerun-shim", shim_env("all", stats=stats, socket=d.sock),
                                   [mod], 1, match=[tid])
            d.stop()
            shim_seen.append(cr.get(tid, "missing"))
        verdict[tid] = (plain_seen, shim_seen)

    print()
    for tid in differing:
        line = "%s: without %s, with shim %s" % (tid, bcr.get(tid, "missing"), scr.get(tid, "missing"))
        if tid in flaky:
            print("FLAKY (on its own) " + line + "; " + flaky[tid])
        elif tid in known:
            print("FLAKY (known, flaky.txt) " + line + "; " + known[tid])
        elif tid in verdict:
            p, s = verdict[tid]
            detail = "; alone: without %s, with %s" % ("/".join(p), "/".join(s))
            if any(x != bcr.get(tid, "missing") for x in p):
                print("FLAKY (changed without the shim) " + line + detail)
            else:
                print("DIFFERS " + line + detail)
                failed.append(tid)
        else:
            print("DIFFERS " + line)
            failed.append(tid)
    for m in modules:
        if bmr.get(m) != smr.get(m) and not any(module_of(t) == m for t in differing):
            # A module whose result changed with no case explaining it: a
            # crash, a timeout, 'env changed', a module-level error.
            print("DIFFERS module %s: without %s, with shim %s" % (m, bmr.get(m, "missing"),
                                                                  smr.get(m, "missing")))
            failed.append(m)
    if "HARNESS: regrtest did not finish" in stext:
        print("FAIL: the run under the shim hung (see %s/shim.log)" % wd)
        failed.append("hang")
    if not daemon_alive or daemon_problem:
        print("FAIL: %s" % (daemon_problem or "madvseqd died"))
        failed.append("daemon")
    if nstats == 0:
        print("FAIL: no process wrote MADVSEQ_STATS: the shim was not loaded")
        failed.append("stats")

    same = len(set(bcr) | set(scr)) - len(differing)
    print("\n%d test ids with the same outcome, %d differ (%d flaky), %d failures"
          % (same, len(differing), len(differing) - len([t for t in failed if t in differing]),
             len(failed)))
    if failed and not a.keep:
        a.keep = True
    if a.keep:
        print("logs kept in %s" % wd)
    else:
        subprocess.run(["rm", "-rf", wd])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

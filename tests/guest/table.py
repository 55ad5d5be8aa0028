#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The guest matrix's table: one row per kernel, MGLRU setting and variant
of the interference scenario, from interference.py's --json files.

  table.py [--min-resident 0.99] KERNEL=DIR...

DIR is a guest's result directory (run-guest.sh --out) holding
scenario-mglru-{n,y,absent}.json.  Prints the table; exits 1 when a row
with libmadvseq (shim, daemon, discovery) or the kernel variant's switch on
kept less than --min-resident of the victim's file resident at its lowest,
when the shim or the daemon did not step aside where the switch was on, or
when a row is missing."""

import argparse
import json
import os
import sys

M = 1 << 20
LABEL = {"kernel": "kernel alone", "shim": "shim", "daemon": "daemon (registered)",
         "discovery": "daemon (discovery)", "kvariant": "kvariant (sysctl)",
         "kvariant-memcg": "kvariant (memcg)", "kvariant-aside": "kvariant+shim+daemon"}
# Rows that must keep the victim: libmadvseq's, and the kernel variant's
# with its switch on.
PROTECTED = ("shim", "daemon", "discovery", "kvariant", "kvariant-memcg", "kvariant-aside")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-resident", type=float, default=0.99)
    ap.add_argument("runs", nargs="+", metavar="KERNEL=DIR")
    a = ap.parse_args()
    for run in a.runs:
        for tag in ("mglru-n", "mglru-y", "mglru-absent"):
            f = os.path.join(run.split("=", 1)[1], "scenario-%s.json" % tag)
            if os.path.exists(f):
                ar = json.load(open(f))["args"]
                print("cgroup %dM; victim: 4 KiB random reads over a warm %dM file%s; "
                      "stream: %dM once (fio mmap + MADV_SEQUENTIAL)" % (
                          ar["limit"] // M, ar["victim_size"] // M,
                          " at %d/s" % ar["victim_rate"] if ar.get("victim_rate") else ", as fast as it can",
                          ar["stream_size"] // M))
                break
        else:
            continue
        break
    fmt = "| %-12s | %-5s | %-20s | %9s | %9s | %8s | %9s | %9s |"
    print(fmt % ("kernel", "MGLRU", "variant", "victim", "victim", "victim", "victim", "stream"))
    print(fmt % ("", "", "", "res. min", "p99 us", "IOPS", "disk rd", "MB/s"))
    print("|" + "|".join("-" * (w + 2) for w in (12, 5, 20, 9, 9, 8, 9, 9)) + "|")
    bad = []
    for run in a.runs:
        kernel, d = run.split("=", 1)
        for tag, mg in (("mglru-n", "off"), ("mglru-y", "on"), ("mglru-absent", "-")):
            f = os.path.join(d, "scenario-%s.json" % tag)
            if not os.path.exists(f):
                if tag != "mglru-absent":
                    bad.append("%s MGLRU %s: no results (%s)" % (kernel, mg, f))
                continue
            j = json.load(open(f))
            size = j["args"]["victim_size"]
            for r in j["results"]:
                variant = r.get("variant") if r.get("kind") else "alone"
                label = LABEL.get(variant, variant)
                if r.get("skip") or r.get("error"):
                    print(fmt % (kernel, mg, label, "-", "-", "-", "-", "-") + " " +
                          (r.get("skip") or r.get("error")))
                    if variant in PROTECTED and not (r.get("skip") or "").startswith("no vm.seq_read"):
                        bad.append("%s MGLRU %s %s: %s" % (kernel, mg, label, r.get("skip") or r.get("error")))
                    continue
                vmin = r.get("victim_cached_min")
                if vmin is None:
                    vmin = r.get("victim_cached_end")
                frac = vmin / size if vmin is not None else None
                disk = r.get("victim_disk_read")
                print(fmt % (kernel, mg, label,
                             "%.3f" % frac if frac is not None else "-",
                             "%.0f" % r["victim_p99_us"] if r.get("victim_p99_us") is not None else "-",
                             "%.0f" % r["victim_iops"] if r.get("victim_iops") is not None else "-",
                             "%.1fM" % (disk / M) if disk is not None else "-",
                             "%.0f" % r["stream_mbs"] if r.get("stream_mbs") else "-") +
                      (" aside: shim %s; daemon %s" % (r["aside"]["shim"], r["aside"]["daemon"])
                       if r.get("aside") else ""))
                if r.get("aside") and not r["aside"]["ok"]:
                    bad.append("%s MGLRU %s %s: the shim or the daemon did not step aside (%s; %s)" % (
                        kernel, mg, label, r["aside"]["shim"], r["aside"]["daemon"]))
                if variant in PROTECTED and (frac is None or frac < a.min_resident):
                    bad.append("%s MGLRU %s %s: victim kept %s (< %.2f)" % (
                        kernel, mg, label, "%.3f" % frac if frac is not None else "?", a.min_resident))
    for b in bad:
        print("MISS " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

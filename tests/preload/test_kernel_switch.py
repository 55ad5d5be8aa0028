#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""With the kernel's own drop-behind switch on (vm.seq_read_dropbehind, from
the kernel patch series), the shim steps aside for the mappings the kernel
covers and says so; with it off it works as usual.  The switch is read
from a fixture procfs tree (MADVSEQ_PROCFS).  cgroup-on and cgroup-off: the
sysctl is off and the per-cgroup switch of the 6.12 series
(memory.seq_read_dropbehind) is on or off for an ancestor of the cgroup
the fixture's /proc/self/cgroup names (MADVSEQ_CGROUPFS).

usage: test_kernel_switch.py SEQCLIENT on|off|cgroup-on|cgroup-off"""

import os
import sys

from msqtest import M, Workdir, check, done, evict, need_test_hooks, run, shim_env, values

SIZE = 128 * M


def main():
    client, state = sys.argv[1], sys.argv[2]
    need_test_hooks("MADVSEQ_PROCFS and MADVSEQ_CGROUPFS")
    with Workdir("kswitch-" + state) as wd:
        vm = os.path.join(wd.path, "proc", "sys", "vm")
        os.makedirs(vm)
        with open(os.path.join(vm, "seq_read_dropbehind"), "w") as f:
            f.write("1\n" if state == "on" else "0\n")
        cgfs = os.path.join(wd.path, "cgroup")
        if state.startswith("cgroup-"):
            os.makedirs(os.path.join(wd.path, "proc", "self"))
            with open(os.path.join(wd.path, "proc", "self", "cgroup"), "w") as f:
                f.write("0::/batch.slice/job.service\n")
            for rel, val in (("batch.slice", "1" if state == "cgroup-on" else "0"),
                             ("batch.slice/job.service", "0")):
                os.makedirs(os.path.join(cgfs, rel))
                with open(os.path.join(cgfs, rel, "memory.seq_read_dropbehind"), "w") as f:
                    f.write(val + "\n")
        path = wd.file("data", SIZE)
        evict(path)
        p = run([client, "--hold-ms", "100", path],
                shim_env(MADVSEQ_PROCFS=os.path.join(wd.path, "proc"), MADVSEQ_CGROUPFS=cgfs,
                         MADVSEQ_DEBUG=1))
        check(p.returncode == 0, "client exits 0")
        end = int(values(p.stdout).get("end_cached", -1))
        print(p.stderr)
        if state == "cgroup-on":
            check("on for this cgroup (memory.seq_read_dropbehind)" in p.stderr,
                  "the shim says its cgroup's switch is on")
        if state in ("on", "cgroup-on"):
            check("libmadvseq steps aside" in p.stderr, "the shim says the kernel's switch is on")
            check("left to the kernel" in p.stderr, "the mapping is left to the kernel")
            # This kernel has no such switch: nothing drops, which shows the
            # shim really stepped aside.
            check(end >= SIZE * 9 // 10, "the shim dropped nothing itself")
        else:
            check("steps aside" not in p.stderr, "switch off: the shim does the work")
            check(0 <= end <= 20 * M, "and drops behind the reader")
    done()


if __name__ == "__main__":
    main()

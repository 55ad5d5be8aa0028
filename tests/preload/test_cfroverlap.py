#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""copy_file_range() within one file over overlapping ranges fails with
EINVAL and changes no byte, with and without the shim (issue 9): the shim
must not split it into pieces the kernel would each accept.

usage: test_cfroverlap.py CFROVERLAP"""

import hashlib
import sys

from msqtest import M, Workdir, check, done, plain_env, run, shim_env


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(4 * M)
            if not b:
                return h.hexdigest()
            h.update(b)


def main():
    exe = sys.argv[1]
    with Workdir("cfroverlap") as wd:
        data = wd.file("data", 64 * M)
        before = sha256(data)
        plain = run([exe, data, "fadvise"], plain_env()).stdout
        print("without the shim:\n" + plain)
        check(plain.count("rc=-1 errno=22") == 3, "without the shim: EINVAL three times")
        check(sha256(data) == before, "without the shim: the file is unchanged")
        for label, args, env in (
                ("shim, POSIX_FADV_SEQUENTIAL", ["fadvise"], shim_env()),
                ("shim, MADVSEQ_READ=advised, POSIX_FADV_SEQUENTIAL", ["fadvise"],
                 shim_env(MADVSEQ_READ="advised", MADVSEQ_DAEMON=0)),
                ("shim, MADVSEQ_READ=all", [], shim_env(MADVSEQ_READ="all", MADVSEQ_DAEMON=0)),
                ("shim, MADVSEQ_READ=all, POSIX_FADV_SEQUENTIAL", ["fadvise"],
                 shim_env(MADVSEQ_READ="all", MADVSEQ_DAEMON=0))):
            p = run([exe, data] + args, env)
            print("%s:\n%s%s" % (label, p.stdout, p.stderr))
            check(p.returncode == 0 and p.stdout == plain,
                  "%s: the same results (rc, errno, positions) as without the shim" % label)
            after = sha256(data)
            check(after == before, "%s: the file's sha256 is unchanged" % label)
            if after != before:
                open(data, "wb").close()  # the next case starts from known bytes
                wd.file("data", 64 * M)
                before = sha256(data)
    done()


if __name__ == "__main__":
    main()

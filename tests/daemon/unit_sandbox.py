# SPDX-License-Identifier: LGPL-2.1-or-later
"""The seccomp filter and capability bounding set of madvseqd.service, as
a command prefix (daemon-sandbox) that applies them where systemd cannot
(it is not PID 1 here, so no systemd-run).

The unit's SystemCallFilter= is expanded as systemd does it: groups from
`systemd-analyze syscall-filter` (the installed systemd's own tables),
@default added to an allow list, names mapped to this architecture's
numbers through libseccomp as systemd does (the kernel headers where it is
missing); a name that table does not know (a system call newer than it)
is left out and so refused, as systemd ignores it."""

import re
import subprocess

# Settings of the unit this prefix applies; every other one (mount and
# network namespaces, ProtectSystem=, Restrict{Namespaces,Realtime,SUIDSGID}=,
# LockPersonality=, resource limits) is not applied, and named by
# not_applied().
APPLIED = ("SystemCallFilter", "SystemCallErrorNumber", "SystemCallArchitectures",
           "RestrictAddressFamilies", "MemoryDenyWriteExecute", "CapabilityBoundingSet",
           "NoNewPrivileges")


def unit_settings(path):
    """[Service] settings of a unit file: name -> list of values (a
    setting given twice keeps both, as SystemCallFilter= lines add up)."""
    out, section = {}, None
    for line in open(path):
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]" and "=" in line:
            k, v = line.split("=", 1)
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def _defines(header, prefix):
    """NAME -> number of the header's #defines (aliases such as
    AF_UNIX -> PF_UNIX -> 1 followed)."""
    p = subprocess.run(["cc", "-dM", "-E", "-"], input="#include <%s>\n" % header,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
    raw = dict(re.findall(r"^#define (\w+) (\S+)$", p.stdout, re.M))

    def value(v, depth=0):
        if re.fullmatch(r"\d+", v):
            return int(v)
        return value(raw[v], depth + 1) if v in raw and depth < 8 else None
    out = {}
    for k, v in raw.items():
        if k.startswith(prefix) and value(v) is not None:
            out[k[len(prefix):]] = value(v)
    return out


def syscall_groups():
    out = subprocess.run(["systemd-analyze", "syscall-filter"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, check=True).stdout
    groups, cur = {}, None
    for line in out.splitlines():
        if line.startswith("@"):
            cur = groups.setdefault(line.strip(), [])
        elif line.startswith("    ") and cur is not None and not line.strip().startswith("#"):
            cur.append(line.strip())
        elif not line.strip():
            cur = None
    return groups


def expand(names, groups):
    out = set()
    for n in names:
        if n.startswith("@"):
            if n not in groups:
                raise ValueError("unknown system call group %s" % n)
            out |= expand(groups[n], groups)
        else:
            out.add(n)
    return out


def filter_of(settings):
    """(allowed numbers, names left out because no table here knows them)"""
    words = " ".join(settings.get("SystemCallFilter", [])).split()
    if not words:
        raise ValueError("the unit has no SystemCallFilter=")
    if words[0].startswith("~"):
        raise ValueError("a deny-list SystemCallFilter= is not emulated")
    names = expand(["@default"] + words, syscall_groups())
    number = resolver()
    known = sorted({number(n) for n in names if number(n) is not None})
    # names the unit gives itself that cannot be allowed here (the groups
    # hold every architecture's names: those are not worth a word)
    unknown = sorted(n for n in words if not n.startswith("@") and number(n) is None)
    return known, unknown


def resolver():
    """name -> this architecture's number, or None: libseccomp's table,
    which systemd uses (distributions update it: Debian 12's knows
    cachestat, its kernel headers do not), else the kernel headers."""
    try:
        import ctypes
        lib = ctypes.CDLL("libseccomp.so.2")
        lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]

        def number(name):
            n = lib.seccomp_syscall_resolve_name(name.encode())
            return n if n >= 0 else None  # __NR_SCMP_ERROR, or another arch's pseudo number
        return number
    except OSError:
        table = _defines("asm/unistd.h", "__NR_")
        return table.get


def prefix(unit, sandbox):
    """The command prefix that runs a program under the unit's filter, and
    the names of the filter that could not be allowed (unknown here)."""
    s = unit_settings(unit)
    known, unknown = filter_of(s)
    cmd = [sandbox, "-s", ",".join(map(str, known))]
    if s.get("SystemCallArchitectures", ["native"])[-1] != "native":
        raise ValueError("SystemCallArchitectures= other than native is not emulated")
    if "SystemCallErrorNumber" in s:
        name = s["SystemCallErrorNumber"][-1]
        errnos = _defines("errno.h", "")
        if name not in errnos:
            raise ValueError("SystemCallErrorNumber=%s: not an errno name" % name)
        cmd += ["-e", str(errnos[name])]
    fams = " ".join(s.get("RestrictAddressFamilies", [])).split()
    if fams:
        if any(f.startswith("~") for f in fams) or len(fams) > 8:
            raise ValueError("only RestrictAddressFamilies= allow lists (up to 8) are emulated")
        socket_h = _defines("sys/socket.h", "")
        cmd += ["-a", ",".join(str(socket_h[f]) for f in fams)]
    if s.get("MemoryDenyWriteExecute", ["no"])[-1] == "yes":
        cmd.append("-w")
    if "CapabilityBoundingSet" in s:
        caps = " ".join(s["CapabilityBoundingSet"]).split()
        capnum = _defines("linux/capability.h", "")
        cmd += ["-c", ",".join(str(capnum[c]) for c in caps) or "-"]
    if s.get("NoNewPrivileges", ["no"])[-1] == "yes":
        cmd.append("-n")
    return cmd + ["--"], unknown


def not_applied(unit):
    return sorted(k for k in unit_settings(unit) if k not in APPLIED and
                  re.match(r"(Protect|Private|Restrict|Lock|ReadWrite|Memory|Limit|Capability|"
                           r"Ambient|SystemCall|NoNew)", k))

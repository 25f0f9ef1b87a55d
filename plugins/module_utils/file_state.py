# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A path's state as the roles' probes report it: type, mode, owner and content checksum.

The roles skip a file, copy or template task for a path whose state already matches what the
task would make, so the state has the shape they compare: the SHA-1 of a regular file's
content (as copy and template compare it), names for the owner and group. Pure Python, no
Ansible imports: sglang_venv_info and cuda_toolkit_info call it, the unit tests too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import grp
import hashlib
import os
import pwd
import stat


def group_name(gid):
    """The group's name; the numeric id as a string when the group database has no name for it."""
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def sha1(path):
    """SHA-1 of a regular file's content, as Ansible's copy and template compare it; empty when unreadable."""
    digest = hashlib.sha1()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(65536), b""):
                digest.update(block)
    except (IOError, OSError):
        return ""
    return digest.hexdigest()


def path_state(path):
    """``exists``; for an existing path also ``isdir``, ``islink``, ``mode`` (four octal digits),
    ``owner`` and ``group``, with ``link`` (its target) for a symbolic link and ``checksum`` for a
    regular file. A link is described as itself, never followed."""
    try:
        st = os.lstat(path)
    except OSError:
        return {"exists": False}
    link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    result = {"exists": True, "isdir": stat.S_ISDIR(st.st_mode), "islink": link is not None,
              "mode": "%04o" % stat.S_IMODE(st.st_mode), "owner": owner, "group": group_name(st.st_gid)}
    if link is not None:
        result["link"] = link
    elif stat.S_ISREG(st.st_mode):
        result["checksum"] = sha1(path)
    return result


def venv_of_command(argv0):
    """The venv (real path) whose interpreter ARGV0 names, '' when it names none: a process
    started as ``<venv>/bin/python``."""
    bindir = os.path.dirname(argv0)
    if os.path.basename(bindir) == "bin" and os.path.isfile(os.path.join(bindir, "..", "pyvenv.cfg")):
        return os.path.realpath(os.path.dirname(bindir))
    return ""


def command_of(pid):
    """The first word of process PID's command line; '' when it cannot be read (gone, a kernel thread)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return handle.read().split(b"\0")[0].decode("utf-8", "replace")
    except (IOError, OSError):
        return ""


def running_venvs(proc="/proc"):
    """The venvs (real paths) whose interpreter some process on the node runs."""
    found = set()
    for entry in os.listdir(proc):
        if entry.isdigit():
            venv = venv_of_command(command_of(int(entry)))
            if venv:
                found.add(venv)
    return found

# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's converge lock: one file whose content names the run that holds it.

Every read-modify-write of the file happens under flock(2) on the file itself, and a holder that
removes the file does so while it holds the flock; whoever then gets the flock on the removed
file sees that the path no longer names it and opens it again. So two runs never both believe
they hold the node, and a released lock leaves nothing behind.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import json
import os
import time


def _open_locked(path):
    """A descriptor of PATH, created 0600 if missing, under an exclusive flock, that still names
    the file at PATH."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            try:
                now = os.stat(path)
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    raise
                now = None
            if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def _parse(data):
    """The holder a lock file's bytes record; None for an empty (free) lock."""
    if not data.strip():
        return None
    try:
        value = json.loads(data.decode("utf-8"))
    except ValueError:
        return {"owner": "", "unreadable": data[:200].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"owner": "", "unreadable": str(value)[:200]}


def _content(fd):
    os.lseek(fd, 0, os.SEEK_SET)
    data = b""
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    return _parse(data)


def read(path):
    """The holder recorded at PATH, or None when the lock is free. Reads only."""
    try:
        with open(path, "rb") as handle:
            return _parse(handle.read())
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise


def _may_take(current, owner, steal):
    """Whether OWNER may take a lock whose holder is CURRENT: it is free, OWNER's already, or the
    ended run STEAL names holds it."""
    return current is None or current.get("owner") == owner or bool(steal and current.get("owner") == steal)


def try_acquire(path, holder, steal=""):
    """Take the lock at PATH for HOLDER (a dict with an `owner` key) when it is free, already
    HOLDER's, or held by the owner STEAL names. (True, HOLDER) or (False, the current holder)."""
    fd = _open_locked(path)
    try:
        current = _content(fd)
        if _may_take(current, holder["owner"], steal):
            data = json.dumps(holder, sort_keys=True).encode("utf-8") + b"\n"
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, data)
            os.fsync(fd)
            return True, holder
        return False, current
    finally:
        os.close(fd)


def would_acquire(path, owner, steal=""):
    """What try_acquire would answer, without writing (check mode)."""
    current = read(path)
    return _may_take(current, owner, steal), current


def acquire(path, holder, timeout, steal="", poll=1.0, check_mode=False, clock=time.monotonic, sleep=time.sleep):
    """try_acquire until it succeeds or TIMEOUT seconds have passed: (held, holder, waited)."""
    start = clock()
    while True:
        if check_mode:
            held, current = would_acquire(path, holder["owner"], steal)
        else:
            held, current = try_acquire(path, holder, steal)
        waited = clock() - start
        if held or waited >= timeout:
            return held, current, waited
        sleep(min(poll, max(timeout - waited, 0)))


def release(path, owner):
    """Remove the lock at PATH if OWNER holds it: (released, the holder found)."""
    if not os.path.exists(path):
        return False, None
    fd = _open_locked(path)
    try:
        current = _content(fd)
        if current is None or current.get("owner") == owner:
            os.unlink(path)
            return current is not None, current
        return False, current
    finally:
        os.close(fd)

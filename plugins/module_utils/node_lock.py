# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's converge lock: one file whose content names the run that holds it.

Every read-modify-write of the file happens under flock(2) on the file itself, and a holder that
removes the file does so while it holds the flock; whoever then gets the flock on the removed
file sees that the path no longer names it and opens it again. So two runs never both believe
they hold the node, and a released lock leaves nothing behind.

The file lives in a directory only root may write (owned by root, mode 0700, created so when
missing), since /run/lock itself is world-writable: there a local user could create the lock
file first, or a link in its place, and hold or redirect every converge. The directory is
opened without following links and the file is reached through that descriptor, opened with
O_NOFOLLOW; a directory or file that is not root's own with exactly the expected mode is
refused (Refused), never repaired, since whoever made it may still hold it.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import json
import os
import stat
import time

DEFAULT_PATH = "/run/lock/blackwell-sglang/node.lock"
DIR_MODE = 0o700
FILE_MODE = 0o600
# O_NONBLOCK: opening a FIFO put in the file's place must not hang the run before fstat refuses
# it (regular files ignore the flag, and flock(2) blocks regardless).
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class Refused(Exception):
    """The lock's directory or file is not one only root could have made."""


def _refuse_dir(directory, why):
    return Refused(
        "node_lock: refusing the lock directory %s: %s. It must be a directory (not a link) owned by root with mode "
        "0700, which the lock creates when it is missing; remove it (or what it points to) and run again." % (
            directory, why))


def _refuse_file(path, why):
    return Refused(
        "node_lock: refusing the lock file %s: %s. It must be a regular file owned by root with mode 0600, which the "
        "lock creates; remove it and run again." % (path, why))


def _check_dir(directory, info):
    if stat.S_ISLNK(info.st_mode):
        raise _refuse_dir(directory, "it is a symbolic link")
    if not stat.S_ISDIR(info.st_mode):
        raise _refuse_dir(directory, "it is not a directory")
    if info.st_uid != 0:
        raise _refuse_dir(directory, "it is owned by uid %d, not root" % info.st_uid)
    if stat.S_IMODE(info.st_mode) != DIR_MODE:
        raise _refuse_dir(directory, "its mode is %04o, not 0700" % stat.S_IMODE(info.st_mode))


def _check_file(path, info):
    if not stat.S_ISREG(info.st_mode):
        raise _refuse_file(path, "it is not a regular file")
    if info.st_uid != 0:
        raise _refuse_file(path, "it is owned by uid %d, not root" % info.st_uid)
    if stat.S_IMODE(info.st_mode) != FILE_MODE:
        raise _refuse_file(path, "its mode is %04o, not 0600" % stat.S_IMODE(info.st_mode))


def _open_dir(path, create):
    """A descriptor of PATH's directory, checked; created 0700 when missing and CREATE, else None."""
    directory = os.path.dirname(os.path.abspath(path))
    if create:
        try:
            os.mkdir(directory, DIR_MODE)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise Refused("node_lock: %s does not exist on this node" % os.path.dirname(directory))
            if exc.errno != errno.EEXIST:
                raise
    try:
        _check_dir(directory, os.lstat(directory))
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ENOENT and not create:
            return None
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refuse_dir(directory, "it was replaced while it was checked")
        raise
    try:
        # What was opened, not what the name showed a moment before.
        _check_dir(directory, os.fstat(dfd))
    except BaseException:
        os.close(dfd)
        raise
    return dfd


def _open_file(dfd, path, flags):
    try:
        fd = os.open(os.path.basename(path), flags | _OPEN_FLAGS, FILE_MODE, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse_file(path, "it is a symbolic link")
        raise
    try:
        _check_file(path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lstat(dfd, name):
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
        return None


def _open_locked(dfd, path):
    """A descriptor of PATH (in the directory DFD), created 0600 if missing, under an exclusive
    flock, that still names the file at PATH."""
    name = os.path.basename(path)
    while True:
        fd = _open_file(dfd, path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            now = _lstat(dfd, name)
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
    """The holder recorded at PATH, or None when the lock is free. Reads only, creates nothing,
    and refuses a directory or file that root did not make as the lock does."""
    dfd = _open_dir(path, create=False)
    if dfd is None:
        return None
    try:
        try:
            fd = _open_file(dfd, path, os.O_RDONLY)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return None
            raise
        try:
            return _content(fd)
        finally:
            os.close(fd)
    finally:
        os.close(dfd)


def _may_take(current, owner, steal):
    """Whether OWNER may take a lock whose holder is CURRENT: it is free, OWNER's already, or the
    run STEAL names holds it."""
    return current is None or current.get("owner") == owner or bool(steal and current.get("owner") == steal)


def try_acquire(path, holder, steal=""):
    """Take the lock at PATH for HOLDER (a dict with an `owner` key) when it is free, already
    HOLDER's, or held by the owner STEAL names. (True, HOLDER) or (False, the current holder).
    PATH's directory is created (root's, 0700) when missing."""
    dfd = _open_dir(path, create=True)
    try:
        fd = _open_locked(dfd, path)
    finally:
        os.close(dfd)
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
    dfd = _open_dir(path, create=False)
    if dfd is None:
        return False, None
    try:
        if _lstat(dfd, os.path.basename(path)) is None:
            return False, None
        fd = _open_locked(dfd, path)
        try:
            current = _content(fd)
            if current is None or current.get("owner") == owner:
                os.unlink(os.path.basename(path), dir_fd=dfd)
                return current is not None, current
            return False, current
        finally:
            os.close(fd)
    finally:
        os.close(dfd)

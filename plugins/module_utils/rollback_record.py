# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollback record: what a node served before a rollout switched anything, kept on the node.

A rollout writes it before it points the active-release link at another release or rewrites a
file the unit reads, and removes it once the service has passed its health gate. A run that dies
in between (Ctrl-C, a lost connection, a controller crash) leaves it, and the next run rolls back
to it, not to the half-switched state it finds: the record that exists is never replaced.

Layout: a root-only directory holding ``record.json`` and a copy of each file under ``files/``.
It is built beside its final path and renamed into place, so a record is either complete or
absent. Pure Python, no Ansible imports: the sglang_rollback module and sglang_venv_info call it,
the unit tests too.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import hashlib
import json
import os
import shutil
import stat
import time

DEFAULT_PATH = "/var/lib/blackwell-sglang/rollback"
FORMAT = 1
_MANIFEST = "record.json"


class RecordError(Exception):
    """A record that cannot be read or applied; the message says which and why."""


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(65536), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_state(path):
    """A file as the record compares it: absent, or its mode, owner ids and content digest."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
        return {"path": path, "exists": False}
    if not stat.S_ISREG(st.st_mode):
        raise RecordError("%s is not a regular file" % path)
    return {"path": path, "exists": True, "mode": "%04o" % stat.S_IMODE(st.st_mode),
            "uid": st.st_uid, "gid": st.st_gid, "sha256": _sha256(path)}


def link_target(link):
    """The release LINK resolves to (absolute, trailing slashes dropped); '' when it is no link."""
    if not os.path.islink(link):
        return ""
    target = os.readlink(link)
    if not target.startswith("/"):
        target = os.path.join(os.path.dirname(link), target)
    return os.path.normpath(target)


def read(path=DEFAULT_PATH):
    """The record at PATH, or None when there is none."""
    manifest = os.path.join(path, _MANIFEST)
    try:
        with open(manifest, encoding="utf-8") as handle:
            record = json.load(handle)
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT and not os.path.lexists(path):
            return None
        raise RecordError("cannot read the rollback record %s: %s" % (manifest, exc))
    except ValueError as exc:
        raise RecordError("the rollback record %s is not JSON: %s" % (manifest, exc))
    if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("files"), list):
        raise RecordError("the rollback record %s is not one this collection wrote (format %d)" % (manifest, FORMAT))
    return record


def plan_record(link, files, now=None):
    """What a record of the node as it is now would hold (nothing is written)."""
    return {"format": FORMAT, "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
            "link": link, "release": link_target(link), "files": [file_state(p) for p in files]}


def save(path, link, files, now=None):
    """(record, kept): the record already at PATH, kept as it is, or a new one of LINK and FILES."""
    existing = read(path)
    if existing is not None:
        return existing, True
    record = plan_record(link, files, now)
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    building = path + ".new"
    shutil.rmtree(building, ignore_errors=True)
    os.mkdir(building, 0o700)
    os.mkdir(os.path.join(building, "files"), 0o700)
    for index, entry in enumerate(record["files"]):
        if not entry["exists"]:
            continue
        entry["copy"] = "files/%d" % index
        copy = os.path.join(building, entry["copy"])
        fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out, open(entry["path"], "rb") as source:
            shutil.copyfileobj(source, out)
            out.flush()
            os.fsync(out.fileno())
        if _sha256(copy) != entry["sha256"]:
            raise RecordError("%s changed while it was being recorded; run again" % entry["path"])
    fd = os.open(os.path.join(building, _MANIFEST), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(record, out, indent=1, sort_keys=True)
        out.flush()
        os.fsync(out.fileno())
    _fsync_dir(os.path.join(building, "files"))
    _fsync_dir(building)
    os.rename(building, path)
    _fsync_dir(parent)
    return record, False


def restore_plan(record):
    """What differs on the node from RECORD: ``release`` (the release to point the link back at,
    '' when it points there), ``files`` (paths to put back) and ``remove`` (paths the record
    found absent, present now)."""
    release = record.get("release") or ""
    link = record.get("link") or ""
    plan = {"release": release if release and link and link_target(link) != release else "",
            "files": [], "remove": []}
    for entry in record["files"]:
        now = file_state(entry["path"])
        if not entry["exists"]:
            if now["exists"]:
                plan["remove"].append(entry["path"])
        elif now != dict((k, entry[k]) for k in ("path", "exists", "mode", "uid", "gid", "sha256")):
            plan["files"].append(entry["path"])
    return plan


def _replace_link(link, target):
    temporary = "%s.rollback-%d" % (link, os.getpid())
    if os.path.lexists(temporary):
        os.unlink(temporary)
    os.symlink(target, temporary)
    os.rename(temporary, link)


def _replace_file(path, copy, entry):
    if _sha256(copy) != entry["sha256"]:
        raise RecordError("the record's copy of %s (%s) does not match its digest; nothing more was put back"
                          % (path, copy))
    temporary = "%s.rollback-%d" % (path, os.getpid())
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out, open(copy, "rb") as source:
        shutil.copyfileobj(source, out)
        out.flush()
        os.fsync(out.fileno())
    os.chown(temporary, entry["uid"], entry["gid"])
    os.chmod(temporary, int(entry["mode"], 8))
    os.rename(temporary, path)


def restore(path, record, plan):
    """Put back what PLAN (restore_plan of RECORD, read from PATH) names: files first, the link
    last, each with one rename(2)."""
    by_path = dict((entry["path"], entry) for entry in record["files"])
    for target in plan["files"]:
        _replace_file(target, os.path.join(path, by_path[target]["copy"]), by_path[target])
    for target in plan["remove"]:
        os.unlink(target)
    if plan["release"]:
        _replace_link(record["link"], plan["release"])


def discard(path=DEFAULT_PATH):
    """Remove the record at PATH (and a half-built one beside it); whether there was one."""
    found = os.path.lexists(path)
    if found:
        shutil.rmtree(path)
    shutil.rmtree(path + ".new", ignore_errors=True)
    return found


def summary(record):
    """The record without the files' digests and copies: what a task result shows."""
    if record is None:
        return {}
    return {"saved": record.get("saved", ""), "link": record.get("link", ""), "release": record.get("release", ""),
            "files": [entry["path"] for entry in record["files"] if entry.get("exists")],
            "absent": [entry["path"] for entry in record["files"] if not entry.get("exists")]}

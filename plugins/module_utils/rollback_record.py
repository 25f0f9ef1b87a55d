# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollback record: what a node served before a rollout switched anything, kept on the node.

A rollout writes it before it points the active-release link at another release or rewrites a
file the unit reads, and removes it once the service has passed its health gate. A run that dies
in between (Ctrl-C, a lost connection, a controller crash) leaves it, and the next run rolls back
to it, not to the half-switched state it finds: the record that exists is never replaced.

Layout: a root-only directory holding ``record.json`` and a copy of each file under ``files/``,
except the files marked secret: those are noted (present or not) but never copied, and a restore
leaves the node's current one, so that a rollback never brings back a rotated, revoked key.
It is built beside its final path (``<path>.new``) and renamed into place, and it is removed the
same way: renamed to ``<path>.discarded-<pid>-<ns>`` first, then deleted. So the record's own path
holds a complete record or nothing, whenever the run that writes or removes it is killed; what
such a run leaves beside it is never read, and the next save or discard deletes it. Pure Python,
no Ansible imports: the sglang_rollback module and sglang_venv_info call it, the unit tests too.
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
_BUILDING = ".new"
_DISCARDED = ".discarded-"


class RecordError(Exception):
    """A record that cannot be read or applied; the message says which and why."""


class IncompleteRecord(RecordError):
    """A record directory that a removal killed half-way left (the collection's releases before
    discard-by-rename deleted it in place): no ``record.json``, or one whose copies are gone. It
    can no longer describe the whole node as it was, so it is never restored from; clearing it
    loses nothing a rollback could have used."""


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
    """The record at PATH, or None when there is none. IncompleteRecord when a killed removal left
    part of one (the record's directory without its ``record.json``, or without a copy it names).

    A ``record.json`` that is not JSON, or not this collection's format, stays a RecordError: the
    writer fsyncs it before the rename and a removal unlinks it whole, so no crash leaves one; it
    is damage or another tool's, and it is refused by name rather than cleared."""
    manifest = os.path.join(path, _MANIFEST)
    try:
        with open(manifest, encoding="utf-8") as handle:
            record = json.load(handle)
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT and not os.path.lexists(path):
            return None
        if exc.errno == errno.ENOENT and os.path.isdir(path) and not os.path.islink(path):
            raise IncompleteRecord("%s is a rollback record without its %s (a run was killed while removing it)"
                                   % (path, _MANIFEST))
        raise RecordError("cannot read the rollback record %s: %s" % (manifest, exc))
    except ValueError as exc:
        raise RecordError("the rollback record %s is not JSON: %s" % (manifest, exc))
    if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("files"), list):
        raise RecordError("the rollback record %s is not one this collection wrote (format %d)" % (manifest, FORMAT))
    missing = [entry["copy"] for entry in record["files"]
               if entry.get("copy") and not os.path.isfile(os.path.join(path, entry["copy"]))]
    if missing:
        raise IncompleteRecord("%s is a rollback record without its copies %s (a run was killed while removing it)"
                               % (path, ", ".join(missing)))
    return record


def _entry(path, secret):
    state = file_state(path)
    if secret:
        # Noted, never copied: a restore keeps the current secret (see restore_plan).
        return {"path": path, "exists": state["exists"], "secret": True}
    return state


def plan_record(link, files, now=None, secrets=()):
    """What a record of the node as it is now would hold (nothing is written); the files among
    SECRETS are marked secret and carry no digest."""
    return {"format": FORMAT, "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
            "link": link, "release": link_target(link), "files": [_entry(p, p in secrets) for p in files]}


def _clear_leftovers(path):
    """Delete what killed runs left beside PATH: a half-built record, discarded ones."""
    parent, name = os.path.split(path)
    try:
        names = os.listdir(parent)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return
        raise
    for other in names:
        if other == name + _BUILDING or other.startswith(name + _DISCARDED):
            shutil.rmtree(os.path.join(parent, other))


def save(path, link, files, now=None, secrets=()):
    """(record, kept): the record already at PATH, kept as it is, or a new one of LINK and FILES."""
    existing = read(path)
    if existing is not None:
        return existing, True
    record = plan_record(link, files, now, secrets)
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    _clear_leftovers(path)
    building = path + _BUILDING
    os.mkdir(building, 0o700)
    os.mkdir(os.path.join(building, "files"), 0o700)
    for index, entry in enumerate(record["files"]):
        if not entry["exists"] or entry.get("secret"):
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


def restore_plan(record, keep_current=()):
    """What differs on the node from RECORD: ``release`` (the release to point the link back at,
    '' when it points there), ``files`` (paths to put back) and ``remove`` (paths the record
    found absent, present now). Files the record marks secret, and those in KEEP_CURRENT (a
    record written before secrets were marked holds a copy), are left as they are now: the old
    value may be a key the failed rollout rotated out, and a secrets file that did not exist
    before is the new one's only copy."""
    release = record.get("release") or ""
    link = record.get("link") or ""
    plan = {"release": release if release and link and link_target(link) != release else "",
            "files": [], "remove": []}
    for entry in record["files"]:
        if entry.get("secret") or entry["path"] in keep_current:
            continue
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


def check_release(plan):
    """Refuse a PLAN whose release is gone (pruned or deleted by hand since the record was saved):
    a link to it would leave a service that cannot start, and the files put back would belong to
    it. Nothing has been changed when this raises."""
    release = plan["release"]
    if release and not os.path.exists(os.path.join(release, "bin", "python")):
        raise RecordError("the release %s that the rollback record points back to is gone (no %s): nothing was "
                          "put back, the node is left as it is" % (release, os.path.join(release, "bin", "python")))


def restore(path, record, plan):
    """Put back what PLAN (restore_plan of RECORD, read from PATH) names: files first, the link
    last, each with one rename(2); nothing at all when the release is gone."""
    check_release(plan)
    by_path = dict((entry["path"], entry) for entry in record["files"])
    for target in plan["files"]:
        _replace_file(target, os.path.join(path, by_path[target]["copy"]), by_path[target])
    for target in plan["remove"]:
        os.unlink(target)
    if plan["release"]:
        _replace_link(record["link"], plan["release"])


def discard(path=DEFAULT_PATH):
    """Remove the record at PATH, and what killed runs left beside it; whether there was one.

    The record is renamed aside before it is deleted, so a run killed during the deletion leaves
    a sibling that nothing reads (and the next save or discard deletes), never a part of a record
    at PATH."""
    found = os.path.lexists(path)
    if found:
        os.rename(path, "%s%s%d-%d" % (path, _DISCARDED, os.getpid(), int(time.time() * 1e9)))
        _fsync_dir(os.path.dirname(path))
    _clear_leftovers(path)
    return found


def summary(record):
    """The record without the files' digests and copies: what a task result shows."""
    if record is None:
        return {}
    return {"saved": record.get("saved", ""), "link": record.get("link", ""), "release": record.get("release", ""),
            "files": [entry["path"] for entry in record["files"] if entry.get("exists")],
            "absent": [entry["path"] for entry in record["files"] if not entry.get("exists")]}

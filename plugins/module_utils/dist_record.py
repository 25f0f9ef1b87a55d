# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An installed distribution checked against its RECORD: which of its files are missing or altered.

An installer writes ``<name>-<version>.dist-info/RECORD``, one CSV line per installed file:
``path,sha256=<urlsafe base64 digest, no padding>,size``, the path relative to site-packages
(``../../../bin/uv`` for a script). A release is complete only when every file its RECORD lists
with a digest is there with that digest: a killed install, a deleted directory or a replaced
binary all show here, where the dist-info's version alone says nothing.

What is not counted:

- entries without a digest (RECORD itself, bytecode some installers add unhashed);
- compiled bytecode (``__pycache__/*.pyc``) that is missing: it is derived from the source, which
  is verified, and the patch deletes the copies of the files it edits (purge_bytecode);
- the files ``derived`` names (site-packages-relative) with a function that gives back the bytes
  the installer wrote from what is on disk: the SM120 patch's two files are verified as their
  text with the patch's own marked entries taken out (capmap.original_text), so a patched
  release is complete and any other edit of those files is still caught; the bytecode of those
  files is not verified at all (the interpreter may compile the patched source again).

Pure Python, standard library only: the module sglang_venv_info calls it, the unit tests too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import csv
import hashlib
import io
import os

# How many paths of each kind a result names; the counts are always whole.
FIRST = 5
_CHUNK = 1 << 20


def _digest(path, algorithm):
    sha = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        while True:
            block = handle.read(_CHUNK)
            if not block:
                break
            sha.update(block)
    return sha.digest()


def _bytecode_of(path):
    """The source file a __pycache__ entry is compiled from (same directory level), or ''."""
    folder, name = os.path.split(path)
    if os.path.basename(folder) != "__pycache__" or not name.endswith(".pyc"):
        return ""
    return os.path.join(os.path.dirname(folder), name.split(".", 1)[0] + ".py")


def _entries(text):
    for row in csv.reader(io.StringIO(text)):
        if len(row) < 2 or not row[0]:
            continue
        algorithm, _sep, value = row[1].partition("=")
        if not value:
            continue
        yield row[0], algorithm, value, row[2] if len(row) > 2 else ""


def verify(site, dist_info, derived=None):
    """The dist-info's RECORD against the files under site-packages ``site``.

    ``derived`` maps site-packages-relative paths to a function that takes the file's bytes and
    returns the bytes the installer wrote (raising ValueError where it cannot tell). Returns
    ``checked`` (entries with a digest), ``missing`` and ``altered`` (counts), ``missing_paths``
    and ``altered_paths`` (the first FIRST of each, in RECORD order), and ``error`` (no RECORD,
    or one that cannot be read; the release is then incomplete as a whole)."""
    derived = dict((os.path.normpath(rel), undo) for rel, undo in (derived or {}).items())
    result = {"checked": 0, "missing": 0, "altered": 0, "missing_paths": [], "altered_paths": [], "error": ""}
    try:
        with open(os.path.join(dist_info, "RECORD"), "rb") as handle:
            text = handle.read().decode("utf-8")
    except (IOError, OSError) as exc:
        result["error"] = "%s has no readable RECORD (%s)" % (os.path.basename(dist_info), exc.strerror or exc)
        return result
    except UnicodeDecodeError:
        result["error"] = "%s/RECORD is not UTF-8" % os.path.basename(dist_info)
        return result

    def note(kind, rel):
        result[kind] += 1
        if len(result[kind + "_paths"]) < FIRST:
            result[kind + "_paths"].append(rel)

    for rel, algorithm, value, size in _entries(text):
        norm = os.path.normpath(rel)
        source = _bytecode_of(norm)
        if source in derived:
            continue
        result["checked"] += 1
        path = os.path.normpath(os.path.join(site, rel))
        try:
            if norm in derived:
                with open(path, "rb") as handle:
                    data = derived[norm](handle.read())
                digest = hashlib.new(algorithm, data).digest()
                size_found = len(data)
            else:
                size_found = os.path.getsize(path)
                digest = _digest(path, algorithm)
        except (IOError, OSError):
            # Missing bytecode is derived from its verified source: not counted.
            if not source:
                note("missing", rel)
            elif os.path.lexists(path):
                note("altered", rel)
            continue
        except ValueError:
            # An unknown digest algorithm, or a derived file whose original cannot be told.
            note("altered", rel)
            continue
        want = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        if digest != want or (size.isdigit() and int(size) != size_found):
            note("altered", rel)
    return result


def describe(record, what):
    """Why a distribution is not as its installer left it, from verify()'s result RECORD (as
    sglang_venv_info returns it): one clause naming the first files missing and altered, with
    WHAT naming the distribution, or '' when none is (or nothing was checked)."""
    if not record:
        return ""
    if record.get("error"):
        return "%s is incomplete: %s" % (what, record["error"])
    parts = []
    for kind in ("missing", "altered"):
        count = int(record.get(kind) or 0)
        if count:
            shown = list(record.get(kind + "_paths") or [])
            more = count - len(shown)
            parts.append("%d %s (%s%s)" % (count, "files " + kind if count > 1 else "file " + kind,
                                           ", ".join(shown), ", and %d more" % more if more > 0 else ""))
    if not parts:
        return ""
    return "%s differs from its RECORD: %s" % (what, "; ".join(parts))

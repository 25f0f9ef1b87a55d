# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's table of managed paths, compared with what the node holds.

A row names a ``path`` and the ``state`` the role leaves it in: ``file`` (the default, with
``mode`` and its content from ``template``, rendered once, or from a named ``source``),
``directory`` (with ``mode``), ``link`` (to ``src``) or ``absent``. ``owner`` and ``group``
default to root; ``enabled`` (default true) leaves a row out of force; ``keep`` (default false)
takes a directory that exists, or a link in its place, as it is (its mode and owner are the
node's): the role only makes it where it is missing. What the node holds is
what blackwell.sglang's readers return for a path (module_utils/file_state.path_state): never
followed through a link, with the SHA-1 of a regular file's content. Pure Python, no Ansible
imports: the roles' plans call it.

Every role's table follows one schema (COLUMNS): a column it does not know, a column a row's
state needs and lacks, or a state it does not know is refused when a plan loads the table, with
the role, the row's number and its path named (``problems``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

from ansible_collections.blackwell.sglang.plugins.plugin_utils.settings import truthy

ROOT = {"owner": "root", "group": "root"}

# Every column a row may have, with what it means. A role's plan reads the ones of its kind.
COLUMNS = {
    "path": "the managed path (required)",
    "state": "file (the default), directory, link, absent; record (a file or directory the role"
             " writes for itself) or venv (a venv the role makes, judged by its RECORD): neither"
             " judged by the table, both removed with the role",
    "mode": "the mode a file or directory is given (required for both)",
    "owner": "its owner (default root)",
    "group": "its group (default root)",
    "template": "a file's content: the role template of this name, as rendered for the node",
    "source": "a file's content: the text the role names so (a key, a record, a file of its files/)",
    "src": "what a link points at (required for a link)",
    "enabled": "false leaves the row out of force (default true)",
    "keep": "a directory that exists, or a link in its place, is taken as it is, and never removed",
    "removal": "what the role's removal does with the path: remove (the default) or keep",
    "secret": "the content is secret: no copy in the rollback record, its diff and log hidden where"
              " the role's secure logging is on",
    "validate": "a command that checks a file before it replaces the old one (%s: the new file)",
    "restart": "a change restarts the service (sglang_service)",
    "refresh": "what a change refreshes: ldconfig (cuda13)",
    "apt_source": "an apt source: a change refreshes apt's lists (cuda13)",
    "phase": "the step of the role that writes the row (sglang_install, sglang_router)",
    "installer": "the installer the row is for, uv or pip; the other's rows are out of force",
}
# What each state requires; a file also needs its content from one of template and source.
REQUIRED = {"file": ("path", "mode"), "directory": ("path", "mode"), "link": ("path", "src"), "absent": ("path",),
            "record": ("path",), "venv": ("path",)}
# Rows the table does not judge or write: the role keeps them by tasks of its own.
UNJUDGED = ("record", "venv")
REMOVAL = ("remove", "keep")
CONTENT = ("template", "source")


def problems(role, files):
    """Why ROLE's table FILES breaks the schema, one sentence per problem; [] when it does not."""
    found = []
    for number, row in enumerate(files, 1):
        where = "%s's table, row %d (%s)" % (role, number, row.get("path", "no path") if isinstance(row, dict) else row)
        if not isinstance(row, dict):
            found.append("%s: a row is a mapping of columns" % where)
            continue
        found.extend("%s: unknown column '%s'" % (where, column) for column in sorted(set(row) - set(COLUMNS)))
        state = row.get("state", "file")
        if state not in REQUIRED:
            found.append("%s: unknown state '%s' (one of %s)" % (where, state, ", ".join(REQUIRED)))
            continue
        found.extend("%s: a %s row needs the column '%s'" % (where, state, column)
                     for column in REQUIRED[state] if column not in row)
        removal = row.get("removal", "remove")
        if removal not in REMOVAL and "{{" not in str(removal):
            found.append("%s: removal '%s' is not one of %s" % (where, removal, ", ".join(REMOVAL)))
        given = [column for column in CONTENT if column in row]
        if state == "file" and len(given) != 1:
            found.append("%s: a file row needs exactly one of the columns 'template' and 'source'" % where)
        elif state != "file" and given:
            found.append("%s: a %s row has no content ('%s')" % (where, state, given[0]))
    return found


def check(role, files):
    """FILES as they are, once they follow the schema; ValueError naming every problem otherwise."""
    found = problems(role, files)
    if found:
        raise ValueError("; ".join(found))
    return files


def in_force(role, files, contents, sources=None):
    """ROLE's rows in force (the table checked against the schema first), each with ``state``,
    ``owner`` and ``group`` filled in and, for a file, its ``content`` (``contents`` by template
    name, or ``sources`` by source name) and that content's SHA-1 as ``checksum``."""
    rows = []
    for row in check(role, files):
        if not truthy(row.get("enabled", True)) or row.get("state") in UNJUDGED:
            continue
        row = dict(ROOT, **row)
        row.pop("enabled", None)
        row.setdefault("state", "file")
        if row["state"] == "file":
            content = (sources or {})[row["source"]] if row.get("source") else contents[row["template"]]
            row["content"] = content
            row["checksum"] = hashlib.sha1(content.encode("utf-8")).hexdigest()
        rows.append(row)
    return rows


def removal(role, files):
    """The paths ROLE's removal takes away: every row's path, in force or not (a setting changed
    since may have taken it out), but for rows without a path and paths a row keeps (``keep``,
    ``removal: keep``; a path one row keeps is kept whatever another row says); last row first;
    each path once, and none that sits under another path the removal takes (it goes with it)."""
    rows = check(role, files)
    kept = set(row.get("path") for row in rows
               if truthy(row.get("keep", False)) or row.get("removal", "remove") == "keep")
    paths = []
    for row in reversed(rows):
        path = row.get("path") or ""
        if path and path not in kept and path not in paths:
            paths.append(path)
    return [path for path in paths if not any(path.startswith(other.rstrip("/") + "/") for other in paths)]


def off_in(row, paths):
    """off() with the node's read of the row's path, and of a link row's target, looked up in
    ``paths`` (a read keyed by path: the plans' reads take a link's target too)."""
    target = paths.get(row["src"]) if row.get("state") == "link" and row.get("src") in paths else None
    return off(row, paths.get(row["path"]) or {"exists": False}, target)


def off(row, found, target=None):
    """Why the node's path differs from the row; '' when it does not. A link row's owner is
    judged on ``target``, the read of what the link points at, when the read took it:
    ansible.builtin.file sets a link's owner through the link, on its target."""
    path, state = row["path"], row["state"]
    if state == "absent":
        return "%s is present and is removed" % path if found.get("exists") else ""
    if not found.get("exists"):
        return "%s is missing" % path
    if row.get("keep") and state == "directory" and (found.get("isdir") or found.get("islink")):
        return ""
    if state == "link":
        if not found.get("islink"):
            return "%s is not a symbolic link" % path
        if found.get("link") != row["src"]:
            return "%s points at %s, not %s" % (path, found.get("link"), row["src"])
        if target is None:
            return _owner_off(row, found, [])
        if not target.get("exists"):
            return "%s points at %s, which is missing" % (path, row["src"])
        return _owner_off(dict(row, path=row["src"]), target, [])
    want_dir = state == "directory"
    if found.get("islink") or found.get("isdir") != want_dir:
        return "%s is not a %s" % (path, "directory" if want_dir else "regular file")
    differences = []
    if not want_dir and found.get("checksum") != row["checksum"]:
        differences.append("content differs")
    if found.get("mode") != row["mode"]:
        differences.append("mode %s, not %s" % (found.get("mode"), row["mode"]))
    return _owner_off(row, found, differences)


def _owner_off(row, found, differences):
    owner, want = "%s:%s" % (found.get("owner"), found.get("group")), "%s:%s" % (row["owner"], row["group"])
    if owner != want:
        differences.append("owner %s, not %s" % (owner, want))
    return "%s: %s" % (row["path"], ", ".join(differences)) if differences else ""


def plan_head(problems, steps, files, rows):
    """What every role's plan starts with: ``problems``; ``steps`` and ``files`` (the rows to
    write), none while there are problems; ``step``, the first reason of each step by name;
    ``table``, every row in force without its content."""
    named = {}
    for item in steps:
        named.setdefault(item["name"], item["reason"])
    return {"problems": problems, "steps": [] if problems else steps, "step": {} if problems else named,
            "files": [] if problems else files, "table": table(rows)}


def table(rows):
    """The rows without their content: what a plan publishes and a test tampers with."""
    return [{key: value for key, value in row.items() if key not in ("content", "checksum")} for row in rows]

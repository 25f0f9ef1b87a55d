# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Add (or remove) a compute-capability entry in SGLang's capability-keyed dicts.

SGLang's torch symmetric-memory all-reduce looks its limits up in dicts keyed by the GPU's
compute-capability major (9 = Hopper, 10 = SM100). Blackwell workstation and RTX parts report
12 (SM120): 0.5.5 to 0.5.13 index the dicts directly and die with ``KeyError: 12``; 0.5.14 and
later use ``.get()`` and silently switch the communicator off. This core inserts the missing
entry as source text beside the existing ones, so the edit is an insertion only and can be
taken back byte for byte.

Pure Python (standard library only, Python 3.8+): the Ansible module is a thin wrapper, and
the unit tests and the benchmark import this file directly.
"""

from __future__ import absolute_import, division, print_function

import ast
import glob
import os
import re
import tempfile

__metaclass__ = type

DEVICE_COMMUNICATORS = "srt/distributed/device_communicators/"
DEFAULT_TARGETS = (
    {"file": DEVICE_COMMUNICATORS + "all_reduce_utils.py",
     "name": "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES"},
    {"file": DEVICE_COMMUNICATORS + "torch_symm_mem.py",
     "name": "TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM"},
)

# Every entry this module writes ends its last line with MARKER, so a later run can tell its
# own entry from one that upstream (or a person) wrote, and `state: absent` removes only its
# own. MARKER_COMMA records that the entry before it had no trailing comma and got one.
MARKER = "# added by blackwell.sglang.sglang_capmap"
MARKER_COMMA = MARKER + " (with the comma after the entry above)"
MARKER_GAP = "  "

ADDED = "added"
UPDATED = "updated"
ALREADY_PRESENT = "already present"
PRESENT_UPSTREAM = "present upstream"
REMOVED = "removed"
NOT_PRESENT = "not present"

_EOL = re.compile(r"\r\n|\r|\n")


class CapmapError(Exception):
    """Bad input or a file this module must not touch; the message says which and why."""


# --------------------------------------------------------------------------------------------
# Source text helpers


class _Source:
    """A Python source text with the AST's (line, UTF-8 byte column) mapped to str offsets."""

    def __init__(self, text, label):
        self.text = text
        self.label = label
        self.starts = [0]
        for match in _EOL.finditer(text):
            self.starts.append(match.end())
        try:
            self.tree = ast.parse(text, filename=label)
        except SyntaxError as exc:
            raise CapmapError("cannot parse %s: %s (line %s)" % (label, exc.msg, exc.lineno))

    def line(self, lineno):
        """Line `lineno` (1-based) without its line ending."""
        start = self.starts[lineno - 1]
        end = self.starts[lineno] if lineno < len(self.starts) else len(self.text)
        return _EOL.sub("", self.text[start:end])

    def line_end(self, lineno):
        """Offset just before the line ending of line `lineno`."""
        return self.starts[lineno - 1] + len(self.line(lineno))

    def eol(self, lineno):
        """The line ending of line `lineno` ('' on a last line without one)."""
        return self.text[self.line_end(lineno):self.starts[lineno] if lineno < len(self.starts)
                         else len(self.text)]

    def offset(self, lineno, col):
        line = self.line(lineno)
        # ast columns count UTF-8 bytes, str offsets count characters.
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8", "replace"))

    def start(self, node):
        return self.offset(node.lineno, node.col_offset)

    def end(self, node):
        return self.offset(node.end_lineno, node.end_col_offset)

    def segment(self, node):
        return self.text[self.start(node):self.end(node)]

    def lineno_at(self, offset):
        lo, hi = 0, len(self.starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def skip_blank(self, offset, stop):
        """First offset at or after `offset` (before `stop`) that is not blank or a comment."""
        text = self.text
        while offset < stop:
            char = text[offset]
            if char == "#":
                while offset < stop and text[offset] not in "\r\n":
                    offset += 1
            elif char in " \t\f\r\n\\":
                offset += 1
            else:
                break
        return offset


def _find_dict(src, name):
    """The ast.Dict assigned to `name` (NAME or CLASS.NAME) at module or class level."""
    parts = name.split(".")
    if not all(re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", part) for part in parts):
        raise CapmapError("target name %r is not NAME or CLASS.NAME" % name)
    body = src.tree.body
    for cls in parts[:-1]:
        classes = [stmt for stmt in body if isinstance(stmt, ast.ClassDef) and stmt.name == cls]
        if not classes:
            raise CapmapError("%s not found in %s: no class %s" % (name, src.label, cls))
        if len(classes) > 1:
            raise CapmapError("%s in %s is ambiguous: class %s is defined %d times"
                              % (name, src.label, cls, len(classes)))
        body = classes[0].body
    attr = parts[-1]
    found = []
    for stmt in body:
        if isinstance(stmt, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == attr for t in stmt.targets):
                found.append(stmt)
        elif isinstance(stmt, ast.AnnAssign):
            if isinstance(stmt.target, ast.Name) and stmt.target.id == attr and stmt.value:
                found.append(stmt)
    where = "at class level" if len(parts) > 1 else "at module level"
    if not found:
        raise CapmapError("%s not found in %s: no assignment to %s %s"
                          % (name, src.label, attr, where))
    if len(found) > 1:
        raise CapmapError("%s in %s is ambiguous: assigned %d times %s (lines %s)"
                          % (name, src.label, len(found), where,
                             ", ".join(str(stmt.lineno) for stmt in found)))
    value = found[0].value
    if not isinstance(value, ast.Dict):
        raise CapmapError("%s in %s (line %d) is not a dict literal"
                          % (name, src.label, found[0].lineno))
    return value


def _int_key(node):
    if (isinstance(node, ast.Constant) and isinstance(node.value, int)
            and not isinstance(node.value, bool)):
        return node.value
    return None


def _entries(dict_node, key):
    """Indexes of the entries whose key is the integer `key`."""
    return [i for i, k in enumerate(dict_node.keys) if k is not None and _int_key(k) == key]


def _is_ours(src, value):
    line = src.line(value.end_lineno)
    return line.endswith(MARKER_GAP + MARKER) or line.endswith(MARKER_GAP + MARKER_COMMA)


def _splice(text, edits):
    """Apply (start, end, replacement) edits given in offsets of the original text."""
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


# --------------------------------------------------------------------------------------------
# One dict in one source text


def render_value(value):
    """Python source for a `values` entry: a str is taken as an expression, data is a literal."""
    if isinstance(value, str):
        if _EOL.search(value):
            raise CapmapError("value %r spans several lines; give it on one line" % value)
        try:
            ast.parse(value.strip(), mode="eval")
        except SyntaxError as exc:
            raise CapmapError("value %r is not a Python expression: %s" % (value, exc.msg))
        return value.strip()
    if isinstance(value, dict):
        # Ansible hands mapping keys over as strings, and SGLang's keys are ints: a silent
        # {'2': ...} would never match, so mappings must be written as expressions.
        raise CapmapError("value %r is a mapping; give it as a Python expression string, "
                          "e.g. '{2: 64 * MiB}'" % (value,))
    if not _plain_data(value):
        raise CapmapError("value %r is not a list, number, boolean, null or string" % (value,))
    return repr(value)


def _plain_data(value):
    if value is None or isinstance(value, (bool, int, float)):
        return True
    if isinstance(value, str):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain_data(item) for item in value)
    return False


def add_entry(text, name, capability=12, source_capability=10, value=None, label="<source>"):
    """Return (new_text, status) with `capability` added to the dict `name` in `text`.

    `value` is the new entry's Python source (or data, see render_value); None copies the
    source_capability entry's source text. An entry this module added before is rebuilt from
    the original text, so a changed `value` updates it and an unchanged one leaves the text as
    it is.
    """
    if value is not None:
        value = render_value(value)
    src = _Source(text, label)
    dict_node = _find_dict(src, name)
    ours = [i for i in _entries(dict_node, capability) if _is_ours(src, dict_node.values[i])]
    if ours:
        base = remove_entry(text, name, capability, label)[0]
        if _entries(_find_dict(_Source(base, label), name), capability):
            return text, PRESENT_UPSTREAM
        new = add_entry(base, name, capability, source_capability, value, label)[0]
        return new, (ALREADY_PRESENT if new == text else UPDATED)
    if _entries(dict_node, capability):
        return text, PRESENT_UPSTREAM
    new, expected = _insert(src, dict_node, name, capability, source_capability, value)
    _check_added(text, new, name, capability, expected, label)
    return new, ADDED


def _insert(src, dict_node, name, capability, source_capability, value):
    text = src.text
    keys, values = dict_node.keys, dict_node.values
    if not keys:
        raise CapmapError("%s in %s is an empty dict; there is no entry to place %d beside"
                          % (name, src.label, capability))
    if keys[-1] is None:
        raise CapmapError("%s in %s ends with a ** unpacking; add %d by hand"
                          % (name, src.label, capability))
    if value is None:
        sources = _entries(dict_node, source_capability)
        if not sources:
            present = [k for k in (_int_key(k) for k in keys if k is not None) if k is not None]
            raise CapmapError("%s in %s has no entry for compute capability %d to copy for %d "
                              "(keys: %s)" % (name, src.label, source_capability, capability,
                                              ", ".join(str(k) for k in present) or "none"))
        model = sources[-1]
        value = src.segment(values[model])
        expected = ast.dump(values[model])
    else:
        model = len(keys) - 1
        expected = ast.dump(ast.parse(value, mode="eval").body)
    # Keep the file's own spelling of "key: value" (": " in nearly every file).
    separator = text[src.end(keys[model]):src.start(values[model])]
    if _EOL.search(separator):
        separator = ": "
    entry = "%d%s%s" % (capability, separator, value)

    last_key, last_value = keys[-1], values[-1]
    value_end = src.end(last_value)
    closing = src.end(dict_node) - 1
    after = src.skip_blank(value_end, closing)
    comma = after if text[after] == "," else None

    key_start = src.start(last_key)
    key_line_start = src.starts[last_key.lineno - 1]
    indent = text[key_line_start:key_start]
    end_line = last_value.end_lineno
    rest = text[(comma + 1 if comma is not None else value_end):src.line_end(end_line)]
    line_mode = (
        indent.strip(" \t") == ""
        and (comma is None or src.lineno_at(comma) == end_line)
        and (rest.strip(" \t") == "" or rest.lstrip(" \t").startswith("#"))
        and src.lineno_at(closing) > end_line
    )
    if line_mode:
        # One new line after the last entry, indented like it, same comma style and line ending.
        at = src.starts[end_line] if end_line < len(src.starts) else len(text)
        eol = src.eol(end_line)
        if comma is not None:
            new_line = indent + entry + "," + MARKER_GAP + MARKER + eol
            return _splice(text, [(at, at, new_line)]), expected
        new_line = indent + entry + MARKER_GAP + MARKER_COMMA + eol
        return _splice(text, [(value_end, value_end, ","), (at, at, new_line)]), expected
    # The dict shares a line with its closing brace (a one-line dict, say): insert inline and
    # put the marker at the end of that physical line.
    if comma is not None:
        at, inserted = comma + 1, " " + entry + ","
    else:
        at, inserted = value_end, ", " + entry
    line_no = src.lineno_at(at)
    tail = text[at:src.line_end(line_no)]
    if "'" in tail or '"' in tail or tail.rstrip(" \t").endswith("\\"):
        raise CapmapError("cannot add %d to %s in %s: the line it belongs on (line %d) goes on "
                          "with a string or a continuation; add it by hand"
                          % (capability, name, src.label, line_no))
    eol_at = src.line_end(line_no)
    return _splice(text, [(at, at, inserted), (eol_at, eol_at, MARKER_GAP + MARKER)]), expected


def _check_added(before, after, name, capability, expected, label):
    """Refuse to write a patch that does not parse, does not hold the intended value (the same
    syntax tree as the copied entry or the given expression), or that `absent` could not take
    back exactly."""
    src = _Source(after, label)
    dict_node = _find_dict(src, name)
    found = _entries(dict_node, capability)
    if (len(found) != 1 or not _is_ours(src, dict_node.values[found[0]])
            or ast.dump(dict_node.values[found[0]]) != expected):
        raise CapmapError("cannot add %d to %s in %s: the dict's layout is not one this module "
                          "can patch reversibly; add it by hand" % (capability, name, label))
    try:
        compile(after, label, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise CapmapError("cannot add %d to %s in %s: the result would not compile (%s, line %s)"
                          % (capability, name, label, exc.msg, exc.lineno))
    if remove_entry(after, name, capability, label)[0] != before:
        raise CapmapError("cannot add %d to %s in %s: the dict's layout is not one this module "
                          "can patch reversibly; add it by hand" % (capability, name, label))


def remove_entry(text, name, capability=12, label="<source>"):
    """Return (new_text, status) with the `capability` entry this module added taken out."""
    src = _Source(text, label)
    dict_node = _find_dict(src, name)
    found = _entries(dict_node, capability)
    ours = [i for i in found if _is_ours(src, dict_node.values[i])]
    if not ours:
        return text, (PRESENT_UPSTREAM if found else NOT_PRESENT)
    index = ours[-1]
    broken = CapmapError("the %d entry of %s in %s carries this module's marker but was edited "
                         "since; remove it by hand" % (capability, name, label))
    if index == 0:
        raise broken
    key, value = dict_node.keys[index], dict_node.values[index]
    prev_end = src.end(dict_node.values[index - 1])
    key_start, value_end = src.start(key), src.end(value)
    line = src.line(value.end_lineno)
    with_comma = line.endswith(MARKER_GAP + MARKER_COMMA)
    marker = MARKER_GAP + (MARKER_COMMA if with_comma else MARKER)
    indent = text[src.starts[key.lineno - 1]:key_start]
    tail = text[value_end:src.line_end(value.end_lineno)]
    edits = []
    if (indent.strip(" \t") == "" and tail in (marker, "," + marker)
            and _EOL.search(text[prev_end:key_start])):
        # A whole line (or lines) of its own.
        stop = src.starts[value.end_lineno] if value.end_lineno < len(src.starts) else len(text)
        edits.append((src.starts[key.lineno - 1], stop, ""))
        if with_comma:
            if text[prev_end:prev_end + 1] != ",":
                raise broken
            edits.append((prev_end, prev_end + 1, ""))
    else:
        if with_comma:
            raise broken
        marker_at = src.line_end(value.end_lineno) - len(marker)
        edits.append((marker_at, marker_at + len(marker), ""))
        if text[value_end:value_end + 1] == ",":
            comma = src.skip_blank(prev_end, key_start)
            if text[comma:comma + 1] != "," or text[comma + 1:key_start] != " ":
                raise broken
            edits.append((comma + 1, value_end + 1, ""))
        else:
            if text[prev_end:key_start] != ", ":
                raise broken
            edits.append((prev_end, value_end, ""))
    new = _splice(text, edits)
    try:
        compile(new, label, "exec", dont_inherit=True)
    except SyntaxError:
        raise broken
    return new, REMOVED


def original_text(text, names, label="<source>"):
    """`text` with every entry this module added to the dicts `names` taken out: the text the
    file had before the patch, so that a patched file can be checked against the digest its
    installer recorded. Raises CapmapError where a marked entry was edited since (or a dict is
    not found while the file carries the marker)."""
    bom = text.startswith("\ufeff")
    body = text[1:] if bom else text
    if MARKER not in body:
        return text
    for name in names:
        while True:
            src = _Source(body, label)
            dict_node = _find_dict(src, name)
            ours = [_int_key(key) for key, value in zip(dict_node.keys, dict_node.values)
                    if key is not None and _int_key(key) is not None and _is_ours(src, value)]
            if not ours:
                break
            body, _status = remove_entry(body, name, ours[0], label)
    return ("\ufeff" if bom else "") + body


def original_bytes(rel, names):
    """A function from a patched file's bytes to its bytes before the patch (for
    dist_record.verify); raises ValueError where they cannot be told."""
    def undo(data):
        try:
            return original_text(data.decode("utf-8"), names, rel).encode("utf-8")
        except (CapmapError, SyntaxError, UnicodeDecodeError) as exc:
            raise ValueError(str(exc))
    return undo


def record_derived(targets=None):
    """The files the patch edits, relative to site-packages, each with the function that gives
    back its bytes before the patch (see dist_record.verify)."""
    names = {}
    for target in (targets if targets is not None else DEFAULT_TARGETS):
        names.setdefault("sglang/" + target["file"], []).append(target["name"])
    return dict((rel, original_bytes(rel, found)) for rel, found in names.items())


# --------------------------------------------------------------------------------------------
# The installed package


def find_package(path=None, venv=None):
    """The sglang package directory, given itself or the root of a virtualenv holding it."""
    if venv is not None:
        pattern = os.path.join(venv, "lib", "python3.*", "site-packages", "sglang")
        found = sorted(p for p in glob.glob(pattern) if os.path.isdir(os.path.join(p, "srt")))
        if not found:
            raise CapmapError("no sglang package in the virtualenv %s: nothing matches %s"
                              % (venv, pattern))
        if len(found) > 1:
            raise CapmapError("the virtualenv %s holds several sglang packages (%s); give `path`"
                              % (venv, ", ".join(found)))
        return found[0]
    if not os.path.isdir(os.path.join(path, "srt")):
        raise CapmapError("no sglang package at %s: expected the directory holding srt/" % path)
    return path


def read_version(package):
    """SGLang's version from the dist-info beside the package, or None when there is none."""
    site = os.path.dirname(os.path.abspath(package))
    versions = set()
    for meta in glob.glob(os.path.join(site, "sglang-*.dist-info", "METADATA")):
        try:
            with open(meta, "rb") as handle:
                head = handle.read(8192).decode("utf-8", "replace")
        except (IOError, OSError):
            continue
        match = re.search(r"^Version:[ \t]*(\S+)", head, re.MULTILINE)
        if match:
            versions.add(match.group(1))
    # Two dist-infos that disagree mean a broken install; better no version than a wrong one.
    return versions.pop() if len(versions) == 1 else None


def stale_bytecode(path):
    """Compiled copies of `path` in its __pycache__: every interpreter tag and opt level."""
    folder = os.path.join(os.path.dirname(path), "__pycache__")
    stem = os.path.splitext(os.path.basename(path))[0]
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    # <stem>.<tag>.pyc or <stem>.<tag>.opt-N.pyc; "torch_symm_mem_x.*" must not match.
    pattern = re.compile(r"^%s\.[^.]+(\.opt-\d+)?\.pyc$" % re.escape(stem))
    return sorted(os.path.join(folder, n) for n in names if pattern.match(n))


def _writable(path):
    """Why `path` cannot be replaced by a temp file + rename keeping its owner, or None."""
    folder = os.path.dirname(path) or "."
    if not os.access(folder, os.W_OK | os.X_OK):
        return "permission denied on its directory %s" % folder
    euid = os.geteuid() if hasattr(os, "geteuid") else 0
    owner = os.stat(path).st_uid
    if euid == 0:
        # root passes every permission check except an immutable file or a read-only mount,
        # and a rename over either fails.
        if not os.access(path, os.W_OK):
            return "it is immutable or on a read-only file system"
    elif owner != euid:
        return "it belongs to uid %d and only root could keep that owner" % owner
    return None


class Change:
    """One file's before and after bytes."""

    def __init__(self, path, file, before, after):
        self.path = path
        self.file = file
        self.before = before
        self.after = after


class Plan:
    """What a run would do: per-target statuses, file changes, bytecode to remove."""

    def __init__(self, package, version):
        self.package = package
        self.version = version
        self.targets = []
        self.changes = []
        self.bytecode = []

    @property
    def changed(self):
        return bool(self.changes)


def plan(package, targets=None, capability=12, source_capability=10, values=None,
         state="present", purge_bytecode=True):
    """Validate every target and compute the result; raises CapmapError, writes nothing."""
    targets = [dict(t) for t in (targets if targets is not None else DEFAULT_TARGETS)]
    values = dict(values or {})
    version = read_version(package)
    if state not in ("present", "absent"):
        raise CapmapError("state must be present or absent, not %r" % (state,))
    if capability < 0 or source_capability < 0:
        raise CapmapError("capability and source_capability must be compute-capability majors "
                          "(0 or more)")
    names = [t["name"] for t in targets]
    for name in names:
        if names.count(name) > 1:
            raise CapmapError("target %s is listed more than once" % name)
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise CapmapError("values names %s, which is not among the targets (%s)"
                          % (", ".join(unknown), ", ".join(names)))
    rendered = {}
    for name, value in values.items():
        try:
            rendered[name] = render_value(value)
        except CapmapError as exc:
            raise CapmapError("values for %s: %s" % (name, exc))

    result = Plan(package, version)
    errors = []
    texts = {}
    order = []
    for target in targets:
        rel = target["file"]
        path = os.path.join(package, rel)
        if rel not in texts:
            if not os.path.isfile(path):
                hint = ""
                if os.path.basename(rel) == "torch_symm_mem.py":
                    hint = ("; SGLang 0.5.4 and older have no torch_symm_mem.py (the torch "
                            "symmetric-memory all-reduce needs 0.5.5 or newer)")
                errors.append("%s not found in the sglang package at %s (SGLang %s)%s"
                              % (rel, package, version or "version unknown", hint))
                texts[rel] = None
                continue
            try:
                with open(path, "rb") as handle:
                    data = handle.read()
                texts[rel] = [data, data.decode("utf-8")]
            except UnicodeDecodeError:
                errors.append("cannot read %s: not UTF-8" % path)
                texts[rel] = None
                continue
            order.append(rel)
        if texts[rel] is None:
            continue
        label = path
        text = texts[rel][1]
        bom = text.startswith("\ufeff")
        body = text[1:] if bom else text
        try:
            if state == "present":
                body, status = add_entry(body, target["name"], capability, source_capability,
                                         rendered.get(target["name"]), label)
            else:
                body, status = remove_entry(body, target["name"], capability, label)
        except CapmapError as exc:
            errors.append(str(exc))
            texts[rel] = None
            continue
        texts[rel][1] = ("\ufeff" if bom else "") + body
        result.targets.append({"file": rel, "name": target["name"], "path": path,
                               "status": status})
    for rel in order:
        if texts[rel] is None:
            continue
        before, text = texts[rel]
        after = text.encode("utf-8")
        if after == before:
            continue
        path = os.path.join(package, rel)
        why = _writable(path)
        if why:
            errors.append("cannot write %s: %s" % (path, why))
            continue
        result.changes.append(Change(path, rel, before, after))
        if purge_bytecode:
            for pyc in stale_bytecode(path):
                if not os.access(os.path.dirname(pyc), os.W_OK | os.X_OK):
                    errors.append("cannot remove stale bytecode %s: permission denied on %s"
                                  % (pyc, os.path.dirname(pyc)))
                    break
                result.bytecode.append(pyc)
    if errors:
        raise CapmapError("; ".join(errors))
    return result


def write_atomic(path, data):
    """Replace `path` by a temp file in the same directory, keeping its mode and owner."""
    info = os.stat(path)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp",
                               dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, info.st_mode & 0o7777)
        if hasattr(os, "chown") and (info.st_uid, info.st_gid) != (os.stat(tmp).st_uid,
                                                                   os.stat(tmp).st_gid):
            os.chown(tmp, info.st_uid, info.st_gid)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def apply(result, backup=None):
    """Write a plan's changes (rolling back written files if one fails), then purge bytecode.

    `backup`, when given, is called with each file's path before that file is written and
    returns the backup's path. Returns (bytecode removed, backups made).
    """
    written = []
    backups = []
    try:
        for change in result.changes:
            if backup is not None:
                backups.append(backup(change.path))
            write_atomic(change.path, change.after)
            written.append(change)
    except (IOError, OSError) as exc:
        for change in reversed(written):
            write_atomic(change.path, change.before)
        raise CapmapError("cannot write %s: %s (files written before it were restored)"
                          % (result.changes[len(written)].path, exc))
    removed = []
    # A .pyc compiled from the old text can outlive it: hash-checked or unchecked pycs (as
    # distro packagers build them) are not revalidated against the new mtime, so delete them.
    for pyc in result.bytecode:
        try:
            os.unlink(pyc)
            removed.append(pyc)
        except OSError:
            if os.path.exists(pyc):
                raise
    return removed, backups


def run(path=None, venv=None, targets=None, capability=12, source_capability=10, values=None,
        state="present", purge_bytecode=True, check_mode=False):
    """Plan and (unless check_mode) apply; what the benchmark and quick scripts call."""
    package = find_package(path, venv)
    result = plan(package, targets, capability, source_capability, values, state,
                  purge_bytecode)
    removed = list(result.bytecode)
    if not check_mode:
        removed = apply(result)[0]
    return result, removed

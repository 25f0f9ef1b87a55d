"""Reading a pip requirements file with hashes (what `pip-compile --generate-hashes` and
`uv pip compile --generate-hashes` write), without Ansible imports."""
from __future__ import annotations

import re

_NAME_SEPARATORS = re.compile(r"[-_.]+")
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;\\]+)")
_HASH = re.compile(r"--hash[=\s]+sha256:([0-9a-fA-F]{64})(?![0-9a-fA-F])")


def _canonical(name: str) -> str:
    return _NAME_SEPARATORS.sub("-", name).lower()


def logical_lines(text: str) -> list[str]:
    """The requirement lines of TEXT, with backslash continuations joined and comments dropped."""
    out, current = [], ""
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if line.endswith("\\"):
            current += line[:-1].strip() + " "
            continue
        current += line
        if current.strip():
            out.append(current.strip())
        current = ""
    if current.strip():
        out.append(current.strip())
    return out


def pinned_hashes(text: str, name: str, version: str) -> list[str]:
    """The sha256 hashes TEXT gives for NAME==VERSION (names compared as pip does), in the file's
    order, lower case; [] when the file does not pin that release or gives it no hash."""
    for line in logical_lines(text or ""):
        match = _PIN.match(line)
        if match and _canonical(match.group(1)) == _canonical(name) and match.group(2) == version:
            return [digest.lower() for digest in _HASH.findall(line)]
    return []


def pinned_version(text: str, name: str) -> str:
    """The release TEXT pins NAME to (``NAME==VERSION``, names compared as pip does), or ''."""
    for line in logical_lines(text or ""):
        match = _PIN.match(line)
        if match and _canonical(match.group(1)) == _canonical(name):
            return match.group(2)
    return ""


def release_key(version: str) -> tuple:
    """A release's numbers for comparison (``2.31.2`` > ``2.30.7``); a local part and anything
    after the numbers are left out, and a missing number counts as 0."""
    numbers = re.match(r"[0-9]+(\.[0-9]+)*", str(version or "").strip())
    parts = [int(part) for part in numbers.group(0).split(".")] if numbers else []
    return tuple(parts + [0] * (4 - len(parts)))

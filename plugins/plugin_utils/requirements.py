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


def pinned_line(text: str, name: str) -> str:
    """TEXT's requirement line that pins NAME (``NAME==VERSION`` with its options, the hashes
    among them; names compared as pip does), or ''."""
    for line in logical_lines(text or ""):
        match = _PIN.match(line)
        if match and _canonical(match.group(1)) == _canonical(name):
            return line
    return ""


def pinned_version(text: str, name: str) -> str:
    """The release TEXT pins NAME to (``NAME==VERSION``, names compared as pip does), or ''."""
    match = _PIN.match(pinned_line(text, name))
    return match.group(2) if match else ""


# A PEP 440 version: epoch, release, pre-, post- and dev-release, local part.
_VERSION = re.compile(r"v?(?:(\d+)!)?(\d+(?:\.\d+)*)"
                      r"(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d*))?"
                      r"(?:-(\d+)|[-_.]?(?:post|rev|r)[-_.]?(\d*))?"
                      r"(?:[-_.]?dev[-_.]?(\d*))?(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?", re.IGNORECASE)
_PRE = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


def _sort_key(version: str):
    """VERSION's place in PEP 440's order (a dev release before its pre-releases, those before
    the final release, that before its post-releases; the local part left out), or None."""
    match = _VERSION.fullmatch(str(version).strip())
    if not match:
        return None
    epoch, release, pre, pre_n, post_implicit, post_n, dev = match.groups()
    numbers = [int(part) for part in release.split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    post = post_implicit if post_implicit is not None else post_n
    if pre:
        pre_key = (0, _PRE[pre.lower()], int(pre_n or 0))
    elif dev is not None and post is None:
        pre_key = (-1, 0, 0)
    else:
        pre_key = (1, 0, 0)
    return (int(epoch or 0), tuple(numbers), pre_key, -1 if post is None else int(post or 0),
            float("inf") if dev is None else int(dev or 0))


def at_least(version: str, floor: str) -> bool:
    """Whether release VERSION is FLOOR or later, compared as PEP 440 orders releases (a
    pre-release of FLOOR is earlier than FLOOR); an unreadable VERSION is not."""
    mine, least = _sort_key(version), _sort_key(floor)
    return mine is not None and least is not None and mine >= least

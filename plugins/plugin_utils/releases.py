# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a release directory is called and which ones a prune removes (whether a release's files
are as installed is module_utils/dist_record.py's). Pure Python, no Ansible imports: the release_name and releases_to_prune
filters and the install and patch plans call it, the unit tests too."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json


def _name(path):
    return str(path or "").rstrip("/").rsplit("/", 1)[-1]


def to_prune(found, keep, installed, active):
    """The paths of the releases to remove. FOUND lists the releases newest first, as
    sglang_venv_info reports them (``path``, ``name``, ``running``, ``rollback_target``).
    Always kept: the one installed (INSTALLED), the one the link points at (ACTIVE), the one a
    process runs from and the one the rollback record names. KEEP counts the first two; the
    newest of the others fill the rest."""
    counted = set(name for name in (_name(installed), _name(active)) if name)
    spared = set(r["name"] for r in found if r.get("running") or r.get("rollback_target"))
    room = max(int(keep) - len(counted), 0)
    others = [r for r in found if r["name"] not in counted]
    return [r["path"] for r in others[room:] if r["name"] not in spared]


def release_name(version, extras, extra_packages, constraints, lock, overrides=None):
    """The directory name of a release: VERSION for the plain request (``sglang==VERSION``, no
    extras, extra packages, constraints or lock), else VERSION plus the first 10 hex digits of
    the sha256 of the request, taken as the request files are written (the lists in their order,
    the lock without its surrounding whitespace; OVERRIDES, the installer's overrides, only
    where there are any): whatever rewrites those files names another directory, so a changed
    request is installed beside the running release, never inside it."""
    request = {
        "extras": [str(item) for item in extras or []],
        "extra_packages": [str(item) for item in extra_packages or []],
        "constraints": [str(item) for item in constraints or []],
        "lock": str(lock or "").strip(),
    }
    if overrides:
        request["overrides"] = [str(item) for item in overrides]
    if not any(request.values()):
        return str(version)
    digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode("utf-8")).hexdigest()
    return "%s-%s" % (version, digest[:10])

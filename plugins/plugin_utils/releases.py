# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which release directories a prune removes. Pure Python, no Ansible imports: the
releases_to_prune filter calls it, the unit tests too."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type


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

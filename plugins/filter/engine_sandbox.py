# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: engine_sandbox
short_description: What the SGLang engine may read but never write, so that it cannot change the code of its next start
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - Returns what C(blackwell.sglang.sglang_service) adds to its unit so that the engine cannot
    write code it would load at its next start.
  - The modules C(trust_remote_code) imports are copied into C(HF_MODULES_CACHE), set to a
    directory of the unit's private C(/tmp), emptied whenever the service stops.
  - Unless O(engine_downloads), the Hugging Face home (C(HF_HOME), else
    C($XDG_CACHE_HOME/huggingface), else C(<home>/.cache/huggingface)) and any hub cache set
    elsewhere in O(environment) are read-only to the engine and C(HF_HUB_OFFLINE=1) is set;
    it serves what was staged before the restart.
  - Every model path given as an absolute path is read-only to the engine (a hub snapshot,
    C(<cache>/models--<org>--<name>/snapshots/<revision>), with the blobs its links point to); a
    repository id is read from the hub cache.
  - Each directory between a writable path and a read-only path inside it is bound onto itself
    (C(BindPaths)), since a mount point cannot be renamed or removed; so the engine cannot move the
    read-only tree aside and put its own in its place for its next start.
  - A writable path at or inside a read-only one would open it again; it is returned as a
    problem, which C(blackwell.sglang.setting_problems) refuses.
options:
  _input:
    description: The service account's home.
    type: path
    required: true
  environment:
    description: The environment the unit sets (C(sglang_service_environment)).
    type: dict
    required: true
  model_path:
    description: The model path or repository id the engine loads (C(sglang_service_model_path)).
    type: str
    required: true
  draft_model_path:
    description: EAGLE-3's draft model path or repository id (C(sglang_service_eagle3_draft_model_path)).
    type: str
    required: true
  eagle3_enabled:
    description: Whether the engine loads the draft model (C(sglang_service_eagle3_enabled)).
    type: bool
    required: true
  engine_downloads:
    description: The engine may download from the hub at its start.
    type: bool
    required: true
  writable_paths:
    description: The paths the engine may write (C(sglang_service_writable_paths)).
    type: list
    elements: path
    required: true
"""

EXAMPLES = r"""
- name: Read-only paths of the unit
  ansible.builtin.debug:
    msg: "{{ ('/var/lib/sglang' | blackwell.sglang.engine_sandbox({}, '/models/kimi', '', false, false, ['/var/lib/sglang'])).read_only }}"
"""

RETURN = r"""
_value:
  description: >-
    C(environment) (the variables the unit sets), C(read_only) (ReadOnlyPaths, in order),
    C(pinned) (BindPaths, outermost first), C(hf_home) (the Hugging Face home the role makes
    where it is missing; empty with O(engine_downloads)) and C(problems) (sentences naming a
    writable path that would open a read-only one).
  type: dict
"""


def engine_sandbox(home, environment, model_path, draft_model_path, eagle3_enabled, engine_downloads, writable_paths):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sandbox import engine_sandbox as _engine_sandbox
    return _engine_sandbox(home, environment, str(model_path or ""), str(draft_model_path or ""), bool(eagle3_enabled),
                           bool(engine_downloads), list(writable_paths or []))


class FilterModule(object):
    def filters(self):
        return {"engine_sandbox": engine_sandbox}

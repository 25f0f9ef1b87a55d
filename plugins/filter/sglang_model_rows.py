# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: sglang_model_rows
short_description: The models the sglang_model role stages, from its settings
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - One row per model the role C(blackwell.sglang.sglang_model) stages - the model, then
    EAGLE-3's draft model when a draft repository id or source path is set.
  - Pure Python (plugins/plugin_utils/model_plan.py), unit-tested.
options:
  _input:
    description:
      - The role's settings without their prefix C(sglang_model_) - C(repo_id), C(revision),
        C(source_path), C(dest), C(expected_files), C(allow_patterns), C(draft_repo_id),
        C(draft_revision), C(draft_source_path), C(draft_dest) and C(models_dir).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Stage each model
  ansible.builtin.include_tasks: stage.yml
  loop: "{{ settings | blackwell.sglang.sglang_model_rows }}"
"""

RETURN = r"""
_value:
  description: >-
    The rows, each with C(label), C(fact) (the fact its staged path is published as),
    C(repo_id), C(revision), C(source_path), C(dest), C(expected_files), C(allow_patterns) and
    C(path_dest) (where a path-mode copy or link goes - C(dest), else C(models_dir)/<the
    source's name>).
  type: list
  elements: dict
"""


def sglang_model_rows(settings):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.model_plan import rows
    return rows(settings or {})


class FilterModule(object):
    def filters(self):
        return {"sglang_model_rows": sglang_model_rows}

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: sglang_service_plan
short_description: What the sglang_service role does on a node, decided from its reads
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - The plan of the role C(blackwell.sglang.sglang_service), from what
    M(blackwell.sglang.sglang_venv_info) read of the release and the paths the role manages,
    what M(blackwell.sglang.sglang_service_info) read of the service, the release stage
    (P(blackwell.sglang.sglang_service_release#filter)), the role's settings, and the table of
    the paths the role manages with their rendered content.
  - It holds the steps to take with a reason each (C(release), C(record_forget), C(record),
    C(file), C(restart), C(smoke), C(service), C(gate)); a node that runs what it should gets
    none, and the role ends there.
  - Pure Python (plugins/plugin_utils/service_plan.py), unit-tested over recorded reads.
options:
  _input:
    description: The result of M(blackwell.sglang.sglang_venv_info) for the release and the managed paths.
    type: dict
    required: true
  state:
    description: The result of M(blackwell.sglang.sglang_service_info).
    type: dict
    required: true
  release:
    description: What P(blackwell.sglang.sglang_service_release#filter) returned.
    type: dict
    required: true
  inputs:
    description: The role's settings without their prefix C(sglang_service_), and the paths and values the role derives from them.
    type: dict
    required: true
  files:
    description:
      - The table of the paths the role manages, one row each - C(path), C(state) (C(file), the
        default, C(directory) or C(link)), C(mode), C(owner) and C(group) (default root),
        C(template) or C(source) (the name of the content), C(src) (a link's target), C(keep)
        (an existing directory is kept as it is), C(secret) (its content may hold secrets),
        C(restart) (a change restarts the server) and C(validate) (the command a new unit is
        checked with).
    type: list
    elements: dict
    required: true
  contents:
    description: The text of each template and source the table names, by name.
    type: dict
    required: true
  check_mode:
    description: Whether the run is a check.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Plan the deploy
  ansible.builtin.set_fact:
    sglang_service_plan: "{{ read | blackwell.sglang.sglang_service_plan(state, release, inputs, files, contents, ansible_check_mode) }}"
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    problems:
      description: The release stage's problems.
      type: list
      elements: str
    steps:
      description: The steps to take, each with C(name) and C(reason); empty on a node that runs what it should.
      type: list
      elements: dict
    step:
      description: The first reason of each step, by step name.
      type: dict
    files:
      description: The table's rows the node differs from, each with its C(reason); not their content, which may hold secrets.
      type: list
      elements: dict
    table:
      description: Every row of the table in force, without its content.
      type: list
      elements: dict
    restart_pending:
      description: Whether this run changes what the server starts from (or another role asked for a restart).
      type: bool
    service:
      description: What the service's state calls for, as P(blackwell.sglang.sglang_service_state#filter) returns it.
      type: dict
"""


def sglang_service_plan(read, state, release, inputs, files, contents, check_mode=False):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.service_plan import plan
    return plan(read or {}, state or {}, release or {}, inputs or {}, files or [], contents or {}, bool(check_mode))


class FilterModule(object):
    def filters(self):
        return {"sglang_service_plan": sglang_service_plan}

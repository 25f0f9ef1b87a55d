# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: sglang_service_state
short_description: What the state of sglang.service calls for
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - From what M(blackwell.sglang.sglang_service_info) read, what the role
    C(blackwell.sglang.sglang_service) does about the service - restart it (and why), remove
    drop-ins, wait for an engine still loading its model, start or enable it.
  - The plan (P(blackwell.sglang.sglang_service_plan#filter)) holds it for the first read; the
    role judges the state again after a restart or a wait.
  - Pure Python (plugins/plugin_utils/service_plan.py), unit-tested.
options:
  _input:
    description: The result of M(blackwell.sglang.sglang_service_info).
    type: dict
    required: true
  inputs:
    description: The role's settings without their prefix C(sglang_service_).
    type: dict
    required: true
  pending:
    description: Whether this run changed what the server starts from.
    type: bool
    default: false
  waited:
    description: Whether the read followed a wait for an engine still loading.
    type: bool
    default: false
  check_mode:
    description: Whether the run is a check (nothing is waited for).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Judge the state again after the restart
  ansible.builtin.set_fact:
    service: "{{ state_after | blackwell.sglang.sglang_service_state(inputs, true, false, ansible_check_mode) }}"
"""

RETURN = r"""
_value:
  description: What the state calls for.
  type: dict
  contains:
    reasons:
      description: Why the server is restarted.
      type: list
      elements: str
    dropins:
      description: The drop-ins to remove.
      type: list
      elements: str
    restart_due:
      description: Whether the state alone calls for a restart.
      type: bool
    wait_for_loading:
      description: Whether to wait for an engine still loading its model.
      type: bool
    loading_polls:
      description: How many times that wait polls /health.
      type: int
    start:
      description: Whether the unit is to be started or its enablement changed.
      type: bool
    smoke:
      description: Whether the NCCL smoke test runs before the restart the state calls for.
      type: bool
    restarts:
      description: Whether the run's one restart comes (for this run's changes, a reason or a drop-in).
      type: bool
    tell_reasons:
      description: Whether the reasons add to what this run changes (always in a check).
      type: bool
    exists:
      description: Whether systemd knows the unit.
      type: bool
    drifted:
      description: Whether the state calls for anything.
      type: bool
"""


def sglang_service_state(state, inputs, pending=False, waited=False, check_mode=False):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.service_plan import service_state
    return service_state(state or {}, inputs or {}, bool(pending), bool(waited), bool(check_mode))


class FilterModule(object):
    def filters(self):
        return {"sglang_service_state": sglang_service_state}

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: sglang_prometheus_targets
short_description: The fleet's Prometheus scrape targets, as a file_sd_configs file lists them
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - One entry per engine node whose metrics are on (C(sglang_service_metrics_enabled)), at the
    address the router would reach it at and its C(sglang_service_port), labelled C(job=sglang),
    C(instance) (the inventory name), C(model) (the served model name, else the model path),
    C(release) (C(sglang_install_version)) and C(gpu_model) (the GPU names of its gathered
    C(gpu) facts, else the label the file had, else C(unknown)); then one per router host on
    its C(sglang_router_metrics_port), labelled C(job=sglang-router) and C(instance).
  - Also the notes an operator should read (a target only its own host can scrape) and the
    problems that stop the write (a port that is not one, a host without a usable address, two
    hosts at one target, an engine without a model or a release), each naming the host.
  - Pure Python (plugins/plugin_utils/prometheus_plan.py), unit-tested.
options:
  _input:
    description: The inventory's host variables.
    type: dict
    required: true
  engines:
    description: The engine nodes (the group sglang_nodes).
    type: list
    elements: str
    required: true
  routers:
    description: The router hosts (the group sglang_router).
    type: list
    elements: str
    required: true
  defaults:
    description: The roles' defaults, for the variables a host does not set.
    type: dict
    default: {}
  previous:
    description: The targets file as it is ('' when there is none), whose GPU labels stay where facts are missing.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Decide the fleet's scrape targets
  ansible.builtin.set_fact:
    targets: >-
      {{ hostvars | blackwell.sglang.sglang_prometheus_targets(groups['sglang_nodes'], groups['sglang_router'],
         defaults={'sglang_service_port': 30000}) }}
"""

RETURN = r"""
_value:
  description: C(targets) (the file's list of C(targets) and C(labels)), C(notes) and C(problems).
  type: dict
"""


def sglang_prometheus_targets(hostvars, engines, routers, defaults=None, previous=""):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.prometheus_plan import targets
    return targets(hostvars or {}, list(engines or []), list(routers or []), defaults or {}, previous or "")


class FilterModule(object):
    def filters(self):
        return {"sglang_prometheus_targets": sglang_prometheus_targets}

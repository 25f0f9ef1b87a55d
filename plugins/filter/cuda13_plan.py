# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: cuda13_plan
short_description: What the cuda13 role does on a node, decided from its one read
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - The plan of the role C(blackwell.sglang.cuda13), from what M(blackwell.sglang.cuda_toolkit_info)
    read on the node, the repository from P(blackwell.sglang.cuda13_repository#filter), the role's
    settings and data, and the table of the paths the role manages with their rendered content.
  - It holds the problems that stop the host (a signing key that is not the pinned one or could
    not be fetched), the steps to take with a reason each, and what each step acts on. A node
    that is as the role leaves it gets no steps, and the role ends there.
  - Pure Python (plugins/plugin_utils/cuda_plan.py), unit-tested over recorded reads.
options:
  _input:
    description: The result of M(blackwell.sglang.cuda_toolkit_info).
    type: dict
    required: true
  repo:
    description: The result of P(blackwell.sglang.cuda13_repository#filter) for the node.
    type: dict
    required: true
  inputs:
    description: The role's settings without their prefix C(cuda13_), and its data, as for P(blackwell.sglang.cuda13_repository#filter).
    type: dict
    required: true
  files:
    description:
      - The table of the paths the role manages, one row each - C(path), C(state) (C(file), the
        default, C(directory) or C(absent)), C(mode), C(template) (the template whose rendering
        is the content) or C(source=key) (the signing key as read), C(enabled) (default true),
        C(refresh) (C(ldconfig) when the linker cache must follow the file) and C(apt_source)
        (apt's package lists know the repository from it while the node has it unchanged, and a
        check judges the toolkit install only then).
    type: list
    elements: dict
    required: true
  contents:
    description: The rendered text of each template the table names, by template name.
    type: dict
    required: true
  check_mode:
    description: Whether the run is a check.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Plan the role from the node's read
  ansible.builtin.set_fact:
    cuda13_plan: >-
      {{ probe | blackwell.sglang.cuda13_plan(repo, inputs, files,
                                              dict(templates | zip(query('blackwell.sglang.rendered', *templates))),
                                              ansible_check_mode) }}
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    problems:
      description: Why the host must stop before anything changes; empty to go on.
      type: list
      elements: str
    steps:
      description: >-
        The steps to take, each with C(name) (C(file), C(prerequisites), C(toolkit), C(hold),
        C(previous), C(links), C(ldconfig), C(verify), C(driver)) and C(reason); empty on a node
        that is as the role leaves it.
      type: list
      elements: dict
    step:
      description: The first reason of each step, by step name.
      type: dict
    files:
      description: The table's rows the node differs from, each with its C(content), C(checksum) and C(reason).
      type: list
      elements: dict
    table:
      description: Every row of the table in force, as given (its C(state) filled in, owner and group added), without its content.
      type: list
      elements: dict
    prerequisites:
      description: The packages the role's apt tasks need that are not installed.
      type: list
      elements: str
    toolkit:
      description: >-
        C(installed) (the toolkit package's installed version, empty when none), C(moves)
        (installed or moved by this run) and C(judged) (whether apt can judge the install in a
        check - its binding is there and its lists know the repository).
      type: dict
    previous:
      description: The 12.x toolkit packages to remove.
      type: list
      elements: str
    apt_judged:
      description: Whether apt can run in a check (its Python binding is installed).
      type: bool
    links:
      description: The alternatives to select, each with C(name) and C(link).
      type: list
      elements: dict
    alternatives:
      description: >-
        Every alternative the toolkit packages register, each with C(name) and C(link), selected
        or not (published as the fact C(cuda13_links)).
      type: list
      elements: dict
    nvcc:
      description: Whether nvcc through the toolkit link reports the wanted release.
      type: bool
    cuda_moves:
      description: >-
        Whether this run installs the toolkit or moves a link: the linker cache is refreshed and
        nvcc's banner read again after it (which a check cannot judge).
      type: bool
"""


def cuda13_plan(probe, repo, inputs, files, contents, check_mode=False):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.cuda_plan import plan
    return plan(probe or {}, repo or {}, inputs or {}, files or [], contents or {}, bool(check_mode))


class FilterModule(object):
    def filters(self):
        return {"cuda13_plan": cuda13_plan}

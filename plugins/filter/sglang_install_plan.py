# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: sglang_install_plan
short_description: What the sglang_install role does on a node, decided from its one read
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - The plan of the role C(blackwell.sglang.sglang_install), from what
    M(blackwell.sglang.sglang_venv_info) read on the node, the role's settings and the paths it
    derives from them, and the table of the paths the role manages with their rendered content.
  - It holds the problems that stop the host before anything is written (each naming its
    setting), the steps to take with a reason each, and what each step acts on. A node that is
    as the role leaves it gets no steps, and the role ends there.
  - Pure Python (plugins/plugin_utils/install_plan.py), unit-tested over reads of real venvs.
options:
  _input:
    description: >-
      The result of M(blackwell.sglang.sglang_venv_info) for the release's venv, with
      C(versions) holding the NCCL package's release.
    type: dict
    required: true
  inputs:
    description:
      - The role's settings without their prefix C(sglang_install_), and what the role derives
        from them - C(release_dir), C(requirements_file), C(constraints_file), C(sources_file)
        (by installer), C(uv_bin), C(user_shell), C(find_links_local) (the wheelhouses on the
        node), C(overrides) (uv's overrides, NCCL's floor where it applies, from the filter
        C(blackwell.sglang.nccl_overrides)), C(overrides_file), C(nccl_floor),
        C(nccl_floor_policy), C(nccl_package) and C(capability_majors) (the node's GPUs).
    type: dict
    required: true
  files:
    description:
      - The table of the paths the role manages, one row each - C(path), C(state) (C(file), the
        default, C(directory) or C(link)), C(mode), C(owner) and C(group) (default root),
        C(template) (the template whose rendering is the content), C(src) (a link's target),
        C(enabled) (default true), C(installer) (the row is in force for that installer only)
        and C(phase) (where in the run the row is written - C(account), C(venv), C(uv),
        C(request), whose change reinstalls, C(sources) or C(activate)).
    type: list
    elements: dict
    required: true
  contents:
    description: The rendered text of each template the table names, by template name.
    type: dict
    required: true
  check_mode:
    description: Whether the run is a check (a row in a directory still to be made is then left to the step that makes it).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Plan the role from the node's read
  ansible.builtin.set_fact:
    sglang_install_plan: >-
      {{ read | blackwell.sglang.sglang_install_plan(inputs, files,
                                                     dict(templates | zip(query('blackwell.sglang.rendered', *templates))),
                                                     ansible_check_mode) }}
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    problems:
      description: Why the host must stop before anything changes, one clause per problem; empty to go on.
      type: list
      elements: str
    steps:
      description: >-
        The steps to take, each with C(name) (C(packages), C(group), C(user), C(uv_venv), C(uv),
        C(venv), C(pip), C(file), C(install), C(torch), C(prune)) and C(reason); empty on a node
        that is as the role leaves it.
      type: list
      elements: dict
    step:
      description: The first reason of each step, by step name.
      type: dict
    files:
      description: >-
        The table's rows the node differs from, each with its C(checksum) and C(reason); not their
        content, which may hold credentials (the role writes the rendered template).
      type: list
      elements: dict
    table:
      description: Every row of the table in force, as given (state, owner and group filled in), without its content.
      type: list
      elements: dict
    install:
      description: >-
        C(argv) (the installer's command line, which holds paths only; with the reinstall
        switches where the release's files differ from its RECORD or an install into it did not
        finish), C(creates) (the installed release's METADATA, empty when the request changed and
        its files report it, or, outside a check, when the release is installed again) and
        C(pending) (the mark an install leaves in the release until it has finished); C(argv)
        has C(--override) on the overrides file where there are overrides, and C(creates) is
        empty outside a check where the release's NCCL is below the floor.
      type: dict
    reinstall:
      description: >-
        Why the installers run again over what is installed, one clause each - uv's or SGLang's
        files that differ from their RECORD (the first paths, with counts), an install that did
        not finish, an NCCL in the release below the floor that applies (read from C(versions));
        the role reports them (in a check, as drift).
      type: list
      elements: str
    uv:
      description: >-
        How pip installs uv into its tools venv - C(argv) (with C(--force-reinstall) where uv's
        files differ from its RECORD), C(stdin) (the requirement and its hashes, empty without
        hashes) and C(creates) (empty, outside a check, when uv is installed again).
      type: dict
    torch:
      description: C(checked), C(cuda) (the CUDA build torch names), C(ok) and C(message).
      type: dict
    prune:
      description: The releases beyond C(sglang_install_keep_releases) to remove.
      type: list
      elements: str
    nccl_finding:
      description: >-
        Where the node's GPUs include compute capability 12 and the release's NCCL (from
        C(versions)) is older than 2.31.2, the finding in the words of the NCCL smoke test's
        (NVIDIA/nccl issue 2418), naming the remedy; empty otherwise.
      type: str
"""


def sglang_install_plan(probe, inputs, files, contents, check_mode=False):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.install_plan import plan
    return plan(probe or {}, inputs or {}, files or [], contents or {}, bool(check_mode))


class FilterModule(object):
    def filters(self):
        return {"sglang_install_plan": sglang_install_plan}

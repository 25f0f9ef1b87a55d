#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_capmap
short_description: Add a GPU compute capability to SGLang's torch symmetric-memory dicts
version_added: 0.1.0
description:
  - SGLang's torch symmetric-memory all-reduce keys its limits by the GPU's compute-capability
    major and lists only 9 (Hopper) and 10 (SM100). On Blackwell parts that report 12 (SM120),
    SGLang 0.5.5 to 0.5.13 stop at start with a C(KeyError) for 12 when
    C(--enable-torch-symm-mem) is given, and 0.5.14 and later silently disable the communicator.
  - This module adds the missing entry to each dict of an installed SGLang package, copying the
    source expression of the O(source_capability) entry (C(64 * MiB) stays C(64 * MiB)) or
    writing an explicit value from O(values).
  - The dicts are found through Python's syntax tree, never by line number or pattern. The new
    entry is inserted as source text after the last entry, matching the file's indentation, line
    endings and comma style, so the change is an insertion and nothing else in the file moves.
  - The inserted entry ends with the comment C(# added by blackwell.sglang.sglang_capmap). That
    marker tells a later run the entry is its own, so O(state=absent) restores the file byte for
    byte and never removes an entry that upstream or a person wrote.
  - Every target is validated before any file is written; a failure on one leaves all unchanged.
    Files are replaced atomically (a temp file in the same directory, then a rename) keeping their
    mode and owner.
  - After a file is written, its stale compiled copies in C(__pycache__) (every interpreter tag
    and optimisation level) are deleted, and only those, so the rest of SGLang's bytecode stays.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  path:
    description:
      - The installed C(sglang) package directory, the one holding C(srt/).
      - Exactly one of O(path) and O(venv) is required.
    type: path
  venv:
    description:
      - Root of a virtualenv in which C(lib/python3.*/site-packages/sglang) is found.
      - Exactly one of O(path) and O(venv) is required.
    type: path
  capability:
    description:
      - The compute-capability major to add (12 for SM120 Blackwell parts).
    type: int
    default: 12
  source_capability:
    description:
      - The existing entry whose value the new entry copies, unless O(values) names the target.
    type: int
    default: 10
  values:
    description:
      - Explicit values for the new entry, keyed by target O(targets[].name), instead of the copy.
      - "A string is inserted as a Python expression (for example V({2: 64 * MiB}); mappings must be
        given this way because Ansible turns mapping keys into strings). Lists, numbers, booleans
        and null are written as Python literals."
      - For example V([]) for C(TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM) keeps PCIe-only
        hosts on the two-shot path.
    type: dict
  targets:
    description:
      - The dicts to patch. Defaults to the two SGLang needs, C(TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES)
        in C(srt/distributed/device_communicators/all_reduce_utils.py) and
        C(TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM) in
        C(srt/distributed/device_communicators/torch_symm_mem.py).
    type: list
    elements: dict
    suboptions:
      file:
        description:
          - The source file, relative to the C(sglang) package directory.
        type: str
        required: true
      name:
        description:
          - The variable holding the dict, C(NAME) at module level or C(CLASS.NAME) for a class
            attribute. Plain and annotated assignments are both found.
        type: str
        required: true
  state:
    description:
      - V(present) adds the entry where it is missing.
      - V(absent) removes the entry this module added, restoring the file to its bytes before.
        Entries without the module's marker are left alone.
    type: str
    choices: [present, absent]
    default: present
  purge_bytecode:
    description:
      - Delete the stale C(__pycache__/<module>.*.pyc) files of every file written.
    type: bool
    default: true
  backup:
    description:
      - Keep a timestamped copy of each file before it is written.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reports exactly what a real run would change, bytecode included, and touches nothing.
  diff_mode:
    support: full
    description: Returns a unified diff per changed file.
  platform:
    support: full
    platforms: posix
    description: Runs on the host that holds the SGLang installation.
notes:
  - SGLang 0.5.4 and older have no C(torch_symm_mem.py) and fail with a message saying so.
  - Restart SGLang after a change; a running server keeps the dicts it imported.
"""

EXAMPLES = r"""
- name: Add compute capability 12 (SM120) to SGLang in its virtualenv
  blackwell.sglang.sglang_capmap:
    venv: /opt/sglang/current

- name: Keep a PCIe-only host on the two-shot path while enabling the size limits
  blackwell.sglang.sglang_capmap:
    path: /opt/sglang/current/lib/python3.11/site-packages/sglang
    values:
      TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM: []

- name: Take the entries back out, restoring SGLang's own files
  blackwell.sglang.sglang_capmap:
    venv: /opt/sglang/current
    state: absent
"""

RETURN = r"""
targets:
  description: One entry per target, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    file:
      description: The target file, relative to the package directory.
      type: str
      sample: srt/distributed/device_communicators/all_reduce_utils.py
    name:
      description: The dict's name.
      type: str
      sample: TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES
    path:
      description: The target file's absolute path.
      type: str
      sample: /opt/sglang/current/lib/python3.11/site-packages/sglang/srt/distributed/device_communicators/all_reduce_utils.py
    status:
      description:
        - V(added), V(updated) (this module's entry got a new value), V(already present) (this
          module's entry, unchanged), V(present upstream) (an entry without the module's marker,
          left alone), V(removed) or V(not present).
      type: str
      sample: added
  sample:
    - file: srt/distributed/device_communicators/all_reduce_utils.py
      name: TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES
      path: /opt/sglang/current/lib/python3.11/site-packages/sglang/srt/distributed/device_communicators/all_reduce_utils.py
      status: added
package:
  description: The sglang package directory that was examined.
  returned: always
  type: str
  sample: /opt/sglang/current/lib/python3.11/site-packages/sglang
sglang_version:
  description: SGLang's version from the package metadata beside the package, null when there is none.
  returned: always
  type: str
  sample: 0.5.8
bytecode_removed:
  description: The stale bytecode files removed (in check mode, those that would be removed).
  returned: always
  type: list
  elements: str
  sample:
    - /opt/sglang/current/lib/python3.11/site-packages/sglang/srt/distributed/device_communicators/__pycache__/torch_symm_mem.cpython-311.pyc
backup_files:
  description: The backups made when O(backup=true).
  returned: always
  type: list
  elements: str
  sample:
    - /opt/sglang/current/lib/python3.11/site-packages/sglang/srt/distributed/device_communicators/all_reduce_utils.py.1234.2026-01-01@00:00:00~
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.blackwell.sglang.plugins.module_utils import capmap


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path"),
            venv=dict(type="path"),
            capability=dict(type="int", default=12),
            source_capability=dict(type="int", default=10),
            values=dict(type="dict"),
            targets=dict(
                type="list",
                elements="dict",
                options=dict(
                    file=dict(type="str", required=True),
                    name=dict(type="str", required=True),
                ),
            ),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            purge_bytecode=dict(type="bool", default=True),
            backup=dict(type="bool", default=False),
        ),
        mutually_exclusive=[["path", "venv"]],
        required_one_of=[["path", "venv"]],
        supports_check_mode=True,
    )
    params = module.params
    try:
        package = capmap.find_package(params["path"], params["venv"])
        plan = capmap.plan(
            package,
            targets=params["targets"],
            capability=params["capability"],
            source_capability=params["source_capability"],
            values=params["values"],
            state=params["state"],
            purge_bytecode=params["purge_bytecode"],
        )
    except capmap.CapmapError as exc:
        module.fail_json(msg=to_text(exc))

    result = dict(
        changed=plan.changed,
        targets=plan.targets,
        package=plan.package,
        sglang_version=plan.version,
        bytecode_removed=list(plan.bytecode),
        backup_files=[],
    )
    if module._diff:
        result["diff"] = [
            dict(
                before_header=change.path,
                after_header=change.path,
                before=to_text(change.before),
                after=to_text(change.after),
            )
            for change in plan.changes
        ]
    if plan.changed and not module.check_mode:
        backup = module.backup_local if params["backup"] else None
        try:
            removed, backups = capmap.apply(plan, backup=backup)
        except capmap.CapmapError as exc:
            module.fail_json(msg=to_text(exc), **result)
        result["bytecode_removed"] = removed
        result["backup_files"] = backups
    module.exit_json(**result)


if __name__ == "__main__":
    main()

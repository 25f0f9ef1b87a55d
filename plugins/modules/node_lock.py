#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_lock
short_description: Hold a node for one converge at a time
version_added: 0.1.0
description:
  - Takes or releases the node's converge lock, a root-only file (by default under C(/run/lock/),
    so a reboot frees it) whose content names the run that holds it. A second run waits up to
    O(timeout) seconds for the holder to release it, then fails naming the holder.
  - Every change to the file is made under C(flock(2)), so two runs never both hold the node,
    and releasing removes the file.
  - The action plugin of the same name gives the run's identity (the controller, the PID and
    start time of its C(ansible-playbook)) and takes over a lock whose run has ended on the same
    controller (killed, or failed before it released); playbooks call it, not this module
    directly.
  - The lock is bookkeeping, so it never reports changed.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  path:
    description:
      - The lock file.
    type: path
    default: /run/lock/blackwell-sglang.lock
  state:
    description:
      - C(present) takes the lock, C(absent) releases it (only if O(holder) holds it).
    type: str
    choices: [present, absent]
    default: present
  holder:
    description:
      - Who takes the lock; its C(owner) key identifies the run. Written into the file as given.
    type: dict
    required: true
  timeout:
    description:
      - Seconds to wait for another run's lock to be released.
    type: int
    default: 0
  steal:
    description:
      - The owner of a lock to take over when it still holds the node (a run known to have ended).
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Reads the lock and waits as a real run would, and writes nothing.
  diff_mode:
    support: none
    description: The lock is bookkeeping; it shows no diff.
"""

EXAMPLES = r"""
- name: Hold the node for this converge
  blackwell.sglang.node_lock:
    timeout: 600
"""

RETURN = r"""
held:
  description: Whether this run holds the lock (state present), or held it until now (absent).
  returned: always
  type: bool
holder:
  description: The holder recorded in the file when the module ran (another run's when O(state=present) failed).
  returned: always
  type: dict
waited:
  description: Seconds spent waiting for another run.
  returned: always
  type: float
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import node_lock


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/run/lock/blackwell-sglang.lock"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            holder=dict(type="dict", required=True),
            timeout=dict(type="int", default=0),
            steal=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    path, holder = module.params["path"], module.params["holder"]
    owner = str(holder.get("owner") or "")
    if not owner:
        module.fail_json(msg="node_lock: holder.owner is empty; it identifies the run")
    if module.params["timeout"] < 0:
        module.fail_json(msg="node_lock: timeout must be 0 or more seconds, not %d" % module.params["timeout"])
    if not os.path.isdir(os.path.dirname(path)):
        module.fail_json(msg="node_lock: %s does not exist on this node" % os.path.dirname(path))
    if module.params["state"] == "absent":
        if module.check_mode:
            current = node_lock.read(path)
            module.exit_json(changed=False, held=bool(current and current.get("owner") == owner),
                             holder=current or {}, waited=0.0)
        released, current = node_lock.release(path, owner)
        module.exit_json(changed=False, held=released, holder=current or {}, waited=0.0)
    held, current, waited = node_lock.acquire(path, dict(holder, owner=owner), module.params["timeout"],
                                              steal=module.params["steal"], check_mode=module.check_mode)
    module.exit_json(changed=False, held=held, holder=current or {}, waited=round(waited, 1))


if __name__ == "__main__":
    main()

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
  - Takes or releases the node's converge lock, a file whose content names the run that holds
    it. A second run waits up to O(timeout) seconds for the holder to release it, then fails
    naming the holder.
  - The file lives in a directory only root can write (by default C(/run/lock/blackwell-sglang/),
    so a reboot frees it), created owned by root with mode C(0700) when missing; a directory that
    is a link, is not root's or has another mode, and a lock file that is a link, not a regular
    file, not root's or not mode C(0600), are refused, naming the path.
  - Every change to the file is made under C(flock(2)), so two runs never both hold the node,
    and releasing removes the file.
  - The action plugin of the same name gives the run's identity, the owner string
    C(HOST:PID:BOOT/PIDNS/START) (the controller's host name, its kernel's boot id, its PID
    namespace, and the PID and start time of its C(ansible-playbook)). It takes over a lock
    whose run is known to have ended, one of the same host, boot and PID namespace whose
    process is gone (killed, or failed before it released), with a warning. Any other holder
    is waited for, then refused, unless O(take_over) names its owner. Playbooks call the
    action, not this module directly.
  - The lock is bookkeeping, so it never reports changed.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  path:
    description:
      - The lock file.
    type: path
    default: /run/lock/blackwell-sglang/node.lock
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
  take_over:
    description:
      - The exact owner string of the one lock to take over although its run is not known to have
        ended (another controller's, or this controller's before a reboot), for a run the
        operator knows is gone. A lock of any other owner is waited for as usual. The takeover
        is warned about.
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

- name: Take over the lock of a run whose controller was lost
  blackwell.sglang.node_lock:
    timeout: 600
    take_over: "ci-runner:4242:0b6c3f51-1c2e-4a53-9c61-0d9f6f1f3e21/4026531836/81234"
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

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import node_lock


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default=node_lock.DEFAULT_PATH),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            holder=dict(type="dict", required=True),
            timeout=dict(type="int", default=0),
            take_over=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    path, holder = module.params["path"], module.params["holder"]
    owner = str(holder.get("owner") or "")
    if not owner:
        module.fail_json(msg="node_lock: holder.owner is empty; it identifies the run")
    if module.params["timeout"] < 0:
        module.fail_json(msg="node_lock: timeout must be 0 or more seconds, not %d" % module.params["timeout"])
    try:
        if module.params["state"] == "absent":
            if module.check_mode:
                current = node_lock.read(path)
                module.exit_json(changed=False, held=bool(current and current.get("owner") == owner),
                                 holder=current or {}, waited=0.0)
            released, current = node_lock.release(path, owner)
            module.exit_json(changed=False, held=released, holder=current or {}, waited=0.0)
        held, current, waited = node_lock.acquire(path, dict(holder, owner=owner), module.params["timeout"],
                                                  steal=module.params["take_over"], check_mode=module.check_mode)
        module.exit_json(changed=False, held=held, holder=current or {}, waited=round(waited, 1))
    except node_lock.Refused as exc:
        module.fail_json(msg=str(exc))


if __name__ == "__main__":
    main()

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_rollback
short_description: Keep, apply or forget the rollback record of a rollout on the node
version_added: 0.1.0
description:
  - The rollback record holds what a node served before a rollout switched anything, namely the
    release the active-release link pointed at, and a copy of each file the service reads (the
    unit, its secrets file, the launcher, the TP record), with its mode and owner, or the fact
    that it did not exist. It lives in a root-only directory on the node, so a run that dies
    after the switch leaves it to the next run.
  - O(state=saved) writes it before a rollout switches anything. A record that already exists
    (left by a run that did not finish) is kept as it is and reported with RV(kept); the node
    goes back to what it served before that run, not to the half-switched state it has now.
  - O(state=restored) puts back what differs from the record (each file, then the link, one
    C(rename(2)) each) and leaves the record, which O(state=absent) then removes. It refuses,
    changing nothing, when the release the record points back to is gone (no C(bin/python) in
    it). Files in O(keep_current) are never put back or removed, so a rollback keeps the current
    secrets.
  - O(state=absent) removes the record, after the service passed its health gate, or after a
    rollback. In check mode it reports a record left on the node as a change, without removing it.
  - The record is built beside its final path and renamed into place, and removed by renaming it
    aside first, so its path holds a complete record or nothing. Where a run is killed, and what
    the next run does. During a save, a half-built C(<path>.new) is left, never read; the next save
    or removal deletes it. After the save, before the switch, the complete record describes the
    node as it still is; the next save keeps it with a warning and a restore finds nothing to put
    back. During a restore, each file and the link is either the old or the new one, and the
    record stays; the next restore puts back what still differs. During a removal, the record is
    already renamed to C(<path>.discarded-<pid>-<ns>); the next save or removal deletes it. A
    record directory without its C(record.json), or without a copy it names (left by a release
    of this collection that removed records in place), is incomplete; every state clears it with a
    warning instead of failing, and nothing is ever restored from it.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  state:
    description:
      - C(saved) records the node as it is unless a record exists; C(restored) puts the record
        back; C(absent) removes it.
    type: str
    choices: [saved, restored, absent]
    default: saved
  path:
    description:
      - The record's directory. Its parent is made if missing.
    type: path
    default: /var/lib/blackwell-sglang/rollback
  link:
    description:
      - The active-release link whose target the record keeps, and which O(state=restored)
        points back there. Without it (the router's record, whose unit names its release itself)
        the record holds the files alone, and a restore has no release to check, so the files are
        put back whether or not the release they name is still on the node.
    type: path
  files:
    description:
      - The files the record keeps (a missing one is recorded as missing, and removed again on
        O(state=restored)). Used with O(state=saved).
    type: list
    elements: path
    default: []
  keep_current:
    description:
      - Those of O(files) that hold secrets (the service's secrets file). With O(state=saved) the
        record notes whether each exists but keeps no copy; O(state=restored) never puts them back
        nor removes them, whatever the record holds, so a failed key rotation does not bring a
        revoked key back, and a secrets file made by the rollout stays.
    type: list
    elements: path
    default: []
attributes:
  check_mode:
    support: full
    description: Reads the record and the node and reports what it would write, put back or remove.
  diff_mode:
    support: none
    description: The record holds the secrets file; it is never shown.
notes:
  - The copies include any secrets file not in O(keep_current); the directory and its files are
    root's, mode 0700 and 0600, and the module's result never holds a file's content.
"""

EXAMPLES = r"""
- name: Record what the node serves before the rollout switches anything
  blackwell.sglang.sglang_rollback:
    state: saved
    link: /opt/sglang/current
    files: [/etc/systemd/system/sglang.service, /etc/sglang/sglang.env]
    keep_current: [/etc/sglang/sglang.env]

- name: Go back to it after a failed health gate
  blackwell.sglang.sglang_rollback:
    state: restored
    keep_current: [/etc/sglang/sglang.env]
"""

RETURN = r"""
record:
  description: The record on the node after the module ran (before it, for O(state=absent)), without its copies; empty when there is none.
  returned: always
  type: dict
  sample: {"saved": "2026-12-03T19:00:00Z", "link": "/opt/sglang/current", "release": "/opt/sglang/releases/0.5.8",
           "files": ["/etc/systemd/system/sglang.service"], "absent": ["/etc/sglang/tp-size"]}
msg:
  description: For O(state=absent), the record removed (or, in check mode, left by a rollout that did not finish); empty when there was none.
  returned: always
  type: str
kept:
  description: O(state=saved) found a record left by an earlier run and kept it.
  returned: always
  type: bool
restored:
  description: What O(state=restored) put back (or would), the release the link points at again, files put back, files removed.
  returned: always
  type: dict
  sample: {"release": "/opt/sglang/releases/0.5.8", "files": ["/etc/systemd/system/sglang.service"], "remove": []}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import rollback_record

_NOTHING = {"release": "", "files": [], "remove": []}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["saved", "restored", "absent"], default="saved"),
            path=dict(type="path", default=rollback_record.DEFAULT_PATH),
            link=dict(type="path"),
            files=dict(type="list", elements="path", default=[]),
            keep_current=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    path, state, keep = module.params["path"], module.params["state"], module.params["keep_current"]
    try:
        try:
            record, cleared = rollback_record.read(path), False
        except rollback_record.IncompleteRecord as exc:
            # Never restored from: it cannot describe the node as it was, so clearing it is safe.
            record, cleared = None, True
            if not module.check_mode:
                rollback_record.discard(path)
            module.warn("sglang_rollback: %s; it %s, and this run goes on as if there were no record"
                        % (exc, "would be cleared" if module.check_mode else "was cleared"))
        if state == "saved":
            kept = record is not None
            if not kept:
                if module.check_mode:
                    record = rollback_record.plan_record(module.params["link"] or "", module.params["files"], secrets=keep)
                else:
                    record, kept = rollback_record.save(path, module.params["link"] or "", module.params["files"],
                                                        secrets=keep)
            if kept:
                module.warn("sglang_rollback: %s holds the rollback record of a rollout that did not finish "
                            "(saved %s, serving %s): it stays the point to roll back to until the service "
                            "passes its health gate" % (path, record.get("saved"), record.get("release") or "no release"))
            module.exit_json(changed=not kept, kept=kept, record=rollback_record.summary(record), restored=_NOTHING, msg="")
        if state == "restored":
            plan = rollback_record.restore_plan(record, keep) if record is not None else _NOTHING
            changed = any(plan[key] for key in ("release", "files", "remove"))
            if module.check_mode:
                rollback_record.check_release(plan)
            elif changed:
                rollback_record.restore(path, record, plan)
            module.exit_json(changed=changed or cleared, kept=False, record=rollback_record.summary(record),
                             restored=plan, msg="")
        # A half-built record (a run that died while saving) goes too, quietly: it never held the node.
        if not module.check_mode:
            rollback_record.discard(path)
        msg = ("rollback record of %s removed (saved %s, back to %s)"
               % (path, record.get("saved"), record.get("release") or "no release")) if record is not None else ""
        if msg and module.check_mode:
            msg = ("a rollout that did not finish left its rollback record %s (saved %s, back to %s)"
                   % (path, record.get("saved"), record.get("release") or "no release"))
        module.exit_json(changed=record is not None or cleared, kept=False, record=rollback_record.summary(record),
                         restored=_NOTHING, msg=msg)
    except (rollback_record.RecordError, OSError) as exc:
        module.fail_json(msg="sglang_rollback: %s" % exc)


if __name__ == "__main__":
    main()

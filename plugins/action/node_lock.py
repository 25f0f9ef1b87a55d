# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's side of blackwell.sglang.node_lock: who this run is, and whether the run
holding a node has ended.

A run is its ansible-playbook process: the controller's host name, the process's PID and its
start time (so a PID used again later is another run). Ansible's workers are forked from that
process, so it is this worker's parent. A lock held by a run of this controller whose process
is gone was left by a run that ended without releasing it (killed, or a host that failed): it
is taken over, with a warning naming that run. A lock of another controller's run is waited for,
then refused naming it, since from here its run cannot be seen.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import getpass
import os
import socket

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


def process_start(pid, proc="/proc"):
    """The start time of process PID (clock ticks after boot, /proc/PID/stat's 22nd field), with
    the boot's id; '' when there is no such process."""
    try:
        with open(os.path.join(proc, str(pid), "stat")) as handle:
            stat = handle.read()
        with open(os.path.join(proc, "sys", "kernel", "random", "boot_id")) as handle:
            boot = handle.read().strip()
    except (IOError, OSError):
        return ""
    # The command name (field 2) is in parentheses and may hold spaces.
    fields = stat.rsplit(")", 1)[-1].split()
    return "%s/%s" % (boot, fields[19]) if len(fields) > 19 else ""


def this_run(proc="/proc"):
    """The holder record of this run."""
    pid = os.getppid()
    controller = socket.gethostname()
    started = process_start(pid, proc)
    try:
        user = getpass.getuser()
    except Exception:  # pylint: disable=broad-except
        user = str(os.getuid())
    return {
        "owner": "%s:%d:%s" % (controller, pid, started),
        "controller": controller,
        "pid": pid,
        "user": user,
        "since": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def has_ended(holder, controller, proc="/proc"):
    """Whether HOLDER is a run of CONTROLLER whose ansible-playbook process is gone."""
    owner = str(holder.get("owner") or "")
    parts = owner.split(":", 2)
    if len(parts) != 3 or parts[0] != controller or not parts[1].isdigit():
        return False
    return process_start(int(parts[1]), proc) != parts[2]


def describe(holder):
    """One phrase naming the run that holds a lock."""
    if holder.get("unreadable") is not None:
        return "an unreadable holder (%r)" % holder["unreadable"]
    return "ansible-playbook (PID %s) on %s as %s, since %s" % (
        holder.get("pid", "?"), holder.get("controller", "?"), holder.get("user", "?"), holder.get("since", "?"))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "state", "timeout"))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        path = args.get("path", "/run/lock/blackwell-sglang.lock")
        state = args.get("state", "present")
        try:
            timeout = int(args.get("timeout", 0))
        except (TypeError, ValueError):
            raise AnsibleActionFail("node_lock: timeout must be a whole number of seconds, not %r" % args.get("timeout"))
        me = this_run()

        def call(**extra):
            module_args = dict(path=path, state=state, holder=me, timeout=0)
            module_args.update(extra)
            out = self._execute_module(module_name="blackwell.sglang.node_lock", module_args=module_args,
                                       task_vars=task_vars)
            if out.get("failed") or out.get("unreachable"):
                raise _Stop(out)
            return out

        try:
            out = call()
            if state == "absent" or out["held"]:
                result.update(out)
                return result
            other = out["holder"]
            if has_ended(other, me["controller"]):
                out = call(steal=other["owner"])
                if out["held"]:
                    result.update(out)
                    result["took_over"] = other
                    result["msg"] = "%s the converge lock %s left by a run that has ended: %s" % (
                        "would take over" if self._play_context.check_mode else "took over", path, describe(other))
                    self._display.warning("%s: %s" % (task_vars.get("inventory_hostname"), result["msg"]))
                    return result
                other = out["holder"]
            if timeout > 0:
                out = call(timeout=timeout)
                if out["held"]:
                    result.update(out)
                    return result
                other = out["holder"]
        except _Stop as stop:
            result.update(stop.out)
            return result
        result.update(out)
        result["failed"] = True
        result["msg"] = (
            "another converge holds this node: %s (lock %s). Waited %d s. "
            "Run again when it has finished; if that run is gone without releasing the lock (its "
            "controller lost), remove %s on the node and run again." % (describe(other), path, timeout, path))
        return result


class _Stop(Exception):
    def __init__(self, out):
        super(_Stop, self).__init__(out.get("msg", ""))
        self.out = out

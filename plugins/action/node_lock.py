# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's side of blackwell.sglang.node_lock: who this run is, and whether the run
holding a node has ended.

A run is its ansible-playbook process, named by the lock's owner string
HOST:PID:BOOT/PIDNS/START: the controller's host name, the boot id of its kernel
(/proc/sys/kernel/random/boot_id, new at every boot), the inode of its PID namespace (containers
on one kernel share the boot id but not the namespace), the process's PID and its start time in
clock ticks after boot (so a PID used again later is another run). Ansible's workers are forked
from that process, so it is this worker's parent.

A run has ended only where that can be known: the holder's host name, boot id and PID namespace
are this controller's, and its PID is gone or now belongs to a process started at another time.
Such a lock (a run killed, or a host that failed before it released) is taken over, with a
warning naming that run. Any other holder (another controller, a CI runner or container of the
same name, this machine before a reboot, a controller without /proc) is waited for, then refused
naming it; only the operator can say it is gone, by naming its exact owner string in take_over
(the playbooks' sglang_rollout_lock_break): that lock, and no other, is then taken over.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import getpass
import os
import socket

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.blackwell.sglang.plugins.module_utils.node_lock import DEFAULT_PATH


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return ""


def boot_id(proc="/proc"):
    """This kernel's boot id; '' where it cannot be read."""
    return _read(os.path.join(proc, "sys", "kernel", "random", "boot_id")).strip()


def pid_namespace(proc="/proc"):
    """The inode of this process's PID namespace, as text; '' where it cannot be read."""
    try:
        return str(os.stat(os.path.join(proc, "self", "ns", "pid")).st_ino)
    except (IOError, OSError):
        return ""


def process_start(pid, proc="/proc"):
    """The start time of process PID (clock ticks after boot, /proc/PID/stat's 22nd field); ''
    when there is no such process."""
    stat = _read(os.path.join(proc, str(pid), "stat"))
    # The command name (field 2) is in parentheses and may hold spaces.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


def this_run(proc="/proc"):
    """The holder record of this run."""
    pid = os.getppid()
    controller = socket.gethostname()
    try:
        user = getpass.getuser()
    except Exception:  # pylint: disable=broad-except
        user = str(os.getuid())
    return {
        "owner": "%s:%d:%s/%s/%s" % (controller, pid, boot_id(proc), pid_namespace(proc), process_start(pid, proc)),
        "controller": controller,
        "pid": pid,
        "user": user,
        "since": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def judge(holder, controller, proc="/proc"):
    """(ended, why): whether HOLDER's run is known to have ended, as seen from CONTROLLER (this
    host's name) through PROC, and why, or why that cannot be known."""
    owner = str(holder.get("owner") or "")
    host, _sep, rest = owner.partition(":")
    pid, _sep, identity = rest.partition(":")
    parts = identity.split("/")
    if not pid.isdigit() or len(parts) != 3 or not all(parts):
        return False, "its owner is not the identity of a run this version of the lock writes"
    boot, namespace, started = parts
    if host != controller:
        return False, "it ran on another controller, %s" % host
    here = boot_id(proc), pid_namespace(proc)
    if not all(here):
        return False, "this controller's boot id or PID namespace cannot be read"
    if boot != here[0]:
        return False, "it ran on a controller named %s in another boot, or on another machine of that name" % host
    if namespace != here[1]:
        return False, "it ran in another PID namespace (another container) on this machine"
    now = process_start(int(pid), proc)
    if not now:
        return True, "its ansible-playbook process is gone"
    if now != started:
        return True, "its PID now belongs to another process"
    return False, "its ansible-playbook process is still running here"


def has_ended(holder, controller, proc="/proc"):
    """Whether HOLDER is a run of this controller, in this boot and PID namespace, whose
    ansible-playbook process is gone."""
    return judge(holder, controller, proc)[0]


def takeover(holder, controller, named, proc="/proc"):
    """(take, why): whether this run takes over HOLDER's lock, either because its run is known to
    have ended or because NAMED (take_over) is its exact owner, and the phrase that says why;
    or why it may not."""
    ended, why = judge(holder, controller, proc)
    if ended:
        return True, "left by a run that has ended (%s)" % why
    if named and holder.get("owner") == named:
        return True, "named by take_over (%s)" % why
    return False, why


def describe(holder):
    """One phrase naming the run that holds a lock."""
    if holder.get("unreadable") is not None:
        return "an unreadable holder (%r)" % holder["unreadable"]
    return "ansible-playbook (PID %s) on %s as %s, since %s" % (
        holder.get("pid", "?"), holder.get("controller", "?"), holder.get("user", "?"), holder.get("since", "?"))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "state", "timeout", "take_over"))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        path = args.get("path") or DEFAULT_PATH
        state = args.get("state", "present")
        named = str(args.get("take_over") or "")
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
            take, why = takeover(other, me["controller"], named)
            if take:
                # The module replaces only this owner's record: a run that took the lock
                # meanwhile keeps it.
                out = call(take_over=other["owner"])
                if out["held"]:
                    result.update(out)
                    result["took_over"] = other
                    result["msg"] = "%s the converge lock %s %s: %s" % (
                        "would take over" if self._play_context.check_mode else "took over", path, why,
                        describe(other))
                    self._display.warning("%s: %s" % (task_vars.get("inventory_hostname"), result["msg"]))
                    return result
                other = out["holder"]
                why = judge(other, me["controller"])[1]
            if timeout > 0:
                out = call(timeout=timeout)
                if out["held"]:
                    result.update(out)
                    return result
                other = out["holder"]
                why = judge(other, me["controller"])[1]
        except _Stop as stop:
            result.update(stop.out)
            return result
        result.update(out)
        result["failed"] = True
        result["msg"] = "another converge holds this node: %s (lock %s). Waited %d s. %s" % (
            describe(other), path, timeout, _remedy(other, why, named, path))
        return result


def _remedy(holder, why, named, path):
    """What the operator can do about a lock held by HOLDER."""
    owner = holder.get("owner") or ""
    if not owner:
        return "The file names no run: remove %s on the node and run again." % path
    return (
        "Run again when it has finished; it is not known to have ended: %s%s. If it is gone without releasing "
        "the lock, run again with sglang_rollout_lock_break=%s (the task's take_over) to take over this lock "
        "and no other." % (why, " (take_over names %s, another run)" % named if named and named != owner else "",
                           owner))


class _Stop(Exception):
    def __init__(self, out):
        super(_Stop, self).__init__(out.get("msg", ""))
        self.out = out

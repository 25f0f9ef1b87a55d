# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a systemd service looks like from outside, reduced to what a rollout decides on.

Pure Python, no Ansible imports: ``sglang_service_info`` feeds it the output of
``systemctl show --timestamp=unix`` and file modification times, and the unit tests feed it
text they write themselves.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Properties asked of systemctl show, in the order the reader expects none of them to matter.
PROPERTIES = (
    "LoadState",
    "ActiveState",
    "SubState",
    "UnitFileState",
    "NeedDaemonReload",
    "MainPID",
    "ExecMainStartTimestamp",
    "DropInPaths",
)

# Drop-ins an administrator (or anything else on the node) adds under these change the unit the
# collection writes; vendor drop-ins for all services under /usr/lib are the distribution's.
LOCAL_DROPIN_DIRS = ("/etc/systemd/system/", "/run/systemd/system/")

_UNIX_TS = re.compile(r"^@(\d+)$")


def parse_show(text):
    """``systemctl show -p A -p B`` output (KEY=VALUE lines) as a dict; unknown lines are kept."""
    props = {}
    for line in text.splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            props[key] = value
    return props


def start_time(props):
    """The service's last start as Unix seconds (``--timestamp=unix`` prints ``@1701234567``);
    None when it has not started since boot or the value is not in that form."""
    match = _UNIX_TS.match(props.get("ExecMainStartTimestamp", "").strip())
    return int(match.group(1)) if match else None


def local_dropins(props, unit):
    """Drop-in files under /etc or /run that apply to ``unit`` itself (``<unit>.d/``)."""
    paths = props.get("DropInPaths", "").split()
    wanted = tuple(prefix + unit + ".d/" for prefix in LOCAL_DROPIN_DIRS)
    return sorted(path for path in paths if path.startswith(wanted))


def newer_than(mtimes, since):
    """Paths whose modification time is later than ``since`` (Unix seconds), sorted; none when
    the service has no start time."""
    if since is None:
        return []
    return sorted(path for path, mtime in mtimes.items() if mtime is not None and mtime > since)


def summarise(unit, props, mtimes):
    """The facts a role acts on, from the show properties and the watched files' mtimes."""
    started = start_time(props)
    active = props.get("ActiveState", "") == "active"
    return {
        "name": unit,
        "exists": props.get("LoadState", "not-found") not in ("not-found", ""),
        "load_state": props.get("LoadState", ""),
        "active_state": props.get("ActiveState", ""),
        "sub_state": props.get("SubState", ""),
        "unit_file_state": props.get("UnitFileState", ""),
        "need_daemon_reload": props.get("NeedDaemonReload", "no") == "yes",
        "main_pid": int(props.get("MainPID", "0") or 0),
        "started": started,
        "dropins": local_dropins(props, unit),
        # Only a running service can be behind its files.
        "newer_than_start": newer_than(mtimes, started) if active else [],
    }


def engine_phase(summary, health_status, now, loading_timeout):
    """What the engine behind an active unit is doing: ``stopped`` (the unit is not active),
    ``healthy`` (/health answered 200), ``loading`` (not yet 200, or not yet listening, and its
    main process started less than ``loading_timeout`` seconds before ``now``: an engine still
    loading its model answers 503) or ``unhealthy`` (not 200 after that). With the phase, for
    ``loading`` only, how long it has been loading and how much of ``loading_timeout`` is left
    (whole seconds); None otherwise."""
    if summary.get("active_state") != "active":
        return "stopped", None
    if health_status == 200:
        return "healthy", None
    started = summary.get("started")
    if loading_timeout and started is not None:
        elapsed = max(0, int(now) - int(started))
        if elapsed < loading_timeout:
            return "loading", {"elapsed": elapsed, "remaining": int(loading_timeout) - elapsed}
    return "unhealthy", None

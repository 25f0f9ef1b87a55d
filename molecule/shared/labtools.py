"""Helpers for the testinfra verifiers of the lab scenarios: running ansible-playbook against
the scenario's own inventory, and reading what the stand-in launcher recorded."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
LAUNCHES = "/var/lib/sglang-standin/launches.jsonl"
HEALTHY = "/var/lib/sglang-standin/healthy.jsonl"


def run_playbook(playbook, *args, extra_vars=None):
    """ansible-playbook with molecule's inventory and configuration; returns the process."""
    command = [ANSIBLE_PLAYBOOK, "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(playbook), *args]
    if extra_vars is not None:
        command += ["-e", json.dumps(extra_vars)]
    # This checkout as blackwell.sglang, ahead of any copy installed under ~/.ansible.
    project = os.environ["MOLECULE_PROJECT_DIRECTORY"]
    collections = subprocess.run(
        [os.path.join(project, "tools", "collection-path.sh")], capture_output=True, text=True, check=True
    ).stdout.strip()
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_COLLECTIONS_PATH=collections)
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False)


def lab_host(name):
    """The container named name, reached with podman exec: much faster than testinfra's
    ansible backend, which starts an ansible process for every command."""
    import testinfra

    return testinfra.get_host("podman://" + name)


def records(host, path):
    """JSON lines the stand-in appended to path on host (empty when none)."""
    if not host.file(path).exists:
        return []
    content = host.check_output("cat %s", path)
    return [json.loads(line) for line in content.splitlines() if line.strip()]


def failure_message(proc, hostname):
    """The msg of the task that failed on hostname, decoded from the callback's JSON (which
    ansible-core 2.19 writes to stderr)."""
    marker = "fatal: [%s]: FAILED! => " % hostname
    output = proc.stdout + "\n" + proc.stderr
    for line in output.splitlines():
        if line.startswith(marker):
            return json.loads(line[len(marker):])["msg"]
    raise AssertionError("no failed task for %s in:\n%s" % (hostname, output[-3000:]))


def recap(output, hostname):
    """The PLAY RECAP counters of one host, e.g. {'ok': 10, 'changed': 0, ...}."""
    for line in output.splitlines():
        parts = line.split()
        if parts and parts[0] == hostname and len(parts) > 2 and parts[1] == ":":
            return {key: int(value) for key, value in (item.split("=") for item in parts[2:])}
    raise AssertionError("no recap line for %s in:\n%s" % (hostname, output[-3000:]))

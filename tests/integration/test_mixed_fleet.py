"""A fleet that mixes Debian 12 and Debian 13: site.yml on both at once, over SSH.

tools/lab/lab.sh brings up two nodes with LAB_SUITES="bookworm trixie": node 1 from the Debian 12
lab image, node 2 from the Debian 13 one, each with its own release's Debian mirror at
/srv/debian-mirror and the lab's CUDA repository (which holds both debian12/x86_64 and
debian13/x86_64, signed with one key) and SGLang wheelhouse mounted. It converges site.yml with
the lab inventory's settings, exactly as `make lab` does: the preflight, cuda13 with real apt
against the CUDA repository, sglang_install from the wheelhouse, the SM120 patch, and
sglang_service with the stand-in engine. Then:
- each node is what its release gives: its os-release, the CUDA sources file (deb822) for its
  release's repository path, nvcc 13.0, the SGLang venv on its release's Python, and
  sglang.service active and answering /health with 200; on the Debian 13 node, whose systemd
  needs CAP_SYS_ADMIN to start the unit at all (fleet.sh grants it there), the server runs in
  the unit's sandbox;
- a second converge changes nothing on either node;
- the drift report (site.yml in check and diff mode) finds both nodes clean.
"""
from __future__ import annotations

import json
import subprocess
from typing import NamedTuple

import pytest

from conftest import ROOT, drift_report, in_container, lab_env, recap, running_lab

pytestmark = pytest.mark.lab

PREFIX = "mixed-fleet"
PORT_BASE = "2500"
PLAYBOOK = ROOT / "site.yml"


class Release(NamedTuple):
    suite: str
    version_id: str
    repo_path: str
    python: str
    # Whether systemd puts the unit in namespaces of its own there. Debian 12's systemd skips
    # them in a lab container, which lacks the capability it needs; Debian 13's lab nodes hold it
    # (tools/lab/fleet.sh), so ProtectSystem= and the rest apply as on a host.
    sandboxed: bool


# Node N runs the Nth release.
RELEASES = (Release("bookworm", "12", "debian12", "3.11", False), Release("trixie", "13", "debian13", "3.13", True))
NODES = {f"{PREFIX}-{i:02d}": release for i, release in enumerate(RELEASES, start=1)}
HEALTH = "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:30000/health').status)\""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    work = tmp_path_factory.mktemp("mixed")
    env = lab_env(work, PREFIX, PORT_BASE, len(RELEASES), LAB_SUITES=" ".join(r.suite for r in RELEASES),
                  LAB_CONVERGE_ARGS="-e sglang_rollout_serial=100%")
    with running_lab(env) as up:
        yield {"env": env, "inventory": work / "inventory", "work": work, "up": up}


def converge(fleet):
    return subprocess.run(["ansible-playbook", "-i", str(fleet["inventory"]), str(PLAYBOOK),
                           "-e", "sglang_rollout_serial=100%"],
                          cwd=ROOT, env=fleet["env"], capture_output=True, text=True, check=False)


def test_first_converge_changed_both_nodes(fleet):
    counts = recap(fleet["up"].stdout)
    assert sorted(counts) == sorted(NODES), fleet["up"].stdout[-5000:]
    for name, count in counts.items():
        assert count["changed"] > 0, (name, count)
        assert (count["failed"], count["unreachable"]) == (0, 0), (name, count)


@pytest.mark.parametrize("name", sorted(NODES))
def test_each_node_runs_its_release(fleet, name):
    release = NODES[name]
    os_release = dict(line.split("=", 1) for line in in_container(name, "cat /etc/os-release").splitlines() if "=" in line)
    assert (os_release["ID"], os_release["VERSION_ID"]) == ("debian", f'"{release.version_id}"'), os_release
    # One deb822 file for the node's own repository path, beside the image's Debian mirror.
    sources = f"cuda-{release.repo_path}-x86_64.sources"
    assert in_container(name, "ls /etc/apt/sources.list.d").split() == [sources, "debian.sources"]
    stanza = dict(line.split(": ", 1) for line in in_container(name, f"cat /etc/apt/sources.list.d/{sources}").splitlines()
                  if line and not line.startswith("#"))
    assert stanza == {"Types": "deb", "URIs": f"file:///srv/cuda-repo/{release.repo_path}/x86_64/", "Suites": "/",
                      "Signed-By": "/etc/apt/keyrings/cuda-archive-keyring.asc"}, stanza
    # apt read the node's own repository path: the toolkit came from it.
    policy = in_container(name, "apt-cache policy cuda-toolkit-13-0")
    assert f"file:/srv/cuda-repo/{release.repo_path}/x86_64  Packages" in policy, policy
    assert "release 13.0," in in_container(name, "/usr/local/cuda/bin/nvcc --version")
    assert python_version(name, "/opt/sglang/current/bin/python") == release.python
    assert in_container(name, "systemctl is-active sglang").strip() == "active"
    assert in_container(name, HEALTH).strip() == "200"
    # The service's engine (the stand-in behind the unit's launcher) runs on the venv's Python.
    launches = [json.loads(line) for line in in_container(name, "cat /var/lib/sglang-standin/launches.jsonl").splitlines()]
    assert launches, name
    assert python_version(name, launches[-1]["python"]) == release.python, launches[-1]
    assert server_mounts(name) == ("own" if release.sandboxed else "shared")


def server_mounts(name: str) -> str:
    """The server's mount table: "shared" with systemd, or its "own" (the unit's sandbox)."""
    return in_container(name, "pid=$(systemctl show -p MainPID --value sglang) && "
                              "if cmp -s /proc/1/mountinfo /proc/$pid/mountinfo; then echo shared; else echo own; fi").strip()


def python_version(name: str, python: str) -> str:
    return in_container(name, f"{python} -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'").strip()


def test_second_converge_changes_nothing(fleet):
    again = converge(fleet)
    assert again.returncode == 0, again.stdout[-20000:] + again.stderr[-5000:]
    counts = recap(again.stdout)
    assert sorted(counts) == sorted(NODES), again.stdout[-5000:]
    for name, count in counts.items():
        assert (count["changed"], count["failed"], count["unreachable"]) == (0, 0, 0), (name, count)


def test_check_finds_no_drift_on_either_release(fleet):
    code, report, output = drift_report(fleet["inventory"], PLAYBOOK, fleet["env"], fleet["work"] / "drift")
    assert code == 0, output
    assert sorted(report["hosts"]) == sorted(NODES)
    for name, host in report["hosts"].items():
        assert (host["status"], host["reason"], host["drift"]) == ("ok", "", []), (name, host)
        # Judged in full: no step whose outcome check mode could not know.
        assert host["not_judged"] == [], (name, host)
    assert "No drift." in output

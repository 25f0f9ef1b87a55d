"""Drift report accuracy on a real fleet: lab nodes reached over SSH, as tools/drift-report runs.

Four nodes are converged with the drift fixture playbook, then:
- the report on the converged fleet shows no drift and exits 0;
- one node per drift kind is tampered with (package removed, unit edited, alternative switched
  back, env file mode changed) and each drift appears on exactly that node, with its reason;
- neither check run changes a byte on any node (hashes and metadata of the managed state
  before and after).
"""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import ROOT, ansible_env

pytestmark = pytest.mark.lab

PLAYBOOK = ROOT / "tests" / "integration" / "fleet" / "fixture.yml"
NODES = 4
PREFIX = "drift-accuracy"

# node number -> (tampering, as root on the node; the drift the report must show there)
TAMPERS = {
    1: ("dpkg -r fixture-tool",
        [("Install the fixture package", "package would install: fixture-tool")]),
    2: ("sed -i 's/sleep infinity/sleep 3600/' /etc/systemd/system/fixture.service",
        [("Install the fixture unit",
          "content of /etc/systemd/system/fixture.service would change (+1 -1 lines)")]),
    3: ("update-alternatives --quiet --set fixture-tool /opt/fixture/tool-1",
        [("Select tool-2 as the current tool",
          "alternatives: Set alternative '/opt/fixture/tool-2' for 'fixture-tool'.")]),
    4: ("chmod 0644 /etc/default/fixture",
        [("Write the fixture environment file", "/etc/default/fixture: mode 0644 -> 0640")]),
}

# Everything the fixture manages, content and metadata, plus apt's and the alternatives'
# databases and the service state: check mode must leave all of it as it found it.
SNAPSHOT = r"""
set -e
paths="/opt/fixture /etc/default/fixture /etc/systemd/system/fixture.service
       /var/lib/dpkg/status /var/lib/dpkg/alternatives/fixture-tool"
find $paths -type f -print0 | sort -z | xargs -0 sha256sum
find $paths -print0 | sort -z | xargs -0 stat -c '%n %a %U:%G %s %Y'
readlink /etc/alternatives/fixture-tool /usr/local/fixture-tool
systemctl is-active fixture.service || true
"""


def node(i: int) -> str:
    return f"{PREFIX}-{i:02d}"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    work = tmp_path_factory.mktemp("fleet")
    env = ansible_env(LAB_PREFIX=PREFIX, LAB_PORT_BASE="2600", LAB_STATE=str(work / "state"),
                      LAB_INVENTORY=str(work / "hosts.yml"),
                      ANSIBLE_CACHE_PLUGIN_CONNECTION=str(work / "facts"))
    fleet_sh = str(ROOT / "tools" / "lab" / "fleet.sh")
    try:
        up = subprocess.run([fleet_sh, "up", str(NODES)], env=env, capture_output=True, text=True,
                            check=False)
        assert up.returncode == 0, up.stdout + up.stderr
        converge = subprocess.run(
            ["ansible-playbook", "-i", str(work / "hosts.yml"), str(PLAYBOOK)],
            cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        assert converge.returncode == 0, converge.stdout[-20000:] + converge.stderr
        yield {"env": env, "inventory": work / "hosts.yml", "work": work}
    finally:
        subprocess.run([fleet_sh, "down"], env=env, capture_output=True, check=False)


def snapshot() -> dict:
    out = {}
    for i in range(1, NODES + 1):
        proc = subprocess.run(["podman", "exec", node(i), "sh", "-c", SNAPSHOT],
                              capture_output=True, text=True, check=True)
        out[node(i)] = proc.stdout
    return out


def drift_report(fleet, name: str) -> tuple[int, dict, str]:
    json_path = fleet["work"] / f"{name}.json"
    proc = subprocess.run(
        [str(ROOT / "tools" / "drift-report"), "-i", str(fleet["inventory"]), "-p", str(PLAYBOOK),
         "--json", str(json_path), "--markdown", str(fleet["work"] / f"{name}.md")],
        cwd=ROOT, env=fleet["env"], capture_output=True, text=True, check=False)
    report = json.loads(json_path.read_text()) if json_path.exists() else {}
    return proc.returncode, report, proc.stdout + proc.stderr


def test_converged_fleet_has_no_drift_and_check_changes_nothing(fleet):
    before = snapshot()
    code, report, output = drift_report(fleet, "clean")
    assert snapshot() == before
    assert code == 0, output
    assert sorted(report["hosts"]) == [node(i) for i in range(1, NODES + 1)]
    for host in report["hosts"].values():
        assert host["status"] == "ok"
        assert host["drift"] == []
        # The one task that cannot run in check mode is listed, not hidden.
        assert [f["label"] for f in host["not_judged"]] == ["Ask the service whether it is up"]
    assert "No drift." in output


def test_each_tampered_node_shows_exactly_its_drift_and_check_changes_nothing(fleet):
    for i, tamper in TAMPERS.items():
        subprocess.run(["podman", "exec", node(i), "sh", "-c", tamper[0]], check=True,
                       capture_output=True)
    before = snapshot()
    code, report, output = drift_report(fleet, "tampered")
    assert snapshot() == before
    assert code == 1, output
    for i, tamper in TAMPERS.items():
        expected = tamper[1]
        host = report["hosts"][node(i)]
        assert host["status"] == "drift"
        assert [(f["label"], f["reason"]) for f in host["drift"]] == expected, node(i)
    assert report["summary"]["drifted_hosts"] == NODES
    assert report["summary"]["drifted_tasks"] == len(TAMPERS)
    assert "| drift-accuracy-04 | Write the fixture environment file |" in (
        fleet["work"] / "tampered.md").read_text()

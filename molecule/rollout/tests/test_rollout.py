"""Rolling restarts through site.yml on three lab nodes (batches of one): batches go one after
another, each gated on health, and a node that fails its gate stops the rollout while the
others keep serving. The failed node goes back to its previous unit and is gated again. An
engine that crashes until systemd gives up ends the gate at once, whatever its timeout, with
the engine's last journal lines."""
from __future__ import annotations

import json
import os
from pathlib import Path

from labtools import HEALTHY, LAUNCHES, failure_message, lab_host, records, run_playbook

NODES = ["rollout-node1", "rollout-node2", "rollout-node3"]
CONVERGE = Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"]) / "converge.yml"
UNIT = "/etc/systemd/system/sglang.service"
SKIP = "--skip-tags=cuda13,sglang_install,sglang_sm120_patch"


def _hosts():
    return {name: lab_host(name) for name in NODES}


def gate_failure(proc, hostname):
    """The health gate's failure on hostname: the whole message, what it says before the
    engine's journal lines, and those lines."""
    message = failure_message(proc, hostname)
    head, _sep, journal = message.partition(" Last lines of its journal: ")
    return message, head, journal


def test_first_rollout_started_each_node_after_the_previous_one_was_healthy():
    hosts = _hosts()
    launches = {name: records(host, LAUNCHES) for name, host in hosts.items()}
    healthy = {name: records(host, HEALTHY) for name, host in hosts.items()}
    for name in NODES:
        assert len(launches[name]) == 1, launches[name]
        assert len(healthy[name]) == 1, healthy[name]
    for before, after in zip(NODES, NODES[1:]):
        # The stand-in answers 503 for its first 2 s: a start before the previous node's first
        # 200 would mean two batches ran at once.
        assert launches[after][0]["time"] > healthy[before][0]["time"], (before, after)


def test_a_node_failing_its_health_gate_stops_the_rollout_and_the_others_keep_serving():
    """Node 2's engine never becomes healthy, whatever its unit: the rollback to its previous
    unit does not heal it either, and the message says the node is down."""
    hosts = _hosts()
    before = {name: len(records(host, LAUNCHES)) for name, host in hosts.items()}
    unit_before = {name: host.file(UNIT).sha256sum for name, host in hosts.items()}
    hosts["rollout-node2"].check_output(
        "echo %s > /etc/sglang-standin/config.json", json.dumps({"mode": "unhealthy"})
    )
    proc = run_playbook(
        CONVERGE, SKIP, "--extra-vars=sglang_rollout_serial=1",
        extra_vars={"sglang_service_extra_args": ["--log-level", "info"], "sglang_service_health_timeout": 6},
    )
    assert proc.returncode == 2, proc.stdout[-5000:]
    message, head, journal = gate_failure(proc, "rollout-node2")
    assert head == (
        "sglang_service: sglang.service on rollout-node2 did not become healthy within 6s "
        "(/health: 503) after a change of its unit; rolled back to its previous unit, and after the "
        "rollback it did not become healthy within 6s (/health: 503) as well: the node is down. "
        "The rollout stops here."
    )
    assert "Started sglang.service" in journal, message

    # Batch 1 rolled forward and serves the new arguments.
    node1 = records(hosts["rollout-node1"], LAUNCHES)
    assert len(node1) == before["rollout-node1"] + 1
    assert node1[-1]["argv"][-2:] == ["--log-level", "info"]
    # Batch 2 was restarted, failed its gate, and was restarted on its previous unit.
    node2 = records(hosts["rollout-node2"], LAUNCHES)
    assert len(node2) == before["rollout-node2"] + 2, node2
    assert node2[-2]["argv"][-2:] == ["--log-level", "info"] and node2[-2]["mode"] == "unhealthy"
    assert "--log-level" not in node2[-1]["argv"] and node2[-1]["mode"] == "unhealthy"
    assert hosts["rollout-node2"].file(UNIT).sha256sum == unit_before["rollout-node2"]
    # Batch 3 was never touched: same unit, no new launch.
    assert len(records(hosts["rollout-node3"], LAUNCHES)) == before["rollout-node3"]
    assert hosts["rollout-node3"].file(UNIT).sha256sum == unit_before["rollout-node3"]
    assert "--log-level" not in hosts["rollout-node3"].file(UNIT).content_string
    for name in ("rollout-node1", "rollout-node3"):
        assert hosts[name].run("systemctl is-active sglang.service").stdout.strip() == "active"
        assert hosts[name].run("python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:30000/health').status)\"").stdout.strip() == "200"


def test_a_unit_that_systemd_gave_up_on_ends_the_gate_at_once_and_is_rolled_back():
    """The stand-in exits at every start with the new launch argument: after StartLimitBurst
    (3) starts the unit is `failed`. The gate's timeout is an hour, so a message saying the unit
    failed is the gate ending on the unit's state, not on its timeout. The previous unit, which
    the engine runs, comes back and serves."""
    hosts = _hosts()
    node1 = hosts["rollout-node1"]
    unit_before = node1.file(UNIT).sha256sum
    node1.check_output("echo %s > /etc/sglang-standin/config.json",
                       json.dumps({"mode": "serve", "health_delay": 1.0, "refuse_args": ["debug"]}))
    before = len(records(node1, LAUNCHES))
    try:
        proc = run_playbook(
            CONVERGE, SKIP, "--limit=rollout-node1",
            extra_vars={"sglang_service_extra_args": ["--log-level", "debug"], "sglang_service_health_timeout": 3600,
                        "sglang_service_restart_sec": 1},
        )
    finally:
        node1.check_output("echo %s > /etc/sglang-standin/config.json", json.dumps({"mode": "serve", "health_delay": 1.0}))
    assert proc.returncode == 2, proc.stdout[-5000:]
    message, head, journal = gate_failure(proc, "rollout-node1")
    assert head == (
        "sglang_service: sglang.service on rollout-node1 failed (systemd gave up restarting it: failed/failed) "
        "(/health: no answer) after a change of its unit; rolled back to its previous unit, which answers "
        "/health again: the node serves what it served before. The rollout stops here."
    ), message
    assert "sglang.service: Start request repeated too quickly." in journal, message
    launches = records(node1, LAUNCHES)
    assert [launch["mode"] for launch in launches[before:]] == ["refused"] * 3 + ["serve"], launches[before:]
    assert node1.file(UNIT).sha256sum == unit_before
    assert node1.run("systemctl is-active sglang.service").stdout.strip() == "active"
    assert node1.run("python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:30000/health').status)\"").stdout.strip() == "200"
    # The node runs what it ran before, the arguments of the rollout above: a converge with
    # those changes nothing.
    repaired = run_playbook(CONVERGE, SKIP, "--limit=rollout-node1",
                            extra_vars={"sglang_service_extra_args": ["--log-level", "info"]})
    assert repaired.returncode == 0, repaired.stdout[-5000:]
    launches = records(node1, LAUNCHES)
    assert len(launches) == before + 4, launches[before:]
    assert launches[-1]["argv"][-2:] == ["--log-level", "info"]

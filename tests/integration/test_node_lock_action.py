"""The node_lock action and module through ansible-playbook on localhost, with runs that really
overlap: a run holds the lock while a second one waits and is refused naming it; a run killed
while it holds the lock leaves it to the next run of this controller, which takes it over; a
lock of another controller's run is never taken over; check mode writes nothing."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import VENV_BIN, ansible_env

pytestmark = pytest.mark.slow


def playbook(tmp_path: Path, name: str, lock: Path, timeout: int, hold_until: Path | None = None) -> Path:
    tasks = [{"name": "Hold the node", "blackwell.sglang.node_lock": {"path": str(lock), "timeout": timeout}},
             {"name": "Show the lock", "ansible.builtin.slurp": {"src": str(lock)}, "register": "held"}]
    if hold_until:
        tasks.append({"name": "Work while holding it", "ansible.builtin.wait_for": {"path": str(hold_until), "timeout": 120}})
    tasks.append({"name": "Release the node", "blackwell.sglang.node_lock": {"path": str(lock), "state": "absent"}})
    path = tmp_path / f"{name}.yml"
    path.write_text(json.dumps([{"name": name, "hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    return path


def start(play: Path, *args: str) -> subprocess.Popen:
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_DEPRECATION_WARNINGS="0")
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    return subprocess.Popen(
        [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(play),
         "-e", f"ansible_python_interpreter={VENV_BIN / 'python'}", *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(proc: subprocess.Popen, expect_rc: int):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == expect_rc, out[-20000:] + err[-5000:]
    report = json.JSONDecoder().raw_decode(out[out.index("{"):])[0]
    tasks = [(t["task"]["name"], t["hosts"]["localhost"]) for p in report["plays"] for t in p["tasks"]
             if "localhost" in t["hosts"]]
    return tasks, err


def wait_for_holder(lock: Path) -> dict:
    for _attempt in range(600):
        if lock.exists() and lock.read_text().strip():
            return json.loads(lock.read_text())
        time.sleep(0.1)
    raise AssertionError(f"{lock} was never taken")


def test_a_second_run_waits_then_is_refused_naming_the_first(tmp_path):
    lock, go = tmp_path / "node.lock", tmp_path / "go"
    first = start(playbook(tmp_path, "first", lock, 0, hold_until=go))
    holder = wait_for_holder(lock)
    assert holder["pid"] == first.pid
    began = time.monotonic()
    tasks, _err = finish(start(playbook(tmp_path, "second", lock, 3)), expect_rc=2)
    assert time.monotonic() - began >= 3
    failed = [(name, res["msg"]) for name, res in tasks if res.get("failed")]
    assert failed == [("Hold the node", (
        f"another converge holds this node: ansible-playbook (PID {first.pid}) on {holder['controller']} as "
        f"{holder['user']}, since {holder['since']} (lock {lock}). Waited 3 s. Run again when it has finished; "
        f"if that run is gone without releasing the lock (its controller lost), remove {lock} on the node and run again."))]
    assert json.loads(lock.read_text()) == holder
    go.touch()
    tasks, _err = finish(first, expect_rc=0)
    assert [res.get("changed") for _name, res in tasks] == [False, False, False, False]
    assert not lock.exists()


def test_a_waiting_run_takes_the_lock_once_the_holder_releases_it(tmp_path):
    lock, go = tmp_path / "node.lock", tmp_path / "go"
    first = start(playbook(tmp_path, "first", lock, 0, hold_until=go))
    wait_for_holder(lock)
    # The second run's own output says when it reaches the lock; only then is the first let go.
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    second = subprocess.Popen(
        [str(VENV_BIN / "ansible-playbook"), "-v", "-i", "localhost,", "-c", "local",
         str(playbook(tmp_path, "second", lock, 120)), "-e", f"ansible_python_interpreter={VENV_BIN / 'python'}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    for line in second.stdout:
        seen.append(line)
        if line.startswith("TASK [Hold the node]"):
            break
    time.sleep(2)
    go.touch()
    finish(first, expect_rc=0)
    output = "".join(seen) + second.stdout.read()
    assert second.wait(timeout=300) == 0, output
    waited = re.search(r'"waited": ([0-9.]+)', output)
    assert waited and float(waited.group(1)) >= 1, output
    assert f'"pid": {second.pid}' in output
    assert not lock.exists()


def test_a_killed_run_leaves_the_lock_to_the_next_run_of_this_controller(tmp_path):
    lock, never = tmp_path / "node.lock", tmp_path / "never"
    killed = start(playbook(tmp_path, "killed", lock, 0, hold_until=never))
    left = wait_for_holder(lock)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    check_tasks, _err = finish(start(playbook(tmp_path, "check", lock, 0), "--check"), expect_rc=0)
    assert json.loads(lock.read_text()) == left
    would = dict(check_tasks)["Hold the node"]
    assert (would["took_over"], would["msg"]) == (left, (
        f"would take over the converge lock {lock} left by a run that has ended: ansible-playbook (PID {killed.pid})"
        f" on {left['controller']} as {left['user']}, since {left['since']}"))
    tasks, _err = finish(start(playbook(tmp_path, "next", lock, 0)), expect_rc=0)
    taken = dict(tasks)["Hold the node"]
    assert (taken["took_over"], taken["msg"]) == (left, would["msg"].replace("would take over", "took over"))
    assert not lock.exists()


def test_another_controllers_lock_is_never_taken_over(tmp_path):
    lock = tmp_path / "node.lock"
    other = {"owner": "elsewhere:4242:boot/1", "controller": "elsewhere", "pid": 4242, "user": "ci",
             "since": "2026-12-03T09:00:00Z"}
    lock.write_text(json.dumps(other))
    tasks, _err = finish(start(playbook(tmp_path, "here", lock, 1)), expect_rc=2)
    assert dict(tasks)["Hold the node"]["msg"].startswith(
        "another converge holds this node: ansible-playbook (PID 4242) on elsewhere as ci, since 2026-12-03T09:00:00Z")
    assert json.loads(lock.read_text()) == other

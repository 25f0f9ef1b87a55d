"""The node_lock action and module through ansible-playbook on localhost, with runs that really
overlap: a run holds the lock while a second one waits and is refused naming it; a run killed
while it holds the lock leaves it to the next run of this controller, which takes it over; a
lock of another controller's run, or of a controller of this name in another boot, is taken over
only when take_over names its owner; a lock file not made by root is refused; check mode writes
nothing."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import VENV_BIN, ansible_env

pytestmark = pytest.mark.slow


def playbook(tmp_path: Path, name: str, lock: Path, timeout: int, hold_until: Path | None = None,
             take_over: str = "") -> Path:
    hold = {"path": str(lock), "timeout": timeout, "take_over": take_over}
    tasks = [{"name": "Hold the node", "blackwell.sglang.node_lock": hold},
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


def lock_in(tmp_path: Path) -> Path:
    """The lock in a directory the lock creates, root's and 0700, as /run/lock/blackwell-sglang."""
    return tmp_path / "blackwell-sglang" / "node.lock"


def left_by(lock: Path, holder: dict):
    """A lock file as a run elsewhere left it: root's, 0600, in the root-only directory."""
    lock.parent.mkdir(mode=0o700, exist_ok=True)
    lock.write_text(json.dumps(holder))
    lock.chmod(0o600)


def wait_for_holder(lock: Path) -> dict:
    for _attempt in range(600):
        if lock.exists() and lock.read_text().strip():
            return json.loads(lock.read_text())
        time.sleep(0.1)
    raise AssertionError(f"{lock} was never taken")


def test_a_second_run_waits_then_is_refused_naming_the_first(tmp_path):
    lock, go = lock_in(tmp_path), tmp_path / "go"
    first = start(playbook(tmp_path, "first", lock, 0, hold_until=go))
    holder = wait_for_holder(lock)
    assert holder["pid"] == first.pid
    began = time.monotonic()
    tasks, _err = finish(start(playbook(tmp_path, "second", lock, 3)), expect_rc=2)
    assert time.monotonic() - began >= 3
    failed = [(name, res["msg"]) for name, res in tasks if res.get("failed")]
    assert failed == [("Hold the node", (
        f"another converge holds this node: ansible-playbook (PID {first.pid}) on {holder['controller']} as "
        f"{holder['user']}, since {holder['since']} (lock {lock}). Waited 3 s. Run again when it has finished; it is "
        "not known to have ended: its ansible-playbook process is still running here. If it is gone without releasing "
        f"the lock, run again with sglang_rollout_lock_break={holder['owner']} (the task's take_over) to take over "
        "this lock and no other."))]
    assert json.loads(lock.read_text()) == holder
    go.touch()
    tasks, _err = finish(first, expect_rc=0)
    assert [res.get("changed") for _name, res in tasks] == [False, False, False, False]
    assert not lock.exists()


def test_a_waiting_run_takes_the_lock_once_the_holder_releases_it(tmp_path):
    lock, go = lock_in(tmp_path), tmp_path / "go"
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
    lock, never = lock_in(tmp_path), tmp_path / "never"
    killed = start(playbook(tmp_path, "killed", lock, 0, hold_until=never))
    left = wait_for_holder(lock)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    check_tasks, _err = finish(start(playbook(tmp_path, "check", lock, 0), "--check"), expect_rc=0)
    assert json.loads(lock.read_text()) == left
    would = dict(check_tasks)["Hold the node"]
    assert (would["took_over"], would["msg"]) == (left, (
        f"would take over the converge lock {lock} left by a run that has ended (its ansible-playbook process is"
        f" gone): ansible-playbook (PID {killed.pid})"
        f" on {left['controller']} as {left['user']}, since {left['since']}"))
    tasks, _err = finish(start(playbook(tmp_path, "next", lock, 0)), expect_rc=0)
    taken = dict(tasks)["Hold the node"]
    assert (taken["took_over"], taken["msg"]) == (left, would["msg"].replace("would take over", "took over"))
    assert not lock.exists()


def refused(lock: Path, other: dict, why: str, timeout: int = 1) -> str:
    return (f"another converge holds this node: ansible-playbook (PID {other['pid']}) on {other['controller']} as ci, "
            f"since 2026-12-03T09:00:00Z (lock {lock}). Waited {timeout} s. Run again when it has finished; it is not "
            f"known to have ended: {why}. If it is gone without releasing the lock, run again with "
            f"sglang_rollout_lock_break={other['owner']} (the task's take_over) to take over this lock and no other.")


def test_another_controllers_lock_is_taken_over_only_when_take_over_names_it(tmp_path):
    lock = lock_in(tmp_path)
    other = {"owner": "elsewhere:4242:0b6c3f51-1c2e-4a53-9c61-0d9f6f1f3e21/4026531836/1", "controller": "elsewhere",
             "pid": 4242, "user": "ci", "since": "2026-12-03T09:00:00Z"}
    left_by(lock, other)
    tasks, _err = finish(start(playbook(tmp_path, "here", lock, 1)), expect_rc=2)
    assert dict(tasks)["Hold the node"]["msg"] == refused(lock, other, "it ran on another controller, elsewhere")
    assert json.loads(lock.read_text()) == other
    # take_over naming another run leaves this one alone.
    tasks, _err = finish(start(playbook(tmp_path, "wrong", lock, 0, take_over=other["owner"] + "0")), expect_rc=2)
    assert dict(tasks)["Hold the node"]["msg"] == refused(
        lock, other, f"it ran on another controller, elsewhere (take_over names {other['owner']}0, another run)", 0)
    assert json.loads(lock.read_text()) == other
    tasks, _err = finish(start(playbook(tmp_path, "named", lock, 0, take_over=other["owner"])), expect_rc=0)
    taken = dict(tasks)["Hold the node"]
    assert (taken["took_over"], taken["msg"]) == (other, (
        f"took over the converge lock {lock} named by take_over (it ran on another controller, elsewhere): "
        "ansible-playbook (PID 4242) on elsewhere as ci, since 2026-12-03T09:00:00Z"))
    assert not lock.exists()


def test_a_lock_of_this_controllers_name_in_another_boot_is_not_taken_over(tmp_path):
    """A CI runner, a container or an AWX pod of the same name, or this machine before a reboot:
    whether its PID still runs cannot be seen from here."""
    lock, host = lock_in(tmp_path), socket.gethostname()
    other = {"owner": f"{host}:1:7d1e2a90-5b3c-4f6e-8a2d-3c4b5a6d7e8f/4026531836/1", "controller": host, "pid": 1,
             "user": "ci", "since": "2026-12-03T09:00:00Z"}
    left_by(lock, other)
    tasks, _err = finish(start(playbook(tmp_path, "here", lock, 1)), expect_rc=2)
    assert dict(tasks)["Hold the node"]["msg"] == refused(
        lock, other, f"it ran on a controller named {host} in another boot, or on another machine of that name")
    assert json.loads(lock.read_text()) == other


def test_a_lock_file_root_did_not_make_is_refused(tmp_path):
    lock = lock_in(tmp_path)
    left_by(lock, {"owner": "elsewhere:1:x/1/1"})
    os.chown(lock, 1000, 1000)
    tasks, _err = finish(start(playbook(tmp_path, "here", lock, 0)), expect_rc=2)
    assert dict(tasks)["Hold the node"]["msg"] == (
        f"node_lock: refusing the lock file {lock}: it is owned by uid 1000, not root. It must be a regular file owned "
        "by root with mode 0600, which the lock creates; remove it and run again.")
    assert json.loads(lock.read_text()) == {"owner": "elsewhere:1:x/1/1"}

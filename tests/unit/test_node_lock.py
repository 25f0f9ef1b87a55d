"""The converge lock on a real file: taking, waiting, taking over an ended run, releasing, and two
processes racing for it; and the controller's view of runs (tests/unit, no node needed)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from ansible_collections.blackwell.sglang.plugins.action import node_lock as action
from ansible_collections.blackwell.sglang.plugins.module_utils import node_lock


def holder(owner: str) -> dict:
    return {"owner": owner, "controller": "ctl", "pid": 1, "user": "ops", "since": "2026-12-03T10:00:00Z"}


def test_a_free_lock_is_taken_kept_by_its_run_and_refused_to_another(tmp_path):
    path = str(tmp_path / "lock")
    assert node_lock.try_acquire(path, holder("a")) == (True, holder("a"))
    assert json.loads(open(path).read()) == holder("a")
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert node_lock.try_acquire(path, holder("a")) == (True, holder("a"))
    assert node_lock.try_acquire(path, holder("b")) == (False, holder("a"))
    assert node_lock.try_acquire(path, holder("b"), steal="c") == (False, holder("a"))
    assert node_lock.try_acquire(path, holder("b"), steal="a") == (True, holder("b"))
    assert node_lock.read(path) == holder("b")


def test_release_removes_only_its_own_lock(tmp_path):
    path = str(tmp_path / "lock")
    node_lock.try_acquire(path, holder("a"))
    assert node_lock.release(path, "b") == (False, holder("a"))
    assert os.path.exists(path)
    assert node_lock.release(path, "a") == (True, holder("a"))
    assert not os.path.exists(path)
    assert node_lock.release(path, "a") == (False, None)


def test_waiting_gives_up_after_the_timeout_and_check_mode_writes_nothing(tmp_path):
    path = str(tmp_path / "lock")
    node_lock.try_acquire(path, holder("a"))
    ticks, slept = iter(range(100)), []
    held, current, waited = node_lock.acquire(path, holder("b"), 3, poll=1, clock=lambda: next(ticks), sleep=slept.append)
    assert (held, current, waited, slept) == (False, holder("a"), 3, [1, 1])
    free = str(tmp_path / "free")
    assert node_lock.acquire(free, holder("b"), 0, check_mode=True)[:2] == (True, None)
    assert node_lock.acquire(path, holder("b"), 0, check_mode=True)[:2] == (False, holder("a"))
    assert not os.path.exists(free)


def test_a_lock_released_while_another_waits_for_the_flock_is_taken_afresh(tmp_path):
    """The releasing run removes the file under the flock; the waiting one then finds the path
    gone, opens it again, and holds a lock that exists."""
    path = str(tmp_path / "lock")
    node_lock.try_acquire(path, holder("a"))
    fd = node_lock._open_locked(path)
    script = (
        "import sys; from ansible_collections.blackwell.sglang.plugins.module_utils import node_lock as n;"
        f"print(n.try_acquire({path!r}, {{'owner': 'b'}})[0])")
    waiter = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    os.unlink(path)
    os.close(fd)
    assert waiter.communicate(timeout=30)[0].strip() == "True"
    assert node_lock.read(path) == {"owner": "b"}


def test_of_many_runs_racing_for_a_free_lock_exactly_one_holds_it(tmp_path):
    path = str(tmp_path / "lock")
    go = tmp_path / "go"
    script = (
        "import os, sys, time; from ansible_collections.blackwell.sglang.plugins.module_utils import node_lock as n\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.001)\n"
        f"print(n.try_acquire({path!r}, {{'owner': sys.argv[1]}})[0])")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    runs = [subprocess.Popen([sys.executable, "-c", script, f"run{i}"], stdout=subprocess.PIPE, text=True, env=env)
            for i in range(8)]
    go.touch()
    outcome = {f"run{i}": run.communicate(timeout=60)[0].strip() for i, run in enumerate(runs)}
    winners = [owner for owner, held in outcome.items() if held == "True"]
    assert len(winners) == 1, outcome
    assert node_lock.read(path)["owner"] == winners[0]


def test_a_run_is_its_ansible_playbook_process_and_ends_with_it(tmp_path):
    me = action.this_run()
    assert me["pid"] == os.getppid()
    assert me["owner"] == f"{me['controller']}:{me['pid']}:{action.process_start(me['pid'])}"
    assert not action.has_ended(me, me["controller"])
    # Another controller's run cannot be seen from here: never taken for ended.
    assert not action.has_ended(me, "elsewhere")
    gone = subprocess.Popen(["true"])
    gone.wait()
    ended = dict(me, owner=f"{me['controller']}:{gone.pid}:{action.process_start(os.getpid())}")
    assert action.has_ended(ended, me["controller"])
    # The same PID started again is another process: its start time differs.
    reused = dict(me, owner=f"{me['controller']}:{os.getpid()}:{me['owner'].rsplit(':', 1)[1]}x")
    assert action.has_ended(reused, me["controller"])
    assert not action.has_ended({"owner": "garbage"}, me["controller"])


def test_the_holder_is_named_for_the_operator():
    assert action.describe(holder("a")) == "ansible-playbook (PID 1) on ctl as ops, since 2026-12-03T10:00:00Z"
    assert action.describe({"owner": "", "unreadable": "xx"}) == "an unreadable holder ('xx')"


def test_a_lock_file_that_is_not_a_holder_record_is_held_by_an_unreadable_holder(tmp_path):
    path = tmp_path / "lock"
    path.write_text("not json\n")
    assert node_lock.try_acquire(str(path), holder("a")) == (False, {"owner": "", "unreadable": "not json\n"})
    path.write_text("\n")
    assert node_lock.read(str(path)) is None
    assert node_lock.try_acquire(str(path), holder("a")) == (True, holder("a"))

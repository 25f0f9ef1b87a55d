"""The converge lock on a real file: taking, waiting, taking over an ended run, releasing, two
processes racing for it, and refusing a directory or file that root did not make; and the
controller's view of runs: which holders are known to have ended, and the operator's takeover
(tests/unit, no node needed; run as root, as CI does, since the lock is root's)."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.blackwell.sglang.plugins.action import node_lock as action
from ansible_collections.blackwell.sglang.plugins.module_utils import node_lock
from conftest import ROOT


def holder(owner: str) -> dict:
    return {"owner": owner, "controller": "ctl", "pid": 1, "user": "ops", "since": "2026-12-03T10:00:00Z"}


def lock_in(tmp_path: Path) -> str:
    """A lock path whose directory the lock creates (root's, 0700), as /run/lock/blackwell-sglang."""
    return str(tmp_path / "blackwell-sglang" / "node.lock")


def test_a_free_lock_is_taken_kept_by_its_run_and_refused_to_another(tmp_path):
    path = lock_in(tmp_path)
    assert node_lock.try_acquire(path, holder("a")) == (True, holder("a"))
    assert json.loads(open(path).read()) == holder("a")
    assert os.stat(path).st_mode & 0o7777 == 0o600
    assert os.stat(os.path.dirname(path)).st_mode & 0o7777 == 0o700
    assert node_lock.try_acquire(path, holder("a")) == (True, holder("a"))
    assert node_lock.try_acquire(path, holder("b")) == (False, holder("a"))
    assert node_lock.try_acquire(path, holder("b"), steal="c") == (False, holder("a"))
    assert node_lock.try_acquire(path, holder("b"), steal="a") == (True, holder("b"))
    assert node_lock.read(path) == holder("b")


def test_release_removes_only_its_own_lock(tmp_path):
    path = lock_in(tmp_path)
    node_lock.try_acquire(path, holder("a"))
    assert node_lock.release(path, "b") == (False, holder("a"))
    assert os.path.exists(path)
    assert node_lock.release(path, "a") == (True, holder("a"))
    assert not os.path.exists(path)
    assert node_lock.release(path, "a") == (False, None)


def test_waiting_gives_up_after_the_timeout_and_check_mode_writes_nothing(tmp_path):
    path = lock_in(tmp_path)
    node_lock.try_acquire(path, holder("a"))
    ticks, slept = iter(range(100)), []
    held, current, waited = node_lock.acquire(path, holder("b"), 3, poll=1, clock=lambda: next(ticks), sleep=slept.append)
    assert (held, current, waited, slept) == (False, holder("a"), 3, [1, 1])
    free = str(tmp_path / "free" / "node.lock")
    assert node_lock.acquire(free, holder("b"), 0, check_mode=True)[:2] == (True, None)
    assert node_lock.acquire(path, holder("b"), 0, check_mode=True)[:2] == (False, holder("a"))
    assert not os.path.exists(os.path.dirname(free))


def test_a_lock_released_while_another_waits_for_the_flock_is_taken_afresh(tmp_path):
    """The releasing run removes the file under the flock; the waiting one then finds the path
    gone, opens it again, and holds a lock that exists."""
    path = lock_in(tmp_path)
    node_lock.try_acquire(path, holder("a"))
    dfd = node_lock._open_dir(path, create=True)
    fd = node_lock._open_locked(dfd, path)
    os.close(dfd)
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
    path = lock_in(tmp_path)
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


def test_a_run_is_its_ansible_playbook_process_and_ends_with_it():
    me = action.this_run()
    assert me["pid"] == os.getppid()
    boot, namespace = action.boot_id(), action.pid_namespace()
    assert boot and namespace.isdigit()
    assert me["owner"] == f"{me['controller']}:{me['pid']}:{boot}/{namespace}/{action.process_start(me['pid'])}"
    assert not action.has_ended(me, me["controller"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    ended = dict(me, owner=f"{me['controller']}:{gone.pid}:{boot}/{namespace}/{action.process_start(os.getpid())}")
    assert action.judge(ended, me["controller"]) == (True, "its ansible-playbook process is gone")


BOOT, OTHER_BOOT = "0b6c3f51-1c2e-4a53-9c61-0d9f6f1f3e21", "7d1e2a90-5b3c-4f6e-8a2d-3c4b5a6d7e8f"


@pytest.fixture(name="proc")
def fixture_proc(tmp_path):
    """A /proc of the controller 'runner': its boot id, its PID namespace, and process 7 started
    at tick 123. Returns (the tree, its PID namespace)."""
    root = tmp_path / "proc"
    (root / "sys" / "kernel" / "random").mkdir(parents=True)
    (root / "sys" / "kernel" / "random" / "boot_id").write_text(BOOT + "\n")
    (root / "self" / "ns").mkdir(parents=True)
    (root / "self" / "ns" / "pid").write_text("")
    (root / "7").mkdir()
    (root / "7" / "stat").write_text("7 (ansible-playbook) S 1 7 7 0 -1 4194560 " + "0 " * 12 + "123 4096 99\n")
    return str(root), str((root / "self" / "ns" / "pid").stat().st_ino)


def run_of(host: str, pid: int, boot: str, namespace: str, start: str) -> dict:
    return {"owner": f"{host}:{pid}:{boot}/{namespace}/{start}", "controller": host, "pid": pid}


def test_only_a_run_of_this_machine_boot_and_pid_namespace_whose_process_is_gone_has_ended(proc):
    root, ns = proc
    assert action.process_start(7, root) == "123"
    # Another controller of the same name (a CI runner, a container, an AWX pod), or this one
    # before a reboot: its PID means nothing in this /proc, so its run is not known to have ended.
    assert action.judge(run_of("runner", 7, OTHER_BOOT, ns, "123"), "runner", root) == (
        False, "it ran on a controller named runner in another boot, or on another machine of that name")
    assert action.judge(run_of("runner", 9, OTHER_BOOT, ns, "5"), "runner", root)[0] is False
    # A container on this kernel shares its boot id, not its PID namespace.
    assert action.judge(run_of("runner", 9, BOOT, "4026531999", "5"), "runner", root) == (
        False, "it ran in another PID namespace (another container) on this machine")
    assert action.judge(run_of("elsewhere", 9, BOOT, ns, "5"), "runner", root) == (
        False, "it ran on another controller, elsewhere")
    # Here, this boot, this namespace: a PID that is gone, or that another process now has, ended.
    assert action.judge(run_of("runner", 9, BOOT, ns, "5"), "runner", root) == (
        True, "its ansible-playbook process is gone")
    assert action.judge(run_of("runner", 7, BOOT, ns, "100"), "runner", root) == (
        True, "its PID now belongs to another process")
    assert action.judge(run_of("runner", 7, BOOT, ns, "123"), "runner", root) == (
        False, "its ansible-playbook process is still running here")
    # The owner string of earlier releases (HOST:PID:BOOT/START), and garbage, are never judged.
    assert not action.has_ended({"owner": f"runner:7:{OTHER_BOOT}/123"}, "runner", root)
    assert not action.has_ended({"owner": f"runner:9:{BOOT}/5"}, "runner", root)
    assert not action.has_ended({"owner": "garbage"}, "runner", root)
    assert not action.has_ended({"owner": f"runner:x:{BOOT}/{ns}/5"}, "runner", root)


def test_a_controller_that_cannot_read_its_boot_id_judges_no_run_ended(proc):
    root, ns = proc
    os.unlink(os.path.join(root, "sys", "kernel", "random", "boot_id"))
    assert action.judge(run_of("runner", 9, BOOT, ns, "5"), "runner", root) == (
        False, "this controller's boot id or PID namespace cannot be read")
    assert action.this_run(root)["owner"].endswith(":/" + ns + "/")


def test_take_over_takes_over_only_the_owner_it_names(proc):
    root, ns = proc
    foreign = run_of("elsewhere", 4242, OTHER_BOOT, "4026531836", "81234")
    assert action.takeover(foreign, "runner", "", root) == (False, "it ran on another controller, elsewhere")
    assert action.takeover(foreign, "runner", foreign["owner"], root) == (
        True, "named by take_over (it ran on another controller, elsewhere)")
    assert action.takeover(foreign, "runner", foreign["owner"] + "0", root)[0] is False
    assert action.takeover(foreign, "runner", run_of("elsewhere", 4242, BOOT, ns, "1")["owner"], root)[0] is False
    assert action.takeover({"owner": "", "unreadable": "x"}, "runner", "", root)[0] is False
    assert action.takeover(run_of("runner", 9, BOOT, ns, "5"), "runner", "", root) == (
        True, "left by a run that has ended (its ansible-playbook process is gone)")


def test_the_holder_is_named_for_the_operator():
    assert action.describe(holder("a")) == "ansible-playbook (PID 1) on ctl as ops, since 2026-12-03T10:00:00Z"
    assert action.describe({"owner": "", "unreadable": "xx"}) == "an unreadable holder ('xx')"


def test_a_lock_file_that_is_not_a_holder_record_is_held_by_an_unreadable_holder(tmp_path):
    path = Path(lock_in(tmp_path))
    path.parent.mkdir(mode=0o700)
    path.write_text("not json\n")
    path.chmod(0o600)
    assert node_lock.try_acquire(str(path), holder("a")) == (False, {"owner": "", "unreadable": "not json\n"})
    path.write_text("\n")
    assert node_lock.read(str(path)) is None
    assert node_lock.try_acquire(str(path), holder("a")) == (True, holder("a"))


def test_a_missing_directory_is_created_root_only_and_check_mode_creates_none(tmp_path):
    path = lock_in(tmp_path)
    assert node_lock.read(path) is None
    assert node_lock.release(path, "a") == (False, None)
    assert not os.path.exists(os.path.dirname(path))
    node_lock.try_acquire(path, holder("a"))
    info = os.lstat(os.path.dirname(path))
    assert (stat.S_ISDIR(info.st_mode), info.st_uid, stat.S_IMODE(info.st_mode)) == (True, 0, 0o700)
    missing = str(tmp_path / "no-such-dir" / "blackwell-sglang" / "node.lock")
    with pytest.raises(node_lock.Refused, match=f"^node_lock: {tmp_path / 'no-such-dir'} does not exist on this node$"):
        node_lock.try_acquire(missing, holder("a"))


def refusal(path: str, what: str, why: str) -> str:
    if what == "directory":
        return (f"node_lock: refusing the lock directory {os.path.dirname(path)}: {why}. It must be a directory "
                "(not a link) owned by root with mode 0700, which the lock creates when it is missing; remove it (or "
                "what it points to) and run again.")
    return (f"node_lock: refusing the lock file {path}: {why}. It must be a regular file owned by root with mode 0600, "
            "which the lock creates; remove it and run again.")


def assert_refused(path: str, message: str):
    """Every way into the lock refuses it with MESSAGE, and none takes it."""
    for attempt in (lambda: node_lock.try_acquire(path, holder("a")), lambda: node_lock.read(path),
                    lambda: node_lock.acquire(path, holder("a"), 0, check_mode=True),
                    lambda: node_lock.release(path, "a")):
        with pytest.raises(node_lock.Refused) as refused:
            attempt()
        assert str(refused.value) == message


@pytest.mark.parametrize("mode", [0o755, 0o770, 0o1700, 0o500])
def test_a_lock_directory_with_another_mode_is_refused(tmp_path, mode):
    path = lock_in(tmp_path)
    os.mkdir(os.path.dirname(path))
    os.chmod(os.path.dirname(path), mode)
    assert_refused(path, refusal(path, "directory", f"its mode is {mode:04o}, not 0700"))
    assert os.listdir(os.path.dirname(path)) == []


def test_a_lock_directory_of_another_owner_a_link_or_a_file_is_refused(tmp_path):
    path = lock_in(tmp_path)
    directory = os.path.dirname(path)
    os.mkdir(directory, 0o700)
    os.chown(directory, 1000, 1000)
    assert_refused(path, refusal(path, "directory", "it is owned by uid 1000, not root"))
    os.rmdir(directory)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.symlink(elsewhere, directory)
    assert_refused(path, refusal(path, "directory", "it is a symbolic link"))
    assert list(elsewhere.iterdir()) == []
    os.unlink(directory)
    Path(directory).write_text("")
    assert_refused(path, refusal(path, "directory", "it is not a directory"))


def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(tmp_path):
    path = lock_in(tmp_path)
    os.mkdir(os.path.dirname(path), 0o700)
    target = tmp_path / "shadow"
    target.write_text("")
    target.chmod(0o600)
    os.symlink(target, path)
    assert_refused(path, refusal(path, "file", "it is a symbolic link"))
    assert target.read_text() == ""
    assert os.path.islink(path)
    # A dangling link is not followed to create its target either.
    target.unlink()
    assert_refused(path, refusal(path, "file", "it is a symbolic link"))
    assert not target.exists()


def test_a_lock_file_of_another_owner_mode_or_type_is_refused(tmp_path):
    path = lock_in(tmp_path)
    node_lock.try_acquire(path, holder("a"))
    os.chown(path, 1000, 1000)
    assert_refused(path, refusal(path, "file", "it is owned by uid 1000, not root"))
    assert json.loads(open(path).read()) == holder("a")
    os.chown(path, 0, 0)
    os.chmod(path, 0o644)
    assert_refused(path, refusal(path, "file", "its mode is 0644, not 0600"))
    os.unlink(path)
    os.mkfifo(path, 0o600)
    assert_refused(path, refusal(path, "file", "it is not a regular file"))


HOLD = {"path": "{{ sglang_rollout_lock_path | default('/run/lock/blackwell-sglang/node.lock') }}",
        "timeout": "{{ sglang_rollout_lock_timeout | default(600) }}",
        "take_over": "{{ sglang_rollout_lock_break | default('') }}"}


@pytest.mark.parametrize("playbook", ["node.yml", "router.yml", "remove.yml"])
def test_every_play_that_changes_a_node_holds_it_until_its_handlers_have_run(playbook):
    """The engines' converge and removal, and the router's (a router host may be an engine node):
    each play takes the lock in pre_tasks, before any role, and releases it last, in post_tasks."""
    import yaml  # pylint: disable=import-outside-toplevel

    plays = yaml.safe_load((ROOT / "playbooks" / playbook).read_text())
    for play in plays:
        holds = [t["blackwell.sglang.node_lock"] for t in play["pre_tasks"] if "blackwell.sglang.node_lock" in t]
        assert holds == [HOLD], play["name"]
        assert play["post_tasks"][-1]["blackwell.sglang.node_lock"] == {"path": HOLD["path"], "state": "absent"}
        assert "always" in play["pre_tasks"][-1]["tags"] and "always" in play["post_tasks"][-1]["tags"]

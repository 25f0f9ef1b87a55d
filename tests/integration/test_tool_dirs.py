"""The lab's build scripts reuse directories whose contents end up installed as root (the wheel
cache, the wheelhouse, the CUDA repository's output): they refuse one another local user made or
can change, before anything is downloaded or built there."""
from __future__ import annotations

import os
import subprocess

import pytest
from conftest import CACHE, ROOT

LAB = ROOT / "tools" / "lab"
UID = os.getuid()


def run(script, *args, **env):
    return subprocess.run([str(LAB / script), *args], env={**os.environ, **env},
                          capture_output=True, text=True, check=False)


def refusal(script, path):
    return f"{script}: {path} is not a directory of user {UID} that only its owner can write; refusing to use it"


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_wheelhouse_others_can_write_is_refused(tmp_path, mode):
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    wheelhouse.chmod(mode)
    proc = run("build-wheelhouse.sh", LAB_WHEELHOUSE=str(wheelhouse))
    assert (proc.returncode, proc.stderr.strip(), proc.stdout) == (1, refusal("build-wheelhouse.sh", wheelhouse), "")
    assert list(wheelhouse.iterdir()) == []


def test_wheelhouse_owned_by_another_user_is_refused(tmp_path):
    if UID != 0:
        pytest.skip("only root can give a directory to another user")
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir(mode=0o755)
    os.chown(wheelhouse, 65534, 65534)
    proc = run("build-wheelhouse.sh", LAB_WHEELHOUSE=str(wheelhouse))
    assert (proc.returncode, proc.stderr.strip()) == (1, refusal("build-wheelhouse.sh", wheelhouse))
    assert list(wheelhouse.iterdir()) == []


def test_a_directory_under_one_others_can_write_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    wheelhouse = shared / "wheelhouse"
    wheelhouse.mkdir(mode=0o755)
    proc = run("build-wheelhouse.sh", LAB_WHEELHOUSE=str(wheelhouse))
    assert (proc.returncode, proc.stderr.strip()) == (
        1, f"build-wheelhouse.sh: {wheelhouse} lies under {shared}, which another user can change; refusing to use it")
    assert list(wheelhouse.iterdir()) == []


def test_a_link_to_a_directory_others_can_write_is_refused(tmp_path):
    planted = tmp_path / "planted"
    planted.mkdir()
    planted.chmod(0o777)
    link = tmp_path / "wheelhouse"
    link.symlink_to(planted)
    proc = run("build-wheelhouse.sh", LAB_WHEELHOUSE=str(link))
    assert (proc.returncode, proc.stderr.strip()) == (1, refusal("build-wheelhouse.sh", link))
    assert list(planted.iterdir()) == []


@pytest.mark.parametrize("script, args", [("sglang-wheel.sh", ["0.5.8"]), ("build-cuda-repo.sh", [])])
def test_a_wheel_cache_others_can_write_is_refused(tmp_path, script, args):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheels.chmod(0o777)
    proc = run(script, *args, BLACKWELL_CACHE=str(tmp_path))
    assert (proc.returncode, proc.stderr.strip(), proc.stdout) == (1, refusal(script, wheels), "")
    assert list(wheels.iterdir()) == []


def test_a_private_wheelhouse_is_used(tmp_path):
    """The same script, given a directory only the caller controls, goes on: the wheels it
    needs are already there (links to the lab's copies), so it downloads nothing."""
    source = CACHE / "lab" / "wheelhouse"
    wheels = sorted(source.glob("*.whl"))
    if len(wheels) < 4:
        pytest.skip("the lab wheelhouse is not filled (tools/lab/build-wheelhouse.sh)")
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir(mode=0o755)
    for wheel in wheels:
        (wheelhouse / wheel.name).symlink_to(wheel)
    proc = run("build-wheelhouse.sh", LAB_WHEELHOUSE=str(wheelhouse))
    assert (proc.returncode, proc.stdout.strip(), proc.stderr) == (0, str(wheelhouse), "")
    assert sorted(p.name for p in wheelhouse.iterdir()) == [w.name for w in wheels]

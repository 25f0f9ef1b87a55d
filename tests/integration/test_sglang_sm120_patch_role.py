"""The sglang_sm120_patch role through ansible-playbook on localhost, against real SGLang files.

Each test unpacks a real release's files (tests/sglang_wheels.py) into a venv layout under a
temp dir and runs the role on it with `-c local`: apply / apply again / check mode / rollback /
the no-op on SM90 and older / explicit values / releases without the communicator / bad input.
No service role is in these plays: the role's own listener must answer its notification.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import VENV_BIN, ansible_env
from sglang_wheels import BEFORE_SYMM_MEM, TARGET_FILES, install_tree, original
from unit.capmap_checks import evaluate

pytestmark = pytest.mark.slow

RELEASE = "0.5.8"
REL = [name.removeprefix("sglang/") for name in TARGET_FILES]
DICTS = dict(zip(REL, ("TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES", "TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM")))
ROLE = "blackwell.sglang.sglang_sm120_patch : "
PATCH_TASK = ROLE + "Patch SGLang's capability dicts for the node's GPUs"
LISTENER = ROLE + "Report that the SGLang server needs a restart to load the patch"


def make_venv(tmp_path: Path, version: str) -> tuple[Path, Path]:
    venv = tmp_path / "venv"
    package = install_tree(version, venv / "lib" / "python3.11")
    return venv, package


def snapshot(package: Path) -> dict:
    return {p.relative_to(package).as_posix(): p.read_bytes() for p in sorted(package.rglob("*")) if p.is_file()}


def _env() -> dict:
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    # Extra callbacks would print around the JSON report.
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    return env


def run_role(tmp_path: Path, venv: Path, *args: str, expect_rc: int = 0, plays: list | None = None, **role_vars):
    """The role in a play of its own on venv, or the plays given."""
    play = plays or [{
        "name": "Patch SGLang",
        "hosts": "localhost",
        "gather_facts": False,
        "vars": {"sglang_sm120_patch_venv": str(venv), **role_vars},
        "roles": [{"role": "blackwell.sglang.sglang_sm120_patch"}],
    }]
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps(play), encoding="utf-8")
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook),
         "-e", f"ansible_python_interpreter={VENV_BIN / 'python'}", *args],
        env=_env(),
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == expect_rc, proc.stdout[-20000:] + proc.stderr[-5000:]
    report = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{"):])[0]
    # A meta task that ends the role shows with no host result.
    tasks = [(t["task"]["name"], t["hosts"]["localhost"]) for p in report["plays"] for t in p["tasks"]
             if "localhost" in t["hosts"]]
    return tasks


def changed(tasks):
    return [name for name, result in tasks if result.get("changed")]


def ran(tasks, name):
    return [result for task, result in tasks if task == name and not result.get("skipped")]


def messages(tasks):
    out = []
    for _name, result in tasks:
        for item in result.get("results", [result]):
            if isinstance(item, dict) and isinstance(item.get("msg"), str) and not item.get("skipped"):
                out.append(item["msg"])
    return out


def dicts(package: Path) -> dict:
    return {rel: evaluate((package / rel).read_text(encoding="utf-8"), name) for rel, name in DICTS.items()}


def test_apply_again_and_check_mode(tmp_path):
    venv, package = make_venv(tmp_path, RELEASE)
    pristine = snapshot(package)

    tasks = run_role(tmp_path, venv, "--check", sglang_sm120_patch_capabilities=[12])
    assert changed(tasks) == [PATCH_TASK]
    assert snapshot(package) == pristine

    tasks = run_role(tmp_path, venv, sglang_sm120_patch_capabilities=[12])
    assert changed(tasks) == [PATCH_TASK]
    # The role's own handler says that the running server needs a restart.
    assert len(ran(tasks, LISTENER)) == 1
    for rel, value in dicts(package).items():
        assert value[12] == value[10], rel
    assert dicts(package)[REL[1]][12] == [6, 8]
    patched = snapshot(package)

    for extra in ((), ("--check",)):
        tasks = run_role(tmp_path, venv, *extra, sglang_sm120_patch_capabilities=[12])
        assert changed(tasks) == []
        assert ran(tasks, LISTENER) == []
        assert snapshot(package) == patched
    # The patch task's own result says so; with nothing changed and nothing else to say, the role
    # ends there and prints no report.
    (patch,) = ran(tasks, PATCH_TASK)
    assert [(t["name"], t["status"]) for t in patch["results"][0]["targets"]] == [
        ("TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES", "already present"),
        ("TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM", "already present")]
    assert [m for m in messages(tasks) if m != "The arg spec validation passed"] == []


def test_a_read_the_play_passes_is_used_and_an_earlier_plays_is_not(tmp_path):
    """The role reads venv A itself in a first play. In a second, the play passes sglang_install's
    read of venv B as playbooks/node.yml does (sglang_sm120_patch_venv_info): the role reads
    nothing itself, and B is what gets patched. In a third, a read of B passed for venv C is not
    taken: the role reads C."""
    first = make_venv(tmp_path / "a", RELEASE)[0]
    second, second_package = make_venv(tmp_path / "b", RELEASE)
    third, third_package = make_venv(tmp_path / "c", RELEASE)
    role = [{"role": "blackwell.sglang.sglang_sm120_patch"}]
    read_b = {"name": "Read venv B as sglang_install does", "register": "sglang_install_venv_info",
              "blackwell.sglang.sglang_venv_info": {"venv": str(second)}}
    passed = "{{ sglang_install_venv_info }}"
    plays = [
        {"name": "Patch venv A", "hosts": "localhost", "gather_facts": False, "roles": role,
         "vars": {"sglang_sm120_patch_venv": str(first), "sglang_sm120_patch_capabilities": [12]}},
        {"name": "Patch venv B after its install", "hosts": "localhost", "gather_facts": False, "roles": role,
         "vars": {"sglang_sm120_patch_venv": str(second), "sglang_sm120_patch_capabilities": [12],
                  "sglang_sm120_patch_venv_info": passed},
         "pre_tasks": [read_b]},
        {"name": "Patch venv C given B's read", "hosts": "localhost", "gather_facts": False, "roles": role,
         "vars": {"sglang_sm120_patch_venv": str(third), "sglang_sm120_patch_capabilities": [12],
                  "sglang_sm120_patch_venv_info": passed}},
    ]
    tasks = run_role(tmp_path, first, plays=plays)
    assert changed(tasks) == [PATCH_TASK, PATCH_TASK, PATCH_TASK]
    reads = ran(tasks, ROLE + "Read the SGLang package and its release in the venv")
    assert [read["venv"] for read in reads] == [str(first), str(third)]
    for package in (second_package, third_package):
        values = dicts(package)
        assert values[REL[0]][12] == values[REL[0]][10]


def test_state_absent_restores_the_release_byte_for_byte(tmp_path):
    venv, package = make_venv(tmp_path, RELEASE)
    run_role(tmp_path, venv, sglang_sm120_patch_capabilities=[12])
    tasks = run_role(tmp_path, venv, sglang_sm120_patch_capabilities=[12], sglang_sm120_patch_state="absent")
    assert changed(tasks) == [PATCH_TASK]
    assert len(ran(tasks, LISTENER)) == 1
    for rel in REL:
        assert (package / rel).read_bytes() == original(RELEASE, rel)
    tasks = run_role(tmp_path, venv, sglang_sm120_patch_capabilities=[12], sglang_sm120_patch_state="absent")
    assert changed(tasks) == []


@pytest.mark.parametrize("majors", [[9], [10], [9, 10], [8]])
def test_known_and_older_majors_are_left_alone(tmp_path, majors):
    venv, package = make_venv(tmp_path, RELEASE)
    pristine = snapshot(package)
    tasks = run_role(tmp_path, venv, sglang_sm120_patch_capabilities=majors)
    assert changed(tasks) == []
    assert snapshot(package) == pristine
    msgs = messages(tasks)
    if majors == [8]:
        assert "capability majors 8 are below 9; SGLang's torch symmetric-memory all-reduce refuses them, " \
            "nothing to patch" in msgs
        assert ran(tasks, PATCH_TASK) == []
    else:
        if 10 in majors:
            assert "capability 10 is the entry the patch copies from (sglang_sm120_patch_source_capability); " \
                "SGLang lists it upstream, no patch needed" in msgs
        for major in set(majors) - {10}:
            assert f"SGLang {RELEASE}, capability {major}: TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES present upstream; " \
                "TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM present upstream " \
                "(upstream already has it: no patch needed)" in msgs


def test_explicit_values_keep_pcie_boxes_on_two_shot(tmp_path):
    venv, package = make_venv(tmp_path, RELEASE)
    tasks = run_role(
        tmp_path, venv, sglang_sm120_patch_capabilities=[12],
        sglang_sm120_patch_values={"TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM": []},
    )
    assert changed(tasks) == [PATCH_TASK]
    values = dicts(package)
    assert values[REL[1]][12] == []
    assert values[REL[0]][12] == values[REL[0]][10]


def test_release_without_the_communicator_is_skipped_or_refused(tmp_path):
    venv, package = make_venv(tmp_path, BEFORE_SYMM_MEM)
    pristine = snapshot(package)
    message = (
        f"SGLang {BEFORE_SYMM_MEM} in {venv} has no srt/distributed/device_communicators/torch_symm_mem.py "
        "(releases up to 0.5.4 predate the torch symmetric-memory all-reduce)"
    )
    tasks = run_role(tmp_path, venv, sglang_sm120_patch_capabilities=[12])
    assert changed(tasks) == []
    assert message + "; nothing to patch" in messages(tasks)
    assert ran(tasks, PATCH_TASK) == []

    tasks = run_role(
        tmp_path, venv, expect_rc=2, sglang_sm120_patch_capabilities=[12], sglang_sm120_patch_missing_policy="fail"
    )
    assert [r["msg"] for _name, r in tasks if r.get("failed")] == [message]
    assert snapshot(package) == pristine


def test_venv_without_sglang_is_refused(tmp_path):
    venv = tmp_path / "empty"
    (venv / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    tasks = run_role(tmp_path, venv, expect_rc=2, sglang_sm120_patch_capabilities=[12])
    assert [r["msg"] for _name, r in tasks if r.get("failed")] == [
        f"no SGLang package under {venv}/lib/python3.*/site-packages; install it first (sglang_install)"
    ]
    # A check of the same node (SGLang still to be installed): not a failure, and the note says why.
    tasks = run_role(tmp_path, venv, "--check", sglang_sm120_patch_capabilities=[12])
    assert [name for name, r in tasks if r.get("failed")] == []
    assert ran(tasks, PATCH_TASK) == []
    assert [m for m in messages(tasks) if m != "The arg spec validation passed"] == [
        f"no SGLang under {venv} yet: its install is this node's drift, and the patch is judged once it is"
        " installed"
    ]


def test_node_without_visible_gpus_patches_nothing(tmp_path):
    venv, package = make_venv(tmp_path, RELEASE)
    pristine = snapshot(package)
    # gpu_facts reads the node itself: the test machines have no NVIDIA GPU and no nvidia-smi.
    tasks = run_role(tmp_path, venv)
    assert changed(tasks) == []
    assert snapshot(package) == pristine
    assert [m for m in messages(tasks) if m.startswith("no GPU capability majors to patch for (gpu_facts: ")]
    assert ran(tasks, PATCH_TASK) == []


def test_bad_state_is_refused_by_the_argument_spec(tmp_path):
    venv, package = make_venv(tmp_path, RELEASE)
    pristine = snapshot(package)
    tasks = run_role(tmp_path, venv, expect_rc=2, sglang_sm120_patch_capabilities=[12], sglang_sm120_patch_state="gone")
    (msg,) = [r["msg"] for _name, r in tasks if r.get("failed")]
    assert "value of sglang_sm120_patch_state must be one of: present, absent, got: gone" in msg
    assert snapshot(package) == pristine

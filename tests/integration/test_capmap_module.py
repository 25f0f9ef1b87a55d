"""blackwell.sglang.sglang_capmap run by Ansible itself against localhost, on real SGLang trees.

apply (changed, exact inserted lines, stale bytecode gone) / apply again (not changed) / check
mode (changed reported, no byte and no .pyc touched) / --diff / absent round trip / backup /
bad input (failed, exact message, nothing changed) / ansible-doc renders.
"""
from __future__ import annotations

import difflib
import json
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sglang_wheels import BEFORE_SYMM_MEM, install_tree

from conftest import ROOT, VENV_BIN, ansible_env, run_local_module

pytestmark = pytest.mark.slow

MODULE = "blackwell.sglang.sglang_capmap"
DC = "srt/distributed/device_communicators"
ARU = f"{DC}/all_reduce_utils.py"
TSM = f"{DC}/torch_symm_mem.py"
MARK = "  # added by blackwell.sglang.sglang_capmap"
ADDED_LINES = {
    ARU: ["    12: {\n", "        2: 64 * MiB,  # 64 MB\n", "        4: 64 * MiB,  # 64 MB\n",
          "        6: 128 * MiB,  # 128 MB\n", "        8: 128 * MiB,  # 128 MB\n",
          f"    }},{MARK}\n"],
    TSM: [f"        12: [6, 8],{MARK}\n"],
}


def run_module(args: dict, *flags: str) -> tuple[int, dict]:
    return run_local_module(MODULE, args, *flags, interpreter=None)


def snapshot(pkg: Path) -> dict:
    """Every file under the package: bytes and mtime."""
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(pkg.rglob("*")) if p.is_file()}


def added_lines(before: bytes, after: bytes) -> list:
    diff = difflib.ndiff(before.decode().splitlines(True), after.decode().splitlines(True))
    changes = [line for line in diff if line[:2] in ("+ ", "- ")]
    assert all(line.startswith("+ ") for line in changes), changes
    return [line[2:] for line in changes]


@pytest.fixture
def tree(tmp_path) -> Path:
    pkg = install_tree("0.5.8", tmp_path)
    for rel in (ARU, TSM, "__init__.py"):
        py_compile.compile(str(pkg / rel), doraise=True)
    return pkg


def pycache(pkg: Path, rel: str) -> str:
    return str(pkg / DC / "__pycache__" / f"{Path(rel).stem}.{sys.implementation.cache_tag}.pyc")


def test_apply_then_apply_again(tree):
    before = {rel: (tree / rel).read_bytes() for rel in (ARU, TSM)}
    rc, result = run_module({"path": str(tree)})
    assert rc == 0, result
    assert result["changed"] is True
    assert result["sglang_version"] == "0.5.8"
    assert result["package"] == str(tree)
    assert [(t["file"], t["status"]) for t in result["targets"]] == [(ARU, "added"), (TSM, "added")]
    assert sorted(result["bytecode_removed"]) == [pycache(tree, ARU), pycache(tree, TSM)]
    for rel in (ARU, TSM):
        assert added_lines(before[rel], (tree / rel).read_bytes()) == ADDED_LINES[rel]
    # The package's other bytecode is left, so SGLang does not recompile everything.
    assert sorted(str(p) for p in tree.rglob("*.pyc")) == [
        str(tree / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc")]

    state = snapshot(tree)
    rc, result = run_module({"path": str(tree)})
    assert rc == 0, result
    assert result["changed"] is False
    assert [t["status"] for t in result["targets"]] == ["already present", "already present"]
    assert result["bytecode_removed"] == []
    assert snapshot(tree) == state


def test_check_mode_changes_nothing_and_diff_shows_the_edit(tree):
    state = snapshot(tree)
    rc, result = run_module({"path": str(tree)}, "--check", "--diff")
    assert rc == 0, result
    assert result["changed"] is True
    assert [t["status"] for t in result["targets"]] == ["added", "added"]
    assert sorted(result["bytecode_removed"]) == [pycache(tree, ARU), pycache(tree, TSM)]
    assert snapshot(tree) == state
    diffs = {d["before_header"]: d for d in result["diff"]}
    assert sorted(diffs) == [str(tree / ARU), str(tree / TSM)]
    # What check mode shows is what a real run writes.
    rc, real = run_module({"path": str(tree)})
    assert real["changed"] is True
    for rel in (ARU, TSM):
        assert diffs[str(tree / rel)]["before"] == state[str(tree / rel)][0].decode()
        assert diffs[str(tree / rel)]["after"] == (tree / rel).read_text()


def test_absent_restores_the_release_bytes(tmp_path):
    venv = tmp_path / "venv"
    tree = install_tree("0.5.18", venv / "lib" / "python3.11")
    state = {rel: (tree / rel).read_bytes() for rel in (ARU, TSM)}
    rc, result = run_module({"venv": str(venv), "values": {
        "TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM": []}})
    assert rc == 0, result
    assert result["changed"] is True
    assert result["package"] == str(tree)
    assert result["sglang_version"] == "0.5.18"
    assert added_lines(state[TSM], (tree / TSM).read_bytes()) == [f"        12: [],{MARK}\n"]
    rc, result = run_module({"path": str(tree), "state": "absent"})
    assert rc == 0, result
    assert result["changed"] is True
    assert [t["status"] for t in result["targets"]] == ["removed", "removed"]
    assert {rel: (tree / rel).read_bytes() for rel in (ARU, TSM)} == state
    rc, result = run_module({"venv": str(venv), "state": "absent"})
    assert rc == 0, result
    assert result["changed"] is False
    assert [t["status"] for t in result["targets"]] == ["not present", "not present"]


def test_backup_keeps_the_files_before(tree):
    state = {rel: (tree / rel).read_bytes() for rel in (ARU, TSM)}
    rc, result = run_module({"path": str(tree), "backup": True})
    assert rc == 0, result
    backups = result["backup_files"]
    assert len(backups) == 2
    for rel, backup in zip((ARU, TSM), backups):
        assert backup.startswith(str(tree / rel) + ".")
        assert Path(backup).read_bytes() == state[rel]


@pytest.mark.parametrize("args, message", [
    ({"path": "/nonexistent/sglang"},
     "no sglang package at /nonexistent/sglang: expected the directory holding srt/"),
    ({"venv": "/nonexistent"}, "no sglang package in the virtualenv /nonexistent: nothing "
     "matches /nonexistent/lib/python3.*/site-packages/sglang"),
    ({"path": "/tmp", "venv": "/tmp"}, "parameters are mutually exclusive: path|venv"),
    ({"capability": 12}, "one of the following is required: path, venv"),
    ({"path": "{tree}", "state": "gone"},
     "value of state must be one of: present, absent, got: gone"),
    ({"path": "{tree}", "source_capability": 8},
     "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES in {tree}/" + ARU + " has no entry for compute "
     "capability 8 to copy for 12 (keys: 9, 10); TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM "
     "in {tree}/" + TSM + " has no entry for compute capability 8 to copy for 12 (keys: 9, 10)"),
    ({"path": "{tree}", "values": {"NOT_A_TARGET": []}},
     "values names NOT_A_TARGET, which is not among the targets (TORCH_SYMM_MEM_ALL_REDUCE_"
     "MAX_SIZES, TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM)"),
    ({"path": "{tree}", "targets": [{"file": ARU, "name": "MiB"}]},
     "MiB in {tree}/" + ARU + " (line 1) is not a dict literal"),
], ids=["no-package", "no-venv", "path-and-venv", "neither", "bad-state", "no-source", "bad-values",
        "not-a-dict"])
def test_bad_input_fails_and_changes_nothing(tree, args, message):
    args = json.loads(json.dumps(args).replace("{tree}", str(tree)))
    state = snapshot(tree)
    rc, result = run_module(args)
    assert rc != 0
    assert result["failed"] is True
    assert result["msg"] == message.replace("{tree}", str(tree))
    assert snapshot(tree) == state


def test_release_without_torch_symm_mem_fails_clearly(tmp_path):
    pkg = install_tree(BEFORE_SYMM_MEM, tmp_path)
    state = snapshot(pkg)
    rc, result = run_module({"path": str(pkg)})
    assert rc != 0 and result["failed"] is True
    assert result["msg"] == (
        f"TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES not found in {pkg}/{ARU}: no assignment to "
        "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES at module level; "
        f"{TSM} not found in the sglang package at {pkg} (SGLang 0.5.4); SGLang 0.5.4 and "
        "older have no torch_symm_mem.py (the torch symmetric-memory all-reduce needs 0.5.5 "
        "or newer)")
    assert snapshot(pkg) == state


def test_unwritable_file_fails_before_any_write(tree):
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    state = snapshot(tree)
    subprocess.run(["chattr", "+i", str(tree / TSM)], check=True)
    try:
        rc, result = run_module({"path": str(tree)})
    finally:
        subprocess.run(["chattr", "-i", str(tree / TSM)], check=True)
    assert rc != 0 and result["failed"] is True
    assert result["msg"] == (f"cannot write {tree}/{TSM}: it is immutable or on a read-only "
                             "file system")
    assert snapshot(tree) == state


def test_ansible_doc_renders():
    env = ansible_env()
    proc = subprocess.run([str(VENV_BIN / "ansible-doc"), MODULE], env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == ""
    text = " ".join(proc.stdout.split())
    assert text.startswith(f"> MODULE {MODULE} (")
    assert "SGLang's torch symmetric-memory all-reduce keys its limits" in text
    for heading in ("OPTIONS", "ATTRIBUTES", "EXAMPLES", "RETURN VALUES"):
        assert heading in proc.stdout
    proc = subprocess.run([str(VENV_BIN / "ansible-doc"), "--json", MODULE], env=env,
                          capture_output=True, text=True, check=True)
    doc = json.loads(proc.stdout)[MODULE]
    assert doc["doc"]["short_description"] == (
        "Add a GPU compute capability to SGLang's torch symmetric-memory dicts")
    assert doc["doc"]["attributes"]["check_mode"]["support"] == "full"
    assert doc["doc"]["attributes"]["diff_mode"]["support"] == "full"
    assert sorted(doc["doc"]["options"]) == sorted([
        "path", "venv", "capability", "source_capability", "values", "targets", "state",
        "purge_bytecode", "backup"])
    assert sorted(doc["return"]) == ["backup_files", "bytecode_removed", "package",
                                     "sglang_version", "targets"]
    assert doc["examples"].count(f"{MODULE}:") == 3
    # The docs page's options table lists the same options with the same defaults.
    section = (ROOT / "docs" / "sglang_capmap.md").read_text()
    rows = [line.split("|")[1:4] for line in section.splitlines() if line.startswith("| `")]
    table = {cells[0].strip(" `"): cells[2].strip(" `") for cells in rows}
    assert sorted(table) == sorted(doc["doc"]["options"])
    for name, option in doc["doc"]["options"].items():
        default = option.get("default")
        if name == "targets":
            continue
        expected = "" if default is None else (
            default if isinstance(default, str) else json.dumps(default))
        assert table[name] == expected, name

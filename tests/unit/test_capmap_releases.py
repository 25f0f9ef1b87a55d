"""The capmap core against the real SGLang releases from PyPI (wheels cached under .cache/).

For every release from 0.5.5 to the newest checked: patching adds key 12 equal to key 10 in
both dicts (evaluated from the patched source, never imported), the edit is line insertions
only, a second pass writes nothing, and state=absent restores the original bytes. 0.5.4 fails
with a message that names the missing file and the version. Also: bytecode purge, check mode,
mode and owner, all-or-nothing validation and rollback, virtualenv discovery, and a user who
may not write the package.
"""
from __future__ import annotations

import os
import py_compile
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from capmap_checks import evaluate, insertions_only, line_insertions_only
from sglang_wheels import BEFORE_SYMM_MEM, RELEASES, install_tree, original

from ansible_collections.blackwell.sglang.plugins.module_utils import capmap
from conftest import ROOT

pytestmark = pytest.mark.slow

DC = "srt/distributed/device_communicators"
ARU = f"{DC}/all_reduce_utils.py"
TSM = f"{DC}/torch_symm_mem.py"
NAMES = {ARU: "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES",
         TSM: "TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM"}


def _read(pkg: Path) -> dict:
    return {rel: (pkg / rel).read_bytes() for rel in NAMES}


def _statuses(plan) -> list:
    return [(t["file"], t["name"], t["status"]) for t in plan.targets]


@pytest.mark.parametrize("version", RELEASES)
def test_release_is_patched_exactly_and_restored(version, tmp_path):
    pkg = install_tree(version, tmp_path)
    before = _read(pkg)
    assert before == {rel: original(version, rel) for rel in NAMES}

    plan, removed = capmap.run(path=str(pkg))
    assert plan.version == version
    assert _statuses(plan) == [(rel, name, "added") for rel, name in NAMES.items()]
    assert removed == []
    after = _read(pkg)
    for rel, name in NAMES.items():
        old, new = before[rel].decode(), after[rel].decode()
        assert insertions_only(old, new)
        assert line_insertions_only(old, new)
        compile(new, rel, "exec")
        patched, unpatched = evaluate(new, name), evaluate(old, name)
        assert 12 not in unpatched
        assert patched[12] == patched[10] == unpatched[10]
        assert {k: v for k, v in patched.items() if k != 12} == unpatched

    again = capmap.run(path=str(pkg))[0]
    assert not again.changed
    assert _statuses(again) == [(rel, name, "already present") for rel, name in NAMES.items()]
    assert _read(pkg) == after

    back = capmap.run(path=str(pkg), state="absent")[0]
    assert _statuses(back) == [(rel, name, "removed") for rel, name in NAMES.items()]
    assert _read(pkg) == before

    still = capmap.run(path=str(pkg), state="absent")[0]
    assert not still.changed
    assert _statuses(still) == [(rel, name, "not present") for rel, name in NAMES.items()]


@pytest.mark.parametrize("capability", [9, 10])
def test_capability_sglang_knows_is_left_alone(capability, tmp_path):
    """A role passes the node's own GPU major: on Hopper or SM100 there is nothing to add."""
    pkg = install_tree("0.5.8", tmp_path)
    before = _read(pkg)
    plan = capmap.run(path=str(pkg), capability=capability)[0]
    assert not plan.changed
    assert _statuses(plan) == [(rel, name, "present upstream") for rel, name in NAMES.items()]
    plan = capmap.run(path=str(pkg), capability=capability, state="absent")[0]
    assert _statuses(plan) == [(rel, name, "present upstream") for rel, name in NAMES.items()]
    assert _read(pkg) == before


def test_release_without_torch_symm_mem_fails_clearly(tmp_path):
    pkg = install_tree(BEFORE_SYMM_MEM, tmp_path)
    files = sorted(p for p in pkg.rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in files}
    with pytest.raises(capmap.CapmapError) as err:
        capmap.run(path=str(pkg))
    assert str(err.value) == (
        f"TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES not found in {pkg}/{ARU}: no assignment to "
        "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES at module level; "
        f"{TSM} not found in the sglang package at {pkg} (SGLang 0.5.4); SGLang 0.5.4 and "
        "older have no torch_symm_mem.py (the torch symmetric-memory all-reduce needs 0.5.5 "
        "or newer)")
    assert sorted(p for p in pkg.rglob("*") if p.is_file()) == files
    assert {p: p.read_bytes() for p in files} == before


def _compile_all(pkg: Path) -> dict:
    """Bytecode as interpreters leave it: several tags and opt levels, plus bystanders."""
    folder = pkg / DC
    (folder / "torch_symm_mem_helpers.py").write_text("HELPER = 1\n")
    made = {"stale": [], "kept": []}
    for rel in NAMES:
        stem = Path(rel).stem
        for tag in ("cpython-311", "cpython-312", "pypy310"):
            for opt in ("", ".opt-1", ".opt-2"):
                cfile = folder / "__pycache__" / f"{stem}.{tag}{opt}.pyc"
                py_compile.compile(str(pkg / rel), cfile=str(cfile), doraise=True)
                made["stale"].append(str(cfile))
    for source, cfile in (
        (folder / "torch_symm_mem_helpers.py", "torch_symm_mem_helpers.cpython-311.pyc"),
        (pkg / "__init__.py", "__init__.cpython-311.pyc"),
    ):
        target = source.parent / "__pycache__" / cfile
        py_compile.compile(str(source), cfile=str(target), doraise=True)
        made["kept"].append(str(target))
    return made


def _pycs(pkg: Path) -> dict:
    return {str(p): p.read_bytes() for p in pkg.rglob("*.pyc")}


def test_only_stale_bytecode_of_written_files_is_removed(tmp_path):
    pkg = install_tree("0.5.8", tmp_path)
    made = _compile_all(pkg)
    plan, removed = capmap.run(path=str(pkg))
    assert plan.changed
    assert sorted(removed) == sorted(made["stale"])
    assert sorted(_pycs(pkg)) == sorted(made["kept"])
    # Nothing written, nothing purged: the bytecode compiled from the patched text stays.
    py_compile.compile(str(pkg / TSM), doraise=True)
    again, removed = capmap.run(path=str(pkg))
    assert not again.changed and removed == []
    assert len(_pycs(pkg)) == len(made["kept"]) + 1


def test_purge_can_be_turned_off(tmp_path):
    pkg = install_tree("0.5.8", tmp_path)
    _compile_all(pkg)
    pycs = _pycs(pkg)
    removed = capmap.run(path=str(pkg), purge_bytecode=False)[1]
    assert removed == []
    assert _pycs(pkg) == pycs


def test_check_mode_reports_and_touches_nothing(tmp_path):
    pkg = install_tree("0.5.14", tmp_path)
    made = _compile_all(pkg)
    files = {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in pkg.rglob("*") if p.is_file()}
    plan, removed = capmap.run(path=str(pkg), check_mode=True)
    assert _statuses(plan) == [(rel, name, "added") for rel, name in NAMES.items()]
    assert sorted(removed) == sorted(made["stale"])
    assert [c.file for c in plan.changes] == list(NAMES)
    assert {str(p): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in pkg.rglob("*") if p.is_file()} == files
    # The same for taking an entry out.
    capmap.run(path=str(pkg), purge_bytecode=False)
    files = {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in pkg.rglob("*") if p.is_file()}
    plan, removed = capmap.run(path=str(pkg), state="absent", check_mode=True)
    assert _statuses(plan) == [(rel, name, "removed") for rel, name in NAMES.items()]
    assert sorted(removed) == sorted(made["stale"])
    assert {str(p): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in pkg.rglob("*") if p.is_file()} == files


def test_mode_and_owner_are_kept_and_no_temp_file_is_left(tmp_path):
    pkg = install_tree("0.5.23", tmp_path)
    for mode, rel in zip((0o640, 0o444), NAMES):
        os.chmod(pkg / rel, mode)
        os.chown(pkg / rel, 4321, 4322)
    listing = sorted(os.listdir(pkg / DC))
    capmap.run(path=str(pkg))
    for mode, rel in zip((0o640, 0o444), NAMES):
        info = os.stat(pkg / rel)
        assert (info.st_mode & 0o7777, info.st_uid, info.st_gid) == (mode, 4321, 4322)
    assert sorted(os.listdir(pkg / DC)) == listing


def test_one_bad_target_leaves_every_file_unchanged(tmp_path):
    pkg = install_tree("0.5.10", tmp_path)
    before = _read(pkg)
    targets = [{"file": rel, "name": name} for rel, name in NAMES.items()]
    targets.append({"file": f"{DC}/pynccl.py", "name": "NOT_THERE"})
    with pytest.raises(capmap.CapmapError) as err:
        capmap.run(path=str(pkg), targets=targets)
    assert str(err.value) == (f"{DC}/pynccl.py not found in the sglang package at {pkg} "
                              "(SGLang 0.5.10)")
    assert _read(pkg) == before
    # The source capability missing from one dict stops both files too.
    with pytest.raises(capmap.CapmapError) as err:
        capmap.run(path=str(pkg), source_capability=11)
    assert str(err.value) == (
        f"TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES in {pkg}/{ARU} has no entry for compute "
        "capability 11 to copy for 12 (keys: 9, 10); TorchSymmMemCommunicator."
        f"_WORLD_SIZES_MULTIMEM in {pkg}/{TSM} has no entry for compute capability 11 to copy "
        "for 12 (keys: 9, 10)")
    assert _read(pkg) == before


def test_values_override_one_target(tmp_path):
    pkg = install_tree("0.5.18", tmp_path)
    plan = capmap.run(path=str(pkg), values={NAMES[TSM]: []})[0]
    assert _statuses(plan) == [(rel, name, "added") for rel, name in NAMES.items()]
    assert evaluate((pkg / TSM).read_text(), NAMES[TSM])[12] == []
    sizes = evaluate((pkg / ARU).read_text(), NAMES[ARU])
    assert sizes[12] == sizes[10]
    # Dropping the override rewrites only the module's own entry.
    plan = capmap.run(path=str(pkg))[0]
    assert _statuses(plan) == [(ARU, NAMES[ARU], "already present"),
                               (TSM, NAMES[TSM], "updated")]
    assert evaluate((pkg / TSM).read_text(), NAMES[TSM])[12] == [4, 6, 8]


def test_rollback_when_a_write_fails_midway(tmp_path):
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    pkg = install_tree("0.5.13", tmp_path)
    before = _read(pkg)
    plan = capmap.plan(str(pkg))
    # Planned first, then the second file turns immutable: its rename fails after the first
    # file was written, and the first must be put back.
    subprocess.run(["chattr", "+i", str(pkg / TSM)], check=True)
    try:
        with pytest.raises(capmap.CapmapError) as err:
            capmap.apply(plan)
        assert str(err.value).startswith(f"cannot write {pkg}/{TSM}: ")
        assert str(err.value).endswith("(files written before it were restored)")
        assert _read(pkg) == before
        # Validation catches the same file before anything is written.
        with pytest.raises(capmap.CapmapError) as err:
            capmap.plan(str(pkg))
        assert str(err.value) == (f"cannot write {pkg}/{TSM}: it is immutable or on a "
                                  "read-only file system")
    finally:
        subprocess.run(["chattr", "-i", str(pkg / TSM)], check=True)


def test_venv_root_is_searched_for_the_package(tmp_path):
    site = tmp_path / "venv" / "lib" / "python3.11"
    pkg = install_tree("0.5.9", site)
    plan = capmap.run(venv=str(tmp_path / "venv"))[0]
    assert plan.package == str(pkg)
    assert plan.version == "0.5.9"
    with pytest.raises(capmap.CapmapError) as err:
        capmap.find_package(venv=str(tmp_path))
    assert str(err.value) == (f"no sglang package in the virtualenv {tmp_path}: nothing matches "
                              f"{tmp_path}/lib/python3.*/site-packages/sglang")
    with pytest.raises(capmap.CapmapError) as err:
        capmap.find_package(path=str(tmp_path))
    assert str(err.value) == f"no sglang package at {tmp_path}: expected the directory holding srt/"


def test_version_is_unknown_without_metadata(tmp_path):
    pkg = install_tree("0.5.9", tmp_path)
    for meta in pkg.parent.glob("sglang-*.dist-info"):
        shutil.rmtree(meta)
    assert capmap.read_version(str(pkg)) is None
    (pkg / TSM).unlink()
    with pytest.raises(capmap.CapmapError) as err:
        capmap.run(path=str(pkg))
    assert str(err.value).endswith(
        f"{TSM} not found in the sglang package at {pkg} (SGLang version unknown); SGLang "
        "0.5.4 and older have no torch_symm_mem.py (the torch symmetric-memory all-reduce "
        "needs 0.5.5 or newer)")


def test_user_who_may_not_write_gets_told_before_anything_changes():
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        pytest.skip("needs root and setpriv to run as another user")
    # A world-readable tree (pytest's tmp_path is private to root), owned by root.
    top = Path(tempfile.mkdtemp(prefix="capmap-", dir="/tmp"))
    try:
        os.chmod(top, 0o755)
        pkg = install_tree("0.5.8", top)
        for folder in [top, *top.rglob("*")]:
            if folder.is_dir():
                os.chmod(folder, 0o755)
        core = ROOT / "plugins" / "module_utils" / "capmap.py"
        shutil.copy(core, top / "capmap.py")
        os.chmod(top / "capmap.py", 0o644)
        before = _read(pkg)
        script = ("import capmap, sys\n"
                  "try:\n    capmap.run(path=sys.argv[1])\n"
                  "except capmap.CapmapError as exc:\n    print(exc)\n")
        # Debian's interpreter, not sys.executable: pyenv's live under /root, where the other
        # user cannot load them from (3.12's libpython), and the core is plain Python anyway.
        proc = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             "/usr/bin/python3", "-c", script, str(pkg)],
            cwd=top, env={"PYTHONPATH": str(top), "PATH": os.environ["PATH"]},
            capture_output=True, text=True, check=True)
        folder = pkg / DC
        assert proc.stdout.strip() == (
            f"cannot write {pkg}/{ARU}: permission denied on its directory {folder}; "
            f"cannot write {pkg}/{TSM}: permission denied on its directory {folder}")
        assert _read(pkg) == before
    finally:
        shutil.rmtree(top)


OTHER_PYTHONS = ["/usr/bin/python3", "/root/.pyenv/versions/3.12.1/bin/python3.12",
                 "/root/.pyenv/versions/3.13.0/bin/python3.13"]


@pytest.mark.parametrize("python", OTHER_PYTHONS)
def test_core_writes_the_same_bytes_under_other_interpreters(python, tmp_path):
    """Managed nodes run their own Python: AST positions must lead to the same edit there."""
    if not os.access(python, os.X_OK):
        pytest.skip(f"{python} is not installed")
    pkg = install_tree("0.5.23", tmp_path / "here")
    capmap.run(path=str(pkg))
    there = install_tree("0.5.23", tmp_path / "there")
    before = _read(there)
    script = ("import sys\nsys.path.insert(0, sys.argv[1])\nimport capmap\n"
              "plan = capmap.run(path=sys.argv[2], state=sys.argv[3])[0]\n"
              "print([t['status'] for t in plan.targets])\n")
    core = str(ROOT / "plugins" / "module_utils")
    proc = subprocess.run([python, "-c", script, core, str(there), "present"],
                          capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "['added', 'added']"
    assert _read(there) == _read(pkg)
    proc = subprocess.run([python, "-c", script, core, str(there), "absent"],
                          capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "['removed', 'removed']"
    assert _read(there) == before

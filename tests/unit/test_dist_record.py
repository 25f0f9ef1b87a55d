"""A release is installed only when its files are: sglang_venv_info's check of a distribution
against its RECORD (plugins/module_utils/dist_record.py), on the real SGLang 0.5.8 wheel
installed whole into a venv's site-packages.

A release as installed, and the same release patched by the SM120 patch (its own marked entries
are not a difference, and the bytecode it purges is not missing), is complete; deleted files are
missing and edited ones altered, named in RECORD order, counted in full; an edit of a patched file
beyond the patch is still caught; a dist-info without a RECORD is incomplete as a whole; a
replaced uv binary in uv's venv (its RECORD lists ../../../bin/uv) is altered.
"""
from __future__ import annotations

import base64
import hashlib
import py_compile
import shutil
import time
from pathlib import Path

import pytest

import sglang_releases
from ansible_collections.blackwell.sglang.plugins.module_utils import capmap, dist_record
from ansible_collections.blackwell.sglang.plugins.modules.sglang_venv_info import venv_info

pytestmark = pytest.mark.slow

RELEASE = "0.5.8"
DC = "sglang/srt/distributed/device_communicators"
PATCHED = (f"{DC}/all_reduce_utils.py", f"{DC}/torch_symm_mem.py")
LANG = sorted(["sglang/lang/api.py", "sglang/lang/chat_template.py", "sglang/lang/choices.py",
               "sglang/lang/interpreter.py", "sglang/lang/ir.py", "sglang/lang/tracer.py",
               "sglang/lang/backend/anthropic.py", "sglang/lang/backend/base_backend.py",
               "sglang/lang/backend/litellm.py", "sglang/lang/backend/openai.py",
               "sglang/lang/backend/runtime_endpoint.py", "sglang/lang/backend/vertexai.py"])


def _venv(root: Path) -> Path:
    venv = root / "venv"
    (venv / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return venv


@pytest.fixture(name="venv", scope="module")
def fixture_venv(tmp_path_factory):
    venv = _venv(tmp_path_factory.mktemp("installed"))
    sglang_releases.install(RELEASE, venv / "lib" / "python3.11" / "site-packages")
    return venv


@pytest.fixture(name="copy")
def fixture_copy(venv, tmp_path):
    """A venv of its own, as installed, for a test that changes it."""
    dest = tmp_path / "venv"
    shutil.copytree(venv, dest)
    return dest


def _record(venv: Path) -> dict:
    got = venv_info(str(venv), record=True)
    assert got["sglang_version"] == RELEASE
    return got["sglang_record"]


def _entry(site: Path, rel: str) -> str:
    data = (site / rel).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}\n"


def test_the_release_as_installed_is_complete_and_every_hashed_entry_is_checked(venv):
    site = venv / "lib" / "python3.11" / "site-packages"
    lines = (site / f"sglang-{RELEASE}.dist-info" / "RECORD").read_text().splitlines()
    hashed = [line for line in lines if line.split(",")[1]]
    assert len(hashed) == len(lines) - 1  # RECORD itself has no digest
    assert _record(venv) == {"checked": len(hashed), "missing": 0, "altered": 0, "missing_paths": [],
                             "altered_paths": [], "error": ""}
    # Only a read that asks checks.
    assert "sglang_record" not in venv_info(str(venv))


def test_the_check_costs_little_enough_for_every_read(venv):
    """Every file is hashed on every read: SGLang 0.5.8 is 1,710 files and 22 MB."""
    site = venv / "lib" / "python3.11" / "site-packages"
    start = time.process_time()
    result = dist_record.verify(str(site), str(site / f"sglang-{RELEASE}.dist-info"), capmap.record_derived())
    assert result["checked"] > 1700 and result["missing"] == result["altered"] == 0
    assert time.process_time() - start < 2.0


def test_deleted_files_are_missing_and_edited_ones_altered(copy):
    site = copy / "lib" / "python3.11" / "site-packages"
    shutil.rmtree(site / "sglang" / "lang")
    with open(site / "sglang" / "srt" / "server_args.py", "ab") as handle:
        handle.write(b"\n")
    (site / "sglang" / "version.py").write_bytes((site / "sglang" / "version.py").read_bytes()[:-1] + b" ")
    got = _record(copy)
    assert got["missing"] == len(LANG)
    # The first five, in RECORD order; the count is whole.
    assert len(got["missing_paths"]) == dist_record.FIRST and set(got["missing_paths"]) <= set(LANG)
    assert (got["altered"], sorted(got["altered_paths"])) == (2, ["sglang/srt/server_args.py", "sglang/version.py"])


def test_the_patched_release_is_complete_and_an_edit_beyond_the_patch_is_not(copy):
    site = copy / "lib" / "python3.11" / "site-packages"
    dist_info = site / f"sglang-{RELEASE}.dist-info"
    # Bytecode an installer compiled and recorded with its digest (as pip does): the patch purges
    # the copies of the files it edits, and a missing copy of another file is not counted either.
    for rel in (*PATCHED, "sglang/utils.py", "sglang/global_config.py"):
        pyc = Path(py_compile.compile(str(site / rel), doraise=True))
        with open(dist_info / "RECORD", "a") as record:
            record.write(_entry(site, str(pyc.relative_to(site))))
    plan, purged = capmap.run(path=str(site / "sglang"))
    assert [t["status"] for t in plan.targets] == ["added", "added"] and len(purged) == 2
    next((site / "sglang" / "__pycache__").glob("utils.*.pyc")).unlink()
    assert _record(copy)["missing"] == _record(copy)["altered"] == 0
    # The same files without the patch's own record of what it changed: both differ.
    plain = dist_record.verify(str(site), str(dist_info))
    assert sorted(plain["altered_paths"]) == sorted(PATCHED)
    # A byte beside the patch's entries is caught, and so is a changed compiled copy.
    aru = site / PATCHED[0]
    aru.write_text(aru.read_text().replace("}", "}  # edited", 1))
    pyc = next((site / "sglang" / "__pycache__").glob("global_config.*.pyc"))
    pyc.write_bytes(pyc.read_bytes() + b"\0")
    got = _record(copy)
    assert (got["missing"], got["altered"]) == (0, 2)
    assert sorted(got["altered_paths"]) == sorted([PATCHED[0], str(pyc.relative_to(site))])
    # Taken back with state absent, the files are as installed again.
    aru.write_text(aru.read_text().replace("}  # edited", "}", 1))
    pyc.unlink()
    capmap.run(path=str(site / "sglang"), state="absent")
    assert dist_record.verify(str(site), str(dist_info))["altered"] == 0


def test_a_dist_info_without_its_record_is_incomplete_as_a_whole(copy):
    site = copy / "lib" / "python3.11" / "site-packages"
    (site / f"sglang-{RELEASE}.dist-info" / "RECORD").unlink()
    got = _record(copy)
    assert got["error"].startswith(f"sglang-{RELEASE}.dist-info has no readable RECORD")
    assert got["checked"] == 0


def test_a_replaced_uv_binary_is_altered(tmp_path, venv):
    uv_venv = _venv(tmp_path / "uv")
    site = uv_venv / "lib" / "python3.11" / "site-packages"
    (uv_venv / "bin").mkdir()
    (uv_venv / "bin" / "uv").write_bytes(b"\x7fELF uv 0.13.9")
    (site / "uv").mkdir()
    (site / "uv" / "__init__.py").write_text("")
    info = site / "uv-0.13.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: uv\nVersion: 0.13.9\n")
    listed = ("../../../bin/uv", "uv/__init__.py", "uv-0.13.9.dist-info/METADATA")
    (info / "RECORD").write_text("".join(_entry(site, rel) for rel in listed) + "uv-0.13.9.dist-info/RECORD,,\n")
    clean = venv_info(str(venv), uv_venv=str(uv_venv), record=True)
    assert (clean["uv_version"], clean["uv_record"]["checked"], clean["uv_record"]["altered"]) == ("0.13.9", 3, 0)
    shutil.copy("/bin/true", uv_venv / "bin" / "uv")
    got = venv_info(str(venv), uv_venv=str(uv_venv), record=True)["uv_record"]
    assert (got["altered"], got["altered_paths"], got["missing"]) == (1, ["../../../bin/uv"], 0)
    (uv_venv / "bin" / "uv").unlink()
    got = venv_info(str(venv), uv_venv=str(uv_venv), record=True)["uv_record"]
    assert (got["missing"], got["missing_paths"]) == (1, ["../../../bin/uv"])

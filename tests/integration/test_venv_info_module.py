"""blackwell.sglang.sglang_venv_info run by Ansible against localhost, on venv layouts built
from real SGLang wheels (0.5.18 with the communicator, 0.5.4 without) and the uv wheel.

Each case asserts the exact result; check mode returns the same and changes nothing.
"""
from __future__ import annotations

import grp
import hashlib
import json
import os
import pwd
import subprocess
import sys
import zipfile
from pathlib import Path

from sglang_wheels import BEFORE_SYMM_MEM, install_tree, wheel

from conftest import VENV_BIN, ansible_env, run_local_module

MODULE = "blackwell.sglang.sglang_venv_info"
PY = "python3.11"
TORCH_VERSION_PY = "__version__ = '2.9.1+cu130'\ncuda: Optional[str] = '13.0'\n"


def run_module(args: dict, *flags: str) -> tuple[int, dict]:
    return run_local_module(MODULE, args, *flags)


def venv_with(tmp_path: Path, version: str | None, torch: bool = False) -> Path:
    venv = tmp_path / "venv"
    lib = venv / "lib" / PY
    lib.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    if version:
        install_tree(version, lib)
    else:
        (lib / "site-packages").mkdir()
    if torch:
        (lib / "site-packages" / "torch").mkdir()
        (lib / "site-packages" / "torch" / "version.py").write_text(TORCH_VERSION_PY)
    return venv


def test_a_venv_with_one_sglang_and_torch(tmp_path):
    venv = venv_with(tmp_path, "0.5.18", torch=True)
    site = venv / "lib" / PY / "site-packages"
    rc, res = run_module({"venv": str(venv), "python": sys.executable})
    assert rc == 0, res
    assert res["changed"] is False
    assert res["venv"] == str(venv)
    assert res["venv_exists"] is True
    assert res["site_packages"] == str(site)
    assert res["sglang_dist_infos"] == [str(site / "sglang-0.5.18.dist-info")]
    assert res["sglang_version"] == "0.5.18"
    assert res["sglang_package"] == str(site / "sglang")
    assert res["torch_symm_mem"] is True
    assert res["torch_version_source"] == TORCH_VERSION_PY
    assert res["python"] == {"path": sys.executable, "exists": True, "executable": True}
    assert "uv_version" not in res
    rc, checked = run_module({"venv": str(venv), "python": sys.executable}, "--check")
    assert rc == 0
    assert {k: checked[k] for k in res if not k.startswith("_")} == \
        {k: res[k] for k in res if not k.startswith("_")}


def test_a_release_before_the_communicator(tmp_path):
    venv = venv_with(tmp_path, BEFORE_SYMM_MEM)
    rc, res = run_module({"venv": str(venv)})
    assert rc == 0, res
    assert res["sglang_version"] == BEFORE_SYMM_MEM
    assert res["sglang_package"].endswith("/site-packages/sglang")
    assert res["torch_symm_mem"] is False
    assert res["torch_version_source"] == ""


def test_two_sglang_distributions_give_no_version(tmp_path):
    venv = venv_with(tmp_path, "0.5.18")
    site = venv / "lib" / PY / "site-packages"
    (site / "sglang-0.5.8.dist-info").mkdir()
    (site / "sglang-0.5.8.dist-info" / "METADATA").write_text("Name: sglang\nVersion: 0.5.8\n")
    rc, res = run_module({"venv": str(venv)})
    assert rc == 0, res
    assert res["sglang_dist_infos"] == [str(site / "sglang-0.5.18.dist-info"),
                                        str(site / "sglang-0.5.8.dist-info")]
    assert res["sglang_version"] == ""


def test_missing_venv_interpreter_and_uv(tmp_path):
    not_exec = tmp_path / "python3"
    not_exec.write_text("")
    os.chmod(not_exec, 0o644)
    rc, res = run_module({"venv": str(tmp_path / "absent"), "python": str(not_exec),
                          "uv_venv": str(tmp_path / "uv")})
    assert rc == 0, res
    assert res["venv_exists"] is False
    assert res["site_packages"] == ""
    assert res["sglang_dist_infos"] == []
    assert res["sglang_version"] == ""
    assert res["sglang_package"] == ""
    assert res["torch_symm_mem"] is False
    assert res["python"] == {"path": str(not_exec), "exists": True, "executable": False}
    assert res["uv_venv_exists"] is False
    assert res["uv_version"] == ""


def test_uv_release_from_its_metadata(tmp_path):
    uv = tmp_path / "uv"
    dist = uv / "lib" / PY / "site-packages" / "uv-0.13.9.dist-info"
    dist.mkdir(parents=True)
    (uv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (dist / "METADATA").write_text("Metadata-Version: 2.4\nName: uv\nVersion: 0.13.9\n")
    rc, res = run_module({"venv": str(tmp_path / "venv"), "uv_venv": str(uv)})
    assert rc == 0, res
    assert res["uv_venv_exists"] is True
    assert res["uv_version"] == "0.13.9"


def test_paths_report_type_mode_and_owner(tmp_path):
    os.chmod(tmp_path, 0o750)
    missing = tmp_path / "missing"
    rc, res = run_module({"venv": str(tmp_path / "venv"), "paths": [str(tmp_path), str(missing)]})
    assert rc == 0, res
    me = pwd.getpwuid(os.getuid()).pw_name
    group = grp.getgrgid(os.getgid()).gr_name
    assert res["paths"] == {
        str(tmp_path): {"exists": True, "isdir": True, "islink": False, "mode": "0750", "owner": me, "group": group},
        str(missing): {"exists": False},
    }


def test_a_regular_file_has_the_checksum_copy_and_template_compare(tmp_path):
    """SHA-1 of the content, as ansible.builtin.copy computes it: a caller that finds it equal
    to what it would write (with the same mode and owner) can skip the write."""
    written = tmp_path / "requirements.txt"
    written.write_text("sglang==0.5.23\n")
    os.chmod(written, 0o644)
    rc, res = run_module({"venv": str(tmp_path / "venv"), "paths": [str(written)]})
    assert rc == 0, res
    assert res["paths"][str(written)]["checksum"] == hashlib.sha1(b"sglang==0.5.23\n").hexdigest()
    assert res["paths"][str(written)]["mode"] == "0644" and res["paths"][str(written)]["isdir"] is False
    written.write_text("sglang==0.5.24\n")
    rc, res = run_module({"venv": str(tmp_path / "venv"), "paths": [str(written), str(tmp_path)]})
    assert res["paths"][str(written)]["checksum"] == hashlib.sha1(b"sglang==0.5.24\n").hexdigest()
    # Directories and links have none.
    assert "checksum" not in res["paths"][str(tmp_path)]


def test_releases_newest_first_and_the_link_with_its_target(tmp_path):
    """The release layout: subdirectories newest first (a file and a link among them are not
    releases), the one a process runs from and the one the rollback record names marked, and the
    active-release link reported as a link, with its target as written."""
    releases = tmp_path / "releases"
    for name, mtime in (("0.5.8", 1000), ("0.5.23", 3000), ("0.5.18", 2000)):
        (releases / name / "bin").mkdir(parents=True)
    # 0.5.23 is a venv whose interpreter runs while the module reads.
    (releases / "0.5.23" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (releases / "0.5.23" / "bin" / "python").symlink_to(sys.executable)
    record = tmp_path / "rollback"
    record.mkdir()
    (record / "record.json").write_text(json.dumps({"format": 1, "release": str(releases / "0.5.8"), "files": []}))
    for name, mtime in (("0.5.8", 1000), ("0.5.23", 3000), ("0.5.18", 2000)):
        os.utime(releases / name, (mtime, mtime))
    (releases / "notes.txt").write_text("not a release\n")
    (releases / "latest").symlink_to(releases / "0.5.23")
    current = tmp_path / "current"
    current.symlink_to(releases / "0.5.18")
    server = subprocess.Popen([str(releases / "0.5.23" / "bin" / "python"), "-c", "import time; time.sleep(60)"])
    try:
        rc, res = run_module({"venv": str(releases / "0.5.18"), "paths": [str(current)], "releases": str(releases),
                              "rollback_record": str(record)})
    finally:
        server.kill()
        server.wait()
    assert rc == 0, res
    assert res["releases"] == [{"path": str(releases / name), "name": name, "mtime": float(mtime),
                                "running": name == "0.5.23", "rollback_target": name == "0.5.8"}
                               for name, mtime in (("0.5.23", 3000), ("0.5.18", 2000), ("0.5.8", 1000))]
    me = pwd.getpwuid(os.getuid()).pw_name
    group = grp.getgrgid(os.getgid()).gr_name
    assert res["paths"] == {str(current): {"exists": True, "isdir": False, "islink": True, "mode": "0777",
                                           "owner": me, "group": group, "link": str(releases / "0.5.18")}}
    rc, res = run_module({"venv": str(releases / "0.5.18"), "releases": str(tmp_path / "none")})
    assert (rc, res["releases"]) == (0, [])


def test_the_account_and_group_as_the_databases_hold_them(tmp_path):
    """The service account's primary group, home and shell, and its group, from the password
    and group databases: what sglang_install compares before it would run the user and group
    modules. A name neither database has is reported as missing, not as an error."""
    me = pwd.getpwuid(os.getuid())
    mine = grp.getgrgid(me.pw_gid)
    rc, res = run_module({"venv": str(tmp_path / "venv"), "user": me.pw_name, "group": mine.gr_name})
    assert rc == 0, res
    assert res["user"] == {"name": me.pw_name, "exists": True, "uid": me.pw_uid, "group": mine.gr_name,
                           "home": me.pw_dir, "shell": me.pw_shell}
    assert res["group"] == {"name": mine.gr_name, "exists": True, "gid": mine.gr_gid}
    rc, res = run_module({"venv": str(tmp_path / "venv"), "user": "blackwell-no-such-user",
                          "group": "blackwell-no-such-group"}, "--check")
    assert rc == 0, res
    assert res["user"] == {"name": "blackwell-no-such-user", "exists": False}
    assert res["group"] == {"name": "blackwell-no-such-group", "exists": False}
    rc, res = run_module({"venv": str(tmp_path / "venv")})
    assert "user" not in res and "group" not in res


def test_venv_is_required():
    rc, res = run_module({"python": "/usr/bin/python3"})
    assert rc != 0
    assert res["msg"] == "missing required arguments: venv"


def test_contents_return_a_record_and_null_for_a_missing_one(tmp_path):
    record = tmp_path / "tp-size"
    record.write_text("8\n")
    missing = tmp_path / "nothing"
    rc, res = run_module({"venv": str(tmp_path / "venv"), "contents": [str(record), str(missing)]})
    assert rc == 0, res
    assert res["contents"] == {str(record): "8\n", str(missing): None}


def test_server_flags_are_the_releases_own_as_sglang_server_flags_reads_them(tmp_path):
    venv = venv_with(tmp_path, None)
    # The whole release: its flags are read from server_args.py and the files it imports.
    with zipfile.ZipFile(wheel("0.5.18")) as archive:
        archive.extractall(venv / "lib" / PY / "site-packages")
    rc, res = run_module({"venv": str(venv), "server_flags": True})
    assert rc == 0, res
    proc = subprocess.run(
        [str(VENV_BIN / "ansible"), "localhost", "-c", "local", "-m", "blackwell.sglang.sglang_server_flags",
         "-a", json.dumps({"venv": str(venv)})],
        env=ansible_env(ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
                        ANSIBLE_PYTHON_INTERPRETER=sys.executable),
        capture_output=True, text=True, check=True)
    flags = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert res["server_flags_error"] is None
    assert res["server_flags"]["version"] == "0.5.18"
    assert "--enable-torch-symm-mem" in res["server_flags"]["flags"]
    for key in ("version", "flags", "deprecated", "fusion_arguments", "fusion_sm_restricted", "pcie_ipc_allreduce",
                "ready_endpoint", "package_dir"):
        assert res["server_flags"][key] == flags[key], key
    # Not asked: not read.
    rc, plain = run_module({"venv": str(venv)})
    assert "server_flags" not in plain


def test_server_flags_of_a_venv_without_sglang_say_why(tmp_path):
    venv = venv_with(tmp_path, None)
    rc, res = run_module({"venv": str(venv), "server_flags": True})
    assert rc == 0, res
    assert (res["server_flags"], res["server_flags_error"]) == (None, "no sglang package in the venv")


def test_record_reports_the_files_missing_and_altered_since_the_install(tmp_path):
    """The whole 0.5.18 wheel installed, patched by the SM120 patch (not a difference), then a
    directory deleted and a file edited: both reported by the module as Ansible runs it."""
    venv = tmp_path / "venv"
    site = venv / "lib" / PY / "site-packages"
    site.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    with zipfile.ZipFile(wheel("0.5.18")) as archive:
        archive.extractall(site)
    hashed = [line for line in (site / "sglang-0.5.18.dist-info" / "RECORD").read_text().splitlines()
              if line.split(",")[1]]
    rc, patched = run_local_module("blackwell.sglang.sglang_capmap", {"path": str(site / "sglang"), "capability": 12})
    assert (rc, patched["changed"]) == (0, True), patched
    rc, res = run_module({"venv": str(venv), "record": True})
    assert rc == 0, res
    assert res["sglang_record"] == {"checked": len(hashed), "missing": 0, "altered": 0, "missing_paths": [],
                                    "altered_paths": [], "error": ""}
    lang = sorted(str(p.relative_to(site)) for p in (site / "sglang" / "lang").rglob("*") if p.is_file())
    for path in (site / "sglang" / "lang").rglob("*"):
        if path.is_file():
            path.unlink()
    (site / "sglang" / "utils.py").write_text("import os\n")
    rc, res = run_module({"venv": str(venv), "record": True}, "--check")
    assert rc == 0, res
    got = res["sglang_record"]
    assert (got["missing"], got["altered"], got["altered_paths"]) == (len(lang), 1, ["sglang/utils.py"])
    assert set(got["missing_paths"]) <= set(lang) and len(got["missing_paths"]) == 5


def test_other_distributions_are_read_and_checked_against_their_record(tmp_path):
    """Any distribution of the venv by name (the router role reads sglang_router this way): its
    version, its RECORD check and the one clause a role reports; one the venv lacks is empty."""
    venv = venv_with(tmp_path, "0.5.18")
    args = {"venv": str(venv), "record": True, "distributions": ["sglang", "sglang_router"]}
    rc, res = run_module(args)
    assert rc == 0, res
    assert res["distributions"]["sglang_router"] == {"version": "", "record": None, "off": ""}
    found = res["distributions"]["sglang"]
    assert (found["version"], found["off"], found["record"]["altered"]) == ("0.5.18", "", 0), found
    assert found["record"]["checked"] > 0
    (venv / "lib" / PY / "site-packages" / "sglang" / "__init__.py").write_text("import os\n")
    rc, res = run_module(args, "--check")
    assert rc == 0, res
    assert res["distributions"]["sglang"]["off"] == (
        f"sglang 0.5.18 in {venv} differs from its RECORD: 1 file altered (sglang/__init__.py)")


def test_versions_are_read_from_metadata_alone_with_names_as_installers_write_them(tmp_path):
    """The NCCL torch loads, by its project name: its dist-info's METADATA (no RECORD check, the
    library is hundreds of MB); a distribution the venv lacks is empty."""
    venv = venv_with(tmp_path, "0.5.18")
    info = venv / "lib" / PY / "site-packages" / "nvidia_nccl_cu13-2.31.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-nccl-cu13\nVersion: 2.31.2\n")
    (info / "RECORD").write_text("nvidia/nccl/lib/libnccl.so.2,sha256=AAAA,1\n")
    rc, res = run_module({"venv": str(venv), "versions": ["nvidia-nccl-cu13", "nvidia.nccl-cu12"], "record": True})
    assert rc == 0, res
    assert res["versions"] == {"nvidia-nccl-cu13": "2.31.2", "nvidia.nccl-cu12": ""}
    assert "distributions" not in res

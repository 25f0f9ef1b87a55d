"""sglang_install's plan (plugins/plugin_utils/install_plan.py) over reads of a node.

The reads are blackwell.sglang.sglang_venv_info's, taken by the module's own function on venvs
laid out under a temporary root as an install leaves them (pyvenv.cfg, the dist-info METADATA of
SGLang and uv, torch's version.py), with the role's own table (vars/main.yml) rendered for that
root. Each case is one node state: converged (both installers), fresh, every single drift of a
row of the table, the account, the release, torch, old releases; then the problems that stop the
host and the commands the plan hands to the tasks.
"""
from __future__ import annotations

import base64
import copy
import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.sglang.plugins.modules.sglang_venv_info import venv_info
from ansible_collections.blackwell.sglang.plugins.plugin_utils.install_plan import PENDING, nccl_overrides, plan, problems
from ansible_collections.blackwell.sglang.plugins.plugin_utils import settings as settings_table
import role_vars
from conftest import ROOT

ROLE = ROOT / "roles" / "sglang_install"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
VERSION = DEFAULTS["sglang_install_version"]
UV = DEFAULTS["sglang_install_uv_version"]
CONTENTS = {"requirements.txt.j2": f"sglang=={VERSION}\n", "constraints.txt.j2": "# none\n",
            "sources.toml.j2": "[pip]\n", "sources.conf.j2": "[global]\n", "uv-sources.conf.j2": "[global]\n",
            "overrides.txt.j2": "nvidia-nccl-cu13>=2.31.2\n"}
TORCH_13 = "__version__ = '2.9.1+cu130'\ncuda: Optional[str] = '13.0'\n"
TORCH_CPU = "__version__ = '2.9.1+cpu'\ncuda: Optional[str] = None\n"
ACCOUNT = {"name": "sglang", "exists": True, "group": "sglang", "home": "", "shell": "/usr/sbin/nologin"}


def settings(root: Path, capability_majors=(), **changes) -> dict:
    """The role's defaults with every path under root, and changes, on a node whose GPUs have
    CAPABILITY_MAJORS."""
    values = dict(DEFAULTS, sglang_install_user_home=f"{root}/var/lib/sglang",
                  sglang_install_releases_dir=f"{root}/opt/sglang/releases",
                  sglang_install_venv=f"{root}/opt/sglang/current", sglang_install_uv_venv=f"{root}/opt/sglang/uv")
    values.update({f"sglang_install_{key}": value for key, value in changes.items()})
    values["ansible_facts"] = {"gpu": {"capability_majors": list(capability_majors)}}
    values["__sglang_install_overrides"] = role_vars.render("sglang_install", "__sglang_install_overrides", values)
    values["__sglang_install_release_dir"] = role_vars.render("sglang_install", "__sglang_install_release_dir", values)
    values["__sglang_install_uv_known_sha256"] = VARS["__sglang_install_uv_known_sha256"]
    for name in ("__sglang_install_uv_bin", "__sglang_install_constraints_file", "__sglang_install_requirements_file",
                 "__sglang_install_sources_file", "__sglang_install_uv_sources_file", "__sglang_install_overrides_file"):
        values[name] = role_vars.render("sglang_install", name, values)
    return values


def inputs(values: dict) -> dict:
    """vars/main.yml's __sglang_install_inputs, templated by Ansible for these settings."""
    return role_vars.render("sglang_install", "__sglang_install_inputs", values)


def table(values: dict) -> list[dict]:
    """The role's own table (vars/main.yml's __sglang_install_files), as Ansible renders it for
    these settings."""
    return role_vars.render("sglang_install", "__sglang_install_files", values)


def _site(venv: str) -> Path:
    site = Path(venv) / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    (Path(venv) / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return site


def _dist(site: Path, name: str, version: str, files: tuple = ()) -> None:
    """A dist-info with its METADATA and a RECORD of it and `files` (relative to site), each
    with its digest as an installer writes it."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = []
    for rel in (*files, f"{info.name}/METADATA"):
        data = (site / rel).read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{rel},sha256={digest},{len(data)}\n")
    (info / "RECORD").write_text("".join(lines) + f"{info.name}/RECORD,,\n")


def converge(values: dict, torch: str = TORCH_13, version: str = VERSION) -> None:
    """The node as the role leaves it (owners aside: the read below reports each row's)."""
    site = _site(values["__sglang_install_release_dir"])
    (site / "sglang").mkdir()
    (site / "sglang" / "__init__.py").write_text("")
    _dist(site, "sglang", version, ("sglang/__init__.py",))
    (site / "torch").mkdir()
    (site / "torch" / "version.py").write_text(torch)
    if values["sglang_install_installer"] == "uv":
        uv_site = _site(values["sglang_install_uv_venv"])
        (Path(values["sglang_install_uv_venv"]) / "bin").mkdir()
        (Path(values["sglang_install_uv_venv"]) / "bin" / "uv").write_bytes(b"uv " + UV.encode())
        _dist(uv_site, "uv", UV, ("../../../bin/uv",))
    else:
        (Path(values["__sglang_install_release_dir"]) / "bin").mkdir()
        (Path(values["__sglang_install_release_dir"]) / "bin" / "pip").write_text("")
    for row in table(values):
        if row.get("installer", values["sglang_install_installer"]) != values["sglang_install_installer"]:
            continue
        if row.get("state") == "venv" or row.get("enabled", True) is False:
            # The venv the layout above made (uv's): the table does not write it.
            continue
        path = Path(row["path"])
        if row.get("state") == "directory":
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(int(row["mode"], 8))
        elif row.get("state") == "link":
            path.symlink_to(row["src"])
        else:
            path.write_text(CONTENTS[row["template"]])
            path.chmod(int(row["mode"], 8))


def read(values: dict, owners: bool = True) -> dict:
    """sglang_venv_info's result for the node under root; each existing row reported with the
    owner its row names (the tests run unprivileged)."""
    rows = table(values)
    release = values["__sglang_install_release_dir"]
    paths = [row["path"] for row in rows] + [release, release + "/bin/pip", release + "/" + PENDING]
    got = venv_info(release, "/bin/sh", values["sglang_install_uv_venv"], paths, values["sglang_install_releases_dir"],
                    record=True)
    for row in rows:
        state = got["paths"][row["path"]]
        if state["exists"] and owners:
            state.update(owner=row.get("owner", "root"), group=row.get("group", "root"))
    if got["paths"][release]["exists"] and owners:
        got["paths"][release].update(owner="root", group="root")
    got["user"] = dict(ACCOUNT, home=values["sglang_install_user_home"])
    got["group"] = {"name": "sglang", "exists": True}
    return got


def planned(values: dict, probe: dict, check_mode: bool = False) -> dict:
    return plan(probe, inputs(values), table(values), CONTENTS, check_mode)


def names(got: dict) -> list[str]:
    return [step["name"] for step in got["steps"]]


@pytest.fixture(name="uv_node")
def fixture_uv_node(tmp_path):
    values = settings(tmp_path)
    converge(values)
    return values


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_a_converged_node_gets_no_steps_in_a_run_and_a_check(tmp_path, installer):
    values = settings(tmp_path, installer=installer)
    converge(values)
    for check in (False, True):
        got = planned(values, read(values), check)
        assert (got["steps"], got["step"], got["files"], got["problems"], got["prune"]) == ([], {}, [], [], [])
        assert got["torch"] == {"checked": True, "cuda": "13.0", "ok": True, "message": got["torch"]["message"]}
    phases = [row["phase"] for row in got["table"]]
    if installer == "uv":
        assert phases == ["account", "venv", "uv", "request", "request", "sources", "activate"]
    else:
        assert phases == ["account", "venv", "request", "request", "sources", "activate"]
    assert all("content" not in row for row in got["table"])


def test_a_fresh_node_gets_every_step(tmp_path):
    values = settings(tmp_path)
    probe = read(values)
    probe["user"], probe["group"] = {"name": "sglang", "exists": False}, {"name": "sglang", "exists": False}
    got = planned(values, probe)
    assert names(got) == ["packages", "group", "user", "uv_venv", "uv", "venv"] + ["file"] * 7 + ["install"]
    assert got["step"]["uv"] == f"uv {UV} is not installed"
    assert got["step"]["install"] == f"SGLang {VERSION} is not installed"
    assert [row["reason"] for row in got["files"]] == [f"{row['path']} is missing" for row in got["table"]]
    # A check leaves what the missing venvs would hold to the steps that make them.
    got = planned(values, probe, check_mode=True)
    assert names(got) == ["packages", "group", "user", "uv_venv", "uv", "venv", "file", "file"]
    assert [row["phase"] for row in got["files"]] == ["account", "venv"]


@pytest.mark.parametrize("capability_majors", [[9], [12]])
def test_every_row_drifted_alone_is_its_own_step(tmp_path, capability_majors):
    """Generated from the role's table: each row in force put off on a converged node gives
    exactly one file step naming its path (a request file also reinstalls), in a run and in a
    check; on compute capability 12 the overrides file is one of them."""
    uv_node = settings(tmp_path, capability_majors)
    converge(uv_node)
    in_force = [row for row in table(uv_node) if row.get("installer", "uv") == "uv" and row.get("state") != "venv"
                and row.get("enabled", True) is not False]
    assert (uv_node["__sglang_install_overrides_file"] in [row["path"] for row in in_force]) == (12 in capability_majors)
    for row in in_force:
        probe = read(uv_node)
        found = probe["paths"][row["path"]]
        if row.get("state") == "link":
            found["link"] = "/elsewhere"
            reason = f"{row['path']} points at /elsewhere, not {row['src']}"
        elif row.get("state") == "directory":
            found["mode"] = "0700"
            reason = f"{row['path']}: mode 0700, not {row['mode']}"
        else:
            found["checksum"] = "0" * 40
            reason = f"{row['path']}: content differs"
        for check in (False, True):
            got = planned(uv_node, probe, check)
            want = ["file", "install"] if row["phase"] == "request" else ["file"]
            assert names(got) == want, row
            assert [(f["path"], f["reason"]) for f in got["files"]] == [(row["path"], reason)]
            assert got["install"]["creates"] == ("" if row["phase"] == "request" else (
                f"{uv_node['__sglang_install_release_dir']}/lib/python3*/site-packages/sglang-{VERSION}.dist-info/METADATA"))
            assert all("content" not in f for f in got["files"])


def test_request_files_are_root_only_and_an_older_mode_is_set_right_without_a_reinstall(tmp_path):
    """The request may hold a URL with credentials (a requirement's, a lock's --index-url): every
    request file is 0600, the overrides too. A release an older collection wrote them 0644 for is
    not installed again for that: only their mode changes."""
    uv_node = settings(tmp_path, [12])
    converge(uv_node)
    requests = [row for row in table(uv_node) if row.get("phase") == "request"]
    assert [(Path(row["path"]).name, row["mode"]) for row in requests] == [
        ("blackwell-requirements.txt", "0600"), ("blackwell-constraints.txt", "0600"), ("blackwell-overrides.txt", "0600")]
    probe = read(uv_node)
    for row in requests:
        probe["paths"][row["path"]]["mode"] = "0644"
    got = planned(uv_node, probe)
    assert names(got) == ["file", "file", "file"]
    assert [f["reason"] for f in got["files"]] == [f"{row['path']}: mode 0644, not 0600" for row in requests]


def test_an_owner_a_missing_file_and_a_directory_where_a_link_belongs(uv_node):
    probe = read(uv_node)
    home, link = table(uv_node)[0]["path"], uv_node["sglang_install_venv"]
    probe["paths"][home].update(owner="root", group="root")
    probe["paths"][uv_node["__sglang_install_requirements_file"]] = {"exists": False}
    got = planned(uv_node, probe)
    assert [f["reason"] for f in got["files"]] == [
        f"{home}: owner root:root, not sglang:sglang",
        f"{uv_node['__sglang_install_requirements_file']} is missing"]
    probe = read(uv_node)
    probe["paths"][link] = {"exists": True, "isdir": True, "islink": False, "mode": "0755", "owner": "root",
                            "group": "root"}
    got = planned(uv_node, probe)
    assert got["problems"] == [
        f"{link} (sglang_install_venv) is not a symbolic link: it must be the link to the active release under "
        f"{uv_node['sglang_install_releases_dir']}. Move it away (or remove it) and run again, or set "
        "sglang_install_venv to another path"]
    assert (got["steps"], got["step"]) == ([], {})


def test_the_links_owner_is_the_releases_it_points_at(uv_node):
    """ansible.builtin.file sets a link's owner on what the link points at: a release handed to
    another owner is the link row's drift, named by the release's path; the link's own owner is
    not (a link made by another user points at a root release just the same)."""
    release, link = uv_node["__sglang_install_release_dir"], uv_node["sglang_install_venv"]
    probe = read(uv_node)
    probe["paths"][release].update(owner="sglang", group="sglang")
    got = planned(uv_node, probe)
    assert [(f["path"], f["reason"]) for f in got["files"]] == [(link, f"{release}: owner sglang:sglang, not root:root")]
    probe = read(uv_node)
    probe["paths"][link].update(owner="sglang", group="sglang")
    assert planned(uv_node, probe)["files"] == []


def test_an_account_other_than_it_would_be_made(uv_node):
    probe = read(uv_node)
    probe["user"]["shell"] = "/bin/bash"
    got = planned(uv_node, probe)
    assert got["steps"] == [{"name": "user", "reason": (
        f"user sglang has group, home and shell sglang, {uv_node['sglang_install_user_home']}, /bin/bash, "
        f"not sglang, {uv_node['sglang_install_user_home']}, /usr/sbin/nologin")}]


def test_another_release_installed_and_another_uv(tmp_path):
    values = settings(tmp_path)
    converge(values, version="0.5.8")
    probe = read(values)
    probe["uv_version"] = "0.9.0"
    got = planned(values, probe)
    assert got["steps"] == [{"name": "uv", "reason": f"uv 0.9.0 is installed, {UV} is pinned"},
                            {"name": "install", "reason": f"SGLang 0.5.8 is installed, {VERSION} is pinned"}]
    assert got["install"]["creates"] == (
        f"{values['__sglang_install_release_dir']}/lib/python3*/site-packages/sglang-{VERSION}.dist-info/METADATA")


def test_the_activate_setting_takes_the_link_out_of_the_table(uv_node):
    probe = read(uv_node)
    probe["paths"][uv_node["sglang_install_venv"]]["link"] = "/opt/sglang/releases/other"
    assert names(planned(uv_node, probe)) == ["file"]
    values = dict(uv_node, sglang_install_activate=False)
    got = planned(values, probe)
    assert got["steps"] == [] and "activate" not in [row["phase"] for row in got["table"]]


def test_pip_installer_seeds_pip_into_a_venv_uv_made(tmp_path):
    values = settings(tmp_path, installer="pip")
    converge(values)
    probe = read(values)
    probe["paths"][values["__sglang_install_release_dir"] + "/bin/pip"] = {"exists": False}
    got = planned(values, probe)
    assert got["steps"] == [{"name": "pip", "reason": f"{values['__sglang_install_release_dir']} has no pip"}]


@pytest.mark.parametrize(("policy", "source", "want"), [
    ("warn", TORCH_CPU, ["torch"]), ("fail", TORCH_CPU, ["torch"]), ("ignore", TORCH_CPU, []),
    ("warn", TORCH_13.replace("13.0", "12.8"), ["torch"]), ("warn", "", [])])
def test_torch_built_for_another_cuda_major(tmp_path, policy, source, want):
    values = settings(tmp_path, torch_cuda_policy=policy)
    converge(values, torch=source)
    got = planned(values, read(values))
    assert names(got) == want
    if want:
        cuda = "none (CPU build)" if source == TORCH_CPU else "12.8"
        assert got["step"]["torch"] == (
            f"torch in {values['__sglang_install_release_dir']} is built for CUDA '{cuda}', not CUDA 13.x; install a "
            "CUDA 13 torch (for example from PyTorch's cu130 index through sglang_install_extra_index_urls)")


def test_old_releases_beyond_the_count_are_pruned_and_a_running_one_stays(uv_node):
    releases = Path(uv_node["sglang_install_releases_dir"])
    for age, name in enumerate(("0.5.1", "0.5.2", "0.5.3")):
        _site(str(releases / name))
        os.utime(releases / name, (1000 + age, 1000 + age))
    got = planned(uv_node, read(uv_node))
    # Two stay: the one installed (also the active one) and the newest of the others.
    assert got["prune"] == [str(releases / "0.5.2"), str(releases / "0.5.1")]
    assert got["steps"] == [{"name": "prune", "reason": "beyond sglang_install_keep_releases: " + ", ".join(got["prune"])}]
    probe = read(uv_node)
    for release in probe["releases"]:
        release["running"] = release["name"] == "0.5.1"
    got = planned(uv_node, probe)
    assert got["prune"] == [str(releases / "0.5.2")]


def test_every_problem_at_once_names_its_setting(uv_node):
    probe = read(uv_node)
    probe["python"] = {"path": "/nowhere", "exists": False, "executable": False}
    for release in probe["releases"]:
        release["running"] = True
    site = _site(uv_node["__sglang_install_release_dir"])
    _dist(site, "sglang", "0.5.9")
    probe["sglang_dist_infos"] = venv_info(uv_node["__sglang_install_release_dir"])["sglang_dist_infos"]
    wheelhouse = Path(uv_node["sglang_install_user_home"]).parent / "wheels"
    probe["paths"][str(wheelhouse)] = {"exists": True, "isdir": True, "islink": False, "mode": "0777",
                                       "owner": "root", "group": "root"}
    values = dict(uv_node, sglang_install_version="latest", sglang_install_no_index=True, sglang_install_find_links=[],
                  sglang_install_keep_releases=1, sglang_install_python="/nowhere",
                  sglang_install_requirements_lock="torch==2.9.1 --hash=sha256:" + "a" * 64,
                  sglang_install_extras=["x"], sglang_install_uv_sha256=["abc"])
    got = plan(probe, inputs(values), table(uv_node), CONTENTS, False)
    assert [clause.split(" ", 1)[0] for clause in got["problems"]] == [
        "sglang_install_no_index", "sglang_install_requirements_lock", "sglang_install_requirements_lock",
        "sglang_install_keep_releases", f"{uv_node['__sglang_install_release_dir']}", "sglang_install_python"]
    # The formats are the settings table's, judged in the same refusal (plugins/plugin_utils/settings.py).
    assert settings_table.problems({name: values[name] for name in ("sglang_install_version", "sglang_install_uv_sha256")}) == [
        "sglang_install_version: must be an exact release such as 0.5.23, got 'latest'.",
        "sglang_install_uv_sha256: item 0 must be a sha256 digest (64 hexadecimal characters), got 'abc'."]
    assert (got["steps"], got["step"]) == ([], {})
    values = dict(uv_node, sglang_install_find_links=[f"file://{wheelhouse}", "https://mirror.example/wheels/"])
    assert problems(probe, inputs(values))[-1].startswith(f"sglang_install_find_links: {wheelhouse} on this node")


def test_the_install_commands_hold_paths_and_switches_only(uv_node):
    release = uv_node["__sglang_install_release_dir"]
    got = planned(uv_node, read(uv_node))
    assert got["install"]["argv"] == [
        uv_node["__sglang_install_uv_bin"], "--config-file", f"{release}/blackwell-sources.toml", "pip", "install",
        "--python", f"{release}/bin/python", "--compile-bytecode", "--constraint", f"{release}/blackwell-constraints.txt",
        "-r", f"{release}/blackwell-requirements.txt"]
    # uv is never installed unchecked: by default with the collection's hashes of its wheels.
    known = VARS["__sglang_install_uv_known_sha256"][UV]
    assert got["uv"]["argv"][-3:] == ["--require-hashes", "-r", "/dev/stdin"]
    assert got["uv"]["stdin"] == " ".join([f"uv=={UV}"] + [f"--hash=sha256:{digest}" for digest in known])
    values = dict(uv_node, sglang_install_installer="pip", sglang_install_compile_bytecode=False,
                  sglang_install_no_index="yes", sglang_install_no_deps=True,
                  sglang_install_requirements_lock=f"sglang=={VERSION} --hash=sha256:{'a' * 64}\n"
                                                   f"uv=={UV} --hash=sha256:{'B' * 64}\n")
    got = planned(values, read(uv_node))
    assert got["install"]["argv"] == [
        f"{release}/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-compile",
        "--no-index", "--constraint", f"{release}/blackwell-constraints.txt", "--no-deps", "--require-hashes",
        "-r", f"{release}/blackwell-requirements.txt"]
    assert got["uv"]["argv"][-4:] == ["--no-index", "--require-hashes", "-r", "/dev/stdin"]
    assert got["uv"]["stdin"] == f"uv=={UV} --hash=sha256:{'b' * 64}"


def test_the_read_is_not_changed_by_planning(uv_node):
    probe = read(uv_node)
    kept = copy.deepcopy(probe)
    planned(uv_node, probe)
    assert probe == kept


def test_every_default_uv_release_has_its_wheel_hashes_and_another_needs_them_given(uv_node):
    """The default uv release's Linux wheels (x86_64 and aarch64) are hashed in the collection; a
    release it does not know is refused unless the settings or the lock give the hashes."""
    known = VARS["__sglang_install_uv_known_sha256"]
    assert UV in known and len(known[UV]) == 4
    assert all(len(digest) == 64 and int(digest, 16) >= 0 for digest in known[UV])
    other = dict(uv_node, sglang_install_uv_version="0.13.8")
    assert problems(read(uv_node), inputs(other)) == [
        "sglang_install_uv_version 0.13.8 has no wheel hash in the collection, and uv is never installed unchecked"
        " (it runs as root at every install): set sglang_install_uv_sha256 to its wheels' sha256, or pin"
        " uv==0.13.8 with its hashes in sglang_install_requirements_lock"]
    assert problems(read(uv_node), inputs(dict(other, sglang_install_uv_sha256=["c" * 64]))) == []
    assert problems(read(uv_node), inputs(dict(other, sglang_install_installer="pip"))) == []


def test_a_release_whose_files_differ_from_its_record_is_installed_again(uv_node):
    """A file of SGLang deleted: the version alone would call the release installed. The plan
    installs SGLang's files again (uv --reinstall-package sglang; pip --force-reinstall without
    the dependencies), before the link is touched, and tells why; a check reports it through
    the report task, keeping `creates` so the command itself is judged unchanged."""
    release = uv_node["__sglang_install_release_dir"]
    site = Path(release) / "lib" / "python3.12" / "site-packages"
    (site / "sglang" / "__init__.py").unlink()
    why = (f"SGLang {VERSION} in {release} differs from its RECORD: 1 file missing (sglang/__init__.py); "
           f"SGLang {VERSION} is installed again")
    for check in (False, True):
        got = planned(uv_node, read(uv_node), check)
        assert (names(got), got["step"]["install"], got["reinstall"]) == (["install"], why, [why])
        argv = got["install"]["argv"]
        assert argv[argv.index("--compile-bytecode") + 1:argv.index("--compile-bytecode") + 3] == [
            "--reinstall-package", "sglang"]
        assert got["install"]["creates"] == ("" if not check else
                                             f"{release}/lib/python3*/site-packages/sglang-{VERSION}.dist-info/METADATA")
    pip = dict(uv_node, sglang_install_installer="pip")
    (Path(release) / "bin").mkdir()
    (Path(release) / "bin" / "pip").write_text("")
    argv = planned(pip, read(pip))["install"]["argv"]
    assert ["--force-reinstall", "--no-deps"] == [a for a in argv if a in ("--force-reinstall", "--no-deps")]


def test_an_install_that_did_not_finish_is_installed_again_in_full(uv_node):
    """The request files and SGLang's METADATA are there, but the install's mark too: the run
    that wrote it was killed. Everything the request names is installed again."""
    release = uv_node["__sglang_install_release_dir"]
    (Path(release) / PENDING).write_text("")
    got = planned(uv_node, read(uv_node))
    why = (f"an install into {release} did not finish ({PENDING} is still there); SGLang {VERSION} is installed "
           "again")
    assert (names(got), got["step"]["install"], got["reinstall"]) == (["install"], why, [why])
    assert "--reinstall" in got["install"]["argv"] and "--reinstall-package" not in got["install"]["argv"]
    assert got["install"]["pending"] == f"{release}/{PENDING}"
    # An install killed before SGLang was there: installed, and in full.
    shutil.rmtree(next(Path(release).glob("lib/python3.12/site-packages/sglang-*.dist-info")))
    got = planned(uv_node, read(uv_node))
    assert got["step"]["install"] == f"SGLang {VERSION} is not installed" and got["reinstall"] == [why]
    assert "--reinstall" in got["install"]["argv"]


def test_a_replaced_uv_binary_installs_uv_again(uv_node):
    uv_bin = Path(uv_node["__sglang_install_uv_bin"])
    uv_bin.write_bytes(b"#!/bin/sh\n")
    why = (f"uv {UV} in {uv_node['sglang_install_uv_venv']} differs from its RECORD: 1 file altered "
           "(../../../bin/uv); uv is installed again")
    for check in (False, True):
        got = planned(uv_node, read(uv_node), check)
        assert (names(got), got["step"]["uv"], got["reinstall"]) == (["uv"], why, [why])
        assert "--force-reinstall" in got["uv"]["argv"]
        assert bool(got["uv"]["creates"]) == check
    uv_bin.unlink()
    assert planned(uv_node, read(uv_node))["step"]["uv"].endswith("1 file missing (../../../bin/uv); uv is installed again")


@pytest.mark.parametrize("policy,majors,no_deps,want", [
    ("auto", [12], False, ["nvidia-nccl-cu13>=2.31.2"]),
    ("auto", [9, 12], False, ["nvidia-nccl-cu13>=2.31.2"]),
    ("auto", ["12"], False, ["nvidia-nccl-cu13>=2.31.2"]),
    ("auto", [9, 10], False, []),
    ("auto", [], False, []),
    ("always", [9], False, ["nvidia-nccl-cu13>=2.31.2"]),
    ("never", [12], False, []),
    ("auto", [12], True, []),
    ("always", [12], "yes", []),
])
def test_nccls_floor_applies_on_compute_capability_12_or_where_the_site_asks(policy, majors, no_deps, want):
    assert nccl_overrides(policy, "2.31.2", "nvidia-nccl-cu13", no_deps, majors) == want


def test_the_floor_is_an_override_in_the_request_and_the_releases_name(tmp_path):
    """On compute capability 12 uv installs with the overrides file, which holds the floor; the
    request differs, so the release is another directory than a capability 9 node's, and another
    floor is another one again."""
    sm120 = settings(tmp_path / "sm120", [12])
    hopper = settings(tmp_path / "hopper", [9])
    release = sm120["__sglang_install_release_dir"]
    assert hopper["__sglang_install_release_dir"] == f"{tmp_path}/hopper/opt/sglang/releases/{VERSION}"
    assert re.fullmatch(re.escape(f"{tmp_path}/sm120/opt/sglang/releases/{VERSION}-") + "[0-9a-f]{10}", release)
    assert settings(tmp_path / "sm120", [12], nccl_floor="2.32.6")["__sglang_install_release_dir"] != release
    assert role_vars.render_template("sglang_install", "overrides.txt.j2", dict(sm120, ansible_managed="managed")).splitlines()[-1] == (
        "nvidia-nccl-cu13>=2.31.2")
    converge(sm120)
    got = planned(sm120, read(sm120))
    assert (got["problems"], got["steps"]) == ([], [])
    assert got["install"]["argv"][got["install"]["argv"].index("--compile-bytecode") + 1:][:2] == [
        "--override", f"{release}/blackwell-overrides.txt"]
    converge(hopper)
    assert "--override" not in planned(hopper, read(hopper))["install"]["argv"]


def test_where_the_floor_applies_pip_and_a_lock_below_it_are_refused(tmp_path):
    probe = {"python": {"executable": True}}
    pip = settings(tmp_path, [12], installer="pip")
    assert problems(probe, inputs(pip)) == [
        "sglang_install_installer pip cannot lift torch's exact pin of nvidia-nccl-cu13 to "
        "sglang_install_nccl_floor 2.31.2, which applies here (the node's GPUs include compute capability 12, "
        "and NCCL before 2.31.2 fails all-reduces on compute capability 12, NVIDIA/nccl#2418): pip has no "
        "overrides, and resolves torch's pin or fails on it. Use the uv installer, install without "
        "dependencies (sglang_install_no_deps) from a request that lists nvidia-nccl-cu13>=2.31.2 itself, or "
        "set sglang_install_nccl_floor_policy to never"]
    # The same pip install on capability 9, or without dependencies, or with the floor declined.
    for values in (settings(tmp_path, [9], installer="pip"), settings(tmp_path, [12], installer="pip", no_deps=True),
                   settings(tmp_path, [12], installer="pip", nccl_floor_policy="never")):
        assert problems(probe, inputs(values)) == []
    lock = f"sglang=={VERSION} --hash=sha256:{'a' * 64}\n"
    nccl = " --hash=sha256:" + "b" * 64 + "\n"
    for text, want in ((lock, "does not pin nvidia-nccl-cu13, which sglang_install_nccl_floor 2.31.2 needs at or above it"),
                       (lock + "nvidia-nccl-cu13==2.30.7" + nccl,
                        "pins nvidia-nccl-cu13==2.30.7, below sglang_install_nccl_floor 2.31.2"),
                       (lock + "nvidia_nccl_cu13==2.31.1" + nccl,
                        "pins nvidia-nccl-cu13==2.31.1, below sglang_install_nccl_floor 2.31.2"),
                       (lock + "nvidia-nccl-cu13==2.31.2rc1" + nccl,
                        "pins nvidia-nccl-cu13==2.31.2rc1, below sglang_install_nccl_floor 2.31.2")):
        assert problems(probe, inputs(settings(tmp_path, [12], requirements_lock=text))) == [
            f"sglang_install_requirements_lock {want} (the node's GPUs include compute capability 12): compile the lock "
            "with uv pip compile --generate-hashes --override FILE, FILE holding nvidia-nccl-cu13>=2.31.2, or set "
            "sglang_install_nccl_floor_policy to never"]
    assert problems(probe, inputs(settings(tmp_path, [9], requirements_lock=lock, nccl_floor_policy="always")))[0].startswith(
        "sglang_install_requirements_lock does not pin nvidia-nccl-cu13, which sglang_install_nccl_floor 2.31.2 needs at or "
        "above it (sglang_install_nccl_floor_policy is always): ")
    assert problems(probe, inputs(settings(tmp_path, [9], requirements_lock=lock))) == []
    for pinned in ("2.31.2", "2.31.2.post1", "2.32.6", "2.100.0"):
        text = lock + f"nvidia-nccl-cu13=={pinned}" + nccl
        values = settings(tmp_path, [12], requirements_lock=text)
        assert problems(probe, inputs(values)) == []
        # The override is the lock's own line, hashes included: uv's --require-hashes asks it of an override.
        assert values["__sglang_install_overrides"] == [f"nvidia-nccl-cu13=={pinned} --hash=sha256:{'b' * 64}"]


def test_an_nccl_below_the_floor_in_the_release_installs_again_and_none_is_nothing_off(tmp_path):
    """The read's NCCL release (its METADATA) against the floor: below it, the install runs again
    (a check names it); at it, or without any NCCL (a torch without one), nothing is off; where
    the floor does not apply, torch's 2.30.7 is as it should be."""
    sm120 = settings(tmp_path / "sm120", [12])
    converge(sm120)
    probe = read(sm120)
    release = sm120["__sglang_install_release_dir"]
    for version, want in (("2.30.7", ["install"]), ("2.31.2", []), ("2.32.6", []), ("", [])):
        probe["versions"] = {"nvidia-nccl-cu13": version}
        for check in (False, True):
            got = planned(sm120, probe, check)
            assert names(got) == want, version
            if want:
                assert got["reinstall"] == [f"nvidia-nccl-cu13 2.30.7 in {release} is below sglang_install_nccl_floor 2.31.2;"
                                            " the install runs again"]
                assert got["step"]["install"] == got["reinstall"][0]
                assert got["install"]["creates"] == ("" if not check else
                                                     f"{release}/lib/python3*/site-packages/sglang-{VERSION}.dist-info/METADATA")
                assert "--reinstall" not in got["install"]["argv"]
    hopper = settings(tmp_path / "hopper", [9])
    converge(hopper)
    probe = dict(read(hopper), versions={"nvidia-nccl-cu13": "2.30.7"})
    assert names(planned(hopper, probe)) == []
    assert planned(hopper, probe)["nccl_finding"] == ""


def test_the_releases_nccl_below_2_31_2_on_capability_12_is_a_finding_floor_or_not(tmp_path):
    """The smoke test's finding, from the release's METADATA before any smoke test: also where
    the floor does not apply (the request installed as listed, or declined)."""
    for values in (settings(tmp_path / "floor", [12]), settings(tmp_path / "no-deps", [12], no_deps=True),
                   settings(tmp_path / "never", [12], nccl_floor_policy="never")):
        converge(values)
        probe = dict(read(values), versions={"nvidia-nccl-cu13": "2.30.7"})
        assert planned(values, probe)["nccl_finding"].startswith(
            "NCCL 2.30.7, which the release's torch loads, is older than 2.31.2"), values["__sglang_install_release_dir"]
        probe["versions"] = {"nvidia-nccl-cu13": "2.31.2"}
        assert planned(values, probe)["nccl_finding"] == ""


def test_a_fresh_node_where_the_floor_applies_says_so_in_the_venvs_reason(tmp_path):
    values = settings(tmp_path, [12])
    got = planned(values, read(values, owners=False))
    assert got["step"]["venv"] == (f"{values['__sglang_install_release_dir']} is missing; its request holds the override "
                                   "nvidia-nccl-cu13>=2.31.2 (the node's GPUs include compute capability 12)")


def test_the_floors_settings_are_refused_by_name():
    assert settings_table.problems({"sglang_install_nccl_floor_policy": "sometimes", "sglang_install_nccl_floor": "2.31",
                                    "sglang_install_nccl_package": "nvidia-nccl-cu13>=2"}) == [
        "sglang_install_nccl_floor_policy: must be one of auto, always, never, got 'sometimes'.",
        "sglang_install_nccl_package: must be a Python package name such as nvidia-nccl-cu13, got 'nvidia-nccl-cu13>=2'."]
    assert settings_table.problems({"sglang_install_nccl_floor": "2.31.2+cu13"}) == [
        "sglang_install_nccl_floor: must be a final release such as 2.31.2 (quoted in YAML), got '2.31.2+cu13'."]
    assert settings_table.problems({"sglang_install_nccl_floor": "newest"}) == [
        "sglang_install_nccl_floor: must be a final release such as 2.31.2 (quoted in YAML), got 'newest'."]

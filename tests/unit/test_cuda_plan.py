"""cuda13's plan (plugins/plugin_utils/cuda_plan.py) over reads of a node.

The reads are blackwell.sglang.cuda_toolkit_info's, taken here by the module's own functions:
path_state on files written as the role writes them (the converged node), and dpkg listings in
dpkg-query's format parsed by the module's parser. Each case is one node state: converged, fresh
(12.8 only, a stock image), and every single drift of a row of the role's table, of the
toolkit, its hold, its links and nvcc; then the key refusals and the repository's problems.
"""
from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.sglang.plugins.module_utils import cuda_toolkit, file_state
from ansible_collections.blackwell.sglang.plugins.plugin_utils.cuda_plan import plan, repository
import role_vars
from conftest import ROOT

VARS = yaml.safe_load((ROOT / "roles" / "cuda13" / "vars" / "main.yml").read_text())
DATA = VARS["__cuda13_inputs"]
FINGERPRINT = "EB693B3035CD5710E231E123A4B469963BF863CC"
ARMORED = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBF...\n-----END PGP PUBLIC KEY BLOCK-----\n"
NVCC_13 = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
NVCC_12 = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.8, V12.8.93\n"
CONTENTS = {"cuda.sources.j2": "Types: deb\nURIs: https://example.invalid/debian12/x86_64/\nSuites: /\n",
            "cuda13.sh.j2": "export CUDA_HOME=/usr/local/cuda\n", "cuda13.conf.j2": "/usr/local/cuda/lib64\n"}
DEBIAN12 = {"distribution": "Debian", "distribution_version": "12.12", "distribution_major_version": "12",
            "architecture": "x86_64"}
# dpkg-query -W -f '${db:Status-Abbrev}\t${Package}\t${Version}\n' as the module runs it.
DPKG_CONVERGED = "hi \tcuda-toolkit-13-0\t13.0.2-1\nii \tpython3-apt\t2.6.0\nii \tcuda-toolkit-12-8\t12.8.1-1\n"
DPKG_FRESH = "ii \tcuda-toolkit-12-8\t12.8.1-1\nii \tcuda-nvcc-12-8\t12.8.93-1\n"


def inputs(**changes) -> dict:
    """vars/main.yml's __cuda13_inputs as Ansible templates it from the role's defaults with
    CHANGES (settings without their prefix) in force: a default that follows another setting
    (the package and directory from cuda13_version) follows the change."""
    return role_vars.render("cuda13", "__cuda13_inputs", {"cuda13_" + key: value for key, value in changes.items()})


def files(root: Path, repo: dict, env: bool = True) -> list[dict]:
    """The role's own table (vars/main.yml's __cuda13_files), as Ansible renders it with the
    role's defaults and repo, every path under root so that the node is a directory."""
    table = role_vars.render("cuda13", "__cuda13_files", {"cuda13_env_enabled": env, "__cuda13_repo": repo})
    return [dict(row, path=f"{root}{row['path']}") for row in table]


def converge_files(table: list[dict]) -> None:
    """Write the table's paths as the role leaves them (owner aside: the tests run unprivileged)."""
    for row in table:
        path = Path(row["path"])
        if row.get("state") == "directory":
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(0o755)
        elif row.get("state") != "absent":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(ARMORED if row.get("source") == "key" else CONTENTS[row["template"]])
            path.chmod(0o644)


def read(table: list[dict], dpkg: str, links: dict, tree: bool, nvcc: str) -> dict:
    """cuda_toolkit_info's result for the node under the table's root, owners read as root's."""
    paths = {}
    for row in table:
        state = file_state.path_state(row["path"])
        if state["exists"]:
            state.update(owner="root", group="root")
        paths[row["path"]] = state
    patterns = [DATA["previous_toolkit_pattern"], "cuda-toolkit-13-0", "cuda-toolkit-13-5", "python3-apt"]
    return {"packages": cuda_toolkit.packages(dpkg, patterns), "alternatives": dict(links), "tree_exists": tree,
            "paths": paths, "nvcc": {"path": "/usr/local/cuda/bin/nvcc", "executable": True, "output": nvcc},
            "key": {"source": "file:///srv/key.pub", "fingerprints": [FINGERPRINT], "armored": ARMORED}}


LINKS_13 = {"cuda": "/usr/local/cuda-13.0", "cuda-13": "/usr/local/cuda-13.0"}


@pytest.fixture(name="node")
def fixture_node(tmp_path):
    """A converged node: its table, its read, the repository."""
    repo = repository(DEBIAN12, None, inputs())
    table = files(tmp_path, repo)
    converge_files(table)
    return {"repo": repo, "table": table, "probe": read(table, DPKG_CONVERGED, LINKS_13, True, NVCC_13)}


def planned(node, check_mode=False, **changes):
    return plan(node["probe"], node["repo"], inputs(**changes), node["table"], CONTENTS, check_mode)


def names(got):
    return [step["name"] for step in got["steps"]]


def test_a_converged_node_gets_no_steps_in_a_run_and_a_check(node):
    for check in (False, True):
        got = planned(node, check)
        assert (got["steps"], got["step"], got["files"], got["problems"]) == ([], {}, [], [])
        assert [(row["path"], row["state"]) for row in got["table"]] == [
            (row["path"], row.get("state", "file")) for row in node["table"]]
        assert all(row["owner"] == "root" and "content" not in row for row in got["table"])
        assert got["nvcc"] is True and got["toolkit"] == {"installed": "13.0.2-1", "moves": False, "judged": True}
        assert got["cuda_moves"] is False


def test_a_fresh_12_8_node_gets_every_step_and_both_links(tmp_path):
    repo = repository(DEBIAN12, None, inputs())
    table = files(tmp_path, repo)
    Path(f"{tmp_path}{repo['legacy_list']}").parent.mkdir(parents=True)
    Path(f"{tmp_path}{repo['legacy_list']}").write_text("deb [signed-by=...] https://... /\n")
    probe = read(table, DPKG_FRESH, {"cuda": "/usr/local/cuda-12.8", "cuda-13": ""}, False, NVCC_12)
    got = plan(probe, repo, inputs(), table, CONTENTS, False)
    assert names(got) == ["file"] * 6 + ["prerequisites", "toolkit", "links", "links", "ldconfig", "verify"]
    assert [row["reason"] for row in got["files"]] == [
        f"{tmp_path}/etc/apt/keyrings is missing",
        f"{tmp_path}/etc/apt/keyrings/cuda-archive-keyring.asc is missing",
        f"{tmp_path}{repo['legacy_list']} is present and is removed",
        f"{tmp_path}{repo['sources']} is missing",
        f"{tmp_path}/etc/profile.d/cuda13.sh is missing",
        f"{tmp_path}/etc/ld.so.conf.d/cuda13.conf is missing"]
    assert got["files"][1]["content"] == ARMORED
    assert got["files"][1]["checksum"] == hashlib.sha1(ARMORED.encode()).hexdigest()
    assert got["step"]["toolkit"] == "cuda-toolkit-13-0 is not installed"
    assert got["prerequisites"] == ["python3-apt"]
    # A stock node: apt can judge neither the install nor a removal in a check.
    assert got["toolkit"] == {"installed": "", "moves": True, "judged": False} and got["apt_judged"] is False
    assert [item["link"] for item in got["links"]] == ["/usr/local/cuda", "/usr/local/cuda-13"]
    # In a check on a node without the 13.0 tree the install is the change; no link is judged.
    check = plan(probe, repo, inputs(), table, CONTENTS, True)
    assert "links" not in check["step"] and check["links"] == []
    # Every link the packages register, selected by this run or not: what sglang_service switches back.
    links = [{"name": "cuda", "link": "/usr/local/cuda"}, {"name": "cuda-13", "link": "/usr/local/cuda-13"}]
    assert got["alternatives"] == check["alternatives"] == links
    assert check["step"]["verify"] == "nvcc through /usr/local/cuda does not report release 13.0"


TABLE_DRIFTS = {
    "keyring directory mode": (0, lambda p: Path(p).chmod(0o700), "{p}: mode 0700, not 0755"),
    "key edited": (1, lambda p: Path(p).write_text("other\n"), "{p}: content differs"),
    "key removed": (1, lambda p: Path(p).unlink(), "{p} is missing"),
    "legacy list back": (2, lambda p: (Path(p).parent.mkdir(parents=True, exist_ok=True), Path(p).write_text("x\n")),
                         "{p} is present and is removed"),
    "sources edited": (3, lambda p: Path(p).write_text("Types: deb\n"), "{p}: content differs"),
    "profile world-writable": (4, lambda p: Path(p).chmod(0o666), "{p}: mode 0666, not 0644"),
    "linker path a directory": (5, lambda p: (Path(p).unlink(), Path(p).mkdir()), "{p} is not a regular file"),
}


@pytest.mark.parametrize("drift", list(TABLE_DRIFTS), ids=list(TABLE_DRIFTS))
def test_each_row_of_the_table_drifts_alone(node, drift):
    row, tamper, reason = TABLE_DRIFTS[drift]
    path = node["table"][row]["path"]
    tamper(path)
    node["probe"] = read(node["table"], DPKG_CONVERGED, LINKS_13, True, NVCC_13)
    got = planned(node)
    extra = ["ldconfig"] if node["table"][row].get("refresh") else []
    assert names(got) == ["file"] + extra
    assert [(item["path"], item["reason"]) for item in got["files"]] == [(path, reason.format(p=path))]


def test_an_owner_other_than_root_is_drift(node):
    node["probe"]["paths"][node["table"][4]["path"]]["owner"] = "debian"
    got = planned(node)
    assert got["files"][0]["reason"] == f"{node['table'][4]['path']}: owner debian:root, not root:root"


def test_a_disabled_row_is_not_managed(node):
    Path(node["table"][4]["path"]).unlink()
    node["table"][4]["enabled"] = node["table"][5]["enabled"] = "False"
    node["probe"] = read(node["table"], DPKG_CONVERGED, LINKS_13, True, NVCC_13)
    assert names(planned(node)) == []


def test_toolkit_states(node):
    probe = node["probe"]
    unheld = copy.deepcopy(probe)
    unheld["packages"]["cuda-toolkit-13-0"]["held"] = False
    got = plan(unheld, node["repo"], inputs(), node["table"], CONTENTS)
    assert got["steps"] == [{"name": "hold", "reason": "cuda-toolkit-13-0 is not held"}]
    assert names(plan(unheld, node["repo"], inputs(toolkit_hold=False), node["table"], CONTENTS)) == []
    # A pin to another version moves the toolkit; in a real run both links are set afterwards.
    got = planned(node, toolkit_version="13.0.88-2")
    assert names(got) == ["toolkit", "links", "links", "ldconfig", "verify"]
    assert got["step"]["ldconfig"] == "the libraries behind /usr/local/cuda move"
    assert got["step"]["links"] == "/usr/local/cuda is selected again after the toolkit moves"
    assert got["step"]["toolkit"] == "cuda-toolkit-13-0 13.0.2-1 is installed, 13.0.88-2 is pinned"
    assert got["step"]["verify"] == "the toolkit or its links move" and got["cuda_moves"] is True
    assert names(planned(node, True, toolkit_version="13.0.88-2")) == ["toolkit", "ldconfig", "verify"]
    # Without the environment files the role keeps no linker path, and refreshes nothing.
    for row in node["table"]:
        row["enabled"] = row.get("refresh") != "ldconfig" and row.get("enabled", True)
    assert names(planned(node, toolkit_version="13.0.88-2")) == ["toolkit", "links", "links", "verify"]
    # The 12.8 toolkit is kept by default and removed on request.
    got = planned(node, previous_toolkits="remove")
    assert got["steps"] == [{"name": "previous", "reason": "12.x packages installed: cuda-toolkit-12-8"}]
    assert got["previous"] == ["cuda-toolkit-12-8"]


def test_a_link_switched_back_to_12_8_is_one_step_and_nvcc_is_read_again(node):
    node["probe"]["alternatives"]["cuda"] = "/usr/local/cuda-12.8"
    node["probe"]["nvcc"]["output"] = NVCC_12
    for check in (False, True):
        got = planned(node, check)
        assert names(got) == ["links", "ldconfig", "verify"]
        assert got["links"] == [{"name": "cuda", "link": "/usr/local/cuda"}]
        assert got["step"]["links"] == "/usr/local/cuda points at /usr/local/cuda-12.8, not /usr/local/cuda-13.0"


def test_an_nvcc_that_reports_another_release_is_verified(node):
    node["probe"]["nvcc"]["output"] = NVCC_12
    assert planned(node)["steps"] == [{"name": "verify",
                                      "reason": "nvcc through /usr/local/cuda does not report release 13.0"}]
    assert names(planned(node, verify_enabled=False)) == []


def test_driver_management_always_has_its_step(node):
    assert planned(node, driver_manage=True)["steps"] == [{"name": "driver", "reason": "cuda13_driver_manage is on"}]


def test_a_new_sources_file_leaves_the_install_unjudged_unless_the_legacy_list_knows_the_repository(node):
    Path(node["table"][3]["path"]).unlink()
    node["probe"] = read(node["table"], DPKG_FRESH + "ii \tpython3-apt\t2.6.0\n", {}, False, "")
    got = planned(node, True)
    assert got["toolkit"]["judged"] is False and got["apt_judged"] is True
    node["probe"]["paths"][node["table"][2]["path"]] = {"exists": True}
    assert planned(node, True)["toolkit"]["judged"] is True
    # A sources file that is rewritten (another URL) teaches apt nothing yet.
    converge_files(node["table"])
    Path(node["table"][3]["path"]).write_text("Types: deb\nURIs: https://old.example/\n")
    node["probe"] = read(node["table"], DPKG_FRESH + "ii \tpython3-apt\t2.6.0\n", {}, False, "")
    assert planned(node, True)["toolkit"]["judged"] is False
    Path(node["table"][3]["path"]).write_text(CONTENTS["cuda.sources.j2"])
    node["probe"] = read(node["table"], DPKG_FRESH + "ii \tpython3-apt\t2.6.0\n", {}, False, "")
    assert planned(node, True)["toolkit"]["judged"] is True


def test_a_foreign_or_unreachable_key_stops_the_host_with_no_steps(node):
    node["probe"]["key"]["fingerprints"] = ["0" * 40]
    Path(node["table"][3]["path"]).unlink()
    got = planned(node)
    assert (got["steps"], got["step"]) == ([], {})
    assert got["problems"] == [
        f"cuda13: the CUDA repository signing key from {node['repo']['key_url']} has the fingerprint {'0' * 40}, "
        f"but cuda13_repo_key_fingerprint expects {FINGERPRINT}; refusing to trust it. Nothing was changed."]
    node["probe"]["key"] = {"source": "http://127.0.0.1:9/k", "fingerprints": [], "armored": "",
                            "download": {"status": -1, "error": "refused"}}
    assert planned(node)["problems"][0].startswith(
        f"cuda13: could not download the CUDA repository signing key from {node['repo']['key_url']} (no connection).")
    node["probe"]["key"]["download"]["status"] = 404
    assert "(the server answered HTTP 404)" in planned(node)["problems"][0]


def test_the_repository_of_each_distribution_and_its_problems():
    ubuntu = {"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24",
              "architecture": "aarch64"}
    repo = repository(ubuntu, None, inputs(repo_base_url="https://mirror.example/cuda/"))
    assert {k: repo[k] for k in ("distro", "arch", "name", "url", "key_url", "key_from_node", "sources")} == {
        "distro": "ubuntu2404", "arch": "sbsa", "name": "cuda-ubuntu2404-sbsa",
        "url": "https://mirror.example/cuda/ubuntu2404/sbsa/",
        "key_url": "https://mirror.example/cuda/ubuntu2404/sbsa/3bf863cc.pub", "key_from_node": False,
        "sources": "/etc/apt/sources.list.d/cuda-ubuntu2404-sbsa.sources"}
    assert repo["problems"] == []
    assert repository(DEBIAN12, None, inputs(repo_key_url="file:///srv/k.pub"))["key_from_node"] is True
    assert repository(DEBIAN12, None, inputs(repo_key_content=ARMORED))["key_source"] == "cuda13_repo_key_content"
    odd = dict(DEBIAN12, distribution="Fedora", distribution_version="41", distribution_major_version="41",
               architecture="ppc64le")
    assert repository(odd, None, inputs(repo_key_fingerprint="EB69 3B30"))["problems"] == [
        "cuda13: NVIDIA publishes no CUDA repository for Fedora 41; supported: debian12, debian13, ubuntu2204, ubuntu2404 "
        "(or set cuda13_repo_distro). Nothing was changed.",
        "cuda13: NVIDIA publishes no CUDA repository for the ppc64le architecture; supported: x86_64, aarch64. "
        "Nothing was changed."]
    assert repository(odd, None, inputs(repo_distro="debian12"))["distro"] == "debian12"


def test_each_repository_path_has_its_own_key_and_another_path_needs_one_named():
    assert (repository(DEBIAN12, None, inputs())["key_url"], repository(DEBIAN12, None, inputs())["fingerprint"]) == (
        "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub", FINGERPRINT)
    trixie = dict(DEBIAN12, distribution_version="13.2", distribution_major_version="13")
    repo = repository(trixie, None, inputs())
    assert (repo["distro"], repo["key_url"], repo["fingerprint"], repo["problems"]) == (
        "debian13", "https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64/8793F200.pub",
        "02182E60104FCDC26EAE1B8597A5D4CB8793F200", [])
    # A mirror's own key replaces the table's, whatever the path.
    assert repository(trixie, None, inputs(repo_key_fingerprint="ab" * 20))["fingerprint"] == "AB" * 20
    # A path outside the table: its key must be named.
    assert repository(DEBIAN12, None, inputs(repo_distro="debian14"))["problems"] == [
        "cuda13: the role knows no signing key for the repository path debian14 (cuda13_repo_distro); set "
        "cuda13_repo_key_fingerprint and cuda13_repo_key_url (or cuda13_repo_key_content) for it. Nothing was changed."]
    named = repository(DEBIAN12, None, inputs(repo_distro="debian14", repo_key_fingerprint=FINGERPRINT,
                                              repo_key_url="https://mirror.example/k.pub"))
    assert (named["problems"], named["key_url"], named["url"]) == (
        [], "https://mirror.example/k.pub", "https://developer.download.nvidia.com/compute/cuda/repos/debian14/x86_64/")


def test_the_driver_floor_and_the_open_module():
    gpu = {"present": True, "driver_version": "570.133.20", "capability_majors": [12], "kernel_module_open": False}
    assert repository(DEBIAN12, gpu, inputs())["problems"] == [
        "cuda13: NVIDIA driver 570.133.20 is older than 580.65.06, the minimum for CUDA 13; install an R580 "
        "driver first (or set cuda13_driver_manage: true). Nothing was changed.",
        "cuda13: GPUs with compute capability 12.x need NVIDIA's open kernel modules, and the loaded module is the "
        "proprietary one; install the open modules (nvidia-open) or set cuda13_driver_manage: true. "
        "Nothing was changed."]
    assert repository(DEBIAN12, dict(gpu, driver_version="580.159.04", kernel_module_open=True), inputs())["problems"] == []
    assert repository(DEBIAN12, gpu, inputs(driver_manage=True))["problems"] == []
    assert repository(DEBIAN12, gpu, inputs(preflight_enabled="false"))["problems"] == []
    assert repository(DEBIAN12, {"present": False}, inputs())["problems"] == []


def test_a_node_on_13_0_moves_to_a_later_13_x_beside_it(node):
    """cuda13_version names the release: its package, its tree, its links and nvcc's banner. A
    node on 13.0 installs 13.5 beside it, both links move, the linker cache and nvcc follow, and
    13.0 stays installed (a failed health gate switches back to it), even under remove."""
    for previous, removed in (("keep", []), ("remove", ["cuda-toolkit-12-8"])):
        got = planned(node, version="13.5", previous_toolkits=previous)
        assert names(got) == ["toolkit"] + ["previous"] * len(removed) + ["links", "links", "ldconfig", "verify"]
        assert [step["reason"] for step in got["steps"] if step["name"] in ("toolkit", "links")] == [
            "cuda-toolkit-13-5 is not installed",
            "/usr/local/cuda points at /usr/local/cuda-13.0, not /usr/local/cuda-13.5",
            "/usr/local/cuda-13 points at /usr/local/cuda-13.0, not /usr/local/cuda-13.5"]
        # Only 12.x goes under remove: cuda-toolkit-13-0 stays.
        assert got["previous"] == removed and got["toolkit"]["moves"] is True
        assert [(item["name"], item["link"]) for item in got["links"]] == [
            ("cuda", "/usr/local/cuda"), ("cuda-13", "/usr/local/cuda-13")]
    # A check reports the install and changes nothing else: the links wait for the tree.
    # (The read takes the wanted release's tree, which is not there yet.)
    checked = plan(dict(node["probe"], tree_exists=False), node["repo"], inputs(version="13.5"), node["table"],
                   CONTENTS, True)
    assert names(checked) == ["toolkit", "ldconfig", "verify"] and checked["links"] == []
    # Moved: 13.5 installed and selected, 13.0 still there, nvcc says 13.5.
    dpkg = DPKG_CONVERGED + "hi \tcuda-toolkit-13-5\t13.5.37-1\n"
    moved = dict(node["probe"], **{k: v for k, v in read(
        node["table"], dpkg, {"cuda": "/usr/local/cuda-13.5", "cuda-13": "/usr/local/cuda-13.5"}, True,
        NVCC_13.replace("13.0", "13.5")).items() if k in ("packages", "alternatives", "nvcc")})
    for check in (False, True):
        assert plan(moved, node["repo"], inputs(version="13.5"), node["table"], CONTENTS, check)["steps"] == []
    # The same node, asked for 13.0 again (a rollback of the setting): the links move back.
    back = plan(moved, node["repo"], inputs(), node["table"], CONTENTS, False)
    assert names(back) == ["links", "links", "ldconfig", "verify"]


@pytest.mark.parametrize("version", ["13", "12.8", "13.x", "13.5.1", "", "14.0"])
def test_a_cuda13_version_that_is_no_13_x_release_is_refused(version):
    assert repository(DEBIAN12, None, inputs(version=version))["problems"] == [
        f"cuda13: cuda13_version '{version}' is not a CUDA 13.x release; give it as 13.<minor>, for example 13.0 or "
        "13.5. Nothing was changed."]


def test_a_toolkit_pin_of_another_release_is_refused():
    assert repository(DEBIAN12, None, inputs(version="13.5", toolkit_version="13.0.88-1"))["problems"] == [
        "cuda13: cuda13_toolkit_version '13.0.88-1' is not a version of CUDA 13.5 (cuda-toolkit-13-5); pin one of "
        "its versions (13.5.<patch>-<revision>) or leave it empty. Nothing was changed."]
    assert repository(DEBIAN12, None, inputs(version="13.5", toolkit_version="13.5.37-1"))["problems"] == []
    # 13.50 is not 13.5.
    assert len(repository(DEBIAN12, None, inputs(version="13.5", toolkit_version="13.50.1-1"))["problems"]) == 1

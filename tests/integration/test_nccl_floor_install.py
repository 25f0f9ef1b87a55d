"""NCCL's floor over torch's exact pin, resolved by the real uv from the role's own request.

SGLang 0.5.23 pins torch==2.14.1, whose wheel pins nvidia-nccl-cu13==2.30.7; NCCL before 2.31.2
fails all-reduces on compute capability 12 (NVIDIA/nccl#2418). sglang_install's request for a
capability 12 node carries uv's override of that pin; a capability 9 node's does not.

What is real here: SGLang 0.5.23's wheel (its METADATA is what uv resolves), both NCCL wheels
from PyPI (2.30.7, torch's pin, and 2.31.2, the floor), uv 0.13.9, the role's request, sources and
overrides files as Ansible renders its templates, and the installer's command line from the
role's plan. What is not: torch and SGLang's other dependencies, several GB that no machine here
could use. Each is a stand-in wheel with no code, named as such in its summary, at a release
SGLang's METADATA accepts; the stand-in torch declares torch 2.14.1's exact NCCL pin and
nothing else. The first two tests run the install on this machine (no container: nothing runs but uv), into a
venv of the role's interpreter under a temporary directory. The lab test then runs the role
itself, through ansible-playbook over SSH, on two lab nodes (tools/lab/lab.sh, Debian 12's
python3.11) with those wheels mounted as their only package source: one whose stand-in
nvidia-smi replays the RTX PRO 6000 recording (compute capability 12), one the H200 recording
(9). The role reads their GPUs itself, installs with its dependencies, and a second converge
changes nothing.
"""
from __future__ import annotations

import email.parser
import hashlib
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

import role_vars
from ansible_collections.blackwell.sglang.plugins.plugin_utils.install_plan import plan
from conftest import ROOT, VENV_BIN, in_container, lab_env, recap, running_lab
from sglang_wheels import cached_wheel, wheel

pytestmark = pytest.mark.slow
PREFIX = "nccl-floor"
PORT_BASE = "2760"
# Node 1 replays the RTX PRO 6000 recording (the lab's default), node 2 the H200 one.
SM120, HOPPER = f"{PREFIX}-01", f"{PREFIX}-02"

SGLANG = "0.5.23"
UV = "0.13.9"
NCCL = "nvidia-nccl-cu13"
# torch 2.14.1's METADATA, read from its wheel: its one NCCL requirement.
TORCH_PIN = f"{NCCL}==2.30.7"
FLOOR = "2.31.2"
# SGLang 0.5.23's wheel is for CPython 3.11: the venv is made from this machine's python3.11, as
# the lab's Debian 12 nodes have it, and SGLang's markers are judged for it on x86_64 Linux.
PYTHON = shutil.which("python3.11") or "/usr/bin/python3.11"
MARKER_ENV = {"python_version": "3.11", "python_full_version": "3.11.2", "sys_platform": "linux",
              "platform_machine": "x86_64", "platform_system": "Linux", "os_name": "posix",
              "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


def stand_in(dest: Path, name: str, version: str, requires: tuple = ()) -> None:
    """A wheel of NAME==VERSION that holds no code, only its metadata, saying what it is."""
    dist = f"{name.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    metadata = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                f"Summary: Stand-in of {name} for blackwell.sglang's tests, no code\n"
                + "".join(f"Requires-Dist: {line}\n" for line in requires))
    files = {f"{info}/METADATA": metadata,
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: blackwell.sglang tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(dest / f"{dist}-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)


def release_for(requirement: Requirement) -> str:
    """A release the requirement accepts: its pin, else its lower bound, else 1.0."""
    bounds = [spec.version for spec in requirement.specifier if spec.operator in ("==", ">=", "~=")]
    for candidate in bounds + ["1.0", "0.1"]:
        try:
            if requirement.specifier.contains(Version(candidate), prereleases=True):
                return candidate
        except InvalidVersion:
            continue
    raise AssertionError(f"no stand-in release for {requirement}")


def stand_ins_for_sglang(dest: Path) -> list[str]:
    """One stand-in per dependency SGLang's METADATA declares for the node (torch with its NCCL
    pin); returns their names."""
    with zipfile.ZipFile(wheel(SGLANG)) as archive:
        metadata = archive.read(f"sglang-{SGLANG}.dist-info/METADATA").decode()
    names = []
    for line in email.parser.Parser().parsestr(metadata).get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        if requirement.marker and not requirement.marker.evaluate(MARKER_ENV):
            continue
        stand_in(dest, requirement.name, release_for(requirement), (TORCH_PIN,) if requirement.name == "torch" else ())
        names.append(requirement.name)
    return names


@pytest.fixture(scope="module", name="sources")
def fixture_sources(tmp_path_factory):
    """The find-links directory (real SGLang, both real NCCL wheels, the stand-ins) and uv."""
    root = tmp_path_factory.mktemp("nccl-floor")
    links = root / "wheels"
    links.mkdir()
    uv_wheel = cached_wheel(f"uv=={UV}")
    for path in (wheel(SGLANG), cached_wheel(TORCH_PIN), cached_wheel(f"{NCCL}=={FLOOR}"), uv_wheel):
        if path.stat().st_dev == links.stat().st_dev:
            os.link(path, links / path.name)
        else:
            shutil.copy(path, links)
    names = stand_ins_for_sglang(links)
    assert "torch" in names and len(names) > 40, names
    uv_bin = root / "uv" / "bin" / "uv"
    uv_bin.parent.mkdir(parents=True)
    with zipfile.ZipFile(uv_wheel) as archive:
        uv_bin.write_bytes(archive.read(f"uv-{UV}.data/scripts/uv"))
    uv_bin.chmod(0o755)
    return root


def install(sources: Path, root: Path, capability_majors: list, **more) -> Path:
    """sglang_install's request for a node with these GPUs (and MORE settings), written as the role
    writes it, and its installer's command line from the role's plan, run with the real uv from
    SOURCES. Returns the release."""
    assert os.access(PYTHON, os.X_OK), "SGLang 0.5.23's wheel needs CPython 3.11, as the lab's nodes have it"
    settings = {
        "sglang_install_releases_dir": f"{root}/releases", "sglang_install_venv": f"{root}/current",
        "sglang_install_uv_venv": f"{sources}/uv", "sglang_install_user_home": f"{root}/home",
        "sglang_install_find_links": [f"{sources}/wheels"], "sglang_install_no_index": True,
        "sglang_install_compile_bytecode": False, "ansible_managed": "Managed by blackwell.sglang.sglang_install",
        "ansible_facts": {"gpu": {"capability_majors": capability_majors}}, "sglang_install_python": PYTHON,
        **more,
    }
    inputs = role_vars.render("sglang_install", "__sglang_install_inputs", settings)
    rows = role_vars.render("sglang_install", "__sglang_install_files", settings)
    # The files the install reads: the request and uv's sources (uv's own sources are pip's).
    rows = [row for row in rows if row.get("installer", "uv") == "uv" and row.get("phase") != "uv"]
    templates = sorted({row["template"] for row in rows if "template" in row})
    contents = {name: role_vars.render_template("sglang_install", name, settings) for name in templates}
    got = plan({"python": {"executable": True}}, inputs, rows, contents)
    assert got["problems"] == []
    release = Path(inputs["release_dir"])
    subprocess.run([inputs["uv_bin"], "venv", "--quiet", "--python", inputs["python"], str(release)], check=True,
                   env=dict(os.environ, UV_PYTHON_DOWNLOADS="never"))
    for row in got["files"]:
        if row.get("phase") in ("request", "sources"):
            Path(row["path"]).write_text(contents[row["template"]])
    done = subprocess.run(got["install"]["argv"], capture_output=True, text=True, check=False,
                          env=dict(os.environ, UV_PYTHON_DOWNLOADS="never", UV_CACHE_DIR=str(root / "uv-cache")))
    assert done.returncode == 0, done.stderr
    return release


def installed(release: Path, name: str) -> tuple[str, str]:
    """The release of NAME in the venv, from its dist-info, and its METADATA's summary."""
    infos = list(release.glob(f"lib/python3*/site-packages/{name.replace('-', '_')}-*.dist-info"))
    assert len(infos) == 1, infos
    metadata = email.parser.Parser().parsestr((infos[0] / "METADATA").read_text())
    return metadata["Version"], metadata["Summary"] or ""


def requires(release: Path, name: str) -> list[str]:
    infos = list(release.glob(f"lib/python3*/site-packages/{name}-*.dist-info"))
    return email.parser.Parser().parsestr((infos[0] / "METADATA").read_text()).get_all("Requires-Dist") or []


def test_capability_12_gets_nccl_at_the_floor_over_torchs_pin(sources, tmp_path):
    release = install(sources, tmp_path, [12])
    assert release.name.startswith(f"{SGLANG}-") and len(release.name) == len(SGLANG) + 11
    assert (release / "blackwell-overrides.txt").read_text().splitlines()[-1] == f"{NCCL}>={FLOOR}"
    assert installed(release, NCCL)[0] == FLOOR
    # Real SGLang, which pins torch 2.14.1; the stand-in torch pins NCCL 2.30.7 as the real one does.
    version, summary = installed(release, "sglang")
    assert version == SGLANG and not summary.startswith("Stand-in")
    assert "torch==2.14.1" in requires(release, "sglang")
    assert installed(release, "torch") == ("2.14.1", "Stand-in of torch for blackwell.sglang's tests, no code")
    assert requires(release, "torch") == [TORCH_PIN]


def hash_lock(sources: Path, nccl: str) -> str:
    """A requirements lock of every wheel the install takes, with its sha256, as
    `uv pip compile --generate-hashes` writes one: the NCCL release NCCL, no other."""
    lines = []
    for path in sorted((sources / "wheels").glob("*.whl")):
        name, version = path.name.split("-")[:2]
        if name == "uv" or (name == NCCL.replace("-", "_") and version != nccl):
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{digest}\n")
    return "".join(lines)


def test_a_hash_lock_pinning_nccl_at_the_floor_installs_it_over_torchs_pin(sources, tmp_path):
    """With a lock the override is the lock's own NCCL line, hashes included: uv's
    --require-hashes takes no override without them."""
    release = install(sources, tmp_path, [12], sglang_install_requirements_lock=hash_lock(sources, FLOOR))
    assert (release / "blackwell-overrides.txt").read_text().splitlines()[-1].startswith(f"{NCCL.replace('-', '_')}=={FLOOR} --hash=sha256:")
    assert installed(release, NCCL)[0] == FLOOR
    assert requires(release, "torch") == [TORCH_PIN]


def test_capability_9_keeps_torchs_pin(sources, tmp_path):
    release = install(sources, tmp_path, [9])
    assert release.name == SGLANG
    assert not (release / "blackwell-overrides.txt").exists()
    assert installed(release, NCCL)[0] == "2.30.7"
    assert installed(release, "torch")[0] == "2.14.1"


CONVERGE = """- name: Install SGLang with its dependencies, as a fleet without the lab's no_deps would
  hosts: all
  become: true
  roles:
    - role: blackwell.sglang.sglang_install
      sglang_install_version: "%s"
      sglang_install_no_deps: false
      sglang_install_find_links: [/srv/nccl-floor]
      sglang_install_compile_bytecode: false
""" % SGLANG


@pytest.fixture(scope="module", name="lab")
def fixture_lab(sources, tmp_path_factory):
    work = tmp_path_factory.mktemp("nccl-floor-lab")
    (work / "inventory" / "host_vars").mkdir(parents=True)
    (work / "inventory" / "host_vars" / f"{HOPPER}.yml").write_text("lab_gpu_recording: h200\n")
    (work / "converge.yml").write_text(CONVERGE)
    env = lab_env(work, PREFIX, PORT_BASE, 2, LAB_CONVERGE="0", LAB_EXTRA_VOLUMES=f"{sources}/wheels:/srv/nccl-floor:ro")
    with running_lab(env):
        lab = {"env": env, "work": work}
        lab["first"] = converge(lab)
        yield lab


def converge(lab, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(lab["work"] / "inventory"),
                           str(lab["work"] / "converge.yml"), *args],
                          cwd=ROOT, env=lab["env"], capture_output=True, text=True, check=False)


def node_dist(name: str, release: str, dist: str) -> str:
    """The METADATA of DIST in the node's release."""
    return in_container(name, f"cat {release}/lib/python3*/site-packages/{dist}-*.dist-info/METADATA")


def test_the_role_installs_the_floor_on_the_sm120_node_and_torchs_pin_on_the_hopper_node(lab):
    first = lab["first"]
    assert first.returncode == 0, first.stdout[-8000:] + first.stderr[-3000:]
    releases = {name: in_container(name, "ls /opt/sglang/releases").split() for name in (SM120, HOPPER)}
    assert releases[HOPPER] == [SGLANG]
    assert len(releases[SM120]) == 1 and releases[SM120][0].startswith(f"{SGLANG}-"), releases
    sm120 = f"/opt/sglang/releases/{releases[SM120][0]}"
    hopper = f"/opt/sglang/releases/{SGLANG}"
    assert in_container(SM120, f"tail -n 1 {sm120}/blackwell-overrides.txt").strip() == f"{NCCL}>={FLOOR}"
    assert in_container(HOPPER, f"ls {hopper}").split().count("blackwell-overrides.txt") == 0
    for name, release, nccl in ((SM120, sm120, FLOOR), (HOPPER, hopper, "2.30.7")):
        assert f"\nVersion: {nccl}\n" in node_dist(name, release, "nvidia_nccl_cu13"), name
        torch = node_dist(name, release, "torch")
        # The stand-in torch, pinning NCCL as torch 2.14.1 does, under the real SGLang 0.5.23.
        assert "Summary: Stand-in of torch" in torch and f"Requires-Dist: {TORCH_PIN}\n" in torch, name
        assert "Requires-Dist: torch==2.14.1\n" in node_dist(name, release, "sglang"), name
    second = converge(lab)
    assert second.returncode == 0, second.stdout[-8000:]
    assert {name: counts["changed"] for name, counts in recap(second.stdout).items()} == {SM120: 0, HOPPER: 0}
    check = converge(lab, "--check")
    assert check.returncode == 0, check.stdout[-8000:]
    assert {name: counts["changed"] for name, counts in recap(check.stdout).items()} == {SM120: 0, HOPPER: 0}


def test_an_nccl_put_back_below_the_floor_is_drift_and_the_converge_lifts_it_again(lab):
    """Torch's 2.30.7 installed over the floor's NCCL by hand in the capability 12 node's release:
    a check names it and changes nothing, a converge installs the floor's NCCL again."""
    assert lab["first"].returncode == 0, lab["first"].stdout[-8000:]
    release = in_container(SM120, "ls -d /opt/sglang/releases/*").strip()
    in_container(SM120, f"/opt/sglang/uv/bin/uv pip install --quiet --python {release}/bin/python --no-deps --no-index "
                        f"--find-links /srv/nccl-floor {TORCH_PIN}")
    assert "\nVersion: 2.30.7\n" in node_dist(SM120, release, "nvidia_nccl_cu13")
    check = converge(lab, "--check")
    assert check.returncode == 0, check.stdout[-8000:]
    assert {name: counts["changed"] for name, counts in recap(check.stdout).items()} == {SM120: 1, HOPPER: 0}, check.stdout
    assert (f"{NCCL} 2.30.7 in {release} is below sglang_install_nccl_floor {FLOOR}; the install runs again"
            in check.stdout), check.stdout[-5000:]
    assert "\nVersion: 2.30.7\n" in node_dist(SM120, release, "nvidia_nccl_cu13")
    fixed = converge(lab)
    assert fixed.returncode == 0, fixed.stdout[-8000:]
    assert f"\nVersion: {FLOOR}\n" in node_dist(SM120, release, "nvidia_nccl_cu13")
    again = converge(lab)
    assert again.returncode == 0, again.stdout[-8000:]
    assert {name: counts["changed"] for name, counts in recap(again.stdout).items()} == {SM120: 0, HOPPER: 0}

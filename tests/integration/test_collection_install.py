"""The collection as users get it: a tarball from `ansible-galaxy collection build`, installed
offline next to its declared dependencies, run by FQCN.

- The tarball is built from a copy of the tree into which every kind of build, test and lab
  output has been planted; it holds exactly the tree's files less the development-only ones.
- Installing it where community.general is missing fails on that dependency and installs
  nothing: galaxy.yml declares what the roles use.
- Marker lab: community.general is copied from the `ansible` package's bundle (no Galaxy here),
  the tarball is installed beside it by the oldest supported ansible-core (2.20) alone, and one
  lab node is converged with `ansible-playbook blackwell.sglang.site`, run outside the checkout
  with only that collections directory visible: a first converge changes the node, a second
  changes nothing, a --check changes nothing. The newest, ansible-core 2.21 (the main venv),
  then converges and checks the same node from the same installed copy, also with nothing
  changed.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from conftest import ROOT, VENV_BIN, ansible_env, copy_as_collection, lab_env, recap, running_lab
from test_ansible_core_versions import FLOOR_VERSION, floor_bin

VERSION = "0.1.0"
DEPENDENCIES = {"community.general": ">=13.0.0,<14.0.0"}
# What the lab test installs as the dependency: the copy `ansible` 14.5.0 bundles.
COMMUNITY_GENERAL = "13.5.0"
# community.general 13's own dependency, from the same bundle.
LIBRARY_INVENTORY_FILTERING = "1.1.5"
NEWEST = "2.21.5"

# Build, test and lab outputs a working tree collects (relative path -> a file planted there);
# none may reach the tarball.
PLANTED = (
    ".venv/bin/python",
    ".venv-core220/bin/python",
    ".cache/wheels/sglang-0.5.18-py3-none-any.whl",
    ".ansible/collections/ansible_collections/x",
    ".pytest_cache/v/cache/lastfailed",
    ".carry/payload",
    ".ci/run",
    "lab/state/id_ed25519",
    "tests/output/junit/sanity.xml",
    "benchmarks/results/fleet-check.json",
    "inventories/lab/hosts.yml",
    "blackwell-sglang-0.0.9.tar.gz",
    "roles/cuda13/__pycache__/x.cpython-311.pyc",
    "plugins/module_utils/x.pyc",
    "molecule/cuda13/.molecule/state.yml",
    "molecule/cuda13/.ansible/tmp",
    "tools/lab/build/rootfs.tar",
)
# Tracked files that are for developing the collection, not for using it.
DEVELOPMENT_ONLY = ("galaxy.yml", ".gitignore", ".gitattributes", ".ci/")
TOP_LEVEL = sorted([
    ".ansible-lint", ".config", "FILES.json", "MANIFEST.json", "Makefile", "README.md", "ansible.cfg",
    "benchmarks", "changelogs", "docs", "execution-environment.yml", "inventories", "meta", "molecule",
    "playbooks", "plugins", "pytest.ini", "roles", "site.yml", "tests", "tools",
])


def tracked_files() -> list:
    """The files copy_as_collection copies: tracked, plus untracked ones git does not ignore."""
    listing = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout.decode().split("\0")
    return sorted(rel for rel in filter(None, listing) if (ROOT / rel).is_file())


@pytest.fixture(scope="module")
def tarball(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("build")
    src = copy_as_collection(work)
    for rel in PLANTED:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("planted\n")
    dist = work / "dist"
    proc = subprocess.run(
        [str(floor_bin() / "ansible-galaxy"), "collection", "build", str(src),
         "--output-path", str(dist)],
        cwd=work, env=ansible_env(), capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    built = dist / f"blackwell-sglang-{VERSION}.tar.gz"
    assert built.is_file(), proc.stdout
    return built


def members(path: Path) -> dict:
    with tarfile.open(path) as tar:
        return {m.name: m for m in tar.getmembers()}


def test_tarball_holds_the_collection_and_no_build_test_or_lab_output(tarball):
    names = members(tarball)
    assert sorted({name.split("/")[0] for name in names}) == TOP_LEVEL
    for rel in PLANTED:
        leaked = [n for n in names if n == rel or n.startswith(rel + "/")]
        assert leaked == [], f"{rel} reached the tarball"
    for part in rel_parts(names):
        assert part not in ("__pycache__", ".git", ".venv", ".cache"), part
    files = sorted(n for n, m in names.items() if m.isfile())
    expected = sorted(
        [rel for rel in tracked_files() if not rel.startswith(DEVELOPMENT_ONLY)]
        + ["FILES.json", "MANIFEST.json"])
    assert files == expected
    for needed in ("playbooks/site.yml", "playbooks/preflight.yml", "playbooks/node.yml",
                   "meta/runtime.yml", "roles/cuda13/tasks/main.yml",
                   "roles/sglang_service/meta/argument_specs.yml",
                   "plugins/modules/sglang_capmap.py", "plugins/module_utils/capmap.py"):
        assert needed in names, needed


def rel_parts(names) -> set:
    return {part for name in names for part in name.split("/")}


def test_tarball_declares_the_collections_the_roles_use(tarball):
    with tarfile.open(tarball) as tar:
        manifest = json.load(tar.extractfile("MANIFEST.json"))
        runtime = tar.extractfile("meta/runtime.yml").read().decode()
    info = manifest["collection_info"]
    assert (info["namespace"], info["name"], info["version"]) == ("blackwell", "sglang", VERSION)
    assert info["dependencies"] == DEPENDENCIES
    assert 'requires_ansible: ">=2.20.0"' in runtime.splitlines()
    # Every collection the code names (FQCN ns.collection.name, where ns.collection is one the
    # `ansible` package bundles) besides ansible.builtin is a declared dependency.
    bundle = bundled_community_general().parent.parent
    known = {f"{ns.name}.{coll.name}" for ns in bundle.iterdir() if ns.is_dir()
             for coll in ns.iterdir() if coll.is_dir()}
    named = set()
    for top in ("roles", "playbooks", "plugins"):
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and path.suffix in (".yml", ".yaml", ".py", ".j2"):
                text = path.read_text(encoding="utf-8")
                if path.suffix == ".py":
                    # ansible-core's own Python package (ansible.utils.display, ...) is no collection.
                    text = re.sub(r"^\s*(from|import) ansible\.[\w.]+.*$", "", text, flags=re.M)
                named |= set(re.findall(r"\b([a-z_0-9]+\.[a-z_0-9]+)\.[a-z_0-9]+\b", text))
    assert (named & known) - {"ansible.builtin"} == set(DEPENDENCIES)


def test_install_without_the_dependency_fails_and_installs_nothing(tarball, tmp_path):
    collections = tmp_path / "collections"
    collections.mkdir()
    proc = subprocess.run(
        [str(floor_bin() / "ansible-galaxy"), "collection", "install", "--offline",
         "-p", str(collections), str(tarball)],
        cwd=tmp_path, env=installed_env(collections), capture_output=True, text=True, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("* community.general:>=13.0.0,<14.0.0 (dependency of blackwell.sglang:0.1.0)"
            in proc.stderr), proc.stderr
    assert not (collections / "ansible_collections" / "blackwell").exists()


def installed_env(collections: Path, bindir: Path | None = None) -> dict:
    """Only `collections` is visible: not the checkout, not the `ansible` package's bundle."""
    env = ansible_env(ANSIBLE_COLLECTIONS_PATH=str(collections),
                      ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false")
    if bindir is not None:
        env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    return env


def bundled_community_general() -> Path:
    found = sorted(VENV_BIN.parent.glob(
        "lib/python3*/site-packages/ansible_collections/community/general"))
    assert found, f"no community.general bundled in {VENV_BIN.parent}: run tools/bootstrap.sh"
    return found[0]


def bundled_dependency_closure() -> dict:
    """community.general and what it declares in turn (community.library_inventory_filtering_v1
    for 13.x), as the `ansible` package bundles them: {fqcn: directory}."""
    root = bundled_community_general().parent.parent
    found, todo = {}, ["community.general"]
    while todo:
        fqcn = todo.pop()
        if fqcn in found:
            continue
        found[fqcn] = root.joinpath(*fqcn.split("."))
        manifest = json.loads((found[fqcn] / "MANIFEST.json").read_text(encoding="utf-8"))
        todo.extend(manifest["collection_info"]["dependencies"])
    return found


PREFIX = "core-install"
NODE = f"{PREFIX}-01"


@pytest.fixture(scope="module")
def installed_lab(tarball, tmp_path_factory):
    work = tmp_path_factory.mktemp("installed")
    collections = work / "collections"
    for fqcn, source in bundled_dependency_closure().items():
        namespace, name = fqcn.split(".")
        (collections / "ansible_collections" / namespace).mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(source), str(collections / "ansible_collections" / namespace / name)],
                       check=True)
    floor = floor_bin()
    env = installed_env(collections, floor)
    install = subprocess.run(
        [str(floor / "ansible-galaxy"), "collection", "install", "--offline",
         "-p", str(collections), str(tarball)],
        cwd=work, env=env, capture_output=True, text=True, check=False)
    assert install.returncode == 0, install.stdout + install.stderr
    listing = subprocess.run([str(floor / "ansible-galaxy"), "collection", "list"],
                             cwd=work, env=env, capture_output=True, text=True, check=True).stdout

    timings = {}
    started = time.monotonic()
    try:
        with running_lab(lab_env(work, PREFIX, "2700", LAB_CONVERGE="0")):
            timings["lab up"] = time.monotonic() - started
            # Somewhere that is not the checkout: no ansible.cfg, no roles/ or playbooks/ nearby.
            elsewhere = work / "elsewhere"
            elsewhere.mkdir()
            lab = {"collections": collections, "inventory": work / "inventory", "cwd": elsewhere,
                   "listing": listing, "timings": timings}
            # The first converge of the fresh node, by the oldest supported ansible-core; the
            # tests below read its result and run on the node it leaves.
            lab["first"] = site(lab, floor, "2.20 converge")
            yield lab
    finally:
        # The cost of each step, in the output of `pytest -s`.
        print("\n" + "\n".join(f"{name}: {seconds:.0f} s" for name, seconds in timings.items()))


def site(lab: dict, bindir: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    started = time.monotonic()
    proc = subprocess.run(
        [str(bindir / "ansible-playbook"), "blackwell.sglang.site", "-i", str(lab["inventory"]),
         "-vv", *args],
        cwd=lab["cwd"], env=installed_env(lab["collections"], bindir), capture_output=True,
        text=True, check=False)
    counts = recap(proc.stdout).get(NODE, {})
    lab["timings"][f"{name} (changed={counts.get('changed')})"] = time.monotonic() - started
    return proc


def assert_no_deprecation(proc: subprocess.CompletedProcess) -> None:
    """What ansible-core deprecates today breaks in a release or two: none may be in use."""
    warnings = [line for line in (proc.stdout + proc.stderr).splitlines()
                if "DEPRECATION WARNING" in line]
    assert warnings == [], warnings


def assert_ran_installed_copy(lab: dict, output: str) -> None:
    installed = lab["collections"] / "ansible_collections" / "blackwell" / "sglang"
    assert f"plays in {installed}/playbooks/site.yml" in output, output[:5000]
    task_paths = re.findall(r"^task path: (\S+?):\d+$", output, re.MULTILINE)
    assert task_paths, output[:5000]
    # Every task came from the installed copy (or community.general's beside it), none from
    # the checkout.
    outside = sorted({p for p in task_paths if not p.startswith(f"{lab['collections']}/")})
    assert outside == [], outside


def assert_version(bindir: Path, version: str) -> None:
    first = subprocess.run([str(bindir / "ansible-playbook"), "--version"], capture_output=True,
                           text=True, check=True).stdout.splitlines()[0]
    assert f"[core {version}]" in first, first


@pytest.mark.lab
def test_installed_collection_sits_beside_its_dependency_only(installed_lab):
    listing = installed_lab["listing"]
    assert f"# {installed_lab['collections']}/ansible_collections" in listing, listing
    rows = re.findall(r"^(\S+\.\S+)\s+(\S+)\s*$", listing, re.MULTILINE)
    assert rows == [("blackwell.sglang", VERSION), ("community.general", COMMUNITY_GENERAL),
                    ("community.library_inventory_filtering_v1", LIBRARY_INVENTORY_FILTERING)]


@pytest.mark.lab
def test_oldest_core_converges_a_fresh_node_from_the_installed_copy(installed_lab):
    assert_version(floor_bin(), FLOOR_VERSION)
    first = installed_lab["first"]
    assert first.returncode == 0, first.stdout[-20000:] + first.stderr[-5000:]
    assert_ran_installed_copy(installed_lab, first.stdout)
    assert_no_deprecation(first)
    counts = recap(first.stdout)[NODE]
    assert counts["changed"] > 0, counts
    assert (counts["failed"], counts["unreachable"]) == (0, 0), counts


@pytest.mark.lab
def test_oldest_core_second_converge_and_check_change_nothing(installed_lab):
    floor = floor_bin()
    assert installed_lab["first"].returncode == 0, "the first converge failed"
    for name, args in (("2.20 second converge", ()), ("2.20 check", ("--check",))):
        again = site(installed_lab, floor, name, *args)
        assert again.returncode == 0, again.stdout[-20000:] + again.stderr[-5000:]
        assert_ran_installed_copy(installed_lab, again.stdout)
        assert_no_deprecation(again)
        counts = recap(again.stdout)[NODE]
        assert (counts["changed"], counts["failed"], counts["unreachable"]) == (0, 0, 0), \
            (name, counts)


@pytest.mark.lab
def test_newest_core_runs_the_installed_collection_unchanged(installed_lab):
    assert_version(VENV_BIN, NEWEST)
    assert installed_lab["first"].returncode == 0, "the first converge failed"
    for name, args in (("2.21 converge", ()), ("2.21 check", ("--check",))):
        run = site(installed_lab, VENV_BIN, name, *args)
        assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-5000:]
        assert_ran_installed_copy(installed_lab, run.stdout)
        assert_no_deprecation(run)
        counts = recap(run.stdout)[NODE]
        assert (counts["changed"], counts["failed"], counts["unreachable"]) == (0, 0, 0), \
            (name, counts)

"""The execution environment (EE) that execution-environment.yml defines, built here and used
the way AWX and ansible-navigator use one: every Ansible process runs inside the image.

- The definition passes ansible-builder's own schema check (`ansible-builder create`); the
  collection's meta/execution-environment.yml names requirement files holding what the drift
  report and the SSH connection need; the wheelhouse holds the definition's pins.
- Marker lab: tools/ee/build.sh builds the image from this checkout with podman, without a
  registry or Galaxy. A one-node lab comes up unconverged. `blackwell.sglang.site` then runs
  through `ansible-runner run --process-isolation` with that image, no ANSIBLE_* setting of the
  host's passed in: its output shows the image's ansible-core, ansible-playbook and Python, and
  every task from the image's installed collections; it converges the node (the unit is
  active, /health answers 200 there). Every Python package the image shares with the test venv
  is at the test venv's pin (tools/constraints.txt). The installed collection's tools/drift-report, run in
  the image, then exits 0 with the node `ok`.
- A check of a small fleet runs as one job and as the two slices AWX would make of it, the slices
  side by side, each an ansible-runner job in the image with the sliced inventory and AWX's meta
  variables of a slice: the node itself (ok), the node again under a second name with another
  served model name (drift), under a third with a preflight that finds no GPU (failed), and a
  host nothing answers on (unreachable). The installed collection's tools/drift-report --merge,
  in the image, makes one report of the slices' published verdicts: the one job's report, byte for
  byte, exit code included (the fleet has no router and no Prometheus targets for a slice to
  leave out).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import CACHE, ROOT, VENV_BIN, ansible_env, frozen, lab_env, pinned, recap, running_lab

PREFIX = "ee"
NODE = f"{PREFIX}-01"
PORT_BASE = "2400"
# Where ansible-builder installs collections, and so where the EE's copy of this one lives.
INSTALLED = "/usr/share/ansible/collections/ansible_collections/blackwell/sglang"
DEFINITION = yaml.safe_load((ROOT / "execution-environment.yml").read_text(encoding="utf-8"))
CORE_VERSION = DEFINITION["dependencies"]["ansible_core"]["package_pip"].split("==")[1]
PYTHON = DEFINITION["dependencies"]["python_interpreter"]["python_path"]
# The private data directory's env/envvars: what ansible-runner sets in the EE besides its own.
ENVVARS = "ANSIBLE_NOCOLOR: '1'\n"
# What Debian's podman 4.3 needs to start any container here (see tools/lab/fleet.sh), and the
# lab nodes' SSH ports are on the host's loopback.
CONTAINER_OPTIONS = ("--network=host", "--ulimit=nofile=1024:1024", "--ulimit=nproc=4096:4096")


def test_definition_passes_ansible_builders_schema(tmp_path):
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-builder"), "create", "-f", str(ROOT / "execution-environment.yml"),
         "-c", str(tmp_path / "context"), "--output-filename", "Containerfile"],
        cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    containerfile = (tmp_path / "context" / "Containerfile").read_text(encoding="utf-8")
    assert 'ARG EE_BASE_IMAGE="localhost/blackwell-lab-debian13:latest"' in containerfile
    assert f'ARG PYCMD="{PYTHON}"' in containerfile
    # The collections' own requirements are read from what the galaxy stage installed.
    assert "RUN $PYCMD /output/scripts/introspect.py introspect" in containerfile


def test_collection_declares_its_controller_requirements():
    meta = yaml.safe_load((ROOT / "meta" / "execution-environment.yml").read_text(encoding="utf-8"))
    deps = meta["dependencies"]
    assert meta["version"] == 1
    assert sorted(deps) == ["python", "system"]

    def lines(rel: str) -> list:
        text = (ROOT / rel).read_text(encoding="utf-8")
        return [line for line in text.splitlines() if line and not line.startswith("#")]

    assert lines(deps["python"]) == ["ansible-runner>=2.4,<3"]
    assert lines(deps["system"]) == ["openssh-client [platform:dpkg]", "openssh-clients [platform:rpm]"]


def test_wheelhouse_holds_the_definitions_pins():
    wheels = (ROOT / "tools" / "ee" / "wheels.txt").read_text(encoding="utf-8").splitlines()
    for dep in ("ansible_core", "ansible_runner"):
        assert DEFINITION["dependencies"][dep]["package_pip"] in wheels, dep


def without_host_ansible() -> dict:
    """The environment of the processes that start the EE: no ANSIBLE_* setting of the host's
    reaches the container, and no Ansible on PATH but the venv's ansible-runner."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="module")
def ee_lab(tmp_path_factory):
    work = tmp_path_factory.mktemp("ee")
    timings = {}
    started = time.monotonic()
    build = subprocess.run([str(ROOT / "tools" / "ee" / "build.sh")], cwd=ROOT, env=ansible_env(),
                           capture_output=True, text=True, check=False)
    timings["tools/ee/build.sh"] = time.monotonic() - started
    assert build.returncode == 0, build.stdout + build.stderr[-10000:]
    image = build.stdout.strip().splitlines()[-1]

    state = work / "state"
    inventory = work / "inventory"
    try:
        started = time.monotonic()
        with running_lab(lab_env(work, PREFIX, PORT_BASE, LAB_CONVERGE="0")):
            timings["lab up"] = time.monotonic() - started
            # ansible-runner's private data directory, mounted at /runner in the EE. Its inventory is
            # the lab's: the generated hosts.yml, and group_vars as the lab links it, into this
            # checkout's inventories/lab (mounted read-only at the same path, see lab_mounts).
            private = work / "runner"
            (private / "inventory").mkdir(parents=True)
            (private / "env").mkdir()
            shutil.copy(inventory / "hosts.yml", private / "inventory" / "hosts.yml")
            os.symlink(os.readlink(inventory / "group_vars"), private / "inventory" / "group_vars")
            (private / "env" / "envvars").write_text(ENVVARS, encoding="utf-8")
            lab = {"image": image, "private": private, "state": state, "timings": timings}
            started = time.monotonic()
            lab["site"] = runner_site(lab)
            timings["site through the EE"] = time.monotonic() - started
            yield lab
    finally:
        # The cost of each step, in the output of `pytest -s`.
        print("\n" + "\n".join(f"{name}: {seconds:.0f} s" for name, seconds in timings.items()))


def lab_mounts(lab: dict) -> list:
    """Host paths the EE needs from the lab, read-only at the same paths: the SSH key the
    inventory names, the lab's group_vars, and the lab's CUDA repository (its signing key's
    fingerprint is read on the controller). None of them holds an Ansible installation or collection."""
    return [f"{path}:{path}:ro" for path in (lab["state"], ROOT / "inventories" / "lab", CACHE / "lab")]


def isolation_args(lab: dict) -> list:
    args = ["--process-isolation", "--process-isolation-executable", "podman",
            "--container-image", lab["image"]]
    for mount in lab_mounts(lab):
        args += ["--container-volume-mount", mount]
    return args + [f"--container-option={option}" for option in CONTAINER_OPTIONS]


def runner_site(lab: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(VENV_BIN / "ansible-runner"), "run", str(lab["private"]), "-p", "blackwell.sglang.site",
         "--cmdline=-vv", *isolation_args(lab)],
        cwd=lab["private"], env=without_host_ansible(), capture_output=True, text=True, check=False)


def on_node(script: str) -> str:
    proc = subprocess.run(["podman", "exec", NODE, "sh", "-c", script], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, f"{script}\n{proc.stdout}{proc.stderr}"
    return proc.stdout.strip()


@pytest.mark.lab
def test_site_runs_with_the_images_ansible_core_python_and_collection(ee_lab):
    site = ee_lab["site"]
    assert site.returncode == 0, site.stdout[-20000:] + site.stderr[-5000:]
    out = site.stdout
    # ansible-playbook -vv starts with its own version report: the image's, not the host's.
    assert f"ansible-playbook [core {CORE_VERSION}]" in out, out[:3000]
    assert f"executable location = {Path(PYTHON).parent}/ansible-playbook" in out, out[:3000]
    assert re.search(rf"^  python version = 3\.13\.\d+ .*\({re.escape(PYTHON)}\)$", out, re.MULTILINE), \
        out[:3000]
    assert f"plays in {INSTALLED}/playbooks/site.yml" in out, out[:5000]
    task_paths = set(re.findall(r"^task path: (\S+?):\d+$", out, re.MULTILINE))
    assert task_paths, out[:5000]
    # Every task came from the image's collections: this one, or community.general beside it.
    outside = sorted(p for p in task_paths
                     if not p.startswith("/usr/share/ansible/collections/ansible_collections/"))
    assert outside == [], outside
    assert any(p.startswith(f"{INSTALLED}/roles/") for p in task_paths), sorted(task_paths)


@pytest.mark.lab
def test_the_images_packages_are_at_the_test_venvs_pins(ee_lab):
    proc = subprocess.run(
        ["podman", "run", "--rm", *CONTAINER_OPTIONS, ee_lab["image"], PYTHON, "-m", "pip", "freeze",
         "--disable-pip-version-check"],
        env=without_host_ansible(), capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    have, want = frozen(proc.stdout), pinned(ROOT / "tools" / "constraints.txt")
    assert have["ansible-core"] == CORE_VERSION
    assert {"ansible-runner", "cryptography", "jinja2", "pyyaml"} <= set(have) & set(want)
    assert {name: (want[name], version) for name, version in have.items()
            if name in want and want[name] != version} == {}


@pytest.mark.lab
def test_site_through_the_ee_converges_the_node(ee_lab):
    site = ee_lab["site"]
    assert site.returncode == 0, site.stdout[-20000:] + site.stderr[-5000:]
    counts = recap(site.stdout)[NODE]
    assert counts["changed"] > 0, counts
    assert (counts["failed"], counts["unreachable"]) == (0, 0), counts
    assert on_node("systemctl is-active sglang") == "active"
    assert on_node("python3 -c \"import urllib.request as u; "
                   "print(u.urlopen('http://127.0.0.1:30000/health').status)\"") == "200"


@pytest.mark.lab
def test_drift_report_inside_the_ee_finds_the_node_clean(ee_lab):
    assert ee_lab["site"].returncode == 0, "the converge through the EE failed"
    report = ee_lab["private"] / "artifacts" / "drift.json"
    started = time.monotonic()
    # The installed collection's CLI, started in the image the way `podman run` starts any of
    # its commands. (Not through ansible-runner's run_command: the ANSIBLE_STDOUT_CALLBACK and
    # ANSIBLE_CALLBACK_PLUGINS an outer ansible-runner sets would reach the CLI's own
    # ansible-runner run.)
    volumes = [arg for mount in (f"{ee_lab['private']}:/runner", *lab_mounts(ee_lab))
               for arg in ("-v", mount)]
    proc = subprocess.run(
        ["podman", "run", "--rm", *CONTAINER_OPTIONS, *volumes, ee_lab["image"],
         f"{INSTALLED}/tools/drift-report", "-i", "/runner/inventory",
         "--json", "/runner/artifacts/drift.json"],
        env=without_host_ansible(), capture_output=True, text=True, check=False)
    ee_lab["timings"]["drift report in the EE"] = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-20000:] + proc.stderr[-5000:]
    hosts = json.loads(report.read_text(encoding="utf-8"))["hosts"]
    assert {name: host["status"] for name, host in hosts.items()} == {NODE: "ok"}, hosts
    assert "No drift." in proc.stdout, proc.stdout[-5000:]
    assert "1 host(s): 1 ok, 0 with drift" in proc.stdout, proc.stdout[-5000:]


# The fleet of the sliced check: the lab's node under four names (hosts.yml's vars beside them).
# The second name serves another model name (its unit would change) and takes its own lock, as it
# is checked beside the first; the third's nvidia-smi finds no GPU; nothing listens on port 1.
FLEET = {
    NODE: {},
    f"{PREFIX}-02": {"sglang_service_served_model_name": "kimi-k2.5-renamed",
                     "sglang_rollout_lock_path": "/run/lock/blackwell-sglang/second-name.lock"},
    f"{PREFIX}-03": {"sglang_preflight_nvidia_smi": "/usr/bin/false"},
    f"{PREFIX}-04": {"ansible_port": 1},
}
FLEET_VERDICTS = {NODE: "ok", f"{PREFIX}-02": "drift", f"{PREFIX}-03": "failed", f"{PREFIX}-04": "unreachable"}
# AWX's meta variables of each slice's job: started by the workflow job AWX names after the template.
AWX_SLICE = {"awx_job_launch_type": "workflow", "awx_workflow_job_name": "SGLang check",
             "awx_job_template_name": "SGLang check"}


def _check_job(lab: dict, name: str, hosts: list, extra: dict) -> Path:
    """An ansible-runner private data directory: a check of HOSTS of FLEET with the drift report."""
    private = lab["private"].parent / "sliced" / name
    (private / "inventory").mkdir(parents=True)
    (private / "env").mkdir()
    lab_inventory = yaml.safe_load((lab["private"] / "inventory" / "hosts.yml").read_text(encoding="utf-8"))
    group = lab_inventory["all"]["children"]["sglang_nodes"]
    port = group["hosts"][NODE]["ansible_port"]
    inventory = {"all": {"children": {"sglang_nodes": {
        "vars": group["vars"],
        "hosts": {host: {"ansible_port": port, **FLEET[host]} for host in hosts}}}}}
    (private / "inventory" / "hosts.yml").write_text(yaml.safe_dump(inventory), encoding="utf-8")
    os.symlink(os.readlink(lab["private"] / "inventory" / "group_vars"), private / "inventory" / "group_vars")
    (private / "env" / "envvars").write_text(ENVVARS + yaml.safe_dump({
        "ANSIBLE_CALLBACKS_ENABLED": "blackwell.sglang.drift_report",
        "BLACKWELL_DRIFT_REPORT_JSON": "/runner/report.json",
        "BLACKWELL_DRIFT_REPORT_MARKDOWN": "/runner/report.md"}), encoding="utf-8")
    (private / "env" / "extravars").write_text(json.dumps(extra), encoding="utf-8")
    return private


def _start(lab: dict, private: Path) -> subprocess.Popen:
    return subprocess.Popen(  # pylint: disable=consider-using-with
        [str(VENV_BIN / "ansible-runner"), "run", str(private), "-p", "blackwell.sglang.site",
         "--cmdline=--check --diff", *isolation_args(lab)],
        cwd=private, env=without_host_ansible(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.lab
def test_a_sliced_check_in_the_ee_merges_into_the_report_of_one_job(ee_lab):
    assert ee_lab["site"].returncode == 0, "the converge through the EE failed"
    started = time.monotonic()
    hosts = sorted(FLEET)
    one = _check_job(ee_lab, "one", hosts, {"awx_job_launch_type": "manual"})
    proc = _start(ee_lab, one)
    output = proc.communicate(timeout=900)[0]
    # ansible-playbook's exit code: 4, a host was unreachable.
    assert proc.returncode == 4, output[-10000:]
    # AWX's slices: the hosts by name, slice N of M taking every Mth from the Nth on; side by side.
    slices = [_check_job(ee_lab, f"slice{n}", hosts[n - 1::2], AWX_SLICE) for n in (1, 2)]
    procs = [_start(ee_lab, private) for private in slices]
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    ee_lab["timings"]["a check as one job, then as two slices at once"] = time.monotonic() - started
    assert [p.returncode for p in procs] == [2, 4], "\n".join(o[-5000:] for o in outputs)

    report = json.loads((one / "report.json").read_text(encoding="utf-8"))
    assert {h: v["status"] for h, v in report["hosts"].items()} == FLEET_VERDICTS, report["hosts"]
    assert report["summary"]["exit_code"] == 2
    labels = [f["label"] for f in report["hosts"][f"{PREFIX}-02"]["drift"]]
    assert any(label.startswith("sglang_service : Write the files the server starts from [") for label in labels), labels

    volumes = [arg for mount in (f"{one.parent}:/jobs", *lab_mounts(ee_lab)) for arg in ("-v", mount)]
    merged = subprocess.run(
        ["podman", "run", "--rm", *CONTAINER_OPTIONS, *volumes, ee_lab["image"],
         f"{INSTALLED}/tools/drift-report", "--merge", "/jobs/slice1", "/jobs/slice2",
         "--json", "/jobs/merged.json", "--markdown", "/jobs/merged.md"],
        env=without_host_ansible(), capture_output=True, text=True, check=False)
    assert merged.returncode == 2, merged.stdout[-5000:] + merged.stderr[-5000:]
    # No router and no Prometheus targets: the slices left nothing out, and the report is the one
    # job's, byte for byte, with no note of slicing on any host.
    assert (one.parent / "merged.json").read_text(encoding="utf-8") == (one / "report.json").read_text(encoding="utf-8")
    assert (one.parent / "merged.md").read_text(encoding="utf-8") == (one / "report.md").read_text(encoding="utf-8")
    assert all("slicing" not in host["notes"] for host in report["hosts"].values())
    assert "4 host(s): 1 ok, 1 with drift" in merged.stdout, merged.stdout[-3000:]

"""Drift report accuracy on a real fleet: site.yml on lab nodes reached over SSH.

tools/lab/lab.sh brings up four container nodes from the stock lab image (sshd on loopback
ports, Ansible logging in as the sudo user `debian`, the lab's Debian mirror, CUDA repository and
SGLang wheelhouse mounted) and converges site.yml against them with the lab inventory's
settings, exactly as `make lab` does. Each node presents as the field report's box through a
stand-in nvidia-smi (8x RTX PRO 6000 Blackwell on PCIe), and runs SGLang 0.5.8, a release that
raises KeyError: 12 there without the patch. First, the nodes are what a fresh fleet gives: root
cannot log in, Ansible's user is not root, and the image lacks what the roles install. Node 3
also gets the CUDA 12.8 toolkit installed next to 13.0: a kept older toolkit is not drift, and
it is what the link can be switched back to. Then:
- the report on the converged fleet shows no drift and exits 0, and the lab's summary shows
  the patch keyed on capability 12, TP 8 and the field report's flags on every node;
- one node per drift kind is tampered with: SGLang reinstalled (the patch is gone), the unit
  file edited, /usr/local/cuda switched back to 12.8, the env file made world-readable; each
  drift appears on exactly that node, with its reason, and nowhere else;
- neither check run changes a byte on any node: hashes and metadata of everything the roles
  manage, the package and alternatives databases, and the running server's PID, before and
  after;
- a converge repairs all four and the report is clean again;
- then the newer drift kinds; a release with part of its package (its communicator among it)
  deleted and a replaced uv binary, each drift on its node alone with the files named, both
  installed again by a converge; a preflight failure, a converge and a check run as one slice
  of a sliced AWX job, a failed batch, the 0.5.23 release's crash policy outcomes, a rollback to
  what a killed run's rollback record kept, and fresh and broken nodes, each with its exact
  verdicts.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess

import pytest

from ansible_collections.blackwell.sglang.plugins.plugin_utils import drift
from conftest import ROOT, in_container, lab_env, running_lab

pytestmark = pytest.mark.lab

NODES = 4
PREFIX = "drift-accuracy"
PLAYBOOK = ROOT / "site.yml"
# The lab's release, reinstalled from the lab wheelhouse with the uv the role installed.
REINSTALL = ("/opt/sglang/uv/bin/uv pip install -q --python /opt/sglang/current/bin/python --reinstall "
             "--no-deps --no-index --find-links /srv/wheelhouse sglang==0.5.8")
PATCHED = ("/opt/sglang/releases/0.5.8/lib/python3.11/site-packages/sglang/srt/distributed/"
           "device_communicators/all_reduce_utils.py")

# node number -> (tampering, as root on the node; the drift the report must show there)
TAMPERS = {
    1: (REINSTALL,
        [("sglang_sm120_patch : Patch SGLang's capability dicts for the node's GPUs [capability 12]",
          # The report shortens the reason (it names both patched files) to its width.
          f"content of {PATCHED} would change (+6 -0 lines)..."),
         # The server runs the packages it started with, which the reinstall replaced.
         ("sglang_service : Restart sglang to load what changed under it, or to recover its health",
          drift._short("restart sglang: changed after the server started: "
                       "/opt/sglang/current/lib/python3.11/site-packages, "
                       "/opt/sglang/current/lib/python3.11/site-packages/sglang-0.5.8.dist-info"))]),
    2: ("sed -i 's/^TimeoutStopSec=.*/TimeoutStopSec=5/' /etc/systemd/system/sglang.service",
        [("sglang_service : Write the files the server starts from [/etc/systemd/system/sglang.service]",
          "content of /etc/systemd/system/sglang.service would change (+1 -1 lines)"),
         # The running server has not seen the edited unit: systemd reports it, and it is newer.
         ("sglang_service : Restart sglang to load what changed under it, or to recover its health",
          "restart sglang: systemd has not loaded the unit on disk (NeedDaemonReload); changed after "
          "the server started: /etc/systemd/system/sglang.service")]),
    3: ("update-alternatives --quiet --set cuda /usr/local/cuda-12.8",
        [("cuda13 : Select the CUDA toolkit for the links [/usr/local/cuda]",
          "alternatives: Set alternative '/usr/local/cuda-13.0' for 'cuda'.")]),
    4: ("chmod 0644 /etc/sglang/sglang.env",
        [("sglang_service : Write the secrets file",
          "would change (no_log: the task's details are hidden)")]),
}

# Everything site.yml manages on a node, content and metadata, the package, alternatives and
# account databases, and the server's process: check mode must leave all of it as it was.
SNAPSHOT = r"""
set -e
paths="/opt/sglang /etc/sglang /etc/systemd/system/sglang.service /etc/apt/sources.list.d
       /etc/apt/keyrings /etc/profile.d/cuda13.sh /etc/ld.so.conf.d/cuda13.conf
       /var/lib/dpkg/status /var/lib/dpkg/alternatives /etc/passwd /etc/group"
find $paths -type f -print0 | sort -z | xargs -0 sha256sum
find $paths -print0 | sort -z | xargs -0 stat -c '%n %a %U:%G %s %Y'
readlink /etc/alternatives/cuda /etc/alternatives/cuda-13 /usr/local/cuda
systemctl show -p ActiveState -p MainPID -p ExecMainStartTimestamp sglang.service
"""


def node(i: int) -> str:
    return f"{PREFIX}-{i:02d}"


def on_node(i: int, script: str) -> str:
    return in_container(node(i), script)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    work = tmp_path_factory.mktemp("fleet")
    # No test here looks at the first converge's batches: all nodes at once.
    env = lab_env(work, PREFIX, "2600", NODES, LAB_CONVERGE_ARGS="-e sglang_rollout_serial=100%")
    with running_lab(env):
        on_node(3, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q cuda-toolkit-12-8")
        yield {"env": env, "inventory": work / "inventory", "work": work}


PACKAGES_PROBE = r"""
for p in python3-venv python3-apt; do
  if dpkg-query -W -f '${db:Status-Abbrev}' $p 2>/dev/null | grep -q '^ii'; then echo "$p installed"; else echo "$p absent"; fi
done
echo "apt lists: $(ls /var/lib/apt/lists | wc -l)"
echo "CUDA keyrings: $(ls /etc/apt/keyrings /usr/share/keyrings | grep -ci cuda)"
"""


def ansible_id(fleet, *args: str) -> str:
    proc = subprocess.run(["ansible", "-i", str(fleet["inventory"]), node(1), "-m", "ansible.builtin.command",
                           "-a", "id -un", *args],
                          cwd=ROOT, env=fleet["env"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_nodes_are_stock_and_reached_as_a_sudo_user(fleet):
    key = fleet["work"] / "state" / "id_ed25519"
    ssh = ["ssh", "-i", str(key), "-p", "2601", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
           "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10"]
    root = subprocess.run([*ssh, "root@127.0.0.1", "true"], capture_output=True, text=True, check=False)
    assert root.returncode == 255
    assert "root@127.0.0.1: Permission denied (publickey)." in root.stderr
    assert subprocess.run([*ssh, "debian@127.0.0.1", "true"], check=False).returncode == 0
    # Ansible's connection user is the sudoer; only become makes it root.
    assert ansible_id(fleet) == "debian"
    assert ansible_id(fleet, "--become") == "root"
    # The image the nodes started from has none of what the roles install, no package lists
    # and no CUDA keyring; the converged nodes have what the roles installed.
    image = subprocess.run(["podman", "inspect", "--format", "{{.ImageName}}", node(1)],
                           capture_output=True, text=True, check=True).stdout.strip()
    stock = subprocess.run(
        ["podman", "run", "--rm", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096", image,
         "sh", "-c", PACKAGES_PROBE], capture_output=True, text=True, check=False).stdout.splitlines()
    assert stock == ["python3-venv absent", "python3-apt absent", "apt lists: 0", "CUDA keyrings: 0"]
    assert on_node(1, PACKAGES_PROBE).splitlines()[:2] == ["python3-venv installed", "python3-apt installed"]


def snapshot() -> dict:
    return {node(i): on_node(i, SNAPSHOT) for i in range(1, NODES + 1)}


def drift_report(fleet, name: str) -> tuple[int, dict, str]:
    json_path = fleet["work"] / f"{name}.json"
    json_path.unlink(missing_ok=True)
    proc = subprocess.run(
        [str(ROOT / "tools" / "drift-report"), "-i", str(fleet["inventory"]), "-p", str(PLAYBOOK),
         "--json", str(json_path), "--markdown", str(fleet["work"] / f"{name}.md")],
        cwd=ROOT, env=fleet["env"], capture_output=True, text=True, check=False)
    report = json.loads(json_path.read_text()) if json_path.exists() else {}
    return proc.returncode, report, proc.stdout + proc.stderr


def not_judged(host: dict) -> list:
    return sorted(f["label"] for f in host["not_judged"])


# A converged node is judged in full: each role ends right after its reads (meta end_role), so
# no step is passed whose outcome check mode could not know (the post-install re-read, the
# health waits after a restart). No restart is coming, so the NCCL smoke test is not asked for.
NOT_JUDGED: list = []


def test_converged_fleet_has_no_drift_and_check_changes_nothing(fleet):
    before = snapshot()
    code, report, output = drift_report(fleet, "clean")
    assert snapshot() == before
    assert code == 0, output
    assert sorted(report["hosts"]) == [node(i) for i in range(1, NODES + 1)]
    for name, host in report["hosts"].items():
        assert (host["status"], host["reason"]) == ("ok", ""), name
        assert host["drift"] == [], name
        assert not_judged(host) == NOT_JUDGED, name
    assert "No drift." in output


BOX = "8x NVIDIA RTX PRO 6000 Blackwell Server Edition, compute capability 12.0, topology pcie_only (gpu_facts)"
BOX_PCIE = "peer-to-peer ok, IOMMU passthrough, driver 580.95.05 (open kernel module)"
PATCH = ("SGLang 0.5.8, capability 12: TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES already present; "
         "TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM already present")


def lab_summary(fleet, name: str) -> dict:
    """tools/lab/summary.yml's report, as `make lab` prints it: node -> {field: value}."""
    path = fleet["work"] / f"{name}.txt"
    run = subprocess.run(["ansible-playbook", "-i", str(fleet["inventory"]), str(ROOT / "tools" / "lab" / "summary.yml"),
                          "-e", f"lab_summary_file={path}"],
                         cwd=ROOT, env=fleet["env"], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr
    return summary_fields(path.read_text())


def readme_summary() -> dict:
    """The node summary the lab's README shows as what `make lab` prints: {field: value}."""
    text = (ROOT / "tools" / "lab" / "README.md").read_text()
    block = text.split("```text\n", 1)[1].split("```", 1)[0]
    nodes = list(summary_fields(block).values())
    assert len(nodes) == 1, block
    return nodes[0]


def summary_fields(text: str) -> dict:
    nodes: dict = {}
    for line in text.splitlines():
        if line and not line.startswith(" "):
            current = nodes.setdefault(line, {})
        elif line.strip():
            field, _sep, value = line.strip().partition(":")
            current[field] = value.strip()
    return nodes


def test_nodes_present_as_the_field_report_box_and_run_its_flags(fleet):
    """No capability override in the lab: the patch keys on what gpu_facts reports (8x SM120 on
    PCIe, from the stand-in nvidia-smi), TP is the GPU count, and the unit carries the symmetric
    memory and fusion flags of the field report. 0.5.8 has no PCIe all-reduce to turn on."""
    summary = lab_summary(fleet, "summary")
    assert sorted(summary) == [node(i) for i in range(1, NODES + 1)]
    for name, fields in summary.items():
        assert fields["GPUs"] == BOX, name
        # The box's kernel command line and IOMMU units, from the recording: not the IOMMU of
        # the machine the lab runs on.
        assert fields["PCIe"] == BOX_PCIE, name
        assert fields["Patch"] == PATCH, name
        assert fields["Service"] == "active (running)", name
        argv = fields["ExecStart"].split()
        assert argv[argv.index("--tp-size") + 1] == "8", name
        assert {"--enable-torch-symm-mem", "--enable-flashinfer-allreduce-fusion"} <= set(argv), name
        assert "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE" not in fields["Environment"], name
    # What the lab's README shows a newcomer is what a lab node really prints.
    assert readme_summary() == summary[node(1)]


def tampered_then_checked(fleet, tampers: dict, name: str) -> tuple[dict, str]:
    """Each node's tamper (tampers: node number to (command, expected)) done, then a check that
    finds drift and changes no byte; its report and output."""
    for i, (tamper, _expected) in tampers.items():
        on_node(i, tamper)
    before = snapshot()
    code, report, output = drift_report(fleet, name)
    assert snapshot() == before
    assert code == 1, output
    return report, output


def test_each_tampered_node_shows_exactly_its_drift_and_check_changes_nothing(fleet):
    report, _output = tampered_then_checked(fleet, TAMPERS, "tampered")
    for i, (_tamper, expected) in TAMPERS.items():
        host = report["hosts"][node(i)]
        assert host["status"] == "drift", node(i)
        assert [(f["label"], f["reason"]) for f in host["drift"]] == expected, node(i)
    assert report["summary"]["drifted_hosts"] == NODES
    assert report["summary"]["drifted_tasks"] == sum(len(drift) for _tamper, drift in TAMPERS.values())
    # Every node went through the preflight and all its converge batches.
    assert report["summary"]["not_checked_hosts"] == 0
    markdown = (fleet["work"] / "tampered.md").read_text()
    assert f"| {node(4)} | sglang_service : Write the secrets file |" in markdown


def converge(fleet, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["ansible-playbook", "-i", str(fleet["inventory"]), str(PLAYBOOK), *args],
                          cwd=ROOT, env={**fleet["env"], **(env or {})}, capture_output=True,
                          text=True, check=False)


def host_vars(fleet, i: int, content: str | None) -> None:
    """Settings of one node only, as an operator gives them: a host_vars file of the inventory."""
    path = fleet["inventory"] / "host_vars" / f"{node(i)}.yml"
    if content is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(exist_ok=True)
    path.write_text(content)


def test_converge_repairs_every_drift(fleet):
    repaired = converge(fleet, "-e", "sglang_rollout_serial=100%")
    assert repaired.returncode == 0, repaired.stdout[-20000:] + repaired.stderr
    assert on_node(3, "readlink /etc/alternatives/cuda").strip() == "/usr/local/cuda-13.0"
    assert on_node(4, "stat -c %a /etc/sglang/sglang.env").strip() == "600"
    code, report, output = drift_report(fleet, "repaired")
    assert code == 0, output
    assert report["summary"]["drifted_hosts"] == 0


SITE_PACKAGES = "/opt/sglang/releases/0.5.8/lib/python3.11/site-packages"
RESTART = "sglang_service : Restart sglang to load what changed under it, or to recover its health"
# Drift that no file task of the roles shows: a drop-in that replaces ExecStart, a file the
# running server loaded changed under it, a server that runs but still fails /health after the
# time it is given to load its model (node 3's sglang_service_health_timeout, 8 s here; within
# it, the engine is loading: a note, not drift), a change of the packages asked for beside SGLang
# (a setting of node 4, not a change on it).
UNTIL_503 = (
    "for i in $(seq 300); do python3 -c 'import sys, urllib.error, urllib.request as u\n"
    "try:\n    u.urlopen(\"http://127.0.0.1:30000/health\", timeout=2)\n"
    "except urllib.error.HTTPError as e:\n    sys.exit(e.code != 503)\n"
    "except OSError:\n    pass\n"
    "sys.exit(1)' && break; sleep 0.2; done; test $i -lt 300")
NEW_KINDS = {
    1: ("mkdir -p /etc/systemd/system/sglang.service.d && "
        "printf '[Service]\\nExecStart=\\nExecStart=/bin/sleep infinity\\n' "
        ">/etc/systemd/system/sglang.service.d/override.conf && systemctl daemon-reload",
        [("sglang_service : Remove drop-ins that change the unit "
          "[/etc/systemd/system/sglang.service.d/override.conf]",
          "/etc/systemd/system/sglang.service.d/override.conf would be removed")]),
    2: (f"sleep 1 && touch {PATCHED}",
        [(RESTART, drift._short("restart sglang: changed after the server started: "
                                + PATCHED.replace("/releases/0.5.8/", "/current/")))]),
    # The stand-in reads its configuration when it starts: "serve" is written back only once the
    # restarted one answers 503 (on a loaded machine it may start seconds after the restart).
    3: ("echo '{\"mode\": \"unhealthy\"}' >/etc/sglang-standin/config.json && systemctl restart sglang && "
        f"{UNTIL_503} && echo '{{\"mode\": \"serve\", \"health_delay\": 1.0}}' >/etc/sglang-standin/config.json && "
        "sleep 8",
        [(RESTART, "restart sglang: running but /health answered 503")]),
    # Asserted on its own below: a new release directory, named for the changed request.
    4: (None, None),
}
RELEASE_PATH = re.compile(r"/opt/sglang/releases/0\.5\.8-[0-9a-f]{10}")


UNHEALTHY_AFTER = 8


def test_each_new_drift_kind_shows_on_exactly_its_node(fleet):
    for i, (tamper, _drift) in NEW_KINDS.items():
        if tamper:
            on_node(i, tamper)
    # uv's wheel is in the lab wheelhouse, so the repair can install it.
    host_vars(fleet, 4, "sglang_install_extra_packages: [uv==0.13.9]\n")
    host_vars(fleet, 3, f"sglang_service_health_timeout: {UNHEALTHY_AFTER}\n")
    before = snapshot()
    code, report, output = drift_report(fleet, "new-kinds")
    assert snapshot() == before
    assert code == 1, output
    for i, (_tamper, expected) in NEW_KINDS.items():
        host = report["hosts"][node(i)]
        assert host["status"] == "drift", node(i)
        if expected is not None:
            assert [(f["label"], f["reason"]) for f in host["drift"]] == expected, node(i)
    # A changed request is a release of its own: a venv to make beside the one that serves, and
    # nothing to write into that one (its request files were the drift before). What goes into
    # the new directory, which check mode does not make, and the deploy of a release that is not
    # there yet are not judged.
    changed_request = report["hosts"][node(4)]
    assert [f["label"] for f in changed_request["drift"]] == ["sglang_install : Create the release's venv with uv"]
    assert changed_request["drift"][0]["reason"].startswith("command: "), changed_request["drift"]
    assert {"sglang_install : Check that the venv holds the pinned SGLang",
            "sglang_service : Spell the launch arguments, write the unit and start sglang"} <= set(not_judged(changed_request))


def test_converge_repairs_the_new_drift_kinds(fleet):
    entries = f"find {SITE_PACKAGES} -maxdepth 1 -printf '%f %T@\\n' | sort"
    serving = on_node(4, entries)
    started = launches(4)
    try:
        repaired = converge(fleet, "-e", "sglang_rollout_serial=100%")
    finally:
        host_vars(fleet, 3, None)
    assert repaired.returncode == 0, repaired.stdout[-20000:] + repaired.stderr
    assert on_node(1, "ls /etc/systemd/system/sglang.service.d 2>/dev/null | wc -l").strip() == "0"
    assert on_node(3, "python3 -c \"import urllib.request as u; "
                      "print(u.urlopen('http://127.0.0.1:30000/health').status)\"").strip() == "200"
    # Node 4's changed request went into a release of its own, which the engine was restarted
    # onto behind the gate; the release that served before stays beside it, untouched, to go back to.
    release = on_node(4, "readlink /opt/sglang/current").strip()
    assert RELEASE_PATH.fullmatch(release), release
    assert sorted(on_node(4, "ls /opt/sglang/releases").split()) == ["0.5.8", release.rsplit("/", 1)[1]]
    site = f"{release}/lib/python3.11/site-packages"
    assert on_node(4, f"ls -d {site}/uv-0.13.9.dist-info").strip() == f"{site}/uv-0.13.9.dist-info"
    assert on_node(4, entries) == serving
    restarted = [json.loads(line) for line in on_node(4, f"tail -n +{started + 1} /var/lib/sglang-standin/launches.jsonl").splitlines()]
    assert [launch["python"] for launch in restarted] == [f"{release}/bin/python"], restarted
    code, report, output = drift_report(fleet, "new-kinds-repaired")
    assert code == 0, output


# A release is installed only when its files are (their RECORD): part of SGLang's package deleted
# on node 1 (a release the patch must not take for one before the communicator), uv's binary
# replaced on node 2 (the next install would run it as root). Each is drift on its node alone,
# named by its files, and a converge installs each again before anything switches.
UV_BIN = "/opt/sglang/uv/bin/uv"
INCOMPLETE = {
    1: (f"rm -r {SITE_PACKAGES}/sglang/lang {SITE_PACKAGES}/sglang/srt/distributed/device_communicators/torch_symm_mem.py",
        "SGLang 0.5.8 in /opt/sglang/releases/0.5.8 differs from its RECORD: 13 files missing ("),
    2: (f"cp /bin/true {UV_BIN}",
        "uv 0.13.9 in /opt/sglang/uv differs from its RECORD: 1 file altered (../../../bin/uv); uv is installed again"),
}
REINSTALL_TASK = "sglang_install : Report what is installed again, and why"


def test_an_incomplete_release_and_a_replaced_uv_show_on_exactly_their_nodes(fleet):
    report, output = tampered_then_checked(fleet, INCOMPLETE, "incomplete")
    for i in range(1, NODES + 1):
        host = report["hosts"][node(i)]
        if i not in INCOMPLETE:
            assert (host["status"], host["drift"]) == ("ok", []), node(i)
            continue
        assert host["status"] == "drift", node(i)
        assert [f["label"] for f in host["drift"]] == [REINSTALL_TASK], host["drift"]
        assert host["drift"][0]["reason"].startswith(INCOMPLETE[i][1]), host["drift"]
    # The release without its communicator is a broken one, not one before 0.5.5: the patch is
    # not judged there, and never called a release with nothing to patch.
    assert "nothing to patch" not in output
    assert any(f["label"].startswith("sglang_sm120_patch : Refuse") for f in report["hosts"][node(1)]["not_judged"])


def test_converge_installs_the_incomplete_release_and_uv_again(fleet):
    started = {i: launches(i) for i in INCOMPLETE}
    repaired = converge(fleet, "-e", "sglang_rollout_serial=100%")
    assert repaired.returncode == 0, repaired.stdout[-20000:] + repaired.stderr
    assert on_node(1, f"ls {SITE_PACKAGES}/sglang/lang/api.py").strip() == f"{SITE_PACKAGES}/sglang/lang/api.py"
    # Installed again, then patched again, and the server restarted onto it.
    assert "# added by blackwell.sglang.sglang_capmap" in on_node(
        1, f"cat {SITE_PACKAGES}/sglang/srt/distributed/device_communicators/torch_symm_mem.py")
    assert launches(1) > started[1]
    # uv is not what the server runs: node 2's server was left alone.
    assert launches(2) == started[2]
    assert on_node(2, f"{UV_BIN} --version").split()[:2] == ["uv", "0.13.9"]
    code, report, output = drift_report(fleet, "incomplete-repaired")
    assert code == 0, output
    assert report["summary"]["drifted_hosts"] == 0


def test_a_node_failing_the_preflight_of_a_check_stops_no_other_node(fleet):
    """In a converge the preflight is any_errors_fatal; a check changes nothing, so the node that
    fails it is reported failed and every other node is checked to the end."""
    # Node 2's nvidia-smi answers like one whose driver is gone: no GPUs where GPUs are required.
    host_vars(fleet, 2, "sglang_preflight_nvidia_smi: /usr/bin/false\n")
    try:
        before = snapshot()
        code, report, output = drift_report(fleet, "preflight-failed")
        assert snapshot() == before
    finally:
        host_vars(fleet, 2, None)
    assert code == 2, output
    assert sorted(report["hosts"]) == [node(i) for i in range(1, NODES + 1)]
    assert report["hosts"][node(2)]["status"] == "failed"
    assert [f["label"] for f in report["hosts"][node(2)]["failures"]] == ["Refuse a node that is not ready for the rollout"]
    assert report["hosts"][node(2)]["failures"][0]["reason"].startswith(f"preflight: {node(2)} is not ready for the rollout:")
    for i in (1, 3, 4):
        assert (report["hosts"][node(i)]["status"], report["hosts"][node(i)]["reason"]) == ("ok", ""), i
    assert (report["summary"]["failed_hosts"], report["summary"]["ok_hosts"], report["summary"]["not_checked_hosts"]) == (1, 3, 0)


# AWX's meta variables of a job that a sliced job template started (docs/awx.md): launched by a
# workflow job that AWX names after the template. Nodes 1 and 3 stand for the slice's hosts.
AWX_SLICE = {"awx_job_id": 1042, "awx_job_launch_type": "workflow", "awx_workflow_job_id": 1041,
             "awx_workflow_job_name": "SGLang rollout", "awx_job_template_id": 7,
             "awx_job_template_name": "SGLang rollout"}
AWX_SEEN = ("AWX started it from a workflow job named after its job template ('SGLang rollout'), as it starts"
            " each slice of a sliced job template")


def test_a_sliced_awx_converge_is_refused_before_any_node_changes_and_a_sliced_check_runs(fleet):
    """site.yml's first play refuses the converge of one slice before anything connects to a node,
    naming the reason and the way to run it; the same slice checked runs to the end, each node
    clean, with the note that says what a slice leaves out, and changes nothing either."""
    values = fleet["work"] / "awx-slice.json"
    values.write_text(json.dumps(AWX_SLICE))
    slice_hosts = f"{node(1)},{node(3)}"
    before = snapshot()
    run = converge(fleet, "--limit", slice_hosts, "-e", f"@{values}")
    assert snapshot() == before
    assert run.returncode == 2, run.stdout[-5000:]
    message = (
        f"preflight: this converge is one slice of a sliced AWX job: {AWX_SEEN}. Each slice would roll out on its"
        " own, side by side with the others: batches of sglang_rollout_serial nodes in every slice at once, a"
        " failed node stopping its own slice only, and the router's workers and the Prometheus targets known"
        " from its own hosts only. Run the converge as one job (the job template's job slicing at 1), or as one"
        " job per group, one after the other, each limited to its group (--limit); a check (--check) may be"
        " sliced. A site that accepts the risk sets sglang_rollout_allow_sliced: true and"
        " sglang_rollout_slice_count as extra vars. Nothing has been changed on any node.")
    assert f'"msg": {json.dumps(message)}' in run.stdout, run.stdout[-5000:]
    # The first play stopped the run: no fact gathered, no other play started.
    assert "TASK [Gathering Facts]" not in run.stdout
    assert "PLAY [Check the nodes before the rollout]" not in run.stdout

    json_path = fleet["work"] / "awx-slice-check.json"
    json_path.unlink(missing_ok=True)
    # Where the whole run writes the fleet's Prometheus targets, a slice leaves them out: noted.
    check = converge(fleet, "--check", "--diff", "--limit", slice_hosts, "-e", f"@{values}",
                     "-e", "sglang_prometheus_sd_path=/etc/prometheus/file_sd/sglang.json",
                     env={"ANSIBLE_CALLBACKS_ENABLED": "blackwell.sglang.drift_report",
                          "BLACKWELL_DRIFT_REPORT_JSON": str(json_path)})
    assert snapshot() == before
    assert check.returncode == 0, check.stdout[-5000:]
    report = json.loads(json_path.read_text())
    assert sorted(report["hosts"]) == [node(1), node(3)]
    note = (f"this check is one slice of a sliced AWX job ({AWX_SEEN}): the router's worker list and the"
            " Prometheus targets were not checked, as a slice holds part of the fleet; run blackwell.sglang.router"
            " and blackwell.sglang.prometheus as one job without slices.")
    for name, host in report["hosts"].items():
        assert (host["status"], host["reason"], host["drift"]) == ("ok", "", []), name
        assert host["notes"]["slicing"] == [note], name
    # The play that needs the whole fleet selected no host of the slice.
    assert re.search(r"^PLAY \[Write the fleet's Prometheus targets\] \*+\nskipping: no hosts matched$",
                     check.stdout, re.M), check.stdout[-5000:]


def test_a_failed_batch_leaves_the_later_batches_not_checked(fleet):
    """A rollout (not a check) with the plugin on: node 2's install fails, the batches after it
    never start, and the report says so, of node 1 too: the run stopped before the fleet's last
    play (the Prometheus targets) reached it."""
    host_vars(fleet, 2, 'sglang_install_version: "9.9.9"\n')
    json_path = fleet["work"] / "rollout.json"
    try:
        run = converge(fleet, "-e", "sglang_rollout_serial=1",
                       env={"ANSIBLE_CALLBACKS_ENABLED": "blackwell.sglang.drift_report",
                            "BLACKWELL_DRIFT_REPORT_JSON": str(json_path)})
    finally:
        host_vars(fleet, 2, None)
    assert run.returncode == 2, run.stdout[-5000:]
    report = json.loads(json_path.read_text())
    statuses = {name: (host["status"], host["reason"]) for name, host in report["hosts"].items()}
    why = (f"the run stopped after {node(2)} failed 'sglang_install : Fail with what the installer said' in play "
           f"'Converge SGLang nodes batch by batch' (max_fail_percentage: 0)")
    # Node 1 converged in its batch, but the run never reached the last play that selects it too
    # (the fleet's Prometheus targets, playbooks/prometheus.yml): not every play checked it.
    assert statuses == {node(1): ("not checked", why), node(2): ("failed", ""),
                        node(3): ("not checked", why), node(4): ("not checked", why)}
    assert [t["label"] for t in report["hosts"][node(1)]["drift"]] == [], report["hosts"][node(1)]
    failures = report["hosts"][node(2)]["failures"]
    assert [f["label"] for f in failures] == ["sglang_install : Fail with what the installer said"]
    assert failures[0]["reason"].startswith("sglang_install: installing SGLang 9.9.9 into /opt/sglang/releases/9.9.9 failed:"), failures
    # The release's venv made for the failed install went with it.
    assert on_node(2, "ls /opt/sglang/releases").split() == ["0.5.8"]
    # The installer's own failure was handled by the rescue that reported it.
    assert "sglang_install : Install the pinned SGLang release 9.9.9" in not_judged(report["hosts"][node(2)])
    # Node 2 serves the release it had, and takes the converge that follows.
    repaired = converge(fleet, "--limit", node(2))
    assert repaired.returncode == 0, repaired.stdout[-20000:] + repaired.stderr


# The fleet's own playbooks around one node losing its sshd after the preflight reached it: the
# node drops off the network between the check and its batch.
LOSE_NODE_2 = f"""
- name: Check every node before anything changes
  ansible.builtin.import_playbook: blackwell.sglang.preflight

- name: Node 2 drops off the network
  hosts: {PREFIX}-02
  gather_facts: false
  tasks:
    - name: Stop sshd and end its sessions
      ansible.builtin.command: podman exec {PREFIX}-02 sh -c 'systemctl stop ssh.socket ssh.service; pkill -x sshd; true'
      delegate_to: localhost
      changed_when: false

- name: Converge the nodes batch by batch
  ansible.builtin.import_playbook: blackwell.sglang.node
"""


def launches(i: int) -> int:
    return int(on_node(i, "wc -l </var/lib/sglang-standin/launches.jsonl").strip())


def test_an_unreachable_node_stops_the_rollout(fleet):
    """Two nodes per batch, each node a restart (one more launch argument for every node). In
    the first batch node 1 restarts and node 2 is unreachable; Ansible would go on with the
    second batch (it stops a serial play by itself only when a whole batch is lost), and the
    node play refuses to: nodes 3 and 4 are never touched."""
    playbook = fleet["work"] / "lose-node-2.yml"
    playbook.write_text(LOSE_NODE_2)
    units = {i: on_node(i, "sha256sum /etc/systemd/system/sglang.service") for i in (3, 4)}
    started = {i: launches(i) for i in (1, 3, 4)}
    try:
        run = subprocess.run(["ansible-playbook", "-i", str(fleet["inventory"]), str(playbook),
                              "-e", "sglang_rollout_serial=2", "-e", '{"sglang_service_extra_args": ["--log-level", "info"]}'],
                             cwd=ROOT, env=fleet["env"], capture_output=True, text=True, check=False)
    finally:
        on_node(2, "systemctl start ssh.service")
    assert run.returncode != 0, run.stdout[-5000:]
    assert launches(1) == started[1] + 1
    assert re.search(rf"^{node(2)}\s*: ok=\d+\s+changed=0\s+unreachable=1\s", run.stdout, re.M), run.stdout[-3000:]
    assert (f"rollout stopped before this batch ({node(3)}, {node(4)}) changed anything: {node(2)} became "
            f"unreachable during the rollout") in run.stdout, run.stdout[-5000:]
    for i in (3, 4):
        assert on_node(i, "sha256sum /etc/systemd/system/sglang.service") == units[i], node(i)
        assert launches(i) == started[i], node(i)
    # Back to the lab's settings: only node 1 changed.
    back = converge(fleet, "--limit", node(1))
    assert back.returncode == 0, back.stdout[-20000:]


# The stand-in's record of the first 200 each server gave on a health path, with the path.
HEALTHY = "/var/lib/sglang-standin/healthy.jsonl"


def test_the_newest_release_shows_the_crash_policy_and_the_pcie_all_reduce(fleet):
    """LAB_SGLANG_VERSION=0.5.23 on one node: its FlashInfer fusion raises on SM120, so the
    default strict policy refuses before the unit is written; warn deploys it without the fusion
    flag, and with the PCIe all-reduce the release ships, because the topology is pcie_only."""
    unit_before = on_node(2, "sha256sum /etc/systemd/system/sglang.service")
    strict = converge(fleet, "--limit", node(2), env={"LAB_SGLANG_VERSION": "0.5.23"})
    assert strict.returncode == 2, strict.stdout[-5000:]
    assert ('sglang_service: refusing to deploy: SGLang 0.5.23 raises "FlashInfer allreduce fusion requires '
            'SM90 or SM10X NVIDIA GPUs." at start-up, and this node has compute capability 12 GPUs') in strict.stdout
    assert on_node(2, "sha256sum /etc/systemd/system/sglang.service") == unit_before
    warn = converge(fleet, "--limit", node(2), env={"LAB_SGLANG_VERSION": "0.5.23", "LAB_CRASH_POLICY": "warn"})
    assert warn.returncode == 0, warn.stdout[-20000:]
    assert "sglang_service: WARNING: leaving FlashInfer all-reduce fusion out: SGLang 0.5.23" in warn.stdout
    fields = lab_summary(fleet, "summary-0.5.23")[node(2)]
    argv = fields["ExecStart"].split()
    assert "--enable-torch-symm-mem" in argv
    assert not [word for word in argv if "fusion" in word], argv
    assert "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1" in fields["Environment"].split()
    assert fields["Patch"].startswith("SGLang 0.5.23, capability 12: ")
    # Its gate asked /ready, which 0.5.23 serves (the engine's first 200 answered that path).
    assert json.loads(on_node(2, f"tail -n 1 {HEALTHY}"))["path"] == "/ready"
    # Back to the lab's release, which has no /ready: its gate asks /health.
    back = converge(fleet, "--limit", node(2))
    assert back.returncode == 0, back.stdout[-20000:]
    assert lab_summary(fleet, "summary-back")[node(2)]["Patch"] == PATCH
    assert json.loads(on_node(2, f"tail -n 1 {HEALTHY}"))["path"] == "/health"


STANDIN_CONFIG = "/etc/sglang-standin/config.json"
SERVE = '{"mode": "serve", "health_delay": 1.0}'
REFUSE_0_5_23 = '{"mode": "serve", "health_delay": 1.0, "refuse_versions": ["0.5.23"]}'
HEALTH = "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:30000/health').status)\""


def test_an_upgrade_the_engine_refuses_is_rolled_back_and_the_next_batch_never_touched(fleet):
    """Release 0.5.23 on nodes 1 to 3 in batches of one, with the stand-in told to refuse that
    release, as an engine that crashes at start-up would. Node 1 installs it beside 0.5.8,
    patches it, switches to it and fails its gate as soon as systemd gives up; it goes back to
    0.5.8 with its previous unit and serves again, and the host fails saying so. Nodes 2 and 3
    are never touched, and node 1 has no drift from the lab's settings afterwards."""
    for i in (1, 2, 3):
        on_node(i, f"echo '{REFUSE_0_5_23}' >{STANDIN_CONFIG}")
    units = {i: on_node(i, "sha256sum /etc/systemd/system/sglang.service") for i in (1, 2, 3)}
    started = {i: launches(i) for i in (1, 2, 3)}
    try:
        run = converge(fleet, "--limit", ",".join(node(i) for i in (1, 2, 3)), "-e", "sglang_rollout_serial=1",
                       env={"LAB_SGLANG_VERSION": "0.5.23", "LAB_CRASH_POLICY": "warn"})
    finally:
        for i in (1, 2, 3):
            on_node(i, f"echo '{SERVE}' >{STANDIN_CONFIG}")
    assert run.returncode == 2, run.stdout[-5000:]
    assert (f"sglang_service: sglang.service on {node(1)} failed (systemd gave up restarting it: failed/failed) "
            "(/ready: no answer) after the switch to /opt/sglang/releases/0.5.23 and a change of its unit; "
            "rolled back to the previous release /opt/sglang/releases/0.5.8 with its previous unit, which answers "
            "/health again: the node serves what it served before. The rollout stops here. "
            "Last lines of its journal: ") in run.stdout, run.stdout[-5000:]
    # Node 1: the new release stays beside the old one; the link, the unit and the engine are back.
    assert sorted(on_node(1, "ls /opt/sglang/releases").split()) == ["0.5.23", "0.5.8"]
    assert on_node(1, "readlink /opt/sglang/current").strip() == "/opt/sglang/releases/0.5.8"
    assert on_node(1, "sha256sum /etc/systemd/system/sglang.service") == units[1]
    tried = [json.loads(line) for line in on_node(1, f"tail -n +{started[1] + 1} /var/lib/sglang-standin/launches.jsonl").splitlines()]
    assert [(launch["sglang_version"], launch["mode"]) for launch in tried] == [("0.5.23", "refused")] * 3 + [("0.5.8", "serve")]
    assert tried[-1]["python"] == "/opt/sglang/releases/0.5.8/bin/python"
    assert on_node(1, HEALTH).strip() == "200"
    # The next batches: not a file, not a launch.
    for i in (2, 3):
        assert on_node(i, "sha256sum /etc/systemd/system/sglang.service") == units[i], node(i)
        assert launches(i) == started[i], node(i)
        assert on_node(i, "readlink /opt/sglang/current").strip() == "/opt/sglang/releases/0.5.8", node(i)
    assert on_node(3, "ls /opt/sglang/releases").split() == ["0.5.8"]
    code, report, output = drift_report(fleet, "rolled-back")
    assert code == 0, output
    # A link switched by hand behind the running server: the server still runs 0.5.8 (the
    # launcher pinned it), and the check says so, beside the link it would point back.
    on_node(1, "ln -sfn /opt/sglang/releases/0.5.23 /opt/sglang/current")
    try:
        code, report, output = drift_report(fleet, "switched-by-hand")
    finally:
        on_node(1, "ln -sfn /opt/sglang/releases/0.5.8 /opt/sglang/current")
    assert code == 1, output
    drifted = [(f["label"], f["reason"]) for f in report["hosts"][node(1)]["drift"]]
    assert (RESTART, drift._short("restart sglang: runs /opt/sglang/releases/0.5.8 while /opt/sglang/current "
                                  "points at /opt/sglang/releases/0.5.23")) in drifted, drifted
    assert "sglang_service : Point the active-release link at the release to deploy [/opt/sglang/current]" in [
        entry[0] for entry in drifted]


RECORD = "/var/lib/blackwell-sglang/rollback"
SWITCH_TASK = "TASK [blackwell.sglang.sglang_service : Point the active-release link at the release to deploy]"


def converge_killed_after_the_switch(fleet, env: dict) -> str:
    """A converge of node 1, killed (with its SSH connections) as soon as it has reported the
    active-release link switched, so before any restart; its output up to then."""
    run = subprocess.Popen(["ansible-playbook", "-i", str(fleet["inventory"]), str(PLAYBOOK), "--limit", node(1)],
                           cwd=ROOT, env={**fleet["env"], **env}, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen, at_switch = [], False
    try:
        for line in run.stdout:
            seen.append(line)
            at_switch = at_switch or line.startswith(SWITCH_TASK)
            if at_switch and line.startswith(f"changed: [{node(1)}]"):
                os.killpg(run.pid, signal.SIGKILL)
                break
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    output = "".join(seen)
    assert at_switch and seen[-1].startswith("changed:"), output[-5000:]
    return output


def test_a_run_killed_after_the_switch_is_rolled_back_by_the_next_failed_gate(fleet):
    """Node 1 serves 0.5.8 (0.5.23 is installed beside it). A converge to 0.5.23 is killed right
    after it switched the link, before the restart: the rollback record it wrote first is left,
    root's. A check reports the record, and changes nothing; keep_releases 1 is refused while
    the server runs 0.5.8 and the record names it. Then a converge with the stand-in refusing
    0.5.23 restarts onto the link's 0.5.23, fails its gate and goes back to what the record
    kept, though this run switched nothing: the link, the unit, the engine on 0.5.8, serving,
    the record gone."""
    upgrade = {"LAB_SGLANG_VERSION": "0.5.23", "LAB_CRASH_POLICY": "warn"}
    unit = on_node(1, "sha256sum /etc/systemd/system/sglang.service")
    started = launches(1)
    converge_killed_after_the_switch(fleet, upgrade)
    # The task the kill cut short may still be running on the node, its connection gone.
    on_node(1, "for i in $(seq 60); do pgrep -f '[A]nsiballZ|[B]ECOME-SUCCESS' >/dev/null || exit 0; sleep 0.5; done; exit 1")
    assert on_node(1, "readlink /opt/sglang/current").strip() == "/opt/sglang/releases/0.5.23"
    assert on_node(1, f"stat -c '%U %a' {RECORD} {RECORD}/record.json").split() == ["root", "700", "root", "600"]
    record = json.loads(on_node(1, f"cat {RECORD}/record.json"))
    assert record["release"] == "/opt/sglang/releases/0.5.8"
    assert launches(1) == started
    before = on_node(1, SNAPSHOT + f"find {RECORD} -type f -print0 | sort -z | xargs -0 sha256sum")

    check = converge(fleet, "--check", "-v", "--limit", node(1), env=upgrade)
    assert check.returncode == 0, check.stdout[-5000:]
    assert (f"a rollout that did not finish left its rollback record {RECORD} (saved {record['saved']}, back to "
            "/opt/sglang/releases/0.5.8)") in check.stdout, check.stdout[-5000:]
    refused = converge(fleet, "--limit", node(1), "-e", "sglang_install_keep_releases=1", env=upgrade)
    assert refused.returncode == 2, refused.stdout[-5000:]
    assert ("sglang_install_keep_releases must be at least 2 while a service uses these releases "
            "(/opt/sglang/releases/0.5.8 (running), /opt/sglang/releases/0.5.8 (the rollback target)): a "
            "rollback needs the release it goes back to beside the one installed") in refused.stdout, refused.stdout[-5000:]
    assert on_node(1, SNAPSHOT + f"find {RECORD} -type f -print0 | sort -z | xargs -0 sha256sum") == before

    on_node(1, f"echo '{REFUSE_0_5_23}' >{STANDIN_CONFIG}")
    try:
        run = converge(fleet, "--limit", node(1), env=upgrade)
    finally:
        on_node(1, f"echo '{SERVE}' >{STANDIN_CONFIG}")
    assert run.returncode == 2, run.stdout[-5000:]
    # The module's warning: on standard error, wrapped to the terminal's width.
    assert "holds the rollback record of a rollout that did not finish" in " ".join(run.stderr.split()), run.stderr[-5000:]
    assert ("(/ready: no answer) after the switch to /opt/sglang/releases/0.5.23 and a change of its unit; "
            "rolled back to the previous release /opt/sglang/releases/0.5.8 with its previous unit, which answers "
            "/health again: the node serves what it served before.") in run.stdout, run.stdout[-5000:]
    assert on_node(1, "readlink /opt/sglang/current").strip() == "/opt/sglang/releases/0.5.8"
    assert on_node(1, "sha256sum /etc/systemd/system/sglang.service") == unit
    tried = [json.loads(line) for line in on_node(1, f"tail -n +{started + 1} /var/lib/sglang-standin/launches.jsonl").splitlines()]
    assert [(launch["sglang_version"], launch["mode"]) for launch in tried] == [("0.5.23", "refused")] * 3 + [("0.5.8", "serve")]
    assert on_node(1, HEALTH).strip() == "200"
    assert on_node(1, f"test -e {RECORD} && echo left || echo gone").strip() == "gone"


CUDA_RECORD = "/etc/sglang/cuda-toolkit"
REFUSE_CUDA_13_5 = '{"mode": "serve", "health_delay": 1.0, "refuse_cuda": ["13.5"]}'
CUDA_STATE = ("readlink /etc/alternatives/cuda /etc/alternatives/cuda-13; cat " + CUDA_RECORD + "; "
              "dpkg-query -W -f '${db:Status-Abbrev} ${Package}\\n' 'cuda-toolkit-13-*' 2>/dev/null | grep -v config-common | sort")


def cuda_state(i: int) -> list:
    return on_node(i, CUDA_STATE).split("\n")[:-1]


def launched(i: int, since: int) -> list:
    """(SGLang version, CUDA release, mode) of each launch of node i after the first `since`."""
    lines = on_node(i, f"tail -n +{since + 1} /var/lib/sglang-standin/launches.jsonl").splitlines()
    return [(launch["sglang_version"], launch["cuda"], launch["mode"]) for launch in map(json.loads, lines)]


def cuda_version(fleet, version: str | None) -> None:
    """cuda13_version for the whole fleet, as an operator sets it: a variable of the group all, in
    an inventory file of its own beside the nodes' (whose host_vars other tests write)."""
    path = fleet["inventory"] / "cuda-version.yml"
    if version is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(f'all:\n  vars:\n    cuda13_version: "{version}"\n')


ON_13_0 = ["/usr/local/cuda-13.0", "/usr/local/cuda-13.0", "/usr/local/cuda-13.0", "hi  cuda-toolkit-13-0"]
ON_13_5 = ["/usr/local/cuda-13.5", "/usr/local/cuda-13.5", "/usr/local/cuda-13.5",
           "hi  cuda-toolkit-13-0", "hi  cuda-toolkit-13-5"]


def test_a_cuda_minor_upgrade_rolls_out_behind_the_health_gate_and_a_failed_gate_switches_back(fleet):
    """The fleet serves on CUDA 13.0; cuda13_version 13.5 is set for every node (a real nvcc
    13.5 from NVIDIA's wheel, in the lab's CUDA repository). A check reports the move on every
    node and changes nothing. The rollout, one node per batch, with node 2's engine refusing
    13.5 (the stand-in asks the real nvcc under CUDA_HOME, as a JIT build would): node 1 installs
    13.5 beside 13.0, its links move, its server restarts on 13.5 and passes its gate; node 2
    fails its gate, its links go back to 13.0, which stayed installed, and it serves again on
    13.0; nodes 3 and 4 are not touched. Once node 2's engine takes 13.5, the rollout finishes
    and a check is clean; setting 13.0 again moves the fleet back the same way (all nodes in one
    batch, after the batches above)."""
    try:
        cuda_version(fleet, "13.5")
        before = snapshot()
        code, report, output = drift_report(fleet, "cuda-13.5")
        assert snapshot() == before
        assert code == 1, output
        for i in range(1, NODES + 1):
            assert [(f["label"], f["reason"]) for f in report["hosts"][node(i)]["drift"]] == [
                ("cuda13 : Install the toolkit package",
                 "package would install: cuda-nvcc-13-5 cuda-toolkit-13-5 cuda-toolkit-13-5-config-common"),
                (f"sglang_service : Write the files the server starts from [{CUDA_RECORD}]",
                 f"content of {CUDA_RECORD} would change (+1 -1 lines)")], node(i)
        for i in range(1, NODES + 1):
            assert cuda_state(i) == ON_13_0, node(i)

        started = {i: launches(i) for i in range(1, NODES + 1)}
        on_node(2, f"echo '{REFUSE_CUDA_13_5}' >{STANDIN_CONFIG}")
        try:
            run = converge(fleet, "-e", "sglang_rollout_serial=1", "-e", "sglang_service_restart_sec=1")
        finally:
            on_node(2, f"echo '{SERVE}' >{STANDIN_CONFIG}")
        assert run.returncode == 2, run.stdout[-5000:]
        assert (f"sglang_service: sglang.service on {node(2)} failed (systemd gave up restarting it: failed/failed) "
                "(/health: no answer) after a change of its unit and the move to CUDA /usr/local/cuda-13.5; rolled "
                "back to its previous unit with CUDA /usr/local/cuda-13.0, which answers /health again: the node "
                "serves what it served before. The rollout stops here.") in run.stdout, run.stdout[-5000:]
        assert cuda_state(1) == ON_13_5
        assert launched(1, started[1]) == [("0.5.8", "13.5", "serve")]
        # Node 2 installed 13.5, and went back to 13.0 with its server.
        assert cuda_state(2) == ON_13_0[:3] + ["hi  cuda-toolkit-13-0", "hi  cuda-toolkit-13-5"]
        assert launched(2, started[2]) == [("0.5.8", "13.5", "refused")] * 3 + [("0.5.8", "13.0", "serve")]
        for i in (1, 2):
            assert on_node(i, HEALTH).strip() == "200", node(i)
        for i in (3, 4):
            assert cuda_state(i) == ON_13_0, node(i)
            assert launches(i) == started[i], node(i)

        # The batches were shown above; the rest of the fleet moves at once.
        finished = converge(fleet, "-e", "sglang_rollout_serial=100%")
        assert finished.returncode == 0, finished.stdout[-5000:]
        for i in range(1, NODES + 1):
            assert cuda_state(i) == ON_13_5, node(i)
            assert launched(i, started[i])[-1] == ("0.5.8", "13.5", "serve"), node(i)
            assert on_node(i, HEALTH).strip() == "200", node(i)
        code, report, output = drift_report(fleet, "on-cuda-13.5")
        assert code == 0, output
    finally:
        cuda_version(fleet, None)
    back = converge(fleet, "-e", "sglang_rollout_serial=100%")
    assert back.returncode == 0, back.stdout[-5000:]
    for i in range(1, NODES + 1):
        assert cuda_state(i)[:3] == ON_13_0[:3], node(i)
        assert launched(i, started[i])[-1] == ("0.5.8", "13.0", "serve"), node(i)


def test_a_lost_gpu_does_not_shrink_the_tensor_parallel_size(fleet):
    """Node 2's nvidia-smi lists 7 of its 8 GPUs (a copy of its recording without the last): the
    TP size, taken from the GPU count, was 8 at deploy, so the converge refuses before writing
    anything, and says why and what to set."""
    on_node(2, "rm -rf /usr/local/lib/lab-gpu-7 && cp -a /usr/local/lib/lab-gpu /usr/local/lib/lab-gpu-7 && "
               "sed -i '$d' /usr/local/lib/lab-gpu-7/query.csv")
    assert on_node(2, "cat /etc/sglang/tp-size").strip() == "8"
    before = on_node(2, SNAPSHOT)
    host_vars(fleet, 2, "sglang_preflight_nvidia_smi: /usr/local/lib/lab-gpu-7/nvidia-smi\n")
    try:
        run = converge(fleet, "--limit", node(2))
    finally:
        host_vars(fleet, 2, None)
    assert run.returncode == 2, run.stdout[-5000:]
    assert ("sglang_service: refusing to restart sglang with --tp-size 7: it was deployed with --tp-size 8 "
            "(recorded in /etc/sglang/tp-size), and the TP size follows the GPU count, but this node now "
            "reports 7 GPU(s). GPUs are missing") in run.stdout, run.stdout[-5000:]
    assert on_node(2, SNAPSHOT) == before


# An operator's settings with a line break in them, as a vault block scalar or a pasted file gives
# them: each would add a line to the secrets file, the unit or its launch arguments.
BROKEN_LINES = {
    "sglang_service_api_key": "sk-fleetSECRETkey\nLD_PRELOAD=/tmp/x.so",
    "sglang_service_hf_token": "hf_fleetSECRETtoken\nEvil=1",
    "sglang_service_model_path": "/models/Qwen3-8B\nExecStartPre=/bin/true",
    "sglang_service_served_model_name": "qwen\n[Install]",
    "sglang_service_extra_args": ["--mem-fraction-static", "0.8\nExecStartPost=/bin/true"],
    "sglang_service_environment": {"NCCL_DEBUG": "INFO\nLD_PRELOAD=/tmp/x.so"},
}


def test_values_with_a_line_break_are_refused_by_name_before_the_node_changes(fleet):
    """site.yml's preflight play names each of the six settings (never a secret's value) and stops
    before any role runs: every file, database and the running server of the node as they were."""
    values = fleet["work"] / "broken-lines.json"
    values.write_text(json.dumps(BROKEN_LINES))
    before = on_node(2, SNAPSHOT)
    run = converge(fleet, "--limit", node(2), "-e", f"@{values}")
    assert run.returncode == 2, run.stdout[-5000:]
    breaks = ("holds a line break (\\n), which would end its line in the file it is written to and start"
              " another; give it on one line.")
    secret = ("the secret holds a line break (\\n) (one trailing line break is removed, nothing else is); it"
              " would add lines to the secrets file. Its value is not shown.")
    message = (f"preflight: sglang_service_api_key: {secret} preflight: sglang_service_hf_token: {secret}"
               f" preflight: sglang_service_model_path: it {breaks}"
               f" preflight: sglang_service_served_model_name: it {breaks}"
               f" preflight: sglang_service_extra_args: item 1 {breaks}"
               f" preflight: sglang_service_environment: the value of NCCL_DEBUG {breaks}"
               " Nothing has been changed on any node.")
    assert f'"msg": {json.dumps(message)}' in run.stdout, run.stdout[-5000:]
    assert "TASK [Refuse a node that is not ready for the rollout]" in run.stdout
    assert "TASK [cuda13" not in run.stdout and "TASK [blackwell.sglang.cuda13" not in run.stdout
    assert "SECRET" not in run.stdout + run.stderr
    assert on_node(2, SNAPSHOT) == before


# Settings a review found reaching a lab node: each is refused by site.yml's first play now.
REVIEWED = {
    "sglang_service_extra_args": ["--config", "/etc/sglang/engine.yaml"],
    "sglang_service_environment": {"HF_TOKEN": "hf_fleetSECRETtoken", "LD_PRELOAD": "/tmp/x.so"},
    "sglang_service_env_file": "/etc/sglang/%i.env",
    "sglang_service_crash_policy": "yolo",
    "sglang_service_router_url": "http://r:1\n",
    "sglang_service_router_drain_timeout": 0,
    "sglang_install_keep_releases": 0,
    "sglang_router_port": "30100\nUser=root",
}


def test_settings_a_review_found_reaching_the_node_are_refused_by_name_before_it_changes(fleet):
    """Every setting has a validator with bounds, run by site.yml's preflight play: the router's
    port, the engine's environment, extra arguments and secrets file path, the router URL, the
    drain timeout, the releases kept and the crash policy, all named in one message before any
    role runs, the node as it was."""
    values = fleet["work"] / "reviewed.json"
    values.write_text(json.dumps(REVIEWED))
    before = on_node(2, SNAPSHOT)
    run = converge(fleet, "--limit", node(2), "-e", f"@{values}")
    assert run.returncode == 2, run.stdout[-5000:]
    message = " ".join(f"preflight: {m}" for m in [
        "sglang_service_extra_args: --config would read an SGLang configuration file, whose settings would"
        " override what the role judged; give the flags themselves in sglang_service_extra_args.",
        "sglang_service_environment: HF_TOKEN is set by the role; set sglang_service_hf_token instead.",
        "sglang_service_environment: LD_PRELOAD changes which code the engine loads, outside the release the"
        " gate judged; list it in sglang_service_environment_allowed if the site means it.",
        "sglang_service_env_file: '/etc/sglang/%i.env' holds '%', which systemd reads as a specifier (%h, %n"
        " ...) in the unit it is written to.",
        "sglang_service_crash_policy: must be one of strict, warn, force, got 'yolo'.",
        "sglang_service_router_url: 'http://r:1\\n' is not http://host:port (or https://), without a path or"
        " a trailing /: the role appends the router's paths to it.",
        "sglang_service_router_drain_timeout: must be at least 1, got 0.",
        "sglang_install_keep_releases: must be at least 1, got 0.",
        "sglang_router_port: must be a whole number, got '30100\\nUser=root'.",
    ]) + " Nothing has been changed on any node."
    assert f'"msg": {json.dumps(message)}' in run.stdout, run.stdout[-5000:]
    assert "TASK [cuda13" not in run.stdout and "TASK [blackwell.sglang.cuda13" not in run.stdout
    assert "SECRET" not in run.stdout + run.stderr
    assert on_node(2, SNAPSHOT) == before


def test_fresh_and_broken_nodes_report_drift_never_a_failure(fleet):
    """A node that was never converged, one whose venv lost SGLang, one whose unit is gone, one
    without its apt lists and CUDA key: each reports the drift it has, none fails."""
    on_node(1, f"rm -rf {SITE_PACKAGES}/sglang {SITE_PACKAGES}/sglang-*.dist-info")
    on_node(3, "rm /etc/systemd/system/sglang.service && systemctl daemon-reload")
    on_node(4, "rm -rf /var/lib/apt/lists/* /etc/apt/keyrings/cuda-archive-keyring.asc")
    cache = ROOT / ".cache" / "lab"
    up = subprocess.run([str(ROOT / "tools" / "lab" / "fleet.sh"), "up", str(NODES + 1)], cwd=ROOT,
                        env={**fleet["env"], "LAB_INVENTORY": str(fleet["inventory"] / "hosts.yml"),
                             "LAB_VOLUMES": f"{cache}/cuda-repo:/srv/cuda-repo:ro {cache}/wheelhouse:/srv/wheelhouse:ro"},
                        capture_output=True, text=True, check=False)
    assert up.returncode == 0, up.stdout + up.stderr
    # The GPU double and the engine's stand-in, as the lab gives every node; nothing the roles install.
    prepared = subprocess.run(
        ["ansible-playbook", "-i", str(fleet["inventory"]), str(ROOT / "molecule" / "shared" / "prepare_standin.yml"),
         "--limit", node(NODES + 1)],
        cwd=ROOT, env={**fleet["env"], "MOLECULE_PROJECT_DIRECTORY": str(ROOT)}, capture_output=True, text=True,
        check=False)
    assert prepared.returncode == 0, prepared.stdout[-5000:] + prepared.stderr
    code, report, output = drift_report(fleet, "fragile")
    assert code == 1, output
    emptied, fresh = report["hosts"][node(1)], report["hosts"][node(NODES + 1)]
    assert (emptied["status"], emptied["failures"]) == ("drift", [])
    assert [(f["label"], f["reason"]) for f in emptied["drift"]] == [
        ("sglang_install : Install the pinned SGLang release 0.5.8",
         "command: Command would have run if not in check mode")]
    assert {"sglang_sm120_patch : Refuse a venv without SGLang, or without the communicator where the policy says so",
            "sglang_service : Spell the launch arguments, write the unit and start sglang"} <= set(not_judged(emptied))
    assert (fresh["status"], fresh["failures"]) == ("drift", [])
    drifted = [f["label"] for f in fresh["drift"]]
    for task in ("cuda13 : Write the role's files [/etc/apt/sources.list.d/cuda-debian12-x86_64.sources]",
                 "cuda13 : Install the packages the role's apt tasks run on",
                 "sglang_install : Create the SGLang user", "sglang_install : Create the release's venv with uv"):
        assert task in drifted, drifted
    assert "cuda13 : Install the toolkit package" in not_judged(fresh)
    assert (report["hosts"][node(2)]["status"], report["hosts"][node(2)]["drift"]) == ("ok", [])
    no_unit, no_lists = report["hosts"][node(3)], report["hosts"][node(4)]
    assert [(f["label"], f["reason"]) for f in no_unit["drift"]] == [
        ("sglang_service : Write the files the server starts from [/etc/systemd/system/sglang.service]",
         "/etc/systemd/system/sglang.service would be created")]
    assert (no_unit["status"], no_unit["failures"]) == ("drift", [])
    # systemd cannot be asked about a unit that does not exist yet: not judged, not failed.
    assert "sglang_service : Enable and start sglang" in not_judged(no_unit)
    assert [f["label"] for f in no_lists["drift"]] == [
        "cuda13 : Write the role's files [/etc/apt/keyrings/cuda-archive-keyring.asc]"]
    assert (no_lists["status"], no_lists["failures"]) == ("drift", [])


# Every path the roles put on a node besides what apt installed, and the account.
OURS = ("/opt/sglang /etc/sglang /etc/systemd/system/sglang.service /etc/systemd/system/sglang.service.d "
        "/usr/local/lib/blackwell-sglang /var/lib/sglang /var/lib/blackwell-sglang")
LEFT = f"""
for p in {OURS}; do [ -e "$p" ] && find "$p" -printf '%p %m %s %T@\\n'; done
getent passwd sglang || true
getent group sglang || true
systemctl show -p LoadState sglang.service
"""


def remove(fleet, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ansible-playbook", "-i", str(fleet["inventory"]), str(ROOT / "playbooks" / "remove.yml"), *args],
                          cwd=ROOT, env=fleet["env"], capture_output=True, text=True, check=False)


def test_removal_leaves_nothing_of_ours_and_a_second_changes_nothing(fleet):
    """playbooks/remove.yml on every node as the last test left them: converged, emptied venv,
    no unit, no apt lists, and the fresh node that never converged."""
    nodes = range(1, NODES + 2)
    before = {i: on_node(i, LEFT) for i in nodes}
    assert "/opt/sglang" in before[2] and "sglang:x:" in before[2]
    check = remove(fleet, "--check", "--diff")
    assert check.returncode == 0, check.stdout[-5000:]
    assert {i: on_node(i, LEFT) for i in nodes} == before
    first = remove(fleet)
    assert first.returncode == 0, first.stdout[-20000:]
    for i in nodes:
        assert on_node(i, LEFT) == "LoadState=not-found\n", node(i)
    second = remove(fleet)
    assert second.returncode == 0, second.stdout[-5000:]
    for i in nodes:
        assert re.search(rf"^{node(i)}\s*: ok=\d+\s+changed=0\s+unreachable=0\s+failed=0\s", second.stdout, re.M), \
            second.stdout[-3000:]

"""The collection on a real Ubuntu 24.04 host with two H200s, from its recording.

tests/fixtures/gpu/ubuntu2404-h200x2/ was written on that host by
tools/lab/record-ubuntu-gpu-host.sh: Ubuntu 24.04.3 in a VM without systemd and without a
network, driver 580.159.04 (open modules), CUDA 13.0 from NVIDIA's debs, ansible-core 2.19.14
installed from wheels, the collection run with `-c local`. Each playbook run is kept as the
ansible.posix.json callback's report with its exit status; nvidia-smi's own answers sit beside
the gpu_facts module's output, so the parsing core can be fed the same text here and compared.
"""
from __future__ import annotations

import json

import gpu_samples as samples
from ansible_collections.blackwell.sglang.plugins.module_utils import gpu

HOST = samples.FIXTURES / "ubuntu2404-h200x2"
RUNS = HOST / "runs"
PROC = "/proc/driver/nvidia/version"
TWO_H200 = [
    {
        "index": 0,
        "name": "NVIDIA H200",
        "uuid": "GPU-c02ae735-0376-3b30-3056-08c2469df950",
        "compute_capability": "9.0",
        "major": 9,
        "minor": 0,
        "memory_total_mib": 143771,
        "pci_bus_id": "00000000:00:06.0",
    },
    {
        "index": 1,
        "name": "NVIDIA H200",
        "uuid": "GPU-db4dd2fe-1489-caac-c773-75a5a7c12826",
        "compute_capability": "9.0",
        "major": 9,
        "minor": 0,
        "memory_total_mib": 143771,
        "pci_bus_id": "00000000:00:07.0",
    },
]
NO_NETWORK_MESSAGE = (
    "cuda13: could not download the CUDA repository signing key from"
    " https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/3bf863cc.pub"
    " (no connection). Set cuda13_repo_base_url to a mirror of NVIDIA's repositories that this"
    " node reaches, or cuda13_repo_key_url to a file:// path of the key on the node, or"
    " cuda13_repo_key_content to the ASCII-armored key itself. Nothing was changed."
)


def run(name):
    """(exit status, report) of one recorded ansible-playbook run; its stderr was empty."""
    assert (RUNS / f"{name}.stderr").read_text() == ""
    return int((RUNS / f"{name}.rc").read_text()), json.loads((RUNS / f"{name}.json").read_text())


def results(report):
    """(task name without the role prefix, result) for each task of the run, in order."""
    for play in report["plays"]:
        for task in play["tasks"]:
            yield task["task"]["name"].split(" : ", 1)[-1], task["hosts"]["localhost"]


def result(report, name):
    found = [res for task, res in results(report) if task == name]
    assert len(found) == 1, (name, [task for task, dummy in results(report)])
    return found[0]


def changed(report):
    return [task for task, res in results(report) if res.get("changed")]


def failed(report):
    return [(task, res["msg"]) for task, res in results(report) if res.get("failed")]


def adhoc_facts(name):
    """ansible_facts.gpu of an `ansible localhost -m blackwell.sglang.gpu_facts` answer."""
    head, sep, body = (HOST / "gpu" / name).read_text().partition(" => ")
    assert sep and head == "localhost | SUCCESS", head
    answer = json.loads(body)
    assert answer["changed"] is False
    return answer["ansible_facts"]["gpu"]


def expect_two_h200(facts):
    assert facts["present"] is True and facts["reason"] is None
    assert facts["count"] == 2
    assert facts["gpus"] == TWO_H200
    assert facts["capability_majors"] == [9]
    assert facts["driver_version"] == "580.159.04"
    assert facts["cuda_driver_version"] == "13.0"
    assert facts["kernel_module_open"] is True
    assert facts["kernel_module_source"] == "proc"
    assert facts["driver_mismatch"] is False
    assert facts["topology"] == {
        "pairs": [{"gpu_a": 0, "gpu_b": 1, "link": "NV18", "type": "nvlink"}],
        "summary": "nvlink_all",
    }


# ---- the host as found ------------------------------------------------------------------------

def test_host_is_ubuntu_2404_with_cuda_13_from_nvidia_debs_and_no_systemd():
    os_release = (HOST / "host" / "os-release").read_text().splitlines()
    assert 'VERSION_ID="24.04"' in os_release
    assert any(line.startswith('VERSION="24.04.3 LTS') for line in os_release)
    facts = (HOST / "host" / "facts.txt").read_text().splitlines()
    assert "pid 1: systemd" not in facts
    assert "nvcc through /usr/local/cuda: Cuda compilation tools, release 13.0, V13.0.88" in facts
    # The system interpreter has no apt binding: the cuda13 check below must not need one.
    assert "python3-apt for /usr/bin/python3: ModuleNotFoundError: No module named 'apt_pkg'" in facts
    packages = {
        line.split()[1]: line.split()[2]
        for line in (HOST / "host" / "dpkg-cuda.txt").read_text().splitlines()
        if line.startswith("ii ")
    }
    assert packages["cuda-nvcc-13-0"] == "13.0.88-1"
    assert packages["cuda-toolkit-13-0-config-common"] == "13.0.96-1"
    # NVIDIA's metapackages carry the update's number, not nvcc's.
    assert packages["cuda-compiler-13-0"] == "13.0.2-1"
    assert "cuda-toolkit-13-0" not in packages
    assert "Value: /usr/local/cuda-13.0" in (HOST / "host" / "alternatives-cuda.txt").read_text().splitlines()
    assert (HOST / "host" / "ansible-version.txt").read_text().startswith("ansible [core 2.19.14]\n")


def test_raw_answers_for_later_were_recorded():
    """Kept as nvidia-smi printed them; only their presence and exit status are checked here."""
    for name in ("topo-p2p-r.txt", "topo-p2p-w.txt", "topo-m.txt", "query-pcie.csv",
                 "proc-cmdline.txt", "sys-class-iommu.txt"):
        text = (HOST / "raw" / name).read_text()
        assert text.endswith("exit status: 0\n"), name
        assert len(text.splitlines()) > 1, name
    topo = (HOST / "raw" / "topo-m.txt").read_text()
    assert topo == (HOST / "gpu" / "topo.txt").read_text() + "exit status: 0\n"


# ---- gpu_facts --------------------------------------------------------------------------------

def test_gpu_facts_module_on_the_host():
    for name in ("gpu_facts.adhoc.txt", "gpu_facts_check.adhoc.txt"):
        expect_two_h200(adhoc_facts(name))


def test_recorded_answers_through_the_core_match_the_module():
    """nvidia-smi's answers from that host, through the core here, give what the module gave there."""
    module = adhoc_facts("gpu_facts.adhoc.txt")
    smi = module["nvidia_smi"]
    commands = json.loads((HOST / "gpu" / "commands.json").read_text())
    answers = {
        tuple([smi] + argv): (0, (HOST / "gpu" / name).read_text(), "") for name, argv in commands.items()
    }
    calls = []

    def run_command(argv):
        calls.append(tuple(argv))
        return answers[tuple(argv)]

    files = {PROC: (HOST / "gpu" / "proc_version.txt").read_text()}
    facts = gpu.gather(run_command, files.get, smi, PROC)
    # The module's output predates the PCIe, peer-to-peer and IOMMU facts (test_gpu_pcie.py
    # reads those from this recording): compared on the keys it holds.
    assert samples.recorded_part(facts, module) == module
    expect_two_h200(samples.recorded_part(facts, module))
    # Two GPUs: the topology matrix is read as well, and it carries the ANSI underline.
    assert (smi, "topo", "-m") in calls
    assert "\x1b[4m" in (HOST / "gpu" / "topo.txt").read_text()


# ---- playbooks/preflight.yml ------------------------------------------------------------------

def test_preflight_passes():
    rc, report = run("preflight")
    assert rc == 0
    assert report["stats"]["localhost"]["failures"] == 0
    assert report["stats"]["localhost"]["changed"] == 0
    assert result(report, "Require GPUs and a matching driver")["msg"] == "All assertions passed"
    expect_two_h200(result(report, "Read the node's GPUs, driver and topology")["ansible_facts"]["gpu"])
    setup = result(report, "Gathering Facts")["ansible_facts"]
    assert (setup["ansible_distribution"], setup["ansible_distribution_version"]) == ("Ubuntu", "24.04")
    assert setup["ansible_python"]["version"]["major"] == 3
    assert setup["ansible_python"]["version"]["minor"] == 12


# ---- sglang_sm120_patch on a real SGLang wheel -----------------------------------------------

def patch_targets(report):
    loop = result(report, "Patch SGLang's capability dicts for the node's GPUs")
    return [(item["item"], [(t["name"], t["status"]) for t in item["targets"]]) for item in loop["results"]]


def patch_report(report):
    return [item["msg"] for item in result(report, "Report what the patch found in SGLang")["results"]]


def test_patch_with_the_real_facts_finds_h200_upstream():
    assert (RUNS / "sglang-wheel.txt").read_text().strip() == "sglang-0.5.8-py3-none-any.whl"
    rc, report = run("patch-real-facts")
    assert rc == 0
    assert report["stats"]["localhost"]["changed"] == 0
    assert patch_targets(report) == [(9, [
        ("TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES", "present upstream"),
        ("TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM", "present upstream"),
    ])]
    assert patch_report(report) == [
        "SGLang 0.5.8, capability 9: TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES present upstream;"
        " TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM present upstream"
        " (upstream already has it: no patch needed)"
    ]


def test_patch_for_sm120_adds_then_finds_it_present():
    rc, report = run("patch-sm120")
    assert rc == 0
    assert report["stats"]["localhost"]["changed"] == 1
    assert changed(report) == ["Patch SGLang's capability dicts for the node's GPUs"]
    assert patch_targets(report) == [(12, [
        ("TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES", "added"),
        ("TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM", "added"),
    ])]
    assert result(report, "Report that the SGLang server needs a restart to load the patch")["msg"] == (
        "SGLang's capability dicts changed; a running server loads them at its next restart"
        " (sglang_service restarts it)"
    )
    rc, again = run("patch-sm120-again")
    assert rc == 0
    assert again["stats"]["localhost"]["changed"] == 0
    assert patch_targets(again) == [(12, [
        ("TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES", "already present"),
        ("TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM", "already present"),
    ])]


def test_patched_files_on_ubuntu_python_3_12():
    """The wheel's files against the venv's after the runs: the two entries for 12, nothing else."""
    diff = (RUNS / "patch.diff").read_text()
    assert "sglang-venv/lib/python3.12/site-packages/sglang/srt/distributed/device_communicators/" in diff
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    removed = [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == []
    assert added == [
        "    12: {",
        "        2: 64 * MiB,  # 64 MB",
        "        4: 64 * MiB,  # 64 MB",
        "        6: 128 * MiB,  # 128 MB",
        "        8: 128 * MiB,  # 128 MB",
        "    },  # added by blackwell.sglang.sglang_capmap",
        "        12: [6, 8],  # added by blackwell.sglang.sglang_capmap",
    ]


# ---- cuda13 in check mode ---------------------------------------------------------------------

def state():
    return dict(line.split() for line in (RUNS / "state.txt").read_text().splitlines())


def test_cuda13_check_against_a_local_repository_reports_the_repository_and_changes_nothing():
    rc, report = run("cuda13-check")
    assert rc == 0
    assert report["stats"]["localhost"]["failures"] == 0
    assert failed(report) == []
    assert changed(report) == [
        "Install the packages the role's apt tasks run on",
        "Install the repository signing key from the node's mirror",
        "Configure the CUDA repository",
        "Export PATH and CUDA_HOME for login shells",
        "Add the toolkit libraries to the linker path",
    ]
    sources = result(report, "Configure the CUDA repository")["diff"][0]
    assert sources["before"] == ""
    assert "/.carry/cuda-repo/ubuntu2404/x86_64/\n" in sources["after"]
    assert "Signed-By: /etc/apt/keyrings/cuda-archive-keyring.asc\n" in sources["after"]
    # The host has no cuda-toolkit-13-0, no CUDA repository and no python3-apt: apt could not
    # judge the install in check mode, so it is skipped on a condition the drift report lists
    # as not judged, and the nvcc check with it. The links already point at 13.0: nothing to select.
    install = result(report, "Install the toolkit package")
    assert install["skipped"] is True
    assert "ansible_check_mode" in install["false_condition"]
    verify = result(report, "Check nvcc reports CUDA 13.0")
    assert verify["skipped"] is True
    assert "ansible_check_mode" in verify["false_condition"]
    assert result(report, "Select CUDA 13.0 for the toolkit links")["skipped"] is True
    probe = result(report, "Read the toolkit packages, the CUDA links, nvcc and the repository files")
    assert "ii \tcuda-nvcc-13-0\t13.0.88-1" in probe["stdout_lines"]
    assert "alternative\tcuda\t/usr/local/cuda-13.0" in probe["stdout_lines"]
    assert state()["after-cuda13-check"] == state()["before"]


def test_cuda13_without_network_fails_with_what_to_set():
    rc, report = run("cuda13-no-network")
    assert rc == 2
    # The one change a check reports before the key: python3-apt, which this host lacks.
    assert changed(report) == ["Install the packages the role's apt tasks run on"]
    assert failed(report) == [("Fail when the repository signing key cannot be downloaded", NO_NETWORK_MESSAGE)]
    download = result(report, "Download the repository signing key")
    # What the message replaces: urlopen's own text, naming neither the URL nor a way out.
    assert download["status"] == -1
    assert "urlopen error" in download["msg"]
    assert state()["after-cuda13-no-network"] == state()["before"]

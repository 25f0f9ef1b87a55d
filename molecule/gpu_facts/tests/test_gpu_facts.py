"""The end state in the lab container: no NVIDIA driver there, and gpu_facts says so."""

GPU_MODULE = "blackwell.sglang.gpu_facts"


def test_container_has_no_nvidia_driver(host):
    assert not host.exists("nvidia-smi")
    assert not host.file("/proc/driver/nvidia/version").exists


def test_gpu_facts_reports_no_gpu(host):
    result = host.ansible(GPU_MODULE, check=True)
    assert result["changed"] is False
    facts = result["ansible_facts"]["gpu"]
    assert facts["present"] is False
    assert facts["reason"] == "nvidia-smi was not found"
    assert facts["count"] == 0
    assert facts["nvidia_smi"] is None
    assert facts["topology"] == {"pairs": [], "summary": "none", "p2p": None}


def test_stand_in_replays_the_blackwell_box(host):
    result = host.ansible(
        GPU_MODULE,
        "nvidia_smi=/opt/gpu-facts-lab/nvidia-smi proc_driver_version_path=/opt/gpu-facts-lab/proc_version.txt"
        " proc_cmdline_path=/opt/gpu-facts-lab/proc_cmdline.txt sys_class_iommu_path=/opt/gpu-facts-lab/iommu",
        check=True,
    )
    facts = result["ansible_facts"]["gpu"]
    assert facts["count"] == 8
    assert {gpu["name"] for gpu in facts["gpus"]} == {"NVIDIA RTX PRO 6000 Blackwell Server Edition"}
    assert facts["capability_majors"] == [12]
    assert facts["kernel_module_source"] == "proc"
    assert facts["topology"]["summary"] == "pcie_only"
    assert facts["topology"]["p2p"] == "ok"
    assert sorted(host.file("/opt/gpu-facts-lab/iommu").listdir()) == ["dmar0", "dmar1", "dmar2", "dmar3"]
    assert facts["iommu"] == "passthrough"

"""Settings a role cannot work with, given several at once: sglang_install and sglang_service
refuse them in one task that names every problem, on localhost, before anything is written.

Each run gives the role several wrong settings together and asserts the exact message (every
problem, in the role's order), that the refusal is the run's only failure and its last task, and
that nothing was written.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import gpu_samples
from conftest import local_play_tasks
from sglang_releases import unpack

pytestmark = pytest.mark.slow
GPU_FIXTURES = gpu_samples.FIXTURES


def run_role(tmp_path: Path, role: str, **role_vars):
    play = [{
        "name": "Run the role with wrong settings",
        "hosts": "localhost",
        "gather_facts": False,
        "vars": role_vars,
        "roles": [{"role": f"blackwell.sglang.{role}"}],
    }]
    # play.yml goes beside the node's files, not among them.
    tasks = local_play_tasks(tmp_path, play, expect_rc=2)
    return [(name.split(" : ", 1)[-1], result) for name, result in tasks]


def tree(path: Path) -> dict:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def node_with_release(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A node directory with a configuration directory and SGLang 0.5.8's real source in a venv,
    so that the role reads a release and goes on to its refusal: (node, etc, venv)."""
    node = tmp_path / "node"
    conf = node / "etc"
    conf.mkdir(parents=True)
    venv = node / "venv"
    unpack("0.5.8", venv / "lib" / "python3.11" / "site-packages")
    return node, conf, venv


def test_sglang_service_names_every_wrong_setting_at_once(tmp_path):
    node = tmp_path / "node"
    conf = node / "etc"
    conf.mkdir(parents=True)
    # Deployed before with 8 GPUs; the node now reports 4 and no TP size is set.
    (conf / "tp-size").write_text("8\n")
    before = tree(node)
    tasks = run_role(
        tmp_path, "sglang_service",
        sglang_service_model_path="",
        sglang_service_eagle3_enabled=True,
        sglang_service_host="0.0.0.0",
        sglang_service_env_file=str(conf / "sglang.env"),
        sglang_service_gpu={"present": True, "count": 4, "capability_majors": [12]},
        sglang_service_venv=str(node / "no-venv"),
    )
    assert [(name, res["msg"]) for name, res in tasks if res.get("failed")] == [(
        "Refuse settings and a launch that cannot be deployed",
        "sglang_service: sglang_service_model_path is not set; it names the model sglang serves (a local path"
        " or a Hugging Face repository id). Nothing was written."
        " sglang_service: sglang_service_eagle3_enabled is true but sglang_service_eagle3_draft_model_path is"
        " empty; EAGLE-3 needs the path of its draft model."
        " sglang_service: refusing to listen on 0.0.0.0:30000 without an API key: anyone who reaches that"
        " address could use the GPUs. Set sglang_service_api_key, listen on loopback (sglang_service_host:"
        " 127.0.0.1), or set sglang_service_allow_unauthenticated: true if only trusted clients can reach it;"
        " nothing was written."
        f" sglang_service: refusing to restart sglang with --tp-size 4: it was deployed with --tp-size 8"
        f" (recorded in {conf}/tp-size), and the TP size follows the GPU count, but this node now reports 4"
        " GPU(s). GPUs are missing: check nvidia-smi and the kernel log (Xid errors, a GPU fallen off the bus)"
        " and bring them back, or set sglang_service_tp_size explicitly to serve on fewer GPUs. Nothing was"
        " changed."
        # This machine has no SGLang where the role looks for it: the release is a problem too.
        f" sglang_service: cannot read the installed SGLang release in {node}/no-venv: no sglang package in the"
        " venv. Install it first (sglang_install); nothing was written.",
    )]
    assert tasks[-1][0] == "Refuse settings and a launch that cannot be deployed"
    assert tree(node) == before


def test_sglang_service_with_right_settings_refuses_only_the_missing_release(tmp_path):
    """The same task with every setting right: only the release the node lacks is refused."""
    node = tmp_path / "node"
    conf = node / "etc"
    conf.mkdir(parents=True)
    (conf / "tp-size").write_text("4\n")
    tasks = run_role(
        tmp_path, "sglang_service",
        sglang_service_model_path="org/model",
        sglang_service_host="127.0.0.1",
        sglang_service_env_file=str(conf / "sglang.env"),
        sglang_service_gpu={"present": True, "count": 4, "capability_majors": [12]},
        # No SGLang here: the release cannot be read, and nothing else is wrong.
        sglang_service_venv=str(node / "no-venv"),
    )
    assert [(name, res["msg"]) for name, res in tasks if res.get("failed")] == [(
        "Refuse settings and a launch that cannot be deployed",
        f"sglang_service: cannot read the installed SGLang release in {node}/no-venv: no sglang package in the"
        " venv. Install it first (sglang_install); nothing was written.")]


def test_sglang_service_without_a_model_path_is_refused_by_name(tmp_path):
    """A readable release and no sglang_service_model_path at all (it has no default): the launch
    arguments are spelt before the refusal, and the refusal still names the missing setting."""
    node, conf, venv = node_with_release(tmp_path)
    before = tree(node)
    tasks = run_role(
        tmp_path, "sglang_service",
        sglang_service_host="127.0.0.1",
        sglang_service_env_file=str(conf / "sglang.env"),
        sglang_service_gpu={"present": True, "count": 4, "capability_majors": [12]},
        sglang_service_venv=str(venv),
    )
    assert [(name, res["msg"]) for name, res in tasks if res.get("failed")] == [(
        "Refuse settings and a launch that cannot be deployed",
        "sglang_service: sglang_service_model_path is not set; it names the model sglang serves (a local path"
        " or a Hugging Face repository id). Nothing was written.")]
    assert tree(node) == before


def test_sglang_install_names_every_wrong_setting_at_once(tmp_path):
    node = tmp_path / "node"
    node.mkdir()
    before = tree(node)
    tasks = run_role(
        tmp_path, "sglang_install",
        sglang_install_version="latest",
        sglang_install_no_index=True,
        sglang_install_keep_releases=0,
        sglang_install_venv=str(node / "current"),
        sglang_install_releases_dir=str(node / "releases"),
    )
    assert [(name, res["msg"]) for name, res in tasks if res.get("failed")] == [(
        "Refuse settings and a node the install cannot work with",
        "sglang_install: sglang_install_version: must be an exact release such as 0.5.23, got 'latest'."
        " sglang_install: sglang_install_keep_releases: must be at least 1, got 0."
        " sglang_install_no_index is true but sglang_install_find_links is empty; nothing could be installed",
    )]
    assert tasks[-1][0] == "Refuse settings and a node the install cannot work with"
    assert sorted(p.name for p in node.iterdir()) == [] and tree(node) == before


LINE_BREAK = ("holds a line break (\\n), which would end its line in the file it is written to and start another;"
              " give it on one line.")
SECRET_BREAK = ("the secret holds a line break (\\n) (one trailing line break is removed, nothing else is); it would"
                " add lines to the secrets file. Its value is not shown.")


def test_sglang_service_refuses_values_that_would_add_lines_to_its_files(tmp_path):
    """A key, a token, the model path, the served name, an extra argument and an environment value
    with a line break in them, and flags the role spells given again in the extra arguments: the
    role's own refusal (a play without the preflight) names each setting, never a secret's value,
    and nothing is written."""
    node, conf, venv = node_with_release(tmp_path)
    before = tree(node)
    tasks = run_role(
        tmp_path, "sglang_service",
        sglang_service_api_key="sk-roleSECRETkey\nLD_PRELOAD=/tmp/x.so",
        sglang_service_hf_token="hf_roleSECRETtoken\nEvil=1",
        sglang_service_model_path="/models/Qwen3-8B\nExecStartPre=/bin/true",
        sglang_service_served_model_name="qwen\n[Install]",
        sglang_service_extra_args=["--mem-fraction-static", "0.8\nExecStartPost=/bin/true", "--host", "0.0.0.0"],
        sglang_service_environment={"NCCL_DEBUG": "INFO\nLD_PRELOAD=/tmp/x.so"},
        sglang_service_host="127.0.0.1",
        sglang_service_env_file=str(conf / "sglang.env"),
        sglang_service_gpu={"present": True, "count": 4, "capability_majors": [12]},
        sglang_service_venv=str(venv),
    )
    failed = [(name, res["msg"]) for name, res in tasks if res.get("failed")]
    assert failed == [(
        "Refuse settings and a launch that cannot be deployed",
        f"sglang_service: sglang_service_api_key: {SECRET_BREAK}"
        f" sglang_service: sglang_service_hf_token: {SECRET_BREAK}"
        f" sglang_service: sglang_service_model_path: it {LINE_BREAK}"
        f" sglang_service: sglang_service_served_model_name: it {LINE_BREAK}"
        f" sglang_service: sglang_service_extra_args: item 1 {LINE_BREAK}"
        " sglang_service: sglang_service_extra_args: --host is spelt by the role; set sglang_service_host instead"
        " (a second one on the command line would override it)."
        f" sglang_service: sglang_service_environment: the value of NCCL_DEBUG {LINE_BREAK}"
        # The smoke test's environment is the service's unless set: the same value, named there too.
        f" sglang_service: sglang_service_nccl_smoke_environment: the value of NCCL_DEBUG {LINE_BREAK}",
    )]
    assert "SECRET" not in failed[0][1]
    assert tree(node) == before


def test_sglang_install_refuses_a_wheelhouse_others_can_write(tmp_path):
    """A find_links directory on the node that is world-writable, and one that is a symbolic
    link: whoever writes there chooses the wheels. A root-owned 0755 one, and a URL, pass."""
    node = tmp_path / "node"
    node.mkdir()
    open_dir, safe, link = node / "open", node / "safe", node / "link"
    open_dir.mkdir(mode=0o777)
    open_dir.chmod(0o777)
    safe.mkdir(mode=0o755)
    link.symlink_to(safe)
    before = tree(node)
    tasks = run_role(
        tmp_path, "sglang_install",
        sglang_install_find_links=[str(open_dir), f"file://{link}", str(safe), "https://mirror.example/wheels/"],
        sglang_install_venv=str(node / "current"),
        sglang_install_releases_dir=str(node / "releases"),
    )
    assert [(name, res["msg"]) for name, res in tasks if res.get("failed")] == [(
        "Refuse settings and a node the install cannot work with",
        f"sglang_install_find_links: {open_dir}, {link} on this node can be written by others than root (its"
        " owner, a group- or world-writable mode, or a symbolic link): whoever writes there chooses the wheels"
        " the install takes; make each a directory of root's that is not group- or world-writable",
    )]
    assert tree(node) == before


def test_sglang_install_refuses_a_uv_it_cannot_check(tmp_path):
    """uv runs as root at every install: a uv release whose wheel hashes neither the collection,
    the setting nor the lock gives (the lock pins another uv) is refused. A digest that is not
    sha256 is refused by value."""
    node = tmp_path / "node"
    node.mkdir()
    lock = f"sglang==0.5.23 \\\n    --hash=sha256:{'a' * 64}\nuv==0.13.8 \\\n    --hash=sha256:{'b' * 64}\n"
    common = dict(sglang_install_version="0.5.23", sglang_install_venv=str(node / "current"),
                  sglang_install_releases_dir=str(node / "releases"))
    tasks = run_role(tmp_path, "sglang_install", sglang_install_requirements_lock=lock,
                     sglang_install_uv_version="0.13.7", **common)
    assert [(name, res["msg"]) for name, res in tasks if res.get("failed")] == [(
        "Refuse settings and a node the install cannot work with",
        "sglang_install_uv_version 0.13.7 has no wheel hash in the collection, and uv is never installed unchecked"
        " (it runs as root at every install): set sglang_install_uv_sha256 to its wheels' sha256, or pin uv==0.13.7"
        " with its hashes in sglang_install_requirements_lock",
    )]
    tasks = run_role(tmp_path, "sglang_install", sglang_install_requirements_lock=lock,
                     sglang_install_uv_sha256=["c" * 64, "sha256:" + "d" * 64, "e" * 40], **common)
    assert [(name, res["msg"]) for name, res in tasks if res.get("failed")] == [(
        "Refuse settings and a node the install cannot work with",
        f"sglang_install: sglang_install_uv_sha256: item 1 must be a sha256 digest (64 hexadecimal characters), got"
        f" 'sha256:{'d' * 64}'. sglang_install: sglang_install_uv_sha256: item 2 must be a sha256 digest (64"
        f" hexadecimal characters), got '{'e' * 40}'.",
    )]
    assert tree(node) == {}


def test_sglang_install_refuses_pip_where_nccls_floor_applies(tmp_path):
    """On a node whose GPUs are compute capability 12 (the RTX PRO 6000 recording, replayed by
    the stand-in nvidia-smi, which the role's own GPU read asks), torch's exact NCCL pin must be
    lifted to the floor, which pip cannot do: refused by name, nothing written."""
    recording = tmp_path / "gpus"
    shutil.copytree(GPU_FIXTURES / "rtx-pro-6000-x8", recording)
    shutil.copy2(gpu_samples.STAND_IN, recording / "nvidia-smi")
    node = tmp_path / "node"
    node.mkdir()
    before = tree(node)
    tasks = run_role(tmp_path, "sglang_install", sglang_install_installer="pip",
                     sglang_install_nvidia_smi=str(recording / "nvidia-smi"),
                     sglang_install_venv=str(node / "current"), sglang_install_releases_dir=str(node / "releases"))
    assert dict(tasks)["Read the node's GPUs for NCCL's floor"]["ansible_facts"]["gpu"]["capability_majors"] == [12]
    assert [(name, res["msg"]) for name, res in tasks if res.get("failed")] == [(
        "Refuse settings and a node the install cannot work with",
        "sglang_install_installer pip cannot lift torch's exact pin of nvidia-nccl-cu13 to "
        "sglang_install_nccl_floor 2.31.2, which applies here (the node's GPUs include compute capability 12, "
        "and NCCL before 2.31.2 fails all-reduces on compute capability 12, NVIDIA/nccl#2418): pip has no "
        "overrides, and resolves torch's pin or fails on it. Use the uv installer, install without "
        "dependencies (sglang_install_no_deps) from a request that lists nvidia-nccl-cu13>=2.31.2 itself, or "
        "set sglang_install_nccl_floor_policy to never",
    )]
    assert tree(node) == before

"""site.yml from a fresh copy of the repository: with nothing installed and no
ANSIBLE_COLLECTIONS_PATH, the repository's ansible.cfg resolves blackwell.sglang to the clone."""
from __future__ import annotations

import os
import re
import subprocess

import yaml

from conftest import ROOT, VENV_BIN, copy_as_collection


def _plain_env(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    # No user-level collections either: only what the clone itself provides.
    env.update(HOME=str(tmp_path / "home"), ANSIBLE_NOCOLOR="1",
               PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}")
    return env


def test_site_playbook_syntax_check_passes_in_a_fresh_clone(tmp_path):
    clone = copy_as_collection(tmp_path)
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "site.yml", "-i", "inventories/example", "--syntax-check"],
        cwd=clone, env=_plain_env(tmp_path), capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "playbook: site.yml" in proc.stdout


def test_site_playbook_lists_the_roles_in_rollout_order(tmp_path):
    clone = copy_as_collection(tmp_path)
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "site.yml", "-i", "inventories/example", "--list-tasks"],
        cwd=clone, env=_plain_env(tmp_path), capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plays = re.findall(r"play #\d+ \(([^)]*)\): ([^\t]*)\t", proc.stdout)
    assert plays == [("all", "Refuse a rollout that AWX runs in slices"),
                     ("sglang_router", "Check the router's settings before the rollout"),
                     ("all", "Check the nodes before the rollout"), ("all", "Converge SGLang nodes batch by batch"),
                     ("sglang_router", "Put SGLang's router in front of the engines"),
                     ("sglang_nodes:sglang_router", "Write the fleet's Prometheus targets"),
                     # The drift report's verdicts as artifacts: no host without the callback.
                     ("all:!all", "Publish the drift verdicts as the run's artifacts")]
    tasks = [line.strip() for line in proc.stdout.splitlines() if " : " in line or "Stage the model's weights" in line]
    order = []
    for line in tasks:
        # sglang_model is included (only where a model source is declared): its one task here.
        role = "sglang_model" if line.startswith("Stage the model's weights") else line.split(" : ", 1)[0].split(".")[-1]
        if role not in order:
            order.append(role)
    assert order == ["cuda13", "sglang_install", "sglang_sm120_patch", "sglang_model", "sglang_service", "sglang_router"]


def test_inventory_example_sets_only_documented_role_variables():
    """Every sglang_service_* variable the example sets is one the role documents."""

    specs = yaml.safe_load((ROOT / "roles/sglang_service/meta/argument_specs.yml").read_text())
    documented = set(specs["argument_specs"]["main"]["options"])
    defaults = set(yaml.safe_load((ROOT / "roles/sglang_service/defaults/main.yml").read_text()))
    assert defaults == documented - {"sglang_service_model_path"}
    example = yaml.safe_load((ROOT / "inventories/example/group_vars/sglang_nodes.yml").read_text())
    used = {name for name in example if name.startswith("sglang_service_")}
    assert used <= documented, used - documented
    # Every role variable appears in the example, set or as a commented line.
    text = (ROOT / "inventories/example/group_vars/sglang_nodes.yml").read_text()
    assert [name for name in sorted(documented) if name not in text] == []

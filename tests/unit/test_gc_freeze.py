"""The gc_freeze callback: the controller's objects are frozen before each task's workers fork.

Through ansible-playbook on localhost, run from the checkout so the collection's ansible.cfg
applies: a lookup plugin beside the test's playbook runs in the forked worker and returns how
many objects the worker inherited frozen. With the callback (ansible.cfg) that is the
controller's heap; with the callbacks list set to the drift report alone, nothing is frozen.
"""
from __future__ import annotations

import json
import re
import subprocess

from conftest import ROOT, VENV_BIN, ansible_env

LOOKUP = '''
import gc
from ansible.plugins.lookup import LookupBase


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        return [gc.get_freeze_count()]
'''

PLAY = [{"hosts": "localhost", "gather_facts": False, "tasks": [
    {"name": "first", "ansible.builtin.debug": {"msg": "{{ lookup('frozen') }}"}},
    {"name": "second", "ansible.builtin.debug": {"msg": "{{ lookup('frozen') }}"}}]}]


def frozen_in_workers(tmp_path, **env) -> tuple[list, str]:
    (tmp_path / "lookup_plugins").mkdir()
    (tmp_path / "lookup_plugins" / "frozen.py").write_text(LOOKUP)
    (tmp_path / "play.yml").write_text(json.dumps(PLAY))
    run_env = ansible_env(**env)
    if not env:
        run_env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-vvvvv", "-i", "localhost,", "-c", "local",
                           str(tmp_path / "play.yml")], cwd=ROOT, env=run_env, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-3000:]
    counts = [int(count) for count in re.findall(r'^\s*"msg": (\d+)$', proc.stdout, re.M)]
    return counts, proc.stdout + proc.stderr


def test_the_collections_ansible_cfg_loads_it_and_each_worker_inherits_a_frozen_heap(tmp_path):
    counts, output = frozen_in_workers(tmp_path)
    assert "Loading callback plugin blackwell.sglang.gc_freeze of type aggregate" in output
    assert "Failure using method" not in output
    # Tens of thousands of objects: the controller's modules, the play, the inventory.
    assert len(counts) == 2 and all(count > 10000 for count in counts), counts


def test_without_it_nothing_is_frozen(tmp_path):
    counts, output = frozen_in_workers(tmp_path, ANSIBLE_CALLBACKS_ENABLED="blackwell.sglang.drift_report")
    assert "blackwell.sglang.gc_freeze" not in output
    assert counts == [0, 0]

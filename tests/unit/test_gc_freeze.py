"""The gc_freeze callback: the controller's objects are frozen at the start of each task.

Through ansible-playbook on localhost, run from the checkout so the collection's ansible.cfg
applies: a lookup plugin beside the test's playbook runs in the forked worker and returns how
many objects the worker inherited frozen. With the callbacks list set to the drift report
alone, nothing is frozen. The hooks are also called one by one, with objects made between them.
"""
from __future__ import annotations

import json
import re
import subprocess

from conftest import COLLECTIONS_PATH, ROOT, VENV_BIN, ansible_env

LOOKUP = '''
import gc
from ansible.plugins.lookup import LookupBase


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        return [gc.get_freeze_count()]
'''

PLAY = [{"hosts": "localhost", "gather_facts": False, "tasks": [
    {"name": "first", "ansible.builtin.debug": {"msg": "{{ lookup('frozen') }}"}},
    {"name": "last", "ansible.builtin.debug": {"msg": "{{ lookup('frozen') }}"}}]}]

# The hooks themselves, in a Python of their own: what the controller makes after a play's start
# is frozen by the next task's start (and a handler's), and the end of the run unfreezes.
HOOKS = """
import gc
import sys
from ansible.plugins.loader import init_plugin_loader
init_plugin_loader(sys.argv[1].split(':'))
from ansible_collections.blackwell.sglang.plugins.callback.gc_freeze import CallbackModule
callback = CallbackModule()
callback.v2_playbook_on_play_start(None)
at_play = gc.get_freeze_count()
held = [[n] for n in range(20000)]
callback.v2_playbook_on_task_start(None, False)
at_task = gc.get_freeze_count()
held += [[n] for n in range(20000)]
callback.v2_playbook_on_handler_task_start(None)
at_handler = gc.get_freeze_count()
callback.v2_playbook_on_stats(None)
print(at_play, at_task, at_handler, gc.get_freeze_count())
"""


def frozen_in_workers(tmp_path, **env) -> tuple[list, str]:
    (tmp_path / "lookup_plugins").mkdir()
    (tmp_path / "lookup_plugins" / "frozen.py").write_text(LOOKUP)
    (tmp_path / "play.yml").write_text(json.dumps(PLAY))
    run_env = ansible_env(**env)
    for name in ("ANSIBLE_CONFIG", "ANSIBLE_STDOUT_CALLBACK", "ANSIBLE_CALLBACK_RESULT_FORMAT"):
        run_env.pop(name, None)
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
    # ansible-core's words for a callback method that raised.
    assert "Callback dispatch" not in output
    assert len(counts) == 2, counts
    # Tens of thousands of objects at each task: the controller's modules, the play, the inventory.
    assert all(count > 10000 for count in counts), counts


def test_a_tasks_start_freezes_what_the_controller_made_since_and_the_runs_end_unfreezes():
    env = ansible_env()
    proc = subprocess.run([str(VENV_BIN / "python"), "-c", HOOKS, COLLECTIONS_PATH], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    at_play, at_task, at_handler, at_end = (int(n) for n in proc.stdout.split())
    assert at_play > 0 and at_task >= at_play + 20000 and at_handler >= at_task + 20000 and at_end == 0, proc.stdout


def test_without_it_nothing_is_frozen(tmp_path):
    counts, output = frozen_in_workers(tmp_path, ANSIBLE_CALLBACKS_ENABLED="blackwell.sglang.drift_report")
    assert "blackwell.sglang.gc_freeze" not in output
    assert counts == [0, 0]

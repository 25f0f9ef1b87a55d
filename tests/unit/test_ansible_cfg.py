"""The collection's ansible.cfg, as ansible-core reads it from the checkout: a key ansible-core
does not know, or one in the wrong section, is ignored without a word, so the settings the
benchmarks rely on are checked here as ansible-config reports them, with their origin."""
from __future__ import annotations

import subprocess

from conftest import ROOT, VENV_BIN, ansible_env


def dumped() -> list:
    env = ansible_env()
    for name in ("ANSIBLE_CONFIG", "ANSIBLE_CALLBACKS_ENABLED"):
        env.pop(name, None)
    proc = subprocess.run([str(VENV_BIN / "ansible-config"), "dump", "--only-changed"], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_the_poll_interval_and_the_freeze_are_read_from_the_checkouts_ansible_cfg():
    origin = ROOT / "ansible.cfg"
    lines = dumped()
    assert f"DEFAULT_INTERNAL_POLL_INTERVAL({origin}) = 0.005" in lines, lines
    assert f"CALLBACKS_ENABLED({origin}) = ['blackwell.sglang.gc_freeze']" in lines, lines

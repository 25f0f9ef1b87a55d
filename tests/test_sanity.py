"""ansible-test sanity on a copy of the tracked tree laid out as ansible_collections/blackwell/sglang."""
from __future__ import annotations

import sys

from conftest import VENV_BIN, ansible_env, run_sanity


def test_ansible_test_sanity_passes(tmp_path):
    proc = run_sanity(tmp_path, VENV_BIN, f"{sys.version_info[0]}.{sys.version_info[1]}", ansible_env())
    assert proc.returncode == 0, proc.stdout[-20000:] + proc.stderr[-20000:]

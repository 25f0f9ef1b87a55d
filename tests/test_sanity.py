"""ansible-test sanity on a copy of the tracked tree laid out as ansible_collections/blackwell/sglang."""
from __future__ import annotations

import subprocess

from conftest import VENV_BIN, ansible_env, copy_as_collection


def test_ansible_test_sanity_passes(tmp_path):
    dest = copy_as_collection(tmp_path)
    # ansible-test lists the collection's files through git when it sits in a repository.
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-test"), "sanity", "--venv", "--python", "3.11", "--color", "no"],
        cwd=dest, env=ansible_env(), capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-20000:] + proc.stderr[-20000:]

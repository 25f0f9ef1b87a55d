"""The filter plugins load the collection's code only when they are called.

To find one filter of a collection, ansible-core loads every file under its plugins/filter, in
every forked worker that templates it (that is, once per host and task). A filter file that
imported its plan at the top would make each such worker compile and run every plan of every
role, for one filter. So the files import what they call inside the function: a worker pays for
the plans its task uses.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys

from conftest import COLLECTIONS_PATH, ROOT

FILTERS = sorted((ROOT / "plugins" / "filter").glob("*.py"))
PACKAGE = "ansible_collections.blackwell.sglang.plugins"


def test_no_filter_file_imports_the_collections_code_at_the_top():
    found = []
    for path in FILTERS:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ansible_collections."):
                found.append(f"{path.name}: from {node.module} import ...")
    assert FILTERS and found == []


# Through ansible-core's own plugin loader, in a process of its own (its collection finder is
# global): the modules loaded by looking one filter up, then by calling it.
LOOKUP = """
import json, sys
from ansible.plugins.loader import filter_loader, init_plugin_loader
init_plugin_loader(sys.argv[1].split(':'))
ours = lambda: sorted(m for m in sys.modules if m.startswith(sys.argv[2]) and m.count('.') == 5)
mask = filter_loader.get('blackwell.sglang.mask_urls')
looked_up = ours()
mask.j2_function('https://user:secret@example.invalid/simple')
print(json.dumps([looked_up, ours()]))
"""


def test_looking_up_one_filter_loads_every_filter_file_and_no_plan():
    proc = subprocess.run([sys.executable, "-c", LOOKUP, COLLECTIONS_PATH, PACKAGE], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    looked_up, called = json.loads(proc.stdout)
    # ansible-core read every filter file to find this one, and nothing else of ours ran.
    assert [m for m in looked_up if ".filter." in m] == [f"{PACKAGE}.filter.{p.stem}" for p in FILTERS]
    assert [m for m in looked_up if ".filter." not in m] == []
    # Calling it loads the one module it needs.
    assert [m for m in called if ".filter." not in m] == [f"{PACKAGE}.plugin_utils.urls"]

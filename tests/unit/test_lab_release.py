"""The lab's default SGLang release is one the field report's crash applies to.

`make lab` exists to show the patch doing what the field report did by hand: on 8x SM120 with
--enable-torch-symm-mem, SGLang raised KeyError: 12 because torch_symm_mem.py indexes its two
capability-keyed dicts by the GPU's major directly. The release inventories/lab/group_vars/all.yml
installs by default must still do that (from the real wheel, read as source, never imported);
0.5.23 looks its keys up with .get and shows the newer path instead."""
from __future__ import annotations

import ast
import re

import pytest

from conftest import ROOT
from sglang_releases import unpack

TSM = "srt/distributed/device_communicators/torch_symm_mem.py"
DICTS = ("TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES", "_WORLD_SIZES_MULTIMEM")


def lab_default() -> str:
    text = (ROOT / "inventories" / "lab" / "group_vars" / "all.yml").read_text()
    found = re.search(r"^sglang_install_version: .*LAB_SGLANG_VERSION'\) or '([0-9.]+)' \}\}\"$", text, re.M)
    assert found, "inventories/lab/group_vars/all.yml names no default lab release"
    return found.group(1)


def lookups(version: str, tmp_path) -> dict:
    """How torch_symm_mem.py reads each dict by device capability: {name: {'index', 'get'}}."""
    source = (unpack(version, tmp_path) / TSM).read_text()
    found: dict = {name: set() for name in DICTS}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript):
            target, how = node.value, "index"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            target, how = node.func.value, "get"
        else:
            continue
        name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", None)
        if name in found and "device_capability" in ast.unparse(node):
            found[name].add(how)
    return found


def test_the_lab_default_release_raises_key_error_without_the_patch(tmp_path):
    assert lookups(lab_default(), tmp_path) == {name: {"index"} for name in DICTS}


@pytest.mark.parametrize("version", ["0.5.23"])
def test_the_newer_lab_setting_looks_the_capability_up_safely(version, tmp_path):
    assert lookups(version, tmp_path) == {name: {"get"} for name in DICTS}

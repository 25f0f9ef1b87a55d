"""The lab image's bytecode cache for code imported from zip archives (tools/lab/zip_bytecode.py):
a source compiled once is not compiled again, from whatever archive it comes; a changed source
is; the code names the archive it was imported from this time; and nothing is cached unless the
cache directory is root's alone."""
from __future__ import annotations

import importlib.util
import os
import sys
import zipfile
import zipimport

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the cache is used by root only, as on the lab's nodes")

SOURCE = "def where():\n    return where.__code__.co_filename\n"


@pytest.fixture
def hook(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("lab_zip_bytecode", ROOT / "tools" / "lab" / "zip_bytecode.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(zipimport, "_compile_source", zipimport._compile_source)
    spec.loader.exec_module(module)  # installs nothing: its default cache is not on this machine
    assert zipimport._compile_source is not module.compile_source
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    module.CACHE = str(cache)
    compiled = []

    def counting(pathname, source):
        compiled.append(pathname)
        return compile(source, pathname, "exec", dont_inherit=True)

    module._COMPILE = counting
    module.compiled = compiled
    return module


def archive(tmp_path, name, source=SOURCE):
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("payload_mod.py", source)
    return path


def import_from(path):
    sys.path.insert(0, str(path))
    try:
        sys.modules.pop("payload_mod", None)
        module = importlib.import_module("payload_mod")
        return module.where()
    finally:
        sys.path.remove(str(path))
        sys.path_importer_cache.pop(str(path), None)
        sys.modules.pop("payload_mod", None)


def test_a_source_is_compiled_once_whatever_archive_brings_it(hook, tmp_path):
    hook.install()
    assert zipimport._compile_source is hook.compile_source
    first, second = archive(tmp_path, "a.zip"), archive(tmp_path, "b.zip")
    assert import_from(first) == f"{first}{os.sep}payload_mod.py"
    assert import_from(second) == f"{second}{os.sep}payload_mod.py"
    assert hook.compiled == [f"{first}{os.sep}payload_mod.py"]
    assert len(os.listdir(hook.CACHE)) == 1


def test_a_changed_source_is_compiled_again(hook, tmp_path):
    hook.install()
    import_from(archive(tmp_path, "a.zip"))
    changed = archive(tmp_path, "b.zip", SOURCE + "VERSION = 2\n")
    import_from(changed)
    assert hook.compiled[1:] == [f"{changed}{os.sep}payload_mod.py"]


def test_an_unreadable_cache_entry_is_compiled_and_replaced(hook, tmp_path):
    hook.install()
    import_from(archive(tmp_path, "a.zip"))
    (entry,) = os.listdir(hook.CACHE)
    with open(os.path.join(hook.CACHE, entry), "wb") as broken:
        broken.write(b"\x00not marshal")
    import_from(archive(tmp_path, "b.zip"))
    assert len(hook.compiled) == 2
    import_from(archive(tmp_path, "c.zip"))
    assert len(hook.compiled) == 2


@pytest.mark.parametrize("mode", [0o755, 0o1777])
def test_a_cache_others_may_open_is_not_used(hook, mode):
    os.chmod(hook.CACHE, mode)
    hook.install()
    assert zipimport._compile_source is not hook.compile_source

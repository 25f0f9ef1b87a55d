"""Lab stand-in for SGLang's inference server: NOT the engine.

The engine needs a GPU, so the lab cannot run it. The venv holds the REAL ``sglang`` wheel
(installed with ``--no-deps``, so its source, ``srt/server_args.py`` included, is the release's
own). This package lives outside the venv, in /usr/local/lib/sglang-standin, which the lab puts
on the service's PYTHONPATH; the ``sitecustomize`` module there calls :func:`install`. From then
on ``python -m sglang.launch_server`` - the unchanged ExecStart of the production unit - runs
``sglang_standin/launch_server.py`` instead of the engine, and ``import sglang`` no longer runs
the package's ``__init__`` (which would import torch). Every module of the real package stays
where it is, untouched.
"""
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch_server.py")


class _BareLoader(importlib.abc.Loader):
    """Creates the ``sglang`` package object without executing its ``__init__``."""

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__doc__ = "sglang package opened by the lab stand-in (its __init__ was not run)"


class StandinFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "sglang":
            real = importlib.machinery.PathFinder.find_spec(name)
            if real is None:
                return None
            spec = importlib.util.spec_from_loader(name, _BareLoader(), is_package=True)
            spec.submodule_search_locations = list(real.submodule_search_locations)
            return spec
        if name == "sglang.launch_server":
            return importlib.util.spec_from_file_location(name, _STANDIN)
        return None


def install():
    if not any(isinstance(finder, StandinFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, StandinFinder())

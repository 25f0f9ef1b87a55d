# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the engine's sandbox keeps from it: the code it would load at its next start. Pure
Python, no Ansible imports: the engine_sandbox filter calls it, the unit tests too.

Where the Hugging Face libraries look, as huggingface_hub and transformers resolve it:
HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface; the hub cache
(HF_HUB_CACHE, or the older HUGGINGFACE_HUB_CACHE and TRANSFORMERS_CACHE) defaults to
HF_HOME/hub; the modules that trust_remote_code imports are copied into HF_MODULES_CACHE
(default HF_HOME/modules) and imported from there."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Inside the unit's private /tmp: emptied whenever the service stops, so a module written there
# is gone before the next start, which copies it again from the read-only model directory.
MODULES_CACHE = "/tmp/hf_modules"
HUB_CACHE_VARIABLES = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE")


def _clean(path):
    path = str(path or "").strip()
    return path.rstrip("/") or path


def hf_home(home, environment):
    """The Hugging Face home of a service whose account's home is HOME."""
    environment = environment or {}
    if environment.get("HF_HOME"):
        return _clean(environment["HF_HOME"])
    cache = environment.get("XDG_CACHE_HOME") or _clean(home) + "/.cache"
    return _clean(cache) + "/huggingface"


def engine_sandbox(home, environment, model_paths, engine_downloads):
    """The unit's additions: ``environment`` (variables set for the engine), ``read_only``
    (paths the engine may read, never write: ReadOnlyPaths) and ``hf_home`` (the directory the
    role makes where it is missing, so that the engine cannot make it itself)."""
    environment = dict(environment or {})
    home_dir = hf_home(home, environment)
    added = {"HF_MODULES_CACHE": MODULES_CACHE}
    read_only = []
    if not engine_downloads:
        added["HF_HUB_OFFLINE"] = "1"
        read_only.append(home_dir)
        read_only.extend(_clean(environment[name]) for name in HUB_CACHE_VARIABLES
                         if str(environment.get(name) or "").startswith("/"))
    # A model given as a repository id is read from the hub cache; a path is made read-only itself.
    read_only.extend(_clean(path) for path in model_paths or [] if str(path or "").startswith("/"))
    unique = []
    for path in read_only:
        if path not in unique:
            unique.append(path)
    return {"environment": added, "read_only": unique, "hf_home": "" if engine_downloads else home_dir}

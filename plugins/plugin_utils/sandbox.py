# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the engine's sandbox keeps from it: the code it would load at its next start. Pure
Python, no Ansible imports: the engine_sandbox filter calls it, the unit tests too.

Where the Hugging Face libraries look, as huggingface_hub and transformers resolve it:
HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface; the hub cache
(HF_HUB_CACHE, or the older HUGGINGFACE_HUB_CACHE and TRANSFORMERS_CACHE) defaults to
HF_HOME/hub; a downloaded model's snapshot directory holds links into the blobs beside it; the
modules that trust_remote_code imports are copied into HF_MODULES_CACHE (default
HF_HOME/modules) and imported from there."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Inside the unit's private /tmp: emptied whenever the service stops, so a module written there
# is gone before the next start, which copies it again from the read-only model directory.
MODULES_CACHE = "/tmp/hf_modules"
HUB_CACHE_VARIABLES = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE")
# Variables naming where code is read from: a relative or ~ value would leave it unguarded.
PATH_VARIABLES = ("HF_HOME", "XDG_CACHE_HOME") + HUB_CACHE_VARIABLES
# A model downloaded to a hub cache: <cache>/models--<org>--<name>/snapshots/<revision>.
SNAPSHOT = re.compile(r"^(.*/models--[^/]+)/snapshots/[^/]+$")


def _clean(path):
    path = str(path or "").strip()
    return path.rstrip("/") or path


def _within(path, root):
    return path != root and path.startswith(root.rstrip("/") + "/")


def hf_home(home, environment):
    """The Hugging Face home of a service whose account's home is HOME."""
    environment = environment or {}
    if environment.get("HF_HOME"):
        return _clean(environment["HF_HOME"])
    cache = environment.get("XDG_CACHE_HOME") or _clean(home) + "/.cache"
    return _clean(cache) + "/huggingface"


def _ancestors(path, root):
    """The directories strictly between ROOT and PATH, outermost first."""
    parts = path[len(root.rstrip("/")) + 1:].split("/")[:-1]
    return [root.rstrip("/") + "/" + "/".join(parts[:i + 1]) for i in range(len(parts))]


def engine_sandbox(home, environment, model_path, draft_model_path, eagle3_enabled, engine_downloads,
                   writable_paths):
    """The unit's additions, for the model (and, with EAGLE-3 on, the draft model) the engine loads.

    ``environment``: variables set for the engine. ``read_only``: paths it may read, never write
    (ReadOnlyPaths). ``pinned``: each directory between a writable path and a read-only path
    inside it, bound onto itself (BindPaths) so that it is a mount point, which rename(2) and
    rmdir(2) refuse: otherwise the engine could move the read-only tree aside and put its own
    in its place for the next start. ``hf_home``: the directory the role makes where it is
    missing, so that the engine cannot make it itself. ``problems``: writable paths that would
    leave that code open to it, each a sentence naming the setting. (A relative or ~ value of
    one of PATH_VARIABLES is refused with the other settings: blackwell.sglang.setting_problems.)"""
    environment = dict(environment or {})
    writable = [_clean(path) for path in writable_paths or [] if str(path or "").strip()]
    problems = []
    home_dir = hf_home(home, environment)
    added = {"HF_MODULES_CACHE": MODULES_CACHE}
    read_only = []
    if not engine_downloads:
        added["HF_HUB_OFFLINE"] = "1"
        read_only.append(home_dir)
        read_only.extend(_clean(environment[name]) for name in HUB_CACHE_VARIABLES
                         if str(environment.get(name) or "").startswith("/"))
    model_paths = [model_path] + ([draft_model_path] if eagle3_enabled else [])
    for path in (_clean(p) for p in model_paths):
        # A repository id is read from the hub cache; a path is made read-only itself, and a hub
        # snapshot with the model's blobs its links point to.
        if path.startswith("/"):
            snapshot = SNAPSHOT.match(path)
            read_only.append(snapshot.group(1) if snapshot else path)
    unique = []
    for path in read_only:
        if path not in unique and not [other for other in read_only if _within(path, other)]:
            unique.append(path)
    for path in writable:
        problems.extend("sglang_service_writable_paths: %s lies inside %s, which the engine may only "
                        "read (the Hugging Face home or a model); a writable path there would let it "
                        "change that code." % (path, guarded)
                        for guarded in unique if path == guarded or _within(path, guarded))
    pinned = []
    for path in unique:
        for root in writable:
            if _within(path, root):
                pinned.extend(a for a in _ancestors(path, root) if a not in pinned)
    return {"environment": added, "read_only": unique, "pinned": pinned,
            "hf_home": "" if engine_downloads else home_dir, "problems": problems}

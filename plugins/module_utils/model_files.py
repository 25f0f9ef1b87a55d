# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a model directory holds every file it should, read without loading any weights.

The expected files are the given list (a repository's files at a revision), or else
config.json, model.safetensors.index.json and every shard its weight_map names, or else
config.json and model.safetensors. Each safetensors file present is also checked against its
own header: 8 bytes of little-endian header length, the JSON header, then the tensors' bytes,
whose data_offsets say how long the file must be; a copy or download cut short is caught.

No Ansible imports: blackwell.sglang.sglang_model_info wraps this, the unit tests import it.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import struct

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
CONFIG = "config.json"
# A header larger than this is not a safetensors header (the format caps it at 100 MB).
MAX_HEADER = 100 * 1000 * 1000
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def check_safetensors(path):
    """None when PATH is a whole safetensors file, else why not (one short phrase)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                return "%d bytes, shorter than a safetensors header" % size
            (length,) = struct.unpack("<Q", head)
            if length > MAX_HEADER or 8 + length > size:
                return "header length %d does not fit in %d bytes" % (length, size)
            header = json.loads(handle.read(length).decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return "unreadable safetensors header (%s)" % exc
    if not isinstance(header, dict):
        return "the safetensors header is not a JSON object"
    end = 0
    for name, tensor in header.items():
        if name == "__metadata__":
            continue
        offsets = tensor.get("data_offsets") if isinstance(tensor, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2):
            return "tensor %s has no data_offsets" % name
        end = max(end, int(offsets[1]))
    want = 8 + length + end
    if size != want:
        return "%d bytes, the header says %d" % (size, want)
    return None


def expected_files(root, listed=None):
    """(expected relative paths, None) or (None, why they cannot be known)."""
    if listed:
        return sorted(set(listed)), None
    index = os.path.join(root, INDEX)
    if os.path.isfile(index):
        try:
            with open(index) as handle:
                weight_map = json.load(handle)["weight_map"]
            shards = set(weight_map.values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            return None, "%s is unreadable (%s)" % (INDEX, exc)
        return [CONFIG, INDEX] + sorted(shards), None
    if os.path.isfile(os.path.join(root, SINGLE)):
        return [CONFIG, SINGLE], None
    return None, "neither %s nor %s is there" % (INDEX, SINGLE)


def hub_snapshot(cache_dir, repo_id, revision):
    """(snapshot directory, None) of REPO_ID at REVISION in a Hugging Face hub cache, or
    (None, why not). A branch or tag is resolved through the cache's refs/ file."""
    repo_dir = os.path.join(cache_dir, "models--" + repo_id.replace("/", "--"))
    if _COMMIT.match(revision):
        commit = revision
    else:
        ref = os.path.join(repo_dir, "refs", revision)
        try:
            with open(ref) as handle:
                commit = handle.read().strip()
        except (OSError, UnicodeDecodeError):
            return None, "%s at %s is not in the cache %s" % (repo_id, revision, cache_dir)
    snapshot = os.path.join(repo_dir, "snapshots", commit)
    if not os.path.isdir(snapshot):
        return None, "%s at %s (%s) is not in the cache %s" % (repo_id, revision, commit, cache_dir)
    return snapshot, None


def inspect(root, listed=None, check_headers=True):
    """What ROOT holds of its model: a dict with exists, complete, expected, missing, damaged
    ({file, reason}), bytes (of the expected files present) and reason (None when complete)."""
    state = {"path": root, "exists": os.path.isdir(root), "complete": False, "expected": [],
             "missing": [], "damaged": [], "bytes": 0, "reason": None}
    if not state["exists"]:
        state["reason"] = "%s does not exist" % root
        if listed:
            state["expected"] = state["missing"] = sorted(set(listed))
            state["reason"] += ": %d of %d expected files missing" % ((len(state["missing"]),) * 2)
        return state
    expected, why = expected_files(root, listed)
    if expected is None:
        state["reason"] = "%s: %s" % (root, why)
        return state
    state["expected"] = expected
    for name in expected:
        path = os.path.join(root, name)
        if not os.path.isfile(path):
            state["missing"].append(name)
            continue
        state["bytes"] += os.path.getsize(path)
        if check_headers and name.endswith(".safetensors"):
            problem = check_safetensors(path)
            if problem:
                state["damaged"].append({"file": name, "reason": problem})
    parts = []
    if state["missing"]:
        parts.append("%d of %d expected files missing (%s)" % (
            len(state["missing"]), len(expected), ", ".join(_first(state["missing"]))))
    if state["damaged"]:
        parts.append("%d incomplete (%s)" % (len(state["damaged"]), ", ".join(
            "%s: %s" % (d["file"], d["reason"]) for d in state["damaged"][:3])))
    state["complete"] = not parts
    state["reason"] = "%s: %s" % (root, "; ".join(parts)) if parts else None
    return state


def _first(names, count=5):
    return names[:count] + (["..."] if len(names) > count else [])

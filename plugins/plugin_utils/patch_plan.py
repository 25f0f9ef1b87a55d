# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_sm120_patch role's plan: what the role does on a node, decided from its reads.

``plan`` takes what the role read (``blackwell.sglang.sglang_venv_info`` on the venv, the node's
``gpu`` facts from ``blackwell.sglang.gpu_facts``), the role's settings and whether the run is a
check, and returns:

- ``problems``: why the role must stop the host before it changes anything (empty: go on);
- ``steps``: the named steps the role takes, each ``{"name", "reason"}``; today one,
  ``patch``, run by ``blackwell.sglang.sglang_capmap`` once per major in ``majors`` (the module
  itself finds which file already has its entry);
- ``notes``: what there is nothing to patch for, one line each, as the role reports them;
- ``package``, ``release`` and ``majors``: what the steps act on;
- ``refused_in_check``: whether a check stops on the problems too (a real run always does):
  not where SGLang is missing or not as installed, which is the install's drift in a check.

Plain Python without Ansible imports: the filter ``blackwell.sglang.sm120_patch_plan`` calls it
in the role, and the unit tests call it over recorded reads.
"""
from __future__ import annotations

from ansible_collections.blackwell.sglang.plugins.module_utils.dist_record import describe as record_off

# Where SGLang keeps the torch symmetric-memory communicator, relative to the sglang package.
COMMUNICATOR = "srt/distributed/device_communicators/torch_symm_mem.py"

# The settings the plan reads, with the role's defaults.
DEFAULTS = {
    "venv": "/opt/sglang/current",
    "capabilities": [],
    "source_capability": 10,
    "min_capability": 9,
    "missing_policy": "skip",
    "state": "present",
}


def _majors(values) -> list:
    return [int(value) for value in values or []]


def plan(venv_info: dict, gpu: dict | None, settings: dict, check_mode: bool = False) -> dict:
    """The role's plan for one node (see the module's docstring)."""
    conf = dict(DEFAULTS)
    conf.update({key: value for key, value in settings.items() if value is not None})
    venv = conf["venv"]
    package = venv_info.get("sglang_package") or ""
    release = venv_info.get("sglang_version") or "unknown"
    communicator = bool(venv_info.get("torch_symm_mem"))
    source = int(conf["source_capability"])
    minimum = int(conf["min_capability"])
    given = _majors(conf["capabilities"])
    seen = given if given else _majors((gpu or {}).get("capability_majors"))
    majors = sorted({major for major in seen if major >= minimum and major != source})
    below = sorted({major for major in seen if major < minimum})
    missing = (f"SGLang {release} in {venv} has no {COMMUNICATOR} (releases up "
               "to 0.5.4 predate the torch symmetric-memory all-reduce)")
    # A release whose files differ from its RECORD (the patch's own entries are not a
    # difference) is broken, not one to patch or to call old: a missing communicator there is
    # a deleted file, not a release before 0.5.5.
    broken = record_off(venv_info.get("sglang_record"), f"SGLang {release} in {venv}") if package else ""

    # A check of a node without SGLang has the same problem; the role's refusal skips it there on
    # its check-mode guard (the install is the drift), so the drift report lists it not judged.
    problems = []
    if not package:
        problems.append(f"no SGLang package under {venv}/lib/python3.*/site-packages; install "
                        "it first (sglang_install)")
    elif broken:
        problems.append(f"{broken}; install it again (sglang_install) before patching it")
    elif not communicator and conf["missing_policy"] == "fail":
        problems.append(missing)

    notes = []
    if not package:
        # Only a check goes on without SGLang: a real run is refused on the problem above.
        if check_mode:
            notes.append(f"no SGLang under {venv} yet: its install is this node's drift, and the patch "
                         "is judged once it is installed")
    elif broken:
        # Only a check goes on with a broken release: a real run is refused on the problem above.
        if check_mode:
            notes.append(f"{broken}: installing it again is this node's drift, and the patch is judged "
                         "once it is installed")
    elif not communicator:
        notes.append(f"{missing}; nothing to patch")
    else:
        if below:
            notes.append(f"capability majors {', '.join(map(str, below))} are below {minimum}; "
                         "SGLang's torch symmetric-memory all-reduce refuses them, nothing to patch")
        if source in seen:
            notes.append(f"capability {source} is the entry the patch copies from "
                         "(sglang_sm120_patch_source_capability); SGLang lists it upstream, no "
                         "patch needed")
        if not given and not majors:
            reason = (gpu or {}).get("reason", "no GPU facts")
            notes.append(f"no GPU capability majors to patch for (gpu_facts: {reason}); set "
                         "sglang_sm120_patch_capabilities on hosts that cannot see their GPUs")

    steps = []
    if package and communicator and majors and not broken:
        verb = "add" if conf["state"] == "present" else "remove"
        steps.append({
            "name": "patch",
            "reason": (f"SGLang {release}: {verb} the entries for capability "
                       f"{', '.join(map(str, majors))} where the dicts need it"),
        })
    return {"problems": problems, "steps": steps, "notes": notes, "package": package,
            "release": release, "majors": majors if steps else [],
            "refused_in_check": bool(package) and not broken}


def reads(settings: dict, venv_info: dict, gpu_facts_known: bool, gather: bool) -> dict:
    """Which reads the role takes itself: ``venv`` where the play passed no read of the same venv
    (sglang_sm120_patch_venv_info), ``gpus`` where no capabilities are set and the GPU facts are
    to be gathered (always, or where the play has none)."""
    venv = settings.get("venv", DEFAULTS["venv"])
    return {
        "venv": (venv_info or {}).get("venv", "") != venv,
        "gpus": not (settings.get("capabilities") or []) and (bool(gather) or not gpu_facts_known),
    }

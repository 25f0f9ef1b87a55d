"""sglang_sm120_patch's plan (plugins/plugin_utils/patch_plan.py) over real reads.

The venv reads are what blackwell.sglang.sglang_venv_info's core returns on real SGLang release
files (tests/sglang_wheels.py unpacks them from PyPI's wheels); the GPU facts are gpu_facts'
output recorded on a real H200 host and its core's answer for the field report's 8x RTX PRO
6000 recording. Each case is one node state: a fresh release to patch, an SM90 node, a release
without the communicator (under each policy), no SGLang in a run and in a check, GPUs below the
minimum, the source major, no GPUs seen, removal.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import gpu_samples as samples
import sglang_releases
from ansible_collections.blackwell.sglang.plugins.module_utils import capmap
from ansible_collections.blackwell.sglang.plugins.modules.sglang_venv_info import venv_info
from ansible_collections.blackwell.sglang.plugins.plugin_utils.patch_plan import COMMUNICATOR, plan, reads
from sglang_wheels import BEFORE_SYMM_MEM, install_tree
from unit.test_gpu_pcie import adhoc_facts, gather_recording

RELEASE = "0.5.8"
H200 = adhoc_facts(samples.FIXTURES / "h200" / "gpu_facts.adhoc.txt")
RTX_PRO_6000_X8 = gather_recording(samples.FIXTURES / "rtx-pro-6000-x8")
PATCH_REASON = f"SGLang {RELEASE}: add the entries for capability 12 where the dicts need it"


def read(tmp_path: Path, version: str | None) -> dict:
    """sglang_venv_info's read of a venv holding `version`'s files (None: an empty venv)."""
    venv = tmp_path / "venv"
    (venv / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    if version:
        install_tree(version, venv / "lib" / "python3.11")
    return venv_info(str(venv))


@pytest.fixture(name="release")
def fixture_release(tmp_path):
    return read(tmp_path, RELEASE)


def settings(venv_read: dict, **extra) -> dict:
    return {"venv": venv_read["venv"], **extra}


def test_the_field_report_box_on_a_release_to_patch_gets_one_patch_step(release):
    assert RTX_PRO_6000_X8["capability_majors"] == [12]
    got = plan(release, RTX_PRO_6000_X8, settings(release))
    assert got == {"problems": [], "steps": [{"name": "patch", "reason": PATCH_REASON}], "notes": [],
                   "package": release["sglang_package"], "release": RELEASE, "majors": [12],
                   "refused_in_check": True}
    # The same in a check: the module judges each file there.
    assert plan(release, RTX_PRO_6000_X8, settings(release), check_mode=True) == got


def test_an_sm90_node_is_run_through_the_module_which_finds_9_upstream(release):
    got = plan(release, H200, settings(release))
    assert (got["majors"], got["notes"], got["problems"]) == ([9], [], [])
    assert got["steps"] == [{"name": "patch", "reason": f"SGLang {RELEASE}: add the entries for capability 9 "
                                                        "where the dicts need it"}]


def test_given_majors_win_over_the_gpus_and_are_sorted_once(release):
    got = plan(release, H200, settings(release, capabilities=["12", 12, 11]))
    assert got["majors"] == [11, 12]


def test_majors_below_the_minimum_and_the_source_major_are_notes_not_steps(release):
    got = plan(release, None, settings(release, capabilities=[8, 10, 7]))
    assert got["steps"] == [] and got["majors"] == []
    assert got["notes"] == [
        "capability majors 7, 8 are below 9; SGLang's torch symmetric-memory all-reduce refuses them, "
        "nothing to patch",
        "capability 10 is the entry the patch copies from (sglang_sm120_patch_source_capability); SGLang "
        "lists it upstream, no patch needed",
    ]


@pytest.mark.parametrize("gpu, reason", [
    (None, "no GPU facts"),
    ({"capability_majors": [], "reason": "nvidia-smi not found"}, "nvidia-smi not found"),
    ({"capability_majors": []}, "no GPU facts"),
])
def test_no_gpu_seen_is_a_note_with_gpu_facts_reason(release, gpu, reason):
    got = plan(release, gpu, settings(release))
    assert (got["steps"], got["problems"]) == ([], [])
    assert got["notes"] == [f"no GPU capability majors to patch for (gpu_facts: {reason}); set "
                            "sglang_sm120_patch_capabilities on hosts that cannot see their GPUs"]


def test_a_release_without_the_communicator_is_a_note_or_refused_by_policy(tmp_path):
    old = read(tmp_path, BEFORE_SYMM_MEM)
    assert old["sglang_version"] == BEFORE_SYMM_MEM and old["torch_symm_mem"] is False
    missing = (f"SGLang {BEFORE_SYMM_MEM} in {old['venv']} has no {COMMUNICATOR} (releases up to 0.5.4 "
               "predate the torch symmetric-memory all-reduce)")
    skipped = plan(old, RTX_PRO_6000_X8, settings(old))
    assert (skipped["problems"], skipped["steps"], skipped["notes"]) == ([], [], [f"{missing}; nothing to patch"])
    refused = plan(old, RTX_PRO_6000_X8, settings(old, missing_policy="fail"))
    assert (refused["problems"], refused["steps"]) == ([missing], [])


def test_no_sglang_is_refused_in_a_run_and_a_note_in_a_check(tmp_path):
    empty = read(tmp_path, None)
    assert empty["sglang_package"] == ""
    run = plan(empty, RTX_PRO_6000_X8, settings(empty))
    assert run["problems"] == [f"no SGLang package under {empty['venv']}/lib/python3.*/site-packages; "
                               "install it first (sglang_install)"]
    assert run["steps"] == [] and run["release"] == "unknown"
    assert run["notes"] == []
    # A check has the same problem: the role's refusal skips it on its check-mode guard, and the
    # drift report lists the patch as not judged; the note says why.
    check = plan(empty, RTX_PRO_6000_X8, settings(empty), check_mode=True)
    assert (check["problems"], check["steps"]) == (run["problems"], [])
    assert check["notes"] == [f"no SGLang under {empty['venv']} yet: its install is this node's drift, "
                              "and the patch is judged once it is installed"]


def test_removal_names_its_step_for_what_it_does(release):
    got = plan(release, RTX_PRO_6000_X8, settings(release, state="absent"))
    assert got["steps"] == [{"name": "patch", "reason": f"SGLang {RELEASE}: remove the entries for "
                                                        "capability 12 where the dicts need it"}]


def test_settings_left_out_take_the_roles_defaults(release):
    # The role's defaults: venv /opt/sglang/current, source 10, minimum 9, policy skip.
    got = plan(release, {"capability_majors": [8, 9, 10, 12]}, {})
    assert got["majors"] == [9, 12]
    assert [note.split(" ")[0:3] for note in got["notes"]] == [["capability", "majors", "8"],
                                                               ["capability", "10", "is"]]


@pytest.mark.parametrize("venv_info, capabilities, known, gather, expected", [
    # site.yml: sglang_install's read of the same venv, the preflight's facts, gathering on.
    ({"venv": "/opt/sglang/current"}, [], True, True, {"venv": False, "gpus": True}),
    ({"venv": "/opt/sglang/current"}, [], True, False, {"venv": False, "gpus": False}),
    # A read of another venv, or none, is no read of this one.
    ({"venv": "/opt/other"}, [], False, False, {"venv": True, "gpus": True}),
    ({}, [], True, False, {"venv": True, "gpus": False}),
    # Capabilities set: the GPUs are never asked.
    ({}, [12], False, True, {"venv": True, "gpus": False}),
])
def test_the_role_reads_only_what_the_play_has_not(venv_info, capabilities, known, gather, expected):
    settings = {"venv": "/opt/sglang/current", "capabilities": capabilities}
    assert reads(settings, venv_info, known, gather) == expected


def test_a_release_with_its_communicator_deleted_is_broken_not_old(tmp_path):
    """The lab's field case: part of the package deleted, the communicator with it. Read with its
    RECORD, the release is refused in a run (install it again) and a note in a check, never a
    release before 0.5.5 with nothing to patch; installed whole and patched, it is complete."""
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    sglang_releases.install(RELEASE, site)
    capmap.run(path=str(site / "sglang"))
    whole = venv_info(str(venv), record=True)
    assert plan(whole, RTX_PRO_6000_X8, settings(whole))["steps"] == [{"name": "patch", "reason": PATCH_REASON}]
    (site / "sglang" / COMMUNICATOR).unlink()
    broken = venv_info(str(venv), record=True)
    assert broken["torch_symm_mem"] is False
    why = (f"SGLang {RELEASE} in {venv} differs from its RECORD: 1 file missing (sglang/{COMMUNICATOR})")
    run = plan(broken, RTX_PRO_6000_X8, settings(broken))
    assert (run["problems"], run["steps"], run["notes"]) == (
        [f"{why}; install it again (sglang_install) before patching it"], [], [])
    assert run["refused_in_check"] is False
    check = plan(broken, RTX_PRO_6000_X8, settings(broken), check_mode=True)
    assert check["notes"] == [f"{why}: installing it again is this node's drift, and the patch is judged once it "
                              "is installed"]
    assert check["steps"] == []

"""A run of site.yml as one slice of a sliced AWX job (plugins/plugin_utils/rollout_slicing.py):
which runs are taken for a slice, the refusal of a sliced converge by its exact message, the
sliced check that runs, the batches of an allowed sliced converge, and the settings table's
refusal of bad values; then the lookup that reads the extra vars, and the plays that follow it.
"""
from __future__ import annotations

import json

import pytest
import yaml
from ansible import context
from ansible.module_utils.common.collections import ImmutableDict
from ansible.parsing.dataloader import DataLoader
from ansible.utils.vars import load_extra_vars

from ansible_collections.blackwell.sglang.plugins.lookup.rollout_slicing import LookupModule
from ansible_collections.blackwell.sglang.plugins.plugin_utils import settings
from ansible_collections.blackwell.sglang.plugins.plugin_utils.rollout_slicing import leaves_out, plan, started_as_a_slice
from conftest import ROOT

# AWX's meta variables of a job that a sliced job template started (awx_meta_vars): launched by a
# workflow job, which AWX names after the job template it slices.
SLICE = {"awx_job_id": 1042, "awx_job_launch_type": "workflow", "awx_workflow_job_id": 1041,
         "awx_workflow_job_name": "SGLang rollout", "awx_job_template_id": 7,
         "awx_job_template_name": "SGLang rollout", "awx_inventory_name": "gpu-fleet"}
# The same job template with job slicing at 1: a job of its own, launched by hand.
ONE_JOB = {"awx_job_id": 1043, "awx_job_launch_type": "manual", "awx_job_template_id": 7,
           "awx_job_template_name": "SGLang rollout", "awx_inventory_name": "gpu-fleet"}
SEEN = ("AWX started it from a workflow job named after its job template ('SGLang rollout'), as it starts"
        " each slice of a sliced job template")
REFUSED = (
    "preflight: this converge is one slice of a sliced AWX job: {seen}. Each slice would roll out on its own,"
    " side by side with the others: batches of sglang_rollout_serial nodes in every slice at once, a failed"
    " node stopping its own slice only, and the router's workers and the Prometheus targets known from its own"
    " hosts only. Run the converge as one job (the job template's job slicing at 1), or as one job per group,"
    " one after the other, each limited to its group (--limit); a check (--check) may be sliced. A site that"
    " accepts the risk sets sglang_rollout_allow_sliced: true and sglang_rollout_slice_count as extra vars.")
ALLOWED = {"sglang_rollout_allow_sliced": True, "sglang_rollout_slice_count": 4}


def runs(serial=1, note=""):
    return {"sliced": bool(note), "serial": serial, "note": note, "problems": []}


def test_a_run_without_awx_variables_runs_with_its_serial():
    assert plan({}) == runs()
    assert plan({}, check_mode=True) == runs()
    # Whatever Ansible's serial takes is passed on as given: a number, its digits, a percentage, a list.
    for serial in (2, "2", "25%", [1, "10%"]):
        assert plan({"sglang_rollout_serial": serial}) == runs(serial)


def test_a_job_with_slice_count_1_runs():
    """With job slicing at 1 (or an inventory of one host) AWX starts a job, not a workflow."""
    assert started_as_a_slice(ONE_JOB) == ""
    assert plan(dict(ONE_JOB, sglang_rollout_serial=3)) == runs(3)
    # The site's own word: a stated slice count of 1 runs, whatever AWX's variables look like.
    assert plan(dict(SLICE, sglang_rollout_slice_count=1, sglang_rollout_serial=3)) == runs(3)


def test_a_job_in_a_workflow_of_another_name_runs():
    """A workflow of the site's own (named otherwise) that runs the template once is one job."""
    mine = dict(SLICE, awx_workflow_job_name="Nightly GPU maintenance")
    assert started_as_a_slice(mine) == ""
    assert plan(mine) == runs()


def test_a_sliced_converge_is_refused_naming_the_reason_and_the_way_to_run_it():
    assert started_as_a_slice(SLICE) == "SGLang rollout"
    assert plan(SLICE) == {"sliced": True, "serial": 1, "note": "", "problems": [REFUSED.format(seen=SEEN)]}
    # Allowed, but not by the extra vars the rollout reads: a false allowance refuses the same.
    assert plan(dict(SLICE, sglang_rollout_allow_sliced="no"))["problems"] == [REFUSED.format(seen=SEEN)]
    # A slice count the site states is a slice too, AWX's variables or not.
    assert plan({"sglang_rollout_slice_count": "3"})["problems"] == [
        REFUSED.format(seen="sglang_rollout_slice_count is 3")]


def test_a_sliced_check_runs_and_says_what_it_left_out():
    note = (f"this check is one slice of a sliced AWX job ({SEEN}): the router's worker list and the Prometheus"
            " targets were not checked, as a slice holds part of the fleet; run blackwell.sglang.router and"
            " blackwell.sglang.prometheus as one job without slices.")
    assert plan(SLICE, check_mode=True) == runs(1, note)
    # Where the slice leaves out nothing for the host, it checks what one job would, and says nothing.
    assert plan(SLICE, check_mode=True, left_out=False) == {"sliced": True, "serial": 1, "note": "", "problems": []}


@pytest.mark.parametrize("seen, left_out", [
    ({}, False),
    ({"router_urls": [], "routers": [], "targets_path": ""}, False),
    ({"targets_path": "  "}, False),
    ({"router_urls": ["http://10.0.0.9:30080"]}, True),
    ({"routers": ["router-01"]}, True),
    ({"targets_path": "/etc/prometheus/file_sd/sglang.json"}, True),
])
def test_a_slice_leaves_out_the_router_and_the_targets_only_where_there_are_some(seen, left_out):
    assert leaves_out(**seen) is left_out


def test_an_allowed_sliced_converge_takes_its_share_of_the_serial():
    # The count the site states decides, and is what the note names.
    def note(batch, serial):
        return (f"this converge is one slice of a sliced AWX job (sglang_rollout_slice_count is 4): batches"
                f" of {batch} nodes (sglang_rollout_serial {serial} divided among 4 slices); the router's worker"
                " list and the Prometheus targets were left as they were, as a slice holds part of the fleet;"
                " run blackwell.sglang.router and blackwell.sglang.prometheus as one job without slices.")

    assert plan({**SLICE, **ALLOWED, "sglang_rollout_serial": 8}) == runs(2, note(2, 8))
    # Rounded down: 4 slices of 2 keep the fleet at 8 nodes out, never 9 to 11.
    assert plan({**SLICE, **ALLOWED, "sglang_rollout_serial": "11"}) == runs(2, note(2, 11))
    assert plan({**SLICE, **ALLOWED, "sglang_rollout_serial": 4}) == runs(1, note(1, 4))
    # Strings as an extra var gives them (-e sglang_rollout_allow_sliced=true).
    assert plan(dict(SLICE, sglang_rollout_allow_sliced="true", sglang_rollout_slice_count="4",
                     sglang_rollout_serial="4"))["serial"] == 1


def test_an_allowed_sliced_converge_needs_the_count_awx_does_not_pass():
    assert plan(dict(SLICE, sglang_rollout_allow_sliced=True, sglang_rollout_serial=8))["problems"] == [
        f"preflight: this converge is one slice of a sliced AWX job ({SEEN}) and sglang_rollout_allow_sliced is"
        " true, but AWX does not tell a playbook how many slices run beside it: set sglang_rollout_slice_count to"
        " the job template's slice count (an extra var), and each slice takes batches of sglang_rollout_serial"
        " divided by it."]


def test_an_allowed_sliced_converge_refuses_a_serial_it_cannot_divide():
    assert plan({**SLICE, **ALLOWED, "sglang_rollout_serial": 3})["problems"] == [
        "preflight: sglang_rollout_serial is 3 and sglang_rollout_slice_count 4: a slice takes at least one node"
        " at a time, so 4 slices side by side could take 4 nodes out at once. Set sglang_rollout_serial to 4 or"
        " more, or slice the job template into at most 3 jobs."]
    # The default serial, 1, is smaller than any count above 1.
    assert plan({**SLICE, **ALLOWED})["problems"][0].startswith(
        "preflight: sglang_rollout_serial is 1 and sglang_rollout_slice_count 4:")
    for serial in ("25%", [1, 2], 0, True):
        assert plan({**SLICE, **ALLOWED, "sglang_rollout_serial": serial})["problems"] == [
            "preflight: sglang_rollout_serial must be a whole number of nodes, 1 or more, for a sliced converge,"
            f" which divides it among the slices; got {str(serial)!r}."]


@pytest.mark.parametrize("values, message", [
    ({"sglang_rollout_allow_sliced": "maybe"}, "sglang_rollout_allow_sliced: must be true or false, got 'maybe'."),
    ({"sglang_rollout_slice_count": 0}, "sglang_rollout_slice_count: must be at least 1, got 0."),
    ({"sglang_rollout_slice_count": 1001}, "sglang_rollout_slice_count: must be at most 1000, got 1001."),
    ({"sglang_rollout_slice_count": "four"}, "sglang_rollout_slice_count: must be a whole number, got 'four'."),
])
def test_bad_values_of_the_settings_are_refused_by_the_table(values, message):
    assert settings.problems(values) == [message]
    # Checked or not, sliced or not: the settings table refuses them first.
    for check_mode in (False, True):
        assert plan(dict(SLICE, **values), check_mode) == {
            "sliced": False, "serial": 1, "note": "", "problems": [f"preflight: {message}"]}
        assert plan(values, check_mode)["problems"] == [f"preflight: {message}"]


def test_good_values_of_the_settings_pass_the_table():
    assert settings.problems({"sglang_rollout_allow_sliced": "yes", "sglang_rollout_slice_count": "12"}) == []
    assert settings.problems({"sglang_rollout_allow_sliced": False, "sglang_rollout_slice_count": None}) == []


@pytest.fixture
def extra_vars(monkeypatch):
    """Sets the extra vars ansible-playbook was given (-e), as the lookup reads them."""
    def give(values):
        monkeypatch.setattr(context, "CLIARGS", ImmutableDict(extra_vars=(json.dumps(values),)))
        monkeypatch.setattr(load_extra_vars, "extra_vars", None, raising=False)
    return give


def test_the_lookup_reads_the_extra_vars_and_not_the_inventory(extra_vars):
    """The node play's batches are sized before any inventory variable is read: an allowance in
    the inventory changes no batch, so it allows nothing either."""
    lookup = LookupModule(loader=DataLoader())
    extra_vars(SLICE)
    inventory = dict(ALLOWED, sglang_rollout_serial=8, ansible_check_mode=False)
    assert lookup.run([], variables=inventory) == [plan(SLICE)]
    assert lookup.run([], variables={"ansible_check_mode": True})[0]["problems"] == []
    # What the host sees of the fleet decides only whether a sliced check has a note for it.
    check = {"ansible_check_mode": True}
    assert lookup.run([], variables=check)[0]["note"] != ""
    assert lookup.run([], variables=check, router_urls=[], routers=[], targets_path="")[0] == plan(
        SLICE, check_mode=True, left_out=False)
    assert lookup.run([], variables=check, routers=["router-01"])[0] == plan(SLICE, check_mode=True)
    extra_vars({**SLICE, **ALLOWED, "sglang_rollout_serial": 8})
    assert lookup.run([], variables={"ansible_check_mode": False})[0]["serial"] == 2


def plays(name):
    return yaml.safe_load((ROOT / "playbooks" / name).read_text(encoding="utf-8"))


def test_the_first_play_refuses_before_anything_connects_and_the_plays_follow_the_same_decision():
    lookup = "query('blackwell.sglang.rollout_slicing') | first"
    first = plays("site.yml")[0]
    assert first["ansible.builtin.import_playbook"] == "preflight.yml"
    refusal = plays("preflight.yml")[0]
    assert (refusal["name"], refusal["gather_facts"], refusal["any_errors_fatal"]) == (
        "Refuse a rollout that AWX runs in slices", False, True)
    assert lookup in refusal["vars"]["__sglang_rollout_slicing"]
    assert [t["ansible.builtin.fail"]["msg"] for t in refusal["tasks"] if "ansible.builtin.fail" in t] == [
        "{{ __sglang_rollout_slicing.problems | join(' ') }} Nothing has been changed on any node."]
    # The node play's batches, and its own refusal for a run that skipped the preflight.
    node = plays("node.yml")[0]
    assert node["serial"] == "{{ '100%' if ansible_check_mode else (" + lookup + ").serial }}"
    assert node["pre_tasks"][0]["name"] == "Refuse a sliced converge before any node changes"
    # The plays that need the whole fleet select no host in a slice.
    for name, hosts in (("preflight.yml", "sglang_router"), ("router.yml", "sglang_router"),
                        ("prometheus.yml", "sglang_nodes:sglang_router")):
        pattern = "{{ 'all:!all' if (" + lookup + ").sliced else '" + hosts + "' }}"
        assert [p["name"] for p in plays(name) if p["hosts"] == pattern] != [], name

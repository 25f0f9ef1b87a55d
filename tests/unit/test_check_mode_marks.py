"""The roles' marks for tasks check mode cannot judge, read from their task files.

The drift report lists a task tagged not_judged_in_check as not judged when a check skips it on
its last condition (plugins/plugin_utils/drift.py). So every marked task must end its `when` with
its check-mode guard, and a task in a marked block must have no condition of its own (it would
come last). An unmarked task whose last condition is `not ansible_check_mode` would be passed
over as an ordinary skip: it is marked, or named here with the reason it is not.
"""
from __future__ import annotations

import yaml

from conftest import ROOT

TAG = "not_judged_in_check"
# Unmarked on purpose: skipped in a check because what they follow never happens there.
UNMARKED = {
    # The re-read after an install: a check installs nothing, so there is nothing to re-read.
    "Read the SGLang version after the install",
    # The mark of an install under way, written before the installer and removed after it: the
    # node ends as it was, and a check reports the install itself (its creates, or the report of
    # what is installed again).
    "Mark the release's install as under way",
    "Mark the release's install as finished",
    # The router's releases other than the pinned one, under a home a check of a fresh host
    # would only now make: there is none to find there.
    "Find the router's other releases",
}


def _conditions(task: dict) -> list:
    when = task.get("when", [])
    return [str(c) for c in (when if isinstance(when, list) else [when])]


def _tasks(items, parent_tags=(), parent_when=()):
    for task in items or []:
        if not isinstance(task, dict):
            continue
        tags = list(parent_tags) + list(task.get("tags", []) or [])
        when = list(parent_when) + _conditions(task)
        yield task, tags, when, parent_tags
        for key in ("block", "rescue", "always"):
            if key in task:
                yield from _tasks(task[key], tags, when)


def _role_tasks():
    for path in sorted((ROOT / "roles").glob("*/*/*.yml")):
        if path.parent.name not in ("tasks", "handlers"):
            continue
        for task, tags, when, parent_tags in _tasks(yaml.safe_load(path.read_text()) or []):
            yield path.relative_to(ROOT), task, tags, when, parent_tags


def test_every_marked_task_ends_with_its_check_mode_guard():
    marked = [(path, task.get("name"), when) for path, task, tags, when, _p in _role_tasks() if TAG in tags]
    assert len(marked) >= 20, marked
    wrong = [(str(path), name, when) for path, name, when in marked if not when or "ansible_check_mode" not in when[-1]]
    assert wrong == []


def test_a_task_in_a_marked_block_has_no_condition_of_its_own():
    wrong = [(str(path), task.get("name")) for path, task, _tags, _when, parent_tags in _role_tasks()
             if TAG in parent_tags and "block" not in task and task.get("when")]
    assert wrong == []


def test_an_unmarked_task_does_not_end_with_a_check_mode_guard():
    wrong = [(str(path), task.get("name")) for path, task, tags, when, _p in _role_tasks()
             if TAG not in tags and when and "not ansible_check_mode" in when[-1] and "block" not in task
             and task.get("name") not in UNMARKED]
    assert wrong == []


def test_the_fixture_playbook_marks_its_task_as_the_roles_do():
    play = yaml.safe_load((ROOT / "tests" / "fixtures" / "drift" / "check.yml").read_text())
    names = {task["name"]: task for p in play for task in p.get("tasks", [])}
    assert TAG in names["Ask the service whether it is up"]["tags"]
    assert TAG not in names["Count the requests"].get("tags", [])

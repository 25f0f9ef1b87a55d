"""The roles' size budgets (issue #39, point 9), held as a ratchet.

Three counts per role, over its tasks/ and handlers/ files:
- tasks: every task, handler and include (a block is not a task; the tasks in it are);
- conditions: the keys when, changed_when, failed_when and until, on tasks and on blocks;
- depth: the longest chain of include_tasks/import_tasks from tasks/main.yml through the role's
  own task files.

BUDGETS holds today's counts; the design's targets are at most 40 conditions over all roles, a
depth of 3 and 20 tasks per role. A count above its budget fails, so a change that must add to a role
raises its budget in the same commit, where a review sees it; a count below it fails too, naming
the number to write here, so the budget follows every cut and no later change can spend it again
unnoticed.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from conftest import task_entries

ROOT = Path(__file__).resolve().parents[2]
CONDITION_KEYS = ("when", "changed_when", "failed_when", "until")
INCLUDE_KEYS = ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks", "include_tasks", "import_tasks")

BUDGETS = {
    "cuda13": {"tasks": 40, "conditions": 30, "depth": 2},
    "sglang_install": {"tasks": 50, "conditions": 23, "depth": 3},
    "sglang_model": {"tasks": 24, "conditions": 14, "depth": 3},
    # The rollback of a router that fails its gate after a switch: 7 tasks and 9 conditions more.
    "sglang_router": {"tasks": 49, "conditions": 38, "depth": 2},
    "sglang_service": {"tasks": 96, "conditions": 81, "depth": 5},
    "sglang_sm120_patch": {"tasks": 12, "conditions": 6, "depth": 1},
}


def _load(path: Path) -> list:
    return yaml.safe_load(path.read_text(encoding="utf-8")) or []


def _include_target(entry: dict) -> str | None:
    for key in INCLUDE_KEYS:
        if key in entry:
            value = entry[key]
            return value if isinstance(value, str) else (value or {}).get("file")
    return None


def _depth(role: Path, path: Path, chain: tuple) -> int:
    deepest = 0
    for entry in task_entries(_load(path)):
        target = _include_target(entry)
        if target is None:
            continue
        included = role / "tasks" / target
        if not included.exists():
            raise AssertionError(f"{path.relative_to(role.parent)} includes {target}, which the role does not have")
        if included in chain:
            raise AssertionError(f"{role.name}: {target} includes itself through {' > '.join(p.name for p in chain)}")
        deepest = max(deepest, 1 + _depth(role, included, chain + (included,)))
    return deepest


def counts(role: Path) -> dict:
    """The role's tasks, condition keys and include depth (see the module's docstring)."""
    tasks = conditions = 0
    for path in sorted([*role.glob("tasks/*.yml"), *role.glob("handlers/*.yml")]):
        for entry in task_entries(_load(path)):
            conditions += sum(1 for key in CONDITION_KEYS if key in entry)
            if not any(key in entry for key in ("block", "rescue", "always")):
                tasks += 1
    main = role / "tasks" / "main.yml"
    return {"tasks": tasks, "conditions": conditions, "depth": _depth(role, main, (main,))}


def over_budget(role: Path, budget: dict) -> list[str]:
    """What breaks ROLE's BUDGET, one sentence each: a count above it, or below it (the budget to
    lower); [] when the counts are the budget."""
    found = []
    for key, value in counts(role).items():
        if value > budget[key]:
            found.append(f"{role.name}: {value} {key}, over its budget of {budget[key]}")
        elif value < budget[key]:
            found.append(f"{role.name}: {value} {key}, under its budget of {budget[key]}: lower the budget to "
                         f"{value} in tests/unit/test_role_budgets.py")
    return found


def test_every_role_has_a_budget():
    assert sorted(path.name for path in (ROOT / "roles").iterdir() if path.is_dir()) == sorted(BUDGETS)


@pytest.mark.parametrize("role", sorted(BUDGETS))
def test_a_role_stays_at_its_budget(role):
    assert over_budget(ROOT / "roles" / role, BUDGETS[role]) == []


def _copy(tmp_path: Path, role: str) -> Path:
    copy = tmp_path / "roles" / role
    shutil.copytree(ROOT / "roles" / role, copy)
    return copy


def test_a_condition_added_to_a_task_is_over_the_budget(tmp_path):
    role = _copy(tmp_path, "sglang_sm120_patch")
    tasks = _load(role / "tasks" / "preflight.yml")
    tasks.append({"name": "Say something", "ansible.builtin.debug": {"msg": "x"}, "when": "false", "changed_when": False})
    (role / "tasks" / "preflight.yml").write_text(yaml.safe_dump(tasks), encoding="utf-8")
    assert over_budget(role, BUDGETS["sglang_sm120_patch"]) == [
        "sglang_sm120_patch: 13 tasks, over its budget of 12",
        "sglang_sm120_patch: 8 conditions, over its budget of 6",
    ]


def test_a_condition_on_a_block_counts_and_the_block_itself_is_no_task(tmp_path):
    role = _copy(tmp_path, "sglang_sm120_patch")
    tasks = _load(role / "tasks" / "preflight.yml")
    (role / "tasks" / "preflight.yml").write_text(
        yaml.safe_dump([{"name": "Wrapped", "when": "true", "block": tasks}]), encoding="utf-8")
    assert over_budget(role, BUDGETS["sglang_sm120_patch"]) == [
        "sglang_sm120_patch: 7 conditions, over its budget of 6",
    ]


def test_an_include_deeper_than_the_budget_is_over_it_and_a_removed_task_lowers_the_budget(tmp_path):
    role = _copy(tmp_path, "sglang_sm120_patch")
    (role / "tasks" / "deeper.yml").write_text(yaml.safe_dump([
        {"name": "Deeper", "ansible.builtin.import_tasks": "preflight.yml"}]), encoding="utf-8")
    main = _load(role / "tasks" / "main.yml")
    main = [entry for entry in main if entry.get("name") != "Report what there is nothing to patch for"]
    main.append({"name": "Go deeper", "ansible.builtin.include_tasks": "deeper.yml"})
    (role / "tasks" / "main.yml").write_text(yaml.safe_dump(main), encoding="utf-8")
    # main > deeper > preflight (2) beside main > preflight (1); one task out, two in: 13 tasks.
    assert over_budget(role, BUDGETS["sglang_sm120_patch"]) == [
        "sglang_sm120_patch: 13 tasks, over its budget of 12",
        "sglang_sm120_patch: 2 depth, over its budget of 1",
    ]
    (role / "tasks" / "deeper.yml").unlink()
    (role / "tasks" / "main.yml").write_text(yaml.safe_dump(main[:-1]), encoding="utf-8")
    assert over_budget(role, BUDGETS["sglang_sm120_patch"]) == [
        "sglang_sm120_patch: 11 tasks, under its budget of 12: lower the budget to 11 in tests/unit/test_role_budgets.py",
    ]


def test_an_include_of_a_file_the_role_lacks_is_named(tmp_path):
    role = _copy(tmp_path, "sglang_sm120_patch")
    main = _load(role / "tasks" / "main.yml") + [{"name": "Lost", "ansible.builtin.include_tasks": "lost.yml"}]
    (role / "tasks" / "main.yml").write_text(yaml.safe_dump(main), encoding="utf-8")
    with pytest.raises(AssertionError, match=r"sglang_sm120_patch/tasks/main.yml includes lost.yml, which the role does not have"):
        counts(role)

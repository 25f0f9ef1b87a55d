"""What a task costs the controller per host, by kind, and what a check of site.yml is made of.

For each kind of task it runs two generated playbooks against an inventory (a lab's, from
tools/lab/lab.sh) under --check: one with a single task of that kind, one with --tasks more.
The difference in controller CPU (user + system time of the ansible-playbook process tree,
from os.wait4, so the forked workers and the ssh clients are in it), divided by tasks x hosts,
is what the controller spends on one such task for one host:

- skipped: a task whose `when` is false; no module reaches the node;
- controller: a set_fact, run by its action plugin on the controller; no module either;
- module: ansible.builtin.stat, one module run on the node;
- write: ansible.builtin.copy of a file that is already as written (a no-op, as in a check of
  a converged node): the action compares it through a stat module run.

The write kind needs the file in place: a first play writes it to /var/tmp on each node, and a
last one removes it. With --site it also checks site.yml once (the ansible.posix.json
callback) and sorts each task the first host passed through into those kinds, by its action
and status, so the sum of count x cost can be put beside the check's measured CPU.

    benchmarks/task-cost.sh -i inventories/lab --site
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WRITTEN = "/var/tmp/blackwell-task-cost"
KINDS = {
    "skipped": ("ansible.builtin.debug", {"msg": "never"}, "task_cost_run | default(false)"),
    "controller": ("ansible.builtin.set_fact", {"task_cost_fact": "{{ inventory_hostname | length }}"}, None),
    "module": ("ansible.builtin.stat", {"path": "/etc/hostname"}, None),
    "write": ("ansible.builtin.copy", {"content": "task cost\n", "dest": WRITTEN, "mode": "0644"}, None),
}
# Actions that run on the controller alone (no module reaches the node).
CONTROLLER_ACTIONS = {
    "ansible.builtin.set_fact", "ansible.builtin.assert", "ansible.builtin.fail", "ansible.builtin.debug",
    "ansible.builtin.validate_argument_spec", "ansible.builtin.include_tasks", "ansible.builtin.include_role",
    "ansible.builtin.include_vars", "ansible.builtin.meta",
    "set_fact", "assert", "fail", "debug", "validate_argument_spec", "include_tasks", "include_role",
    "include_vars", "meta",
}
WRITE_ACTIONS = {"ansible.builtin.copy", "ansible.builtin.template", "copy", "template"}


def playbook(path: Path, kind: str, tasks: int) -> Path:
    action, args, when = KINDS[kind]
    play = {"name": f"{kind} tasks", "hosts": "all", "gather_facts": False, "become": True,
            "tasks": [dict({"name": f"{kind} task {i}", action: args}, **({"when": when} if when else {}))
                      for i in range(tasks)]}
    path.write_text(json.dumps([play]))
    return path


def run(command: list, env: dict, must_pass: bool = True) -> tuple[float, float, str]:
    """(user and system CPU seconds of the whole process tree, output)."""
    with tempfile.TemporaryFile(mode="w+") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        status, usage = os.wait4(proc.pid, 0)[1:]
        out.seek(0)
        text = out.read()
    if must_pass and os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(command)} failed:\n{text[-3000:]}")
    return usage.ru_utime, usage.ru_stime, text


def kind_of(action: str, result: dict) -> str:
    if result.get("skipped"):
        return "skipped"
    if action in CONTROLLER_ACTIONS:
        return "controller"
    return "write" if action in WRITE_ACTIONS else "module"


def site_tasks(text: str) -> tuple[dict, int]:
    """The kinds of task the first host passed through in a site.yml check, and the host count."""
    report = json.JSONDecoder().raw_decode(text[text.index("{"):])[0]
    hosts = sorted(report["stats"])
    counts = dict.fromkeys(KINDS, 0)
    for play in report["plays"]:
        for task in play["tasks"]:
            result = task["hosts"].get(hosts[0])
            if result is not None:
                counts[kind_of(result.get("action", ""), result)] += 1
    return counts, len(hosts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("-i", "--inventory", required=True)
    parser.add_argument("--tasks", type=int, default=40, help="tasks of each kind in the larger playbook")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each playbook; the median counts")
    parser.add_argument("--site", action="store_true", help="also check site.yml and sort its tasks by kind")
    args = parser.parse_args()
    venv = Path(os.environ.get("BLACKWELL_VENV", ROOT / ".venv"))
    playbook_bin = str(venv / "bin" / "ansible-playbook")
    collections = subprocess.run([str(ROOT / "tools" / "collection-path.sh")], capture_output=True,
                                 text=True, check=True).stdout.strip()
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    result: dict = {"tasks": args.tasks, "cpu_ms_per_host_task": {}}
    with tempfile.TemporaryDirectory() as work:
        place = playbook(Path(work) / "place.yml", "write", 1)
        run([playbook_bin, "-i", args.inventory, str(place)], env)
        try:
            for kind in KINDS:
                cpu = {}
                for name, count in (("one", 1), ("many", args.tasks + 1)):
                    path = playbook(Path(work) / f"{kind}-{name}.yml", kind, count)
                    samples = []
                    for _run in range(args.repeat):
                        user, system, text = run([playbook_bin, "-i", args.inventory, str(path), "--check"], env)
                        samples.append((user + system, user, system))
                    cpu[name] = [statistics.median(sample[i] for sample in samples) for i in range(3)]
                    hosts = site_tasks(text)[1]
                scale = 1000 / (args.tasks * hosts)
                result["hosts"] = hosts
                result["cpu_ms_per_host_task"][kind] = {
                    "total": round((cpu["many"][0] - cpu["one"][0]) * scale, 1),
                    "user": round((cpu["many"][1] - cpu["one"][1]) * scale, 1),
                    "system": round((cpu["many"][2] - cpu["one"][2]) * scale, 1)}
                if kind == "skipped":
                    # One skipped task: what any run costs before its tasks (start-up, inventory).
                    result["cpu_s_one_skipped_task_run"] = round(cpu["one"][0], 2)
        finally:
            remove = Path(work) / "remove.yml"
            remove.write_text(json.dumps([{"name": "Remove the written file", "hosts": "all", "gather_facts": False,
                                           "become": True, "tasks": [{"name": "Remove it", "ansible.builtin.file": {
                                               "path": WRITTEN, "state": "absent"}}]}]))
            run([playbook_bin, "-i", args.inventory, str(remove)], env)
    if args.site:
        user, system, text = run([playbook_bin, "-i", args.inventory, str(ROOT / "site.yml"), "--check"], env,
                                 must_pass=False)
        counts, hosts = site_tasks(text)
        costs = result["cpu_ms_per_host_task"]
        estimate = sum(counts[kind] * costs[kind]["total"] for kind in KINDS) / 1000
        result["site_check"] = {
            "hosts": hosts,
            "tasks_per_host": sum(counts.values()),
            "tasks_per_host_by_kind": counts,
            "estimated_task_cpu_s_per_host": round(estimate, 2),
            "measured_cpu_s": round(user + system, 2),
            "measured_cpu_s_per_host_beyond_a_one_task_run": round(
                (user + system - result["cpu_s_one_skipped_task_run"]) / hosts, 2),
        }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

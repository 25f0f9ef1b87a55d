"""What one task costs the controller per host, and how many tasks a check of site.yml runs.

Runs two generated playbooks against an inventory (a lab's, from tools/lab/lab.sh): one with a
single task that is skipped, one with --tasks more of them, all skipped on a `when`, so no
module reaches a node. The difference in controller CPU (user + system time of the
ansible-playbook process tree, from os.wait4), divided by tasks x hosts, is what Ansible spends
on a task for one host before any module runs: templating the condition, forking the worker,
passing the result back, the callback. With --site it also checks site.yml once and counts the
tasks each host passed through, from the play recap.

    benchmarks/task-cost.sh -i inventories/lab --site
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+"
                   r"skipped=(\d+)\s+rescued=(\d+)\s+ignored=(\d+)", re.M)


def playbook(path: Path, tasks: int) -> Path:
    body = "".join(
        f"    - name: Skipped task {i}\n      ansible.builtin.debug:\n        msg: never\n"
        f"      when: task_cost_run | default(false)\n" for i in range(tasks))
    path.write_text(f"- name: Tasks that run no module\n  hosts: all\n  gather_facts: false\n  tasks:\n{body}")
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("-i", "--inventory", required=True)
    parser.add_argument("--tasks", type=int, default=100, help="skipped tasks in the larger playbook")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each playbook; the median counts")
    parser.add_argument("--site", action="store_true", help="also count the tasks of a site.yml check")
    args = parser.parse_args()
    venv = Path(os.environ.get("BLACKWELL_VENV", ROOT / ".venv"))
    playbook_bin = str(venv / "bin" / "ansible-playbook")
    collections = subprocess.run([str(ROOT / "tools" / "collection-path.sh")], capture_output=True,
                                 text=True, check=True).stdout.strip()
    # The default output, whose recap the counts come from, whatever the caller's environment.
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="default")
    with tempfile.TemporaryDirectory() as work:
        small = playbook(Path(work) / "one.yml", 1)
        large = playbook(Path(work) / "many.yml", args.tasks + 1)
        cpu = {}
        hosts = 0
        for name, path in (("one", small), ("many", large)):
            samples = []
            for _run in range(args.repeat):
                user, system, text = run([playbook_bin, "-i", args.inventory, str(path)], env)
                samples.append((user + system, user, system))
                hosts = len(RECAP.findall(text))
            if hosts == 0:
                sys.exit(f"no play recap in the output of {path.name}:\n{text[-3000:]}")
            cpu[name] = [statistics.median(sample[i] for sample in samples) for i in range(3)]
    scale = 1000 / (args.tasks * hosts)
    result = {"hosts": hosts, "tasks": args.tasks, "cpu_s_one_task": round(cpu["one"][0], 3),
              "cpu_s_many_tasks": round(cpu["many"][0], 3),
              "cpu_ms_per_host_task": round((cpu["many"][0] - cpu["one"][0]) * scale, 1),
              "user_ms_per_host_task": round((cpu["many"][1] - cpu["one"][1]) * scale, 1),
              "system_ms_per_host_task": round((cpu["many"][2] - cpu["one"][2]) * scale, 1)}
    if args.site:
        text = run([playbook_bin, "-i", args.inventory, str(ROOT / "site.yml"), "--check"], env, must_pass=False)[2]
        # ok counts the changed tasks too, and ignored ones overlap it; a rescued failure is
        # counted only under rescued.
        counts = {m[0]: int(m[1]) + int(m[4]) + int(m[5]) + int(m[6]) for m in RECAP.findall(text)}
        result["site_check_tasks_per_host"] = counts
        result["site_check_task_cpu_s_per_host"] = round(
            statistics.mean(counts.values()) * result["cpu_ms_per_host_task"] / 1000, 2)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""No-op --check of converged lab nodes over SSH: the collection's ansible.cfg against Ansible's defaults.

Brings up the largest fleet asked for and converges it once with the tuned configuration
(tools/lab/lab.sh: the lab's package sources, inventory settings and engine stand-in), then for
each fleet size runs `ansible-playbook --check` against the first N nodes under each
configuration and records wall time, nodes checked per minute and controller CPU seconds per
node. The checks start once the nodes have gone idle after the converge (settle()), so that the
engines the converge restarted last do not compete with the first checks for the CPUs.

CPU is the ansible-playbook process tree (os.wait4 on the child: its own time plus every worker
and ssh client it waited for) plus the SSH master connections the run left behind, read from
/proc before they are closed: the masters are daemons that no wait4 accounts for. Node CPU is
what the checked nodes' containers used during the run, read from their cgroups (cpuacct.usage
on cgroup v1, cpu.stat on v2) before and after: sshd, the modules' Python, and the idle
systemd and stand-in engine, which add little.

Each size also gets the floor: a one-task play (ansible.builtin.ping, with become, as the
check's node play) on the same nodes under each configuration, in the same run. Every check row
is reported as a multiple of the ping play's controller CPU and wall time in its configuration.

    benchmarks/fleet-check.sh                       # 1, 8, 32 nodes, site.yml
    benchmarks/fleet-check.sh --sizes 1,4 --cold-max-nodes 0
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
# The floor a check is measured against: one module run per node, escalated like the roles'.
PING_PLAY = """---
- name: One module run per node
  hosts: all
  gather_facts: false
  become: true
  tasks:
    - name: Ping
      ansible.builtin.ping:
"""


def sh(*args: str, env: dict | None = None) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout


def fleet_env(prefix: str, port_base: int, workdir: Path) -> dict:
    env = dict(os.environ)
    env.update(LAB_PREFIX=prefix, LAB_PORT_BASE=str(port_base), LAB_STATE=str(workdir / "state"),
               LAB_INVENTORY_DIR=str(workdir / "inventory"), LAB_REPORT="0")
    return env


def master_cpu_seconds(control_dir: Path) -> float:
    """CPU time of the ssh master processes behind the sockets in control_dir; closes them."""
    total = 0.0
    for sock in control_dir.iterdir():
        check = subprocess.run(["ssh", "-O", "check", "-S", str(sock), "x"],
                               capture_output=True, text=True, check=False)
        match = re.search(r"pid=(\d+)", check.stderr + check.stdout)
        if match:
            try:
                fields = Path(f"/proc/{match[1]}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / CLK_TCK
            except (OSError, IndexError, ValueError):
                pass
        subprocess.run(["ssh", "-O", "exit", "-S", str(sock), "x"], capture_output=True, check=False)
    return total


def cgroup_cpu_files(names: list) -> list:
    """The CPU accounting file of each named container's cgroup (v1 or v2)."""
    files = []
    for name in names:
        path = sh("podman", "inspect", "--format", "{{.State.CgroupPath}}", name).strip()
        for candidate in (Path("/sys/fs/cgroup/cpuacct" + path) / "cpuacct.usage",
                          Path("/sys/fs/cgroup" + path) / "cpu.stat"):
            if candidate.exists():
                files.append(candidate)
                break
        else:
            raise RuntimeError(f"no CPU accounting for container {name} at {path}")
    return files


def cgroup_cpu_seconds(files: list) -> float:
    total = 0.0
    for path in files:
        text = path.read_text()
        if path.name == "cpuacct.usage":
            total += int(text) / 1e9
        else:
            total += int(re.search(r"^usage_usec (\d+)$", text, re.M)[1]) / 1e6
    return total


def settle(files: list, limit_s: float, window_s: float = 10.0) -> tuple:
    """Wait until the converge's aftermath is over on the nodes: the engines it restarted last
    starting up, the journal flushing. Settled when the fleet's CPU over one window is no lower
    than over the one before (what is left is its idle use), or after limit_s. Returns the
    seconds waited and the fleet's idle use in cores."""
    started = time.monotonic()
    before = cgroup_cpu_seconds(files)
    time.sleep(window_s)
    after = cgroup_cpu_seconds(files)
    rate = (after - before) / window_s
    while time.monotonic() - started < limit_s:
        before = after
        time.sleep(window_s)
        after = cgroup_cpu_seconds(files)
        previous, rate = rate, (after - before) / window_s
        if rate >= previous * 0.9:
            break
    return time.monotonic() - started, rate


def timed_run(cmd: list, env: dict, control_dir: Path, log: Path) -> dict:
    load_before = os.getloadavg()[0]
    with open(log, "w", encoding="utf-8") as out:
        start = time.monotonic()
        # A process group of its own, so an interrupted benchmark takes its workers down too.
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                start_new_session=True)
        try:
            status, usage = os.wait4(proc.pid, 0)[1:]
        except BaseException:
            os.killpg(proc.pid, 15)
            master_cpu_seconds(control_dir)
            raise
        wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    tree_cpu = usage.ru_utime + usage.ru_stime
    masters = master_cpu_seconds(control_dir)
    return {"wall_s": wall, "tree_cpu_s": tree_cpu, "ssh_master_cpu_s": masters,
            "rc": proc.returncode, "log": str(log),
            "load_1min": round((load_before + os.getloadavg()[0]) / 2, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1,8,32")
    default_playbook = ROOT / "site.yml"
    parser.add_argument("--playbook", default=str(default_playbook))
    parser.add_argument("--prefix", default="blackwell-bench")
    parser.add_argument("--port-base", type=int, default=2400)
    parser.add_argument("--cold-max-nodes", type=int, default=8,
                        help="run the cold fact cache row only up to this fleet size (default 8)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--keep", action="store_true", help="leave the fleet running")
    parser.add_argument("--settle-max", type=float, default=300,
                        help="longest wait, in seconds, for the nodes to go idle after the converge")
    args = parser.parse_args()

    sizes = sorted({int(s) for s in args.sizes.split(",")})
    venv_bin = Path(sys.executable).parent
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="fleet-check."))
    env = fleet_env(args.prefix, args.port_base, work)
    env["PATH"] = f"{venv_bin}{os.pathsep}{env['PATH']}"
    env["ANSIBLE_COLLECTIONS_PATH"] = sh(str(ROOT / "tools" / "collection-path.sh")).strip()
    env["ANSIBLE_NOCOLOR"] = "1"
    lab = str(ROOT / "tools" / "lab" / "lab.sh")
    empty_cfg = work / "empty.cfg"
    empty_cfg.write_text("")
    ping_play = work / "ping.yml"
    ping_play.write_text(PING_PLAY)
    facts = work / "facts"
    results = []
    try:
        tuned = dict(env, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
                     ANSIBLE_CACHE_PLUGIN_CONNECTION=str(facts))
        # Up and converged in one go, as `make lab` does; the converge runs tuned, its log kept.
        started = time.monotonic()
        with open(out / "converge.log", "w", encoding="utf-8") as log:
            # All nodes in one batch: a rolling converge of 32 nodes one by one takes half an hour.
            up_env = dict(tuned, LAB_NODES=str(max(sizes)), LAB_PLAYBOOK=args.playbook,
                          LAB_CONVERGE_ARGS="-e sglang_rollout_serial=100%")
            up = subprocess.run([lab, "up"], env=up_env, cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT, check=False)
        converge_s = time.monotonic() - started
        if up.returncode != 0:
            print(f"lab up or converge failed, see {out / 'converge.log'}", file=sys.stderr)
            return 1
        inventory = work / "inventory"
        hosts = sorted(re.findall(r"^        (\S+):$", (inventory / "hosts.yml").read_text(), re.M))
        settle_s, idle_cores = settle(cgroup_cpu_files(hosts), args.settle_max)
        print(json.dumps({"converge_s": round(converge_s, 1), "settle_s": round(settle_s, 1),
                          "idle_fleet_cores": round(idle_cores, 3)}), flush=True)

        configs = [
            ("tuned", tuned, False),
            ("tuned, cold fact cache", tuned, True),
            ("ansible defaults", dict(env, ANSIBLE_CONFIG=str(empty_cfg)), False),
        ]
        for size in sizes:
            limit = ",".join(hosts[:size])
            runs = [(name, cfg_env, cold, "check") for name, cfg_env, cold in configs]
            runs += [(name, cfg_env, False, "ping") for name, cfg_env, cold in configs if not cold]
            for name, cfg_env, cold, kind in runs:
                if cold and size > args.cold_max_nodes:
                    continue
                if cold:
                    shutil.rmtree(facts, ignore_errors=True)
                control = work / f"cp-{size}-{len(results)}"
                control.mkdir()
                run_env = dict(cfg_env, ANSIBLE_SSH_CONTROL_PATH_DIR=str(control))
                log = out / (f"{kind}-{size}-{name.split(',', maxsplit=1)[0].replace(' ', '-')}"
                             f"{'-cold' if cold else ''}.log")
                node_files = cgroup_cpu_files(hosts[:size])
                node_before = cgroup_cpu_seconds(node_files)
                command = [str(venv_bin / "ansible-playbook"), "-i", str(inventory), "--limit", limit]
                command += ["--check", args.playbook] if kind == "check" else [str(ping_play)]
                res = timed_run(command, run_env, control, log)
                node_cpu = cgroup_cpu_seconds(node_files) - node_before
                recap = Path(res["log"]).read_text()
                changed = sum(int(c) for c in re.findall(r"changed=(\d+)", recap))
                cpu = res["tree_cpu_s"] + res["ssh_master_cpu_s"]
                row = {"nodes": size, "config": name if kind == "check" else f"ping play, {name}",
                       "kind": kind, "base_config": name, "wall_s": round(res["wall_s"], 2),
                       "nodes_per_min": round(size / res["wall_s"] * 60, 1),
                       "cpu_s": round(cpu, 2), "cpu_s_per_node": round(cpu / size, 2),
                       "node_cpu_s_per_node": round(node_cpu / size, 2),
                       "tree_cpu_s": round(res["tree_cpu_s"], 2),
                       "ssh_master_cpu_s": round(res["ssh_master_cpu_s"], 2),
                       "rc": res["rc"], "changed": changed, "load_1min": res["load_1min"]}
                results.append(row)
                print(json.dumps(row), flush=True)
        add_ratios(results)
    finally:
        if not args.keep:
            subprocess.run([lab, "down"], env=env, cwd=ROOT, check=False)
    summary = {
        "playbook": os.path.relpath(args.playbook, ROOT),
        "controller": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                       "ansible": sh(str(venv_bin / "ansible"), "--version").splitlines()[0]},
        "converge_s": round(converge_s, 1), "settle_s": round(settle_s, 1),
        "idle_fleet_cores": round(idle_cores, 3),
        "converge_nodes": max(sizes), "results": results,
    }
    (out / "fleet-check.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "fleet-check.md").write_text(render(summary))
    print(render(summary))
    return 0 if all(r["rc"] == 0 and r["changed"] == 0 for r in results) else 1


def add_ratios(results: list) -> None:
    """Each row's controller CPU and wall time as a multiple of the ping play's of the same size
    and configuration (the cold fact cache row against the warm tuned ping)."""
    floors = {(r["nodes"], r["base_config"]): r for r in results if r.get("kind") == "ping"}
    for row in results:
        floor = floors.get((row["nodes"], row.get("base_config", row["config"]).split(",")[0]))
        if floor and floor["cpu_s"] > 0 and floor["wall_s"] > 0:
            row["cpu_x_ping"] = round(row["cpu_s"] / floor["cpu_s"], 1)
            row["wall_x_ping"] = round(row["wall_s"] / floor["wall_s"], 1)


def render(summary: dict) -> str:
    lines = [f"Playbook: `{summary['playbook']}`; {summary['controller']['cpus']} controller CPUs, "
             f"{summary['controller']['ansible']}; lab up and converge of {summary['converge_nodes']} "
             f"nodes {summary['converge_s']} s.", "",
             "| nodes | config | wall s | nodes/min | controller CPU s/node | node CPU s/node | changed "
             "| CPU x ping | wall x ping | speed-up vs defaults |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    by_size = {}
    for row in summary["results"]:
        by_size.setdefault(row["nodes"], {})[row["config"]] = row
    for size, rows in by_size.items():
        base = rows.get("ansible defaults")
        for name, row in rows.items():
            speed = f"{base['wall_s'] / row['wall_s']:.1f}x" if base and row.get("kind", "check") == "check" else "-"
            lines.append(f"| {size} | {name} | {row['wall_s']} | {row['nodes_per_min']} | "
                         f"{row['cpu_s_per_node']} | {row['node_cpu_s_per_node']} | {row['changed']} | "
                         f"{row.get('cpu_x_ping', '-')} | {row.get('wall_x_ping', '-')} | {speed} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

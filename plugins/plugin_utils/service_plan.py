# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the sglang_service role does on a node, decided in one place, in three stages that
follow the role's reads:

- ``release``: from the read of the release's venv (blackwell.sglang.sglang_venv_info with its
  server flags), what the installed release is launched with (the argv words, the service
  environment, the TP size, FlashInfer fusion and the PCIe all-reduce) and the problems that
  stop the host before anything is written, each naming its setting;
- ``plan``: with the read of the service (blackwell.sglang.sglang_service_info) and the table of
  the paths the role manages (their templates rendered once), the named steps, each with the
  reason the node is off in it; a node that runs what it should gets none;
- ``service_state``: what the service's state calls for (a restart and why, a wait for an engine
  still loading, a start), judged again after a restart or a wait.

The role's settings arrive without their ``sglang_service_`` prefix, with the paths vars/main.yml
derives from them. Pure Python, no Ansible imports: the filters sglang_service_release,
sglang_service_plan and sglang_service_state call it, the unit tests too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.blackwell.sglang.plugins.plugin_utils import managed
from ansible_collections.blackwell.sglang.plugins.plugin_utils.settings import truthy

# Addresses only the node itself can reach: listening there needs no API key.
_LOOPBACK = re.compile(r"^127([.][0-9]{1,3}){3}$")
# The release's flags the role spells, and the launcher's own: --api-key reaches SGLang from the
# secrets file, never from argv, but the release must still have it.
_FLAG = re.compile(r"^--.")


def _text(value):
    return "" if value is None else str(value)


def _whole(value, fallback=0):
    try:
        return int(value)
    except (TypeError, ValueError):
        return fallback


def loopback(host):
    host = _text(host)
    return bool(_LOOPBACK.match(host)) or host in ("::1", "localhost")


def health_host(host):
    """Where the role itself reaches the server: loopback when it listens on every address."""
    host = _text(host)
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def tp_size(inputs):
    """sglang_service_tp_size when set, else every GPU the node reports, else the fallback."""
    if inputs["tp_size"] is not None:
        return inputs["tp_size"]
    gpu = _dict(inputs["gpu"])
    count = _whole(gpu.get("count"))
    if gpu.get("present") and count > 0:
        return count
    return inputs["tp_size_fallback"]


def tp_before(read, record):
    """The TP size the unit was last deployed with, as its record holds it (0: none recorded)."""
    text = _text((read.get("contents") or {}).get(record)).strip()
    return int(text) if re.match(r"^[0-9]+$", text) else 0


def smoke_wanted(inputs):
    """Where the NCCL smoke test runs at all: always, or auto on a node with more than one GPU."""
    mode = inputs["nccl_smoke"]
    return mode == "always" or (mode == "auto" and _whole(_dict(inputs["gpu"]).get("count")) > 1)


def launch_args(inputs, size, fusion_words):
    """launch_server's arguments, one argv word each (the unit quotes them for systemd)."""
    args = ["--model-path", _text(inputs["model_path"])]
    if inputs["served_model_name"]:
        args += ["--served-model-name", _text(inputs["served_model_name"])]
    args += ["--host", _text(inputs["host"]), "--port", _text(inputs["port"]), "--tp-size", _text(size)]
    if truthy(inputs["torch_symm_mem_enabled"]):
        args.append("--enable-torch-symm-mem")
    args += [_text(word) for word in fusion_words]
    if truthy(inputs["metrics_enabled"]):
        args.append("--enable-metrics")
    if truthy(inputs["eagle3_enabled"]):
        args += ["--speculative-algorithm", "EAGLE3",
                 "--speculative-draft-model-path", _text(inputs["eagle3_draft_model_path"]),
                 "--speculative-num-steps", _text(inputs["eagle3_num_steps"]),
                 "--speculative-eagle-topk", _text(inputs["eagle3_topk"]),
                 "--speculative-num-draft-tokens", _text(inputs["eagle3_num_draft_tokens"])]
    return args + [_text(word) for word in inputs["extra_args"] or []]


def _unique(items):
    seen = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


def missing_flags(args, api_key, flags):
    """The flags the launch asks for that the release does not have."""
    requested = _unique([re.sub(r"=.*$", "", word) for word in args if _FLAG.match(word)]
                        + (["--api-key"] if api_key else []))
    return [flag for flag in requested if flag not in flags]


def _dict(value):
    """A mapping setting as given; anything else (refused by name among the setting problems) as none."""
    return value if isinstance(value, dict) else {}


def release(read, inputs, setting_problems, check_mode=False):
    """What the installed release is launched with, and what stops the host before any write."""
    flags = _dict(read.get("server_flags"))
    readable = "flags" in flags
    gpu = _dict(inputs["gpu"])
    majors = list(gpu.get("capability_majors") or [])
    topology = _dict(gpu.get("topology")).get("summary") or "none"
    size = tp_size(inputs)
    before = tp_before(read, inputs["tp_record"])
    fusion_wanted = truthy(inputs["flashinfer_fusion_enabled"])
    crash = bool(fusion_wanted and flags.get("fusion_sm_restricted")
                 and set(map(str, majors)) & set(map(str, inputs["fusion_crash_majors"])))
    policy = inputs["crash_policy"]
    fusion = fusion_wanted and not (crash and policy == "warn")
    fusion_words = list(flags.get("fusion_arguments") or [])
    mode = inputs["pcie_ipc_allreduce"]
    pcie = bool(flags.get("pcie_ipc_allreduce")) and (mode == "always" or (mode == "auto" and topology == "pcie_only"))
    environment = dict(_dict(inputs["environment"]))
    environment.update(_dict(inputs["nccl_environment"]))
    environment.update(_dict(inputs["sandbox_environment"]))
    if pcie:
        environment[inputs["pcie_ipc_env"]] = "1"
        if inputs["pcie_ipc_max_numel"] is not None:
            environment[inputs["pcie_ipc_max_numel_env"]] = _text(inputs["pcie_ipc_max_numel"])
    args = launch_args(inputs, size, fusion_words if fusion else []) if readable else []
    version = _text(flags.get("version"))
    api_key = _whole(inputs["api_key_length"]) > 0

    found = []
    if not _text(inputs["model_path"]):
        found.append("sglang_service: sglang_service_model_path is not set; it names the model sglang serves (a local "
                     "path or a Hugging Face repository id). Nothing was written.")
    if truthy(inputs["eagle3_enabled"]) and not _text(inputs["eagle3_draft_model_path"]):
        found.append("sglang_service: sglang_service_eagle3_enabled is true but sglang_service_eagle3_draft_model_path "
                     "is empty; EAGLE-3 needs the path of its draft model.")
    found += list(setting_problems or [])
    if not (loopback(inputs["host"]) or api_key or truthy(inputs["allow_unauthenticated"])):
        found.append("sglang_service: refusing to listen on %s:%s without an API key: anyone who reaches that address "
                     "could use the GPUs. Set sglang_service_api_key, listen on loopback (sglang_service_host: "
                     "127.0.0.1), or set sglang_service_allow_unauthenticated: true if only trusted clients can reach "
                     "it; nothing was written." % (inputs["host"], inputs["port"]))
    toolkit = _text(inputs.get("cuda_toolkit"))
    if toolkit and not toolkit.startswith("/"):
        found.append("sglang_service: sglang_service_cuda_toolkit '%s' is not an absolute path; it names the CUDA "
                     "toolkit directory the server runs on (for example /usr/local/cuda-13.0), or is empty. Nothing "
                     "was written." % toolkit)
    if _whole(size) < 1:
        found.append("sglang_service: tensor parallel size must be at least 1, got %s." % size)
    if inputs["tp_size"] is None and before > _whole(size):
        found.append("sglang_service: refusing to restart sglang with --tp-size %s: it was deployed with --tp-size %s "
                     "(recorded in %s), and the TP size follows the GPU count, but this node now reports %s GPU(s). "
                     "GPUs are missing: check nvidia-smi and the kernel log (Xid errors, a GPU fallen off the bus) "
                     "and bring them back, or set sglang_service_tp_size explicitly to serve on fewer GPUs. Nothing "
                     "was changed." % (size, before, inputs["tp_record"], gpu.get("count", 0)))
    if readable:
        found += _release_problems(read, inputs, flags, args, api_key, crash, fusion, majors)
    elif not check_mode:
        # A check of a node whose SGLang is still to be installed has no release to spell the
        # flags for: the install is that node's drift, and the deploy is not judged.
        found.append("sglang_service: cannot read the installed SGLang release in %s: %s. Install it first "
                     "(sglang_install); nothing was written." % (inputs["release_dir"], read.get("server_flags_error")))
    return {
        "readable": readable, "version": version, "problems": found, "args": args, "environment": environment,
        "tp_size": size, "tp_record": "%s\n" % size, "tp_before": before, "gpu_majors": majors,
        # The CUDA toolkit record's text (empty: the row is out of force).
        "cuda_record": "%s\n" % toolkit if toolkit else "",
        "fusion": {"crash": crash, "enabled": fusion, "left_out": crash and policy == "warn"},
        "pcie_ipc_allreduce": pcie, "health_host": health_host(inputs["host"]),
        # What the health gate asks: /ready where the release serves it (200 once it takes new
        # requests, 503 while it loads and while it stops), /health where it does not.
        "health_path": "/ready" if flags.get("ready_endpoint") else "/health",
        # The majors the NCCL version is judged against: nothing to judge under ignore.
        "nccl_majors": [] if inputs["nccl_version_policy"] == "ignore" else majors,
    }


def _release_problems(read, inputs, flags, args, api_key, crash, fusion, majors):
    version = _text(flags.get("version"))
    found = []
    if crash and inputs["crash_policy"] == "strict":
        found.append('sglang_service: refusing to deploy: SGLang %s raises "FlashInfer allreduce fusion requires SM90 '
                     'or SM10X NVIDIA GPUs." at start-up, and this node has compute capability %s GPUs, so '
                     "sglang.service would crash and restart in a loop. Set sglang_service_flashinfer_fusion_enabled: "
                     "false, install a release whose fusion supports these GPUs, or set sglang_service_crash_policy: "
                     "force if this release is patched to support them." % (version, ", ".join(map(str, majors))))
    if inputs["pcie_ipc_allreduce"] == "always" and not flags.get("pcie_ipc_allreduce"):
        found.append("sglang_service: sglang_service_pcie_ipc_allreduce is 'always' but SGLang %s has no %s; use "
                     "'auto' or install a release that ships the PCIe IPC all-reduce." % (version, inputs["pcie_ipc_env"]))
    if fusion and not flags.get("fusion_arguments"):
        found.append("sglang_service: SGLang %s has neither --enable-flashinfer-allreduce-fusion nor "
                     "--flashinfer-allreduce-fusion-backend; set sglang_service_flashinfer_fusion_enabled: false."
                     % version)
    missing = missing_flags(args, api_key, flags.get("flags") or [])
    if missing:
        them = "it" if len(missing) == 1 else "them"
        found.append("sglang_service: SGLang %s installed in %s has no %s; nothing was written. Remove or rename %s "
                     "(sglang_service_extra_args and the sglang_service_* feature switches), or install a release "
                     "that has %s." % (version, inputs["release_dir"], ", ".join(missing), them, them))
    link = (read.get("paths") or {}).get(inputs["venv"]) or {}
    if inputs["release_path"] and link.get("exists") and not link.get("islink"):
        # A directory there (an earlier layout, a venv made by hand) cannot become the link.
        found.append("sglang_service: %s (sglang_service_venv) is not a symbolic link, so it cannot be pointed at the "
                     "release %s. Move it away (or remove it) and run again; nothing was changed."
                     % (inputs["venv"], inputs["release_path"]))
    return found


def service_state(state, inputs, pending, waited=False, check_mode=False):
    """What the service's state calls for: ``reasons`` for a restart, ``dropins`` to remove,
    ``restart_due`` (a restart this run's own changes do not cause), ``wait_for_loading`` and
    ``loading_polls`` (an engine still loading is given the rest of its time, not restarted;
    one that is still not healthy after that wait is restarted, once), ``start`` (stopped, or
    enabled against the settings), ``smoke`` (the NCCL smoke test runs before that restart),
    ``restarts`` (the run's one restart comes: for this run's changes, a reason or a drop-in),
    ``tell_reasons`` (the reasons add to what the run changes), ``exists`` and ``drifted`` (any
    of these)."""
    state = state or {}
    health = state.get("health") or {}
    running = (state.get("release") or {}).get("running") or ""
    linked = (state.get("release") or {}).get("linked") or ""
    active = state.get("active_state") == "active"
    loading = state.get("phase") == "loading"
    reasons = []
    if state.get("need_daemon_reload"):
        reasons.append("systemd has not loaded the unit on disk (NeedDaemonReload)")
    if running and linked and running != linked:
        reasons.append("runs %s while %s points at %s" % (running, inputs["venv"], linked))
    if state.get("newer_than_start"):
        reasons.append("changed after the server started: " + ", ".join(state["newer_than_start"]))
    if active and health.get("status") != 200 and (not loading or waited):
        reasons.append("running but /health answered %s" % (health.get("status") or health.get("error")))
    dropins = list(state.get("dropins") or [])
    restart_due = bool(reasons or dropins or (state.get("exists") and not active))
    wait = loading and not waited and not check_mode and not reasons and not dropins and not pending
    remaining = _whole((state.get("loading") or {}).get("remaining"), 1)
    delay = max(_whole(inputs["health_delay"], 1), 1)
    want = "enabled" if truthy(inputs["enabled"]) else "disabled"
    start = not active or state.get("unit_file_state") != want
    return {
        "reasons": reasons, "dropins": dropins, "restart_due": restart_due, "wait_for_loading": wait,
        "loading_polls": max(int(math.ceil(float(remaining) / delay)), 1), "start": start,
        "smoke": smoke_wanted(inputs) and inputs["nccl_smoke"] == "auto" and not pending and restart_due,
        # The one restart of the run restarts for this run's changes, the reasons and the drop-ins
        # alike; the reasons are told where they add to what the run changes (a check restarts
        # nothing, so there they are the drift the service shows).
        "restarts": bool(pending or reasons or dropins), "tell_reasons": bool(reasons and (check_mode or not pending)),
        "exists": bool(state.get("exists")), "drifted": restart_due or wait or start,
    }


def _service_reason(judged, state, inputs):
    if judged["reasons"]:
        return "restart sglang: " + "; ".join(judged["reasons"])
    if judged["dropins"]:
        return "drop-ins change the unit: " + ", ".join(judged["dropins"])
    if judged["wait_for_loading"]:
        return "the engine is still loading its model"
    if state.get("active_state") != "active":
        return "sglang.service is %s, not active" % (state.get("active_state") or "not loaded")
    want = "enabled" if truthy(inputs["enabled"]) else "disabled"
    return "sglang.service is %s, not %s" % (state.get("unit_file_state"), want)


def plan(read, state, decided, inputs, files, contents, check_mode=False):
    """The role's plan for one node: ``problems`` (the release stage's), ``steps`` (``name`` and
    ``reason``), ``step`` (the first reason of each, by name), ``files`` (the rows to write,
    with their reason, not their content), ``table`` (every row in force), ``restart_pending``
    (this run changes what the server starts from) and ``service`` (service_state of the read)."""
    paths = read.get("paths") or {}
    # A link without a target (no sglang_service_release_path) and a row without a path (no
    # Hugging Face home) are not managed; a path two rows name (a secrets file in the launcher's
    # directory) is the first row's.
    kept, seen = [], set()
    for row in managed.check("sglang_service", files):
        if row.get("path") and (row.get("state") != "link" or row.get("src")) and row["path"] not in seen:
            seen.add(row["path"])
            kept.append(row)
    rows = managed.in_force("sglang_service", kept, contents, contents)
    to_write = []
    for row in rows:
        # The link's owner is the release's (the read takes the release's path too).
        reason = managed.off_in(row, paths)
        if reason:
            # Neither the content nor its checksum: the secrets file's would tell of its secrets.
            to_write.append(dict({key: value for key, value in row.items() if key not in ("content", "checksum")},
                                 reason=reason))
    steps = []

    def step(name, reason):
        steps.append({"name": name, "reason": reason})

    if not decided["readable"]:
        step("release", "the installed SGLang release cannot be read: %s" % read.get("server_flags_error"))
    switching = [row for row in to_write if row["state"] in ("file", "link")]
    record = paths.get(inputs["rollback_record"]) or {}
    state = state or {}
    restarting = [row["path"] for row in to_write if truthy(row.get("restart", False))]
    requested = truthy(inputs["restart_requested"])
    pending = bool(restarting) or requested
    judged = service_state(state, inputs, pending, False, check_mode)
    stale = bool(record.get("exists") and state.get("active_state") == "active"
                 and (state.get("health") or {}).get("status") == 200 and not judged["restart_due"])
    if stale:
        step("record_forget", "%s is left from a rollout the healthy service has outlived" % inputs["rollback_record"])
    if record.get("exists") and not stale:
        step("record", "%s is left from an unfinished rollout and stays its rollback point" % inputs["rollback_record"])
    elif switching and (paths.get(inputs["unit_path"]) or {}).get("exists"):
        step("record", "this run switches %s" % ", ".join(row["path"] for row in switching))
    for row in to_write:
        step("file", row["reason"])
    if pending:
        step("restart", "this run changes %s" % ", ".join(restarting) if restarting
             else "another role of the play changed what the server loads (sglang_service_restart_requested)")
    wanted = smoke_wanted(inputs)
    if wanted and (inputs["nccl_smoke"] == "always" or pending):
        step("smoke", "the NCCL smoke test runs on every deploy (sglang_service_nccl_smoke: always)"
             if inputs["nccl_smoke"] == "always" else "the GPUs must all-reduce before the restart")
    if judged["drifted"]:
        step("service", _service_reason(judged, state, inputs))
    # Behind SGLang's router: a node its worker list lacks goes back in (tasks/router_in.yml);
    # inputs' router is the router's view of this node (router_plan.worker_view).
    router = inputs.get("router") or {}
    if router.get("missing"):
        step("router", "%s (%s)" % (router["drift"][0], inputs.get("router_url")))
    if not check_mode and truthy(inputs["health_generate_enabled"]):
        step("gate", "the health gate asks /health_generate, which the state read does not")
    result = managed.plan_head(decided["problems"], steps, to_write, rows)
    result.update({"restart_pending": pending, "service": judged})
    return result

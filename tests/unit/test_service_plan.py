"""sglang_service's plan (plugins/plugin_utils/service_plan.py) over reads of a node.

The reads of the managed paths are blackwell.sglang.sglang_venv_info's, taken by the module's own
function on a node laid out under a temporary root as a deploy leaves it, with the role's own
table (vars/main.yml) rendered for that root; the release's flags and the service's state are
recorded reads as sglang_venv_info and sglang_service_info return them. Each case is one node
state: converged (run and check), fresh, every single drift of a row of the table, each state of
the service the plan reads, a record left by an unfinished rollout; then the release stage (the
launch arguments, fusion, the PCIe all-reduce, the problems) and the state judged again.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.sglang.plugins.modules.sglang_venv_info import venv_info
from ansible_collections.blackwell.sglang.plugins.plugin_utils.service_plan import plan, release, service_state
import role_vars
from ansible_collections.blackwell.sglang.plugins.plugin_utils import managed
from conftest import ROOT, copy_as_collection

ROLE = ROOT / "roles" / "sglang_service"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
FLAGS_058 = {"version": "0.5.8", "fusion_sm_restricted": False, "pcie_ipc_allreduce": False,
             "fusion_arguments": ["--enable-flashinfer-allreduce-fusion"],
             "flags": ["--model-path", "--served-model-name", "--host", "--port", "--tp-size", "--api-key",
                       "--enable-torch-symm-mem", "--enable-flashinfer-allreduce-fusion", "--speculative-algorithm",
                       "--speculative-draft-model-path", "--speculative-num-steps", "--speculative-eagle-topk",
                       "--speculative-num-draft-tokens", "--mem-fraction-static", "--enable-metrics"]}
FLAGS_0523 = dict(FLAGS_058, version="0.5.23", fusion_sm_restricted=True, pcie_ipc_allreduce=True, ready_endpoint=True,
                  fusion_arguments=["--flashinfer-allreduce-fusion-backend", "auto"],
                  flags=FLAGS_058["flags"] + ["--flashinfer-allreduce-fusion-backend"])
RUNNING = {"exists": True, "active_state": "active", "sub_state": "running", "unit_file_state": "enabled",
           "need_daemon_reload": False, "dropins": [], "newer_than_start": [], "phase": "serving",
           "release": {"running": "", "linked": ""}, "health": {"status": 200, "error": None}}
NO_UNIT = {"exists": False, "active_state": "inactive", "sub_state": "dead", "unit_file_state": "",
           "need_daemon_reload": False, "dropins": [], "newer_than_start": [], "phase": "stopped",
           "release": {"running": "", "linked": ""}, "health": {"status": None, "error": "connection refused"}}
CONTENTS = {"sglang.env.j2": "SGLANG_API_KEY=\"k\"\n", "sglang.service.j2": "[Unit]\nDescription=sglang\n",
            "sglang_launch.py": "print('launch')\n", "tp-size": "1\n", "cuda-toolkit": "/usr/local/cuda-13.0\n"}


def inputs(root: Path, **changes) -> dict:
    """vars/main.yml's __sglang_service_inputs as Ansible would template it, paths under root."""
    values = {key: DEFAULTS.get("sglang_service_" + key) for key in VARS["__sglang_service_inputs"]}
    values.update(model_path="/models/kimi", api_key_length=0, gpu={"present": True, "count": 1,
                  "capability_majors": [12], "topology": {"summary": "single"}},
                  sandbox_environment={"HF_HOME": f"{root}/var/lib/sglang/.cache/huggingface"},
                  venv=f"{root}/opt/sglang/current", release_path=f"{root}/opt/sglang/releases/0.5.8",
                  release_dir=f"{root}/opt/sglang/releases/0.5.8", tp_record=f"{root}/etc/sglang/tp-size",
                  rollback_record=f"{root}/var/lib/blackwell-sglang/rollback",
                  unit_path=f"{root}/etc/systemd/system/sglang.service",
                  fusion_crash_majors=VARS["__sglang_service_fusion_crash_majors"],
                  pcie_ipc_env=VARS["__sglang_service_pcie_ipc_env"],
                  pcie_ipc_max_numel_env=VARS["__sglang_service_pcie_ipc_max_numel_env"],
                  nccl_version_policy="warn", restart_requested=False, cuda_toolkit="/usr/local/cuda-13.0")
    values.update(changes)
    return values


def table(root: Path, owner: str) -> list:
    """The role's table (vars/main.yml), as Ansible renders it for root, the service account being owner."""
    return role_vars.render("sglang_service", "__sglang_service_files", table_overrides(root, owner))


def table_overrides(root: Path, owner: str) -> dict:
    """The settings that put every path of the role's table under root, owned by owner."""
    return {
        "sglang_service_venv": f"{root}/opt/sglang/current",
        "sglang_service_release_path": f"{root}/opt/sglang/releases/0.5.8",
        "sglang_service_env_file": f"{root}/etc/sglang/sglang.env",
        "__sglang_service_launcher_dir": f"{root}/usr/local/lib/blackwell-sglang",
        "__sglang_service_launcher": f"{root}/usr/local/lib/blackwell-sglang/sglang_launch.py",
        "__sglang_service_unit_path": f"{root}/etc/systemd/system/sglang.service",
        "__sglang_service_rollback_record": f"{root}/var/lib/blackwell-sglang/rollback",
        "sglang_service_user_home": f"{root}/var/lib/sglang",
        "sglang_service_cuda_toolkit": "/usr/local/cuda-13.0",
        "sglang_service_user": owner, "sglang_service_group": owner}


def lay_out(root: Path, rows: list, contents: dict | None = None) -> None:
    """The node as a deploy leaves it: every row as the table says (owned by whoever runs the test)."""
    release_dir = root / "opt" / "sglang" / "releases" / "0.5.8"
    (release_dir / "bin").mkdir(parents=True, exist_ok=True)
    for row in rows:
        path = Path(row["path"])
        if row.get("state") == "record":
            continue
        if row.get("state") == "link":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(row["src"])
        elif row.get("state") == "directory":
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(int(row["mode"], 8))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text((contents or CONTENTS)[row.get("template") or row["source"]])
            path.chmod(int(row["mode"], 8))


@pytest.fixture
def node(tmp_path):
    owner = __import__("pwd").getpwuid(os.getuid()).pw_name
    rows = [dict(row, owner=owner, group=__import__("grp").getgrgid(os.getgid()).gr_name) for row in table(tmp_path, owner)]
    lay_out(tmp_path, rows)
    return tmp_path, rows


def read(root: Path, rows: list, flags=None) -> dict:
    flags = FLAGS_058 if flags is None else flags
    settings = inputs(root)
    result = venv_info(settings["release_dir"], paths=[settings["release_dir"], settings["rollback_record"]]
                       + [row["path"] for row in rows], contents=[settings["tp_record"]])
    result["server_flags"], result["server_flags_error"] = flags, None if flags else "no sglang package in the venv"
    return result


def planned(root, rows, state=None, check=False, contents=None, **changes):
    state = RUNNING if state is None else state
    settings = inputs(root, **changes)
    found = read(root, rows)
    decided = release(found, settings, [], check)
    return plan(found, state, decided, settings, rows, CONTENTS if contents is None else contents, check)


def names(result):
    return [(s["name"], s["reason"]) for s in result["steps"]]


def test_inputs_name_every_setting_the_plan_reads():
    # The unit tests build the inputs from the same keys the role passes, each a setting of the
    # role's or a value vars/main.yml derives.
    assert set(inputs(Path("/r"))) == set(VARS["__sglang_service_inputs"])
    for key, value in VARS["__sglang_service_inputs"].items():
        assert ("sglang_service_" + key) in value or "__sglang_service_" in value, (key, value)


def test_a_malformed_mapping_setting_leaves_the_refusal_to_the_setting_problems(tmp_path):
    settings = inputs(tmp_path, gpu="four", environment=["A=1"], nccl_environment="x")
    decided = release({"server_flags": FLAGS_058, "paths": {}}, settings, ["sglang_service: sglang_service_gpu ..."])
    assert decided["problems"] == ["sglang_service: sglang_service_gpu ..."] and decided["tp_size"] == 1


@pytest.mark.parametrize("check", [False, True])
def test_a_converged_node_gets_no_steps(node, check):
    root, rows = node
    result = planned(root, rows, check=check)
    assert result["problems"] == [] and result["steps"] == [] and result["files"] == []
    assert result["restart_pending"] is False and result["service"]["drifted"] is False
    assert [row["path"] for row in result["table"]] == [row["path"] for row in rows if row.get("state") != "record"]
    assert all("content" not in row and "checksum" not in row for row in result["table"])


def test_a_fresh_node_writes_every_row_and_starts_the_service(tmp_path):
    owner = __import__("pwd").getpwuid(os.getuid()).pw_name
    rows = table(tmp_path, owner)
    result = planned(tmp_path, rows, state=NO_UNIT)
    written = [row for row in rows if row.get("state") != "record"]
    assert [row["path"] for row in result["files"]] == [row["path"] for row in written]
    assert {row["reason"] for row in result["files"]} == {"%s is missing" % row["path"] for row in written}
    # Nothing to go back to: a node that never ran the service gets no rollback record.
    assert "record" not in result["step"]
    assert result["step"]["restart"].startswith("this run changes %s/opt/sglang/current" % tmp_path)
    assert result["step"]["service"] == "sglang.service is inactive, not active"
    assert result["service"]["start"] is True and result["service"]["exists"] is False


def _tamper(row):
    path = Path(row["path"])
    if row.get("state") == "record":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("tampered\n")
        return ""
    if row.get("state") == "link":
        path.unlink()
        path.symlink_to("/elsewhere")
        return "%s points at /elsewhere, not %s" % (path, row["src"])
    if row.get("state") == "directory":
        path.chmod(0o700)
        return "%s: mode 0700, not %s" % (path, row["mode"])
    path.write_text("tampered\n")
    return "%s: content differs" % path


@pytest.mark.parametrize("index", range(len(VARS["__sglang_service_files"])))
def test_each_row_drifted_alone_is_exactly_that_rows_step(node, index):
    root, rows = node
    row = rows[index]
    reason = _tamper(row)
    result = planned(root, rows)
    if row.get("keep") or row.get("state") == "record":
        # An existing Hugging Face home is kept as it is, whatever its mode; a record the role
        # writes for itself is never judged.
        assert result["steps"] == []
        return
    assert [(f["path"], f["reason"]) for f in result["files"]] == [(row["path"], reason)]
    expected = [("record", "this run switches %s" % row["path"])] if row.get("state") in (None, "link") else []
    expected.append(("file", reason))
    if row.get("restart"):
        expected.append(("restart", "this run changes %s" % row["path"]))
    assert names(result) == expected


def test_a_missing_hugging_face_home_is_made(node):
    root, rows = node
    home = next(row for row in rows if row.get("keep"))
    os.rmdir(home["path"])
    result = planned(root, rows)
    assert names(result) == [("file", "%s is missing" % home["path"])]


def test_the_link_rows_owner_is_the_releases_not_the_links_own(node):
    root, rows = node
    link = next(row for row in rows if row.get("state") == "link")
    # ansible.builtin.file sets the owner through the link: the link's own owner is not judged.
    os.lchown(link["path"], 65534, 65534)
    assert planned(root, rows)["steps"] == []
    os.chown(link["src"], 65534, 65534)
    result = planned(root, rows)
    assert [(f["path"], f["reason"].split(":")[0]) for f in result["files"]] == [(link["path"], link["src"])]
    assert result["files"][0]["reason"].startswith("%s: owner " % link["src"])
    assert result["files"][0]["reason"].endswith("not %s:%s" % (link["owner"], link["group"]))


def test_no_row_of_the_plan_carries_a_files_text_or_checksum(node):
    root, rows = node
    for row in rows:
        if row.get("state") is None:
            Path(row["path"]).write_text("tampered\n")
    result = planned(root, rows)
    secret = [f for f in result["files"] if f.get("secret")]
    assert len(secret) == 1 and len(result["files"]) == len([r for r in rows if r.get("state") is None])
    assert all("content" not in f and "checksum" not in f for f in result["files"] + result["table"])


def test_a_restart_the_state_calls_for_proves_the_gpus_first(node):
    root, rows = node
    two = {"present": True, "count": 2, "capability_majors": [12], "topology": {"summary": "nvlink"}}
    unhealthy = dict(RUNNING, health={"status": 500, "error": None})
    result = planned(root, rows, state=unhealthy, gpu=two)
    assert result["service"]["smoke"] is True and "smoke" not in result["step"]
    assert planned(root, rows, state=unhealthy)["service"]["smoke"] is False


def test_no_release_path_leaves_the_link_alone(node):
    root, rows = node
    link = next(row for row in rows if row.get("state") == "link")
    Path(link["path"]).unlink()
    rows = [dict(row, src="") if row is link else row for row in rows]
    assert planned(root, rows, release_path="")["steps"] == []


@pytest.mark.parametrize("change, step", [
    ({"need_daemon_reload": True}, "restart sglang: systemd has not loaded the unit on disk (NeedDaemonReload)"),
    ({"newer_than_start": ["/etc/sglang/sglang.env"]},
     "restart sglang: changed after the server started: /etc/sglang/sglang.env"),
    ({"health": {"status": 503, "error": None}}, "restart sglang: running but /health answered 503"),
    ({"health": {"status": None, "error": "timed out"}}, "restart sglang: running but /health answered timed out"),
    ({"dropins": ["/etc/systemd/system/sglang.service.d/x.conf"]},
     "drop-ins change the unit: /etc/systemd/system/sglang.service.d/x.conf"),
    ({"active_state": "failed"}, "sglang.service is failed, not active"),
    ({"unit_file_state": "disabled"}, "sglang.service is disabled, not enabled"),
])
def test_each_state_of_the_service_is_its_step(node, change, step):
    root, rows = node
    result = planned(root, rows, state=dict(RUNNING, **change))
    assert names(result) == [("service", step)]


def test_a_release_other_than_the_linked_one_running_is_restarted(node):
    root, rows = node
    state = dict(RUNNING, release={"running": "/opt/sglang/releases/0.5.7", "linked": "/opt/sglang/releases/0.5.8"})
    result = planned(root, rows, state=state)
    assert result["service"]["reasons"] == [
        "runs /opt/sglang/releases/0.5.7 while %s/opt/sglang/current points at /opt/sglang/releases/0.5.8" % root]


def test_an_engine_still_loading_is_waited_for_in_a_run_and_only_noted_in_a_check(node):
    root, rows = node
    loading = dict(RUNNING, phase="loading", health={"status": 503, "error": None}, loading={"remaining": 21})
    run = planned(root, rows, state=loading)
    assert names(run) == [("service", "the engine is still loading its model")]
    assert (run["service"]["wait_for_loading"], run["service"]["loading_polls"]) == (True, 5)
    assert planned(root, rows, state=loading, check=True)["steps"] == []
    # Still not healthy after the wait: restarted, once.
    again = service_state(loading, inputs(root), False, waited=True)
    assert again["reasons"] == ["running but /health answered 503"] and again["wait_for_loading"] is False
    assert again["restarts"] is True and again["tell_reasons"] is True
    # A restart this run makes for its own changes is not put off for a loading engine.
    assert service_state(loading, inputs(root), True)["wait_for_loading"] is False


def test_one_restart_for_the_runs_changes_and_what_the_state_shows(node):
    root, rows = node
    behind = dict(RUNNING, newer_than_start=["/etc/sglang/sglang.env"])
    # The run's own change restarts; the state's reason is told only in a check.
    run = service_state(behind, inputs(root), True)
    assert (run["restarts"], run["tell_reasons"]) == (True, False)
    check = service_state(behind, inputs(root), True, check_mode=True)
    assert (check["restarts"], check["tell_reasons"]) == (True, True)
    # A stopped unit with nothing changed is started, not restarted.
    stopped = service_state(dict(RUNNING, active_state="inactive"), inputs(root), False)
    assert (stopped["restarts"], stopped["start"], stopped["restart_due"]) == (False, True, True)
    # A drop-in restarts.
    assert service_state(dict(RUNNING, dropins=["/x.conf"]), inputs(root), False)["restarts"] is True


def test_a_record_left_behind_is_kept_or_forgotten_by_the_service_it_left(node):
    root, rows = node
    record = Path(inputs(root)["rollback_record"])
    record.parent.mkdir(parents=True)
    record.write_text("{}")
    assert names(planned(root, rows)) == [
        ("record_forget", "%s is left from a rollout the healthy service has outlived" % record)]
    unhealthy = dict(RUNNING, health={"status": 500, "error": None})
    assert names(planned(root, rows, state=unhealthy))[0] == (
        "record", "%s is left from an unfinished rollout and stays its rollback point" % record)


def test_smoke_restart_requested_and_health_generate_are_steps_of_a_run(node):
    root, rows = node
    requested = ("restart", "another role of the play changed what the server loads (sglang_service_restart_requested)")
    assert names(planned(root, rows, restart_requested=True)) == [requested]
    # auto proves the GPUs before a restart, on a node with more than one.
    two = {"present": True, "count": 2, "capability_majors": [12], "topology": {"summary": "nvlink"}}
    assert names(planned(root, rows, gpu=two)) == []
    assert names(planned(root, rows, gpu=two, restart_requested=True)) == [
        requested, ("smoke", "the GPUs must all-reduce before the restart")]
    assert names(planned(root, rows, nccl_smoke="always")) == [
        ("smoke", "the NCCL smoke test runs on every deploy (sglang_service_nccl_smoke: always)")]
    assert names(planned(root, rows, health_generate_enabled=True)) == [
        ("gate", "the health gate asks /health_generate, which the state read does not")]
    assert planned(root, rows, health_generate_enabled=True, check=True)["steps"] == []


def test_a_node_the_router_lacks_is_a_step_and_one_it_lists_is_none(node):
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.router_plan import worker_view
    root, rows = node
    url, router = "http://10.0.0.2:30000", "http://10.0.0.1:30100"
    listed = {"status": 200, "json": {"workers": [{"id": "a", "url": url, "is_healthy": False}]}}
    lacking = {"status": 200, "json": {"workers": [{"id": "b", "url": "http://10.0.0.3:30000", "is_healthy": True}]}}
    silent = {"status": -1, "msg": "Connection refused"}
    for check in (False, True):
        assert names(planned(root, rows, router=worker_view([url], listed), router_url=router, check=check)) == []
        assert names(planned(root, rows, router=worker_view([url], silent), router_url=router, check=check)) == []
        assert names(planned(root, rows, router=worker_view([url], lacking), router_url=router, check=check)) == [
            ("router", "http://10.0.0.2:30000 is not among the router's workers (http://10.0.0.1:30100)")]


def test_a_release_that_cannot_be_read_is_a_problem_in_a_run_and_a_step_in_a_check(node):
    root, rows = node
    found = read(root, rows, flags={})
    run = release(found, inputs(root), [], False)
    assert run["problems"] == ["sglang_service: cannot read the installed SGLang release in %s/opt/sglang/releases/0.5.8:"
                               " no sglang package in the venv. Install it first (sglang_install); nothing was written."
                               % root]
    check = release(found, inputs(root), [], True)
    assert check["problems"] == [] and check["readable"] is False and check["args"] == []
    result = plan(found, RUNNING, check, inputs(root), rows, CONTENTS, True)
    assert names(result) == [("release", "the installed SGLang release cannot be read: no sglang package in the venv")]


def test_launch_arguments_follow_the_settings_and_the_release(tmp_path):
    settings = inputs(tmp_path, served_model_name="kimi", extra_args=["--mem-fraction-static", 0.85],
                      eagle3_enabled=True, eagle3_draft_model_path="/models/draft", flashinfer_fusion_enabled=True)
    decided = release({"server_flags": FLAGS_058, "paths": {}}, settings, [])
    assert decided["args"] == [
        "--model-path", "/models/kimi", "--served-model-name", "kimi", "--host", "127.0.0.1", "--port", "30000",
        "--tp-size", "1", "--enable-torch-symm-mem", "--enable-flashinfer-allreduce-fusion", "--enable-metrics",
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/draft",
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
        "--mem-fraction-static", "0.85"]
    assert decided["problems"] == [] and decided["tp_size"] == 1 and decided["health_host"] == "127.0.0.1"


def test_fusion_is_left_to_sglang_by_default_on_every_release(tmp_path):
    """As upstream has it: no fusion flag unless asked, so a release turns fusion on by itself
    where FlashInfer supports it, and a release that refuses it on compute capability 12 deploys."""
    for flags in (FLAGS_058, FLAGS_0523):
        decided = release({"server_flags": flags, "paths": {}}, inputs(tmp_path), [])
        assert decided["problems"] == [], flags
        assert decided["fusion"] == {"crash": False, "enabled": False, "left_out": False}
        assert not [word for word in decided["args"] if "fusion" in word]


def test_fusion_on_compute_capability_12_under_each_crash_policy(tmp_path):
    """Fusion asked for, as the field report did, on a release that refuses it there."""
    found = {"server_flags": FLAGS_0523, "paths": {}}
    strict = release(found, inputs(tmp_path, flashinfer_fusion_enabled=True), [])
    assert strict["fusion"] == {"crash": True, "enabled": True, "left_out": False}
    assert strict["problems"][0].startswith('sglang_service: refusing to deploy: SGLang 0.5.23 raises "FlashInfer')
    warn = release(found, inputs(tmp_path, crash_policy="warn", flashinfer_fusion_enabled=True), [])
    assert warn["problems"] == [] and warn["fusion"]["left_out"] is True
    assert "--flashinfer-allreduce-fusion-backend" not in warn["args"]
    force = release(found, inputs(tmp_path, crash_policy="force", flashinfer_fusion_enabled=True), [])
    assert force["problems"] == [] and force["args"][-3:-1] == ["--flashinfer-allreduce-fusion-backend", "auto"]


def test_the_metrics_endpoint_is_on_by_default_and_off_when_asked(tmp_path):
    """--enable-metrics (SGLang's /metrics on the server's own port) unless the setting turns it off."""
    found = {"server_flags": FLAGS_058, "paths": {}}
    on = release(found, inputs(tmp_path), [])
    assert DEFAULTS["sglang_service_metrics_enabled"] is True
    assert on["problems"] == [] and on["args"] == [
        "--model-path", "/models/kimi", "--host", "127.0.0.1", "--port", "30000", "--tp-size", "1",
        "--enable-torch-symm-mem", "--enable-metrics"]
    for off in (False, "false", "no"):
        assert "--enable-metrics" not in release(found, inputs(tmp_path, metrics_enabled=off), [])["args"], off


def test_a_release_without_the_metrics_flag_is_refused_by_name(tmp_path):
    flags = dict(FLAGS_058, flags=[flag for flag in FLAGS_058["flags"] if flag != "--enable-metrics"])
    found = {"server_flags": flags, "paths": {}, "release_dir": ""}
    assert release(found, inputs(tmp_path), [])["problems"] == [
        "sglang_service: SGLang 0.5.8 installed in %s/opt/sglang/releases/0.5.8 has no --enable-metrics; nothing was "
        "written. Remove or rename it (sglang_service_extra_args and the sglang_service_* feature switches), or "
        "install a release that has it." % tmp_path]
    assert release(found, inputs(tmp_path, metrics_enabled=False), [])["problems"] == []


def test_the_pcie_all_reduce_follows_the_topology_and_the_release(tmp_path):
    pcie = {"present": True, "count": 2, "capability_majors": [12], "topology": {"summary": "pcie_only"}}
    found = {"server_flags": FLAGS_0523, "paths": {}}
    on = release(found, inputs(tmp_path, gpu=pcie, crash_policy="force", pcie_ipc_max_numel=1024), [])
    assert on["pcie_ipc_allreduce"] is True
    assert on["environment"] == {"HF_HOME": f"{tmp_path}/var/lib/sglang/.cache/huggingface",
                                 "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1", "SGLANG_PCIE_IPC_MAX_NUMEL": "1024"}
    # Later sources win: the settings', then NCCL's, the sandbox's and the PCIe all-reduce's.
    layered = release(found, inputs(tmp_path, gpu=pcie, crash_policy="force",
                                    environment={"A": "env", "B": "env", "HF_HOME": "env", "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"},
                                    nccl_environment={"B": "nccl"}), [])["environment"]
    assert (layered["A"], layered["B"], layered["HF_HOME"], layered["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"]) == (
        "env", "nccl", f"{tmp_path}/var/lib/sglang/.cache/huggingface", "1")
    nvlink = dict(pcie, topology={"summary": "nvlink"})
    assert release(found, inputs(tmp_path, gpu=nvlink, crash_policy="force"), [])["pcie_ipc_allreduce"] is False
    old = release({"server_flags": FLAGS_058, "paths": {}}, inputs(tmp_path, pcie_ipc_allreduce="always"), [])
    assert old["problems"] == ["sglang_service: sglang_service_pcie_ipc_allreduce is 'always' but SGLang 0.5.8 has no "
                               "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE; use 'auto' or install a release that ships the PCIe "
                               "IPC all-reduce."]


def test_the_gate_asks_ready_where_the_release_serves_it(tmp_path):
    found = {"server_flags": FLAGS_0523, "paths": {}}
    assert release(found, inputs(tmp_path, crash_policy="force"), [])["health_path"] == "/ready"
    assert release({"server_flags": FLAGS_058, "paths": {}}, inputs(tmp_path), [])["health_path"] == "/health"


def test_every_problem_of_a_readable_release_at_once(tmp_path):
    found = {"server_flags": dict(FLAGS_058, fusion_arguments=[]), "contents": {f"{tmp_path}/etc/sglang/tp-size": "8\n"},
             "paths": {f"{tmp_path}/opt/sglang/current": {"exists": True, "isdir": True, "islink": False}}}
    settings = inputs(tmp_path, model_path="", host="0.0.0.0", extra_args=["--no-such-flag=1"],
                      gpu={"present": True, "count": 4, "capability_majors": [12]}, flashinfer_fusion_enabled=True)
    problems = release(found, settings, ["sglang_service: a setting problem."])["problems"]
    starts = [
        "sglang_service: sglang_service_model_path is not set;",
        "sglang_service: a setting problem.",
        "sglang_service: refusing to listen on 0.0.0.0:30000 without an API key",
        "sglang_service: refusing to restart sglang with --tp-size 4: it was deployed with --tp-size 8",
        "sglang_service: SGLang 0.5.8 has neither --enable-flashinfer-allreduce-fusion",
        f"sglang_service: SGLang 0.5.8 installed in {tmp_path}/opt/sglang/releases/0.5.8 has no --no-such-flag; nothing"
        " was written. Remove or rename it",
        f"sglang_service: {tmp_path}/opt/sglang/current (sglang_service_venv) is not a symbolic link",
    ]
    assert len(problems) == len(starts), problems
    for problem, start in zip(problems, starts):
        assert problem.startswith(start), problem


def test_the_tp_size_follows_the_setting_then_the_gpus_then_the_fallback(tmp_path):
    found = {"server_flags": FLAGS_058, "paths": {}}
    eight = {"present": True, "count": 8, "capability_majors": [12]}
    assert release(found, inputs(tmp_path, gpu=eight), [])["tp_size"] == 8
    assert release(found, inputs(tmp_path, gpu=eight, tp_size=4), [])["tp_size"] == 4
    assert release(found, inputs(tmp_path, gpu={}, tp_size_fallback=2), [])["tp_size"] == 2
    assert release(found, inputs(tmp_path, gpu=eight), [])["args"][6:8] == ["--tp-size", "8"]
    # The record the next run reads back holds the size and a line break.
    assert release(found, inputs(tmp_path, gpu=eight), [])["tp_record"] == "8\n"


def test_a_new_cuda_toolkit_is_its_records_row_and_one_restart(node):
    """cuda13 moved the node to CUDA 13.5: the record of the toolkit the server runs on is the one
    row off, and the restart the plan asks for is the row's (a rollback puts the record, and with
    it the links, back). The release stage spells the record's text; without a toolkit there is no
    record, and a relative path is refused by name."""
    root, rows = node
    settings = inputs(root, cuda_toolkit="/usr/local/cuda-13.5")
    found = read(root, rows)
    decided = release(found, settings, [], False)
    assert decided["cuda_record"] == "/usr/local/cuda-13.5\n" and decided["problems"] == []
    contents = dict(CONTENTS, **{"cuda-toolkit": decided["cuda_record"]})
    for check in (False, True):
        got = plan(found, RUNNING, decided, settings, rows, contents, check)
        record = f"{root}/etc/sglang/cuda-toolkit"
        assert [row["path"] for row in got["files"]] == [record]
        assert got["restart_pending"] is True
        # The rollback point first, then the record, then the one restart.
        assert names(got) == [("record", f"this run switches {record}"), ("file", f"{record}: content differs"),
                              ("restart", f"this run changes {record}")]
    # No toolkit (cuda13 not in the play): the row is out of force and nothing is recorded.
    assert release(found, inputs(root, cuda_toolkit=""), [], False)["cuda_record"] == ""
    off = [dict(row, enabled="False") if row.get("source") == "cuda-toolkit" else row for row in rows]
    assert record not in [row["path"] for row in planned(root, off, cuda_toolkit="")["table"]]
    assert release(found, inputs(root, cuda_toolkit="cuda-13.5"), [], False)["problems"] == [
        "sglang_service: sglang_service_cuda_toolkit 'cuda-13.5' is not an absolute path; it names the CUDA toolkit "
        "directory the server runs on (for example /usr/local/cuda-13.0), or is empty. Nothing was written."]


# --- the maintainer's exercise: a managed file is one row and one template ----------------------

NEW_ROW = '  - {path: "{{ sglang_service_env_file | dirname }}/limits.conf", mode: "0644", template: sglang-limits.conf.j2}\n'
NEW_TEMPLATE = "# The engine's port, for a site's own tooling.\nport={{ sglang_service_port }}\n"


def test_a_row_and_a_template_added_to_a_copy_of_the_role_are_written_judged_tampered_and_removed(tmp_path):
    """A copy of the collection gets one row in sglang_service's table and its template, nothing
    else: the schema takes it, the plan of a node converged before it writes exactly that row,
    then finds nothing off; tampered, it is that row's step alone; the removal takes it first,
    before the directories. The tasks write any row the plan names (tasks/unit.yml, by its columns)."""
    collection = copy_as_collection(tmp_path / "copy")
    role = collection / "roles" / "sglang_service"
    text = (role / "vars" / "main.yml").read_text(encoding="utf-8")
    head, rest = text.split("__sglang_service_files:\n", 1)
    rows_end = next(index for index, line in enumerate(rest.splitlines(keepends=True))
                    if line.strip() and not line.startswith(" "))
    lines = rest.splitlines(keepends=True)
    while not lines[rows_end - 1].strip():
        rows_end -= 1
    (role / "vars" / "main.yml").write_text(
        head + "__sglang_service_files:\n" + "".join(lines[:rows_end]) + NEW_ROW + "".join(lines[rows_end:]), encoding="utf-8")
    (role / "templates" / "sglang-limits.conf.j2").write_text(NEW_TEMPLATE, encoding="utf-8")

    root = tmp_path / "node"
    owner = __import__("pwd").getpwuid(os.getuid()).pw_name
    group = __import__("grp").getgrgid(os.getgid()).gr_name
    overrides = dict(table_overrides(root, owner), sglang_service_group=group)
    rows = role_vars.render("sglang_service", "__sglang_service_files", overrides, collection)
    new = rows[-1]
    assert (new["path"], new["template"]) == (f"{root}/etc/sglang/limits.conf", "sglang-limits.conf.j2")
    assert managed.problems("sglang_service", rows) == []
    contents = dict(CONTENTS, **{"sglang-limits.conf.j2": role_vars.render_template(
        "sglang_service", "sglang-limits.conf.j2", overrides, collection)})
    assert contents["sglang-limits.conf.j2"].endswith("port=30000\n")
    rows = [dict(row, owner=owner, group=group) for row in rows]

    lay_out(root, [row for row in rows if row is not rows[-1]], contents)
    result = planned(root, rows, contents=contents)
    assert [(f["path"], f["reason"]) for f in result["files"]] == [(new["path"], f"{new['path']} is missing")]
    assert names(result) == [("record", f"this run switches {new['path']}"), ("file", f"{new['path']} is missing")]

    lay_out(root, [rows[-1]], contents)
    assert planned(root, rows, contents=contents)["steps"] == []

    Path(new["path"]).write_text("port=1\n")
    result = planned(root, rows, contents=contents)
    assert [(f["path"], f["reason"]) for f in result["files"]] == [(new["path"], f"{new['path']}: content differs")]

    # The last row goes first, before the directories the table puts files in.
    assert managed.removal("sglang_service", rows)[0] == new["path"]


def test_the_removal_leaves_only_the_rows_it_keeps(node):
    """The generic removal over a converged node laid out from the table (every path under a
    temporary root, so the configuration directory is not /etc/sglang and is kept): every row's
    path is gone after it but the kept ones, the link, the Hugging Face home and that directory."""
    root, rows = node
    for row in rows:
        if row.get("state") == "record":
            Path(row["path"]).parent.mkdir(parents=True, exist_ok=True)
            Path(row["path"]).write_text("{}\n")
    for path in managed.removal("sglang_service", rows):
        target = Path(path)
        if target.is_dir() and not target.is_symlink():
            __import__("shutil").rmtree(target)
        else:
            target.unlink()
    left = [row["path"] for row in rows if os.path.lexists(row["path"])]
    assert left == [f"{root}/opt/sglang/current", f"{root}/etc/sglang", f"{root}/var/lib/sglang/.cache/huggingface"]


@pytest.mark.parametrize("env_file, removed", [
    # The role's own configuration directory goes whole, with what the table put in it.
    ("/etc/sglang/sglang.env", ["/var/lib/blackwell-sglang", "/etc/systemd/system/sglang.service",
                                "/usr/local/lib/blackwell-sglang", "/etc/sglang"]),
    # One other software may share stays; each of the role's files in it goes.
    ("/etc/shared/sglang.env", ["/var/lib/blackwell-sglang", "/etc/shared/nccl-smoke.json", "/etc/shared/tp-size",
                                "/etc/shared/cuda-toolkit", "/etc/systemd/system/sglang.service",
                                "/etc/shared/sglang.env", "/usr/local/lib/blackwell-sglang"]),
])
def test_the_removal_of_the_roles_own_table_in_order(env_file, removed):
    """The table as Ansible renders it with the role's defaults (the path of the secrets file
    aside): the exact paths a removal takes, in their order; the link and the Hugging Face home
    stay."""
    rows = role_vars.render("sglang_service", "__sglang_service_files", {"sglang_service_env_file": env_file})
    assert managed.removal("sglang_service", rows) == removed

"""The systemd reading behind sglang_service_info, on `systemctl show --timestamp=unix` output."""
from __future__ import annotations

from ansible_collections.blackwell.sglang.plugins.module_utils.systemd_unit import (
    engine_phase, local_dropins, newer_than, parse_show, start_time, summarise)

RUNNING = """LoadState=loaded
ActiveState=active
SubState=running
UnitFileState=enabled
NeedDaemonReload=no
MainPID=4242
ExecMainStartTimestamp=@1764523020
DropInPaths=""" + " ".join([
    "/usr/lib/systemd/system/service.d/10-timeout-abort.conf",
    "/etc/systemd/system/sglang.service.d/override.conf",
    "/run/systemd/system/sglang.service.d/50-x.conf",
    "/etc/systemd/system/other.service.d/a.conf",
]) + "\n"

MISSING = """LoadState=not-found
ActiveState=inactive
SubState=dead
UnitFileState=
NeedDaemonReload=no
MainPID=0
ExecMainStartTimestamp=
DropInPaths=
"""


def test_parse_show_keeps_values_with_equals_signs():
    props = parse_show("ExecStart={ path=/x ; argv[]=/x --a=b }\nMainPID=7\n")
    assert props == {"ExecStart": "{ path=/x ; argv[]=/x --a=b }", "MainPID": "7"}


def test_start_time_reads_unix_timestamps_only():
    assert start_time({"ExecMainStartTimestamp": "@1764523020"}) == 1764523020
    assert start_time({"ExecMainStartTimestamp": ""}) is None
    assert start_time({"ExecMainStartTimestamp": "Sun 2026-11-30 16:37:00 UTC"}) is None
    assert start_time({}) is None


def test_only_the_units_own_local_dropins_count():
    assert local_dropins(parse_show(RUNNING), "sglang.service") == [
        "/etc/systemd/system/sglang.service.d/override.conf",
        "/run/systemd/system/sglang.service.d/50-x.conf",
    ]
    assert local_dropins(parse_show(MISSING), "sglang.service") == []


def test_newer_than_is_strict_and_skips_missing_files():
    mtimes = {"/a": 100, "/b": 101, "/c": None, "/d": 99}
    assert newer_than(mtimes, 100) == ["/b"]
    assert newer_than(mtimes, None) == []


def test_summary_of_a_running_unit_with_a_file_newer_than_its_start():
    facts = summarise("sglang.service", parse_show(RUNNING),
                      {"/etc/systemd/system/sglang.service": 1764523019, "/opt/x.py": 1764523100})
    assert facts == {
        "name": "sglang.service", "exists": True, "load_state": "loaded", "active_state": "active",
        "sub_state": "running", "unit_file_state": "enabled", "need_daemon_reload": False,
        "main_pid": 4242, "started": 1764523020,
        "dropins": ["/etc/systemd/system/sglang.service.d/override.conf",
                    "/run/systemd/system/sglang.service.d/50-x.conf"],
        "newer_than_start": ["/opt/x.py"],
    }


def test_summary_of_a_unit_that_does_not_exist():
    facts = summarise("sglang.service", parse_show(MISSING), {"/opt/x.py": 5})
    assert (facts["exists"], facts["active_state"], facts["main_pid"], facts["started"]) == (False, "inactive", 0, None)
    assert facts["newer_than_start"] == [] and facts["dropins"] == []


def test_a_stopped_unit_is_never_behind_its_files():
    stopped = parse_show(RUNNING.replace("ActiveState=active", "ActiveState=failed"))
    assert summarise("sglang.service", stopped, {"/opt/x.py": 1764523100})["newer_than_start"] == []
    reload = parse_show(RUNNING.replace("NeedDaemonReload=no", "NeedDaemonReload=yes"))
    assert summarise("sglang.service", reload, {})["need_daemon_reload"] is True


def test_an_engine_answering_503_is_loading_within_the_timeout_then_unhealthy():
    running = summarise("sglang.service", parse_show(RUNNING), {})
    started = running["started"]
    assert engine_phase(running, 503, started + 42, 1200) == ("loading", {"elapsed": 42, "remaining": 1158})
    # Not listening yet is loading too.
    assert engine_phase(running, None, started, 1200) == ("loading", {"elapsed": 0, "remaining": 1200})
    assert engine_phase(running, 503, started + 1199, 1200) == ("loading", {"elapsed": 1199, "remaining": 1})
    assert engine_phase(running, 503, started + 1200, 1200) == ("unhealthy", None)
    assert engine_phase(running, 500, started + 5000, 1200) == ("unhealthy", None)
    # Without a timeout nothing is loading.
    assert engine_phase(running, 503, started + 1, None) == ("unhealthy", None)
    assert engine_phase(running, 200, started + 1, 1200) == ("healthy", None)


def test_a_stopped_unit_or_one_without_a_start_is_never_loading():
    stopped = summarise("sglang.service", parse_show(RUNNING.replace("ActiveState=active", "ActiveState=failed")), {})
    assert engine_phase(stopped, None, 0, 1200) == ("stopped", None)
    no_start = dict(summarise("sglang.service", parse_show(RUNNING), {}), started=None)
    assert engine_phase(no_start, 503, 10, 1200) == ("unhealthy", None)

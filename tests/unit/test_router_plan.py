"""sglang_router's plan (plugins/plugin_utils/router_plan.py): the worker list from the
inventory, and every refusal of the settings, before any node changes."""
from __future__ import annotations

import pytest

from ansible_collections.blackwell.sglang.plugins.plugin_utils import settings
from ansible_collections.blackwell.sglang.plugins.plugin_utils.router_plan import (
    normal_url, release, views, worker_view, workers)

HOSTS = ["router", "node1", "node2", "node3"]
ENGINES = {name: {"sglang_service_host": "0.0.0.0", "sglang_service_port": 30000, "ansible_host": f"10.0.0.{i}",
                  "sglang_service_api_key": "k"} for i, name in enumerate(HOSTS[1:], start=1)}
INPUTS = {"version": "0.3.2", "policy": "cache_aware", "api_key": "", "host": "0.0.0.0",
          "port": 30100, "allow_unauthenticated": False, "metrics_host": "0.0.0.0", "metrics_port": 29000,
          "request_timeout": 1800, "shutdown_grace": 180, "extra_args": [], "hashes": ["ab" * 32]}


def test_each_engine_is_a_worker_at_the_address_and_port_it_listens_on():
    hostvars = dict(ENGINES, node2=dict(ENGINES["node2"], sglang_service_host="192.168.1.2", sglang_service_port=8000),
                    node3=dict(ENGINES["node3"], sglang_router_worker_address="fd00::3"))
    got = workers(hostvars, ["node1", "node2", "node3"], "router", HOSTS)
    assert got == {"urls": ["http://10.0.0.1:30000", "http://192.168.1.2:8000", "http://[fd00::3]:30000"],
                   "problems": [], "key": "k"}


def test_a_router_on_an_engine_node_reaches_its_loopback_engine():
    hostvars = dict(ENGINES, node1=dict(ENGINES["node1"], sglang_service_host="127.0.0.1"))
    got = workers(hostvars, ["node1", "node2"], "node1", HOSTS)
    assert got == {"urls": ["http://127.0.0.1:30000", "http://10.0.0.2:30000"], "problems": [], "key": "k"}


def test_no_worker_an_unknown_worker_and_a_loopback_engine_elsewhere_are_refused_by_name():
    assert workers(ENGINES, [], "router", HOSTS)["problems"] == [
        "sglang_router: the router has no workers: sglang_router_workers (by default the hosts of the group "
        "sglang_router_workers_group) names no host of the inventory. Put the engine nodes in that group (or name "
        "another group). Nothing was changed."]
    hostvars = dict(ENGINES, node2=dict(ENGINES["node2"], sglang_service_host="127.0.0.1"))
    assert workers(hostvars, ["node1", "node2", "node9"], "router", HOSTS)["problems"] == [
        "sglang_router: sglang_router_workers names host(s) the inventory does not have: node9. Nothing was changed.",
        "sglang_router: the engine of node2 (127.0.0.1) listens on loopback, where the router on router cannot reach "
        "it. Set sglang_service_host to an address the router reaches on those nodes (with sglang_service_api_key), "
        "or run the router on the node itself. Nothing was changed."]


def test_the_launch_arguments_carry_the_workers_and_never_the_key():
    got = release(INPUTS, workers(ENGINES, ["node1", "node2"], "router", HOSTS))
    assert got["problems"] == []
    assert got["args"] == ["--host", "0.0.0.0", "--port", "30100", "--policy", "cache_aware",
                           "--prometheus-host", "0.0.0.0", "--prometheus-port", "29000",
                           "--request-timeout-secs", "1800", "--shutdown-grace-period-secs", "180",
                           "--worker-urls", "http://10.0.0.1:30000", "http://10.0.0.2:30000"]
    assert "k" not in got["args"]


@pytest.mark.parametrize("change, message", [
    ({"api_key": "other"}, "sglang_router: sglang_router_api_key differs from the workers' sglang_service_api_key; "
                           "the router sends the key its clients use to its workers too, so the two must be the "
                           "same. Their values are not shown. Nothing was changed."),
    ({"extra_args": ["--api-key=x"]}, "sglang_router: sglang_router_extra_args gives --api-key, which the role "
                                      "spells from its own settings (--api-key); set those instead. Nothing was "
                                      "changed."),
    ({"extra_args": ["--api-k", "x"]}, "sglang_router: sglang_router_extra_args gives --api-k, which the role "
                                       "spells from its own settings (--api-key); set those instead. Nothing was "
                                       "changed."),
    ({"extra_args": ["--control-plane-api-keys", "x"]},
     "sglang_router: sglang_router_extra_args gives --control-plane-api-keys, which carries a secret: the unit and the "
     "router's command line would show it to every user of the host. Nothing was changed."),
    # smg's per-tenant keys, and a database URL that may hold a password.
    ({"extra_args": ["--tenant-api-key=team:x"]},
     "sglang_router: sglang_router_extra_args gives --tenant-api-key, which carries a secret: the unit and the "
     "router's command line would show it to every user of the host. Nothing was changed."),
    ({"extra_args": ["--redis-u", "redis://:p@cache:6379"]},
     "sglang_router: sglang_router_extra_args gives --redis-u, which carries a secret: the unit and the "
     "router's command line would show it to every user of the host. Nothing was changed."),
    ({"extra_args": ["--postgres-db-url", "postgres://u:p@db/smg"]},
     "sglang_router: sglang_router_extra_args gives --postgres-db-url, which carries a secret: the unit and the "
     "router's command line would show it to every user of the host. Nothing was changed."),
])
def test_each_bad_setting_is_refused_by_name(change, message):
    got = release(dict(INPUTS, **change), workers(ENGINES, ["node1"], "router", HOSTS))
    assert got["problems"] == [message]


def test_the_router_takes_the_key_its_workers_share_and_refuses_keys_that_differ():
    assert release(INPUTS, workers(ENGINES, ["node1", "node2"], "router", HOSTS))["api_key"] == "k"
    assert release(dict(INPUTS, api_key="k"), workers(ENGINES, ["node1"], "router", HOSTS))["problems"] == []
    # A vault block scalar's one trailing line break is not a different key.
    hostvars = dict(ENGINES, node2=dict(ENGINES["node2"], sglang_service_api_key="k\n"))
    assert workers(hostvars, ["node1", "node2"], "router", HOSTS)["problems"] == []
    hostvars = dict(ENGINES, node2=dict(ENGINES["node2"], sglang_service_api_key="SECRET-other"))
    got = workers(hostvars, ["node1", "node2"], "router", HOSTS)
    assert got["problems"] == [
        "sglang_router: the workers' engines do not share one sglang_service_api_key; the router sends one key to "
        "every worker. Their values are not shown. Nothing was changed."]
    assert got["key"] == "" and "SECRET" not in " ".join(got["problems"])


def test_an_open_router_is_allowed_only_when_said_so():
    keyless = {name: {k: v for k, v in found.items() if k != "sglang_service_api_key"} for name, found in ENGINES.items()}
    assert release(INPUTS, workers(keyless, ["node1"], "router", HOSTS))["problems"] == [
        "sglang_router: refusing to listen on 0.0.0.0:30100 without an API key: anyone who reaches that address could "
        "use the fleet's GPUs. Set sglang_router_api_key, listen on loopback, or set "
        "sglang_router_allow_unauthenticated: true if only trusted clients can reach it. Nothing was changed."]
    open_inputs = dict(INPUTS, allow_unauthenticated=True)
    assert release(open_inputs, workers(keyless, ["node1"], "router", HOSTS))["problems"] == []
    assert release(dict(INPUTS, host="127.0.0.1"), workers(keyless, ["node1"], "router", HOSTS))["problems"] == []


def test_a_worker_url_is_the_same_for_the_router_and_the_node_it_drains():
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.router_plan import worker_url
    assert worker_url(ENGINES["node1"], "node1") == "http://10.0.0.1:30000"
    assert worker_url({"sglang_service_host": "127.0.0.1"}, "node1", "node1") == "http://127.0.0.1:30000"
    assert worker_url({}, "node7") == "http://node7:30000"


def test_flags_the_role_does_not_spell_are_the_operators_and_a_key_keeps_one_line_break_off():
    got = release(dict(INPUTS, extra_args=["--health-check-interval-secs", "2", "--disable-retries"]),
                  workers(ENGINES, ["node1"], "router", HOSTS))
    assert got["problems"] == [] and got["args"][-3:] == ["--health-check-interval-secs", "2", "--disable-retries"]
    crlf = dict(ENGINES, node2=dict(ENGINES["node2"], sglang_service_api_key="k\r\n"),
                node3=dict(ENGINES["node3"], sglang_service_api_key="k\n"))
    assert workers(crlf, ["node1", "node2", "node3"], "router", HOSTS)["key"] == "k"


def test_a_router_key_with_a_line_break_is_refused_without_its_value():
    hostvars = {name: dict(found, sglang_service_api_key="sk-SECRET\nX=1") for name, found in ENGINES.items()}
    got = release(INPUTS, workers(hostvars, ["node1"], "router", HOSTS))
    # The router takes the workers' key: the message names the variable the operator set.
    assert got["problems"] == [
        "sglang_router: the workers' sglang_service_api_key, which the router takes for its own, holds a line break "
        "(one trailing line break is removed, nothing else is); it would add lines to the secrets file. Its value is "
        "not shown. Nothing was changed."]
    assert "SECRET" not in " ".join(got["problems"] + got["args"])
    got = release(dict(INPUTS, api_key="sk-SECRET\nX=1"), workers(hostvars, ["node1"], "router", HOSTS))
    assert got["problems"] == [
        "sglang_router: sglang_router_api_key holds a line break (one trailing line break is removed, nothing else "
        "is); it would add lines to the secrets file. Its value is not shown. Nothing was changed."]


EXPECTED = ["http://10.0.0.1:30000", "http://10.0.0.2:30000", "http://10.0.0.3:30000"]


def _listed(*workers_):
    return {"status": 200, "json": {"workers": [{"id": f"w{i}", "url": url, "is_healthy": healthy}
                                                for i, (url, healthy) in enumerate(workers_)]}}


def test_the_router_holding_exactly_its_workers_is_no_drift_and_each_worker_is_noted():
    got = worker_view(EXPECTED, _listed((EXPECTED[0], True), (EXPECTED[1], False), (EXPECTED[2], True)))
    assert got == {"read": True, "missing": [], "extra": [], "healthy": [EXPECTED[0], EXPECTED[2]],
                   "unhealthy": [EXPECTED[1]], "draining": [], "ids": ["w0", "w1", "w2"], "drift": [],
                   "notes": ["http://10.0.0.1:30000: healthy", "http://10.0.0.2:30000: unhealthy",
                             "http://10.0.0.3:30000: healthy"]}


def test_a_missing_and_a_stray_worker_are_drift_with_their_reasons():
    got = worker_view(EXPECTED, _listed((EXPECTED[0], True), (EXPECTED[2], True), ("http://10.0.0.9:30000", True)))
    assert got["missing"] == [EXPECTED[1]]
    # A stray worker is no verdict on the health of the group's workers.
    assert (got["healthy"], got["unhealthy"]) == ([EXPECTED[0], EXPECTED[2]], [])
    assert got["extra"] == [{"url": "http://10.0.0.9:30000", "id": "w2"}]
    assert got["drift"] == [
        "http://10.0.0.2:30000 is not among the router's workers",
        "http://10.0.0.9:30000 is among the router's workers, but no host of the group serves there"]
    assert got["notes"] == ["http://10.0.0.1:30000: healthy", "http://10.0.0.2:30000: removed (not among the "
                            "router's workers)", "http://10.0.0.3:30000: healthy",
                            "http://10.0.0.9:30000: listed, not one of the group's workers"]


@pytest.mark.parametrize("answer, note", [
    ({"status": -1, "msg": "Status code was -1 and not [200]: Request failed: <urlopen error [Errno 111] "
                           "Connection refused>"},
     "the router's worker list could not be read (status -1: Status code was -1 and not [200]: Request failed: "
     "<urlopen error [Errno 111] Connection refused>)"),
    ({"status": 401, "json": {"error": "unauthorized"}, "msg": "HTTP Error 401: Unauthorized"},
     "the router's worker list could not be read (status 401: HTTP Error 401: Unauthorized)"),
    ({"status": 200, "json": {"detail": "no list"}}, "the router's worker list could not be read (status 200: no answer)"),
])
def test_an_unreadable_list_is_no_verdict_on_any_worker(answer, note):
    assert worker_view(EXPECTED, answer) == {"read": False, "missing": [], "extra": [], "healthy": [], "unhealthy": [],
                                             "draining": [], "ids": [], "drift": [], "notes": [note]}


@pytest.mark.parametrize("listed, routed", [
    ([("http://10.0.0.2:30000", True)], True),
    # Listed, but the router's health checks found the engine down: it routed nothing there.
    ([("http://10.0.0.2:30000", False)], False),
    # Not listed (a node new to the fleet, or left out by an earlier run): nothing to drain.
    ([("http://10.0.0.1:30000", True)], False),
])
def test_a_node_leaving_the_router_drains_only_where_the_router_routed_to_it(listed, routed):
    """sglang_service's drain waits for requests in flight only where this view of the node
    lists it as healthy (roles/sglang_service/tasks/router_out.yml)."""
    assert (worker_view(["http://10.0.0.2:30000"], _listed(*listed))["healthy"] != []) is routed


def test_the_version_and_policy_are_the_settings_tables():
    """Judged once, with every router setting (plugins/plugin_utils/settings.py), not again here."""
    assert release(dict(INPUTS, version="latest", policy="fastest"), workers(ENGINES, ["node1"], "router", HOSTS))[
        "problems"] == []
    assert settings.problems({"sglang_router_version": "latest", "sglang_router_policy": "fastest"}) == [
        "sglang_router_version: must be an exact release such as 0.5.23, got 'latest'.",
        "sglang_router_policy: must be one of cache_aware, round_robin, random, power_of_two, got 'fastest'."]


def test_a_release_without_wheel_hashes_is_refused():
    got = release(dict(INPUTS, version="0.3.1", hashes=[]), workers(ENGINES, ["node1"], "router", HOSTS))
    assert got["problems"] == [
        "sglang_router: smg 0.3.1 has no wheel hash in the collection, and the router is never installed"
        " unchecked: set sglang_router_sha256 to its wheels' sha256. Nothing was changed."]


def test_the_default_release_has_its_wheel_hashes_in_the_collection():
    import yaml  # pylint: disable=import-outside-toplevel

    from conftest import ROOT  # pylint: disable=import-outside-toplevel
    role = ROOT / "roles" / "sglang_router"
    default = yaml.safe_load((role / "defaults" / "main.yml").read_text())["sglang_router_version"]
    known = yaml.safe_load((role / "vars" / "main.yml").read_text())["__sglang_router_known_sha256"]
    assert len(known[default]) == 4
    assert settings.problems({"sglang_router_sha256": known[default]}) == []


@pytest.mark.parametrize("spelled, normal", [
    ("http://10.0.0.2:30000", "http://10.0.0.2:30000"),
    ("HTTP://Node-2.LAN:30000/", "http://node-2.lan:30000"),
    ("http://node-2", "http://node-2:80"),
    ("https://router.example/", "https://router.example:443"),
    ("http://[FD00:0:0::2]:30000", "http://[fd00::2]:30000"),
    ("http://[fd00::2]", "http://[fd00::2]:80"),
    ("not a url/", "not a url"),
])
def test_worker_urls_are_compared_normalised(spelled, normal):
    assert normal_url(spelled) == normal


def test_a_worker_the_router_spells_another_way_is_the_same_worker_and_a_second_entry_is_a_stray():
    """The router keeps a worker under the URL it was given: a node leaving it deletes every
    entry of its own (ids), and the router role takes a second one out as a stray."""
    wanted = ["http://10.0.0.2:30000", "http://[fd00::3]:30000"]
    got = worker_view(wanted, _listed(("http://10.0.0.2:30000/", True), ("HTTP://10.0.0.2:30000", True),
                                      ("http://[FD00::3]:30000", False)))
    assert (got["missing"], got["healthy"], got["unhealthy"]) == ([], [wanted[0]], [wanted[1]])
    assert got["ids"] == ["w0", "w2", "w1"]
    assert got["extra"] == [{"url": "HTTP://10.0.0.2:30000", "id": "w1"}]
    assert got["drift"] == ["http://10.0.0.2:30000/ is among the router's workers again, as HTTP://10.0.0.2:30000"]


def test_a_worker_smg_is_draining_is_missing_and_its_entry_is_still_left_and_waited_for():
    """smg lists a removed worker as draining for a few seconds and refuses to add it again
    meanwhile (409): such a worker is missing (a converge adds it once it is gone), its entry is
    among the ids a leaving node waits on, and a draining stray is on its way out already."""
    answer = {"status": 200, "json": {"workers": [
        {"id": "w0", "url": "http://10.0.0.1:30000", "is_healthy": True, "status": "ready"},
        {"id": "w1", "url": "http://10.0.0.2:30000/", "is_healthy": False, "status": "draining"},
        {"id": "w2", "url": "http://10.0.0.2:30000", "is_healthy": False, "status": "draining"},
        {"id": "w3", "url": "http://10.0.0.9:30000", "is_healthy": False, "status": "draining"}]}}
    got = worker_view(EXPECTED[:2], answer)
    assert (got["missing"], got["draining"], got["healthy"], got["unhealthy"], got["extra"]) == (
        [EXPECTED[1]], [EXPECTED[1]], [EXPECTED[0]], [], [])
    assert got["ids"] == ["w0", "w1", "w2"]
    assert got["drift"] == [f"{EXPECTED[1]} is not among the router's workers"]
    assert got["notes"] == [f"{EXPECTED[0]}: healthy", f"{EXPECTED[1]}: draining (the router is letting go of it)"]


def test_each_router_gives_its_view_of_the_node_and_a_skipped_one_none():
    """sglang_service reads every router of sglang_service_router_urls (a looped uri task):
    each is drained, rejoined and noted on its own."""
    answers = [dict(_listed(("http://10.0.0.2:30000", True)), item="http://r1:30100"),
               {"status": -1, "msg": "Connection refused", "item": "http://r2:30100"},
               {"status": 401, "msg": "HTTP Error 401: Unauthorized", "item": "http://r3:30100"},
               {"skipped": True, "item": "http://r4:30100"}]
    got = views(answers, "http://10.0.0.2:30000")
    assert [(v["url"], v["status"], v["view"]["healthy"]) for v in got] == [
        ("http://r1:30100", 200, ["http://10.0.0.2:30000"]), ("http://r2:30100", -1, []), ("http://r3:30100", 401, [])]
    assert [v["note"] for v in got] == [
        "http://10.0.0.2:30000: healthy (the router at http://r1:30100)",
        "the router's worker list could not be read (status -1: Connection refused) (the router at http://r2:30100)",
        "the router's worker list could not be read (status 401: HTTP Error 401: Unauthorized) (the router at "
        "http://r3:30100)"]


def _switch_node(tmp_path):
    """The router's table as Ansible renders it, every path under tmp_path, laid out as written,
    with each file's text and the role's read of it."""
    import role_vars  # pylint: disable=import-outside-toplevel
    from ansible_collections.blackwell.sglang.plugins.module_utils.file_state import path_state  # pylint: disable=import-outside-toplevel

    rows = [dict(row, path=f"{tmp_path}{row['path']}") for row in role_vars.render("sglang_router", "__sglang_router_files")]
    text = {name: f"{name} as written\n" for name in ("sglang-router.env.j2", "sglang_router_launch.py", "sglang-router.service.j2")}
    for row in rows:
        if row.get("restart"):
            path = tmp_path / row["path"][len(str(tmp_path)) + 1:]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text[row.get("template") or row["source"]])
            path.chmod(int(row["mode"], 8))

    def read():
        found = {row["path"]: path_state(row["path"]) for row in rows if row.get("restart")}
        return {"paths": {path: dict(state, owner="root", group="root") if state["exists"] else state
                          for path, state in found.items()}}
    return rows, text, read


def test_the_router_switches_nothing_where_its_files_are_as_written(tmp_path):
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.router_plan import switch  # pylint: disable=import-outside-toplevel

    rows, text, read = _switch_node(tmp_path)
    assert switch(read(), rows, text) == []


def test_the_router_switches_each_of_its_start_files_that_differs_and_nothing_else(tmp_path):
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.router_plan import switch  # pylint: disable=import-outside-toplevel

    rows, text, read = _switch_node(tmp_path)
    unit, launcher = f"{tmp_path}/etc/systemd/system/sglang-router.service", f"{tmp_path}/usr/local/lib/sglang-router/sglang_router_launch.py"
    new = dict(text, **{"sglang-router.service.j2": "a unit naming another release\n"})
    assert switch(read(), rows, new) == [{"path": unit, "reason": f"{unit}: content differs"}]
    (tmp_path / launcher[len(str(tmp_path)) + 1:]).unlink()
    assert switch(read(), rows, new) == [{"path": launcher, "reason": f"{launcher} is missing"},
                                         {"path": unit, "reason": f"{unit}: content differs"}]
    # The secrets file is judged as the others are, in table order.
    env = f"{tmp_path}/etc/sglang-router/router.env"
    assert switch(read(), rows, dict(new, **{"sglang-router.env.j2": "SGLANG_ROUTER_API_KEY=sk-new\n"})) == [
        {"path": env, "reason": f"{env}: content differs"}, {"path": launcher, "reason": f"{launcher} is missing"},
        {"path": unit, "reason": f"{unit}: content differs"}]


def test_only_the_files_the_router_starts_from_can_be_a_switch():
    """pip's sources and the directories restart nothing: a change of them is no switch, and the
    rollback record keeps exactly the rows a switch can name."""
    import role_vars  # pylint: disable=import-outside-toplevel

    rows = role_vars.render("sglang_router", "__sglang_router_files")
    assert [row["path"] for row in rows if row.get("restart")] == [
        "/etc/sglang-router/router.env", "/usr/local/lib/sglang-router/sglang_router_launch.py",
        "/etc/systemd/system/sglang-router.service"]
    assert role_vars.render("sglang_router", "__sglang_router_start_secrets") == ["/etc/sglang-router/router.env"]


def test_a_router_table_off_the_schema_is_refused_before_anything_is_judged():
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.router_plan import switch  # pylint: disable=import-outside-toplevel

    with pytest.raises(ValueError, match=r"sglang_router's table, row 1 \(/etc/x\): unknown column 'restrat'"):
        switch({}, [{"path": "/etc/x", "mode": "0644", "source": "x", "restrat": True}], {"x": ""})

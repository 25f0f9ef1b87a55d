"""The fleet's Prometheus targets (plugins/plugin_utils/prometheus_plan.py): which hosts, at which
address and port, with which labels, and each refusal by its message."""
from __future__ import annotations

import json

import yaml

from ansible_collections.blackwell.sglang.plugins.filter.sglang_prometheus_targets import sglang_prometheus_targets
from ansible_collections.blackwell.sglang.plugins.plugin_utils.prometheus_plan import targets
from conftest import ROOT

# The roles' defaults, as playbooks/prometheus.yml reads them.
DEFAULTS = {}
for _role in ("sglang_service", "sglang_install", "sglang_router"):
    DEFAULTS.update(yaml.safe_load((ROOT / "roles" / _role / "defaults" / "main.yml").read_text()))
RTX = {"gpu": {"present": True, "count": 2, "gpus": [
    {"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition"},
    {"index": 1, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}]}}
ENGINES = {
    "node1": {"sglang_service_host": "0.0.0.0", "ansible_host": "10.0.0.1", "sglang_service_model_path": "/models/a",
              "ansible_facts": RTX},
    "node2": {"sglang_service_host": "192.168.1.2", "sglang_service_port": 8000, "sglang_service_model_path": "/m/b",
              "sglang_service_served_model_name": "bee", "sglang_install_version": "0.5.8"},
}
ROUTER = {"router": {"ansible_host": "10.0.0.9", "sglang_router_metrics_host": "0.0.0.0"}}


def engine(name, target, model, release, gpu_model):
    return {"targets": [target], "labels": {"job": "sglang", "instance": name, "model": model, "release": release,
                                            "gpu_model": gpu_model}}


def test_engines_and_the_router_with_their_labels():
    got = targets(dict(ENGINES, **ROUTER), ["node1", "node2"], ["router"], DEFAULTS)
    assert got == {"targets": [
        engine("node1", "10.0.0.1:30000", "/models/a", DEFAULTS["sglang_install_version"],
               "NVIDIA RTX PRO 6000 Blackwell Server Edition"),
        engine("node2", "192.168.1.2:8000", "bee", "0.5.8", "unknown"),
        {"targets": ["10.0.0.9:29000"], "labels": {"job": "sglang-router", "instance": "router"}}],
        "notes": [], "problems": []}
    # What the play writes parses back as the same list.
    assert json.loads(json.dumps(got["targets"], indent=4, sort_keys=True)) == got["targets"]


def test_the_default_port_and_release_are_the_roles_own():
    assert DEFAULTS["sglang_service_port"] == 30000 and DEFAULTS["sglang_router_metrics_port"] == 29000
    assert DEFAULTS["sglang_service_metrics_enabled"] is True


def test_the_worker_address_ipv6_and_mixed_gpus():
    mixed = {"gpu": {"present": True, "gpus": [{"name": "NVIDIA H100"}, {"name": "NVIDIA H200"}, {"name": "NVIDIA H100"}]}}
    hostvars = {"n": {"sglang_service_host": "::", "ansible_host": "fd00::3", "sglang_service_model_path": "/m",
                      "ansible_facts": mixed},
                "w": {"sglang_service_host": "0.0.0.0", "sglang_router_worker_address": "w.lan",
                      "sglang_service_model_path": "/m", "ansible_facts": {"gpu": {"present": False, "gpus": []}}},
                "r": {"sglang_router_metrics_host": "fd00::9", "sglang_router_metrics_port": "9100"}}
    got = targets(hostvars, ["n", "w"], ["r"], DEFAULTS)
    assert [(e["targets"], e["labels"].get("gpu_model")) for e in got["targets"]] == [
        (["[fd00::3]:30000"], "NVIDIA H100, NVIDIA H200"), (["w.lan:30000"], "none"), (["[fd00::9]:9100"], None)]


def test_the_prometheus_address_comes_first_for_engines_and_routers():
    hostvars = {"n": {"sglang_service_host": "0.0.0.0", "ansible_host": "127.0.0.1", "sglang_service_model_path": "/m",
                      "sglang_router_worker_address": "10.1.0.1", "sglang_prometheus_address": "n.metrics.lan"},
                "r": {"ansible_host": "127.0.0.1", "sglang_prometheus_address": "10.2.0.9"},
                "s": {"ansible_host": "10.2.0.10"}}
    got = targets(hostvars, ["n"], ["r", "s"], DEFAULTS)
    assert [e["targets"] for e in got["targets"]] == [["n.metrics.lan:30000"], ["10.2.0.9:29000"], ["10.2.0.10:29000"]]


def test_a_node_with_metrics_off_is_left_out():
    hostvars = dict(ENGINES, node2=dict(ENGINES["node2"], sglang_service_metrics_enabled=False))
    got = targets(hostvars, ["node1", "node2"], [], DEFAULTS)
    assert [e["labels"]["instance"] for e in got["targets"]] == ["node1"]
    hostvars = dict(ENGINES, node1=dict(ENGINES["node1"], sglang_service_metrics_enabled="no"))
    assert [e["labels"]["instance"] for e in targets(hostvars, ["node1", "node2"], [], DEFAULTS)["targets"]] == ["node2"]


def test_the_gpu_label_of_a_node_without_facts_stays_as_the_file_had_it():
    before = json.dumps([engine("node2", "192.168.1.2:8000", "bee", "0.5.8", "NVIDIA H200"),
                         engine("node1", "10.0.0.1:30000", "/models/a", "0.5.8", "stale")])
    got = targets(ENGINES, ["node1", "node2"], [], DEFAULTS, before)["targets"]
    # Facts win over the file; the file wins over unknown.
    assert [e["labels"]["gpu_model"] for e in got] == ["NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA H200"]
    # A file that is not one is read as none.
    for text in ("", "not json", "{}", "[1, {\"labels\": 2}]"):
        assert targets(ENGINES, ["node2"], [], DEFAULTS, text)["targets"][0]["labels"]["gpu_model"] == "unknown", text


def test_loopback_listeners_are_noted_not_refused():
    hostvars = {"node3": {"ansible_host": "10.0.0.3", "sglang_service_model_path": "/m"},
                "router": {"sglang_router_metrics_host": "127.0.0.1"}}
    got = targets(hostvars, ["node3"], ["router"], DEFAULTS)
    assert got["problems"] == []
    assert [e["targets"] for e in got["targets"]] == [["10.0.0.3:30000"], ["router:29000"]]
    assert got["notes"] == [
        "prometheus: the engine of node3 listens on 127.0.0.1 only, so Prometheus on another host cannot scrape "
        "10.0.0.3: set sglang_service_host to an address it reaches (with sglang_service_api_key), or scrape it from "
        "node3 itself.",
        "prometheus: the router on router serves its metrics on 127.0.0.1 only, so Prometheus on another host cannot "
        "scrape router: set sglang_router_metrics_host to an address it reaches, or scrape it from router itself."]


def test_the_router_serves_its_metrics_on_loopback_unless_a_site_says_otherwise():
    """Its metrics take no key: by default only the router's host reads them, and the targets
    file says so rather than list a target Prometheus elsewhere cannot scrape unnoticed."""
    assert DEFAULTS["sglang_router_metrics_host"] == "127.0.0.1"
    got = targets({"router": {"ansible_host": "10.0.0.9"}}, [], ["router"], DEFAULTS)
    assert got["problems"] == []
    assert got["notes"] == [
        "prometheus: the router on router serves its metrics on 127.0.0.1 only, so Prometheus on another host cannot "
        "scrape 10.0.0.9: set sglang_router_metrics_host to an address it reaches, or scrape it from router itself."]


def test_each_refusal_names_the_host_and_the_setting():
    hostvars = {"a": {"sglang_service_host": "0.0.0.0", "ansible_host": "10.0.0.1", "sglang_service_port": "http",
                      "sglang_service_model_path": "/m"},
                "b": {"sglang_service_host": "0.0.0.0", "ansible_host": "10.0.0.2", "sglang_install_version": ""},
                "c": {"sglang_service_host": "0.0.0.0", "ansible_host": "10.0.0.2", "sglang_service_model_path": "/m"},
                "d": {"sglang_service_host": "0.0.0.0", "ansible_host": "http://10.0.0.4",
                      "sglang_service_model_path": "/m"},
                "r": {"sglang_router_metrics_port": 70000}}
    got = targets(hostvars, ["a", "b", "c", "d"], ["r"], DEFAULTS)
    assert got["problems"] == [
        "prometheus: a's sglang_service_port is not a port number (1 to 65535), got 'http'. Nothing was written.",
        "prometheus: b sets neither sglang_service_served_model_name nor sglang_service_model_path, so its metrics "
        "have no model to be labelled with. Nothing was written.",
        "prometheus: b's sglang_install_version is empty; its metrics are labelled with the SGLang release. Nothing "
        "was written.",
        "prometheus: b and c would both be scraped at 10.0.0.2:30000; give each its own address "
        "(sglang_prometheus_address, sglang_router_worker_address or ansible_host) or port. Nothing was written.",
        "prometheus: d has no address Prometheus can scrape: 'http://10.0.0.4' (from its sglang_prometheus_address, "
        "sglang_router_worker_address, listen address, ansible_host or name) is not a host name or address. Nothing "
        "was written.",
        "prometheus: r's sglang_router_metrics_port is not a port number (1 to 65535), got '70000'. Nothing was "
        "written."]


def test_the_filter_takes_what_the_play_passes():
    got = sglang_prometheus_targets(ENGINES, ["node2"], None, DEFAULTS, None)
    assert got == {"targets": [engine("node2", "192.168.1.2:8000", "bee", "0.5.8", "unknown")], "notes": [],
                   "problems": []}
    assert sglang_prometheus_targets({}, [], [], None) == {"targets": [], "notes": [], "problems": []}

# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's Prometheus scrape targets, decided in one place.

``targets`` turns the inventory into the list a Prometheus ``file_sd_configs`` file holds: one
entry per engine whose metrics are on (its ``/metrics`` on the server's own port, labelled with
the model it serves, the SGLang release, its GPUs and its host), and one per router host (the
router's Prometheus port); the notes an operator should read (a target Prometheus cannot reach
from another host); and every reason the file cannot be written, each naming the host and the
setting. Plain Python without Ansible imports: the filter blackwell.sglang.sglang_prometheus_targets
calls it, the unit tests too.

A host's ``sglang_prometheus_address`` is the address Prometheus scrapes it at, where that is
not the one the rules below find (an engine: the address the router reaches it at; a router: the
one its metrics listen on, else its ``ansible_host``, else its name).

Host variables that the inventory does not set come from the roles' defaults (``defaults``), as
the roles themselves would see them; the GPU name comes from the node's gathered ``gpu`` facts
(blackwell.sglang.gpu_facts), else from the file as it was, else ``unknown``: a run that did not
gather a node's facts leaves its label, and so its time series, as they were.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.blackwell.sglang.plugins.plugin_utils.router_plan import engine_address, host_port, loopback
from ansible_collections.blackwell.sglang.plugins.plugin_utils.settings import truthy

ENGINE_JOB = "sglang"
ROUTER_JOB = "sglang-router"
UNKNOWN = "unknown"
# What Prometheus cannot take for the host part of a target: whitespace, a path or a scheme, a
# user part.
_BAD_ADDRESS = re.compile(r"[\s/@]|^$")


def _text(value):
    return "" if value is None else str(value)


def _setting(found, defaults, name):
    return found[name] if name in found else defaults.get(name)


def _port(value):
    text = _text(value).strip()
    if isinstance(value, bool) or not re.match(r"^[0-9]+$", text) or not 1 <= int(text) <= 65535:
        return None
    return int(text)


def gpu_model(found):
    """The names of the node's GPUs from its gathered gpu facts, each once, in index order
    (one name on a uniform box); None without facts, 'none' when the facts found no GPU."""
    facts = found.get("ansible_facts") or {}
    gpu = facts.get("gpu") if isinstance(facts, dict) else None
    if not isinstance(gpu, dict):
        return None
    names = []
    for item in gpu.get("gpus") or []:
        name = _text(item.get("name") if isinstance(item, dict) else "").strip()
        if name and name not in names:
            names.append(name)
    return ", ".join(names) if names else "none"


def previous_labels(text):
    """(job, instance) -> labels, from the file as it was; nothing from a file that is not one."""
    try:
        entries = json.loads(text or "[]")
    except ValueError:
        return {}
    found = {}
    for entry in entries if isinstance(entries, list) else []:
        labels = entry.get("labels") if isinstance(entry, dict) else None
        if isinstance(labels, dict):
            found[(labels.get("job"), labels.get("instance"))] = labels
    return found


def targets(hostvars, engines, routers, defaults, previous=""):
    """The file's entries (``targets``: engines in the order given, then routers), ``notes``
    and ``problems``. ``hostvars`` maps each host to its variables, ``engines`` and ``routers``
    are the hosts of the groups sglang_nodes and sglang_router, ``defaults`` the roles' defaults
    and ``previous`` the file's text as it was ('' when there is none)."""
    defaults = defaults or {}
    before = previous_labels(previous)
    entries, notes, problems, seen = [], [], [], {}

    def add(name, job, address, port_name, port_value, labels):
        port = _port(port_value)
        if port is None:
            problems.append("prometheus: %s's %s is not a port number (1 to 65535), got '%s'. Nothing was written."
                            % (name, port_name, _text(port_value)))
            return
        if _BAD_ADDRESS.search(address):
            problems.append("prometheus: %s has no address Prometheus can scrape: '%s' (from its "
                            "sglang_prometheus_address, sglang_router_worker_address, listen address, ansible_host or "
                            "name) is not a host name or address. Nothing was written." % (name, address))
            return
        target = host_port(address, port)
        if target in seen:
            problems.append("prometheus: %s and %s would both be scraped at %s; give each its own address "
                            "(sglang_prometheus_address, sglang_router_worker_address or ansible_host) or port. "
                            "Nothing was written." % (seen[target], name, target))
            return
        seen[target] = name
        entries.append({"targets": [target], "labels": dict(labels, job=job, instance=_text(name))})

    for name in engines or []:
        found = hostvars.get(name) or {}
        if not truthy(_setting(found, defaults, "sglang_service_metrics_enabled")):
            continue
        model = _text(_setting(found, defaults, "sglang_service_served_model_name")
                      or _setting(found, defaults, "sglang_service_model_path"))
        release = _text(_setting(found, defaults, "sglang_install_version"))
        if not model:
            problems.append("prometheus: %s sets neither sglang_service_served_model_name nor "
                            "sglang_service_model_path, so its metrics have no model to be labelled with. Nothing "
                            "was written." % name)
        if not release:
            problems.append("prometheus: %s's sglang_install_version is empty; its metrics are labelled with the "
                            "SGLang release. Nothing was written." % name)
        gpus = gpu_model(found) or _text(before.get((ENGINE_JOB, _text(name)), {}).get("gpu_model")) or UNKNOWN
        listen = _text(_setting(found, defaults, "sglang_service_host"))
        worker_address = found.get("sglang_prometheus_address") or found.get("sglang_router_worker_address")
        address = engine_address({"sglang_service_host": listen, "sglang_router_worker_address": worker_address,
                                  "ansible_host": found.get("ansible_host")}, name)
        if loopback(listen) and not worker_address:
            notes.append("prometheus: the engine of %s listens on %s only, so Prometheus on another host cannot "
                         "scrape %s: set sglang_service_host to an address it reaches (with sglang_service_api_key), "
                         "or scrape it from %s itself." % (name, listen, address, name))
        add(name, ENGINE_JOB, address, "sglang_service_port", _setting(found, defaults, "sglang_service_port"),
            {"model": model, "release": release, "gpu_model": gpus})

    for name in routers or []:
        found = hostvars.get(name) or {}
        listen = _text(_setting(found, defaults, "sglang_router_metrics_host"))
        specific = listen not in ("0.0.0.0", "::", "") and not loopback(listen)
        address = _text(found.get("sglang_prometheus_address") or (listen if specific else "")
                        or found.get("ansible_host") or name)
        if loopback(listen):
            notes.append("prometheus: the router on %s serves its metrics on %s only, so Prometheus on another "
                         "host cannot scrape %s: set sglang_router_metrics_host to an address it reaches, or "
                         "scrape it from %s itself." % (name, listen, address, name))
        add(name, ROUTER_JOB, address, "sglang_router_metrics_port",
            _setting(found, defaults, "sglang_router_metrics_port"), {})

    return {"targets": entries, "notes": notes, "problems": problems}

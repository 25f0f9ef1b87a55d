# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the sglang_router role runs, decided in one place.

``workers`` turns the inventory into the router's worker list: each host of the group that
serves the model, reached at the address and port its engine listens on, and every reason the
list cannot be deployed (no worker at all, a worker the inventory does not know, an engine
listening on loopback while the router runs on another host). ``release`` spells the router's
launch arguments and names every problem of the settings. Plain Python without Ansible imports:
the filters call it, the unit tests too.

The router (PyPI ``smg``, the Shepherd Model Gateway, which took over from ``sglang-router``)
sends the key it is given for clients to its workers as well (``--api-key``, as smg 1.13.0
documents and does); the role therefore refuses a router key other than the engines' key.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re
from urllib.parse import urlsplit

from ansible_collections.blackwell.sglang.plugins.plugin_utils import managed
from ansible_collections.blackwell.sglang.plugins.plugin_utils.settings import secret, truthy

_LOOPBACK = re.compile(r"^127\.")
# What the role spells itself: given again in the extra arguments, the router's parser would keep
# the later one.
_OWNED = ("--api-key", "--worker-urls", "--host", "--port", "--policy", "--prometheus-host", "--prometheus-port",
          "--request-timeout-secs", "--shutdown-grace-period-secs")
# Flags whose value is a secret, or may hold one (a database URL's password), in smg 1.13.0:
# never in argv.
_SECRETS = ("--control-plane-api-keys", "--tenant-api-key", "--oracle-password", "--oracle-connect-descriptor",
            "--postgres-db-url", "--redis-url", "--mesh-tls-key")


def _text(value):
    return "" if value is None else str(value)


def normal_url(url):
    """A worker or router URL as the role compares it: the scheme and the host in lower case, an
    IPv6 address in brackets and in its shortest form, the scheme's default port spelled out, no
    trailing slash. The router keeps each worker under the URL it was given, so
    ``http://Node-2:30000/`` and ``http://node-2:30000`` are one worker; anything that is not an
    http(s) URL with a host is only stripped of its trailing slashes."""
    text = _text(url).strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return text.rstrip("/")
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return text.rstrip("/")
    host = parts.hostname.lower()
    try:
        host = ipaddress.ip_address(host).compressed
    except ValueError:
        pass
    return "%s://%s:%d%s" % (scheme, _url_host(host), port or (443 if scheme == "https" else 80),
                             parts.path.rstrip("/"))


def loopback(host):
    host = _text(host)
    return bool(_LOOPBACK.match(host)) or host in ("::1", "localhost")


def _url_host(address):
    """An address as a URL's host part: IPv6 literals in brackets."""
    address = _text(address)
    return "[%s]" % address if ":" in address and not address.startswith("[") else address


def engine_address(found, name, router_host=None):
    """The address others reach the engine of host ``name`` at, from its host variables
    ``found``: its ``sglang_router_worker_address``, else the address its engine listens on when
    that is one address (not 0.0.0.0 or ::), else its ``ansible_host``, else its name; loopback on
    ``router_host``, the host the engine runs on being the one that asks."""
    listen = _text(found.get("sglang_service_host", "127.0.0.1"))
    if loopback(listen) and name == router_host:
        return listen
    return _text(found.get("sglang_router_worker_address")
                 or (listen if listen not in ("0.0.0.0", "::", "") and not loopback(listen) else "")
                 or found.get("ansible_host") or name)


def host_port(address, port):
    """``address:port`` as a URL or a Prometheus target spells it: IPv6 literals in brackets."""
    return "%s:%s" % (_url_host(address), _text(port))


def worker_url(found, name, router_host=None):
    """The URL the router reaches the engine of host ``name`` at (engine_address), with its
    ``sglang_service_port`` (30000 by default)."""
    return "http://" + host_port(engine_address(found, name, router_host), found.get("sglang_service_port", 30000))


def workers(hostvars, names, router_host, inventory_hosts):
    """The router's workers from ``names`` (the hosts of the group that serves the model):
    ``urls`` (``http://<address>:<port>``, in the order given) and ``problems``. A worker's
    address is its ``sglang_router_worker_address``, else the address its engine listens on
    when that is one address (not 0.0.0.0 or ::), else its ``ansible_host``, else its name;
    its port is its ``sglang_service_port`` (30000 by default)."""
    urls, problems, unknown, looped, keys = [], [], [], [], set()
    for name in names or []:
        if name not in inventory_hosts:
            unknown.append(_text(name))
            continue
        found = hostvars.get(name) or {}
        listen = _text(found.get("sglang_service_host", "127.0.0.1"))
        if loopback(listen) and name != router_host:
            looped.append("%s (%s)" % (name, listen))
        urls.append(worker_url(found, name, router_host))
        key = _text(found.get("sglang_service_api_key", ""))
        keys.add(_text(secret(key)))
    if not names:
        problems.append("sglang_router: the router has no workers: sglang_router_workers (by default the hosts of "
                        "the group sglang_router_workers_group) names no host of the inventory. Put the engine nodes "
                        "in that group (or name another group). Nothing was changed.")
    if unknown:
        problems.append("sglang_router: sglang_router_workers names host(s) the inventory does not have: %s. Nothing "
                        "was changed." % ", ".join(unknown))
    if looped:
        problems.append("sglang_router: the engine of %s listens on loopback, where the router on %s cannot reach it. "
                        "Set sglang_service_host to an address the router reaches on those nodes (with "
                        "sglang_service_api_key), or run the router on the node itself. Nothing was changed."
                        % (", ".join(looped), router_host))
    if len(keys) > 1:
        problems.append("sglang_router: the workers' engines do not share one sglang_service_api_key; the router sends "
                        "one key to every worker. Their values are not shown. Nothing was changed.")
    # The workers' key, which the router takes for its own unless sglang_router_api_key names one.
    return {"urls": urls, "problems": problems, "key": sorted(keys)[0] if len(keys) == 1 else ""}


def release(inputs, worker_list, setting_problems=None):
    """The router's launch arguments (one argv word each; the key is never among them) and the
    problems of its settings, the worker list's included."""
    found = list(setting_problems or []) + list(worker_list.get("problems") or [])
    # The version's format and the policy's words are the settings table's (settings.TABLE), judged
    # with every other router setting before this plan (roles/sglang_router/tasks/validate.yml).
    if "hashes" in inputs and not inputs["hashes"]:
        found.append("sglang_router: smg %s has no wheel hash in the collection, and the router is never "
                     "installed unchecked: set sglang_router_sha256 to its wheels' sha256. Nothing was changed."
                     % _text(inputs["version"]))
    engine_key = _text(worker_list.get("key"))
    key = _text(inputs["api_key"]) or engine_key
    if "\n" in key or "\r" in key or "\x00" in key:
        # Named as the operator set it: the router's own key, else the workers' that it takes.
        found.append("sglang_router: %s holds a line break (one trailing line break is removed, nothing else is); it "
                     "would add lines to the secrets file. Its value is not shown. Nothing was changed."
                     % ("sglang_router_api_key" if _text(inputs["api_key"]) else
                        "the workers' sglang_service_api_key, which the router takes for its own,"))
    if key != engine_key:
        found.append("sglang_router: sglang_router_api_key differs from the workers' sglang_service_api_key; the "
                     "router sends the key its clients use to its workers too, so the two must be the same. Their "
                     "values are not shown. Nothing was changed.")
    if not key and not loopback(inputs["host"]) and not truthy(inputs["allow_unauthenticated"]):
        found.append("sglang_router: refusing to listen on %s:%s without an API key: anyone who reaches that address "
                     "could use the fleet's GPUs. Set sglang_router_api_key, listen on loopback, or set "
                     "sglang_router_allow_unauthenticated: true if only trusted clients can reach it. Nothing was "
                     "changed." % (inputs["host"], inputs["port"]))
    args = ["--host", _text(inputs["host"]), "--port", _text(inputs["port"]), "--policy", _text(inputs["policy"]),
            "--prometheus-host", _text(inputs["metrics_host"]), "--prometheus-port", _text(inputs["metrics_port"]),
            "--request-timeout-secs", _text(inputs["request_timeout"]),
            "--shutdown-grace-period-secs", _text(inputs["shutdown_grace"])]
    if worker_list.get("urls"):
        args += ["--worker-urls"] + list(worker_list["urls"])
    args += [_text(word) for word in inputs.get("extra_args") or []]
    for word in inputs.get("extra_args") or []:
        flag = re.sub(r"=.*$", "", _text(word))
        if not flag.startswith("--") or len(flag) < 3:
            continue
        # The router's parser takes an abbreviation as the flag it begins (--api-k for --api-key).
        owned = [name for name in _OWNED if name.startswith(flag)]
        if owned:
            found.append("sglang_router: sglang_router_extra_args gives %s, which the role spells from its own "
                         "settings (%s); set those instead. Nothing was changed." % (flag, ", ".join(owned)))
        elif any(name.startswith(flag) for name in _SECRETS):
            found.append("sglang_router: sglang_router_extra_args gives %s, which carries a secret: the unit and "
                         "the router's command line would show it to every user of the host. Nothing was changed."
                         % flag)
    # The key the secrets file holds (never logged: the role's set_fact is no_log).
    return {"args": args, "problems": found, "workers": list(worker_list.get("urls") or []), "api_key": key}


def worker_view(expected, answer):
    """The router's view of its workers against the list it should hold.

    ``expected`` is the worker list (``workers()``'s URLs); ``answer`` the router's
    ``GET /workers`` reply as the uri module returns it (``status``, ``json``). URLs are compared
    as ``normal_url`` spells them. Returns ``read`` (whether the router answered with its list),
    ``missing`` (expected, not listed), ``extra`` (listed, not expected, or a second entry of an
    expected worker: with their ids, which the admin API removes them by), ``healthy`` and
    ``unhealthy`` (expected and listed, as the router judges their health), ``draining``
    (expected workers the router lists only as being removed: smg keeps a removed worker for a
    few seconds with the status ``draining``; such a worker is missing, and cannot be added
    again until the router has let go of it), ``ids`` (the ids of every entry of the expected
    workers, second and draining entries included), ``drift`` (one line per missing or extra
    worker, its reason) and ``notes`` (one line per worker: its URL and the router's word for
    it). A draining entry of another URL is neither a worker nor a stray: it is on its way out."""
    answer = answer or {}
    listed = (answer.get("json") or {}).get("workers") if answer.get("status") == 200 else None
    if not isinstance(listed, list):
        reason = answer.get("msg") or "no answer"
        return {"read": False, "missing": [], "extra": [], "healthy": [], "unhealthy": [], "draining": [], "ids": [],
                "drift": [],
                "notes": ["the router's worker list could not be read (status %s: %s)"
                          % (answer.get("status", -1), _text(reason)[:200])]}
    # Compared as normal_url spells them; the first entry of a URL is the worker, a second entry
    # of the same worker (the URL spelled another way) is a stray.
    by_url, extra, leaving = {}, [], {}
    for worker in listed:
        if not (isinstance(worker, dict) and worker.get("url")):
            continue
        url = normal_url(worker["url"])
        entry = {"url": _text(worker["url"]), "id": _text(worker.get("id") or "")}
        if worker.get("status") == "draining":
            leaving.setdefault(url, []).append(entry["id"])
        elif url in by_url:
            entry["again"] = _text(by_url[url]["url"])
            extra.append(entry)
        else:
            by_url[url] = dict(worker, url=entry["url"], id=entry["id"])
    expected = [_text(url) for url in expected or []]
    wanted = set(normal_url(url) for url in expected)
    missing = [url for url in expected if normal_url(url) not in by_url]
    extra = sorted([{"url": worker["url"], "id": worker["id"]} for url, worker in by_url.items() if url not in wanted]
                   + extra, key=lambda item: (item["url"], item["id"]))
    healthy = [url for url in expected if normal_url(url) in by_url and by_url[normal_url(url)].get("is_healthy")]
    unhealthy = [url for url in expected if normal_url(url) in by_url and not by_url[normal_url(url)].get("is_healthy")]
    # Every entry the router holds for the expected workers, however spelled: what a node that
    # leaves the router deletes.
    ids = [by_url[normal_url(url)]["id"] for url in expected if normal_url(url) in by_url]
    ids += [item["id"] for item in extra if item.get("again") and normal_url(item["url"]) in wanted]
    draining = [url for url in expected if normal_url(url) in leaving]
    ids += [one for url in draining for one in leaving[normal_url(url)]]
    drift = ["%s is not among the router's workers" % url for url in missing]
    drift += [("%s is among the router's workers again, as %s" % (item["again"], item["url"])) if item.get("again") else
              "%s is among the router's workers, but no host of the group serves there" % item["url"] for item in extra]
    notes = []
    for url in expected:
        notes.append("%s: %s" % (url, "draining (the router is letting go of it)" if url in draining else
                                 "removed (not among the router's workers)" if url in missing else
                                 "healthy" if url not in unhealthy else "unhealthy"))
    notes += [("%s: listed again, as %s" % (item["again"], item["url"])) if item.get("again") else
              "%s: listed, not one of the group's workers" % item["url"] for item in extra]
    return {"read": True, "missing": missing, "extra": [{"url": item["url"], "id": item["id"]} for item in extra],
            "healthy": healthy, "unhealthy": unhealthy, "draining": draining, "ids": ids, "drift": drift,
            "notes": notes}


def views(answers, worker):
    """Each router's view of one engine node, from the ``GET /workers`` answers a looped uri
    task registered (``results``: each with its ``item``, the router's base URL): ``url``,
    ``status`` (the HTTP status, -1 where the router did not answer), ``view`` (worker_view of
    ``worker``, the node's worker URL) and ``note`` (its line for the drift report). A router
    the loop skipped is left out."""
    out = []
    for answer in answers or []:
        if not isinstance(answer, dict) or answer.get("skipped"):
            continue
        view = worker_view([worker], answer)
        status = answer.get("status", -1)
        out.append({"url": _text(answer.get("item")), "status": status if isinstance(status, int) else -1,
                    "view": view, "note": "%s (the router at %s)" % (view["notes"][0], _text(answer.get("item")))})
    return out


def switch(read, files, contents):
    """The restart rows of the router's table (``restart``: its secrets file, launcher and unit)
    that the node holds otherwise than the rows say, each ``{"path", "reason"}`` in table order;
    [] when a restart would start the router on what it runs from already. ``read`` is the role's
    read of the node (``paths``: blackwell.sglang.sglang_venv_info's reader), ``contents`` each
    file's text by template or source name. A rollout that switches these keeps the node's copies
    first (the rollback record), so that a router that fails its gate goes back to them."""
    paths = (read or {}).get("paths") or {}
    restart = [row for row in managed.check("sglang_router", files) if truthy(row.get("restart"))]
    rows = managed.in_force("sglang_router", restart, contents, contents)
    return [{"path": row["path"], "reason": reason} for row in rows for reason in [managed.off_in(row, paths)] if reason]

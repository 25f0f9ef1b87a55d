# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the cuda13 role does on a node, decided in one place.

``repository`` names the node's CUDA repository and what stops the host before anything is
read (a distribution or architecture NVIDIA publishes nothing for, a fingerprint that is no
fingerprint, a driver CUDA 13 cannot run on); ``plan`` turns the role's one read of the node
(blackwell.sglang.cuda_toolkit_info) into named steps, each with the reason the node is off,
and an empty list for a node that is as the role leaves it. The role's settings arrive without
their ``cuda13_`` prefix, together with the role's data from vars/main.yml; the files the role
manages arrive as rows of one table (``files``), their rendered content beside them. Pure
Python, no Ansible imports: the filters cuda13_repository and cuda13_plan call it, the unit
tests too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.blackwell.sglang.plugins.plugin_utils import managed
from ansible_collections.blackwell.sglang.plugins.plugin_utils.settings import truthy


def _version_tuple(text):
    return tuple(int(part) for part in re.findall(r"\d+", str(text)))


def repository(facts, gpu, inputs):
    """The node's CUDA repository (``distro``, ``arch``, ``name``, ``url``, ``key_url``,
    ``key_from_node``, ``key_source``, ``fingerprint``, ``legacy_list``, ``sources``) and
    ``problems``: what stops the host before anything is read or written."""
    name = str(facts.get("distribution", "")).lower()
    candidates = [name + str(facts.get("distribution_version", "")).replace(".", ""),
                  name + str(facts.get("distribution_major_version", ""))]
    repositories = inputs["repositories"]
    supported = sorted(repositories)
    distro = inputs.get("repo_distro") or next((c for c in candidates if c in repositories), "")
    # A path the table lacks (given as cuda13_repo_distro) has no known key: the settings name it.
    known = repositories.get(distro) or {"key_file": "", "fingerprint": ""}
    arches = inputs["repo_arches"]
    arch = arches.get(facts.get("architecture"), "")
    base = str(inputs["repo_base_url"]).rstrip("/")
    path = "%s/%s" % (distro, arch)
    key_url = inputs.get("repo_key_url") or ("%s/%s/%s" % (base, path, known["key_file"]) if known["key_file"] else "")
    content = inputs.get("repo_key_content") or ""
    fingerprint = re.sub(r"\s+", "", str(inputs.get("repo_key_fingerprint") or known["fingerprint"])).upper()
    repo = {
        "distro": distro, "arch": arch, "name": "cuda-%s-%s" % (distro, arch),
        "url": "%s/%s/" % (base, path), "key_url": key_url,
        "key_from_node": not content and key_url.startswith("file://"),
        "key_source": "cuda13_repo_key_content" if content else key_url,
        "fingerprint": fingerprint,
        "legacy_list": "/etc/apt/sources.list.d/cuda-%s-%s.list" % (distro, arch),
        "sources": "/etc/apt/sources.list.d/cuda-%s-%s.sources" % (distro, arch),
    }
    problems = []
    if not distro:
        problems.append(
            "cuda13: NVIDIA publishes no CUDA repository for %s %s; supported: %s (or set cuda13_repo_distro). "
            "Nothing was changed." % (facts.get("distribution"), facts.get("distribution_version"), ", ".join(supported)))
    if not arch:
        problems.append(
            "cuda13: NVIDIA publishes no CUDA repository for the %s architecture; supported: %s. Nothing was changed."
            % (facts.get("architecture"), ", ".join(arches)))
    if distro and not known["fingerprint"] and not (inputs.get("repo_key_fingerprint") and
                                                    (key_url or inputs.get("repo_key_content"))):
        problems.append(
            "cuda13: the role knows no signing key for the repository path %s (cuda13_repo_distro); set "
            "cuda13_repo_key_fingerprint and cuda13_repo_key_url (or cuda13_repo_key_content) for it. "
            "Nothing was changed." % distro)
    # The fingerprint's format is the settings table's (plugins/plugin_utils/settings.py).
    problems += _version_problems(inputs)
    if truthy(inputs["preflight_enabled"]) and not truthy(inputs["driver_manage"]) and gpu and gpu.get("present"):
        driver = gpu.get("driver_version")
        if driver is not None and _version_tuple(driver) < _version_tuple(inputs["driver_min_version"]):
            problems.append(
                "cuda13: NVIDIA driver %s is older than %s, the minimum for CUDA 13; install an R580 driver first "
                "(or set cuda13_driver_manage: true). Nothing was changed." % (driver, inputs["driver_min_version"]))
        if 12 in (gpu.get("capability_majors") or []) and gpu.get("kernel_module_open") is False:
            problems.append(
                "cuda13: GPUs with compute capability 12.x need NVIDIA's open kernel modules, and the loaded module is "
                "the proprietary one; install the open modules (nvidia-open) or set cuda13_driver_manage: true. "
                "Nothing was changed.")
    repo["problems"] = problems
    return repo


def _version_problems(inputs):
    """A release that is no 13.x, and a package pin that is not a version of that release."""
    version = str(inputs.get("version", ""))
    if not re.match(r"^13\.[0-9]+$", version):
        return ["cuda13: cuda13_version '%s' is not a CUDA 13.x release; give it as 13.<minor>, for example 13.0 or "
                "13.5. Nothing was changed." % version]
    pin = str(inputs.get("toolkit_version") or "")
    if pin and not pin.startswith(version + "."):
        return ["cuda13: cuda13_toolkit_version '%s' is not a version of CUDA %s (%s); pin one of its versions "
                "(%s.<patch>-<revision>) or leave it empty. Nothing was changed."
                % (pin, version, inputs["toolkit_package"], version)]
    return []


def _key_problems(key, repo):
    download = key.get("download") or {}
    status = download.get("status", 200)
    if status != 200:
        answer = "the server answered HTTP %s" % status if int(status) > 0 else "no connection"
        return ["cuda13: could not download the CUDA repository signing key from %s (%s). Set cuda13_repo_base_url "
                "to a mirror of NVIDIA's repositories that this node reaches, or cuda13_repo_key_url to a file:// "
                "path of the key on the node, or cuda13_repo_key_content to the ASCII-armored key itself. "
                "Nothing was changed." % (repo["key_url"], answer)]
    if key.get("fingerprints") != [repo["fingerprint"]]:
        return ["cuda13: the CUDA repository signing key from %s has the fingerprint %s, but "
                "cuda13_repo_key_fingerprint expects %s; refusing to trust it. Nothing was changed."
                % (repo["key_source"], ", ".join(key.get("fingerprints") or []), repo["fingerprint"])]
    return []


def file_rows(files, contents, key):
    """The table's rows in force, each with its content and its SHA-1: a template's as rendered
    (``contents``, by template name), the signing key's (``source: key``) as the read returned it."""
    return managed.in_force("cuda13", files, contents, {"key": key.get("armored", "")})


def plan(probe, repo, inputs, files, contents, check_mode=False):
    """The role's plan for one node from its read ``probe``: ``problems`` (the signing key is
    not the pinned one or could not be fetched: stop before any change), ``steps`` (``name``
    and ``reason``), ``step`` (the same, by name, for the tasks' conditions), and what each
    step acts on: ``files`` (the rows to write, create or remove), ``table`` (every row in force
    without its content: what a test tampers with), ``prerequisites``,
    ``toolkit`` (``installed``, ``judged``: whether apt can judge the install in a check),
    ``previous`` (12.x packages to remove), ``links`` (alternatives to select), ``alternatives``
    (every alternative the toolkit packages register, with the link it sets: the fact
    cuda13_links, which sglang_service switches back after a failed gate), ``nvcc``
    (whether the banner through the link is the wanted release) and ``cuda_moves`` (whether this
    run installs the toolkit or moves a link: the banner is read again after it)."""
    key = probe.get("key") or {}
    problems = _key_problems(key, repo)
    steps = []

    def step(name, reason):
        steps.append({"name": name, "reason": reason})

    paths = probe.get("paths") or {}
    rows = file_rows(files, contents, key)
    to_write = []
    for row in rows:
        reason = managed.off_in(row, paths)
        if reason:
            to_write.append(dict(row, reason=reason))
    packages = probe.get("packages") or {}
    installed = set(name for name, found in packages.items() if found.get("installed"))
    prerequisites = [p for p in inputs["prerequisites"] if p not in installed]
    toolkit = packages.get(inputs["toolkit_package"]) or {}
    version = toolkit.get("version", "") if toolkit.get("installed") else ""
    pinned = inputs.get("toolkit_version") or ""
    hold = truthy(inputs["toolkit_hold"])
    moves = not version or (pinned and version != pinned)
    previous = sorted(name for name in installed if re.fullmatch(inputs["previous_toolkit_pattern"], name))
    if inputs["previous_toolkits"] != "remove":
        previous = []
    alternatives = probe.get("alternatives") or {}
    tree = inputs["toolkit_dir"]
    link_items = [{"name": "cuda", "link": inputs["home"]},
                  {"name": "cuda-13", "link": re.sub(r"\.[0-9]+$", "", tree)}]
    links_off = [item for item in link_items if alternatives.get(item["name"], "") != tree]
    nvcc_ok = inputs["nvcc_release"] in ((probe.get("nvcc") or {}).get("output") or "")

    for kind in ("directory", "file", "absent"):
        for row in to_write:
            if row["state"] == kind:
                step("file", row["reason"])
    # A check run does not refresh apt's package lists, so the install is judged only where they
    # already know the repository: from a row marked apt_source that the node has and this run
    # does not rewrite (the role's sources file as it stands, or cuda-keyring's list, which is
    # removed only after the lists were made from it).
    written = set(row["path"] for row in to_write if row["state"] != "absent")
    apt_knows = any(row.get("apt_source") and (paths.get(row["path"]) or {}).get("exists")
                    and row["path"] not in written for row in files)
    if prerequisites:
        step("prerequisites", "missing: %s" % ", ".join(prerequisites))
    if moves:
        step("toolkit", "%s is not installed" % inputs["toolkit_package"] if not version
             else "%s %s is installed, %s is pinned" % (inputs["toolkit_package"], version, pinned))
    elif version and bool(toolkit.get("held")) != hold:
        step("hold", "%s is %s" % (inputs["toolkit_package"], "held" if toolkit.get("held") else "not held"))
    if previous:
        step("previous", "12.x packages installed: %s" % ", ".join(previous))
    # After this run installs the toolkit its packages select the links; both are set then. A
    # check on a node without the tree yet has the install to report already.
    if moves and not check_mode:
        links = link_items
    elif check_mode and not probe.get("tree_exists"):
        links = []
    else:
        links = links_off
    for item in links:
        target = alternatives.get(item["name"]) or "nothing"
        step("links", "%s is selected again after the toolkit moves" % item["link"] if target == tree
             else "%s points at %s, not %s" % (item["link"], target, tree))
    # What the link leads to changes with this run: the libraries behind it and nvcc's banner
    # (read again after the run, and not judged in a check).
    cuda_moves = bool(moves or links)
    # The cache follows the linker path's file, and the libraries behind the link: a toolkit or
    # link that moves refreshes it too, so that a run that failed after writing the file still
    # leaves the next one a reason to refresh.
    if any(row.get("refresh") == "ldconfig" for row in to_write):
        step("ldconfig", "the linker path changed")
    elif cuda_moves and any(row.get("refresh") == "ldconfig" for row in rows):
        step("ldconfig", "the libraries behind %s move" % inputs["home"])
    verify = truthy(inputs["verify_enabled"])
    if verify and (not nvcc_ok or cuda_moves):
        step("verify", "nvcc through %s does not report %s" % (inputs["home"], inputs["nvcc_release"].rstrip(","))
             if not nvcc_ok else "the toolkit or its links move")
    if truthy(inputs["driver_manage"]):
        # The driver's own state (installed against loaded module) is read by its steps only.
        step("driver", "cuda13_driver_manage is on")
    return dict(managed.plan_head(problems, steps, to_write, rows), **{
        "prerequisites": prerequisites,
        "toolkit": {"installed": version, "moves": bool(moves),
                    "judged": not prerequisites and apt_knows},
        "previous": previous,
        "apt_judged": not prerequisites,
        "links": links,
        "alternatives": link_items,
        "nvcc": nvcc_ok,
        "cuda_moves": cuda_moves,
    })

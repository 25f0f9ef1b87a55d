#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_venv_info
short_description: Read what an SGLang venv holds, in one pass and without importing anything
version_added: 0.1.0
description:
  - Reports whether a virtual environment exists, which SGLang distributions it holds and their
    release (from the C(sglang-*.dist-info/METADATA) file), where the C(sglang) package lives,
    whether that release ships the torch symmetric-memory communicator, and the text of torch's
    C(torch/version.py) (the CUDA build torch was made for).
  - Optionally also reports an interpreter (exists, executable), the uv release installed in
    a separate venv, an account and a group as the system's user and group databases hold
    them, the state (type, mode, owner, SHA-1) of further paths, the text of small files, and
    the launch flags the release's server accepts, read from its source.
  - Optionally checks the SGLang distribution (and uv's, in O(uv_venv)) against its C(RECORD)
    for the files missing or altered since the installer wrote them, so that a half-installed
    or altered release is not taken for an installed one.
  - Nothing is imported from the venv; importing SGLang would pull in torch and CUDA.
  - Read-only; one call replaces the find, stat and slurp round trips the roles would need.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  venv:
    description:
      - The SGLang virtual environment; its packages are looked up under
        C(lib/python3*/site-packages).
    type: path
    required: true
  python:
    description:
      - An interpreter to report on in RV(python) (for example the one the venv is built from).
    type: path
  uv_venv:
    description:
      - A venv holding uv; its uv release is reported in RV(uv_version).
    type: path
  paths:
    description:
      - Further paths (the venv's parent directory, the service account's home, the files the
        role writes) whose type, mode, ownership and, for a regular file, content checksum are
        reported in RV(paths), so the caller can skip a C(file), C(copy) or C(template) task
        for a path that already matches. A symbolic link is reported as the link, with its
        target.
    type: list
    elements: path
    default: []
  contents:
    description:
      - Small text files (a record the role keeps on the node) whose content is returned in
        RV(contents), so the caller needs no M(ansible.builtin.slurp) of its own.
    type: list
    elements: path
    default: []
  server_flags:
    description:
      - Also read the launch flags of the SGLang release in the venv from its source, as
        M(blackwell.sglang.sglang_server_flags) does, into RV(server_flags), so that a role
        deploying the release needs no second read of the venv.
    type: bool
    default: false
  releases:
    description:
      - A directory of releases, one venv per subdirectory; its subdirectories are listed in
        RV(releases), newest first.
    type: path
  record:
    description:
      - Also check the SGLang distribution, and uv's where O(uv_venv) is set, against the
        C(RECORD) its installer wrote (every file's SHA-256 and size), into RV(sglang_record)
        and RV(uv_record).
      - The two files the SM120 patch (M(blackwell.sglang.sglang_capmap)) edits are checked as
        their text with the patch's own marked entries taken out, and their bytecode not at
        all; missing bytecode elsewhere is not counted either (it is derived from its verified
        source, and the patch deletes it). An entry without a digest cannot be checked.
      - Every file is hashed on every read (SGLang 0.5.8, 1,714 entries and 22 MB of source,
        0.05 to 0.13 s of CPU).
    type: bool
    default: false
  distributions:
    description:
      - Other distributions installed in O(venv) to report on in RV(distributions), by their
        dist-info name (V(smg) for the router's release); with O(record=true) each
        is also checked against its C(RECORD), as SGLang's is.
    type: list
    elements: str
    default: []
  versions:
    description:
      - Distributions in O(venv) whose release alone is reported in RV(versions), from their
        METADATA, without a check of their files (V(nvidia-nccl-cu13) for the NCCL torch loads,
        whose library is hundreds of MB). The dist-info directory is looked up with C(-) and
        C(.) in the name written as C(_), in the case given.
    type: list
    elements: str
    default: []
  rollback_record:
    description:
      - The rollback record of a rollout (M(blackwell.sglang.sglang_rollback)) whose release
        RV(releases) marks as C(rollback_target).
    type: path
    default: /var/lib/blackwell-sglang/rollback
  user:
    description:
      - An account (the service account) to report on in RV(user), so the caller can skip an
        M(ansible.builtin.user) task for an account that is already as it would be made.
    type: str
  group:
    description:
      - A group to report on in RV(group), so the caller can skip an M(ansible.builtin.group)
        task for a group that exists already.
    type: str
attributes:
  check_mode:
    support: full
    description: Reads only; behaves the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
"""

EXAMPLES = r"""
- name: Read the SGLang venv
  blackwell.sglang.sglang_venv_info:
    venv: /opt/sglang/releases/0.5.23
    python: /usr/bin/python3
    uv_venv: /opt/sglang/uv
    user: sglang
    group: sglang
  register: sglang_venv

- name: Show the installed release
  ansible.builtin.debug:
    msg: "SGLang {{ sglang_venv.sglang_version }} in {{ sglang_venv.site_packages }}"
"""

RETURN = r"""
venv:
  description: The venv asked about (O(venv)), so a registered result says what it describes.
  returned: always
  type: str
  sample: /opt/sglang/releases/0.5.23
venv_exists:
  description: Whether O(venv) holds a C(pyvenv.cfg).
  returned: always
  type: bool
site_packages:
  description: >-
    The venv's site-packages directory (the one holding SGLang when there are several); empty
    when there is none.
  returned: always
  type: str
  sample: /opt/sglang/releases/0.5.23/lib/python3.11/site-packages
sglang_dist_infos:
  description: Every C(sglang-*.dist-info) directory in the venv's site-packages, sorted.
  returned: always
  type: list
  elements: str
sglang_version:
  description: >-
    The C(Version) field of the SGLang METADATA when the venv holds exactly one SGLang
    distribution; empty otherwise.
  returned: always
  type: str
  sample: 0.5.18
sglang_package:
  description: Directory of the C(sglang) package; empty when there is none.
  returned: always
  type: str
torch_symm_mem:
  description: >-
    Whether the SGLang package ships
    C(srt/distributed/device_communicators/torch_symm_mem.py) (releases after 0.5.4 do).
  returned: always
  type: bool
torch_version_source:
  description: Text of C(torch/version.py) in the same site-packages; empty when torch is absent.
  returned: always
  type: str
python:
  description: The interpreter given in O(python).
  returned: when O(python) is set
  type: dict
  contains:
    path:
      description: The path asked about.
      type: str
    exists:
      description: Whether it exists.
      type: bool
    executable:
      description: Whether it is a file this user may execute.
      type: bool
paths:
  description: >-
    One entry per path in O(paths), keyed by the path: C(exists), C(isdir), C(mode) (four octal
    digits), C(owner) and C(group) (names, or numeric ids without a name). Only C(exists) when
    the path does not exist. A symbolic link has C(islink) true and its target in C(link);
    C(mode), C(owner) and C(group) are then the link's own. A regular file also has
    C(checksum), the SHA-1 of its content (as M(ansible.builtin.copy) and
    M(ansible.builtin.template) compare it), so the caller can skip writing a file that is
    already as it would be written.
  returned: always
  type: dict
  sample: {"/opt/sglang": {"exists": true, "isdir": true, "islink": false, "mode": "0755", "owner": "root", "group": "root"}}
contents:
  description: >-
    The text of each file in O(contents), keyed by its path (decoded as UTF-8, undecodable bytes
    replaced); null for a file that does not exist or cannot be read.
  returned: always
  type: dict
  sample: {"/etc/sglang/tp-size": "8\n"}
server_flags:
  description: >-
    The release's launch flags and what follows from them, as
    M(blackwell.sglang.sglang_server_flags) returns them (C(version), C(flags), C(deprecated),
    C(fusion_arguments), C(fusion_sm_restricted), C(pcie_ipc_allreduce), C(ready_endpoint),
    C(package_dir));
    null when they could not be read (see RV(server_flags_error)).
  returned: when O(server_flags=true)
  type: dict
  sample: {"version": "0.5.8", "flags": ["--enable-torch-symm-mem", "--model-path"], "fusion_arguments": ["--enable-flashinfer-allreduce-fusion"]}
server_flags_error:
  description: Why the flags could not be read (no SGLang in the venv, a source it cannot parse); null otherwise.
  returned: when O(server_flags=true)
  type: str
releases:
  description: >-
    The subdirectories of O(releases) (not links), newest modification first: C(path), C(name),
    C(mtime) (seconds since the epoch), C(running) (a process on the node runs the release's
    interpreter) and C(rollback_target) (the rollback record at O(rollback_record) names it).
    Empty when the directory does not exist.
  returned: when O(releases) is set
  type: list
  elements: dict
  sample: [{"path": "/opt/sglang/releases/0.5.23", "name": "0.5.23", "mtime": 1796000000.0, "running": true,
            "rollback_target": false}]
sglang_record:
  description: >-
    The SGLang distribution against its C(RECORD) (see O(record)) - C(checked) (entries with a
    digest), C(missing) and C(altered) (counts), C(missing_paths) and C(altered_paths) (the first
    five of each, relative to site-packages) and C(error) (the dist-info has no readable
    C(RECORD): the release is incomplete as a whole). Null when the venv holds no single SGLang
    distribution.
  returned: when O(record=true)
  type: dict
  sample: {"checked": 1710, "missing": 2, "altered": 0, "missing_paths": ["sglang/lang/api.py", "sglang/lang/ir.py"],
           "altered_paths": [], "error": ""}
uv_record:
  description: uv's distribution in O(uv_venv) against its C(RECORD), as RV(sglang_record); null without a single uv distribution.
  returned: when O(record=true) and O(uv_venv) is set
  type: dict
  sample: {"checked": 5, "missing": 0, "altered": 1, "missing_paths": [], "altered_paths": ["../../../bin/uv"], "error": ""}
distributions:
  description: >-
    Each distribution named in O(distributions), by name - C(version) (empty when the venv holds
    no single distribution of that name), and with O(record=true) C(record) (as
    RV(sglang_record); null without a single distribution) and C(off) (why its files are not as
    its installer left them, one clause naming the first files missing or altered; empty when
    they are, or when there is no distribution to check).
  returned: when O(distributions) is set
  type: dict
  sample: {"smg": {"version": "1.13.0", "off": "smg 1.13.0 in /opt/sglang-router/1.13.0 differs from its
           RECORD: 1 file altered (smg/launch_router.py)", "record": {"checked": 17, "missing": 0, "altered": 1,
           "missing_paths": [], "altered_paths": ["smg/launch_router.py"], "error": ""}}}
versions:
  description: >-
    The release of each distribution named in O(versions), by the name given; empty when the
    venv holds no single distribution of that name.
  returned: when O(versions) is set
  type: dict
  sample: {"nvidia-nccl-cu13": "2.31.2"}
uv_venv_exists:
  description: Whether O(uv_venv) holds a C(pyvenv.cfg).
  returned: when O(uv_venv) is set
  type: bool
uv_version:
  description: >-
    Release of the uv distribution installed in O(uv_venv); empty when there is none or the
    venv does not exist.
  returned: when O(uv_venv) is set
  type: str
  sample: 0.13.9
user:
  description: >-
    The account named in O(user), from the user database: C(name) and C(exists); when it
    exists also C(uid), C(group) (the name of its primary group, or the numeric id without a
    name), C(home) and C(shell).
  returned: when O(user) is set
  type: dict
  sample: {"name": "sglang", "exists": true, "uid": 999, "group": "sglang", "home": "/var/lib/sglang", "shell": "/usr/sbin/nologin"}
group:
  description: >-
    The group named in O(group), from the group database: C(name), C(exists) and, when it
    exists, C(gid).
  returned: when O(group) is set
  type: dict
  sample: {"name": "sglang", "exists": true, "gid": 999}
"""

import glob
import grp
import os
import pwd
import re
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import capmap, dist_record, file_state, rollback_record
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_server_args import ReleaseScanError, scan_release

COMMUNICATOR = "srt/distributed/device_communicators/torch_symm_mem.py"
_VERSION = re.compile(r"^Version:[ \t]*(\S+)", re.M)


def _text(path):
    """A file's text; None when it does not exist or cannot be read."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return None


def _read(path):
    return _text(path) or ""


def _site_packages(venv):
    return sorted(p for p in glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))
                  if os.path.isdir(p))


def _dist_infos(site_dirs, name):
    found = []
    for site in site_dirs:
        found.extend(p for p in glob.glob(os.path.join(site, name + "-*.dist-info"))
                     if os.path.isdir(p))
    return sorted(found)


def _version(dist_info):
    match = _VERSION.search(_read(os.path.join(dist_info, "METADATA")))
    return match.group(1) if match else ""


def _releases(directory, record_path):
    found = []
    try:
        names = os.listdir(directory)
    except OSError:
        return found
    running = file_state.running_venvs()
    try:
        record = rollback_record.read(record_path) or {}
    except rollback_record.RecordError:
        record = {}
    target = record.get("release") or ""
    for name in names:
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            found.append({"path": path, "name": name, "mtime": st.st_mtime,
                          "running": os.path.realpath(path) in running,
                          "rollback_target": bool(target) and os.path.realpath(path) == os.path.realpath(target)})
    return sorted(found, key=lambda r: (r["mtime"], r["name"]), reverse=True)


def _account(name):
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return {"name": name, "exists": False}
    return {"name": name, "exists": True, "uid": entry.pw_uid, "group": file_state.group_name(entry.pw_gid),
            "home": entry.pw_dir, "shell": entry.pw_shell}


def _group(name):
    try:
        return {"name": name, "exists": True, "gid": grp.getgrnam(name).gr_gid}
    except KeyError:
        return {"name": name, "exists": False}


def _server_flags(package):
    """(the release's flags as sglang_server_flags reports them, or None; why not)."""
    if not package:
        return None, "no sglang package in the venv"
    try:
        return scan_release(package), None
    except ReleaseScanError as exc:
        return None, str(exc)


def _distribution(venv, site_dirs, name, record):
    """One more distribution of the venv: its version, and with RECORD its files as installed."""
    dists = _dist_infos(site_dirs, name)
    version = _version(dists[0]) if len(dists) == 1 else ""
    found = {"version": version}
    if record:
        found["record"] = dist_record.verify(os.path.dirname(dists[0]), dists[0]) if len(dists) == 1 else None
        found["off"] = dist_record.describe(found["record"], "%s %s in %s" % (name, version, venv))
    return found


def venv_info(venv, python=None, uv_venv=None, paths=(), releases=None, user=None, group=None, contents=(),
              server_flags=False, rollback_path=rollback_record.DEFAULT_PATH, record=False, distributions=(),
              versions=()):
    """Everything the roles need to know about the venv; reads files only."""
    site_dirs = _site_packages(venv)
    dists = _dist_infos(site_dirs, "sglang")
    site = os.path.dirname(dists[0]) if dists else (site_dirs[0] if site_dirs else "")
    package = os.path.join(site, "sglang") if site else ""
    if package and not os.path.isdir(package):
        package = ""
    torch_version = os.path.join(site, "torch", "version.py") if site else ""
    result = {
        "venv": venv,
        "venv_exists": os.path.isfile(os.path.join(venv, "pyvenv.cfg")),
        "site_packages": site,
        "sglang_dist_infos": dists,
        "sglang_version": _version(dists[0]) if len(dists) == 1 else "",
        "sglang_package": package,
        "torch_symm_mem": bool(package) and os.path.isfile(os.path.join(package, COMMUNICATOR)),
        "torch_version_source": _read(torch_version) if torch_version else "",
        "paths": dict((p, file_state.path_state(p)) for p in paths),
        "contents": dict((p, _text(p)) for p in contents),
    }
    if record:
        result["sglang_record"] = (dist_record.verify(site, dists[0], capmap.record_derived())
                                   if len(dists) == 1 else None)
    if distributions:
        result["distributions"] = dict((name, _distribution(venv, site_dirs, name, record)) for name in distributions)
    if versions:
        result["versions"] = dict((name, _distribution(venv, site_dirs, re.sub(r"[-_.]+", "_", name), False)["version"])
                                  for name in versions)
    if python:
        result["python"] = {"path": python, "exists": os.path.exists(python),
                            "executable": os.path.isfile(python) and os.access(python, os.X_OK)}
    if uv_venv:
        uv = _distribution(uv_venv, _site_packages(uv_venv), "uv", record)
        result["uv_venv_exists"] = os.path.isfile(os.path.join(uv_venv, "pyvenv.cfg"))
        result["uv_version"] = uv["version"]
        if record:
            result["uv_record"] = uv["record"]
    if server_flags:
        result["server_flags"], result["server_flags_error"] = _server_flags(package)
    if releases:
        result["releases"] = _releases(releases, rollback_path)
    if user:
        result["user"] = _account(user)
    if group:
        result["group"] = _group(group)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path", required=True),
            python=dict(type="path"),
            uv_venv=dict(type="path"),
            paths=dict(type="list", elements="path", default=[]),
            releases=dict(type="path"),
            user=dict(type="str"),
            group=dict(type="str"),
            contents=dict(type="list", elements="path", default=[]),
            server_flags=dict(type="bool", default=False),
            rollback_record=dict(type="path", default=rollback_record.DEFAULT_PATH),
            record=dict(type="bool", default=False),
            distributions=dict(type="list", elements="str", default=[]),
            versions=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    info = venv_info(module.params["venv"], module.params["python"], module.params["uv_venv"],
                     module.params["paths"], module.params["releases"], module.params["user"],
                     module.params["group"], module.params["contents"], module.params["server_flags"],
                     module.params["rollback_record"], module.params["record"],
                     module.params["distributions"], module.params["versions"])
    module.exit_json(changed=False, **info)


if __name__ == "__main__":
    main()

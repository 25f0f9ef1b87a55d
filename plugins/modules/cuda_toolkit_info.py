#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cuda_toolkit_info
short_description: Read a node's CUDA toolkit, its links, nvcc, the repository files and the signing key
version_added: 0.1.0
description:
  - Reports, in one call, what the C(blackwell.sglang.cuda13) role decides on - the installed
    version and hold of the packages whose names match O(packages), where the alternatives in
    O(alternatives) point, whether the toolkit tree exists, the type, mode, owner and content
    checksum of O(paths), and what C(nvcc --version) prints.
  - Optionally reads a repository signing key (from a file on the node, from text, or from a URL
    the node fetches) and reports the fingerprints of its primary keys, computed from the key
    packets (a minimal node has no gpg), with the key in ASCII armour.
  - Read-only; the key download is a GET, so the module answers the same in check mode.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  packages:
    description:
      - Regular expressions; the packages whose whole names match one are reported in
        RV(packages).
    type: list
    elements: str
    default: []
  alternatives:
    description:
      - Names of alternatives under C(/etc/alternatives) whose targets are reported in
        RV(alternatives).
    type: list
    elements: str
    default: []
  tree:
    description:
      - A directory (the toolkit's, such as C(/usr/local/cuda-13.0)) whose existence is reported
        in RV(tree_exists).
    type: path
  paths:
    description:
      - Paths whose type, mode, ownership and, for a regular file, content checksum are reported
        in RV(paths), so the caller can skip a C(file), C(copy) or C(template) task for a path
        that already matches. A symbolic link is reported as the link, with its target.
    type: list
    elements: path
    default: []
  nvcc:
    description:
      - An nvcc executable; what its C(--version) prints is reported in RV(nvcc).
    type: path
  key_path:
    description:
      - A signing key file on the node (armoured or binary).
    type: path
  key_content:
    description:
      - A signing key as text (ASCII armour).
    type: str
  key_url:
    description:
      - A URL the node fetches the signing key from. A failed fetch is reported in
        RV(key.download), not as a failure of the module, so the caller can say what to do.
    type: str
  key_timeout:
    description:
      - Seconds to wait for O(key_url) to answer.
    type: int
    default: 30
attributes:
  check_mode:
    support: full
    description: Reads only; behaves the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
notes:
  - Reads the package database with C(dpkg-query); for Debian and Ubuntu nodes.
  - A key file that cannot be read, or bytes that are no OpenPGP public key, fail the module.
  - O(key_path), O(key_content) and O(key_url) exclude each other.
"""

EXAMPLES = r"""
- name: Read the node's CUDA 13.0 toolkit and NVIDIA's signing key
  blackwell.sglang.cuda_toolkit_info:
    packages: [cuda-toolkit-13-0, 'cuda-toolkit-12-[0-9]+']
    alternatives: [cuda, cuda-13]
    tree: /usr/local/cuda-13.0
    paths: [/etc/apt/keyrings/cuda-archive-keyring.asc]
    nvcc: /usr/local/cuda/bin/nvcc
    key_url: https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/3bf863cc.pub
  register: cuda_state

- name: Say which toolkit is installed
  ansible.builtin.debug:
    msg: "{{ cuda_state.packages['cuda-toolkit-13-0'].version | default('none') }}"
"""

RETURN = r"""
packages:
  description: >-
    The packages whose names match O(packages), keyed by name: C(version), C(installed) (dpkg
    has it installed, not only remembered) and C(held) (its selection is hold).
  returned: always
  type: dict
  sample: {"cuda-toolkit-13-0": {"version": "13.0.2-1", "installed": true, "held": true}}
alternatives:
  description: Where each alternative in O(alternatives) points; empty when it has no link.
  returned: always
  type: dict
  sample: {"cuda": "/usr/local/cuda-13.0", "cuda-13": "/usr/local/cuda-13.0"}
tree_exists:
  description: Whether O(tree) is a directory; false when O(tree) is not set.
  returned: always
  type: bool
paths:
  description: >-
    One entry per path in O(paths), keyed by the path: C(exists), C(isdir), C(islink), C(mode)
    (four octal digits), C(owner) and C(group); C(link) for a symbolic link and C(checksum)
    (the SHA-1 of the content, as M(ansible.builtin.copy) and M(ansible.builtin.template)
    compare it) for a regular file. Only C(exists) when the path does not exist.
  returned: always
  type: dict
  sample: {"/etc/profile.d/cuda13.sh": {"exists": true, "isdir": false, "islink": false, "mode": "0644",
           "owner": "root", "group": "root", "checksum": "19110e7d1b07d2ab261a4e2a7289838463e36fed"}}
nvcc:
  description: O(nvcc) and what its C(--version) printed (standard output and error together).
  returned: when O(nvcc) is set
  type: dict
  contains:
    path:
      description: The executable asked about.
      type: str
    executable:
      description: Whether it is a file this user may run.
      type: bool
    output:
      description: What it printed; empty when it is not executable.
      type: str
      sample: "Cuda compilation tools, release 13.0, V13.0.88"
key:
  description: The signing key read from O(key_path), O(key_content) or O(key_url).
  returned: when one of them is set
  type: dict
  contains:
    source:
      description: Where the key came from (the path, the URL, or C(content)).
      type: str
    fingerprints:
      description: The fingerprints of the primary keys, upper-case hexadecimal; empty when the download failed.
      type: list
      elements: str
      sample: [EB693B3035CD5710E231E123A4B469963BF863CC]
    armored:
      description: The key in ASCII armour; empty when the download failed.
      type: str
    download:
      description: >-
        For O(key_url), the answer - C(status) (the HTTP status, -1 when none came) and C(error)
        (why nothing usable came, null otherwise).
      type: dict
      sample: {"status": 200, "error": null}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.module_utils.six.moves.http_client import HTTPException
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.urls import ConnectionError as FetchConnectionError, open_url
from ansible_collections.blackwell.sglang.plugins.module_utils import cuda_toolkit, file_state, openpgp


def _fetch(url, timeout):
    """(bytes or None, {status, error})."""
    try:
        response = open_url(url, method="GET", timeout=timeout)
        return response.read(), {"status": response.getcode(), "error": None}
    except HTTPError as exc:
        return None, {"status": exc.code, "error": to_native(exc)}
    # No usable answer: no connection, a refused certificate or proxy, an answer cut short.
    except (URLError, OSError, ValueError, HTTPException, FetchConnectionError) as exc:
        return None, {"status": -1, "error": to_native(getattr(exc, "reason", exc))}


def _key(module):
    params = module.params
    download = None
    if params["key_path"]:
        source = params["key_path"]
        try:
            with open(source, "rb") as handle:
                data = handle.read()
        except (IOError, OSError) as exc:
            module.fail_json(msg="cannot read the key file %s: %s" % (source, exc.strerror or exc))
    elif params["key_url"]:
        source = params["key_url"]
        data, download = _fetch(source, params["key_timeout"])
        if data is None or download["status"] != 200:
            return {"source": source, "fingerprints": [], "armored": "", "download": download}
    else:
        source = "content"
        data = to_bytes(params["key_content"])
    try:
        key = openpgp.read_key_file(data)
    except openpgp.KeyFileError as exc:
        module.fail_json(msg="%s is not an OpenPGP public key file: %s" % (source, exc))
    key = dict(key, source=source)
    if download is not None:
        key["download"] = download
    return key


def main():
    module = AnsibleModule(
        argument_spec=dict(
            packages=dict(type="list", elements="str", default=[]),
            alternatives=dict(type="list", elements="str", default=[]),
            tree=dict(type="path"),
            paths=dict(type="list", elements="path", default=[]),
            nvcc=dict(type="path"),
            key_path=dict(type="path"),
            key_content=dict(type="str", no_log=False),
            key_url=dict(type="str", no_log=False),
            key_timeout=dict(type="int", default=30),
        ),
        mutually_exclusive=[["key_path", "key_content", "key_url"]],
        supports_check_mode=True,
    )
    params = module.params
    result = {"packages": {}, "alternatives": cuda_toolkit.alternatives(params["alternatives"]),
              "tree_exists": bool(params["tree"]) and os.path.isdir(params["tree"]),
              "paths": dict((p, file_state.path_state(p)) for p in params["paths"])}
    if params["packages"]:
        dpkg_query = module.get_bin_path("dpkg-query", required=True)
        rc, out, err = module.run_command([dpkg_query, "-W", "-f", cuda_toolkit.DPKG_FORMAT],
                                          environ_update={"LC_ALL": "C"})
        if rc != 0:
            module.fail_json(msg="dpkg-query failed: %s" % (err or out).strip(), rc=rc)
        result["packages"] = cuda_toolkit.packages(out, params["packages"])
    if params["nvcc"]:
        nvcc = params["nvcc"]
        executable = os.path.isfile(nvcc) and os.access(nvcc, os.X_OK)
        output = ""
        if executable:
            dummy, out, err = module.run_command([nvcc, "--version"])
            output = out + err
        result["nvcc"] = {"path": nvcc, "executable": executable, "output": output}
    if params["key_path"] or params["key_content"] or params["key_url"]:
        result["key"] = _key(module)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()

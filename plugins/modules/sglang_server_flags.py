#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_server_flags
short_description: Read the command-line flags of an installed SGLang release without importing it
version_added: 0.1.0
description:
  - Parses the installed SGLang release's argument definitions (C(srt/server_args.py) and, where
    the release has them, the field namespaces under C(srt/arg_groups/fields/)) with Python's
    C(ast) module, so nothing of SGLang, torch or CUDA is imported.
  - Reports every flag of C(sglang.launch_server), which of them the release deprecates and in
    favour of what, how the release spells FlashInfer all-reduce fusion, whether its fusion
    raises on GPUs other than SM90/SM10X, and whether it ships the PCIe IPC all-reduce.
  - With O(check_flags), also reports which of the given flags the release does not have.
  - Read-only; never changes the node.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  venv:
    description:
      - Virtual environment SGLang is installed in; the package is looked up under
        C(lib/python3*/site-packages/sglang).
    type: path
  path:
    description:
      - Directory of the C(sglang) package itself, as an alternative to O(venv).
    type: path
  check_flags:
    description:
      - Flags (C(--name) or C(--name=value)) to look up; those the release lacks are returned in
        RV(missing).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Reads only; behaves the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
notes:
  - Reads the release from its source text; a release that builds flags at run time in a way
    this module does not know would show fewer flags, never more.
"""

EXAMPLES = r"""
- name: Read the flags of the SGLang release in the service venv
  blackwell.sglang.sglang_server_flags:
    venv: /opt/sglang/current
    check_flags:
      - --enable-torch-symm-mem
      - --speculative-algorithm
  register: sglang_service_release

- name: Refuse flags the release does not have
  ansible.builtin.assert:
    that: sglang_service_release.missing | length == 0
    fail_msg: "SGLang {{ sglang_service_release.version }} has no {{ sglang_service_release.missing | join(', ') }}"
"""

RETURN = r"""
package_dir:
  description: Directory of the C(sglang) package that was read.
  returned: success
  type: str
  sample: /opt/sglang/current/lib/python3.11/site-packages/sglang
version:
  description: Release number from the installed distribution's metadata.
  returned: success
  type: str
  sample: 0.5.23
flags:
  description: Every flag C(sglang.launch_server) accepts in this release, sorted.
  returned: success
  type: list
  elements: str
  sample: ["--api-key", "--enable-torch-symm-mem", "--model-path"]
deprecated:
  description: Deprecated flags, each mapped to its replacement when the release names one, else null.
  returned: success
  type: dict
  sample: {"--enable-flashinfer-allreduce-fusion": "--flashinfer-allreduce-fusion-backend=auto"}
fusion_arguments:
  description:
    - Arguments that enable FlashInfer all-reduce fusion in this release; empty when it has none.
  returned: success
  type: list
  elements: str
  sample: ["--flashinfer-allreduce-fusion-backend", "auto"]
fusion_sm_restricted:
  description:
    - True when the release's FlashInfer fusion raises C(FlashInfer allreduce fusion requires SM90
      or SM10X) on other GPUs, such as compute capability 12.x.
  returned: success
  type: bool
  sample: true
pcie_ipc_allreduce:
  description: True when the release reads C(SGLANG_ENABLE_PCIE_IPC_ALLREDUCE).
  returned: success
  type: bool
  sample: true
ready_endpoint:
  description: >-
    True when the release's HTTP server has a C(GET /ready) route (read from its source): 200
    once it takes new requests, 503 before and while it stops. The health gate asks it there,
    and C(/health) elsewhere.
  returned: success
  type: bool
  sample: true
missing:
  description: Flags of O(check_flags) the release does not have, in the order given.
  returned: success
  type: list
  elements: str
  sample: ["--enable-flashinfer-allreduce-fusion"]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_server_args import (
    ReleaseScanError,
    find_package_dir,
    flags_in,
    scan_release,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path"),
            path=dict(type="path"),
            check_flags=dict(type="list", elements="str", default=[]),
        ),
        mutually_exclusive=[("venv", "path")],
        required_one_of=[("venv", "path")],
        supports_check_mode=True,
    )
    try:
        package_dir = find_package_dir(venv=module.params["venv"], path=module.params["path"])
        release = scan_release(package_dir)
    except ReleaseScanError as exc:
        module.fail_json(msg="cannot read the installed SGLang release: %s" % exc)
    known = set(release["flags"])
    release["missing"] = [flag for flag in flags_in(module.params["check_flags"]) if flag not in known]
    module.exit_json(changed=False, **release)


if __name__ == "__main__":
    main()

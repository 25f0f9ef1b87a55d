#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_model_info
short_description: Report whether a model's files are complete on the node
version_added: 0.1.0
description:
  - Looks at a model directory, or at a Hugging Face repository's snapshot in a hub cache, and
    reports which of the expected files are missing or cut short.
  - The expected files are O(expected_files) when given (the repository's file list at a
    revision), else C(config.json), C(model.safetensors.index.json) and every shard its
    C(weight_map) names, else C(config.json) and C(model.safetensors).
  - Each safetensors file present is checked against its own header (its length must be the
    8-byte header length, the header and the tensors' bytes), so a copy or a download cut short
    counts as incomplete. No weights are loaded.
  - Read-only.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  path:
    description:
      - The model directory (or a link to it).
    type: path
  cache_dir:
    description:
      - A Hugging Face hub cache (the C(hub) directory, holding C(models--ORG--NAME)).
    type: path
  repo_id:
    description:
      - The repository in O(cache_dir), as C(ORG/NAME).
    type: str
  revision:
    description:
      - The revision of O(repo_id), a commit hash, or a branch or tag that the cache's
        C(refs/) resolves.
    type: str
    default: main
  expected_files:
    description:
      - The files the model must have, relative to its directory, instead of those the index names.
    type: list
    elements: str
    default: []
  check_headers:
    description:
      - Check each safetensors file's length against its header.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reads only; behaves the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
"""

EXAMPLES = r"""
- name: Read a model on shared storage
  blackwell.sglang.sglang_model_info:
    path: /mnt/models/Kimi-K2.5
  register: model

- name: Read a snapshot in the service user's hub cache
  blackwell.sglang.sglang_model_info:
    cache_dir: /var/lib/sglang/.cache/huggingface/hub
    repo_id: moonshotai/Kimi-K2.5
    revision: main
"""

RETURN = r"""
path:
  description: The directory looked at (the snapshot, in a hub cache); null when none was found.
  returned: always
  type: str
  sample: /mnt/models/Kimi-K2.5
exists:
  description: Whether that directory exists.
  returned: always
  type: bool
  sample: true
complete:
  description: Whether every expected file is there and whole.
  returned: always
  type: bool
  sample: false
expected:
  description: The expected files, relative to the directory; empty when they cannot be known.
  returned: always
  type: list
  elements: str
  sample: [config.json, model.safetensors.index.json, model-00001-of-00002.safetensors]
missing:
  description: Expected files that are not there.
  returned: always
  type: list
  elements: str
  sample: [model-00002-of-00002.safetensors]
damaged:
  description: Safetensors files whose length disagrees with their header, with the reason.
  returned: always
  type: list
  elements: dict
  sample: [{file: model-00001-of-00002.safetensors, reason: "1000 bytes, the header says 4096"}]
bytes:
  description: Total size of the expected files present.
  returned: always
  type: int
  sample: 1099511627776
reason:
  description: Why the model is not complete, with the missing files counted; null when complete.
  returned: always
  type: str
  sample: "/mnt/models/Kimi-K2.5: 1 of 3 expected files missing (model-00002-of-00002.safetensors)"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import model_files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path"),
            cache_dir=dict(type="path"),
            repo_id=dict(type="str"),
            revision=dict(type="str", default="main"),
            expected_files=dict(type="list", elements="str", default=[]),
            check_headers=dict(type="bool", default=True),
        ),
        mutually_exclusive=[("path", "repo_id"), ("path", "cache_dir")],
        required_one_of=[("path", "repo_id")],
        required_together=[("repo_id", "cache_dir")],
        supports_check_mode=True,
    )
    params = module.params
    root = params["path"]
    if params["repo_id"]:
        root, why = model_files.hub_snapshot(params["cache_dir"], params["repo_id"], params["revision"])
        if root is None:
            module.exit_json(changed=False, path=None, exists=False, complete=False, expected=[],
                             missing=[], damaged=[], bytes=0, reason=why)
    state = model_files.inspect(root, params["expected_files"], params["check_headers"])
    module.exit_json(changed=False, **state)


if __name__ == "__main__":
    main()

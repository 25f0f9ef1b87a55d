#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_model_download
short_description: Download a model from the Hugging Face hub into a hub cache, as the service account
version_added: 0.1.0
description:
  - Runs huggingface_hub's C(snapshot_download) with the Python of a venv that has it (the SGLang
    release's), in a child process that drops from root to O(user) before it downloads, so the
    cache's files belong to the account that serves the model. huggingface_hub resumes partial
    files.
  - The token is O(hf_token), else the C(HF_TOKEN) line of O(env_file) (read as root). It reaches
    the child on its standard input and the hub in a request header only, never a command line,
    an environment variable or a log line; O(hf_token) is a no_log option.
  - Returns the snapshot's path and the repository's file list at the revision, narrowed by
    O(allow_patterns), for the caller to verify.
  - Always reports changed when it runs; the caller runs it only for a model its read found
    incomplete. Not run in check mode.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  python:
    description:
      - The Python interpreter of a venv that has huggingface_hub.
    type: path
    required: true
  user:
    description:
      - The account the download runs as, and that owns the downloaded files.
    type: str
    required: true
  repo_id:
    description:
      - The repository, as C(ORG/NAME).
    type: str
    required: true
  revision:
    description:
      - A commit hash, branch or tag.
    type: str
    default: main
  cache_dir:
    description:
      - The hub cache the model is downloaded into.
    type: path
    required: true
  allow_patterns:
    description:
      - Download only the files matching these shell patterns; empty downloads every file.
    type: list
    elements: str
    default: []
  hf_token:
    description:
      - The Hugging Face token. Empty reads the C(HF_TOKEN) line of O(env_file) instead.
    type: str
    default: ""
  env_file:
    description:
      - A root-owned systemd environment file holding C(HF_TOKEN="...") (the service's secrets file).
    type: path
  hf_endpoint:
    description:
      - A hub mirror (C(HF_ENDPOINT)); empty means huggingface.co. It reaches the download on
        its standard input, with the token.
    type: str
    default: ""
  sandbox:
    description:
      - Run the download as O(user) inside a transient systemd service with these properties
        (C(systemd-run)), so the venv's Python never starts as root; its packages (a new
        release's, any C(.pth) file among them) run only as the account, in the sandbox. The
        properties must let it write O(cache_dir).
      - Without it, the download starts as the module's user and drops to O(user) itself.
    type: dict
    suboptions:
      user:
        description: The account the download runs as (O(user)).
        type: str
        required: true
      group:
        description: Its group.
        type: str
        required: true
      properties:
        description: Unit properties of the sandbox, C(Key=Value) each.
        type: list
        elements: str
        default: []
attributes:
  check_mode:
    support: none
    description: Downloads; the caller reports a missing model in check mode instead.
  diff_mode:
    support: none
    description: Downloads are not shown as a diff.
"""

EXAMPLES = r"""
- name: Download the model into the service account's hub cache
  blackwell.sglang.sglang_model_download:
    python: /opt/sglang/current/bin/python
    user: sglang
    repo_id: moonshotai/Kimi-K2.5
    revision: main
    cache_dir: /var/lib/sglang/.cache/huggingface/hub
    hf_token: "{{ vault_hf_token }}"
  register: download
"""

RETURN = r"""
path:
  description: The snapshot directory the revision resolved to.
  returned: success
  type: str
files:
  description: The repository's files at the revision, narrowed by O(allow_patterns).
  returned: success
  type: list
  elements: str
"""

import json
import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import sandbox_run

# The child: runs with the venv's Python, reads its request (token included) from standard input
# as root, drops to the account, downloads, prints one JSON line.
CHILD = r'''
import json, os, pwd, sys
from fnmatch import fnmatch

request = json.loads(sys.stdin.read())
account = pwd.getpwnam(request["user"])
# Run by the module as the account already, in its sandbox; dropped here only where run otherwise.
if os.getuid() == 0 and account.pw_uid != 0:
    os.setgroups([])
    os.setgid(account.pw_gid)
    os.setuid(account.pw_uid)
os.environ["HOME"] = account.pw_dir
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
if request.get("endpoint"):
    os.environ["HF_ENDPOINT"] = request["endpoint"]
from huggingface_hub import HfApi, snapshot_download

token = request["token"] or False
allow = request["allow_patterns"] or None
path = snapshot_download(repo_id=request["repo_id"], revision=request["revision"],
                         cache_dir=request["cache_dir"], allow_patterns=allow, token=token)
info = HfApi(token=token).model_info(request["repo_id"], revision=request["revision"])
files = sorted(sibling.rfilename for sibling in info.siblings)
if allow:
    files = [name for name in files if any(fnmatch(name, pattern) for pattern in allow)]
print(json.dumps({"path": path, "files": files}))
'''


def unquote(value):
    """A value of a systemd environment file as systemd reads it: inside double quotes a
    backslash escapes a double quote, a backslash, a dollar sign or a backquote."""
    value = value.strip()
    if len(value) < 2 or value[0] != '"' or value[-1] != '"':
        return value
    out, chars = [], iter(value[1:-1])
    for char in chars:
        if char == "\\":
            following = next(chars, "")
            out.append(following if following in '"\\$`' else char + following)
        else:
            out.append(char)
    return "".join(out)


def token_from_env_file(path):
    """The HF_TOKEN value of an environment file; None if there is none."""
    if not path:
        return None
    try:
        with open(path) as handle:
            lines = handle.read().splitlines()
    except (IOError, OSError):
        return None
    for line in lines:
        if line.startswith("HF_TOKEN="):
            return unquote(line.split("=", 1)[1]) or None
    return None


def child_environment():
    """The child's environment: no token, no telemetry (the mirror comes with the request)."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HF_HUB_DISABLE_TELEMETRY": "1", "LANG": "C.UTF-8"}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            user=dict(type="str", required=True),
            repo_id=dict(type="str", required=True),
            revision=dict(type="str", default="main"),
            cache_dir=dict(type="path", required=True),
            allow_patterns=dict(type="list", elements="str", default=[]),
            hf_token=dict(type="str", default="", no_log=True),
            env_file=dict(type="path"),
            hf_endpoint=dict(type="str", default=""),
            sandbox=sandbox_run.OPTION,
        ),
        supports_check_mode=False,
    )
    params = module.params
    token = params["hf_token"] or token_from_env_file(params["env_file"]) or ""
    # Sandboxed, the script goes where the account can read it (not root's temporary directory).
    work = tempfile.mkdtemp(prefix="sglang-model-download-", dir="/run" if params["sandbox"] else module.tmpdir)
    child = os.path.join(work, "hf_download.py")
    with open(child, "w") as handle:
        handle.write(CHILD)
    request = {key: params[key] for key in ("user", "repo_id", "revision", "cache_dir", "allow_patterns")}
    request["token"] = token
    # On standard input with the token: nothing of the request is on a command line.
    request["endpoint"] = params["hf_endpoint"]
    command = [params["python"], "-I", child]
    if params["sandbox"]:
        # The release's Python (its site-packages, any .pth there) starts as the account, inside
        # the sandbox, never as root.
        os.chmod(work, 0o755)
        os.chmod(child, 0o644)
        command = sandbox_run.argv(sandbox_run.unit_name("model-download"), params["sandbox"],
                                   {"LANG": "C.UTF-8"}, command)
    try:
        rc, out, err = module.run_command(command, data=json.dumps(request), binary_data=True,
                                          environ_update=child_environment())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if token:
        # What huggingface_hub prints never carries the token; this makes sure of it.
        out, err = out.replace(token, "********"), err.replace(token, "********")
    if rc != 0:
        lines = [line for line in err.strip().splitlines() if line.strip()]
        module.fail_json(msg="the download of %s at %s failed: %s" % (
            params["repo_id"], params["revision"], lines[-1] if lines else "exit status %d" % rc),
            rc=rc, stderr=err)
    try:
        report = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        module.fail_json(msg="the download printed no report", stdout=out, stderr=err)
    module.exit_json(changed=True, path=report["path"], files=report["files"])


if __name__ == "__main__":
    main()

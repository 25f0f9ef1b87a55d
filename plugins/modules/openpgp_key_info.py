#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: openpgp_key_info
short_description: Read the fingerprints of an OpenPGP public key file without gpg
version_added: 0.1.0
description:
  - Reads an OpenPGP public key file, ASCII-armoured or binary, and reports the fingerprint of
    every primary key in it (version 4 and version 6 keys), computed from the key packets the
    way RFC 4880 and RFC 9580 define it.
  - Needs no gpg on the node; minimal Debian and Ubuntu images ship only gpgv.
  - Also returns the key in ASCII armour, unchanged when it was armoured, so that a caller can
    install exactly the key it checked.
  - Read-only.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  path:
    description:
      - Key file on the managed node.
    type: path
  content:
    description:
      - ASCII-armoured key given as text.
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
- name: Read the repository key's fingerprints
  blackwell.sglang.openpgp_key_info:
    path: /srv/mirror/3bf863cc.pub
  register: repo_key

- name: Refuse a key that is not the expected one
  ansible.builtin.assert:
    that: repo_key.fingerprints == ['EB693B3035CD5710E231E123A4B469963BF863CC']
"""

RETURN = r"""
fingerprints:
  description: Fingerprints of the primary keys in the file, upper-case hexadecimal, in file order.
  returned: success
  type: list
  elements: str
  sample: [EB693B3035CD5710E231E123A4B469963BF863CC]
armored:
  description: The key file in ASCII armour; the file's own text when it was armoured.
  returned: success
  type: str
  sample: "-----BEGIN PGP PUBLIC KEY BLOCK-----\n..."
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes
from ansible_collections.blackwell.sglang.plugins.module_utils import openpgp


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path"),
            content=dict(type="str"),
        ),
        mutually_exclusive=[("path", "content")],
        required_one_of=[("path", "content")],
        supports_check_mode=True,
    )
    path = module.params["path"]
    if path:
        source = path
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except (IOError, OSError) as exc:
            module.fail_json(msg="cannot read the key file %s: %s" % (path, exc.strerror or exc))
    else:
        source = "the given key content"
        data = to_bytes(module.params["content"])
    try:
        result = openpgp.read_key_file(data)
    except openpgp.KeyFileError as exc:
        module.fail_json(msg="%s is not an OpenPGP public key file: %s" % (source, exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()

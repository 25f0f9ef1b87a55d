# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: secret_line
short_description: A secret as the roles write it, without the one trailing line break
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - The collection's rule for every secret (API key, Hugging Face token) read from a vault
    block scalar or a file, which keep a line break at their end; one trailing line break
    (C(\\n) or C(\\r\\n)) is not part of the secret and is removed.
  - Anything else is left as it is, a second trailing line break included; the preflight refuses
    a secret that still holds a line break (lookup P(blackwell.sglang.setting_problems#lookup)).
options:
  _input:
    description: The secret.
    type: str
    required: true
seealso:
  - plugin: blackwell.sglang.setting_problems
    plugin_type: lookup
"""

EXAMPLES = r"""
- name: The key as the secrets file holds it
  ansible.builtin.set_fact:
    key_written: "{{ sglang_service_api_key | blackwell.sglang.secret_line }}"
"""

RETURN = r"""
_value:
  description: The secret without one trailing line break.
  type: str
"""


def secret_line(value):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.settings import secret
    return secret(value)


class FilterModule(object):
    def filters(self):
        return {"secret_line": secret_line}

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: mask_urls
short_description: A text with every URL that may carry credentials cut to its scheme and host
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - Replaces each URL in the text that may hold a credential (filter
    P(blackwell.sglang.url_credentials#filter) says which) by C(scheme://host[:port]/***), with
    C(***@) before the host where it had a user or password; other URLs and text stay as they are.
options:
  _input:
    description: The text, an installer's error line for example.
    type: str
    required: true
seealso:
  - plugin: blackwell.sglang.url_credentials
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Report an installer's error without the index's token
  ansible.builtin.fail:
    msg: "{{ installer_error | blackwell.sglang.mask_urls }}"
  vars:
    installer_error: "ERROR: 403 for https://dl.example/t0ken/simple/torch/"
"""

RETURN = r"""
_value:
  description: The text, masked.
  type: str
"""


def mask_urls(text):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.urls import mask
    return mask(text)


class FilterModule(object):
    def filters(self):
        return {"mask_urls": mask_urls}

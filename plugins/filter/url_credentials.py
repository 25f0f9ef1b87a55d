# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: url_credentials
short_description: Whether any URL in the given texts may carry credentials
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - Finds the URLs in each text (a source setting, a requirement line, a lock) and says whether
    any of them may hold a credential in any part (user and password, a path segment, a query).
  - An http(s) URL of a host other than the public indexes (PyPI, PyTorch, FlashInfer, NVIDIA,
    the Hugging Face hub) counts as carrying credentials unless it has no userinfo, no path
    beyond C(/), no query and no fragment; a public host's URL only with userinfo, a query or a
    fragment; C(file:) URLs and paths never.
  - The roles write files holding such URLs with mode 0600 and hide the tasks that show them
    (their diffs, their output); filter P(blackwell.sglang.mask_urls#filter) masks them in
    messages.
options:
  _input:
    description: The texts, each a string or a list of strings.
    type: list
    elements: raw
    required: true
seealso:
  - plugin: blackwell.sglang.mask_urls
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Hide the install's output when a source may carry credentials
  ansible.builtin.debug:
    msg: "{{ [sglang_install_index_url, sglang_install_extra_index_urls] | blackwell.sglang.url_credentials }}"
"""

RETURN = r"""
_value:
  description: True when any URL may carry credentials.
  type: bool
"""


def url_credentials(texts):
    # Imported here, not above: see tests/unit/test_filter_imports.py.
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.urls import any_credentials
    return any_credentials(texts)


class FilterModule(object):
    def filters(self):
        return {"url_credentials": url_credentials}
